// All-to-all as NCCL runs it: grouped sends and receives between every pair at once, bytes / n to
// each peer (or, for all-to-allv, each pair's own size). With PXN a message to another node's GPU first moves over NVLink to the sender's
// node-mate on the destination's rail, so cross-rail traffic stays off the spines.
#include "collective_builders.hpp"

namespace cs::models::detail {

std::vector<CollectivePhase> build_pairwise(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time latency) {
  const std::size_t n = g.ranks.size();
  const double each = c.bytes.value() / static_cast<double>(n);
  FlowBuilder flows(m, latency, 1.0, std::numeric_limits<double>::infinity());
  std::uint64_t id = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const double bytes = c.pair_bytes.empty() ? each : c.pair_bytes[i * n + j];
      if (bytes > 0) flows.add(g.ranks[i], g.ranks[j], bytes, id++);
    }
  }
  return {CollectivePhase{"all_to_all pairwise", flows.take()}};
}

std::vector<CollectivePhase> build_direct(const CollectiveModel& m, const Collective& c, sim::Time latency) {
  FlowBuilder flows(m, latency, 1.0, std::numeric_limits<double>::infinity());
  flows.add(c.ranks[0], c.ranks[1], c.bytes.value(), 0);
  return {CollectivePhase{"send_recv", flows.take()}};
}

}  // namespace cs::models::detail
