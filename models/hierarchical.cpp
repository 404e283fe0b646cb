// Hierarchical all-reduce over l GPUs per node and m nodes (the two-level scheme of NCCL's
// CollNet chain and of Horovod's hierarchical all-reduce): a reduce-scatter inside each node, an
// all-reduce of S / l across nodes among the GPUs of each local rank (one per rail, in parallel),
// and an all-gather inside each node. Each step is a ring with NCCL's latency for its size (inside
// a switchless NVLink mesh, the rings that spread over its links: ring_orders.cpp).
#include "collective_builders.hpp"

namespace cs::models::detail {

std::vector<CollectivePhase> build_hierarchical(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time intra_latency,
                                                double intra_cap, sim::Time inter_latency, double inter_cap) {
  const int l = g.ppn;
  const int nodes = static_cast<int>(g.nodes.size());
  const double s = c.bytes.value();
  // Inside each node: one ring, or on a switchless NVLink mesh the rings that spread over its
  // links, sharing the step's cap. The reduce-scatter and the all-gather move the same bytes.
  std::vector<sim::FlowSpec> intra;
  std::uint64_t id = 0;
  for (const auto& members : g.nodes) {
    const std::size_t k = members.size();
    if (k < 2) continue;
    const auto orders = ring_orders(m, make_group(m.topology(), members), 1, true);
    const double rings = static_cast<double>(orders.size());
    FlowBuilder flows(m, intra_latency, 1.0, intra_cap / rings);
    for (const auto& order : orders) {
      for (std::size_t i = 0; i < k; ++i) flows.add(order[i], order[(i + 1) % k], static_cast<double>(k - 1) / k * s / rings, id++);
    }
    auto f = flows.take();
    intra.insert(intra.end(), std::make_move_iterator(f.begin()), std::make_move_iterator(f.end()));
  }
  // Across nodes: a ring per local rank.
  FlowBuilder across(m, inter_latency, 1.0, inter_cap);
  id = 0;
  for (int j = 0; j < l && nodes > 1; ++j) {
    for (int k = 0; k < nodes; ++k) {
      const auto a = g.nodes[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)];
      const auto b = g.nodes[static_cast<std::size_t>((k + 1) % nodes)][static_cast<std::size_t>(j)];
      across.add(a, b, 2.0 * (nodes - 1) / nodes * s / l, id++);
    }
  }
  std::vector<CollectivePhase> phases;
  phases.push_back(CollectivePhase{"all_reduce hierarchical: reduce_scatter", intra});
  phases.push_back(CollectivePhase{"all_reduce hierarchical: all_reduce", across.take()});
  phases.push_back(CollectivePhase{"all_reduce hierarchical: all_gather", std::move(intra)});
  return phases;
}

}  // namespace cs::models::detail
