// NCCL's double binary tree for all-reduce (Sanders, Speck, Traeff 2009; NCCL 2.4): two binary
// trees over the nodes, the second mirrored so that the leaves of one are inner nodes of the other,
// each reducing and broadcasting half the data; inside a node the members form a chain to the one
// that talks to the other nodes. Reduction up and broadcast down are pipelined, so both directions
// of every tree edge carry their half at the same time. With several channels, channel c's trees
// use the member on rail c as the node's head.
#include <fmt/format.h>

#include "collective_builders.hpp"

namespace cs::models::detail {

std::vector<CollectivePhase> build_tree(const CollectiveModel& m, const Group& g, const Collective& c, int channels,
                                        sim::Time latency, ProtocolCaps caps) {
  const std::size_t nodes = g.nodes.size();
  const double half = c.bytes.value() / 2.0 / channels;  // per tree per channel
  FlowBuilder flows(m, latency, caps.fraction, caps.absolute);
  std::uint64_t id = 0;
  for (int ch = 0; ch < channels; ++ch) {
    // Heads and chains: the chain of node k runs from its head through the other members.
    std::vector<topology::Vertex> heads(nodes);
    for (std::size_t k = 0; k < nodes; ++k) {
      const auto& members = g.nodes[k];
      const std::size_t size = members.size();
      const std::size_t first = static_cast<std::size_t>(ch) % size;
      heads[k] = members[first];
      for (std::size_t i = 0; i + 1 < size; ++i) {
        const auto a = members[(first + i) % size], b = members[(first + i + 1) % size];
        // Two trees, each both up (reduce) and down (broadcast) the chain: one flow per tree and
        // direction, each of a tree's half at a tree's rate cap (one merged flow of both halves
        // under that cap took twice NCCL's time).
        for (int tree = 0; tree < 2; ++tree) {
          flows.add(a, b, half, id++);
          flows.add(b, a, half, id++);
        }
      }
    }
    for (int tree = 0; tree < 2; ++tree) {
      for (std::size_t i = 1; i < nodes; ++i) {
        const std::size_t parent = (i - 1) / 2;
        // Tree 1 is tree 0 on the nodes in reverse order.
        const std::size_t a = tree == 0 ? i : nodes - 1 - i;
        const std::size_t b = tree == 0 ? parent : nodes - 1 - parent;
        flows.add(heads[a], heads[b], half, id++);  // reduce toward the root
        flows.add(heads[b], heads[a], half, id++);  // broadcast back
      }
    }
  }
  return {CollectivePhase{fmt::format("all_reduce tree x{}", channels), flows.take()}};
}

}  // namespace cs::models::detail
