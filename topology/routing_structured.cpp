// Structured routing: see routing.hpp. Node-internal searches run on node 0 (every node of a
// topology is the same template, laid out in the same vertex order) and map to node n by offset;
// fabric searches run on the switches alone, one per destination leaf.
#include <algorithm>
#include <limits>

#include "clustersim/topology/routing.hpp"

namespace cs::topology {

namespace {

constexpr double kTie = 1e-12;

// splitmix64's finaliser: spreads (flow, source, hop) over the ECMP choices.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t Router::destination_index(Vertex dst) const {
  // D-mod-k's destination index: the place of the destination's own NIC port in the leaf-by-leaf
  // numbering, so that the ports under one leaf are consecutive and a permutation of them spreads
  // over any number of uplinks. A device without one (a node with no NIC on the fabric, or routing
  // that hashes): consecutive for the nodes, and for the local indices of one node (the odd
  // multiplier keeps them apart modulo any power of two).
  if (dst < leaf_order_.size() && leaf_order_[dst] != kNoIndex) return leaf_order_[dst];
  const Device& d = topo_.device(dst);
  if (d.node < 0) return static_cast<std::uint64_t>(dst);
  return static_cast<std::uint64_t>(d.node) +
         static_cast<std::uint64_t>(d.local_index) * (2 * static_cast<std::uint64_t>(topo_.node_count()) + 1);
}

std::size_t Router::pick(std::size_t n, std::uint64_t flow_id, int hop, Vertex src, std::uint64_t dst_index,
                         std::uint64_t& divisor) const {
  if (n <= 1) return 0;
  if (by_destination_) {
    const std::size_t i = static_cast<std::size_t>((dst_index / divisor) % n);
    divisor *= n;
    return i;
  }
  return mix64(flow_id * 0x100000001b3ULL + static_cast<std::uint64_t>(hop) + (static_cast<std::uint64_t>(src) << 32)) % n;
}

const Router::LocalTree& Router::local_tree(std::size_t offset) const {
  if (local_cache_.size() < node_size_) local_cache_.resize(node_size_);
  if (local_cache_[offset]) return *local_cache_[offset];
  const Graph& g = topo_.graph();
  const Vertex base = node_first_[0];
  const Vertex target = base + offset;
  auto t = std::make_unique<LocalTree>();
  t->hops.assign(node_size_, -1);
  t->width.assign(node_size_, 0.0);
  auto inside = [&](Vertex v) { return v >= base && v < base + node_size_; };
  std::vector<Vertex> order{target};
  t->hops[offset] = 0;
  t->width[offset] = std::numeric_limits<double>::infinity();
  for (std::size_t head = 0; head < order.size(); ++head) {
    const Vertex x = order[head];
    // A path reaches x from y only if x forwards: the target, or anything but a GPU.
    if (x != target && topo_.device(x).kind == DeviceKind::gpu) continue;
    for (auto [e, end] = boost::out_edges(x, g); e != end; ++e) {
      const Vertex y = boost::target(*e, g);
      if (!inside(y) || t->hops[y - base] >= 0) continue;
      t->hops[y - base] = t->hops[x - base] + 1;
      order.push_back(y);
    }
  }
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Vertex y = order[i];
    for (auto [e, end] = boost::out_edges(y, g); e != end; ++e) {
      const Vertex x = boost::target(*e, g);
      if (!inside(x) || t->hops[x - base] != t->hops[y - base] - 1) continue;
      if (x != target && topo_.device(x).kind == DeviceKind::gpu) continue;
      t->width[y - base] = std::max(t->width[y - base], std::min(topo_.link(*e).bandwidth.value(), t->width[x - base]));
    }
  }
  local_cache_[offset] = std::move(t);
  return *local_cache_[offset];
}

