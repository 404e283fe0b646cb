// The order each ring visits the group's GPUs in (build_ring in ring.cpp builds the flows).
// Rail-aligned entries: ring r enters node k at member s = (f(r) - k) mod l and leaves from member
// s - 1, where it enters node k + 1 (ring_starts chooses f).
//
// Inside a node whose GPUs meet at a switch or a PCIe tree every order of the members loads the
// GPUs' links alike, and the members are visited in local-index order. On a switchless NVLink
// mesh (GPUs joined by direct links) the order decides which links carry the ring, so each ring
// takes, in turn, the path over direct links that keeps the most loaded link least loaded (then
// the least total), as NCCL's search spreads its channels over a mesh's links; with the ring count
// left to the model, the count of 1-4 times a GPU's mesh degree that balances the links best (one
// node) or the member count (several).
#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "collective_builders.hpp"

namespace cs::models::detail {

using topology::Vertex;

namespace {

// The direct links among one node's members, as bytes/s from member i to member j (0: none).
struct Mesh {
  std::size_t k = 0;
  std::vector<double> bytes_per_s;  // k x k, row i the links from member i
  [[nodiscard]] double at(std::size_t i, std::size_t j) const { return bytes_per_s[i * k + j]; }
  [[nodiscard]] std::size_t degree(std::size_t i) const {
    std::size_t d = 0;
    for (std::size_t j = 0; j < k; ++j) d += at(i, j) > 0;
    return d;
  }
};

Mesh direct_links(const CollectiveModel& m, const std::vector<Vertex>& members) {
  const auto& g = m.topology().graph();
  Mesh mesh;
  mesh.k = members.size();
  mesh.bytes_per_s.assign(mesh.k * mesh.k, 0.0);
  for (std::size_t i = 0; i < mesh.k; ++i) {
    for (auto [e, end] = boost::out_edges(members[i], g); e != end; ++e) {
      const auto it = std::find(members.begin(), members.end(), boost::target(*e, g));
      if (it != members.end()) {
        mesh.bytes_per_s[i * mesh.k + static_cast<std::size_t>(it - members.begin())] += m.capacities()[m.topology().link(*e).id];
      }
    }
  }
  return mesh;
}

bool is_mesh(const Mesh& mesh) {
  return mesh.k >= 3 && std::any_of(mesh.bytes_per_s.begin(), mesh.bytes_per_s.end(), [](double b) { return b > 0; });
}

// Branch and bound over the Hamiltonian paths on direct links from `entry` to `exit` (or, without
// an exit, the cycles through `entry`): the one whose most loaded link, counting this ring, is least
// loaded relative to its bandwidth, then the least total. Neighbours are tried least loaded first;
// a partial path is cut when even its remaining edges at the cheapest link's cost cannot beat the
// best found. Each search has a few thousand steps, out of a budget shared by every search of one
// set of rings; one that runs out keeps the best path found (none: the caller falls back).
class PathSearch {
 public:
  PathSearch(const Mesh& mesh, const std::vector<double>& load, long& budget) : mesh_(mesh), load_(load), budget_(budget) {}

  std::vector<std::size_t> find(std::size_t entry, std::optional<std::size_t> exit) {
    entry_ = entry;
    exit_ = exit;
    best_.clear();
    best_max_ = best_sum_ = std::numeric_limits<double>::infinity();
    cheapest_ = std::numeric_limits<double>::infinity();
    for (std::size_t a = 0; a < mesh_.k; ++a) {
      for (std::size_t b = 0; b < mesh_.k; ++b) {
        if (mesh_.at(a, b) > 0) cheapest_ = std::min(cheapest_, cost(a, b));
      }
    }
    path_.assign(1, entry);
    visited_.assign(mesh_.k, false);
    visited_[entry] = true;
    steps_ = kStepsPerSearch;
    visit(entry, 0.0, 0.0);
    return best_;
  }

 private:
  [[nodiscard]] double cost(std::size_t a, std::size_t b) const { return (load_[a * mesh_.k + b] + 1.0) / mesh_.at(a, b); }

  // Whether a path whose most loaded edge so far is `worst` and total `total`, with `left` edges
  // still to add, can no longer beat the best found.
  [[nodiscard]] bool hopeless(double worst, double total, std::size_t left) const {
    const double w = left > 0 ? std::max(worst, cheapest_) : worst, t = total + static_cast<double>(left) * cheapest_;
    return w > best_max_ || (w == best_max_ && t >= best_sum_);
  }

