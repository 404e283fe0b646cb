// NCCL's own performance model (NVIDIA/nccl, src/graph/tuning.cc and src/graph/topo.h), used the way
// NCCL uses it: to predict each (algorithm, protocol)'s time as latency + bytes / algbw and pick the
// fastest. clustersim then simulates the chosen algorithm's flows on the topology, so contention
// comes from the network model, not from this table. Constants and their sources: docs/collectives.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clustersim/common/units.hpp"
#include "clustersim/models/collective.hpp"

namespace cs::models {

// What NCCL's model knows about a communicator: its size and the result of NCCL's graph search
// (channels and per-channel bandwidth), as nccl_graph() derives it from the topology.
struct CommShape {
  int ranks = 1;
  int nodes = 1;
  int ppn = 1;                 // ranks per node (the most on any node)
  std::string architecture;    // "ampere", "ada", "hopper", "blackwell"
  bool intra_nvlink = true;    // intra-node paths are NVLink (else PCIe)
  bool cpu_amd = false;        // the LL cap row between nodes follows the CPU vendor
  // Ring and tree graph: nCh channels at Bi (intra) / Be (inter) GB/s each.
  int channels = 1;
  double bi = 0;               // GB/s per channel
  double be = 0;               // GB/s per channel
  bool collnet = false;        // CollNet (SHARP) available: an in-network-reduction fabric, 2+ nodes, <= 8 GPUs per node
  bool nvswitch = false;       // GPUs of a node meet at an NVSwitch (CollNetDirect; else CollNetChain)
  // NVLS graph (single NVSwitch node, Hopper and later); nvls_channels == 0 when not available.
  int nvls_channels = 0;
  double nvls_bi = 0;
  // Point-to-point paths, for send/recv and all-to-all (NCCL's tuner has no model of them; their
  // estimate is the bytes over these paths): a GPU's NVLink total (or PCIe link), a GPU-to-GPU path
  // inside a node, and a GPU's share of its node's NICs (0 in one node), all GB/s.
  double gpu_total = 0;
  double gpu_to_gpu = 0;
  double net_per_gpu = 0;
};

// Inputs of NCCL's graph search for one communicator, from the topology.
struct GraphInputs {
  int ranks = 1;
  int nodes = 1;
  int ppn = 1;
  std::string architecture;
  bool intra_nvlink = true;
  bool nvswitch = false;       // GPUs of a node meet at an NVSwitch
  bool cpu_amd = false;
  bool in_network_reduction = false;
  double gpu_total = 0;        // GB/s: a GPU's NVLink total (or its PCIe link), NCCL's totalBw
  double gpu_to_gpu = 0;       // GB/s: bottleneck of a GPU-to-GPU path inside a node
  double gpu_to_net = 0;       // GB/s: bottleneck of a GPU's path to its NIC, the NIC's port included
  int nics = 0;                // NICs of a node the group's GPUs use
};

// NCCL's graph search, reduced to its outcome for the systems clustersim builds (NCCL 2.25-2.31
// search.cc: speed ladders, channels per NIC, channel duplication; docs/nccl-model.md 7).
CommShape nccl_graph(const GraphInputs& in);

struct AlgoCost {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  Seconds latency;
  BytesPerSec algbw;
  Seconds time;
};

// NCCL's latency of one collective call with this algorithm and protocol.
Seconds nccl_latency(CollectiveOp op, Algorithm a, Protocol p, const CommShape& c);
// NCCL's algorithm bandwidth (0 when the combination does not apply).
BytesPerSec nccl_algbw(CollectiveOp op, Algorithm a, Protocol p, const CommShape& c);
// Every applicable (algorithm, protocol) with its predicted time, in NCCL's enumeration order.
std::vector<AlgoCost> nccl_costs(CollectiveOp op, Bytes bytes, const CommShape& c);
// The fastest of `costs` (the first on a tie, as NCCL scans), restricted to a forced algorithm and/or
// protocol as NCCL_ALGO and NCCL_PROTO restrict NCCL; nothing when none remains.
std::optional<AlgoCost> nccl_best(const std::vector<AlgoCost>& costs, std::optional<Algorithm> algorithm,
                                  std::optional<Protocol> protocol);

// NCCL's bandwidth of one NVLink link by architecture (topo.h SM80/SM90/SM100_NVLINK_BW), GB/s.
BytesPerSec nccl_nvlink_bw_per_link(const std::string& architecture);
// NCCL's NVLS efficiency (0 where the architecture has no NVLS).
double nccl_nvls_efficiency(const std::string& architecture);

}  // namespace cs::models
