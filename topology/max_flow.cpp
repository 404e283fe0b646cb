#include "clustersim/topology/max_flow.hpp"

#include <cmath>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

namespace cs::topology {

namespace {
constexpr double kUnit = 1e3;  // capacities in kB/s
constexpr std::int64_t kUnbounded = std::numeric_limits<std::int64_t>::max() / 1024;

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, std::int64_t,
                    boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
}  // namespace

FlowNetwork::FlowNetwork(std::size_t vertices) : vertices_(vertices) {}

std::size_t FlowNetwork::add_vertex() { return vertices_++; }

void FlowNetwork::add_arc(std::size_t from, std::size_t to, BytesPerSec capacity) {
  arcs_.push_back({from, to, static_cast<std::int64_t>(std::llround(capacity.value() / kUnit))});
}

void FlowNetwork::add_unbounded_arc(std::size_t from, std::size_t to) { arcs_.push_back({from, to, kUnbounded}); }

BytesPerSec FlowNetwork::max_flow(std::size_t source, std::size_t sink) const {
  FlowGraph g(vertices_);
  auto capacity = boost::get(boost::edge_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  for (const Arc& a : arcs_) {
    const auto e = boost::add_edge(a.from, a.to, g).first;
    const auto r = boost::add_edge(a.to, a.from, g).first;
    capacity[e] = a.capacity;
    capacity[r] = 0;
    reverse[e] = r;
    reverse[r] = e;
  }
  const std::int64_t flow = boost::push_relabel_max_flow(g, source, sink);
  return BytesPerSec(static_cast<double>(flow) * kUnit);
}

}  // namespace cs::topology
