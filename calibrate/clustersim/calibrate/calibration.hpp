// One calibration: measurements fitted into a hardware profile.
//
// Starting from a base profile (a shipped datasheet profile for a GPU, or the CPU's own description
// for --device cpu), the fit replaces what the measurements cover and keeps the rest:
//   - GEMM samples -> the GEMM model's parameters and residual tables (gemm_fit.hpp);
//   - device-to-device (or host) copies -> memory_efficiency = 2 x copy rate / memory bandwidth
//     (a copy reads and writes each byte); for a CPU, whose profile has no datasheet bandwidth, the
//     measured traffic rate becomes the bandwidth itself;
//   - pinned host transfers -> host_transfers;
//   - collective samples -> one fitted collective per (op, link, ranks, nodes, algorithm) (link_fit.hpp),
//     replacing the base's fit of the same group; fits whose largest size is latency-bound are left
//     out (with a note). The base's other fits, and residual tables of dtypes not measured, stay;
//   - fused attention kernels -> the attention block (attention_fit.hpp).
// The result carries the fit quality and the provenance of the raw data, which the profile file
// records in its `calibration:` block.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clustersim/calibrate/attention_fit.hpp"
#include "clustersim/calibrate/gemm_fit.hpp"
#include "clustersim/calibrate/link_fit.hpp"
#include "clustersim/calibrate/measurements.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::calibrate {

// A measured run's shape as the fit reads it, nodes x ranks per node: "2 x 8" for 16 ranks on 2 nodes.
std::string nodes_by_ranks(int nodes, int ranks);

struct CalibrationResult {
  hardware::HardwareProfile base;
  hardware::HardwareProfile profile;  // the fitted profile
  std::optional<GemmFit> gemm;
  std::vector<CopyFit> copies;
  std::vector<LinkFit> links;
  std::optional<AttentionFit> attention;
  std::vector<std::string> notes;
};

struct CalibrationOptions {
  GemmFitOptions gemm;
  AttentionFitOptions attention;
  std::vector<std::string> sources;  // where the measurements came from (files, probe), for provenance
};

// Throws InputError when the measurements are empty or do not fit the base profile.
CalibrationResult calibrate(const hardware::HardwareProfile& base, const Measurements& m, const CalibrationOptions& options = {});

// The fitted profile as a YAML file (root `hardware:`) that load_hardware_profile reads back.
std::string profile_yaml(const CalibrationResult& r);
// A readable report: fitted parameters beside the base's, fit quality, notes.
std::string summary_text(const CalibrationResult& r);
// Fitted versus another profile's parameters, side by side (calibrate --compare).
std::string compare_text(const hardware::HardwareProfile& fitted, const hardware::HardwareProfile& shipped);

}  // namespace cs::calibrate
