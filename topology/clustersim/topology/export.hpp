// Topology export for other tools: Graphviz DOT and GraphML (one edge per full-duplex link, with
// its kind, bandwidth per direction in bytes/s, latency in seconds and lane count).
#pragma once

#include <string>

#include "clustersim/topology/graph.hpp"

namespace cs::topology {

std::string to_dot(const Topology& topo);
std::string to_graphml(const Topology& topo);

}  // namespace cs::topology
