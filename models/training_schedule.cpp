#include <algorithm>

#include "training_internal.hpp"

namespace cs::models {

std::vector<Pass> schedule_order(const ParallelismPlan& plan, int micro, int stage) {
  std::vector<Pass> out;
  const int pp = plan.pp;
  if (plan.schedule == PipelineSchedule::gpipe) {
    for (int c = 0; c < plan.vpp; ++c) {
      for (int i = 0; i < micro; ++i) out.push_back({true, i, c});
    }
    for (int c = plan.vpp; c-- > 0;) {
      for (int i = 0; i < micro; ++i) out.push_back({false, i, c});
    }
    return out;
  }
  const int v = plan.schedule == PipelineSchedule::interleaved ? plan.vpp : 1;
  const int total = micro * v;
  // Virtual micro-batch k runs chunk (k mod pp*v) / pp of micro-batch (k / (pp*v)) * pp + k mod pp;
  // backward passes visit the chunks in reverse.
  auto forward = [&](int k) {
    const int group = k % (pp * v);
    return Pass{true, (k / (pp * v)) * pp + k % pp, group / pp};
  };
  auto backward = [&](int k) {
    const int group = k % (pp * v);
    return Pass{false, (k / (pp * v)) * pp + k % pp, v - 1 - group / pp};
  };
  if (v == 1) {
    auto f = [](int k) { return Pass{true, k, 0}; };
    auto b = [](int k) { return Pass{false, k, 0}; };
    const int warmup = std::min(pp - stage - 1, micro);
    for (int k = 0; k < warmup; ++k) out.push_back(f(k));
    for (int k = 0; k < micro - warmup; ++k) {
      out.push_back(f(warmup + k));
      out.push_back(b(k));
    }
    for (int k = micro - warmup; k < micro; ++k) out.push_back(b(k));
    return out;
  }
  const int warmup = std::min((pp - stage - 1) * 2 + (v - 1) * pp, total);
  for (int k = 0; k < warmup; ++k) out.push_back(forward(k));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(forward(warmup + k));
    out.push_back(backward(k));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(backward(k));
  return out;
}

double peak_live_bytes(const ParallelismPlan& plan, int micro, int stage, const std::vector<double>& chunk_bytes) {
  const auto bytes = [&](int chunk) { return chunk_bytes[static_cast<std::size_t>(chunk)]; };
  if (plan.schedule == PipelineSchedule::gpipe) {
    double all = 0;
    for (int c = 0; c < plan.vpp; ++c) all += micro * bytes(c);
    return all;
  }
  // The same walk as schedule_order, cut short. After the warm-up forwards, the steady phase pairs
  // forward warmup + k with backward k; both passes' chunks repeat with period pp x v in k, and over
  // one period every chunk is stored and freed pp times, so the live bytes repeat too: the peak is
  // reached within the first period (the cool-down only frees).
  const int pp = plan.pp;
  const int v = plan.schedule == PipelineSchedule::interleaved ? plan.vpp : 1;
  const int total = micro * v;
  const int period = pp * v;
  const auto forward_chunk = [&](int k) { return v == 1 ? 0 : (k % period) / pp; };
  const auto backward_chunk = [&](int k) { return v == 1 ? 0 : v - 1 - (k % period) / pp; };
  const int warmup = v == 1 ? std::min(pp - stage - 1, micro) : std::min((pp - stage - 1) * 2 + (v - 1) * pp, total);
  double live = 0, peak = 0;
  for (int k = 0; k < warmup; ++k) {
    live += bytes(forward_chunk(k));
    peak = std::max(peak, live);
  }
  for (int k = 0; k < std::min(total - warmup, period); ++k) {
    live += bytes(forward_chunk(warmup + k));
    peak = std::max(peak, live);
    live -= bytes(backward_chunk(k));
  }
  return peak;
}

}  // namespace cs::models
