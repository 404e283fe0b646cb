#include "clustersim/models/collective_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "collective_builders.hpp"

namespace cs::models {

using topology::DeviceKind;
using topology::LinkKind;
using topology::Vertex;

namespace {

// NCCL charges a PCIe link lanes x {Gen4 120, Gen5 240} / 80 GB/s (topo.cc ncclTopoAddPci): 24 and
// 48 GB/s for x16, against the raw 31.5 and 63 GB/s per direction the topology holds; the same
// 0.762 ratio for every generation.
constexpr double kPcieNcclOverRaw = 24.0 / 31.5;

// NCCL's ring steps: 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter, n otherwise.
int ring_steps(CollectiveOp op, int n) {
  if (op == CollectiveOp::all_reduce) return 2 * (n - 1);
  if (op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter) return n - 1;
  return n;
}

double bottleneck(const topology::Path& p, const std::vector<double>& capacities, const topology::Topology& topo) {
  double b = std::numeric_limits<double>::infinity();
  for (topology::Edge e : p.links) b = std::min(b, capacities[topo.link(e).id]);
  return b;
}

}  // namespace

CollectiveModel::CollectiveModel(const topology::Topology& topo, CollectiveOptions options)
    : topo_(topo), options_(options), router_(topo, topology::RoutingOptions{.pxn = options.pxn}), direct_(topo) {
  capacities_.assign(topo.directed_link_count(), 0.0);
  search_capacities_.assign(topo.directed_link_count(), 0.0);
  const auto& g = topo.graph();
  const hardware::HardwareProfile* gpu = topo.gpu.get();
  const auto calibrated = [gpu](const char* link) { return gpu ? calibrated_busbw(*gpu, link) : std::nullopt; };
  const std::optional<BytesPerSec> nvlink_calibrated = calibrated("nvlink");
  const std::optional<BytesPerSec> pcie_calibrated = calibrated("pcie");
  for (auto [v, vend] = boost::vertices(g); v != vend; ++v) {
    if (topo.device(*v).kind == DeviceKind::nic) ++nics_per_node_[topo.device(*v).node];
  }
  // A NIC link's share of what collectives across nodes measured; 0: not calibrated.
  double network_share = 0;
  if (const std::optional<BytesPerSec> network = calibrated("network"); network && !nics_per_node_.empty()) {
    // Across nodes NCCL runs one ring (channel) per NIC, so a ring op's bus bandwidth is the NICs of
    // a node together: one NIC's share is busbw / NICs per node (those of the first node with any).
    // An all-to-all's or a send/recv's bus bandwidth is one rank's own rate: a send/recv's is its
    // NIC's; an all-to-all rank sends (n - ppn) / (n - 1) of its bus bytes out of the node, and the
    // node's ppn ranks share the NICs they used. (Divided by the NICs, a 2 x 4 H100 all-to-all log had calibrated
    // a profile that ran its own all-to-all 2.3 times slower than measured, and its send/recv 4 times.)
    // On a multi-plane fabric a NIC sends on a port per plane: each port's link takes its share.
    const int nics = nics_per_node_.begin()->second;
    const hardware::CalibratedCollective* fit = calibrated_collective(*gpu, "network");
    const CollectiveOp op = parse_collective_op(fit->op).value_or(CollectiveOp::all_reduce);
    double per_nic = network->value() / nics;
    if (op == CollectiveOp::send_recv) per_nic = network->value();
    if (op == CollectiveOp::all_to_all && fit->nodes > 1) {
      // The measured node's ppn ranks left by min(ppn, NICs) NICs (one a GPU, as far as there are).
      const int ppn = std::max(1, fit->ranks / fit->nodes);
      per_nic = network->value() * (fit->ranks - ppn) / (fit->ranks - 1.0) * ppn / std::min(ppn, nics);
    }
    network_share = per_nic / topo.fabric_planes;
  }
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const topology::Link& l = topo.link(*e);
    double cap = l.bandwidth.value();
    if (l.kind == LinkKind::nvlink && gpu && gpu->nvlink) {
      // NCCL's NVLink bandwidth: links x per-link figure of the architecture (topo.h). A link carries
      // its bandwidth's worth of the GPU's NVLinks (all of them to an NVSwitch; a mesh link to one peer
      // only some: 4 of an A100's 12 at 100 GB/s, 80 GB/s to NCCL, which had run at the datasheet's 100).
      const double per_nvlink = gpu->nvlink->links > 0 ? gpu->nvlink->bandwidth.value() / gpu->nvlink->links : 0.0;
      const double nvlinks = per_nvlink > 0 ? std::min<double>(gpu->nvlink->links, l.bandwidth.value() / per_nvlink) : gpu->nvlink->links;
      cap = std::min(cap, nccl_nvlink_bw_per_link(gpu->architecture).value() * nvlinks);
    } else if (l.kind == LinkKind::pcie) {
      cap *= kPcieNcclOverRaw;
    }
    // NCCL's search sees the links' own rates (NCCL's NVLink and PCIe figures, the NIC's line rate);
    // what collectives measured (their protocol and pipelining losses included) binds the flows
    // alone. Searched on the measured figure, the speed ladder and the protocol losses would be
    // charged a second time (a 2 x 8 A100 all-reduce fitted at 181 GB/s came out at 160; an 8 x H200
    // all-gather fitted at 360 GB/s at 300, and each step down NCCL's ladder 60 GB/s less).
    search_capacities_[l.id] = cap;
    if (l.kind == LinkKind::nvlink && nvlink_calibrated) {
      // A calibrated profile: the bus bandwidth collectives measured over NVLink (hardware_profile.hpp).
      cap = std::min(l.bandwidth.value(), nvlink_calibrated->value());
    } else if (l.kind == LinkKind::pcie && pcie_calibrated) {
      cap = std::min(l.bandwidth.value(), pcie_calibrated->value());
    }
    if (l.tier == 0 && network_share > 0) {
      // A NIC's link to its leaf: its share of what collectives across nodes measured.
      cap = std::min(cap, network_share);
    }
    capacities_[l.id] = cap;
  }
}

