// A GPU's hardware profile: peaks, memory, interconnect and the parameters of its GEMM efficiency
// model. Shipped profiles live in scenarios/hardware/ with the source of every number beside it;
// `clustersim calibrate` writes new ones in the same format. See docs/hardware-profiles.md.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "clustersim/common/parts.hpp"
#include "clustersim/common/units.hpp"
#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/hardware/dtype.hpp"

namespace cs::hardware {

// A measured correction of the GEMM model on a log2 grid of (M, N, K): the factor by which the
// measured time exceeds the model's, at grid nodes 2^i, interpolated trilinearly in log2 space and
// held constant beyond the grid. Written by `clustersim calibrate`; empty in datasheet profiles.
struct GemmResidualTable {
  int m_first = 0, m_last = -1;  // log2 of the grid's first and last M (step 1)
  int n_first = 0, n_last = -1;
  int k_first = 0, k_last = -1;
  std::vector<double> factors;   // (M, N, K) row-major: K varies fastest

  [[nodiscard]] bool empty() const { return factors.empty(); }
  [[nodiscard]] int size_m() const { return m_last - m_first + 1; }
  [[nodiscard]] int size_n() const { return n_last - n_first + 1; }
  [[nodiscard]] int size_k() const { return k_last - k_first + 1; }
  [[nodiscard]] double& at(int i, int j, int l) { return factors[(static_cast<std::size_t>(i) * size_n() + j) * size_k() + l]; }
  [[nodiscard]] double at(int i, int j, int l) const { return factors[(static_cast<std::size_t>(i) * size_n() + j) * size_k() + l]; }
  // The interpolated factor at a shape (1 when the table is empty).
  [[nodiscard]] double factor(double m, double n, double k) const;
};

// Parameters of the GEMM efficiency model (gemm_model.hpp).
struct GemmModelParams {
  std::map<Dtype, double> max_efficiency;  // best achieved / dense peak, per dtype
  double tile_ridge_intensity = 64.0;      // tile intensity tm*tn/(tm+tn) that reaches full efficiency
  double k_half = 128.0;                   // K at which the K-loop efficiency K/(K+k_half) is one half
  double memory_efficiency = 0.85;         // achievable fraction of HBM bandwidth
  // Fraction of the burst rate that compute-bound work keeps under sustained full load, when the GPU
  // sits at its power limit and its SM clock below boost (1: no published figure, no derating).
  // Microbenchmarks of one kernel run at boost; a training step or a serving window is sustained.
  double sustained_fraction = 1.0;
  // Per-dtype values that replace the two shared ones above: each dtype runs its own kernels, and
  // calibration fits them per dtype measured (absent in datasheet profiles).
  std::map<Dtype, double> tile_ridge_by_dtype;
  std::map<Dtype, double> k_half_by_dtype;
  std::map<Dtype, GemmResidualTable> residuals;  // calibrated corrections, per dtype (may be absent)

  [[nodiscard]] double ridge_for(Dtype d) const {
    auto it = tile_ridge_by_dtype.find(d);
    return it == tile_ridge_by_dtype.end() ? tile_ridge_intensity : it->second;
  }
  [[nodiscard]] double k_half_for(Dtype d) const {
    auto it = k_half_by_dtype.find(d);
    return it == k_half_by_dtype.end() ? k_half : it->second;
  }
};

// Fused (FlashAttention-style) attention: achieved FLOP/s over the dense 16-bit peak, forward and
// backward (backward FLOPs counted as 2.5 x forward, as the FlashAttention papers count them).
// 0 when no measurement is known: the training model then times attention with the GEMM model.
//
// tail_blocks: with a causal mask the blocks of queries at the end of the sequence walk every key
// while the others stop early, so a kernel ends with a tail in which few SMs work. The model adds
// the time of `tail_blocks` such walks, each one 128-query block over the whole sequence at one
// SM's share of the rate above (docs/training.md, "Operations of a layer"). 0: no tail, time = FLOPs / rate.
struct AttentionParams {
  double forward_efficiency = 0;
  double backward_efficiency = 0;
  double tail_blocks = 0;
  [[nodiscard]] bool measured() const { return forward_efficiency > 0 && backward_efficiency > 0; }
};

// A collective measured on real hardware and fitted by `clustersim calibrate` (calibrate/link_fit.hpp):
// time = latency + bytes x f(n) / busbw, times the measured correction `efficiency` at each size
// (the fitted line's time over the measured time, interpolated in log size). The collective model
// uses the fitted bus bandwidth as the capacity of that link class (docs/calibration.md).
struct CalibratedCollective {
  std::string op;      // all_reduce, all_gather, ... (models::CollectiveOp names)
  std::string link;    // nvlink, pcie, network, process
  int ranks = 2;
  int nodes = 1;
  std::string algorithm;  // the algorithm the measurements forced (NCCL_ALGO); empty: NCCL's choice
  Seconds latency;
  BytesPerSec busbw;
  std::vector<std::pair<double, double>> efficiency;  // (bytes, fitted time / measured time)
};

// A measured host transfer (pinned copies over PCIe): time = latency + bytes / bandwidth.
struct CalibratedTransfer {
  Seconds latency;
  BytesPerSec bandwidth;
};

struct NvlinkSpec {
  int generation = 0;
  int links = 0;
  BytesPerSec bandwidth;  // per direction, all links of one GPU together
};

struct PcieSpec {
  int generation = 0;
  int lanes = 0;
};

struct HardwareProfile {
  std::string name;
  std::string vendor;
  std::string architecture;
  std::string compute_capability;
  int sm_count = 0;
  Hertz boost_clock;
  std::map<Dtype, FlopsPerSec> peak_flops;  // dense; a dtype absent is unsupported
  Bytes memory_capacity;
  BytesPerSec memory_bandwidth;
  std::optional<NvlinkSpec> nvlink;
  std::optional<PcieSpec> pcie;  // absent for a CPU profile
  Watts tdp;                     // 0 when unknown
  Seconds kernel_launch_overhead;
  GemmModelParams gemm;
  AttentionParams attention;
  std::vector<CalibratedCollective> collectives;    // from calibration; empty for datasheet profiles
  std::optional<CalibratedTransfer> host_to_device;  // from calibration
  std::optional<CalibratedTransfer> device_to_host;
  std::map<std::string, std::string> calibration;  // provenance and fit quality of a calibrated profile
  std::filesystem::path file;  // where it was loaded from (empty when inline)

  [[nodiscard]] bool supports(Dtype d) const { return peak_flops.count(d) != 0; }
  // The dense peak; throws std::out_of_range for an unsupported dtype (check supports() first).
  [[nodiscard]] FlopsPerSec peak(Dtype d) const { return peak_flops.at(d); }
};


// Reads the mapping under `hardware:`.
HardwareProfile read_hardware_profile(const yaml::Node& node);
// Loads a profile file (its root is `hardware: {...}`).
HardwareProfile load_hardware_profile(const std::filesystem::path& file, IncludeStack& includes,
                                      const SourceLocation& from = {});
// A profile given by reference (path or shipped name) or inline as a map.
HardwareProfile load_hardware_reference(const yaml::Node& node, IncludeStack& includes);

}  // namespace cs::hardware