  void visit(std::size_t at, double worst, double total) {
    if (--budget_ < 0 || --steps_ < 0) return;
    if (path_.size() == mesh_.k) {
      if (!exit_) {
        if (mesh_.at(at, entry_) <= 0) return;
        const double c = cost(at, entry_);
        worst = std::max(worst, c);
        total += c;
      }
      if (worst < best_max_ || (worst == best_max_ && total < best_sum_)) {
        best_max_ = worst;
        best_sum_ = total;
        best_ = path_;
      }
      return;
    }
    std::vector<std::pair<double, std::size_t>> next;
    for (std::size_t j = 0; j < mesh_.k; ++j) {
      if (visited_[j] || mesh_.at(at, j) <= 0) continue;
      if (exit_ && j == *exit_ && path_.size() + 1 < mesh_.k) continue;
      next.emplace_back(cost(at, j), j);
    }
    std::sort(next.begin(), next.end());
    // Edges after the next one: to the last member, and back to the entry on a cycle.
    const std::size_t left = mesh_.k - path_.size() - 1 + (exit_ ? 0 : 1);
    for (const auto& [c, j] : next) {
      if (hopeless(std::max(worst, c), total + c, left)) continue;
      visited_[j] = true;
      path_.push_back(j);
      visit(j, std::max(worst, c), total + c);
      path_.pop_back();
      visited_[j] = false;
    }
  }

