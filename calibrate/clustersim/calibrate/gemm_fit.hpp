// Fits the GEMM efficiency model (hardware/gemm_model.hpp) to measured GEMMs.
//
// Parameters: per measured dtype max_efficiency, tile ridge intensity and k_half (written as the
// profile's *_by_dtype values: each dtype runs its own kernels, so measuring one never moves
// another); shared, memory_efficiency and kernel_launch_overhead. Each is kept positive by fitting
// its logarithm. The fit minimises
//   sum_i (log t_model(shape_i; p) - log t_measured_i)^2
// (relative error, so a 20 us GEMM counts as much as a 20 ms one) by Levenberg-Marquardt with a
// forward-difference Jacobian, solved with Eigen. Efficiencies are capped at 1 (a measurement
// faster than the dense peak is an error in the profile's peak, reported as such).
//
// Then, per dtype, a residual table on the log2 grid of (M, N, K) takes up what the model leaves:
// the log of measured over modelled time at each sample is spread onto the 8 grid nodes around it
// with trilinear weights, and the node values solve a ridge least-squares problem (a weak pull
// towards 0 keeps nodes without data at factor 1). Quality is reported before and after the table:
// R^2 of achieved TFLOP/s and the worst relative time error.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "clustersim/calibrate/measurements.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::calibrate {

struct FitQuality {
  int samples = 0;
  double r2 = 0;               // of achieved FLOP/s (1 - SS_res / SS_tot); NaN where the rates do not vary
  [[nodiscard]] std::string r2_text() const;  // "0.9876", or "-" where R2 is undefined
  double worst_relative = 0;   // max |t_model / t_measured - 1|
  double mean_relative = 0;    // mean of the same
};

struct GemmFitOptions {
  bool fit_memory_efficiency = true;  // false when a copy-bandwidth probe already measured it
  bool residual_table = true;
  double ridge = 1e-3;                // pull of each residual node towards factor 1
  int max_iterations = 200;
};

struct GemmFit {
  hardware::GemmModelParams params;     // the fitted model, residual tables included
  Seconds kernel_launch_overhead;
  std::map<hardware::Dtype, FitQuality> base_quality;   // the base profile on the same samples
  std::map<hardware::Dtype, FitQuality> model_quality;  // parametric model alone, per dtype
  std::map<hardware::Dtype, FitQuality> table_quality;  // with the residual table
  FitQuality base_overall, model_overall, table_overall;
  int iterations = 0;
  std::vector<std::string> notes;       // parameters pinned at a bound, dtypes skipped, ...
};

// `base` gives the peaks, SM count, memory bandwidth and the starting point of the fit. Throws
// InputError when there are no usable samples or a sample's dtype has no peak in `base`.
GemmFit fit_gemm(const hardware::HardwareProfile& base, const std::vector<GemmSample>& samples, const GemmFitOptions& options = {});

// The model's time for one sample under `hw` (residual table applied when present).
double model_seconds(const hardware::HardwareProfile& hw, const GemmSample& s);
FitQuality quality_of(const hardware::HardwareProfile& hw, const std::vector<GemmSample>& samples);

}  // namespace cs::calibrate
