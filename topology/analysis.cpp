#include "clustersim/topology/analysis.hpp"

#include <algorithm>
#include <unordered_map>

#include "clustersim/topology/max_flow.hpp"

namespace cs::topology {

namespace {

// Max flow between GPU halves of node 0, over the node's own links.
BytesPerSec node_bisection(const Topology& topo) {
  const Graph& g = topo.graph();
  std::vector<Vertex> gpus;
  for (Vertex v : topo.gpus()) {
    if (topo.device(v).node == 0) gpus.push_back(v);
  }
  if (gpus.size() < 2) return BytesPerSec(0);
  FlowNetwork net(boost::num_vertices(g) + 2);
  const std::size_t source = boost::num_vertices(g), sink = source + 1;
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Vertex a = boost::source(*e, g), b = boost::target(*e, g);
    if (topo.device(a).node == 0 && topo.device(b).node == 0) net.add_arc(a, b, topo.link(*e).bandwidth);
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (i < gpus.size() / 2) {
      net.add_unbounded_arc(source, gpus[i]);
    } else {
      net.add_unbounded_arc(gpus[i], sink);
    }
  }
  return net.max_flow(source, sink);
}

// Max flow from node 0's GPUs into the fabric.
BytesPerSec node_injection(const Topology& topo) {
  const Graph& g = topo.graph();
  FlowNetwork net(boost::num_vertices(g) + 2);
  const std::size_t source = boost::num_vertices(g), sink = source + 1;
  bool any = false;
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Vertex a = boost::source(*e, g), b = boost::target(*e, g);
    if (topo.device(a).node != 0) continue;
    if (topo.device(b).node == 0) {
      net.add_arc(a, b, topo.link(*e).bandwidth);
    } else if (topo.link(*e).tier == 0) {
      net.add_arc(a, sink, topo.link(*e).bandwidth);
      any = true;
    }
  }
  if (!any) return BytesPerSec(0);
  for (Vertex v : topo.gpus()) {
    if (topo.device(v).node == 0) net.add_unbounded_arc(source, v);
  }
  return net.max_flow(source, sink);
}

// Max flow through the fabric from the NIC ports of nodes on side A to those on side B.
BytesPerSec fabric_cut(const Topology& topo, const std::vector<char>& side_a) {
  const Graph& g = topo.graph();
  // Fabric switches keep their vertex ids; each NIC-leaf cable gets its own port vertex so that
  // a dual-port NIC cannot relay between planes.
  FlowNetwork net(boost::num_vertices(g) + 2);
  const std::size_t source = boost::num_vertices(g), sink = source + 1;
  std::unordered_map<std::uint32_t, std::size_t> port_of_link;  // id of the NIC->leaf direction
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Link& l = topo.link(*e);
    if (l.tier < 0) continue;
    const Vertex a = boost::source(*e, g), b = boost::target(*e, g);
    const Device& da = topo.device(a);
    const Device& db = topo.device(b);
    if (l.tier > 0) {
      net.add_arc(a, b, l.bandwidth);
      continue;
    }
    // NIC <-> leaf: the two directions share one port vertex, found by the even link id.
    const bool up = da.kind == DeviceKind::nic;
    const std::uint32_t key = l.id & ~1u;
    auto [it, fresh] = port_of_link.emplace(key, 0);
    if (fresh) {
      it->second = net.add_vertex();
      const int node = up ? da.node : db.node;
      if (side_a[static_cast<std::size_t>(node)]) {
        net.add_unbounded_arc(source, it->second);
      } else {
        net.add_unbounded_arc(it->second, sink);
      }
    }
    if (up) {
      net.add_arc(it->second, b, l.bandwidth);
    } else {
      net.add_arc(a, it->second, l.bandwidth);
    }
  }
  return net.max_flow(source, sink);
}

}  // namespace

std::vector<TierSummary> fabric_tiers(const Topology& topo) {
  const Graph& g = topo.graph();
  std::map<int, TierSummary> tiers;
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    const Device& d = topo.device(*v);
    if (d.tier <= 0) continue;
    TierSummary& t = tiers[d.tier];
    t.tier = d.tier;
    t.name = std::string(to_string(d.kind));
    ++t.switches;
  }
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Device& from = topo.device(boost::source(*e, g));
    const Device& to = topo.device(boost::target(*e, g));
    if (from.tier > 0) {
      TierSummary& t = tiers[from.tier];
      (to.tier > from.tier ? t.up : t.down) += topo.link(*e).bandwidth;
    }
  }
  std::vector<TierSummary> out;
  for (auto& [tier, t] : tiers) out.push_back(t);
  return out;
}

