#include "clustersim/topology/routing.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

namespace cs::topology {

namespace {


}  // namespace

Router::Router(const Topology& topo, RoutingOptions options) : topo_(topo), options_(options) {
  by_destination_ = options_.ecmp == Ecmp::destination || (options_.ecmp == Ecmp::automatic && topo_.technology == "infiniband");
  // Structured routing needs every node laid out alike: consecutive vertices of the same kinds.
  const Graph& g = topo_.graph();
  const auto nodes = static_cast<std::size_t>(topo_.node_count());
  std::vector<std::size_t> size(nodes, 0);
  node_first_.assign(nodes, 0);
  fabric_index_.assign(boost::num_vertices(g), -1);
  if (by_destination_) number_ports_by_leaf();
  bool uniform = nodes > 0;
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    const Device& d = topo_.device(*v);
    if (d.node < 0) {
      fabric_index_[*v] = static_cast<int>(fabric_vertices_.size());
      fabric_vertices_.push_back(*v);
      continue;
    }
    const auto n = static_cast<std::size_t>(d.node);
    if (n >= nodes) {
      uniform = false;
      continue;
    }
    if (size[n] == 0) node_first_[n] = *v;
    if (*v != node_first_[n] + size[n]) uniform = false;
    ++size[n];
  }
  for (std::size_t n = 0; uniform && n < nodes; ++n) {
    if (size[n] != size[0]) uniform = false;
    for (std::size_t i = 0; uniform && i < size[0]; ++i) {
      uniform = topo_.device(node_first_[n] + i).kind == topo_.device(node_first_[0] + i).kind;
    }
  }
  if (!uniform) return;  // the full search serves every query
  node_size_ = size[0];
  node_ports_.resize(nodes);
  for (std::size_t n = 0; n < nodes; ++n) {
    for (std::size_t i = 0; i < node_size_; ++i) {
      const Vertex v = node_first_[n] + i;
      if (topo_.device(v).kind != DeviceKind::nic) continue;
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        const Vertex leaf = boost::target(*e, g);
        if (fabric_index_[leaf] < 0) continue;
        for (auto [r, rend] = boost::out_edges(leaf, g); r != rend; ++r) {
          if (boost::target(*r, g) == v && (topo_.link(*r).id ^ 1u) == topo_.link(*e).id) {
            node_ports_[n].push_back({v, *e, *r});
            break;
          }
        }
      }
    }
  }
}

void Router::number_ports_by_leaf() {
  const Graph& g = topo_.graph();
  const auto on_fabric = [&](Vertex v) { return topo_.device(v).node < 0; };
  // Every NIC's first fabric port, in vertex order (node by node, NIC by NIC): its leaf's ordinal
  // and its place among that leaf's node ports.
  struct Port {
    Vertex nic;
    std::uint64_t leaf, place;
  };
  std::vector<Port> ports;
  std::unordered_map<Vertex, std::pair<std::uint64_t, std::uint64_t>> leaves;  // leaf -> (ordinal, ports so far)
  std::uint64_t widest = 1;
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    if (topo_.device(*v).kind != DeviceKind::nic || on_fabric(*v)) continue;
    for (auto [e, eend] = boost::out_edges(*v, g); e != eend; ++e) {
      if (!on_fabric(boost::target(*e, g))) continue;
      auto& [ordinal, count] = leaves.try_emplace(boost::target(*e, g), leaves.size(), 0).first->second;
      ports.push_back({*v, ordinal, count++});
      widest = std::max(widest, count);
      break;
    }
  }
  // Each GPU takes its node's NIC of its own local index (NCCL's affinity; the first in vertex
  // order); where a node has fewer NICs than GPUs (PCIe hosts), GPU i takes NIC i mod the NICs.
  leaf_order_.assign(boost::num_vertices(g), kNoIndex);
  std::map<std::pair<int, int>, std::uint64_t> by_local_index;  // (node, NIC's local index) -> index
  std::map<int, int> nics_of;                                    // node -> NICs with a fabric port
  for (const Port& p : ports) {
    const std::uint64_t index = p.leaf * widest + p.place;
    leaf_order_[p.nic] = index;
    by_local_index.emplace(std::make_pair(topo_.device(p.nic).node, topo_.device(p.nic).local_index), index);
    ++nics_of[topo_.device(p.nic).node];
  }
  for (Vertex v : topo_.gpus()) {
    const Device& d = topo_.device(v);
    auto it = by_local_index.find({d.node, d.local_index});
    if (it == by_local_index.end() && nics_of.count(d.node)) it = by_local_index.find({d.node, d.local_index % nics_of[d.node]});
    if (it != by_local_index.end()) leaf_order_[v] = it->second;
  }
}

bool Router::may_step(Vertex u, Vertex w, Vertex dst) const {
  const Device& dw = topo_.device(w);
  if (dw.kind == DeviceKind::gpu && w != dst) return false;  // GPUs do not forward
  // Stepping into the inside of a node is allowed only from inside the same node, or when it is
  // the destination's node: a path may leave its source node and enter its destination node, but
  // never enter (and so never cross) any other server.
  const int dst_node = topo_.device(dst).node;
  return dw.node == -1 || dw.node == dst_node || topo_.device(u).node == dw.node;
}

