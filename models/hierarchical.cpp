// Hierarchical all-reduce over l GPUs per node and m nodes (the two-level scheme of NCCL's
// CollNet chain and of Horovod's hierarchical all-reduce): a reduce-scatter inside each node, an
// all-reduce of S / l across nodes among the GPUs of each local rank (one per rail, in parallel),
// and an all-gather inside each node. Each step is a ring with NCCL's latency for its size.
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
    FlowBuilder flows(m, across ? inter_latency : intra_latency, 1.0, across ? inter_cap : intra_cap);
    std::uint64_t id = 0;
    if (!across) {
      for (const auto& members : g.nodes) {
        const std::size_t k = members.size();
        for (std::size_t i = 0; i < k && k > 1; ++i) {
          flows.add(members[i], members[(i + 1) % k], static_cast<double>(k - 1) / k * s, id++);
        }
      }
    } else {
      for (int j = 0; j < l && nodes > 1; ++j) {
        for (int k = 0; k < nodes; ++k) {
          const auto a = g.nodes[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)];
          const auto b = g.nodes[static_cast<std::size_t>((k + 1) % nodes)][static_cast<std::size_t>(j)];
          flows.add(a, b, 2.0 * (nodes - 1) / nodes * s / l, id++);
        }
      }
    }
    phases.push_back(CollectivePhase{fmt::format("all_reduce hierarchical: {}", step), flows.take()});
  }
  return phases;
}

}  // namespace cs::models::detail
