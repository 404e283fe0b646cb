#include "clustersim/topology/fabric.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace cs::topology {

std::string_view to_string(FabricKind k) {
  switch (k) {
    case FabricKind::none: return "none";
    case FabricKind::fat_tree: return "fat-tree";
    case FabricKind::rail_optimized: return "rail-optimized";
    case FabricKind::rail_only: return "rail-only";
  }
  return "?";
}

std::string_view to_string(Technology t) { return t == Technology::infiniband ? "infiniband" : "roce"; }

Seconds default_switch_latency(Technology t) {
  // InfiniBand: 90 ns port to port, NVIDIA Quantum QM8700 (HDR) product brief; NVIDIA publishes no
  // figure for Quantum-2 (NDR), so the HDR figure stands in for it.
  // RoCE: no Ethernet AI-fabric ASIC (Spectrum-4, Tomahawk 4/5) publishes a port-to-port latency.
  // 600 ns is an assumption in the range of measured store-and-forward data-centre switches
  // (sub-microsecond; Network World's Force10 S4810 review); set switch_latency from measurements.
  return t == Technology::infiniband ? Seconds(90e-9) : Seconds(600e-9);
}

Seconds default_cable_latency(Technology) {
  // Light in fibre travels about 5 ns per metre (refractive index ~1.47); 10 m of cable and the
  // transceivers' serialisation are taken as 50 ns per hop.
  return Seconds(50e-9);
}

