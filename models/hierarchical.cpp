// Hierarchical all-reduce over l GPUs per node and m nodes (the two-level scheme of NCCL's
// CollNet chain and of Horovod's hierarchical all-reduce): a reduce-scatter inside each node, an
// all-reduce of S / l across nodes among the GPUs of each local rank (one per rail, in parallel),
// and an all-gather inside each node. Each step is a ring with NCCL's latency for its size (inside
// a switchless NVLink mesh, the rings that spread over its links: ring_orders.cpp).
#include <fmt/format.h>

#include "collective_builders.hpp"

namespace cs::models::detail {

std::vector<CollectivePhase> build_hierarchical(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time intra_latency,
                                                double intra_cap, sim::Time inter_latency, double inter_cap) {
  const int l = g.ppn;
  const int nodes = static_cast<int>(g.nodes.size());
  const double s = c.bytes.value();
  std::vector<CollectivePhase> phases;
  for (const char* step : {"reduce_scatter", "all_reduce", "all_gather"}) {
    const bool across = std::string_view(step) == "all_reduce";
    std::uint64_t id = 0;
    if (!across) {
      // One ring per node, or on a switchless NVLink mesh the rings that spread over its links,
      // sharing the step's cap.
      std::vector<sim::FlowSpec> all;
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
        all.insert(all.end(), std::make_move_iterator(f.begin()), std::make_move_iterator(f.end()));
      }
      phases.push_back(CollectivePhase{fmt::format("all_reduce hierarchical: {}", step), std::move(all)});
      continue;
    }
    FlowBuilder flows(m, inter_latency, 1.0, inter_cap);
    for (int j = 0; j < l && nodes > 1; ++j) {
      for (int k = 0; k < nodes; ++k) {
        const auto a = g.nodes[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)];
        const auto b = g.nodes[static_cast<std::size_t>((k + 1) % nodes)][static_cast<std::size_t>(j)];
        flows.add(a, b, 2.0 * (nodes - 1) / nodes * s / l, id++);
      }
    }
    phases.push_back(CollectivePhase{fmt::format("all_reduce hierarchical: {}", step), flows.take()});
  }
  return phases;
}

}  // namespace cs::models::detail
