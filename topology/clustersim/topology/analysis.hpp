// What `clustersim topo` reports about a topology, all computed from the graph.
//
//  - Bisection bandwidth: the maximum flow between two halves of the nodes through the scale-out
//    fabric (NIC ports on one side as sources, on the other as sinks), minimised over two
//    balanced splits: first half / second half of the nodes, and even / odd nodes. Contiguous
//    halves expose oversubscribed uplinks; the interleaved split exposes rail and pod structure.
//    Only fabric links carry this flow, so servers never relay traffic between fabric links.
//    The true bisection (the minimum over all balanced splits) is at most this value.
//  - Within one node: the maximum flow between the first and the second half of its GPUs.
//  - Injection per GPU: the maximum flow from all GPUs of node 0 into the fabric (through PCIe,
//    NICs and their links), divided by the node's GPU count.
//  - Oversubscription of a tier: the bandwidth of its switches' down links over their up links.
//  - Diameter: the most hops on the shortest route between two GPUs, under the routing rules,
//    exact from up to kDiameterSampleNodes source nodes (evenly spaced) and sampled beyond.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "clustersim/topology/graph.hpp"
#include "clustersim/topology/routing.hpp"

namespace cs::topology {

struct TierSummary {
  int tier = 0;        // 1 leaf, 2 spine, 3 core
  std::string name;    // "leaf", "spine", "core"
  int switches = 0;
  int max_ports = 0;   // the most cables on one switch of this tier
  BytesPerSec down;    // total, all switches of the tier
  BytesPerSec up;
  [[nodiscard]] double oversubscription() const { return up.value() > 0 ? down / up : 0.0; }
};

struct TopologySummary {
  std::string name;
  std::string description;
  std::string node_template;
  std::string fabric_kind;
  std::string technology;
  int qps_per_connection = 1;  // RoCE: queue pairs a NCCL connection spreads over
  int nodes = 0;
  int gpus = 0;
  int gpus_per_node = 0;
  std::map<DeviceKind, int> devices;
  std::map<LinkKind, long long> cables;  // physical cables (parallel lanes counted)
  int nvswitch_chips = 0;
  BytesPerSec scale_up_per_gpu;          // NVLink bandwidth of one GPU, one direction: the least of node 0's GPUs
  BytesPerSec scale_up_per_gpu_max;      // the most of node 0's GPUs (equal unless the template's GPUs differ)
  BytesPerSec injection_per_gpu;         // into the scale-out fabric, one direction
  BytesPerSec node_bisection;            // between GPU halves of one node; 0 with one GPU a node
  BytesPerSec bisection;                 // scale-out, one direction; 0 for one node
  std::string bisection_split;           // which split gave the minimum
  std::vector<TierSummary> tiers;
  int diameter = 0;                      // hops between GPUs
  int diameter_sources = 0;              // GPUs the diameter search started from
  bool diameter_exact = true;
  std::vector<std::string> assumptions;  // defaults applied when the topology was built
};

inline constexpr int kDiameterSampleNodes = 32;

TopologySummary summarize(const Topology& topo, const Router& router);

// Each fabric tier's switches and bandwidth down and up (max_ports left 0), lowest tier first.
std::vector<TierSummary> fabric_tiers(const Topology& topo);

}  // namespace cs::topology
