// Routing on the topology: shortest paths by hop count, with deterministic ECMP.
//
// Rules that keep paths physical:
//  - GPUs are endpoints, never transit devices.
//  - A path enters the inside of a node (its PCIe switches, CPUs, NICs) other than the source's and
//    the destination's never: servers do not forward traffic between fabric links.
//  - ECMP: where several next hops lie on shortest paths, a hash of (flow id, hop) picks one, so a
//    flow always takes the same path and many flows spread over all of them.
//  - PXN (optional, NCCL 2.12's PXN): a flow to a GPU in another node first moves over NVLink to
//    the GPU of its own node on the destination's rail (same local index), then leaves from that
//    GPU's NIC, so it stays on one rail of the fabric.
#pragma once

#include <cstdint>
#include <list>
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

struct RoutingOptions {
  bool pxn = false;
};

class Router {
 public:
  explicit Router(const Topology& topo, RoutingOptions options = {});

  // The path of one flow; nullopt when dst cannot be reached from src.
  [[nodiscard]] std::optional<Path> route(Vertex src, Vertex dst, std::uint64_t flow_id = 0) const;
  // Shortest-path hop count, or -1 when unreachable (without PXN relaying).
  [[nodiscard]] int distance(Vertex src, Vertex dst) const;
  // Up to `limit` distinct shortest paths (ECMP alternatives) in a fixed order, and their total count.
  struct Alternatives {
    std::vector<Path> paths;
    std::uint64_t total = 0;  // saturates at UINT64_MAX
  };
  [[nodiscard]] Alternatives all_paths(Vertex src, Vertex dst, std::size_t limit) const;

  // Hop counts from every device to dst under the transit rules (-1: unreachable). Cached.
  [[nodiscard]] const std::vector<int>& distances_to(Vertex dst) const;

  [[nodiscard]] const RoutingOptions& options() const { return options_; }

 private:
  // Whether a path may step u -> w on its way to dst.
  [[nodiscard]] bool may_step(Vertex u, Vertex w, Vertex dst) const;
  [[nodiscard]] std::optional<Vertex> pxn_relay(Vertex src, Vertex dst) const;
  [[nodiscard]] std::optional<Path> route_direct(Vertex src, Vertex dst, std::uint64_t flow_id) const;
  void finish(Path& p) const;

  const Topology& topo_;
  RoutingOptions options_;
  static constexpr std::size_t kCacheEntries = 256;
  mutable std::unordered_map<Vertex, std::vector<int>> cache_;
  mutable std::list<Vertex> cache_order_;
};

}  // namespace cs::topology