namespace {
constexpr double kMaxAllToAllFlows = 2048.0 * 2047.0;
// Where flows are hashed over equal-cost paths (Ethernet ECMP), the pairs' rates differ and they end
// at many different times; each end re-solves every pair's rate, so the cost grows as the cube of
// the GPU count: on the 2-core reference machine 256 GPUs take 1.9 s, 512 39 s, 1,024 7.6 min, and
// 2,048 would take hours (a probe found it accepted). Destination routing ends them in a few batches.
constexpr std::size_t kMaxHashedAllToAllGpus = 1024;
}  // namespace

CollectivePlan CollectiveModel::plan(const Collective& c) const {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("{} of {}: {}", to_string(c.op), to_string(c.bytes), why));
  };
  if (c.bytes.value() <= 0) fail("the size must be positive");
  if (c.ranks.size() < 2) fail("a collective needs at least 2 GPUs");
  if (c.op == CollectiveOp::send_recv && c.ranks.size() != 2) fail("send_recv takes exactly 2 GPUs");
  if (const double pairs = static_cast<double>(c.ranks.size()) * static_cast<double>(c.ranks.size() - 1);
      c.op == CollectiveOp::all_to_all && pairs > kMaxAllToAllFlows) {
    // Each pair is a flow of its own (about 800 bytes with its route: 3.3 GB and 35 s for 2,048
    // GPUs on this project's 2-core reference machine); 16,384 GPUs would need 268 M of them.
    fail(fmt::format("all_to_all among {} GPUs is {} x {} = {:.3g} flows, one per pair; at most {} (2,048 GPUs) are simulated", c.ranks.size(),
                     c.ranks.size(), c.ranks.size() - 1, pairs, kMaxAllToAllFlows));
  }
  // On a fabric that hashes flows, 1,024 GPUs' pairs at most, each queue pair of a connection between
  // nodes a flow of its own (qps_per_connection: a probe's 1,024 GPUs at 128 queue pairs needed 133 M
  // flows, bad_alloc).
  constexpr double kMaxHashedFlows = static_cast<double>(kMaxHashedAllToAllGpus) * (kMaxHashedAllToAllGpus - 1);
  if (const double flows = static_cast<double>(c.ranks.size()) * static_cast<double>(c.ranks.size() - 1) * topo_.qps_per_connection;
      c.op == CollectiveOp::all_to_all && !router_.routes_by_destination() && flows > kMaxHashedFlows) {
    if (topo_.qps_per_connection > 1) {
      fail(fmt::format("all_to_all among {} GPUs at {} queue pairs per connection is up to {:.3g} flows (one per pair and queue pair); at most {:.3g}, "
                       "1,024 GPUs' pairs, are simulated on a fabric that hashes flows (lower fabric.qps_per_connection or the GPUs)",
                       c.ranks.size(), topo_.qps_per_connection, flows, kMaxHashedFlows));
    }
    fail(fmt::format("all_to_all among {} GPUs on a fabric that hashes flows over its paths ({} ECMP): at most {} GPUs are simulated there "
                     "(the solver's cost grows as the cube of the GPU count: 1,024 take minutes, 2,048 hours; fabrics routed by destination, "
                     "as InfiniBand is, take up to 2,048)",
                     c.ranks.size(), topo_.technology == "roce" ? "RoCE" : "Ethernet", kMaxHashedAllToAllGpus));
  }
  std::set<Vertex> seen;
  for (Vertex v : c.ranks) {
    if (v >= topo_.device_count() || topo_.device(v).kind != DeviceKind::gpu) fail("every rank must be a GPU");
    if (!seen.insert(v).second) fail(fmt::format("{} appears twice in the group", topo_.device(v).name));
  }
  if (!c.pair_bytes.empty()) {
    if (c.op != CollectiveOp::all_to_all) fail("per-pair sizes apply to all_to_all only");
    if (c.pair_bytes.size() != c.ranks.size() * c.ranks.size()) {
      fail(fmt::format("per-pair sizes need {} x {} entries, found {}", c.ranks.size(), c.ranks.size(), c.pair_bytes.size()));
    }
    for (double b : c.pair_bytes) {
      if (!(b >= 0) || !std::isfinite(b)) fail("per-pair sizes must be finite and not negative");
    }
  }
  if ((c.op == CollectiveOp::broadcast || c.op == CollectiveOp::reduce) &&
      (c.root < 0 || c.root >= static_cast<int>(c.ranks.size()))) {
    fail(fmt::format("root {} is not a rank of the group (0 to {})", c.root, c.ranks.size() - 1));
  }

  const detail::Group group = detail::make_group(topo_, c.ranks);
  const int nodes = static_cast<int>(group.nodes.size());

  // NCCL's graph-search inputs, measured on the topology at search_capacities_: the flows' capacities
  // but for a calibrated network's share, which binds the flows alone.
  GraphInputs in;
  in.ranks = static_cast<int>(c.ranks.size());
  in.nodes = nodes;
  in.ppn = group.ppn;
  in.architecture = topo_.gpu ? topo_.gpu->architecture : "hopper";
  in.in_network_reduction = topo_.in_network_reduction;
  const auto& g = topo_.graph();
  const Vertex first = c.ranks.front();
  // NCCL's totalBw (search.cc) per GPU: its NVLink bandwidth (or its PCIe link) in a graph that holds
  // the communicator's GPUs only: an NVLink to a GPU outside the group carries none of its rings
  // (two GPUs of a 4-GPU mesh have one 80 GB/s link between them, not 240). A GPU alone in its node
  // keeps all of its NVLinks: with no ring hop inside the node they carry none of its traffic either
  // way, and they keep NCCL's LL128 choice over NVLink (on a mesh node NCCL's graph would hold none). The group takes its members'
  // least, as NCCL takes the least of every rank's search (which had made results depend on the
  // order of the ranks where GPUs' NVLinks differ).
  std::set<Vertex> members(c.ranks.begin(), c.ranks.end());
  std::map<int, int> per_node;
  for (Vertex v : c.ranks) ++per_node[topo_.device(v).node];
  double nvlink_total = std::numeric_limits<double>::infinity(), pcie = std::numeric_limits<double>::infinity();
  bool every_nvlink = true;
  for (Vertex v : c.ranks) {
    const bool alone = per_node[topo_.device(v).node] < 2;
    double nvlink = 0;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const auto& l = topo_.link(*e);
      const Vertex w = boost::target(*e, g);
      const DeviceKind kind = topo_.device(w).kind;
      if (l.kind == LinkKind::nvlink && (alone || kind != DeviceKind::gpu || members.count(w))) nvlink += search_capacities_[l.id];
      if (l.kind == LinkKind::pcie) pcie = std::min(pcie, search_capacities_[l.id]);
      if (kind == DeviceKind::nvswitch) in.nvswitch = true;
    }
    every_nvlink = every_nvlink && nvlink > 0;
    nvlink_total = std::min(nvlink_total, nvlink);
  }
  in.intra_nvlink = every_nvlink;
  in.gpu_total = in.intra_nvlink ? nvlink_total : pcie;
  {
    // A GPU-to-GPU path inside a node: two members of the largest node, or else two GPUs of the
    // first member's node.
    Vertex a = first, b = first;
    for (const auto& members : group.nodes) {
      if (members.size() >= 2) {
        a = members[0];
        b = members[1];
        break;
      }
    }
    if (a == b) {
      for (Vertex v : topo_.gpus()) {
        if (v != first && topo_.device(v).node == topo_.device(first).node) {
          b = v;
          break;
        }
      }
    }
    if (a != b) {
      if (auto p = direct_.route(a, b)) in.gpu_to_gpu = bottleneck(*p, search_capacities_, topo_);
    } else {
      in.gpu_to_gpu = in.gpu_total;
    }
  }
  if (nodes > 1) {
    // A GPU's path to the fabric: from the first member to its counterpart in the next node.
    const Vertex a = group.nodes[0][0], b = group.nodes[1][0];
    if (auto p = direct_.route(a, b)) {
      double up = std::numeric_limits<double>::infinity();
      for (topology::Edge e : p->links) {
        const auto& l = topo_.link(e);
        if (l.tier > 0) break;  // only the GPU's side, up to and including its NIC's link to the leaf
        // A NIC has a port (and a link to a leaf) on every plane, and sends on all of them.
        up = std::min(up, search_capacities_[l.id] * (l.tier == 0 ? topo_.fabric_planes : 1));
      }
      in.gpu_to_net = up;
    }
    // The fewest NICs any node of the group uses (NCCL's channels are the minimum over its ranks: a
    // node with two of the group's GPUs holds two NICs' channels, not eight): the distinct NICs its
    // members' traffic leaves by (two GPUs behind one NIC use one, not two).
    in.nics = std::numeric_limits<int>::max();
    // Nodes are alike: the count is found once for each set of members' places in a node.
    std::set<std::vector<int>> counted;
    for (std::size_t k = 0; k < group.nodes.size(); ++k) {
      const auto& on_node = group.nodes[k];
      std::vector<int> places;
      for (Vertex v : on_node) places.push_back(topo_.device(v).local_index);
      if (!counted.insert(std::move(places)).second) continue;
      const auto& other = group.nodes[(k + 1) % group.nodes.size()];
      std::set<Vertex> nics;
      for (std::size_t i = 0; i < on_node.size(); ++i) {
        if (auto p = direct_.route(on_node[i], other[i % other.size()])) {
          for (Vertex d : p->devices) {
            if (topo_.device(d).kind == DeviceKind::nic) {
              nics.insert(d);
              break;
            }
          }
        }
      }
      const auto it = nics_per_node_.find(topo_.device(on_node.front()).node);
      const int available = it == nics_per_node_.end() ? 0 : it->second;
      in.nics = std::min(in.nics, std::min(nics.empty() ? static_cast<int>(on_node.size()) : static_cast<int>(nics.size()), available));
    }
  }
  // GB/s for NCCL's model.
  in.gpu_total /= 1e9;
  in.gpu_to_gpu /= 1e9;
  in.gpu_to_net /= 1e9;

  CollectivePlan plan;
  plan.shape = nccl_graph(in);
  // NVLS reduces and multicasts in one NVSwitch: every GPU of the group must hang off the same one
  // (a probe's node of two NVSwitches joined by a thin link had its halves "reduced" in each switch
  // apart, the link between them never loaded).
  if (plan.shape.nvls_channels > 0) {
    std::set<Vertex> common;
    for (std::size_t i = 0; i < c.ranks.size(); ++i) {
      std::set<Vertex> mine;
      for (auto [e, end] = boost::out_edges(c.ranks[i], g); e != end; ++e) {
        if (topo_.device(boost::target(*e, g)).kind == DeviceKind::nvswitch) mine.insert(boost::target(*e, g));
      }
      if (i == 0) {
        common = std::move(mine);
      } else {
        std::erase_if(common, [&](Vertex v) { return !mine.count(v); });
      }
    }
    if (common.empty()) plan.shape.nvls_channels = 0;
  }
  std::optional<Algorithm> algorithm = c.algorithm;
  if (!algorithm && c.op == CollectiveOp::all_to_all) algorithm = Algorithm::pairwise;
  if (!algorithm && c.op == CollectiveOp::send_recv) algorithm = Algorithm::direct;
  if (algorithm == Algorithm::collnet && !(topo_.in_network_reduction && nodes >= 2 && group.ppn <= 8)) {
    fail("collnet needs a fabric with in_network_reduction (SHARP), GPUs on at least 2 nodes and at most 8 per node");
  }
  if (algorithm == Algorithm::nvls && !(plan.shape.nvls_channels >= 2 && nccl_nvls_efficiency(in.architecture) > 0)) {
    fail("nvls needs one node whose GPUs all meet at one NVSwitch, on Hopper or later");
  }
  if (algorithm == Algorithm::nvls && (c.op == CollectiveOp::all_gather || c.op == CollectiveOp::reduce_scatter) && group.ppn > 32) {
    fail(fmt::format("nvls all_gather and reduce_scatter run on at most 32 GPUs of a node (NCCL_MAX_NVLS_ARITY), found {}", group.ppn));
  }
  if (algorithm == Algorithm::hierarchical && c.op != CollectiveOp::all_reduce) {
    // It is an all-reduce's scheme (a reduce-scatter, an all-reduce across nodes, an all-gather): a
    // probe's all_gather and all_to_all were timed as the all-reduce.
    fail("hierarchical is an all_reduce scheme (reduce-scatter in the node, all-reduce across nodes, all-gather in the node)");
  }
  if (algorithm == Algorithm::hierarchical && (nodes < 2 || !group.uniform)) {
    fail("hierarchical needs at least 2 nodes with the same number of GPUs in each");
  }
  if (algorithm == Algorithm::tree && nodes < 2 && c.op == CollectiveOp::all_reduce) {
    // NCCL's tree inside one node is a chain; clustersim builds trees between nodes only.
    fail("tree needs GPUs on at least 2 nodes");
  }
  plan.candidates = nccl_costs(c.op, c.bytes, plan.shape);
  if (nodes < 2) {
    plan.candidates.erase(std::remove_if(plan.candidates.begin(), plan.candidates.end(),
                                         [](const AlgoCost& a) { return a.algorithm == Algorithm::tree; }),
                          plan.candidates.end());
  }
  // The hierarchical scheme is clustersim's, not NCCL's: it is costed (and offered) only when asked,
  // as its three NCCL rings: a reduce-scatter of S over l GPUs, an all-reduce of S / l over the
  // nodes, an all-gather of S over l GPUs.
  CommShape intra, inter;
  if (algorithm == Algorithm::hierarchical) {
    GraphInputs intra_in = in;
    intra_in.ranks = group.ppn;
    intra_in.nodes = 1;
    GraphInputs inter_in = in;
    inter_in.ranks = nodes;
    inter_in.ppn = 1;
    inter_in.nics = 1;
    intra = nccl_graph(intra_in);
    inter = nccl_graph(inter_in);
    for (Protocol p : {Protocol::ll, Protocol::ll128, Protocol::simple}) {
      const auto rs = nccl_best(nccl_costs(CollectiveOp::reduce_scatter, c.bytes, intra), Algorithm::ring, p);
      const auto ar = nccl_best(nccl_costs(CollectiveOp::all_reduce, c.bytes / group.ppn, inter), Algorithm::ring, p);
      const auto ag = nccl_best(nccl_costs(CollectiveOp::all_gather, c.bytes, intra), Algorithm::ring, p);
      if (!rs || !ar || !ag) continue;
      const Seconds time = rs->time + ar->time + ag->time;
      plan.candidates.push_back({Algorithm::hierarchical, p, rs->latency + ar->latency + ag->latency, BytesPerSec(c.bytes.value() / time.value()), time});
    }
  }
  const auto best = nccl_best(plan.candidates, algorithm, c.protocol);
  if (!best) {
    fail(fmt::format("no {}{}{} applies over {} GPUs on {} node{}", algorithm ? to_string(*algorithm) : "algorithm",
                     c.protocol ? "/" : "", c.protocol ? to_string(*c.protocol) : "", c.ranks.size(), nodes, nodes == 1 ? "" : "s"));
  }
  plan.model = *best;
  plan.algorithm = plan.model.algorithm;
  plan.protocol = plan.model.protocol;
  for (Vertex v : c.ranks) plan.gpus.push_back(topo_.device(v).gpu_rank);

  const int n = static_cast<int>(c.ranks.size());
  const int rings = c.channels > 0 ? c.channels : (nodes > 1 ? std::max(1, in.nics) : 1);
  plan.channels = rings;
  const sim::Time latency = detail::to_time(plan.model.latency);
  // Flows are capped at the bandwidth NCCL's model gives the algorithm, so that alone on the
  // network a collective takes NCCL's predicted time, and contention can only add to it.
  switch (plan.algorithm) {
    case Algorithm::ring: {
      // busBw = algbw x nsteps / n; each of the rings' flows on an edge gets busBw / rings.
      const auto orders = detail::ring_orders(*this, group, rings, c.channels == 0);
      plan.channels = static_cast<int>(orders.size());
      const double bus_bw = plan.model.algbw.value() * ring_steps(c.op, n) / n;
      plan.phases = detail::build_ring(*this, c, orders, latency, detail::ProtocolCaps{1.0, bus_bw / plan.channels});
      break;
    }
    case Algorithm::tree:
      // Each tree edge carries S / (2 channels) in each direction: capped at algbw / (2 channels).
      plan.phases = detail::build_tree(*this, group, c, rings, latency, detail::ProtocolCaps{1.0, plan.model.algbw.value() / (2.0 * rings)});
      break;
    case Algorithm::nvls:
      plan.phases = detail::build_nvls(*this, group, c, latency, plan.model.algbw.value());
      break;
    case Algorithm::hierarchical: {
      const Protocol p = plan.protocol;
      const double intra_bus = nccl_algbw(CollectiveOp::reduce_scatter, Algorithm::ring, p, intra).value() * ring_steps(CollectiveOp::reduce_scatter, group.ppn) / group.ppn;
      const double inter_bus = nccl_algbw(CollectiveOp::all_reduce, Algorithm::ring, p, inter).value() * ring_steps(CollectiveOp::all_reduce, nodes) / nodes;
      plan.phases = detail::build_hierarchical(
          *this, group, c, detail::to_time(nccl_latency(CollectiveOp::reduce_scatter, Algorithm::ring, p, intra)), intra_bus,
          detail::to_time(nccl_latency(CollectiveOp::all_reduce, Algorithm::ring, p, inter)), inter_bus);
      break;
    }
    case Algorithm::pairwise:
      plan.phases = detail::build_pairwise(*this, group, c, latency);
      break;
    case Algorithm::direct:
      plan.phases = detail::build_direct(*this, c, latency);
      break;
    case Algorithm::collnet:
      plan.phases = detail::build_collnet(*this, group, c, latency, plan.model.algbw.value());
      break;
  }
  return plan;
}

