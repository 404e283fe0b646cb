// Training plan search (`clustersim plan` on a training scenario; docs/plan-search.md): every plan of
// a space of TP, PP, vpp, CP, EP, micro-batch, ZeRO stage, recompute, sequence parallelism, TP and
// DP overlap, rank order, attention kernel, GPU count and topology (GPU type) is checked against the model's constraints, then against GPU memory, and the survivors are
// simulated (the full step simulation, folded) on all cores. Results stream into a resumable file.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clustersim/models/training.hpp"
#include "clustersim/topology/graph.hpp"

namespace cs::models {

// A system to run on besides the scenario's: a topology (its GPU type, nodes and fabric) and the
// price of its GPUs. The topology must outlive the search and its result.
struct SearchSystem {
  const topology::Topology* topology = nullptr;
  double price_per_gpu_hour = 0;  // USD; 0: cost in GPU-hours (every system alike)
  std::string offering;           // where the price comes from
};

struct SearchSpace {
  std::vector<SearchSystem> systems;  // other topologies (GPU types) to try; the scenario's is always tried
  std::vector<int> gpus;   // GPU counts to try; dp = gpus / (tp pp cp)
  std::vector<int> tp, pp, vpp, cp, ep, micro, zero;
  // Expert tensor parallelism for MoE models; kEtpFollowsTp stands for each plan's own TP (Megatron-
  // Core's default). Ignored (1) for dense models.
  std::vector<int> etp;
  static constexpr int kEtpFollowsTp = 0;
  bool every_vpp = false;    // vpp: every divisor of layers / pp (the list is ignored)
  bool every_micro = false;  // micro: every divisor of global batch / dp (the list is ignored)
  std::vector<Recompute> recompute;
  std::vector<bool> sequence_parallel;  // applied when tp > 1 (off otherwise)
  std::vector<bool> tp_overlap;         // applied with sequence parallelism; empty: the scenario's setting
  std::vector<bool> dp_overlap;         // gradient reduce and parameter gather overlapped; empty: the scenario's
  std::vector<std::vector<ParallelDim>> orders;  // rank orders; empty: the scenario's
  std::vector<bool> flash_attention;    // fused attention or Megatron's unfused path; empty: the scenario's
  bool uneven_layers = false;  // allow pp x vpp not dividing the layers (fewer on the first and last chunks)
};

// One plan of a space, stored compactly (a space can hold millions); SearchResult::job rebuilds the
// whole job from it.
struct PlanChoice {
  int system = 0;  // 0: the scenario's topology; k: SearchSpace::systems[k - 1]
  int gpus = 0, tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1, dp = 1, micro = 1, zero = 1;
  Recompute recompute = Recompute::selective;
  bool sequence_parallel = false, tp_overlap = false, grad_overlap = true, param_overlap = true, flash_attention = true;
  std::array<ParallelDim, 5> order{ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::dp, ParallelDim::pp};
};
PlanChoice choice_of(const TrainingJob& job);
// The schedule of a searched plan of `pp` stages with `vpp` chunks: 1F1B at one stage (each
// micro-batch's forward then its backward), interleaved when vpp > 1, else the scenario's own (plain
// 1F1B when the scenario interleaves).
PipelineSchedule searched_schedule(const ParallelismPlan& base, int pp, int vpp);
TrainingJob apply_choice(const TrainingJob& base, const PlanChoice& c);

// A stable text of a plan ("gpus=256 tp=8 pp=4 vpp=5 ..."), the key of the results file, and a short
// one for tables ("TP8 PP4 vpp5 DP8 mb1 Z1 selective SP"). Settings at their usual value (TP overlap
// off, DP overlap on, Megatron's rank order, flash attention) are left out of both.
// `unfilled_gpus` > 0: the GPUs a plan was asked for when no data-parallel degree fills them (tp x pp
// x cp does not divide them): shown as those GPUs and dp "-" (`DP-`), not the rounded-down dp.
std::string plan_key(const TrainingJob& job, int unfilled_gpus = 0);
std::string plan_text(const TrainingJob& job, int unfilled_gpus = 0);

// The default space for a job on a topology: the job's GPU count; TP in powers of two up to a node's
// GPUs; PP among the divisors of the layers up to 64; vpp 1, 2, 4; CP 1; EP 1 (and the divisors of
// the experts up to 64 for MoE models); micro-batch 1, 2, 4; ZeRO 1; every recompute mode; sequence
// parallelism on.
SearchSpace default_space(const TrainingJob& job, const topology::Topology& topo);

struct PlanOutcome {
  enum class Status { simulated, constraint, memory, bound };
  PlanChoice plan;
  Status status = Status::simulated;
  std::string reason;       // a broken constraint (memory and bound verdicts: SearchResult::reason)
  double lower_bound_s = 0; // no step of this plan can be shorter (see search_plans)
  double bound_threshold_s = 0;  // status bound: the keep-th best step its bound exceeded
  double step_s = 0, mfu = 0, tokens_per_s = 0, time_to_train_s = 0, gpu_hours = 0, cost = 0;
  StepBreakdown breakdown;
  double memory_bytes = 0;  // fullest GPU
  bool resumed = false;     // read back from the results file
  bool evaluated = true;    // false: a plan another shard (MPI rank) simulates
};

struct SearchOptions {
  int threads = 0;                       // 0: every core
  std::filesystem::path results;         // resumable results file (JSON lines); empty: none
  double price_per_gpu_hour = 0;         // for cost; 0: cost is GPU-hours
  std::function<void(std::size_t done, std::size_t total)> progress;  // called from one thread
  int shard = 0, shards = 1;             // simulate only the plans whose index % shards == shard
  // Branch and bound (off by default): simulate in order of the lower bound and skip plans whose bound
  // already loses to the `keep`-th best step time and cost found; the same outcomes for any thread
  // count and after a resume (not with shards > 1, where it is refused).
  bool bound = false;
  int keep = 10;
};

struct SearchResult {
  TrainingJob base;                      // the scenario's job; a plan is base with its choice applied
  std::vector<SearchSystem> systems;     // [0]: the scenario's topology (at SearchOptions' price), then the space's
  std::vector<PlanOutcome> outcomes;     // in enumeration order
  std::size_t enumerated = 0, constraint = 0, memory = 0, simulated = 0, resumed = 0, bound = 0;
  // The outcome of the scenario's own plan, which is always in the space (after the enumerated
  // plans when the space's lists leave it out) and always simulated when it is possible and fits.
  std::size_t own = 0;
  int keep = 0;                          // the bound's K, when it pruned
  // (system, GPUs) -> every GPU of the nodes such a plan runs on, for each pair in the outcomes
  // (the count walks the topology's GPUs: filled once, after the enumeration).
  std::map<std::pair<int, int>, int> billed;

