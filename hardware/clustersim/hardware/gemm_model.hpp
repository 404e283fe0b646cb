// GEMM time from a hardware profile.
//
//   time = (max(t_compute, t_memory) + t_reduction + kernel_launch_overhead) x correction
//   t_compute = 2BMNK / (peak[dtype] * max_efficiency[dtype] * load * q_tile * q_wave * tile_eff * k_eff * K / (s ceil(K/s)))
//   t_memory  = B (MK + KN + MN) * bytes(dtype) / (HBM bandwidth * memory_efficiency)
//   t_reduction = s > 1 ? B MN (4 s + bytes(dtype)) / (HBM bandwidth * memory_efficiency) : 0
//
// load is 1 for a burst and gemm.sustained_fraction under sustained load (see Load below).
// B is the batch of a strided-batched GEMM (one kernel over B independent products, as
// cublasGemmStridedBatched and grouped GEMMs run them): its tiles share the waves and it pays one
// launch. q_tile = MN / (ceil(M/tm) tm * ceil(N/tn) tn) is tile quantisation, q_wave = sT / (ceil(sT/SMs) SMs)
// with T = B ceil(M/tm) ceil(N/tn) tiles is wave quantisation (NVIDIA, "Matrix Multiplication
// Background User's Guide"), tile_eff = min(1, (tm tn / (tm + tn)) / tile_ridge_intensity) is the
// lower data reuse of small tiles, and k_eff = ceil(K/s) / (ceil(K/s) + k_half) the fixed cost of each
// tile's prologue and epilogue spread over its K loop. s is split-K: with fewer tiles than SMs the K
// loop may be split over the most blocks per tile that one wave holds (sT <= SMs, K >= 256 s, s <= 16),
// whose fp32 partial sums a reduction pass then adds. The tile (from that guide's list: 256x128, 128x256, 128x128, 128x64,
// 64x128, 64x64) and split are the candidate that gives the shortest time, as cuBLAS's heuristics
// aim to. max_efficiency, tile_ridge_intensity, k_half and memory_efficiency are the profile's
// parameters, which calibration fits; `correction` is the calibrated residual table
// (GemmResidualTable: measured over modelled time on a log2 grid of M, N, K), 1 without one.
#pragma once

#include <cstdint>
#include <string>

#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::hardware {

struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;  // independent M x N x K products in one batched kernel
};

struct GemmEstimate {
  Seconds time;
  FlopsPerSec achieved;  // 2BMNK / time
  double efficiency = 0.0;  // achieved / dense peak
  int tile_m = 0;
  int tile_n = 0;
  int split_k = 1;  // K loop split over this many thread blocks per output tile (fewer tiles than SMs)
  bool memory_bound = false;
};

// How long the GPU has been busy: a lone kernel after idle runs at the boost clock (what GEMM
// microbenchmarks measure); under sustained load (a training step, a serving window) the GPU sits at
// its power limit and compute-bound work runs at gemm.sustained_fraction of that rate.
enum class Load { burst, sustained };

// Why the model cannot time this shape, or "" when it can: a dimension past 2^31, or more than 2^62
// outputs (estimate_gemm throws std::invalid_argument with this text).
std::string gemm_shape_problem(GemmShape shape);
// Throws std::invalid_argument for non-positive dimensions or a dtype the profile lacks.
GemmEstimate estimate_gemm(const HardwareProfile& hw, GemmShape shape, Dtype dtype, Load load = Load::burst);
// The factor compute-bound rates are multiplied by under `load`.
double load_factor(const HardwareProfile& hw, Load load);

// The max_efficiency[dtype] with which estimate_gemm reproduces a measured compute-bound GEMM:
// the measured time less the launch overhead, divided back through the shape's quantisation and
// K factors. Throws std::invalid_argument when the shape is memory-bound or the measurement is
// faster than the model allows (a ceiling above 1).
double fit_max_efficiency(const HardwareProfile& hw, GemmShape shape, Dtype dtype, FlopsPerSec measured);

}  // namespace cs::hardware
