// GCC (12 and 14 seen) reports an optional edge iterator in Boost.Graph's
// vec_adj_list_impl::copy_impl as maybe used uninitialized when the copy is inlined: a false
// positive (the optional is engaged before it is read), silenced for this file, the only one that
// copies a graph (Topology's copy and move operations below).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "clustersim/topology/graph.hpp"

#include <algorithm>
#include <cassert>
#include <set>

namespace cs::topology {

Topology::Topology(const Topology& other) = default;
Topology& Topology::operator=(const Topology& other) = default;
Topology::Topology(Topology&& other) noexcept(false) = default;
Topology& Topology::operator=(Topology&& other) noexcept(false) = default;
Topology::~Topology() = default;

int Topology::gpus_of_nodes_holding(int used) const {
  std::set<int> nodes;
  for (std::size_t g = 0; g < gpus_.size() && g < static_cast<std::size_t>(std::max(0, used)); ++g) nodes.insert(graph_[gpus_[g]].node);
  int held = 0;
  for (const Vertex v : gpus_) held += nodes.count(graph_[v].node) > 0 ? 1 : 0;
  return held;
}

std::string_view to_string(DeviceKind k) {
  switch (k) {
    case DeviceKind::gpu: return "gpu";
    case DeviceKind::nvswitch: return "nvswitch";
    case DeviceKind::pcie_switch: return "pcie_switch";
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::nic: return "nic";
    case DeviceKind::leaf: return "leaf";
    case DeviceKind::spine: return "spine";
    case DeviceKind::core: return "core";
  }
  return "?";
}

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::socket: return "socket";
    case LinkKind::c2c: return "c2c";
    case LinkKind::infiniband: return "infiniband";
    case LinkKind::ethernet: return "ethernet";
  }
  return "?";
}

bool is_fabric_switch(DeviceKind k) { return k == DeviceKind::leaf || k == DeviceKind::spine || k == DeviceKind::core; }
bool is_fabric_link(LinkKind k) { return k == LinkKind::infiniband || k == LinkKind::ethernet; }

Vertex Topology::add_device(Device d) {
  assert(!by_name_.count(d.name) && "device names are unique");
  const bool gpu = d.kind == DeviceKind::gpu;
  std::string name = d.name;
  const Vertex v = boost::add_vertex(std::move(d), graph_);
  if (gpu) {
    graph_[v].gpu_rank = static_cast<int>(gpus_.size());
    gpus_.push_back(v);
  }
  by_name_.emplace(std::move(name), v);
  return v;
}

Edge Topology::add_link(Vertex a, Vertex b, Link link) {
  assert(a != b);
  link.id = next_link_id_++;
  const Edge forward = boost::add_edge(a, b, link, graph_).first;
  link.id = next_link_id_++;
  boost::add_edge(b, a, link, graph_);
  return forward;
}

std::optional<Vertex> Topology::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

}  // namespace cs::topology
