// Training plan search (`clustersim plan` on a training scenario; docs/plan-search.md): every plan of
// a space of TP, PP, vpp, CP, EP, micro-batch, ZeRO stage, recompute, sequence parallelism and GPU
// count is checked against the model's constraints, then against GPU memory, and the survivors are
// simulated (the full step simulation, folded) on all cores. Results stream into a resumable file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "clustersim/models/training.hpp"
#include "clustersim/topology/graph.hpp"

namespace cs::models {

struct SearchSpace {
  std::vector<int> gpus;   // GPU counts to try; dp = gpus / (tp pp cp)
  std::vector<int> tp, pp, vpp, cp, ep, micro, zero;
  std::vector<Recompute> recompute;
  std::vector<bool> sequence_parallel;  // applied when tp > 1 (off otherwise)
  bool uneven_layers = false;  // allow pp x vpp not dividing the layers (fewer on the first and last chunks)
};

// A stable text of a plan ("gpus=256 tp=8 pp=4 vpp=5 ..."), the key of the results file, and a short
// one for tables ("TP8 PP4 vpp5 DP8 mb1 Z1 selective SP").
std::string plan_key(const TrainingJob& job);
std::string plan_text(const TrainingJob& job);

// The default space for a job on a topology: the job's GPU count; TP in powers of two up to a node's
// GPUs; PP among the divisors of the layers up to 64; vpp 1, 2, 4; CP 1; EP 1 (and the divisors of
// the experts up to 64 for MoE models); micro-batch 1, 2, 4; ZeRO 1; every recompute mode; sequence
// parallelism on.
SearchSpace default_space(const TrainingJob& job, const topology::Topology& topo);

struct PlanOutcome {
  enum class Status { simulated, constraint, memory, bound };
  std::string key;          // a stable text of the plan, e.g. "gpus=256 tp=8 pp=4 vpp=5 ..."
  TrainingJob job;
  Status status = Status::simulated;
  std::string reason;       // constraint or memory verdict, or the bound that pruned it
  double lower_bound_s = 0; // no step of this plan can be shorter (see search_plans)
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
  std::vector<PlanOutcome> outcomes;     // in enumeration order
  std::size_t enumerated = 0, constraint = 0, memory = 0, simulated = 0, resumed = 0, bound = 0;
};

// Lower bound of a plan's step: the compute of its busiest pipeline stage (every micro-batch's
// kernels, from the per-op model the simulation uses, communication left out) plus the first
// micro-batch's forward through the stages before the last.
// Deterministic: the same space gives the same outcomes in the same order, whatever the thread count
// and whatever part came from the results file. Throws std::invalid_argument for an empty space.
SearchResult search_plans(const TrainingJob& base, const topology::Topology& topo, const SearchSpace& space, const SearchOptions& options);

// A shard's simulated outcomes as text (one JSON object per line, with the plan's index), and their
// merge into another shard's result of the same space.
std::string shard_lines(const SearchResult& result);
void merge_shard(SearchResult& into, const std::string& lines, double price_per_gpu_hour, double token_budget);

// The plans no other beats on both time to train and cost (ascending time), among the simulated.
std::vector<std::size_t> pareto_front(const SearchResult& result);

}  // namespace cs::models
