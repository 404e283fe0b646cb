// Fused causal attention: the profile's attention constants fitted to measured kernels.
//
// Model (hardware::fused_attention_seconds, docs/training.md "Operations of a layer"):
//   t = (F + tail_blocks x R x SMs) / (peak x efficiency) + launch
// with F the pass's FLOPs and R one 128-query block's walk over the whole sequence. For each
// candidate tail (a grid from 0 to 8 blocks in steps of 0.005), the forward and the backward
// efficiencies that minimise the squared relative time error have a closed form; the tail with the
// least total error wins. One backend and one head dim are fitted (default cudnn, 128): the model
// has no head-dim term, and another backend is another kernel.
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
  bool base_has_attention = false;
  double base_mean = 0, base_worst = 0;  // the base profile's relative time errors on the fitted samples
  double mean = 0, worst = 0;            // the fit's
};

// Throws InputError when fewer than 3 forward or 3 backward samples of the backend and head dim
// are given (the tail and the rate need shapes of different work), or the base lacks the dtype.
AttentionFit fit_attention(const hardware::HardwareProfile& base, const std::vector<AttentionSample>& samples, const AttentionFitOptions& options = {});

}  // namespace cs::calibrate
