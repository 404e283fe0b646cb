#include "clustersim/models/nccl_tuning.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace cs::models {

// Constants of NCCL's model, NVIDIA/nccl 2.29.2 src/graph/tuning.cc and 2.31.2 src/tuning/*.cc and
// src/graph/{topo.h,search.cc} (identical in both for every table used here); docs/nccl-model.md
// restates them with the file and function of each.
namespace {

enum Arch { kAmpere = 1, kHopper = 2, kBlackwell = 3 };

Arch arch_of(const std::string& a) {
  if (a == "hopper") return kHopper;
  if (a == "blackwell") return kBlackwell;
  return kAmpere;  // ampere and ada (compute capability 8.x)
}
int compute_capability(const std::string& a) {
  if (a == "hopper") return 90;
  if (a == "blackwell") return 100;
  if (a == "ada") return 89;
  return 80;
}

// baseLat[algo][proto] (us), LL / LL128 / Simple.
constexpr double kBaseRing[3] = {6.6, 14.0, 8.4};
constexpr double kBaseTree[3] = {6.8, 14.0, 8.4};
// hwLat[NVLINK|PCI|NET][Ring|Tree|NVLS][proto] (us).
constexpr double kHwRing[3][3] = {{0.6, 1.9, 3.4}, {1.0, 2.5, 5.7}, {2.7, 4.0, 14.0}};
constexpr double kHwTree[3][3] = {{0.6, 1.25, 4.0}, {1.0, 1.9, 4.0}, {5.0, 8.5, 14.0}};
constexpr double kHwNvlsNvlink = 25.0;  // Simple only
enum Hw { kNvlink = 0, kPci = 1, kNet = 2 };
// llMaxBws[row][N=1, N=2, N>=3] (GB/s); rows 0 Volta or Intel between nodes, 1 Ampere or AMD,
// 2 Hopper, 3 Blackwell.
constexpr double kLlMax[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
// Per-channel caps [arch][N bucket] (GB/s).
constexpr double kRingLl128PerCh[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
constexpr double kTreeLl128PerCh[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kTreePerCh[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
// Tree correction factor by log2(bytes / 64), LL / LL128 / Simple.
constexpr std::array<std::array<double, 24>, 3> kTreeCorrection{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}};
// Graph-search speed ladders (GB/s per channel), search.cc.
const std::vector<double> kIntraSm80{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kInterSm80{48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kIntraSm90{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
const std::vector<double> kInterSm90{48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kIntraSm100{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
const std::vector<double> kInterSm100{96, 90.2, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
constexpr int kMaxRingChannels = 32;  // MAXCHANNELS / 2

int bucket(int nodes) { return nodes <= 1 ? 0 : nodes == 2 ? 1 : 2; }
int log2i(double x) { return x < 1 ? -1 : static_cast<int>(std::floor(std::log2(x))); }

const std::vector<double>& ladder(const std::string& arch, bool inter) {
  const int cc = compute_capability(arch);
  if (cc >= 100) return inter ? kInterSm100 : kIntraSm100;
  if (cc >= 90) return inter ? kInterSm90 : kIntraSm90;
  return inter ? kInterSm80 : kIntraSm80;
}

double first_at_most(const std::vector<double>& speeds, double limit) {
  for (double s : speeds) {
    if (s <= limit + 1e-9) return s;
  }
  return speeds.back();
}

// ncclTopoCompute's pass 1 for rings, reduced to channel counts: from the first ladder speed at most
// `limit` down, `channels(s)` channels fit at speed s; a speed replaces the best only if its
// channels x speed is strictly larger; the search stops once channels x speed reaches `total`, or
// once the next speed is no more than 0.49 of the best's. Returns {channels, speed}. (Until
// 2026-12-07 the first speed was taken: 8 H800 NVLinks, 164.8 GB/s, got 2 x 60, duplicated to 4 x 30
// = 120 GB/s, where the search goes on to 4 x 40 = 160, duplicated to 8 x 20.)
template <typename Fit>
std::pair<int, double> search_ring(const std::vector<double>& speeds, double limit, double total, Fit channels) {
  int best_channels = 0;
  double best_speed = 0;
  for (double s : speeds) {
    if (s > limit + 1e-9) continue;
    if (best_speed > 0 && s <= 0.49 * best_speed) break;
    const int n = std::min(channels(s), kMaxRingChannels);
    if (n < 1) continue;
    if (n * s > best_channels * best_speed + 1e-9) best_channels = n, best_speed = s;
    if (n * s >= total - 1e-9) break;
  }
  if (best_channels == 0) return {1, first_at_most(speeds, limit)};
  return {best_channels, best_speed};
}

int nsteps(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::all_reduce: return 2 * (n - 1);
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: return n - 1;
    default: return n;
  }
}

int proto_index(Protocol p) { return p == Protocol::ll ? 0 : p == Protocol::ll128 ? 1 : 2; }

double ll_max(const CommShape& c) {
  const int row = c.nodes == 1 ? arch_of(c.architecture) : (c.cpu_amd ? 1 : 0);
  return kLlMax[row][bucket(c.nodes)];
}

// The network post overhead of a multi-node ring step (getNetOverhead): 1 us on Intel, 2 on AMD,
// three times that for Simple.
double net_overhead(const CommShape& c, Protocol p) { return (c.cpu_amd ? 2.0 : 1.0) * (p == Protocol::simple ? 3.0 : 1.0); }

// LL128 is on by default only over NVLink (tuning.cc's isLL128Enabled: typeIntra <= NVB).
bool ll128_enabled(const CommShape& c) { return c.intra_nvlink; }

}  // namespace

BytesPerSec nccl_nvlink_bw_per_link(const std::string& architecture) {
  // topo.h: SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1 (2.31.2) GB/s.
  const int cc = compute_capability(architecture);
  return BytesPerSec((cc >= 100 ? 40.1 : cc >= 90 ? 20.6 : 20.0) * 1e9);
}

double nccl_nvls_efficiency(const std::string& architecture) { return kNvlsEfficiency[arch_of(architecture)]; }

CommShape nccl_graph(const GraphInputs& in) {
  CommShape c;
  c.ranks = in.ranks;
  c.nodes = in.nodes;
  c.ppn = in.ppn;
  c.architecture = in.architecture;
  c.intra_nvlink = in.intra_nvlink;
  c.cpu_amd = in.cpu_amd;
  c.nvswitch = in.nvswitch;
  // NCCL enables CollNet with a SHARP plugin, at least 2 nodes and at most 8 GPUs per node (init.cc).
  c.collnet = in.in_network_reduction && in.nodes >= 2 && in.ppn <= 8;
  c.gpu_total = in.gpu_total;
  c.gpu_to_gpu = std::min(in.gpu_to_gpu, in.gpu_total);
  if (in.nodes > 1) c.net_per_gpu = in.gpu_to_net * std::min(1.0, static_cast<double>(std::max(1, in.nics)) / std::max(1, in.ppn));
  const int cc = compute_capability(in.architecture);
  if (in.nodes == 1) {
    // Rings inside a node: from the first ladder speed the GPU-to-GPU path allows, as many channels
    // as the GPU's links hold.
    const double total = in.gpu_total;
    const auto [n, s] = search_ring(ladder(in.architecture, false), std::min(in.gpu_to_gpu, total), total,
                                    [&](double speed) { return static_cast<int>(std::floor(total / speed + 1e-9)); });
    c.channels = n;
    c.bi = c.be = s;
  } else {
    // Rings between nodes start on NICs: from the first ladder speed the GPU-to-NIC path allows, as
    // many channels per NIC as that path holds (a channel must fit on every link it crosses: an 800G
    // NIC behind a Gen5 x16 link holds one at 48, not two), and no more channels than it takes to
    // reach the GPU's total bandwidth (search.cc stops once nChannels x bwInter >= totalBw: a ring
    // over GB200 racks does not get 32 x 48 GB/s out of a 722 GB/s GPU).
    // Each channel also crosses the node on NVLink: every GPU but the one that leaves by its NIC
    // sends it on, so a GPU's links carry (ppn - 1) / ppn of the channels at the speed (8 x 48 fits
    // a DGX H100's 370.8 GB/s as 7 x 48; a ring over NVL72 racks fits 16 x 45.1 where 16 x 48 is
    // more than a GPU's 721.8).
    const double nvlink_share = in.ppn > 1 ? static_cast<double>(in.ppn - 1) / in.ppn : 0.0;
    const auto [n, s] = search_ring(ladder(in.architecture, true), in.gpu_to_net, in.gpu_total, [&](double speed) {
      const int per_nic = static_cast<int>(std::floor(in.gpu_to_net / speed + 1e-9));  // gpu_to_net includes the NIC
      const int enough = std::max(1, static_cast<int>(std::ceil(in.gpu_total / speed - 1e-9)));
      int fit = std::min(std::max(1, in.nics) * per_nic, enough);
      if (nvlink_share > 0) fit = std::min(fit, static_cast<int>(std::floor(in.gpu_total / (speed * nvlink_share) + 1e-9)));
      return fit;
    });
    c.channels = n;
    c.bi = c.be = s;
  }
  // ncclTopoDupChannels: doubles the channels at half the speed unless Bi < 25, or (cc > 80 and
  // Bi < 50 and more than 4 channels).
  if (!(c.bi < 25 || (cc > 80 && c.bi < 50 && c.channels > 4))) {
    c.channels = std::min(2 * c.channels, 2 * kMaxRingChannels);
    c.bi /= 2;
    c.be /= 2;
  }
  if (in.nodes == 1 && in.nvswitch && cc >= 90 && in.ranks >= 2) {
    // One NVLS channel per head GPU, at most 32; each GPU's link carries a load per channel, and a
    // head one more: channels + 1 (ppn + 1 up to 32 GPUs; 33 on an NVL72 rack, where ppn + 1 had
    // asked for under 11 GB/s, below the ladder, and its lowest step had been taken regardless).
    c.nvls_channels = std::min(32, in.ppn);
    c.nvls_bi = first_at_most(ladder(in.architecture, false), in.gpu_total / (c.nvls_channels + 1));
  }
  return c;
}

Seconds nccl_latency(CollectiveOp op, Algorithm a, Protocol p, const CommShape& c) {
  const int pi = proto_index(p);
  const Hw intra_hw = c.intra_nvlink ? kNvlink : kPci;
  double lat = 0;
  switch (a) {
    case Algorithm::ring:
    case Algorithm::pairwise:
    case Algorithm::direct: {
      lat = kBaseRing[pi];
      double intra = kHwRing[intra_hw][pi];
      // With one rank per node the latencies are fully exposed: the Tree NET row (V29, V31).
      const double inter = c.ppn == 1 ? kHwTree[kNet][pi] : kHwRing[kNet][pi];
      if (c.nodes > 1) intra = std::max(intra, net_overhead(c, p));
      if (a == Algorithm::pairwise || a == Algorithm::direct) {
        // Point-to-point: one step on the path's slowest hop (an assumption; NCCL's tuner has no
        // p2p model).
        lat += c.nodes > 1 ? inter : intra;
        break;
      }
      if (op == CollectiveOp::broadcast || op == CollectiveOp::reduce) {
        lat += c.nodes > 1 ? kHwRing[kNet][pi] : intra;  // sameChannels rings: one hop's latency
        break;
      }
      const int steps = nsteps(op, c.ranks);
      const int inter_steps = c.nodes == 1 ? 0 : op == CollectiveOp::all_reduce ? 2 * (c.nodes - 1) : c.nodes - 1;
      lat += (steps - inter_steps) * intra + inter_steps * inter;
      break;
    }
    case Algorithm::tree: {
      const double intra = kHwTree[intra_hw][pi];
      const double inter = c.nodes > 1 ? kHwTree[kNet][pi] : intra;
      lat = kBaseTree[pi] + 2.0 * ((c.ppn - 1) * intra + log2i(c.nodes) * inter);
      break;
    }
    case Algorithm::nvls:
      lat = kHwNvlsNvlink;
      break;
    case Algorithm::hierarchical:
      break;  // not NCCL's: see nccl_algbw
    case Algorithm::collnet: {
      // CollNetDirect (NVSwitch nodes): 2 (min(1, ppn - 1) intra + 0.4 us per extra local rank) +
      // inter; CollNetChain: 2 (ppn - 1) intra + inter (hwLat NVLINK 3.7 / 2.8, NET 31 / 30 us).
      const int extra = c.ppn - 1;
      lat = c.nvswitch ? 2.0 * (std::min(1, extra) * 3.7 + 0.4 * extra) + 31.0 : 2.0 * extra * 2.8 + 30.0;
      break;
    }
  }
  return Seconds(lat * 1e-6);
}

BytesPerSec nccl_algbw(CollectiveOp op, Algorithm a, Protocol p, const CommShape& c) {
  const int A = arch_of(c.architecture);
  const int K = bucket(c.nodes);
  const int cc = compute_capability(c.architecture);
  const int n = c.ranks;
  if (p == Protocol::ll128 && !ll128_enabled(c)) return BytesPerSec(0);
  double bus = 0;
  double ratio = 1;
  switch (a) {
    case Algorithm::ring: {
      if (op == CollectiveOp::all_to_all || op == CollectiveOp::send_recv) return BytesPerSec(0);
      const double b = c.nodes == 1 || (c.nodes <= 2 && cc < 100) ? c.bi : c.be;
      bus = c.channels * b;
      if (p == Protocol::ll) bus = std::min(ll_max(c), 0.5 * bus);
      if (p == Protocol::ll128) bus = std::min(0.92 * bus, c.channels * kRingLl128PerCh[A][K]);
      ratio = static_cast<double>(n) / nsteps(op, n);
      break;
    }
    case Algorithm::tree: {
      if (op != CollectiveOp::all_reduce) return BytesPerSec(0);
      const double b = cc < 100 ? (c.nodes <= 2 ? c.bi : c.be) : std::min(c.bi, c.be);
      bus = std::min(0.92 * c.channels * b, c.channels * kTreePerCh[A][K]);
      if (p == Protocol::ll) bus = std::min(bus / 3.8, ll_max(c));
      if (p == Protocol::ll128) bus = std::min(bus * (c.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), c.channels * kTreeLl128PerCh[A][K]);
      ratio = 0.5;
      break;
    }
    case Algorithm::nvls: {
      // All-reduce, and (inside one node: across nodes NCCL needs a CollNet plugin's iallgather and
      // ireducescatter) all-gather and reduce-scatter (2.31.2 tuning; docs/nccl-model.md 5.5, 7).
      // All-gather and reduce-scatter on at most NCCL_MAX_NVLS_ARITY (32) GPUs of a node.
      const bool gather_or_scatter = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter;
      if (!(op == CollectiveOp::all_reduce || (gather_or_scatter && c.nodes == 1 && c.ppn <= 32)) || p != Protocol::simple || c.nvls_channels < 2 ||
          kNvlsEfficiency[A] == 0) {
        return BytesPerSec(0);
      }
      const int ch = c.nvls_channels;
      const double per_rank = gather_or_scatter ? (c.ppn - 1.0) / c.ppn : 2.0;
      const double intra = c.nvls_bi * kNvlsEfficiency[A] * (ch - 1.0) / ch * per_rank;
      bus = ch * intra;
      ratio = gather_or_scatter ? 1.0 : static_cast<double>(n) / (2.0 * (n - 1));
      break;
    }
    case Algorithm::hierarchical:
      return BytesPerSec(0);  // not NCCL's: its cost is the sum of its three rings (collective_model.cpp)
    case Algorithm::pairwise: {
      if (op != CollectiveOp::all_to_all || p != Protocol::simple) return BytesPerSec(0);
      // Each GPU sends 1/n of its buffer to every other rank: to the ppn - 1 in its node through its
      // NVLink (or PCIe) at once, to the n - ppn elsewhere through its share of the NICs, both at once.
      const double local = c.gpu_total > 0 ? (c.ppn - 1.0) / n / c.gpu_total : 0.0;
      const double remote = c.nodes > 1 && c.net_per_gpu > 0 ? (n - static_cast<double>(c.ppn)) / n / c.net_per_gpu : 0.0;
      const double per_byte = std::max(local, remote);
      if (per_byte <= 0) return BytesPerSec(0);
      bus = 1.0 / per_byte;  // algbw
      break;
    }
    case Algorithm::direct:
      if (op != CollectiveOp::send_recv || p != Protocol::simple) return BytesPerSec(0);
      // The path between the two GPUs: inside a node, or through one GPU's NIC.
      bus = c.nodes == 1 ? c.gpu_to_gpu : c.net_per_gpu;
      break;
    case Algorithm::collnet: {
      if (op != CollectiveOp::all_reduce || p != Protocol::simple || !c.collnet) return BytesPerSec(0);
      bus = c.channels * c.bi;
      if (c.nvswitch) {
        // CollNetDirect: each head serves ppn / nCh GPUs; 0.85 on Hopper and later (collnet.cc, 2.31).
        const double f = static_cast<double>(c.ppn) / c.channels;
        bus /= (f + 1) / 2;
        if (cc >= 90) bus *= 0.85;
      }
      ratio = 0.5;
      break;
    }
  }
  return BytesPerSec(bus * ratio * 1e9);
}

std::vector<AlgoCost> nccl_costs(CollectiveOp op, Bytes bytes, const CommShape& c) {
  std::vector<AlgoCost> out;
  const Algorithm algorithms[] = {Algorithm::tree, Algorithm::ring, Algorithm::collnet, Algorithm::nvls, Algorithm::pairwise,
                                  Algorithm::direct};
  for (Algorithm a : algorithms) {
    for (Protocol p : {Protocol::ll, Protocol::ll128, Protocol::simple}) {
      double bw = nccl_algbw(op, a, p, c).value();
      if (bw <= 0) continue;
      double lat = nccl_latency(op, a, p, c).value();
      if (a == Algorithm::tree) {
        const int i = log2i(bytes.value() / 64);
        if (i >= 0 && i < 23) bw *= kTreeCorrection[static_cast<std::size_t>(proto_index(p))][static_cast<std::size_t>(i)];
      }
      // The ring plateau: a multi-node Simple all-reduce whose chunks are all full pays 1.4x latency
      // (1.9x before compute capability 8.0).
      if (a == Algorithm::ring && p == Protocol::simple && c.nodes > 1 && op == CollectiveOp::all_reduce &&
          bytes.value() / (2.0 * c.channels * c.ranks) >= 64) {
        lat *= compute_capability(c.architecture) < 80 ? 1.9 : 1.4;
      }
      out.push_back({a, p, Seconds(lat), BytesPerSec(bw), Seconds(lat + bytes.value() / bw)});
    }
  }
  return out;
}

std::optional<AlgoCost> nccl_best(const std::vector<AlgoCost>& costs, std::optional<Algorithm> algorithm,
                                  std::optional<Protocol> protocol) {
  const AlgoCost* best = nullptr;
  for (const AlgoCost& cost : costs) {
    if (algorithm && cost.algorithm != *algorithm) continue;
    if (protocol && cost.protocol != *protocol) continue;
    if (!best || cost.time < best->time) best = &cost;  // strict: the first of equals wins
  }
  if (!best) return std::nullopt;
  return *best;
}

}  // namespace cs::models
