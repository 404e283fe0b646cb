#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "collective_builders.hpp"

namespace cs::models::detail {

using topology::Vertex;

Group make_group(const topology::Topology& topo, const std::vector<Vertex>& ranks) {
  Group g;
  g.ranks = ranks;
  std::map<int, std::size_t> index_of_node;
  for (Vertex v : ranks) {
    const int node = topo.device(v).node;
    auto [it, fresh] = index_of_node.emplace(node, g.nodes.size());
    if (fresh) g.nodes.emplace_back();
    g.nodes[it->second].push_back(v);
  }
  for (auto& members : g.nodes) {
    std::sort(members.begin(), members.end(),
              [&](Vertex a, Vertex b) { return topo.device(a).local_index < topo.device(b).local_index; });
    g.ppn = std::max(g.ppn, static_cast<int>(members.size()));
  }
  for (const auto& members : g.nodes) g.uniform &= static_cast<int>(members.size()) == g.ppn;
  return g;
}

sim::Time to_time(Seconds s) { return sim::Time::seconds(s.value()); }

FlowBuilder::FlowBuilder(const CollectiveModel& model, sim::Time latency, double rate_cap_fraction, double rate_cap_absolute)
    : model_(model), latency_(latency), cap_fraction_(rate_cap_fraction), cap_absolute_(rate_cap_absolute) {}

double FlowBuilder::cap_for(const std::vector<std::uint32_t>& path, int shares) const {
  double bottleneck = std::numeric_limits<double>::infinity();
  for (std::uint32_t l : path) bottleneck = std::min(bottleneck, model_.capacities()[l]);
  double cap = cap_absolute_ / shares;
  if (cap_fraction_ < 1.0) cap = std::min(cap, cap_fraction_ * bottleneck);
  return cap;
}

void FlowBuilder::add(Vertex src, Vertex dst, double bytes, std::uint64_t flow_id, bool relay) {
  const auto& router = relay ? model_.router() : model_.direct_router();
  const topology::Topology& topo = model_.topology();
  // Between nodes of a multi-plane fabric the bytes go out through every port of the NIC, a share
  // on each plane (NCCL sees each port as a NIC of its own and gives each its channels).
  const int node_a = topo.device(src).node, node_b = topo.device(dst).node;
  const bool between_nodes = node_a >= 0 && node_b >= 0 && node_a != node_b;
  const int planes = topo.fabric_planes > 1 && between_nodes ? topo.fabric_planes : 1;
  // On RoCE a connection of several queue pairs sends each share on a queue pair of its own, which
  // the switches hash onto a path of its own (NCCL_IB_QPS_PER_CONNECTION; its UDP source port).
  const int qps = between_nodes ? topo.qps_per_connection : 1;
  for (int plane = 0; plane < planes; ++plane) {
    for (int qp = 0; qp < qps; ++qp) {
      // A queue pair's own hash input: the flow id mixed with its index (the golden ratio's bits).
      const std::uint64_t id = flow_id + static_cast<std::uint64_t>(qp) * 0x9E3779B97F4A7C15ull;
      const auto path = router.route(src, dst, id, planes > 1 ? plane : -1);
      if (!path) {
        throw std::invalid_argument(fmt::format("no route from {} to {}", topo.device(src).name, topo.device(dst).name));
      }
      sim::FlowSpec f;
      for (topology::Edge e : path->links) f.path.push_back(topo.link(e).id);
      f.bytes = bytes / (planes * qps);
      f.latency = latency_;
      f.rate_cap = cap_for(f.path, planes * qps);  // the transfer's protocol cap holds for all its planes and queue pairs together
      flows_.push_back(std::move(f));
    }
  }
}

void FlowBuilder::add_link(Vertex a, Vertex b, double bytes) {
  const auto& g = model_.topology().graph();
  for (auto [e, end] = boost::out_edges(a, g); e != end; ++e) {
    if (boost::target(*e, g) != b) continue;
    sim::FlowSpec f;
    f.path = {model_.topology().link(*e).id};
    f.bytes = bytes;
    f.latency = latency_;
    f.rate_cap = cap_for(f.path);
    flows_.push_back(std::move(f));
    return;
  }
  throw std::invalid_argument(fmt::format("no link from {} to {}", model_.topology().device(a).name,
                                          model_.topology().device(b).name));
}

}  // namespace cs::models::detail