TopologySummary summarize(const Topology& topo, const Router& router) {
  const Graph& g = topo.graph();
  TopologySummary s;
  s.name = topo.name;
  s.description = topo.description;
  s.node_template = topo.node_template;
  s.fabric_kind = topo.fabric_kind;
  s.technology = topo.technology;
  s.qps_per_connection = topo.qps_per_connection;
  s.nodes = topo.node_count();
  s.gpus = static_cast<int>(topo.gpus().size());
  s.gpus_per_node = s.nodes > 0 ? s.gpus / s.nodes : 0;
  s.assumptions = topo.assumptions;

  std::vector<int> ports(boost::num_vertices(g), 0);
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    const Device& d = topo.device(*v);
    ++s.devices[d.kind];
    if (d.kind == DeviceKind::nvswitch) s.nvswitch_chips += d.chips;
  }
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Link& l = topo.link(*e);
    if ((l.id & 1u) == 0) s.cables[l.kind] += l.lanes;
    ports[boost::source(*e, g)] += l.lanes;
  }
  s.tiers = fabric_tiers(topo);
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    const Device& d = topo.device(*v);
    for (TierSummary& t : s.tiers) {
      if (t.tier == d.tier) t.max_ports = std::max(t.max_ports, ports[*v]);
    }
  }

  // Every template GPU, as node 0 holds them: a template may wire its GPUs differently.
  bool first_gpu = true;
  for (const Vertex gpu : topo.gpus()) {
    if (topo.device(gpu).node != 0) continue;
    BytesPerSec nvlink;
    for (auto [e, end] = boost::out_edges(gpu, g); e != end; ++e) {
      if (topo.link(*e).kind == LinkKind::nvlink) nvlink += topo.link(*e).bandwidth;
    }
    s.scale_up_per_gpu = first_gpu ? nvlink : std::min(s.scale_up_per_gpu, nvlink);
    s.scale_up_per_gpu_max = first_gpu ? nvlink : std::max(s.scale_up_per_gpu_max, nvlink);
    first_gpu = false;
  }
  if (s.gpus_per_node > 0) {
    s.injection_per_gpu = node_injection(topo) / s.gpus_per_node;
    s.node_bisection = node_bisection(topo);
  }

  if (s.nodes > 1 && !s.tiers.empty()) {
    const auto n = static_cast<std::size_t>(s.nodes);
    std::vector<char> halves(n), interleaved(n);
    for (std::size_t i = 0; i < n; ++i) {
      halves[i] = i < n / 2;
      interleaved[i] = i % 2 == 0;
    }
    const BytesPerSec a = fabric_cut(topo, halves);
    const BytesPerSec b = fabric_cut(topo, interleaved);
    s.bisection = std::min(a, b);
    s.bisection_split = a <= b ? "first half / second half of the nodes" : "even / odd nodes";
  }

  // Diameter: eccentricity of every GPU of the sampled destination nodes.
  std::vector<int> sample_nodes;
  if (s.nodes <= kDiameterSampleNodes) {
    for (int i = 0; i < s.nodes; ++i) sample_nodes.push_back(i);
  } else {
    s.diameter_exact = false;
    for (int i = 0; i < kDiameterSampleNodes; ++i) {
      sample_nodes.push_back(static_cast<int>(static_cast<long long>(i) * (s.nodes - 1) / (kDiameterSampleNodes - 1)));
    }
  }
  for (int node : sample_nodes) {
    for (int k = 0; k < s.gpus_per_node; ++k) {
      const Vertex dst = topo.gpus()[static_cast<std::size_t>(node * s.gpus_per_node + k)];
      const std::vector<int>& dist = router.distances_to(dst);
      ++s.diameter_sources;
      for (Vertex src : topo.gpus()) s.diameter = std::max(s.diameter, dist[src]);
    }
  }
  return s;
}

}  // namespace cs::topology
