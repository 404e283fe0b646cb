#include <algorithm>

#include "training_internal.hpp"

namespace cs::models {

namespace {

// Entry k of Megatron-Core's schedule table (get_schedule_table), which forward k runs: the step's
// micro-batches in groups of vp_group (the last group takes the rest), each group through chunk 0,
// then chunk 1, and so on.
Pass interleaved_entry(const ParallelismPlan& plan, int micro, int k) {
  const int group = plan.vp_group();
  const int whole = micro / group * group * plan.vpp;  // entries of the whole groups
  if (k < whole) {
    const int in_group = k % (group * plan.vpp);
    return {true, k / (group * plan.vpp) * group + in_group % group, in_group / group};
  }
  const int rest = micro % group;
  return {true, micro / group * group + (k - whole) % rest, (k - whole) / rest};
}

// The forwards a stage runs before its first backward (get_pp_rank_microbatches): two per later
// stage, and a group for each chunk past the first.
int interleaved_warmup(const ParallelismPlan& plan, int micro, int stage) {
  return std::min((plan.pp - stage - 1) * 2 + (plan.vpp - 1) * plan.vp_group(), micro * plan.vpp);
}

}  // namespace

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
  if (plan.schedule != PipelineSchedule::interleaved) {
    const int warmup = std::min(pp - stage - 1, micro);
    for (int k = 0; k < warmup; ++k) out.push_back({true, k, 0});
    for (int k = 0; k < micro - warmup; ++k) {
      out.push_back({true, warmup + k, 0});
      out.push_back({false, k, 0});
    }
    for (int k = micro - warmup; k < micro; ++k) out.push_back({false, k, 0});
    return out;
  }
  const int total = micro * plan.vpp;
  const auto forward = [&](int k) { return interleaved_entry(plan, micro, k); };
  // Backward k takes table entry k with the chunks in reverse.
  const auto backward = [&](int k) {
    const Pass f = interleaved_entry(plan, micro, k);
    return Pass{false, f.micro, plan.vpp - 1 - f.chunk};
  };
  const int warmup = interleaved_warmup(plan, micro, stage);
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
  if (plan.schedule != PipelineSchedule::interleaved) {
    // 1F1B: warm-up forwards, then each forward's bytes are freed by the next backward.
    return std::min(plan.pp - stage, micro) * bytes(0);
  }
  // The same walk as schedule_order, cut short where it can be. After the warm-up forwards, the
  // steady phase pairs forward warmup + k with backward k. With whole groups the table's chunks
  // repeat with period group x vpp, and over one period every chunk is stored and freed group
  // times, so the live bytes repeat too: the peak is reached within the first period (the cool-down
  // only frees). A last, smaller group breaks the period: then the whole steady phase is walked.
  const int total = micro * plan.vpp;
  const int group = plan.vp_group();
  const int warmup = interleaved_warmup(plan, micro, stage);
  const auto forward_bytes = [&](int k) { return bytes(interleaved_entry(plan, micro, k).chunk); };
  const auto backward_bytes = [&](int k) { return bytes(plan.vpp - 1 - interleaved_entry(plan, micro, k).chunk); };
  const int steady = micro % group == 0 ? std::min(total - warmup, group * plan.vpp) : total - warmup;
  double live = 0, peak = 0;
  for (int k = 0; k < warmup; ++k) {
    live += forward_bytes(k);
    peak = std::max(peak, live);
  }
  for (int k = 0; k < steady; ++k) {
    live += forward_bytes(warmup + k);
    peak = std::max(peak, live);
    live -= backward_bytes(k);
  }
  return peak;
}

}  // namespace cs::models
