// Fused causal attention: the profile's attention constants fitted to measured kernels.
//
// Model (hardware::fused_attention_time, hardware/attention_model.hpp; docs/training.md "Operations of a layer"):
//   t = (F + tail_blocks x R x SMs) / (peak x efficiency) + launch
// with F the pass's FLOPs and R one 128-query block's walk over the whole sequence. For each
// candidate tail (a grid from 0 to hardware::kAttentionMaxTailBlocks in steps of 0.005), the forward and the backward
// efficiencies that minimise the squared relative error of the time less the launch overhead have
// a closed form; the tail with the least total error wins. One backend and one head dim are fitted
// (default cudnn, 128): the model has no head-dim term, and another backend is another kernel.
// Kernels of another backend or head dim, and kernels no longer than twice the launch overhead, are
// left out (with a note, which the error names when too few remain); an efficiency above 1 is
// capped (with a note).
#pragma once

#include <string>
#include <vector>

#include "clustersim/calibrate/measurements.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::calibrate {

struct AttentionFitOptions {
  std::string backend = "cudnn";
  int head_dim = 128;
};

struct AttentionFit {
  hardware::AttentionParams params;
  std::string backend;
  int head_dim = 128;
  int samples = 0;          // fitted (forward and backward)
  int skipped = 0;          // of another backend or head dim
  double base_mean = 0, base_worst = 0;  // the base profile's relative time errors on the fitted samples (when it has attention constants)
  double mean = 0, worst = 0;            // the fit's
  std::vector<std::string> notes;        // kernels left out, a rate capped, the tail at its range's end
};

// The relative time errors of `hw`'s attention constants on the kernels of the options' backend and
// head dim (burst load, as kernels are measured): over `samples` of those kernels, the mean and the
// worst of |t_model / t_measured - 1|.
struct AttentionErrors {
  int samples = 0;
  double mean = 0, worst = 0;
};
AttentionErrors attention_errors(const hardware::HardwareProfile& hw, const std::vector<AttentionSample>& samples,
                                 const AttentionFitOptions& options = {});

// Throws InputError when fewer than 3 forward or 3 backward samples of the backend and head dim
// are given, when they all have one batch x heads x seq (which cannot tell the tail from the rate),
// or when the base lacks bf16.
AttentionFit fit_attention(const hardware::HardwareProfile& base, const std::vector<AttentionSample>& samples, const AttentionFitOptions& options = {});

}  // namespace cs::calibrate