void read_fabric(const yaml::Node& node, FabricSpec& spec) {
  yaml::Map m(node);
  spec.where = node;
  if (auto k = m.find("kind")) {
    const std::string kind = yaml::parse_choice(*k, {"none", "fat-tree", "rail-optimized", "rail-only"});
    const FabricKind before = spec.kind;
    spec.kind = kind == "none"             ? FabricKind::none
                : kind == "fat-tree"       ? FabricKind::fat_tree
                : kind == "rail-optimized" ? FabricKind::rail_optimized
                                           : FabricKind::rail_only;
    spec.kind_where = *k;
    // A kind changed over an `extends:` base drops what the base set that the new kind does not
    // use (a map cannot unset a key, and such keys had been carried along unused): kind none keeps
    // nothing, a fat tree no scalable unit.
    if (spec.kind != before && spec.kind == FabricKind::none) {
      FabricSpec fresh;
      fresh.kind = spec.kind;
      fresh.where = spec.where;
      fresh.kind_where = spec.kind_where;
      spec = fresh;
    }
    if (spec.kind != before && spec.kind == FabricKind::fat_tree) spec.scalable_unit = 0;
  }
  // Keys that describe what the kind does not have are refused rather than ignored.
  if (spec.kind == FabricKind::none) {
    for (const char* key : {"technology", "scalable_unit", "planes", "link_bandwidth", "switch_latency", "cable_latency", "in_network_reduction", "qps_per_connection",
                            "tiers"}) {
      if (m.has(key)) m.find(key)->fail_message("applies to fat-tree, rail-optimized and rail-only fabrics, not to kind none, which has no switches or cables");
    }
  }
  if (spec.kind == FabricKind::fat_tree && m.has("scalable_unit")) {
    m.find("scalable_unit")->fail_message("applies to rail-optimized and rail-only fabrics, not to a fat-tree, which fills its leaves in node order");
  }
  if (auto t = m.find("technology")) {
    spec.technology = yaml::parse_choice(*t, {"infiniband", "roce"}) == "roce" ? Technology::roce : Technology::infiniband;
    spec.technology_given = true;
  }
  m.read("scalable_unit", spec.scalable_unit, yaml::in_range(1, 65536, "a number of nodes from 1 to 65536"));
  m.read("planes", spec.planes, yaml::in_range(1, 8, "1 to 8 planes"));
  m.read("link_bandwidth", spec.link_bandwidth, yaml::bandwidth());
  m.read("switch_latency", spec.switch_latency, yaml::latency());
  m.read("cable_latency", spec.cable_latency, yaml::latency());
  if (auto sharp = m.find("in_network_reduction")) {
    spec.in_network_reduction = sharp->as<bool>();
    if (spec.in_network_reduction && spec.technology != Technology::infiniband) {
      sharp->fail("false: in-network reduction (SHARP) needs an InfiniBand fabric", "true");
    }
  }
  if (auto q = m.find("qps_per_connection")) {
    // NCCL takes 1 to 128 (NCCL_IB_QPS_PER_CONNECTION); here each queue pair is a flow of its own,
    // so the flows of every transfer between nodes multiply by it: 16 at most, which keeps a ring
    // over 16,384 GPUs near 2 million flows.
    spec.qps_per_connection = q->as<int>(yaml::in_range(
        1, 16, "1 to 16 queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION; NCCL takes up to 128, but each is a flow of its own here)"));
  }
  // Queue pairs spread a connection only where the switches hash flows: InfiniBand routes every
  // queue pair to a destination by one path (also where an `extends:` base set the one and this
  // map the other).
  if (spec.qps_per_connection > 1 && spec.technology != Technology::roce) {
    // Blame this map's key: its qps_per_connection, else the technology it switched to over a base's.
    const auto here = m.find("qps_per_connection");
    const auto technology = m.find("technology");
    if (!here && technology) {
      technology->fail_message(fmt::format("technology infiniband with qps_per_connection {} from the base topology, which spreads traffic on RoCE "
                                           "only (InfiniBand routes every queue pair to a destination by one path): add qps_per_connection: 1",
                                           spec.qps_per_connection));
    }
    (here ? *here : node)
        .fail(fmt::format("qps_per_connection 1 on InfiniBand, whose switches route every queue pair to a destination by one path (it spreads "
                          "traffic on RoCE, whose switches hash each queue pair's UDP port)"),
              fmt::format("{} with technology infiniband", spec.qps_per_connection));
  }
  // The same of the merged fabric, where an `extends:` base set one and this map the other (SHARP
  // from the base with RoCE here had been simulated as CollNet on Ethernet).
  if (spec.in_network_reduction && spec.technology != Technology::infiniband) {
    const auto technology = m.find("technology");
    (technology ? *technology : node)
        .fail_message("technology roce with in-network reduction (SHARP) from the base topology, which needs InfiniBand: add in_network_reduction: false");
  }
  if (auto tiers = m.find("tiers")) {
    spec.tiers.clear();
    for (const yaml::Node& item : tiers->items()) {
      yaml::Map t(item);
      TierSpec tier;
      tier.radix = t.get<int>("radix", yaml::in_range(2, 4096, "a switch radix from 2 to 4096 ports"));
      tier.oversubscription = t.get_or<double>(
          "oversubscription", 1.0, yaml::in_range(1.0, 64.0, "a down:up ratio from 1 to 64"));
      t.finish();
      spec.tiers.push_back(tier);
    }
    if (spec.tiers.empty() || spec.tiers.size() > 3) tiers->fail("a list of 1 to 3 tiers (leaf, spine, core)");
    // A down:up ratio thins a tier's links to the tier above: the top tier has none.
    const yaml::Node top = tiers->items().back();
    if (spec.tiers.back().oversubscription != 1.0) {
      yaml::Map(top).at("oversubscription", "").fail(spec.tiers.size() == 1 ? "no oversubscription on a one-tier fabric (its switches have no uplinks)"
                                                                             : "no oversubscription on the top tier (its switches have no uplinks; set it on a tier below)",
                                                     fmt::format("{:g}", spec.tiers.back().oversubscription));
    }
  }
  m.finish();
}

namespace {

// The smallest divisor of n that is at least `at_least`, or 0 when there is none.
int smallest_divisor_at_least(int n, int at_least) {
  for (int d = std::max(1, at_least); d <= n; ++d) {
    if (n % d == 0) return d;
  }
  return 0;
}

int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

class Builder {
 public:
  Builder(const FabricSpec& spec, Topology& topo) : spec_(spec), topo_(topo) {
    switch_latency_ = spec.switch_latency.value_or(default_switch_latency(spec.technology));
    cable_latency_ = spec.cable_latency.value_or(default_cable_latency(spec.technology));
    if (!spec.technology_given) {
      topo.assumptions.push_back("technology infiniband (the default: InfiniBand links, routed by destination; set fabric.technology: roce for "
                                 "Ethernet, whose switches hash flows over equal-cost paths)");
    }
    if (!spec.switch_latency) {
      topo.assumptions.push_back(fmt::format("switch latency {} per hop ({} default{}; set fabric.switch_latency)", to_string(switch_latency_),
                                             to_string(spec.technology),
                                             spec.technology == Technology::roce ? ", an assumption: no vendor publishes one" : ", Quantum HDR figure"));
    }
    if (!spec.cable_latency) {
      topo.assumptions.push_back(fmt::format("cable latency {} per fabric link (default: ~10 m of fibre; set fabric.cable_latency)",
                                             to_string(cable_latency_)));
    }
    link_kind_ = spec.technology == Technology::infiniband ? LinkKind::infiniband : LinkKind::ethernet;
  }