const Router::Tree& Router::tree_to(Vertex dst) const {
  if (auto it = cache_.find(dst); it != cache_.end()) return it->second;
  if (cache_.size() >= kCacheEntries) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  const Graph& g = topo_.graph();
  Tree t;
  t.hops.assign(boost::num_vertices(g), -1);
  t.width.assign(boost::num_vertices(g), 0.0);
  std::vector<Vertex> order;  // in breadth-first order, so by distance
  t.hops[dst] = 0;
  t.width[dst] = std::numeric_limits<double>::infinity();
  order.push_back(dst);
  // Backward breadth-first search: from x we reach y when a path may step y -> x. The graph is
  // symmetric (every link has both directions), so out-edges of x are the in-edges we need.
  for (std::size_t head = 0; head < order.size(); ++head) {
    const Vertex x = order[head];
    for (auto [e, end] = boost::out_edges(x, g); e != end; ++e) {
      const Vertex y = boost::target(*e, g);
      if (t.hops[y] >= 0 || !may_step(y, x, dst)) continue;
      t.hops[y] = t.hops[x] + 1;
      order.push_back(y);
    }
  }
  // Widest shortest path, layer by layer: width[y] = max over next hops x of min(bw(y -> x), width[x]).
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Vertex y = order[i];
    for (auto [e, end] = boost::out_edges(y, g); e != end; ++e) {
      const Vertex x = boost::target(*e, g);
      if (t.hops[x] != t.hops[y] - 1 || !may_step(y, x, dst)) continue;
      t.width[y] = std::max(t.width[y], std::min(topo_.link(*e).bandwidth.value(), t.width[x]));
    }
  }
  cache_order_.push_back(dst);
  return cache_.emplace(dst, std::move(t)).first->second;
}

bool Router::on_best_path(const Tree& t, Vertex u, Edge e, Vertex dst) const {
  const Vertex w = boost::target(e, topo_.graph());
  if (t.hops[w] != t.hops[u] - 1 || !may_step(u, w, dst)) return false;
  return std::min(topo_.link(e).bandwidth.value(), t.width[w]) >= t.width[u] * (1 - 1e-12);
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

std::optional<Path> Router::route_direct(Vertex src, Vertex dst, std::uint64_t flow_id, int plane) const {
  if (structured() && topo_.device(src).node >= 0 && topo_.device(dst).node >= 0) {
    if (plane >= 0) {
      if (auto p = route_structured(src, dst, flow_id, plane)) return p;
    }
    return route_structured(src, dst, flow_id, -1);
  }
  const Tree& tree = tree_to(dst);
  if (tree.hops[src] < 0) return std::nullopt;
  const Graph& g = topo_.graph();
  Path p;
  p.devices.push_back(src);
  Vertex u = src;
  std::vector<Edge> candidates, paired;
  const Device& s = topo_.device(src);
  const Device& d = topo_.device(dst);
  const std::uint64_t dst_index = destination_index(dst);
  std::uint64_t divisor = 1;
  for (int hop = 0; u != dst; ++hop) {
    candidates.clear();
    paired.clear();
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      if (!on_best_path(tree, u, *e, dst)) continue;
      candidates.push_back(*e);
      // NIC affinity: the NIC with the local index of the GPU on this side of the path.
      const Device& w = topo_.device(boost::target(*e, g));
      if (w.kind == DeviceKind::nic) {
        const Device& gpu = w.node == s.node ? s : d;
        if (gpu.kind == DeviceKind::gpu && w.node == gpu.node && w.local_index == gpu.local_index) paired.push_back(*e);
      }
    }
    const std::vector<Edge>& choice = paired.empty() ? candidates : paired;
    // Out-edges are kept in insertion order, so the candidate order (and the choice) is fixed.
    const Edge chosen = choice[pick(choice.size(), flow_id, hop, src, dst_index, divisor)];
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

std::optional<Path> Router::route(Vertex src, Vertex dst, std::uint64_t flow_id, int plane) const {
  if (src == dst) {
    Path p;
    p.devices.push_back(src);
    finish(p);
    return p;
  }
  if (auto relay = pxn_relay(src, dst)) {
    auto first = route_direct(src, *relay, flow_id);
    auto second = route_direct(*relay, dst, flow_id, plane);
    // NCCL relays through a peer only over NVLink ("PXN = PCI + NVLink", src/graph/paths.cc): on a
    // PCIe-only host the hop to the peer would cross PCIe switches, even the sockets, twice.
    const auto over_nvlink = [&](const Path& p) {
      return std::all_of(p.links.begin(), p.links.end(), [&](Edge e) { return topo_.link(e).kind == LinkKind::nvlink; });
    };
    if (first && second && over_nvlink(*first)) {
      Path p = std::move(*first);
      p.links.insert(p.links.end(), second->links.begin(), second->links.end());
      p.devices.insert(p.devices.end(), second->devices.begin() + 1, second->devices.end());
      finish(p);
      return p;
    }
  }
  return route_direct(src, dst, flow_id, plane);
}

Router::Alternatives Router::all_paths(Vertex src, Vertex dst, std::size_t limit) const {
  Alternatives out;
  const Tree& tree = tree_to(dst);
  if (tree.hops[src] < 0) return out;
  const Graph& g = topo_.graph();
  // Count the shortest paths by dynamic programming over the distance layers (memoised DFS).
  std::unordered_map<Vertex, std::uint64_t> count;
  auto paths_from = [&](auto&& self, Vertex u) -> std::uint64_t {
    if (u == dst) return 1;
    if (auto it = count.find(u); it != count.end()) return it->second;
    std::uint64_t total = 0;
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      if (on_best_path(tree, u, *e, dst)) {
        const std::uint64_t c = self(self, boost::target(*e, g));
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
      if (!on_best_path(tree, u, *e, dst)) continue;
      const Vertex w = boost::target(*e, g);
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
