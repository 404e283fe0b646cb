// Internal to models/: the pieces the collective algorithms share, and one builder per algorithm
// (ring.cpp, tree.cpp, hierarchical.cpp, nvls.cpp, pairwise.cpp, direct.cpp).
#pragma once

#include <map>
#include <vector>

#include "clustersim/models/collective_model.hpp"

namespace cs::models::detail {

// The group as nodes of members, each node's members in local-index order.
struct Group {
  std::vector<topology::Vertex> ranks;
  std::vector<std::vector<topology::Vertex>> nodes;  // in order of first appearance
  int ppn = 0;                                        // most members on one node
  bool uniform = true;                                // every node has ppn members
};
Group make_group(const topology::Topology& topo, const std::vector<topology::Vertex>& ranks);

// Collects routed flows for one phase.
class FlowBuilder {
 public:
  FlowBuilder(const CollectiveModel& model, sim::Time latency, double rate_cap_fraction, double rate_cap_absolute);
  // A flow src -> dst over the routed path (PXN routing when `relay` and enabled).
  void add(topology::Vertex src, topology::Vertex dst, double bytes, std::uint64_t flow_id, bool relay = true);
  // A flow over the single link a -> b (for example a GPU to its NVSwitch).
  void add_link(topology::Vertex a, topology::Vertex b, double bytes);
  std::vector<sim::FlowSpec> take() { return std::move(flows_); }

 private:
  // The rate cap of a flow on `path` that carries 1/`shares` of a transfer: a fraction of the path's
  // bottleneck, and the transfer's absolute cap divided among its shares.
  double cap_for(const std::vector<std::uint32_t>& path, int shares = 1) const;
  const CollectiveModel& model_;
  sim::Time latency_;
  double cap_fraction_;
  double cap_absolute_;
  std::vector<sim::FlowSpec> flows_;
};

// Per-flow rate limits: a fraction of the path's bottleneck and an absolute cap (bytes/s).
struct ProtocolCaps {
  double fraction = 1.0;
  double absolute = std::numeric_limits<double>::infinity();
};

sim::Time to_time(Seconds s);

// Each ring's order through the group's GPUs, node by node with rail-aligned entries (ring_orders.cpp).
// On switchless NVLink meshes the orders spread the rings over the direct links and, with
// `choose_count`, the count may grow beyond `rings` to balance them; elsewhere there are `rings`
// rotations of the members in local-index order.
std::vector<std::vector<topology::Vertex>> ring_orders(const CollectiveModel& m, const Group& g, int rings, bool choose_count);
// Ring (all ops but all-to-all and send/recv): one ring per order, each carrying 1/rings.
std::vector<CollectivePhase> build_ring(const CollectiveModel& m, const Collective& c,
                                        const std::vector<std::vector<topology::Vertex>>& orders, sim::Time latency,
                                        ProtocolCaps caps);
// NCCL's double binary tree over nodes, with a chain inside each node (all-reduce).
std::vector<CollectivePhase> build_tree(const CollectiveModel& m, const Group& g, const Collective& c, int channels,
                                        sim::Time latency, ProtocolCaps caps);
// Intra-node reduce-scatter, inter-node all-reduce per local rank, intra-node all-gather.
// Each step has its own latency and per-flow rate cap (bytes/s).
std::vector<CollectivePhase> build_hierarchical(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time intra_latency,
                                                double intra_cap, sim::Time inter_latency, double inter_cap);
// NVLink SHARP inside one NVSwitch domain.
std::vector<CollectivePhase> build_nvls(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time latency,
                                        double rate_cap);
// CollNet (SHARP): reduce-scatter to the node's heads, each head's shard reduced in the switches up
// an aggregation tree to a top-tier switch and back, all-gather from the heads; pipelined.
std::vector<CollectivePhase> build_collnet(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time latency,
                                           double algbw);
// All-to-all: every rank sends bytes / n to every other rank at once.
std::vector<CollectivePhase> build_pairwise(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time latency);
// One message from ranks[0] to ranks[1].
std::vector<CollectivePhase> build_direct(const CollectiveModel& m, const Collective& c, sim::Time latency);

}  // namespace cs::models::detail