const Router::LocalTree& Router::fabric_tree(Vertex leaf) const {
  if (auto it = fabric_cache_.find(leaf); it != fabric_cache_.end()) return it->second;
  const Graph& g = topo_.graph();
  LocalTree t;
  t.hops.assign(fabric_vertices_.size(), -1);
  t.width.assign(fabric_vertices_.size(), 0.0);
  const auto index = [&](Vertex v) { return fabric_index_[v]; };
  std::vector<Vertex> order{leaf};
  t.hops[static_cast<std::size_t>(index(leaf))] = 0;
  t.width[static_cast<std::size_t>(index(leaf))] = std::numeric_limits<double>::infinity();
  for (std::size_t head = 0; head < order.size(); ++head) {
    const Vertex x = order[head];
    for (auto [e, end] = boost::out_edges(x, g); e != end; ++e) {
      const Vertex y = boost::target(*e, g);
      const int iy = index(y);
      if (iy < 0 || t.hops[static_cast<std::size_t>(iy)] >= 0) continue;
      t.hops[static_cast<std::size_t>(iy)] = t.hops[static_cast<std::size_t>(index(x))] + 1;
      order.push_back(y);
    }
  }
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Vertex y = order[i];
    const auto iy = static_cast<std::size_t>(index(y));
    for (auto [e, end] = boost::out_edges(y, g); e != end; ++e) {
      const int ix = index(boost::target(*e, g));
      if (ix < 0 || t.hops[static_cast<std::size_t>(ix)] != t.hops[iy] - 1) continue;
      t.width[iy] = std::max(t.width[iy], std::min(topo_.link(*e).bandwidth.value(), t.width[static_cast<std::size_t>(ix)]));
    }
  }
  return fabric_cache_.emplace(leaf, std::move(t)).first->second;
}

bool Router::walk_local(int node, Vertex u, std::size_t target_offset, Path& p, std::uint64_t flow_id, std::uint64_t& divisor,
                        int& hop, std::uint64_t dst_index) const {
  const LocalTree& t = local_tree(target_offset);
  const Graph& g = topo_.graph();
  const Vertex base = node_first_[static_cast<std::size_t>(node)];
  const Vertex target = base + target_offset;
  if (t.hops[u - base] < 0) return false;
  std::vector<Edge> candidates;
  while (u != target) {
    candidates.clear();
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const Vertex w = boost::target(*e, g);
      if (w < base || w >= base + node_size_ || t.hops[w - base] != t.hops[u - base] - 1) continue;
      if (w != target && topo_.device(w).kind == DeviceKind::gpu) continue;
      if (std::min(topo_.link(*e).bandwidth.value(), t.width[w - base]) < t.width[u - base] * (1 - kTie)) continue;
      candidates.push_back(*e);
    }
    const Edge chosen = candidates[pick(candidates.size(), flow_id, hop++, p.devices.front(), dst_index, divisor)];
    p.links.push_back(chosen);
    u = boost::target(chosen, g);
    p.devices.push_back(u);
  }
  return true;
}

