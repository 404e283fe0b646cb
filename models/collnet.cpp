// CollNet all-reduce on a fabric whose switches reduce (NVIDIA SHARP), as NCCL's CollNetDirect
// runs it: every GPU of a node is the head of one shard (S / l); the GPUs send each head its shard
// over NVLink, each head's NIC sends the shard into the fabric, where the leaves and then the
// top-tier switch reduce the shards of all nodes and send the result back down, and the heads
// broadcast it to the node. The steps are pipelined, so all flows run at once, each capped at its
// share of NCCL's CollNet bandwidth. The aggregation tree of the heads of local index j goes up
// through the leaves the nodes' NICs attach to and meets at top-tier switch j (mod their count).
#include <algorithm>
#include <map>

#include "collective_builders.hpp"

namespace cs::models::detail {

std::vector<CollectivePhase> build_collnet(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time latency,
                                           double algbw) {
  const auto& topo = m.topology();
  const auto& graph = topo.graph();
  const int l = g.ppn;
  const double shard = c.bytes.value() / l;
  const double cap = algbw / l;  // a flow moving one shard takes S / algbw
  FlowBuilder flows(m, latency, 1.0, cap);
  std::uint64_t id = 0;
  // Inside each node: shards to their heads and results back.
  for (const auto& members : g.nodes) {
    for (std::size_t i = 0; i < members.size(); ++i) {
      for (std::size_t j = 0; j < members.size(); ++j) {
        if (i == j) continue;
        flows.add(members[i], members[j], shard, id++);  // reduce-scatter to head j
        flows.add(members[j], members[i], shard, id++);  // all-gather from head j
      }
    }
  }
  // The top tier of the fabric.
  int top = 0;
  std::vector<topology::Vertex> roots;
  for (auto [v, end] = boost::vertices(graph); v != end; ++v) top = std::max(top, topo.device(*v).tier);
  for (auto [v, end] = boost::vertices(graph); v != end; ++v) {
    if (topo.device(*v).tier == top && top > 0) roots.push_back(*v);
  }
  for (int j = 0; j < l; ++j) {
    const topology::Vertex root = roots[static_cast<std::size_t>(j) % roots.size()];
    std::map<topology::Vertex, bool> leaves;  // the leaves this rail's heads attach to, in order
    for (const auto& members : g.nodes) {
      const topology::Vertex head = members[static_cast<std::size_t>(j)];
      // The head's NIC and its leaf: the first fabric switch on its route to the root.
      const auto up = m.direct_router().route(head, root, id);
      if (!up) continue;
      topology::Vertex leaf = root;
      for (std::size_t k = 0; k < up->links.size(); ++k) {
        const topology::Vertex w = up->devices[k + 1];
        if (topo.device(w).tier > 0) {
          leaf = w;
          break;
        }
      }
      flows.add(head, leaf, shard, id++, false);  // the shard into the fabric
      flows.add(leaf, head, shard, id++, false);  // the reduced shard back
      leaves[leaf] = true;
    }
    // One aggregated stream per leaf, up to the root and back.
    for (const auto& [leaf, unused] : leaves) {
      if (leaf == root) continue;
      flows.add(leaf, root, shard, id++, false);
      flows.add(root, leaf, shard, id++, false);
    }
  }
  return {CollectivePhase{"all_reduce collnet", flows.take()}};
}

}  // namespace cs::models::detail