  [[noreturn]] void fail(const std::string& message) const {
    if (spec_.where) spec_.where->fail_message(message);
    throw InputError(message);
  }

  void build(const std::vector<std::vector<NicPort>>& ports_by_node) {
    if (spec_.tiers.empty()) fail("a fabric needs 'tiers' (a list of 1 to 3 tiers with their radix)");
    for (int plane = 0; plane < spec_.planes; ++plane) build_plane(plane, ports_by_node);
  }

 private:
  struct Endpoint {
    int node;
    NicPort port;
  };
  struct LeafGroup {
    std::vector<Endpoint> endpoints;
    int unit = -1;
    int rail = -1;
  };

  std::string prefix(int plane, int set) const {
    std::string p = spec_.planes > 1 ? fmt::format("p{}.", plane) : std::string();
    if (spec_.kind == FabricKind::rail_only) p += fmt::format("r{}.", set);
    return p;
  }

  Vertex add_switch(DeviceKind kind, int tier, int plane, int unit, int rail, std::string name) {
    Device d;
    d.name = std::move(name);
    d.kind = kind;
    d.tier = tier;
    d.plane = plane;
    d.unit = unit;
    d.rail = rail;
    d.latency = switch_latency_;
    return topo_.add_device(std::move(d));
  }

  // Parallel cables between two switches: one link of their summed rate where the switches route by
  // destination (InfiniBand's D-mod-k spreads destinations over them evenly), one link each where
  // they hash flows (Ethernet ECMP takes each cable as a next hop of its own, so two flows can meet
  // on one while another idles).
  void connect(Vertex lower, Vertex upper, int lanes, BytesPerSec per_lane, int tier) {
    if (spec_.technology == Technology::roce && lanes > 1) {
      for (int lane = 0; lane < lanes; ++lane) {
        topo_.add_link(lower, upper, Link{.kind = link_kind_, .bandwidth = per_lane, .latency = cable_latency_, .lanes = 1, .tier = tier});
      }
      return;
    }
    topo_.add_link(lower, upper,
                   Link{.kind = link_kind_, .bandwidth = per_lane * lanes, .latency = cable_latency_, .lanes = lanes, .tier = tier});
  }

  // Down and up ports of a spine in a 3-tier fabric.
  std::pair<int, int> spine_ports() const {
    const TierSpec& mid = spec_.tiers[1];
    const int up = static_cast<int>(std::floor(mid.radix / (mid.oversubscription + 1.0)));
    const int down = static_cast<int>(std::lround(up * mid.oversubscription));
    if (up < 1 || down < 1) fail(fmt::format("spine radix {} cannot be split {}:1 into down and up ports", mid.radix, mid.oversubscription));
    return {down, up};
  }

