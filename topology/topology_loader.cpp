#include "clustersim/topology/topology_loader.hpp"

#include <numeric>

#include <fmt/format.h>

#include "clustersim/topology/routing.hpp"

namespace cs::topology {

void read_topology(const yaml::Node& node, TopologySpec& spec, IncludeStack& includes) {
  yaml::Map m(node);
  spec.where = node;
  if (auto base = m.find("extends")) {
    spec = load_topology_spec(resolve_part(*base, "topologies"), includes, base->where());
  }
  m.read("name", spec.name, yaml::name());
  m.read("description", spec.description);
  if (auto n = m.find("node")) spec.node = load_node_reference(*n, includes);
  if (auto n = m.find("nodes")) {
    spec.nodes = n->as<int>(yaml::in_range(1, 1'000'000, "a node count from 1 to 1000000"));
    spec.nodes_where = *n;
  }
  if (auto f = m.find("fabric")) read_fabric(*f, spec.fabric);
  m.finish();
  if (spec.name.empty()) m.at("name", "a topology name");
  if (!spec.node) m.at("node", "a node template (shipped name, path or map)");
}

TopologySpec load_topology_spec(const std::filesystem::path& file, IncludeStack& includes, const SourceLocation& from) {
  auto guard = includes.enter(file, from);
  auto doc = yaml::Document::load_file(file);
  TopologySpec spec;
  read_topology(part_body(doc->root(), "topology"), spec, includes);
  return spec;
}

Topology build_topology(const TopologySpec& spec) {
  const NodeTemplate& t = *spec.node;
  const long long gpus = static_cast<long long>(spec.nodes) * t.gpus();
  if (gpus > kMaxGpus) {
    const std::string msg = fmt::format("{} nodes of {} GPUs are {} GPUs; at most {} are supported", spec.nodes, t.gpus(), gpus, kMaxGpus);
    if (spec.nodes_where) spec.nodes_where->fail(fmt::format("at most {} GPUs in all", kMaxGpus), fmt::format("{} ({})", spec.nodes, msg));
    throw InputError(msg);
  }
  if (spec.nodes > 1 && t.nic_ports() == 0) {
    const std::string msg = fmt::format("node template '{}' has no NICs, so {} nodes cannot be joined by a fabric", t.name, spec.nodes);
    if (spec.nodes_where) spec.nodes_where->fail_message(msg);
    throw InputError(msg);
  }
  if (spec.nodes > 1 && spec.fabric.kind == FabricKind::none) {
    // A fabric map of kind none is what to blame (its kind, or the map when it gives none); without
    // a map, the node count.
    if (spec.fabric.where) {
      const yaml::Node& at = spec.fabric.kind_where ? *spec.fabric.kind_where : *spec.fabric.where;
      at.fail_message(fmt::format("a fabric of kind none{} joins no nodes, and the topology has {} (set kind: fat-tree, rail-optimized or rail-only)",
                                  spec.fabric.kind_where ? "" : " (the default)", spec.nodes));
    }
    const std::string msg = fmt::format("{} nodes need a fabric to join them (add a 'fabric:' map)", spec.nodes);
    if (spec.nodes_where) spec.nodes_where->fail_message(msg);
    throw InputError(msg);
  }
  Topology topo;
  topo.name = spec.name;
  topo.description = spec.description;
  topo.set_node_count(spec.nodes);
  std::vector<std::vector<NicPort>> ports(static_cast<std::size_t>(spec.nodes));
  for (int n = 0; n < spec.nodes; ++n) ports[static_cast<std::size_t>(n)] = instantiate_node(t, n, topo);
  build_fabric(spec.fabric, ports, topo);
  topo.fabric_kind = std::string(to_string(spec.fabric.kind));
  topo.technology = spec.fabric.kind == FabricKind::none ? std::string() : std::string(to_string(spec.fabric.technology));
  topo.fabric_tiers = spec.fabric.kind == FabricKind::none ? 0 : static_cast<int>(spec.fabric.tiers.size());
  topo.fabric_planes = spec.fabric.kind == FabricKind::none ? 1 : spec.fabric.planes;
  topo.in_network_reduction = spec.fabric.kind != FabricKind::none && spec.fabric.in_network_reduction;
  topo.qps_per_connection = spec.fabric.kind != FabricKind::none ? spec.fabric.qps_per_connection : 1;
  topo.node_template = t.name;
  topo.gpu = std::make_shared<const hardware::HardwareProfile>(t.gpu);

  // Several NICs a GPU (an AWS p5's 32 x 100G EFA for 8 GPUs): routing takes one NIC for a GPU's
  // traffic between nodes, where NCCL gives each NIC channels of its own, so such a node would get
  // a fraction of its network. Said where the topology is read; a node of one NIC a GPU at their sum
  // (8 x 400G for the p5) models the same network.
  if (spec.fabric.kind != FabricKind::none && spec.nodes > 1) {
    int nics = 0, gpus = 0;
    for (std::size_t i = 0; i < topo.device_count(); ++i) {
      const auto& d = topo.device(static_cast<Vertex>(i));
      if (d.node != 0) continue;
      nics += d.kind == DeviceKind::nic;
      gpus += d.kind == DeviceKind::gpu;
    }
    if (gpus > 0 && nics >= 2 * gpus) {
      topo.assumptions.push_back(fmt::format("{} NICs for {} GPUs a node: a GPU's traffic between nodes leaves by one NIC (not modelled: NCCL's channels on "
                                             "each of a GPU's NICs), so collectives get {} of the network; model one NIC a GPU at their summed rate",
                                             nics, gpus, fmt::format("{}/{}", gpus / std::gcd(gpus, nics), nics / std::gcd(gpus, nics))));
    }
  }
  // Every GPU must reach every other; one backward search to GPU 0 finds a GPU that cannot.
  const Router router(topo);
  const std::vector<int>& dist = router.distances_to(topo.gpus().front());
  for (Vertex v : topo.gpus()) {
    if (dist[v] < 0) {
      const std::string msg = fmt::format(
          "the topology is disconnected: {} cannot reach {} (check the node template's links and the fabric)",
          topo.device(v).name, topo.device(topo.gpus().front()).name);
      if (spec.where) spec.where->fail_message(msg);
      throw InputError(msg);
    }
  }
  return topo;
}

Topology load_topology(std::string_view reference) {
  IncludeStack includes;
  return build_topology(load_topology_spec(resolve_part(reference, "topologies"), includes));
}

Topology load_topology_reference(const yaml::Node& node, IncludeStack& includes) {
  if (node.is_map()) {
    TopologySpec spec;
    read_topology(node, spec, includes);
    return build_topology(spec);
  }
  return build_topology(load_topology_spec(resolve_part(node, "topologies"), includes, node.where()));
}

}  // namespace cs::topology