std::optional<Path> Router::route_structured(Vertex src, Vertex dst, std::uint64_t flow_id, int plane) const {
  const Device& s = topo_.device(src);
  const Device& d = topo_.device(dst);
  const Graph& g = topo_.graph();
  Path p;
  p.devices.push_back(src);
  std::uint64_t divisor = 1;
  int hop = 0;
  const std::uint64_t dst_index = destination_index(dst);
  const std::size_t src_offset = src - node_first_[static_cast<std::size_t>(s.node)];
  const std::size_t dst_offset = dst - node_first_[static_cast<std::size_t>(d.node)];
  if (s.node == d.node) {
    if (local_tree(dst_offset).hops[src_offset] >= 0) {
      if (!walk_local(s.node, src, dst_offset, p, flow_id, divisor, hop, dst_index)) return std::nullopt;
      finish(p);
      return p;
    }
    // No path inside the node (GPUs joined only through their NICs): out to the fabric and back, as
    // the full search allows a path to leave and re-enter its own node (a probe's topology had GPU
    // pairs `topo` called connected but no route).
  }
  // Choose the pair of NIC ports: fewest hops, then widest, then the GPUs' own NICs.
  struct Choice {
    const NicPortRef* a;
    const NicPortRef* b;
  };
  std::vector<Choice> best;
  int best_hops = std::numeric_limits<int>::max();
  double best_width = 0;
  int best_affinity = -1;
  const LocalTree& to_dst = local_tree(dst_offset);
  const Vertex dst_base = node_first_[static_cast<std::size_t>(d.node)];
  for (const NicPortRef& b : node_ports_[static_cast<std::size_t>(d.node)]) {
    const int h3 = to_dst.hops[b.nic - dst_base];
    if (h3 < 0) continue;
    const double w3 = to_dst.width[b.nic - dst_base];
    const Vertex leaf_b = boost::source(b.down, g);
    if (plane >= 0 && topo_.device(leaf_b).plane != plane) continue;
    const LocalTree& ft = fabric_tree(leaf_b);
    for (const NicPortRef& a : node_ports_[static_cast<std::size_t>(s.node)]) {
      if (a.nic == b.nic) continue;  // a path visits a NIC once
      const LocalTree& to_nic = local_tree(a.nic - node_first_[static_cast<std::size_t>(s.node)]);
      const int h1 = to_nic.hops[src_offset];
      if (h1 < 0) continue;
      const Vertex leaf_a = boost::target(a.up, g);
      const int h2 = ft.hops[static_cast<std::size_t>(fabric_index_[leaf_a])];
      if (h2 < 0) continue;
      const int hops = h1 + 1 + h2 + 1 + h3;
      const double width = std::min({to_nic.width[src_offset], topo_.link(a.up).bandwidth.value(),
                                     ft.width[static_cast<std::size_t>(fabric_index_[leaf_a])], topo_.link(b.down).bandwidth.value(), w3});
      const int affinity = (s.kind == DeviceKind::gpu && topo_.device(a.nic).local_index == s.local_index ? 1 : 0) +
                           (d.kind == DeviceKind::gpu && topo_.device(b.nic).local_index == d.local_index ? 1 : 0);
      const bool fewer = hops < best_hops;
      const bool wider = hops == best_hops && width > best_width * (1 + kTie);
      const bool same_width = hops == best_hops && !wider && width >= best_width * (1 - kTie);
      if (fewer || wider || (same_width && affinity > best_affinity)) {
        best.clear();
        best_hops = hops;
        best_width = width;
        best_affinity = affinity;
      }
      if (hops == best_hops && width >= best_width * (1 - kTie) && affinity == best_affinity) best.push_back({&a, &b});
    }
  }
  if (best.empty()) return std::nullopt;
  const Choice c = best[pick(best.size(), flow_id, hop++, src, dst_index, divisor)];
  // Source node, up to the NIC, and onto its leaf.
  walk_local(s.node, src, c.a->nic - node_first_[static_cast<std::size_t>(s.node)], p, flow_id, divisor, hop, dst_index);
  p.links.push_back(c.a->up);
  Vertex u = boost::target(c.a->up, g);
  p.devices.push_back(u);
  // Through the fabric to the destination's leaf.
  const Vertex leaf_b = boost::source(c.b->down, g);
  const LocalTree& ft = fabric_tree(leaf_b);
  std::vector<Edge> candidates;
  while (u != leaf_b) {
    candidates.clear();
    const auto iu = static_cast<std::size_t>(fabric_index_[u]);
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const int iw = fabric_index_[boost::target(*e, g)];
      if (iw < 0 || ft.hops[static_cast<std::size_t>(iw)] != ft.hops[iu] - 1) continue;
      if (std::min(topo_.link(*e).bandwidth.value(), ft.width[static_cast<std::size_t>(iw)]) < ft.width[iu] * (1 - kTie)) continue;
      candidates.push_back(*e);
    }
    const Edge chosen = candidates[pick(candidates.size(), flow_id, hop++, src, dst_index, divisor)];
    p.links.push_back(chosen);
    u = boost::target(chosen, g);
    p.devices.push_back(u);
  }
  // Into the destination node.
  p.links.push_back(c.b->down);
  p.devices.push_back(c.b->nic);
  walk_local(d.node, c.b->nic, dst_offset, p, flow_id, divisor, hop, dst_index);
  finish(p);
  return p;
}

}  // namespace cs::topology
