// The scale-out fabric: leaf, spine and core switches built from a few numbers.
//
// Kinds:
//  - fat-tree: NIC ports fill leaves in node order (top-of-rack style); 1, 2 or 3 tiers.
//  - rail-optimized: per scalable unit (SU) one leaf per rail; the spines join all rails.
//  - rail-only: as rail-optimized, but each rail's leaves get their own spines: no path between
//    rails through the fabric (traffic changes rail inside a node, over NVLink).
//  - none: a single node, no scale-out network.
// Each tier has a radix and an oversubscription (down:up port ratio). Upper tiers are sized the
// way reference architectures do it: the fewest switches whose count divides the uplinks of the
// tier below evenly, so every lower switch has the same number of cables to each upper switch.
// See docs/topology.md for the construction and its checks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/topology/graph.hpp"
#include "clustersim/topology/node_template.hpp"

namespace cs::topology {

enum class FabricKind { none, fat_tree, rail_optimized, rail_only };
enum class Technology { infiniband, roce };

std::string_view to_string(FabricKind k);
std::string_view to_string(Technology t);

struct TierSpec {
  int radix = 0;
  double oversubscription = 1.0;  // down ports : up ports
};

struct FabricSpec {
  FabricKind kind = FabricKind::none;
  Technology technology = Technology::infiniband;
  bool technology_given = false;  // false: the default, listed among the defaults applied
  int scalable_unit = 0;  // nodes per SU (rail-aligned kinds)
  int planes = 1;
  std::optional<BytesPerSec> link_bandwidth;  // switch-to-switch cables; default: the NIC port rate
  std::optional<Seconds> switch_latency;      // per switch traversal; default by technology
  std::optional<Seconds> cable_latency;       // per cable; default by technology
  std::vector<TierSpec> tiers;
  bool in_network_reduction = false;          // SHARP aggregation in the switches, enabled for NCCL (CollNet)
  // RoCE: queue pairs a NCCL connection spreads its data over (NCCL_IB_QPS_PER_CONNECTION, 1 by
  // default); each has its own UDP source port, so ECMP hashes each onto a path of its own.
  int qps_per_connection = 1;
  std::optional<yaml::Node> where;            // the YAML it came from, for messages
  std::optional<yaml::Node> kind_where;       // its `kind:` value, for messages
};

// Reads a `fabric:` map over the current values of `spec` (keys absent keep their value). A key
// the fabric's kind does not use is refused: any but `kind` under kind none (no switches, no
// cables), `scalable_unit` under fat-tree (it fills leaves in node order).
void read_fabric(const yaml::Node& node, FabricSpec& spec);

// Default per-hop figures for a technology (sources in fabric.cpp).
Seconds default_switch_latency(Technology t);
Seconds default_cable_latency(Technology t);

// Builds the fabric over the NIC ports of every node (ports_by_node[n] from instantiate_node).
// Throws InputError (at spec.where) when the numbers cannot make a connected fabric.
void build_fabric(const FabricSpec& spec, const std::vector<std::vector<NicPort>>& ports_by_node, Topology& topo);

}  // namespace cs::topology
