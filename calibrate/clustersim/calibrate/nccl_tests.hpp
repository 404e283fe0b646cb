// nccl-tests output (NVIDIA/nccl-tests: all_reduce_perf, all_gather_perf, ...) read as collective
// measurements, so a user calibrates a real cluster's fabric from runs they already have.
//
// Both forms are read: the text table the tests print, and the JSON document that `-J FILE` writes.
// The collective comes from the output where it names it (or from the file name, e.g.
// all_reduce_perf.txt), the rank count from the "Using devices" list (or the JSON), and the node
// count from the distinct host names; the link class is `network` across nodes and `nvlink` inside
// one unless the caller says otherwise. Out-of-place times are taken (in-place when that is all a
// row has); rows with a non-zero #wrong are refused, as a miscompare makes the timing meaningless.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "clustersim/calibrate/measurements.hpp"

namespace cs::calibrate {

struct NcclTestsOptions {
  std::optional<models::CollectiveOp> op;  // for output that does not name it (one that names another is refused)
  std::optional<LinkClass> link;           // overrides the nvlink/network default
  // For output that lists no devices (a table pasted without its "# Using devices" block); where the
  // output does list them, these must agree with it. nodes defaults to 1 when no host is named.
  std::optional<int> ranks;
  std::optional<int> nodes;
};

// Throws InputError naming the file (and line, for text) when the output cannot be read: no data
// rows, an unknown collective, a malformed row, a row with wrong results.
Measurements parse_nccl_tests(const std::string& text, const std::filesystem::path& file, const NcclTestsOptions& options = {});
Measurements read_nccl_tests(const std::filesystem::path& file, const NcclTestsOptions& options = {});

}  // namespace cs::calibrate