std::pair<sim::TaskGraph::TaskId, sim::TaskGraph::TaskId> CollectiveModel::add_to(sim::TaskGraph& graph, const CollectivePlan& plan,
                                                                                 int stream) const {
  std::optional<sim::TaskGraph::TaskId> first, last;
  for (const CollectivePhase& phase : plan.phases) {
    const auto t = graph.add_transfer(plan.gpus, stream, phase.flows, phase.name);
    if (last) graph.depend(*last, t);
    if (!first) first = t;
    last = t;
  }
  return {*first, *last};
}

Seconds CollectiveModel::simulate_together(const std::vector<Collective>& collectives) const {
  sim::Simulator sim;
  sim::FluidNetwork net(sim, capacities_);
  sim::TaskGraph graph(sim, net, static_cast<int>(topo_.gpus().size()));
  for (const Collective& c : collectives) add_to(graph, plan(c));
  return Seconds(graph.run().to_seconds());
}

CollectiveResult CollectiveModel::simulate(const Collective& c, const std::function<void(sim::Time, const sim::RunStats&)>& progress) const {
  CollectiveResult r;
  r.plan = plan(c);
  sim::Simulator sim;
  if (progress) sim.set_progress(progress, 20'000);
  sim::FluidNetwork net(sim, capacities_);
  sim::TaskGraph graph(sim, net, static_cast<int>(topo_.gpus().size()));
  add_to(graph, r.plan);
  const sim::Time end = graph.run();
  r.time = Seconds(end.to_seconds());
  r.algbw = BytesPerSec(c.bytes.value() / r.time.value());
  r.busbw = r.algbw * bus_factor(c.op, static_cast<int>(c.ranks.size()));
  r.stats = sim.stats();
  return r;
}

}  // namespace cs::models
