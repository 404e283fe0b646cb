#include "clustersim/models/collective.hpp"

#include <array>

namespace cs::models {

namespace {
constexpr std::array kOps{CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::broadcast,
                          CollectiveOp::reduce,     CollectiveOp::all_to_all, CollectiveOp::send_recv};
constexpr std::array kAlgorithms{Algorithm::ring, Algorithm::tree,     Algorithm::hierarchical, Algorithm::nvls,
                                 Algorithm::collnet, Algorithm::pairwise, Algorithm::direct};
constexpr std::array kProtocols{Protocol::ll, Protocol::ll128, Protocol::simple};
}  // namespace

std::string_view to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::reduce: return "reduce";
    case CollectiveOp::all_to_all: return "all_to_all";
    case CollectiveOp::send_recv: return "send_recv";
  }
  return "?";
}

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::tree: return "tree";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::nvls: return "nvls";
    case Algorithm::collnet: return "collnet";
    case Algorithm::pairwise: return "pairwise";
    case Algorithm::direct: return "direct";
  }
  return "?";
}

std::string_view to_string(Protocol p) {
  switch (p) {
    case Protocol::ll: return "LL";
    case Protocol::ll128: return "LL128";
    case Protocol::simple: return "Simple";
  }
  return "?";
}

std::optional<CollectiveOp> parse_collective_op(std::string_view s) {
  for (auto op : kOps) {
    if (to_string(op) == s) return op;
  }
  return std::nullopt;
}

std::optional<Algorithm> parse_algorithm(std::string_view s) {
  for (auto a : kAlgorithms) {
    if (to_string(a) == s) return a;
  }
  return std::nullopt;
}

std::optional<Protocol> parse_protocol(std::string_view s) {
  for (auto p : kProtocols) {
    if (to_string(p) == s) return p;
  }
  if (s == "ll") return Protocol::ll;
  if (s == "ll128") return Protocol::ll128;
  if (s == "simple") return Protocol::simple;
  return std::nullopt;
}

const std::vector<AlgorithmInfo>& algorithm_registry() {
  static const std::vector<AlgorithmInfo> registry{
      {Algorithm::ring, "rail-aligned rings, one per NIC rail used (NCCL Ring)", "all_reduce, all_gather, reduce_scatter, broadcast, reduce"},
      {Algorithm::tree, "double binary tree over nodes, chains inside nodes (NCCL Tree)", "all_reduce on 2+ nodes"},
      {Algorithm::nvls, "NVLink SHARP: the NVSwitch reduces and multicasts (NCCL NVLS)", "all_reduce, all_gather and reduce_scatter inside one NVSwitch node, Hopper+"},
      {Algorithm::collnet, "SHARP in the fabric's switches (NCCL CollNetDirect/Chain)", "all_reduce on fabrics with in_network_reduction"},
      {Algorithm::hierarchical, "intra-node reduce-scatter, per-rail all-reduce, intra-node all-gather", "all_reduce on 2+ equal nodes; only when asked"},
      {Algorithm::pairwise, "every pair at once, PXN relaying across rails", "all_to_all (and all-to-allv)"},
      {Algorithm::direct, "one routed message", "send_recv"},
  };
  return registry;
}

const hardware::CalibratedCollective* calibrated_collective(const hardware::HardwareProfile& hw, const std::string& link) {
  const auto rank_of = [](const std::string& op) {
    if (op == "all_gather") return 0;
    if (op == "reduce_scatter") return 1;
    if (op == "all_reduce") return 2;
    return 3;
  };
  const hardware::CalibratedCollective* best = nullptr;
  for (const auto& c : hw.collectives) {
    // In-network reductions (NVLink SHARP, CollNet) run faster than the links: not a link's figure.
    if (c.link != link || c.algorithm == "nvls" || c.algorithm == "collnet") continue;
    if (!best || rank_of(c.op) < rank_of(best->op) || (rank_of(c.op) == rank_of(best->op) && c.ranks > best->ranks)) best = &c;
  }
  return best;
}

std::optional<BytesPerSec> calibrated_busbw(const hardware::HardwareProfile& hw, const std::string& link) {
  const hardware::CalibratedCollective* best = calibrated_collective(hw, link);
  if (!best) return std::nullopt;
  // The line's slope weighs every size's relative error alike, so a sweep from 8 B bends it towards
  // the latency-bound sizes; what the link carries is what the largest size measured: its bus bytes
  // over its measured time, the line's time (latency + bus bytes / busbw) over the efficiency the
  // table keeps there (its last row; calibrate keeps the largest size's). A 2 x 8 H100 sweep of 8 B
  // to 8 GiB fits 273.5 GB/s, and its 8 GiB row measured 338.8. (Until 2026-12-06 this was busbw x
  // the efficiency, which counted the fitted latency as bandwidth: an A100 send/recv sweep with a
  // 508 us latency ran 11% faster than its 1 GiB row measured.)
  if (best->efficiency.empty()) return best->busbw;
  const auto [bytes, efficiency] = best->efficiency.back();
  const double x = bytes * bus_factor(parse_collective_op(best->op).value_or(CollectiveOp::send_recv), best->ranks);
  return BytesPerSec(efficiency * x / (best->latency.value() + x / best->busbw.value()));
}

double bus_factor(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::all_reduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

}  // namespace cs::models