  void build_plane(int plane, const std::vector<std::vector<NicPort>>& ports_by_node) {
    std::vector<Endpoint> endpoints;
    for (std::size_t n = 0; n < ports_by_node.size(); ++n) {
      for (const NicPort& p : ports_by_node[n]) {
        if (p.port >= spec_.planes) {
          fail(fmt::format("every NIC port must attach to a plane: the node's NICs have {} ports but the fabric has {} plane{}",
                           p.port + 1, spec_.planes, spec_.planes == 1 ? "" : "s"));
        }
        if (p.port == plane) endpoints.push_back({static_cast<int>(n), p});
      }
    }
    if (endpoints.empty()) fail(fmt::format("plane {} has no NIC ports to connect (do the nodes have NICs with {} ports?)", plane, spec_.planes));
    if (!link_bandwidth_) {
      BytesPerSec fastest;
      for (const auto& e : endpoints) fastest = std::max(fastest, e.port.rate);
      link_bandwidth_ = spec_.link_bandwidth.value_or(fastest);
      if (!spec_.link_bandwidth) {
        topo_.assumptions.push_back(fmt::format("switch-to-switch links at {} (the NIC port rate; set fabric.link_bandwidth)",
                                                to_string(*link_bandwidth_)));
      }
    }

    const TierSpec& leaf = spec_.tiers[0];
    std::vector<LeafGroup> groups;
    int down = 0, up = 0;
    if (spec_.kind == FabricKind::fat_tree) {
      up = static_cast<int>(std::floor(leaf.radix / (leaf.oversubscription + 1.0)));
      down = static_cast<int>(std::lround(up * leaf.oversubscription));
      if (spec_.tiers.size() == 1) {
        down = leaf.radix;
        up = 0;
      }
      if (down < 1) fail(fmt::format("leaf radix {} leaves no down ports at oversubscription {}", leaf.radix, leaf.oversubscription));
      // In three tiers a leaf's unit is its pod (a spine's worth of leaves); otherwise it has none.
      const int pod_leaves = spec_.tiers.size() == 3 ? spine_ports().first : 0;
      for (std::size_t i = 0; i < endpoints.size(); i += static_cast<std::size_t>(down)) {
        LeafGroup g;
        const int leaf_index = static_cast<int>(i / static_cast<std::size_t>(down));
        g.unit = pod_leaves > 0 ? leaf_index / pod_leaves : -1;
        for (std::size_t j = i; j < std::min(endpoints.size(), i + static_cast<std::size_t>(down)); ++j) g.endpoints.push_back(endpoints[j]);
        groups.push_back(std::move(g));
      }
    } else {
      if (spec_.scalable_unit <= 0) fail(fmt::format("a {} fabric needs 'scalable_unit' (nodes per scalable unit)", to_string(spec_.kind)));
      std::map<std::pair<int, int>, LeafGroup> by_unit_rail;
      std::map<std::pair<int, int>, int> per_node_rail;
      int per_rail_per_node = 0;
      for (const auto& e : endpoints) {
        const int unit = e.node / spec_.scalable_unit;
        LeafGroup& g = by_unit_rail[{unit, e.port.rail}];
        g.unit = unit;
        g.rail = e.port.rail;
        g.endpoints.push_back(e);
        per_rail_per_node = std::max(per_rail_per_node, ++per_node_rail[{e.node, e.port.rail}]);
      }
      for (auto& [key, g] : by_unit_rail) groups.push_back(std::move(g));
      // Every leaf is provisioned for a full SU, as reference architectures do, so a partial SU
      // still has full-SU uplinks.
      down = per_rail_per_node * spec_.scalable_unit;
      up = spec_.tiers.size() == 1 ? 0 : static_cast<int>(std::ceil(down / leaf.oversubscription));
      if (down + up > leaf.radix) {
        fail(fmt::format("a leaf serves {} NIC ports of one rail in a scalable unit and needs {} uplinks at {}:1, "
                         "{} ports in all, more than its radix {}",
                         down, up, leaf.oversubscription, down + up, leaf.radix));
      }
    }

    // Leaf sets that share upper tiers: all leaves, or (rail-only) the leaves of one rail.
    std::map<int, std::vector<std::size_t>> sets;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      sets[spec_.kind == FabricKind::rail_only ? groups[i].rail : 0].push_back(i);
    }
    for (const auto& [set, members] : sets) {
      const std::string pre = prefix(plane, set);
      set_rail_ = spec_.kind == FabricKind::rail_only ? set : -1;
      std::vector<Vertex> leaves;
      for (std::size_t k = 0; k < members.size(); ++k) {
        const LeafGroup& g = groups[members[k]];
        const Vertex v = add_switch(DeviceKind::leaf, 1, plane, g.unit, g.rail, fmt::format("{}leaf{}", pre, k));
        for (const Endpoint& e : g.endpoints) {
          topo_.add_link(e.port.nic, v, Link{.kind = link_kind_, .bandwidth = e.port.rate, .latency = cable_latency_, .tier = 0});
        }
        leaves.push_back(v);
      }
      if (spec_.tiers.size() == 1) {
        if (leaves.size() > 1) {
          fail(fmt::format("one tier of radix {} cannot join {} leaves: add a spine tier", leaf.radix, leaves.size()));
        }
        continue;
      }
      if (spec_.tiers.size() == 2) {
        build_two_tier(plane, pre, leaves, up);
      } else {
        build_three_tier(plane, pre, leaves, up);
      }
    }
  }