  static constexpr long kStepsPerSearch = 20'000;  // so that one hard ring leaves steps to the others
  const Mesh& mesh_;
  const std::vector<double>& load_;
  long& budget_;
  long steps_ = 0;
  std::size_t entry_ = 0;
  std::optional<std::size_t> exit_;
  std::vector<std::size_t> path_, best_;
  std::vector<bool> visited_;
  double best_max_ = 0, best_sum_ = 0, cheapest_ = 0;
};

// Where each ring starts, f(r): the member it enters node 0 at. It enters node k at f(r) - k and
// leaves it from the member before, so between nodes k and k + 1 it goes through the NIC of member
// f(r) - k - 1. With at least as many rings as members, f(r) = r mod l. With fewer rings (GPUs
// sharing NICs: 4 rings for 8 GPUs and 4 NICs) the starts are spread so that at every node the
// rings leave through different NICs: r l / R when that does it (GPUs 2i and 2i + 1 on one NIC,
// as PCIe switches pair them), else the first stride that does (GPU i on NIC i mod 4: stride 1).
std::size_t default_start(int r, int rings, std::size_t k) {
  const std::size_t rr = static_cast<std::size_t>(r), count = static_cast<std::size_t>(rings);
  return count < k ? rr * k / count : rr % k;
}

// The starts read from the NICs; empty where every node takes default_start for its own member
// count (one node, enough rings, or nodes of different sizes).
std::vector<std::size_t> ring_starts(const CollectiveModel& m, const Group& g, int rings) {
  const std::size_t k = static_cast<std::size_t>(g.ppn), count = static_cast<std::size_t>(rings);
  if (count >= k || g.nodes.size() < 2 || !g.uniform) return {};
  std::vector<std::size_t> starts(count);
  for (std::size_t r = 0; r < count; ++r) starts[r] = default_start(static_cast<int>(r), rings, k);
  // The NIC each member leaves its node through, from its route to its counterpart in the next node.
  const auto& topo = m.topology();
  std::vector<std::size_t> nic(k);
  for (std::size_t i = 0; i < k; ++i) {
    nic[i] = i;  // no NIC on the route: count the member as its own
    const auto path = m.direct_router().route(g.nodes[0][i], g.nodes[1][i]);
    if (!path) continue;
    for (topology::Edge e : path->links) {
      const Vertex v = boost::target(e, topo.graph());
      if (topo.device(v).kind == topology::DeviceKind::nic) {
        nic[i] = k + v;
        break;
      }
    }
  }
  // The fewest different NICs the rings leave through at any node.
  const auto spread = [&](const std::vector<std::size_t>& f) {
    std::size_t worst = count;
    for (std::size_t shift = 0; shift < k; ++shift) {
      std::vector<std::size_t> used;
      for (std::size_t x : f) used.push_back(nic[(x + 2 * k - shift - 1) % k]);
      std::sort(used.begin(), used.end());
      worst = std::min(worst, static_cast<std::size_t>(std::unique(used.begin(), used.end()) - used.begin()));
    }
    return worst;
  };
  std::vector<std::size_t> best = starts;
  std::size_t best_spread = spread(starts);
  for (std::size_t stride = 1; stride * count <= k && best_spread < count; ++stride) {
    std::vector<std::size_t> f(count);
    for (std::size_t r = 0; r < count; ++r) f[r] = r * stride;
    if (const std::size_t got = spread(f); got > best_spread) {
      best_spread = got;
      best = std::move(f);
    }
  }
  return best;
}

// The member ring r enters node `node` at, for a node of k members.
std::size_t entry_of(const std::vector<std::size_t>& starts, int r, int rings, std::size_t node, std::size_t k) {
  const std::size_t first = starts.empty() ? default_start(r, rings, k) : starts[static_cast<std::size_t>(r)];
  return (first + k - node % k) % k;
}

// Every ring's path through one mesh node (positions into its members), how many rings found one
// over direct links (a ring that finds none, or runs out of steps first, visits the members in
// index order, over whatever paths join them), and the most loaded direct link's load per byte/s.
struct MeshPaths {
  std::vector<std::vector<std::size_t>> paths;
  int found = 0;
  double worst = 0;
};

MeshPaths mesh_paths(const Mesh& mesh, const std::vector<std::size_t>& starts, int rings, std::size_t node, bool closed, long& budget) {
  std::vector<double> load(mesh.k * mesh.k, 0.0);
  PathSearch search(mesh, load, budget);
  MeshPaths out;
  for (int r = 0; r < rings; ++r) {
    const std::size_t s = entry_of(starts, r, rings, node, mesh.k);
    auto path = search.find(s, closed ? std::nullopt : std::optional<std::size_t>((s + mesh.k - 1) % mesh.k));
    if (path.empty()) {
      for (std::size_t i = 0; i < mesh.k; ++i) path.push_back((s + i) % mesh.k);
    } else {
      ++out.found;
    }
    for (std::size_t i = 0; i + 1 < path.size() + (closed ? 1 : 0); ++i) {
      const std::size_t link = path[i] * mesh.k + path[(i + 1) % path.size()];
      if (mesh.bytes_per_s[link] > 0) load[link] += 1.0;
    }
    out.paths.push_back(std::move(path));
  }
  for (std::size_t i = 0; i < load.size(); ++i) {
    if (load[i] > 0) out.worst = std::max(out.worst, load[i] / mesh.bytes_per_s[i]);
  }
  return out;
}

// The orders of `rings` rings; `worst` is the most loaded mesh link's share of the bytes per
// byte/s, `found` the rings that found paths over direct links, summed over mesh nodes.
struct Orders {
  std::vector<std::vector<Vertex>> rings;
  double worst = 0;
  int found = 0;
};

Orders orders_for(const CollectiveModel& m, const Group& g, const std::vector<Mesh>& meshes, int rings, long& budget) {
  const bool closed = g.nodes.size() == 1;
  const std::vector<std::size_t> starts = ring_starts(m, g, rings);
  std::map<std::pair<std::vector<int>, std::size_t>, MeshPaths> cache;  // by local indices and node mod k
  Orders out;
  out.rings.assign(static_cast<std::size_t>(rings), {});
  for (std::size_t node = 0; node < g.nodes.size(); ++node) {
    const auto& members = g.nodes[node];
    const std::size_t k = members.size();
    const MeshPaths* paths = nullptr;
    if (is_mesh(meshes[node])) {
      std::vector<int> locals;
      for (Vertex v : members) locals.push_back(m.topology().device(v).local_index);
      auto key = std::make_pair(std::move(locals), node % k);
      auto it = cache.find(key);
      if (it == cache.end()) it = cache.emplace(std::move(key), mesh_paths(meshes[node], starts, rings, node, closed, budget)).first;
      paths = &it->second;
      out.worst = std::max(out.worst, paths->worst / rings);
      out.found += paths->found;
    }
    for (int r = 0; r < rings; ++r) {
      auto& order = out.rings[static_cast<std::size_t>(r)];
      if (paths) {
        for (std::size_t p : paths->paths[static_cast<std::size_t>(r)]) order.push_back(members[p]);
      } else {
        const std::size_t start = entry_of(starts, r, rings, node, k);
        for (std::size_t i = 0; i < k; ++i) order.push_back(members[(start + i) % k]);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<Vertex>> ring_orders(const CollectiveModel& m, const Group& g, int rings, bool choose_count) {
  std::vector<Mesh> meshes;
  bool any_mesh = false;
  for (const auto& members : g.nodes) {
    meshes.push_back(direct_links(m, members));
    any_mesh |= is_mesh(meshes.back());
  }
  // The search steps all counts and nodes share: a few milliseconds of work at most.
  long budget = 1'000'000;
  if (!any_mesh || !choose_count) return orders_for(m, g, meshes, rings, budget).rings;
  // The count: inside one node, 1-4 times a GPU's direct links (each ring uses one of them),
  // whichever loads them most evenly; between nodes, the members of a node, so that every member's
  // NIC carries as many rings (the NICs, not the mesh, bound those rings: more gain nothing).
  std::size_t base = 0, most = 1;
  if (g.nodes.size() == 1) {
    for (std::size_t i = 0; i < meshes[0].k; ++i) base = std::max(base, meshes[0].degree(i));
    most = 4;
  } else {
    base = static_cast<std::size_t>(g.ppn);
  }
  Orders best;
  double best_time = std::numeric_limits<double>::infinity();
  for (std::size_t times = 1; times <= most; ++times) {
    const int count = std::max(rings, static_cast<int>(base * times));
    Orders o = orders_for(m, g, meshes, count, budget);
    // No ring found a path over direct links: the mesh cannot carry rings, keep the default.
    if (o.found == 0 && best.rings.empty()) return orders_for(m, g, meshes, rings, budget).rings;
    // Each ring carries 1/count of the bytes: the time is the most loaded link's share.
    if (o.found > 0 && o.worst < best_time * (1 - 1e-9)) {
      best_time = o.worst;
      best = std::move(o);
    }
    if (budget <= 0) break;  // the counts after it would search nothing
  }
  return best.rings;
}

}  // namespace cs::models::detail
