// CollNet all-reduce on a fabric whose switches reduce (NVIDIA SHARP), as NCCL's CollNetDirect
// runs it: every GPU of a node is the head of one shard (S / l); the GPUs send each head its shard
// over NVLink, each head's NIC sends the shard into the fabric, where the leaves and then the
// top-tier switch reduce the shards of all nodes and send the result back down, and the heads
// broadcast it to the node. The steps are pipelined, so all flows run at once, each capped at its
// share of NCCL's CollNet bandwidth. The aggregation tree of the heads of local index j goes up
// through the leaves the nodes' NICs attach to and meets at top-tier switch j (mod their count); on
// a fabric of several planes, one such tree per plane carries that plane's share.
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
  // The top tier of the fabric, per plane: on a multi-plane fabric each plane's switches reduce its
  // share of every shard (NCCL sees each NIC port as a NIC of its own).
  int top = 0;
  std::map<int, std::vector<topology::Vertex>> roots;  // by plane
  for (auto [v, end] = boost::vertices(graph); v != end; ++v) top = std::max(top, topo.device(*v).tier);
  for (auto [v, end] = boost::vertices(graph); v != end; ++v) {
    if (topo.device(*v).tier == top && top > 0) roots[topo.device(*v).plane].push_back(*v);
  }
  const double planes = static_cast<double>(roots.size());
  FlowBuilder fabric(m, latency, 1.0, cap / planes);
  for (const auto& [plane, tops] : roots) {
    for (int j = 0; j < l; ++j) {
      const topology::Vertex root = tops[static_cast<std::size_t>(j) % tops.size()];
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
        fabric.add(head, leaf, shard / planes, id++, false);  // the shard into the fabric
        fabric.add(leaf, head, shard / planes, id++, false);  // the reduced shard back
        leaves[leaf] = true;
      }
      // One aggregated stream per leaf, up to the root and back.
      for (const auto& [leaf, unused] : leaves) {
        if (leaf == root) continue;
        fabric.add(leaf, root, shard / planes, id++, false);
        fabric.add(root, leaf, shard / planes, id++, false);
      }
    }
  }
  auto all = flows.take();
  for (auto& f : fabric.take()) all.push_back(std::move(f));
  return {CollectivePhase{"all_reduce collnet", std::move(all)}};
}

}  // namespace cs::models::detail
