#include "clustersim/topology/routing.hpp"

#include <algorithm>
#include <deque>
#include <limits>

namespace cs::topology {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Router::Router(const Topology& topo, RoutingOptions options) : topo_(topo), options_(options) {}

bool Router::may_step(Vertex u, Vertex w, Vertex dst) const {
  const Device& dw = topo_.device(w);
  if (dw.kind == DeviceKind::gpu && w != dst) return false;  // GPUs do not forward
  // Stepping into the inside of a node is allowed only from inside the same node, or when it is
  // the destination's node: a path may leave its source node and enter its destination node, but
  // never enter (and so never cross) any other server.
  const int dst_node = topo_.device(dst).node;
  return dw.node == -1 || dw.node == dst_node || topo_.device(u).node == dw.node;
}

const std::vector<int>& Router::distances_to(Vertex dst) const {
  if (auto it = cache_.find(dst); it != cache_.end()) return it->second;
  if (cache_.size() >= kCacheEntries) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  const Graph& g = topo_.graph();
  std::vector<int> dist(boost::num_vertices(g), -1);
  std::deque<Vertex> queue;
  dist[dst] = 0;
  queue.push_back(dst);
  // Backward breadth-first search: from x we reach y when a path may step y -> x. The graph is
  // symmetric (every link has both directions), so out-edges of x are the in-edges we need.
  while (!queue.empty()) {
    const Vertex x = queue.front();
    queue.pop_front();
    for (auto [e, end] = boost::out_edges(x, g); e != end; ++e) {
      const Vertex y = boost::target(*e, g);
      if (dist[y] >= 0 || !may_step(y, x, dst)) continue;
      dist[y] = dist[x] + 1;
      queue.push_back(y);
    }
  }
  cache_order_.push_back(dst);
  return cache_.emplace(dst, std::move(dist)).first->second;
}

int Router::distance(Vertex src, Vertex dst) const { return distances_to(dst)[src]; }

void Router::finish(Path& p) const {
  p.bottleneck = BytesPerSec(std::numeric_limits<double>::infinity());
  p.latency = Seconds(0);
  for (const Edge& e : p.links) {
    p.bottleneck = std::min(p.bottleneck, topo_.link(e).bandwidth);
    p.latency += topo_.link(e).latency;
  }
  for (std::size_t i = 1; i + 1 < p.devices.size(); ++i) p.latency += topo_.device(p.devices[i]).latency;
  if (p.links.empty()) p.bottleneck = BytesPerSec(0);
}

std::optional<Path> Router::route_direct(Vertex src, Vertex dst, std::uint64_t flow_id) const {
  const std::vector<int>& dist = distances_to(dst);
  if (dist[src] < 0) return std::nullopt;
  const Graph& g = topo_.graph();
  Path p;
  p.devices.push_back(src);
  Vertex u = src;
  std::vector<Edge> candidates;
  for (int hop = 0; u != dst; ++hop) {
    candidates.clear();
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const Vertex w = boost::target(*e, g);
      if (dist[w] == dist[u] - 1 && may_step(u, w, dst)) candidates.push_back(*e);
    }
    // Out-edges are kept in insertion order, so the candidate order (and the choice) is fixed.
    const Edge chosen = candidates[mix(flow_id * 0x100000001b3ULL + static_cast<std::uint64_t>(hop) + (static_cast<std::uint64_t>(src) << 32)) % candidates.size()];
    p.links.push_back(chosen);
    u = boost::target(chosen, g);
    p.devices.push_back(u);
  }
  finish(p);
  return p;
}

std::optional<Vertex> Router::pxn_relay(Vertex src, Vertex dst) const {
  const Device& s = topo_.device(src);
  const Device& d = topo_.device(dst);
  if (!options_.pxn || s.kind != DeviceKind::gpu || d.kind != DeviceKind::gpu || s.node == d.node ||
      s.local_index == d.local_index) {
    return std::nullopt;
  }
  // GPUs of a node are consecutive in rank order, so the relay is found by rank arithmetic.
  const int relay_rank = s.gpu_rank - s.local_index + d.local_index;
  if (relay_rank < 0 || relay_rank >= static_cast<int>(topo_.gpus().size())) return std::nullopt;
  const Vertex relay = topo_.gpus()[static_cast<std::size_t>(relay_rank)];
  if (topo_.device(relay).node != s.node) return std::nullopt;
  return relay;
}

std::optional<Path> Router::route(Vertex src, Vertex dst, std::uint64_t flow_id) const {
  if (src == dst) {
    Path p;
    p.devices.push_back(src);
    finish(p);
    return p;
  }
  if (auto relay = pxn_relay(src, dst)) {
    auto first = route_direct(src, *relay, flow_id);
    auto second = route_direct(*relay, dst, flow_id);
    if (first && second) {
      Path p = std::move(*first);
      p.links.insert(p.links.end(), second->links.begin(), second->links.end());
      p.devices.insert(p.devices.end(), second->devices.begin() + 1, second->devices.end());
      finish(p);
      return p;
    }
  }
  return route_direct(src, dst, flow_id);
}

Router::Alternatives Router::all_paths(Vertex src, Vertex dst, std::size_t limit) const {
  Alternatives out;
  const std::vector<int>& dist = distances_to(dst);
  if (dist[src] < 0) return out;
  const Graph& g = topo_.graph();
  // Count the shortest paths by dynamic programming over the distance layers (memoised DFS).
  std::unordered_map<Vertex, std::uint64_t> count;
  auto paths_from = [&](auto&& self, Vertex u) -> std::uint64_t {
    if (u == dst) return 1;
    if (auto it = count.find(u); it != count.end()) return it->second;
    std::uint64_t total = 0;
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const Vertex w = boost::target(*e, g);
      if (dist[w] == dist[u] - 1 && may_step(u, w, dst)) {
        const std::uint64_t c = self(self, w);
        total = total > std::numeric_limits<std::uint64_t>::max() - c ? std::numeric_limits<std::uint64_t>::max() : total + c;
      }
    }
    count[u] = total;
    return total;
  };
  out.total = paths_from(paths_from, src);
  // Enumerate the first `limit` paths depth-first in edge order.
  Path current;
  current.devices.push_back(src);
  auto walk = [&](auto&& self, Vertex u) -> void {
    if (out.paths.size() >= limit) return;
    if (u == dst) {
      Path p = current;
      finish(p);
      out.paths.push_back(std::move(p));
      return;
    }
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const Vertex w = boost::target(*e, g);
      if (dist[w] != dist[u] - 1 || !may_step(u, w, dst)) continue;
      current.links.push_back(*e);
      current.devices.push_back(w);
      self(self, w);
      current.links.pop_back();
      current.devices.pop_back();
      if (out.paths.size() >= limit) return;
    }
  };
  walk(walk, src);
  return out;
}

}  // namespace cs::topology
