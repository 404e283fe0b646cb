// Routing on the topology: shortest paths by hop count, with deterministic ECMP.
//
// Rules that keep paths physical:
//  - GPUs are endpoints, never transit devices.
//  - A path enters the inside of a node (its PCIe switches, CPUs, NICs) other than the source's and
//    the destination's never: servers do not forward traffic between fabric links.
//  - Among the shortest paths, the widest: a hop is taken only if the path through it keeps the
//    largest bottleneck bandwidth possible, so two GPUs that share both an NVSwitch and a PCIe
//    switch talk over NVLink, as NCCL's path search makes them.
//  - ECMP: where several next hops lie on shortest, widest paths, one is picked deterministically:
//    by a hash of (flow id, source, hop) on Ethernet, by the destination (D-mod-k) on InfiniBand.
//    A flow always takes the same path; many flows spread over all of them.
//  - NIC affinity: leaving or entering a server, a GPU uses the NIC paired with it (the same local
//    index) when that NIC is on a best path, as NCCL binds each GPU to its nearest NIC.
//  - PXN (optional, NCCL 2.12's PXN): a flow to a GPU in another node first moves over NVLink to
//    the GPU of its own node on the destination's rail (same local index), then leaves from that
//    GPU's NIC, so it stays on one rail of the fabric.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "clustersim/topology/graph.hpp"

namespace cs::topology {

struct Path {
  std::vector<Vertex> devices;  // source first, destination last
  std::vector<Edge> links;      // links[i] goes devices[i] -> devices[i+1]
  BytesPerSec bottleneck;       // the smallest link bandwidth on the path
  Seconds latency;              // links' latencies plus forwarding latency of transit devices

  [[nodiscard]] int hops() const { return static_cast<int>(links.size()); }
};

// How a hop is chosen among equal-cost next hops.
enum class Ecmp {
  automatic,    // by the fabric: destination-based on InfiniBand, hashed on Ethernet
  hash,         // a hash of (flow id, source, hop): Ethernet ECMP's 5-tuple hashing
  destination,  // D-mod-k: the destination's index picks the next hop at each level, as the
                // InfiniBand subnet manager's fat-tree routing programs the switches (OpenSM ftree,
                // Zahavi 2010), so a permutation of destinations does not collide on uplinks
};

struct RoutingOptions {
  bool pxn = false;
  Ecmp ecmp = Ecmp::automatic;
};

class Router {
 public:
  explicit Router(const Topology& topo, RoutingOptions options = {});

  // The path of one flow; nullopt when dst cannot be reached from src. `plane` >= 0 keeps a flow
  // between nodes on that fabric plane (its NIC port p); -1 lets routing choose.
  [[nodiscard]] std::optional<Path> route(Vertex src, Vertex dst, std::uint64_t flow_id = 0, int plane = -1) const;
  // Shortest-path hop count, or -1 when unreachable (without PXN relaying).
  [[nodiscard]] int distance(Vertex src, Vertex dst) const;
  // Up to `limit` distinct shortest paths (ECMP alternatives) in a fixed order, and their total count.
  struct Alternatives {
    std::vector<Path> paths;
    std::uint64_t total = 0;  // saturates at UINT64_MAX
  };
  [[nodiscard]] Alternatives all_paths(Vertex src, Vertex dst, std::size_t limit) const;

  // Hop counts from every device to dst under the transit rules (-1: unreachable), and the widest
  // bottleneck (bytes/s) of a shortest path from each device to dst. Cached per destination.
  struct Tree {
    std::vector<int> hops;
    std::vector<double> width;
  };
  [[nodiscard]] const Tree& tree_to(Vertex dst) const;
  [[nodiscard]] const std::vector<int>& distances_to(Vertex dst) const { return tree_to(dst).hops; }

  [[nodiscard]] const RoutingOptions& options() const { return options_; }
  // Whether equal-cost next hops are chosen by destination (D-mod-k); otherwise by a hash of the flow.
  [[nodiscard]] bool routes_by_destination() const { return by_destination_; }

 private:
  // Whether a path may step u -> w on its way to dst.
  [[nodiscard]] bool may_step(Vertex u, Vertex w, Vertex dst) const;

  // Structured routing (routing_structured.cpp): a path between GPUs of two nodes is a path inside
  // the source node to one of its NIC ports, a path through the fabric switches between the two
  // leaves, and a path inside the destination node; each part is searched on its own small graph
  // (nodes are identical, fabric trees are kept per destination leaf), which gives the same
  // shortest, widest paths as one search over the whole graph at a fraction of the cost.
  struct LocalTree {  // inside a node, toward one device (indexed by offset within the node)
    std::vector<int> hops;
    std::vector<double> width;
  };
  struct NicPortRef {
    Vertex nic;
    Edge up;    // nic -> leaf
    Edge down;  // leaf -> nic
  };
  [[nodiscard]] bool structured() const { return node_size_ > 0; }
  [[nodiscard]] const LocalTree& local_tree(std::size_t offset) const;
  [[nodiscard]] const LocalTree& fabric_tree(Vertex leaf) const;
  [[nodiscard]] std::optional<Path> route_structured(Vertex src, Vertex dst, std::uint64_t flow_id, int plane) const;
  // Appends the steps inside node `node` from u to the device at `target_offset`.
  bool walk_local(int node, Vertex u, std::size_t target_offset, Path& p, std::uint64_t flow_id, std::uint64_t& divisor,
                  int& hop, std::uint64_t dst_index) const;
  // The ECMP choice among n next hops: by destination (D-mod-k) or by a hash of the flow.
  [[nodiscard]] std::uint64_t destination_index(Vertex dst) const;
  void number_ports_by_leaf();
  std::size_t pick(std::size_t n, std::uint64_t flow_id, int hop, Vertex src, std::uint64_t dst_index, std::uint64_t& divisor) const;
  // Whether the edge u -> w lies on a shortest, widest path to dst.
  [[nodiscard]] bool on_best_path(const Tree& t, Vertex u, Edge e, Vertex dst) const;
  [[nodiscard]] std::optional<Vertex> pxn_relay(Vertex src, Vertex dst) const;
  [[nodiscard]] std::optional<Path> route_direct(Vertex src, Vertex dst, std::uint64_t flow_id, int plane = -1) const;
  void finish(Path& p) const;

  const Topology& topo_;
  RoutingOptions options_;
  static constexpr std::size_t kCacheEntries = 256;
  mutable std::unordered_map<Vertex, Tree> cache_;
  // Structured routing state.
  std::size_t node_size_ = 0;               // devices per node (0: nodes differ, use the full search)
  std::vector<Vertex> node_first_;          // first device of each node
  std::vector<int> fabric_index_;           // dense index of fabric switches, -1 for node devices
  std::vector<Vertex> fabric_vertices_;
  std::vector<std::vector<NicPortRef>> node_ports_;  // per node: NIC ports with their fabric links
  bool by_destination_ = false;
  // D-mod-k's index of each device (by vertex) that has one: its own NIC's first fabric port, the
  // port's leaf, then its place among that leaf's node ports, as the subnet manager numbers LIDs leaf
  // by leaf; kNoIndex for the others, and empty when routing hashes flows.
  static constexpr std::uint64_t kNoIndex = ~std::uint64_t{0};
  std::vector<std::uint64_t> leaf_order_;
  mutable std::vector<std::unique_ptr<LocalTree>> local_cache_;
  mutable std::unordered_map<Vertex, LocalTree> fabric_cache_;
  mutable std::list<Vertex> cache_order_;
};

}  // namespace cs::topology