  void build_two_tier(int plane, const std::string& pre, const std::vector<Vertex>& leaves, int up) {
    const int radix = spec_.tiers[1].radix;
    if (spec_.tiers[1].oversubscription != 1.0) fail("the top tier has no uplinks: its oversubscription must be 1");
    const int needed = ceil_div(static_cast<long long>(leaves.size()) * up, radix);
    const int spines = smallest_divisor_at_least(up, needed);
    if (spines == 0) {
      fail(fmt::format("{} leaves with {} uplinks each need more than {} spines of radix {}; a 2-tier fabric of this radix "
                       "joins at most {} leaves: add a core tier",
                       leaves.size(), up, up, radix, radix));
    }
    const int lanes = up / spines;
    std::vector<Vertex> spine(static_cast<std::size_t>(spines));
    for (int s = 0; s < spines; ++s) spine[static_cast<std::size_t>(s)] = add_switch(DeviceKind::spine, 2, plane, -1, set_rail_, fmt::format("{}spine{}", pre, s));
    for (Vertex l : leaves) {
      for (Vertex s : spine) connect(l, s, lanes, *link_bandwidth_, 1);
    }
  }

  void build_three_tier(int plane, const std::string& pre, const std::vector<Vertex>& leaves, int up) {
    const TierSpec& top = spec_.tiers[2];
    if (top.oversubscription != 1.0) fail("the top tier has no uplinks: its oversubscription must be 1");
    const auto [mid_down, mid_up] = spine_ports();
    // Each leaf has one cable to each of the `up` spines of its pod; a pod holds mid_down leaves.
    const int per_pod = mid_down;
    const int pods = ceil_div(static_cast<long long>(leaves.size()), per_pod);
    const int needed = ceil_div(static_cast<long long>(pods) * mid_up, top.radix);
    const int cores_per_group = smallest_divisor_at_least(mid_up, needed);
    if (cores_per_group == 0) {
      fail(fmt::format("{} pods need more core ports than cores of radix {} offer; a 3-tier fabric of these radixes joins at most {} pods",
                       pods, top.radix, top.radix));
    }
    const int core_lanes = mid_up / cores_per_group;
    // Core group a serves spine a of every pod (the k-ary fat-tree wiring of Al-Fares et al. 2008).
    std::vector<std::vector<Vertex>> cores(static_cast<std::size_t>(up));
    int core_index = 0;
    for (int a = 0; a < up; ++a) {
      for (int c = 0; c < cores_per_group; ++c) {
        cores[static_cast<std::size_t>(a)].push_back(add_switch(DeviceKind::core, 3, plane, -1, set_rail_, fmt::format("{}core{}", pre, core_index++)));
      }
    }
    int spine_index = 0;
    for (int pod = 0; pod < pods; ++pod) {
      for (int a = 0; a < up; ++a) {
        const Vertex s = add_switch(DeviceKind::spine, 2, plane, pod, set_rail_, fmt::format("{}spine{}", pre, spine_index++));
        for (int l = pod * per_pod; l < std::min<int>(static_cast<int>(leaves.size()), (pod + 1) * per_pod); ++l) {
          connect(leaves[static_cast<std::size_t>(l)], s, 1, *link_bandwidth_, 1);
        }
        for (Vertex c : cores[static_cast<std::size_t>(a)]) connect(s, c, core_lanes, *link_bandwidth_, 2);
      }
    }
  }

  const FabricSpec& spec_;
  Topology& topo_;
  Seconds switch_latency_;
  Seconds cable_latency_;
  LinkKind link_kind_;
  std::optional<BytesPerSec> link_bandwidth_;
  int set_rail_ = -1;  // rail-only: the rail whose upper tiers are being built
};

}  // namespace

void build_fabric(const FabricSpec& spec, const std::vector<std::vector<NicPort>>& ports_by_node, Topology& topo) {
  if (spec.kind == FabricKind::none) {
    if (ports_by_node.size() > 1) {
      if (spec.where) spec.where->fail_message("fabric kind 'none' joins nothing: a topology of several nodes needs a fabric");
      throw InputError("a topology of several nodes needs a fabric");
    }
    return;
  }
  Builder(spec, topo).build(ports_by_node);
}

}  // namespace cs::topology
