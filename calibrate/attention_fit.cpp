#include "clustersim/calibrate/attention_fit.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/hardware/gemm_model.hpp"

namespace cs::calibrate {

namespace {

constexpr double kTailStep = 0.005;
constexpr double kTailMax = 8.0;

struct Errors {
  double mean = 0, worst = 0;
};

Errors errors_of(const hardware::HardwareProfile& hw, const std::vector<AttentionSample>& s) {
  Errors e;
  for (const auto& a : s) {
    const double t = hardware::fused_attention_seconds(hw, a.flops(), a.row_flops(), hardware::Dtype::bf16, a.backward);
    const double err = std::abs(t / a.seconds - 1.0);
    e.mean += err / double(s.size());
    e.worst = std::max(e.worst, err);
  }
  return e;
}

}  // namespace

AttentionFit fit_attention(const hardware::HardwareProfile& base, const std::vector<AttentionSample>& samples, const AttentionFitOptions& options) {
  if (!base.supports(hardware::Dtype::bf16)) throw InputError(fmt::format("calibrate: attention is timed at the bf16 peak, and the {} profile has none", base.name));
  AttentionFit fit;
  fit.backend = options.backend;
  fit.head_dim = options.head_dim;
  std::vector<AttentionSample> forward, backward;
  for (const auto& a : samples) {
    if (a.backend != options.backend || a.head_dim != options.head_dim) {
      ++fit.skipped;
      continue;
    }
    (a.backward ? backward : forward).push_back(a);
  }
  if (forward.size() < 3 || backward.size() < 3) {
    throw InputError(fmt::format("calibrate: the attention fit needs at least 3 forward and 3 backward {} kernels of head dim {} (their rate and tail "
                                 "need shapes of different work); found {} and {}",
                                 options.backend, options.head_dim, forward.size(), backward.size()));
  }
  const double peak = base.peak(hardware::Dtype::bf16).value();
  const double sms = std::max(base.sm_count, 1);
  const double launch = base.kernel_launch_overhead.value();
  // For a tail c, the rate x = 1/R minimising sum (a_i x - 1)^2 with a_i = (F_i + c R_i SMs) / t_i
  // is sum a / sum a^2, and the error left is n - (sum a)^2 / sum a^2.
  const auto best_rate = [&](const std::vector<AttentionSample>& s, double c, double& residual) {
    double sa = 0, saa = 0;
    for (const auto& a : s) {
      const double time = std::max(a.seconds - launch, 1e-3 * a.seconds);
      const double v = (a.flops() + c * a.row_flops() * sms) / time;
      sa += v;
      saa += v * v;
    }
    residual += double(s.size()) - sa * sa / saa;
    return saa / sa;  // the rate R
  };
  double best = INFINITY;
  for (int i = 0; i * kTailStep <= kTailMax + 1e-12; ++i) {
    const double c = i * kTailStep;
    double residual = 0;
    const double rf = best_rate(forward, c, residual);
    const double rb = best_rate(backward, c, residual);
    if (residual < best) {
      best = residual;
      fit.params.tail_blocks = c;
      fit.params.forward_efficiency = std::min(rf / peak, 1.0);
      fit.params.backward_efficiency = std::min(rb / peak, 1.0);
    }
  }
  std::vector<AttentionSample> used = forward;
  used.insert(used.end(), backward.begin(), backward.end());
  fit.samples = static_cast<int>(used.size());
  fit.base_has_attention = base.attention.forward_efficiency > 0 && base.attention.backward_efficiency > 0;
  if (fit.base_has_attention) {
    const Errors b = errors_of(base, used);
    fit.base_mean = b.mean;
    fit.base_worst = b.worst;
  }
  hardware::HardwareProfile fitted = base;
  fitted.attention = fit.params;
  const Errors f = errors_of(fitted, used);
  fit.mean = f.mean;
  fit.worst = f.worst;
  return fit;
}

}  // namespace cs::calibrate