  [[nodiscard]] TrainingJob job(const PlanOutcome& o) const { return apply_choice(base, o.plan); }
  // plan_key, the GPU count asked for when tp x pp x cp does not divide it, and the topology when
  // it is not the scenario's.
  [[nodiscard]] std::string key(const PlanOutcome& o) const;
  // plan_text, and the topology when the space has more than one.
  [[nodiscard]] std::string text(const PlanOutcome& o) const;
  [[nodiscard]] const topology::Topology& topology(const PlanOutcome& o) const { return *systems[static_cast<std::size_t>(o.plan.system)].topology; }
  // Every GPU of the nodes the plan runs on, which renting whole nodes bills.
  [[nodiscard]] int billed_gpus(const PlanOutcome& o) const;
  // Why a plan was not simulated (empty when it was).
  [[nodiscard]] std::string reason(const PlanOutcome& o) const;
};

// Lower bound of a plan's step (branch and bound): for each pipeline stage, every micro-batch's
// forward, backward and recompute work on it (kernels from the per-op model the simulation uses, and
// the TP, CP and EP collectives it cannot hide, timed as the simulation times them), plus the first
// micro-batch's forward and the last one's backward through the first model chunk of every stage
// before it; the bound is the largest over the stages. For the plans this keeps, a refined bound adds
// what the stage's data-parallel traffic forces (ZeRO-3's gathers and reduce-scatters on the DP
// stream, the gathers inside each pass that its units wait for, a reduction or gather that is not
// overlapped, each timed on the topology with the other TP ranks' same collective and nothing else)
// and the optimizer step. Pipeline sends, blocking
// waits for them and the tied embeddings' all-reduce are left out. The first four rounds are ordered
// by the refined bound (no plan can be pruned before K are simulated).
// Deterministic: the same space gives the same outcomes in the same order, whatever the thread count
// and whatever part came from the results file. Throws std::invalid_argument for an empty space.
SearchResult search_plans(const TrainingJob& base, const topology::Topology& topo, const SearchSpace& space, const SearchOptions& options);

// A shard's simulated outcomes as text (one JSON object per line, with the plan's index), and their
// merge into another shard's result of the same space.
std::string shard_lines(const SearchResult& result);
void merge_shard(SearchResult& into, const std::string& lines, double token_budget);

// The plans no other beats on both time to train and cost (ascending time), among the simulated.
std::vector<std::size_t> pareto_front(const SearchResult& result);

}  // namespace cs::models
