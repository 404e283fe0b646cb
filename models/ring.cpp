// Ring collectives, built the way NCCL's search builds rail-aligned rings: ring r enters node k at
// member s = (f(r) - k) mod l, visits the members, and leaves from member s - 1, which is where it
// enters node k + 1; so every hop between nodes joins two GPUs of the same local index, on one rail
// through one NIC each, without relaying. Only the hop that closes the ring may cross rails when the
// node count is not a multiple of l. The orders come from ring_orders (ring_orders.cpp: where each
// ring starts, and its path through a switchless NVLink mesh). Every ring edge carries its ring's
// share of the bytes that a pipelined ring moves over one hop in total:
//   all-reduce 2(n-1)/n S, all-gather and reduce-scatter (n-1)/n S, broadcast and reduce S
// (a chain from or to the root, without the closing edge).
#include <fmt/format.h>

#include <algorithm>

#include "collective_builders.hpp"

namespace cs::models::detail {

using topology::Vertex;

std::vector<CollectivePhase> build_ring(const CollectiveModel& m, const Collective& c,
                                        const std::vector<std::vector<Vertex>>& orders, sim::Time latency, ProtocolCaps caps) {
  const int rings = static_cast<int>(orders.size());
  const int n = static_cast<int>(c.ranks.size());
  const double s = c.bytes.value();
  double per_edge = 0;
  bool chain = false;
  switch (c.op) {
    case CollectiveOp::all_reduce: per_edge = 2.0 * (n - 1) / n * s; break;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: per_edge = static_cast<double>(n - 1) / n * s; break;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
      per_edge = s;
      chain = true;
      break;
    default: break;
  }
  FlowBuilder flows(m, latency, caps.fraction, caps.absolute);
  for (int r = 0; r < rings; ++r) {
    std::vector<Vertex> order = orders[static_cast<std::size_t>(r)];
    if (chain) {
      // Start at the root: rotate the order so that it comes first.
      const auto root = c.ranks[static_cast<std::size_t>(c.root)];
      std::rotate(order.begin(), std::find(order.begin(), order.end(), root), order.end());
    }
    const int edges = chain ? n - 1 : n;
    for (int i = 0; i < edges; ++i) {
      auto a = order[static_cast<std::size_t>(i)], b = order[static_cast<std::size_t>((i + 1) % n)];
      if (c.op == CollectiveOp::reduce) std::swap(a, b);  // data flows toward the root
      flows.add(a, b, per_edge / rings, static_cast<std::uint64_t>(r) * 1000003u + static_cast<std::uint64_t>(i));
    }
  }
  return {CollectivePhase{fmt::format("{} ring x{}", to_string(c.op), rings), flows.take()}};
}

}  // namespace cs::models::detail
