// Topology files: a node template instantiated `nodes` times and joined by a fabric.
//
//   topology:
//     name: dgx-h100-superpod
//     extends: other-topology     # optional: start from another topology, override what is given
//     node: dgx-h100              # shipped node template, a path, or an inline map
//     nodes: 127
//     fabric: {kind: rail-optimized, technology: infiniband, scalable_unit: 32, tiers: [...]}
//
// Format and presets: docs/topology.md.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "clustersim/common/parts.hpp"
#include "clustersim/topology/fabric.hpp"
#include "clustersim/topology/graph.hpp"
#include "clustersim/topology/node_template.hpp"

namespace cs::topology {

// The most GPUs a topology may hold: past this the graph no longer fits the memory of the
// machines this tool is meant to run on, and no real cluster is that large today.
inline constexpr long long kMaxGpus = 262'144;

struct TopologySpec {
  std::string name;
  std::string description;
  std::optional<NodeTemplate> node;
  int nodes = 1;
  FabricSpec fabric;
  std::optional<yaml::Node> nodes_where;
  std::optional<yaml::Node> where;  // the topology map
};

// The spec of a topology map (the value under `topology:`), read over `spec`.
void read_topology(const yaml::Node& node, TopologySpec& spec, IncludeStack& includes);
TopologySpec load_topology_spec(const std::filesystem::path& file, IncludeStack& includes, const SourceLocation& from = {});

// Builds the graph; throws InputError for impossible numbers.
Topology build_topology(const TopologySpec& spec);

// A topology named on the command line: a path, or the name of a shipped preset.
Topology load_topology(std::string_view reference);
// A topology given in a part (inline map, path or shipped name).
Topology load_topology_reference(const yaml::Node& node, IncludeStack& includes);


}  // namespace cs::topology
