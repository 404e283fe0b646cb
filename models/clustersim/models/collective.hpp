// Collective operations over a group of GPUs on the topology, in NCCL's terms.
//
// Sizes follow nccl-tests (NVIDIA/nccl-tests doc/PERFORMANCE.md): `bytes` is the per-rank buffer of
// an all-reduce, broadcast or reduce; the total output of an all-gather; the total input of a
// reduce-scatter; each rank's whole send buffer of an all-to-all (bytes / n to each peer); the
// message of a send/recv. algbw = bytes / time; busbw = algbw x f(n) with f = 2(n-1)/n for
// all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, and 1 otherwise.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clustersim/common/units.hpp"
#include "clustersim/hardware/hardware_profile.hpp"
#include "clustersim/topology/graph.hpp"

namespace cs::models {

enum class CollectiveOp { all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv };
enum class Algorithm { ring, tree, hierarchical, nvls, collnet, pairwise, direct };
enum class Protocol { ll, ll128, simple };

std::string_view to_string(CollectiveOp op);
std::string_view to_string(Algorithm a);
std::string_view to_string(Protocol p);
std::optional<CollectiveOp> parse_collective_op(std::string_view s);
std::optional<Algorithm> parse_algorithm(std::string_view s);
std::optional<Protocol> parse_protocol(std::string_view s);

// The registry of collective algorithms: name, what it is, where it applies (for --list-models).
struct AlgorithmInfo {
  Algorithm algorithm;
  std::string_view description;
  std::string_view applies;
};
const std::vector<AlgorithmInfo>& algorithm_registry();

// nccl-tests' bus-bandwidth factor f(n).
double bus_factor(CollectiveOp op, int ranks);

// The calibrated bus bandwidth of a link class ("nvlink", "pcie", "network"): the fit of all_gather if
// measured, else reduce_scatter, all_reduce, then any other op (ring-like algorithms, whose bus bandwidth
// is the link's; NVLS and SHARP all-reduces exceed it, so all_reduce comes after the gathers), from the
// largest group measured: the bus bandwidth its largest size measured (the bandwidth-bound end of the
// sweep), as the fit's line and efficiency table give it back. Nothing when the profile has no fit for
// that class.
std::optional<BytesPerSec> calibrated_busbw(const hardware::HardwareProfile& hw, const std::string& link);
// The fit calibrated_busbw reads (nullptr when there is none), for what its op and group size mean.
const hardware::CalibratedCollective* calibrated_collective(const hardware::HardwareProfile& hw, const std::string& link);

struct Collective {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::vector<topology::Vertex> ranks;  // GPUs in rank order; send_recv: {source, destination}
  Bytes bytes;
  int root = 0;                         // broadcast and reduce
  std::optional<Algorithm> algorithm;   // forced; otherwise chosen by NCCL's cost model
  std::optional<Protocol> protocol;     // forced; otherwise chosen with the algorithm
  int channels = 0;                     // rings or tree pairs to build; 0: one per NIC rail used
  // all-to-allv: bytes from rank i to rank j at [i * n + j] (the diagonal is ignored); empty for an
  // even all-to-all. `bytes` still names the per-rank size that algbw is quoted against.
  std::vector<double> pair_bytes;
};

}  // namespace cs::models
