#include "clustersim/calibrate/attention_fit.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/hardware/attention_model.hpp"

namespace cs::calibrate {

namespace {

// The tail's grid: steps of 0.005 blocks, finer than the 1-2% the tail moves the measured kernels'
// times by per 0.1 block; up to hardware::kAttentionMaxTailBlocks.
constexpr double kTailStep = 0.005;
constexpr double kTailMax = hardware::kAttentionMaxTailBlocks;
// The range of plausible fitted rates against the peak: GEMM's (gemm_fit.cpp).
constexpr double kAttentionPeakMargin = 1.5;
constexpr double kAttentionImplausibleFactor = 100.0;

bool chosen(const AttentionSample& a, const AttentionFitOptions& options) { return a.backend == options.backend && a.head_dim == options.head_dim; }

AttentionErrors errors_of(const hardware::HardwareProfile& hw, const std::vector<AttentionSample>& s) {
  AttentionErrors e;
  e.samples = static_cast<int>(s.size());
  for (const auto& a : s) {
    const double t = hardware::fused_attention_time(hw, Flops(a.flops()), Flops(a.row_flops()), hardware::Dtype::bf16, a.backward).value();
    const double err = std::abs(t / a.seconds - 1.0);
    e.mean += err / double(s.size());
    e.worst = std::max(e.worst, err);
  }
  return e;
}

}  // namespace

AttentionErrors attention_errors(const hardware::HardwareProfile& hw, const std::vector<AttentionSample>& samples, const AttentionFitOptions& options) {
  std::vector<AttentionSample> of_options;
  std::copy_if(samples.begin(), samples.end(), std::back_inserter(of_options), [&](const AttentionSample& a) { return chosen(a, options); });
  return errors_of(hw, of_options);
}

AttentionFit fit_attention(const hardware::HardwareProfile& base, const std::vector<AttentionSample>& samples, const AttentionFitOptions& options) {
  if (!base.supports(hardware::Dtype::bf16)) throw InputError(fmt::format("calibrate: attention is timed at the bf16 peak, and the {} profile has none", base.name));
  AttentionFit fit;
  fit.backend = options.backend;
  fit.head_dim = options.head_dim;
  const double launch = base.kernel_launch_overhead.value();
  std::vector<AttentionSample> forward, backward;
  std::set<std::pair<std::string, int>> others;  // the backends and head dims not fitted
  int too_short = 0;
  for (const auto& a : samples) {
    if (!chosen(a, options)) {
      ++fit.skipped;
      others.insert({a.backend, a.head_dim});
      continue;
    }
    // A kernel no longer than the launch overhead says nothing about the rate (and would weigh
    // a thousandfold in a relative fit of the time less the launch).
    if (a.seconds <= 2 * launch) {
      ++too_short;
      continue;
    }
    (a.backward ? backward : forward).push_back(a);
  }
  std::string left_out;
  if (too_short > 0) {
    left_out += fmt::format("{} attention kernels no longer than twice the launch overhead ({}) were not fitted", too_short, to_string(base.kernel_launch_overhead));
    fit.notes.push_back(left_out);
  }
  if (fit.skipped > 0) {
    std::vector<std::string> kinds;
    for (const auto& [backend, head_dim] : others) kinds.push_back(fmt::format("{} / {}", backend, head_dim));
    fit.notes.push_back(fmt::format("{} attention kernels of another backend / head dim than {} / {} were not fitted ({})", fit.skipped, options.backend,
                                    options.head_dim, fmt::join(kinds, ", ")));
    left_out += (left_out.empty() ? "" : "; ") + fit.notes.back();
  }
  if (forward.size() < 3 || backward.size() < 3) {
    throw InputError(fmt::format("calibrate: the attention fit needs at least 3 forward and 3 backward {} kernels of head dim {} (their rate and tail "
                                 "need shapes of different work); found {} and {}{}",
                                 options.backend, options.head_dim, forward.size(), backward.size(), left_out.empty() ? "" : " (" + left_out + ")"));
  }
  // The tail's share of a kernel's time is tail x R x SMs / F = tail x 2 x 128 x SMs / (batch x
  // heads x seq): kernels of one batch x heads x seq cannot tell the tail from the rate.
  std::set<double> works;
  for (const auto* set : {&forward, &backward}) {
    for (const auto& a : *set) works.insert(double(a.batch) * a.heads * a.seq);
  }
  if (works.size() < 2) {
    throw InputError(fmt::format("calibrate: the attention fit needs {} kernels of at least two different batch x heads x seq (the tail's share "
                                 "of the time depends on it alone); all have {}",
                                 options.backend, *works.begin()));
  }
  const double peak = base.peak(hardware::Dtype::bf16).value();
  const double sms = std::max(base.sm_count, 1);
  // Least squares on the relative error of the time less the launch overhead. For a tail c the
  // rate R minimising sum (v_i / R - 1)^2, v_i = (F_i + c R_i SMs) / (t_i - launch), is
  // sum v^2 / sum v, leaving n - (sum v)^2 / sum v^2; the grid over c keeps the least total,
  // the smaller c on a tie.
  const auto best_rate = [&](const std::vector<AttentionSample>& s, double c, double& residual) {
    double sv = 0, svv = 0;
    for (const auto& a : s) {
      const double v = (a.flops() + c * a.row_flops() * sms) / (a.seconds - launch);
      sv += v;
      svv += v * v;
    }
    residual += double(s.size()) - sv * sv / svv;
    return svv / sv;
  };
  double best = INFINITY, rate_f = 0, rate_b = 0;
  for (int i = 0; i * kTailStep <= kTailMax + 1e-12; ++i) {
    const double c = i * kTailStep;
    double residual = 0;
    const double rf = best_rate(forward, c, residual);
    const double rb = best_rate(backward, c, residual);
    if (std::isfinite(residual) && std::isfinite(rf) && std::isfinite(rb) && residual < best * (1 - 1e-12)) {
      best = residual;
      fit.params.tail_blocks = c;
      rate_f = rf;
      rate_b = rb;
    }
  }
  if (!std::isfinite(best)) throw InputError("calibrate: the attention kernels' times give no finite fit (check their seconds and shapes)");
  if (fit.params.tail_blocks >= kTailMax - 1e-9) {
    fit.notes.push_back(fmt::format("the attention tail reached the end of its range ({} blocks): the kernels' times fall off with work faster "
                                    "than the model allows",
                                    kTailMax));
  }
  for (auto [rate, eff, pass] : {std::tuple{rate_f, &fit.params.forward_efficiency, "forward"}, std::tuple{rate_b, &fit.params.backward_efficiency, "backward"}}) {
    *eff = rate / peak;
    // As for GEMMs (gemm_fit.cpp): past 1.5 x the peak, or under a hundredth of it, the times are in
    // another unit (a whole sweep in ms written as seconds had fitted an efficiency of 0.0007, and a
    // step 200 times slower, exit 0).
    if (*eff > kAttentionPeakMargin || *eff < 1.0 / kAttentionImplausibleFactor) {
      throw InputError(fmt::format("calibrate: the {} attention kernels fit {:.3g} TFLOP/s, {:.3g} x the {}'s bf16 peak of {}: {}; the kernels' "
                                   "times (seconds) or shapes are wrong",
                                   pass, rate / 1e12, *eff, base.name, to_string(FlopsPerSec(peak)),
                                   *eff > 1.0 ? fmt::format("no kernel runs past {} x its peak", kAttentionPeakMargin)
                                              : fmt::format("no fused kernel runs {} times slower than its peak", kAttentionImplausibleFactor)));
    }
    if (*eff > 1.0) {
      fit.notes.push_back(fmt::format("the fitted {} attention rate is {:.0f} TFLOP/s, above the {} bf16 peak: efficiency capped at 1 (are the "
                                      "kernels' FLOPs counted as the model counts them?)",
                                      pass, rate / 1e12, base.name));
      *eff = 1.0;
    }
  }
  std::vector<AttentionSample> used = forward;
  used.insert(used.end(), backward.begin(), backward.end());
  fit.samples = static_cast<int>(used.size());
  if (base.attention.measured()) {
    const AttentionErrors b = errors_of(base, used);
    fit.base_mean = b.mean;
    fit.base_worst = b.worst;
  }
  hardware::HardwareProfile fitted = base;
  fitted.attention = fit.params;
  const AttentionErrors f = errors_of(fitted, used);
  fit.mean = f.mean;
  fit.worst = f.worst;
  return fit;
}

}  // namespace cs::calibrate
