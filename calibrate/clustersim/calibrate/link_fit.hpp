// Fits latency and bandwidth to measured transfers and collectives.
//
// Each group of collective samples with the same (op, link class, ranks, nodes, forced algorithm) is
// fitted to
//   t = alpha + S f(n) / B
// (f(n) the nccl-tests bus factor, so B is the bus bandwidth) by weighted least squares with
// weights 1/t^2, i.e. minimising the relative error sum ((alpha + x/B - t) / t)^2 over x = S f(n):
// two unknowns (alpha, 1/B), a 2x2 normal system. A negative alpha is refitted with alpha = 0.
// Where the measured curve bends away from the line (protocol switches, the pipeline filling),
// a size table keeps efficiency(S) = t_line(S) / t_measured(S), so prediction is exact at the
// measured sizes and interpolated in log size between them. Host and device copies are fitted the
// same way on t = alpha + bytes / B.
#pragma once

#include <vector>

#include "clustersim/calibrate/gemm_fit.hpp"
#include "clustersim/calibrate/measurements.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::calibrate {

struct Affine {
  double alpha = 0;  // s
  double beta = 0;   // s per unit of x
};
// Weighted (relative-error) least squares of t = alpha + beta x; needs at least one sample. alpha is
// 0 when the unconstrained fit makes it negative; beta is 0 (and alpha the weighted mean time) when
// time does not grow with x.
Affine fit_affine(const std::vector<double>& x, const std::vector<double>& t);

struct LinkFit {
  hardware::CalibratedCollective result;
  int samples = 0;
  double line_worst_relative = 0;  // max |t_line / t_measured - 1| before the size table
  double line_mean_relative = 0;
  // Whether the largest size measured spends at least as long on bandwidth as on latency: only then
  // does busbw mean anything (a sweep that stops at a few KiB measures latency alone).
  bool bandwidth_bound = false;
  double largest_bytes = 0;
  // Left out of the profile (calibrate): latency-bound, or measured at one size under 1 GiB.
  bool left_out = false;
};

// One fit per (op, link, ranks, nodes, algorithm), in that stable order.
std::vector<LinkFit> fit_collectives(const std::vector<CollectiveSample>& samples);

// The fitted collective's time for `bytes` (efficiency table applied).
double predict_seconds(const hardware::CalibratedCollective& c, double bytes);

struct CopyFit {
  MemoryKind kind = MemoryKind::d2d;
  hardware::CalibratedTransfer transfer;  // bandwidth in bytes copied per second
  int samples = 0;
  double worst_relative = 0;
};
// One fit per memory kind present, in the order d2d, h2d, d2h, host.
std::vector<CopyFit> fit_copies(const std::vector<MemorySample>& samples);

}  // namespace cs::calibrate
