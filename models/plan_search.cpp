#include "clustersim/models/plan_search.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"
#include "clustersim/common/pareto.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/sim/time.hpp"
#include "plan_fingerprint.hpp"
#include "training_internal.hpp"

namespace cs::models {

namespace {

std::string recompute_name(Recompute r) { return std::string(to_string(r)); }

// A results line whose numbers a simulation could have written: a positive step time and finite,
// non-negative figures. Anything else (an edited or damaged line) is dropped like a torn one, and
// its plan is simulated again.
bool well_formed(const nlohmann::json& j) {
  const auto number = [&](const char* key, bool positive) {
    if (!j.contains(key)) return true;
    const nlohmann::json& v = j[key];
    if (!v.is_number()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && (positive ? d > 0 : d >= 0);
  };
  if (!number("memory_bytes", false)) return false;
  if (j.value("status", std::string()) != "simulated") return true;
  if (!j.contains("step_s") || !number("step_s", true) || !number("mfu", false) || !number("tokens_per_s", false) || !number("time_to_train_s", false)) return false;
  if (j.contains("breakdown")) {
    const nlohmann::json& b = j["breakdown"];
    if (!b.is_array() || b.size() != 8) return false;
    for (const auto& v : b) {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) return false;
    }
  }
  return true;
}

// A simulated outcome's numbers from a results line (the resume file or another shard).
void read_numbers(PlanOutcome& o, const nlohmann::json& j) {
  o.step_s = j["step_s"].get<double>();
  o.mfu = j.value("mfu", 0.0);
  o.tokens_per_s = j.value("tokens_per_s", 0.0);
  o.time_to_train_s = j.value("time_to_train_s", 0.0);
  if (j.contains("breakdown") && j["breakdown"].size() == 8) {
    const auto& b = j["breakdown"];
    o.breakdown = {b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]};
  }
}

nlohmann::json to_line(const PlanOutcome& o, const std::string& key) {
  nlohmann::json j = {{"key", key},
                      {"status", o.status == PlanOutcome::Status::simulated    ? "simulated"
                                 : o.status == PlanOutcome::Status::constraint ? "constraint"
                                 : o.status == PlanOutcome::Status::memory     ? "memory"
                                                                               : "bound"}};
  if (!o.reason.empty()) j["reason"] = o.reason;
  if (o.status == PlanOutcome::Status::simulated) {
    const StepBreakdown& b = o.breakdown;
    j["step_s"] = o.step_s;
    j["mfu"] = o.mfu;
    j["tokens_per_s"] = o.tokens_per_s;
    j["time_to_train_s"] = o.time_to_train_s;
    j["breakdown"] = {b.compute, b.tp_comm, b.cp_comm, b.ep_comm, b.dp_comm, b.pp_comm, b.bubble, b.optimizer};
  }
  if (o.memory_bytes > 0) j["memory_bytes"] = o.memory_bytes;
  return j;
}

// The results file's first line: what its results were simulated for (plan_fingerprint.hpp).
constexpr const char* kResultsFormat = "clustersim plan results 1";

nlohmann::json results_header(const nlohmann::json& inputs) {
  return {{"format", kResultsFormat}, {"fingerprint", fingerprint(inputs)}, {"inputs", inputs}};
}

// Reads back what an earlier (perhaps killed) run wrote: a header line, then one JSON object per
// line; a torn last line is skipped (its plan is evaluated again). A file without the header, or
// whose header was written for other inputs, is refused: its step times belong to another model,
// batch, precision, system or clustersim, and reusing them would rank plans silently wrong (the
// file is kept, for the user to remove or point elsewhere).
std::map<std::string, nlohmann::json> read_results(const std::filesystem::path& file, const nlohmann::json& inputs) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream in = open_input_file(file, "the results of an earlier search (--results)");
  std::string line;
  if (!std::getline(in, line)) return out;  // empty: a fresh start
  const SourceLocation first{std::make_shared<const std::string>(file.string()), 1, 0};
  const std::string afresh = "remove the file, or give another --results, to start afresh";
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
  }
  if (!header.is_object() || header.value("format", std::string()) != kResultsFormat || !header.contains("inputs")) {
    const std::string found = line.size() > 60 ? line.substr(0, 57) + "..." : line;
    throw InputError(first, fmt::format("expected the header of a plan results file ({{\"format\": \"{}\", ...}}, saying what its results were simulated "
                                        "for), found '{}' (a file of an earlier clustersim, or not a results file); {}",
                                        kResultsFormat, found, afresh));
  }
  if (header["inputs"] != inputs) {
    throw InputError(first, fmt::format("these results were simulated for other inputs than this search's ({}); {}", inputs_difference(header["inputs"], inputs),
                                        afresh));
  }
  while (std::getline(in, line)) {
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.is_object() && j.contains("key") && j["key"].is_string() && j.contains("status") && well_formed(j)) {
        const std::string key = j["key"].get<std::string>();
        out[key] = std::move(j);
      }
    } catch (const nlohmann::json::exception&) {
      // torn line
    }
  }
  return out;
}

}  // namespace

namespace {

// GPU-hours of the plan's GPUs; its cost bills every GPU of the nodes they sit on, as offerings rent
// whole nodes (cost_command.cpp): 12 GPUs on 8-GPU nodes pay for 16.
void price(PlanOutcome& o, const SearchResult& result, double tokens) {
  if (tokens <= 0) o.time_to_train_s = 0;
  const double hours = (tokens > 0 ? o.time_to_train_s : o.step_s) / 3600.0;
  o.gpu_hours = hours * o.plan.gpus;
  const double billed = hours * result.billed_gpus(o);
  const double price = result.systems[static_cast<std::size_t>(o.plan.system)].price_per_gpu_hour;
  o.cost = price > 0 ? billed * price : billed;
}

}  // namespace

namespace {

// Per micro-batch times of a plan's layers (forward; backward with recompute), which depend only on
// its shard, recompute mode, TP overlap and where its TP, CP and EP groups sit.
struct LayerTimes {
  double dense_f = 0, dense_b = 0, moe_f = 0, moe_b = 0, embedding_f = 0, embedding_b = 0, head_f = 0, head_b = 0;
};

// A rough count of the flows a plan's step simulation starts (data-parallel rings dominate, and
// ZeRO-3 runs three a layer a micro-batch): a round runs its heaviest plans first, so that one long
// simulation does not start last and leave the other threads idle. It orders work, nothing else.
double simulation_weight(const TrainingJob& j) {
  const ParallelismPlan& p = j.plan;
  const double groups = double(p.tp) * p.pp, ranks = double(p.dp) * p.cp, micro = j.micro_batches();
  const double collectives = p.zero_stage >= 3 ? 3.0 * micro * j.model.layers / p.pp : p.zero_stage == 2 ? 4.0 * micro : 4.0;
  return groups * (ranks * collectives + 2.0 * p.vpp * micro);
}

// Runs work(t) for t in [0, count): t = 0 on this thread, the others on threads of their own, joined.
template <class Work>
void on_threads(int count, Work&& work) {
  std::vector<std::thread> pool;
  for (int t = 1; t < count; ++t) pool.emplace_back([&work, t] { work(t); });
  work(0);
  for (auto& thread : pool) thread.join();
}

class BoundModel {
 public:
  // Where flows are hashed over equal-cost paths, a collective alone on the topology is no lower
  // bound: the step's buckets are other flows, which may hash onto fewer colliding paths (a RoCE
  // Clos gave a ZeRO-0 step 0.7% under its bound). There the data-parallel part is bounded by what
  // any algorithm must move through each node's NICs instead (injection_bound).
  explicit BoundModel(const topology::Topology& topo)
      : topo_(topo), cm_(topo), hashed_(hashes_flows(topo, cm_.router())), node_nic_rate_(node_nic_rates(topo)) {}

  // See search_plans in the header: the largest over the stages of every micro-batch's work on the
  // stage plus the first micro-batch's forward and the last one's backward through the first chunk
  // of each stage before it. With `data_parallel`, also what the stage's data-parallel traffic
  // forces (more expensive: it times the stage's collectives alone on the topology).
  double operator()(const TrainingJob& j, bool data_parallel = false) {
    const TransformerSpec& m = j.model;
    const ParallelismPlan& p = j.plan;
    const LayerTimes& t = layer_times(j);
    const std::vector<LayerRange> ranges = chunk_ranges(m.layers, p.pp, p.vpp);
    const double micro = j.micro_batches();
    double bound = 0, before = 0;  // before: chunk 0's forward and backward on the stages so far
    const bool fsdp = data_parallel && p.zero_stage >= 3 && reduces_gradients(j);
    // Per micro-batch work outside the ops: the embedding table's gradient, and unfused gradient
    // accumulation (as the simulation adds them to the units' backward passes).
    const hardware::HardwareProfile& hw = *topo_.gpu;
    const StageParameters table = embedding_parameters(m, p);
    const double embedding_b = t.embedding_b + embedding_gradient_seconds(j, hw, table) + grad_accumulation_seconds(j, hw, table);
    const double head_b = t.head_b + grad_accumulation_seconds(j, hw, head_parameters(m, p));
    const bool unfused = unfused_accumulation(j);
    for (int s = 0; s < p.pp; ++s) {
      double work = 0, first_chunk = 0, gathered_work = 0;
      const DataParallelGroups groups = fsdp ? data_parallel_groups(j, s) : DataParallelGroups{};
      for (int v = 0; v < p.vpp; ++v) {
        const LayerRange& r = ranges[static_cast<std::size_t>(v * p.pp + s)];
        const bool first = s == 0 && v == 0, last = s == p.pp - 1 && v == p.vpp - 1;
        const auto forward_of = [&](int l) { return m.is_moe_layer(l) ? t.moe_f : t.dense_f; };
        const auto backward_of = [&](int l) {
          return (m.is_moe_layer(l) ? t.moe_b : t.dense_b) + (unfused ? grad_accumulation_seconds(j, hw, layer_parameters(m, p, l)) : 0.0);
        };
        double forward = first ? t.embedding_f : 0.0, backward = first ? embedding_b : 0.0;
        for (int l = r.first; l < r.first + r.count; ++l) {
          forward += forward_of(l);
          backward += backward_of(l);
        }
        if (last) {
          forward += t.head_f;
          backward += head_b;
        }
        const double chunk = forward + backward;
        work += chunk;
        if (fsdp && r.count > 0) {
          // FSDP gathers a pass's unit i once its unit i - 2 has finished: every gather but the
          // pass's first two runs inside the pass, one after another on the DP stream, and its
          // last unit runs after them. Forward runs the layers first to last (the head joins the
          // last), backward last to first (the embedding joins the first).
          double forward_gathers = 0, backward_gathers = 0;
          for (int l = r.first + 2; l < r.first + r.count; ++l) forward_gathers += fsdp_gather(j, groups, l);
          for (int l = r.first; l < r.first + r.count - 2; ++l) backward_gathers += fsdp_gather(j, groups, l);
          const double last_forward = forward_of(r.first + r.count - 1) + (last ? t.head_f : 0.0);
          const double last_backward = backward_of(r.first) + (first ? embedding_b : 0.0);
          gathered_work += std::max(forward, forward_gathers + last_forward) + std::max(backward, backward_gathers + last_backward);
        } else {
          gathered_work += chunk;
        }
        if (v == 0) first_chunk = chunk;
      }
      double stage = micro * work + before;
      if (fsdp) stage = std::max(stage, micro * gathered_work + before);
      if (data_parallel) stage = std::max(stage, with_data_parallel(j, s, stage));
      bound = std::max(bound, stage);
      before += first_chunk;
    }
    return bound;
  }

 private:
  // A stage's step with its data-parallel traffic, given `compute_end`, the bound on when its last
  // compute task ends. Every collective runs on the stage's one data-parallel stream, in order, and
  // takes at least its time alone on the topology; the optimizer step follows the last reduction.
  // - ZeRO-3 (FSDP): each pass gathers every layer's weights and each backward reduce-scatters its
  //   gradients, so the stream is busy for the sum of them all.
  // - Without overlapped gradient reduction: one reduction of the stage's gradients starts after its
  //   last backward. ZeRO-2 reduce-scatters every micro-batch's: the stream is busy for all of them.
  // - Without overlapped parameter gathers (ZeRO 1 and 2): one gather follows the optimizer step.
  // Only the layers' parameters count (the embedding's and the head's are left out: a bound can leave
  // work out, never add it).
  double with_data_parallel(const TrainingJob& j, int s, double compute_end) {
    const ParallelismPlan& p = j.plan;
    const TransformerSpec& m = j.model;
    const double optimizer = optimizer_step_seconds(j, *topo_.gpu, stage_parameters(m, p, s));
    if (p.dp * p.cp < 2) return compute_end + optimizer;
    const std::vector<LayerRange> ranges = chunk_ranges(m.layers, p.pp, p.vpp);
    std::vector<int> layers;
    for (int v = 0; v < p.vpp; ++v) {
      const LayerRange& r = ranges[static_cast<std::size_t>(v * p.pp + s)];
      for (int l = r.first; l < r.first + r.count; ++l) layers.push_back(l);
    }
    const DataParallelGroups groups = data_parallel_groups(j, s);
    // Both parts of a unit's parameters: the dense ones over every data-parallel rank, the experts'
    // over the ranks that hold the same experts.
    const auto both = [&](CollectiveOp op, const StageParameters& params, double bytes_per) {
      return together(op, groups.dense, params.dense * bytes_per) + together(op, groups.expert, params.expert * bytes_per);
    };
    const double grad = j.gradient_bytes();
    if (p.zero_stage >= 3) {
      double per_micro = 0;
      for (int l : layers) {
        const StageParameters lp = layer_parameters(m, p, l);
        per_micro += 2 * both(CollectiveOp::all_gather, lp, 2.0) + both(CollectiveOp::reduce_scatter, lp, grad);
      }
      return j.micro_batches() * per_micro + optimizer;
    }
    StageParameters all;
    for (int l : layers) all += layer_parameters(m, p, l);
    double end = compute_end;
    const double reduction = both(p.reduce_scatters_gradients() ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, all, grad);
    if (!p.overlap_grad_reduce) end += reduction;
    // ZeRO-2 reduce-scatters every micro-batch's gradients: the stream carries them all before the optimizer.
    if (p.zero_stage == 2) end = std::max(end, j.micro_batches() * reduction);
    end += optimizer;
    if (p.zero_stage >= 1 && !p.overlap_param_gather) end += both(CollectiveOp::all_gather, all, 2.0);
    return end;
  }

  // The data-parallel groups of stage s, of every TP rank: every dp x cp rank for dense weights, the
  // ranks that hold the same experts for expert weights (every such group of the stage). They move
  // the same bytes at the same time, as the step simulation runs them. Each part's key names its
  // groups for the memo of collective times.
  struct Groups {
    std::vector<std::vector<topology::Vertex>> groups;
    std::string key;
  };
  struct DataParallelGroups {
    Groups dense, expert;
  };
  DataParallelGroups data_parallel_groups(const TrainingJob& j, int s) const {
    const ParallelismPlan& p = j.plan;
    const auto& gpus = topo_.gpus();
    const auto add = [&](Groups& into, const std::vector<int>& ranks) {
      auto& group = into.groups.emplace_back();
      into.key += " |";
      for (int r : ranks) {
        group.push_back(gpus[static_cast<std::size_t>(r)]);
        into.key += fmt::format(" {}", group.back());
      }
    };
    DataParallelGroups g;
    for (int t = 0; t < p.tp; ++t) {
      std::vector<int> ranks;
      for (int d = 0; d < p.dp; ++d) {
        for (int c = 0; c < p.cp; ++c) ranks.push_back(rank_of(p, RankCoord{t, c, d, s}));
      }
      add(g.dense, ranks);
    }
    if (j.model.moe) {
      for (const std::vector<int>& ranks : stage_expert_data_parallel_groups(p, s)) add(g.expert, ranks);
    }
    return g;
  }

  // One layer's FSDP weight gather over a stage's data-parallel groups.
  double fsdp_gather(const TrainingJob& j, const DataParallelGroups& g, int layer) {
    const StageParameters lp = layer_parameters(j.model, j.plan, layer);
    return together(CollectiveOp::all_gather, g.dense, lp.dense * 2.0) + together(CollectiveOp::all_gather, g.expert, lp.expert * 2.0);
  }

  // The time of one collective on each of the groups at once, on the topology with nothing else: the
  // step's collectives of the same bytes start together and may only meet more traffic there. Where
  // flows are hashed, what the NICs must carry instead.
  double together(CollectiveOp op, const Groups& g, double bytes) {
    if (g.groups.empty() || g.groups.front().size() < 2 || bytes <= 0) return 0;
    std::string key = fmt::format("{} {}{}", static_cast<int>(op), bytes, g.key);
    if (auto it = collectives_.find(key); it != collectives_.end()) return it->second;
    if (hashed_) return collectives_.emplace(std::move(key), injection_bound(g, bytes)).first->second;
    std::vector<Collective> all;
    for (const auto& group : g.groups) {
      Collective& c = all.emplace_back();
      c.op = op;
      c.ranks = group;
      c.bytes = Bytes(bytes);
    }
    const double t = cm_.simulate_together(all).value();
    collectives_.emplace(std::move(key), t);
    return t;
  }

  const LayerTimes& layer_times(const TrainingJob& j) {
    const ParallelismPlan& p = j.plan;
    // A lower bound times rank 0's groups alone: the step takes the slowest of the placements, so
    // any one bounds it (enumerating them all for a million plans doubled the Calculon-size search).
    GroupCollectives groups(first_groups(p, topo_), topo_, cm_);
    std::string key = fmt::format("{} {} {} {} {} {} {} {} {} {} |", j.micro_batch, p.tp, p.cp, p.ep, p.etp, p.sequence_parallel ? 1 : 0,
                                  static_cast<int>(j.recompute), p.tp_overlap ? 1 : 0, p.flash_attention ? 1 : 0, fp8_weight_cast_share(j));
    for (CommGroup g : {CommGroup::tp, CommGroup::cp, CommGroup::ep, CommGroup::etp}) {
      for (const auto& group : groups.placements().of(g)) {
        for (auto v : group) key += fmt::format(" {}", v);
        key += " ;";
      }
      key += " |";
    }
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const TransformerSpec& m = j.model;
    const Shard shard = shard_of(j);
    const CommTime comm = [&](CommGroup g, CollectiveOp op, double bytes) { return groups(g, op, bytes); };
    const auto timed = [&](const std::vector<Op>& ops) {
      const OpsTime o = time_ops(ops, *topo_.gpu, j.precision, comm, j.recompute, p.tp_overlap, p.tp, fp8_weight_cast_share(j));
      return std::make_pair(o.forward.total(), o.backward.total() + o.recompute.total());
    };
    LayerTimes t;
    std::tie(t.dense_f, t.dense_b) = timed(layer_forward_ops(m, 0, shard));
    std::tie(t.moe_f, t.moe_b) = m.moe ? timed(layer_forward_ops(m, m.moe->dense_layers, shard)) : std::make_pair(t.dense_f, t.dense_b);
    std::tie(t.embedding_f, t.embedding_b) = timed(embedding_forward_ops(m, shard));
    std::tie(t.head_f, t.head_b) = timed(head_forward_ops(m, shard));
    return cache_.emplace(std::move(key), t).first->second;
  }

  // What any algorithm must move through the NICs, for an all-gather, reduce-scatter or all-reduce
  // of `bytes` (the whole buffer) on each group at once. A node holding k of a group's n members
  // takes in, for an all-gather, the (n - k)/n of the data its outside members hold and sends out the
  // k/n its own hold; a reduce-scatter the other way round (each shard's sums must leave or enter the
  // node once, partial sums at best); an all-reduce produces a reduce-scatter's results, so no less.
  // Each direction of the node's NICs carries its share at their summed rate at most, whatever the
  // hash does in the switches: so max(k, n - k)/n x bytes over that rate, summed over the groups
  // in the node, bounds the time. (Latencies and the NVLink side are left out: a bound may leave
  // work out, never add it.)
  double injection_bound(const Groups& g, double bytes) const {
    std::map<int, double> heavier;  // node -> bytes of its busier direction, over the groups
    for (const auto& group : g.groups) {
      std::map<int, int> members;  // node -> members of this group in it
      for (topology::Vertex v : group) ++members[topo_.device(v).node];
      if (members.size() < 2) continue;  // inside one node: no NIC traffic to count
      const double n = static_cast<double>(group.size());
      for (const auto& [node, k] : members) heavier[node] += std::max<double>(k, n - k) / n * bytes;
    }
    double t = 0;
    for (const auto& [node, b] : heavier) {
      const auto rate = node_nic_rate_.find(node);
      if (rate != node_nic_rate_.end() && rate->second > 0) t = std::max(t, b / rate->second);
    }
    return t;
  }

  // Each node's NIC ports' summed rate into the fabric (bytes/s, one direction).
  static std::map<int, double> node_nic_rates(const topology::Topology& topo) {
    std::map<int, double> rates;
    const topology::Graph& g = topo.graph();
    for (auto [e, end] = boost::edges(g); e != end; ++e) {
      const topology::Device& from = topo.device(boost::source(*e, g));
      const topology::Device& to = topo.device(boost::target(*e, g));
      if (from.kind == topology::DeviceKind::nic && from.node >= 0 && to.node < 0) rates[from.node] += topo.link(*e).bandwidth.value();
    }
    return rates;
  }

  const topology::Topology& topo_;
  CollectiveModel cm_;
  bool hashed_ = false;
  std::map<int, double> node_nic_rate_;
  std::map<std::string, LayerTimes> cache_;
  std::map<std::string, double> collectives_;  // times together, by op, bytes and groups
};

}  // namespace

namespace {

// A plan whose step runs past the simulator's clock is one plan out of the search, not the search's end.
std::string past_the_clock(const sim::TimeRangeError& e) { return fmt::format("its step runs past the simulator's clock: {}", e.what()); }

}  // namespace

PipelineSchedule searched_schedule(const ParallelismPlan& base, int pp, int vpp) {
  if (pp == 1) return PipelineSchedule::one_f_one_b;  // one stage: no pipeline to schedule
  return vpp > 1 ? PipelineSchedule::interleaved : base.vpp > 1 ? PipelineSchedule::one_f_one_b : base.schedule;
}

PlanChoice choice_of(const TrainingJob& j) {
  const ParallelismPlan& p = j.plan;
  PlanChoice c;
  c.gpus = p.gpus();
  c.tp = p.tp;
  c.pp = p.pp;
  c.vpp = p.vpp;
  c.cp = p.cp;
  c.ep = p.ep;
  c.etp = p.etp;
  c.dp = p.dp;
  c.micro = j.micro_batch;
  c.zero = p.zero_stage;
  c.recompute = j.recompute;
  c.sequence_parallel = p.sequence_parallel;
  c.tp_overlap = p.tp_overlap;
  c.grad_overlap = p.overlap_grad_reduce;
  c.param_overlap = p.overlap_param_gather;
  c.flash_attention = p.flash_attention;
  if (p.order.size() == c.order.size()) std::copy(p.order.begin(), p.order.end(), c.order.begin());
  return c;
}

TrainingJob apply_choice(const TrainingJob& base, const PlanChoice& c) {
  TrainingJob j = base;
  ParallelismPlan& p = j.plan;
  p.tp = c.tp;
  p.pp = c.pp;
  p.vpp = c.vpp;
  p.cp = c.cp;
  p.ep = c.ep;
  p.etp = c.etp;
  p.dp = c.dp;
  p.zero_stage = c.zero;
  p.sequence_parallel = c.sequence_parallel && c.tp > 1;
  p.tp_overlap = c.tp_overlap && p.sequence_parallel;
  // Settings that do not apply take their defaults, so that such plans have one key.
  p.overlap_grad_reduce = c.grad_overlap || !dp_overlap_applies(j);
  p.overlap_param_gather = c.param_overlap || !dp_overlap_applies(j);
  p.flash_attention = c.flash_attention;
  p.order.assign(c.order.begin(), c.order.end());
  p.schedule = searched_schedule(base.plan, c.pp, c.vpp);
  j.micro_batch = c.micro;
  j.recompute = c.recompute;
  // The scenario's micro-batch group where this plan can run it (Megatron-Core's range and last
  // group, check_job's rule), else Megatron-Core's default of pp.
  const int group = base.plan.microbatch_group;
  const std::int64_t micro = c.micro > 0 && c.dp > 0 ? base.global_batch / checked_product({c.micro, c.dp}) : 0;
  p.microbatch_group = c.vpp > 1 && group > 0 && micro <= std::numeric_limits<int>::max() && microbatch_groups_run(static_cast<int>(micro), c.pp, group) ? group : 0;
  return j;
}

namespace {

// The dimensions of a rank order that have more than one rank in the attention's mapping or the
// experts' (where dp stands for the expert-data-parallel rest): orders that agree on these place
// every rank alike.
std::vector<ParallelDim> effective_order(const ParallelismPlan& p) {
  std::vector<ParallelDim> out;
  const int expert_dp = p.ep > 1 || p.etp > 1 ? expert_data_parallel_size(p) : 1;
  for (ParallelDim d : p.order) {
    const int size = d == ParallelDim::tp   ? std::max(p.tp, p.etp)
                     : d == ParallelDim::cp ? p.cp
                     : d == ParallelDim::ep ? p.ep
                     : d == ParallelDim::dp ? std::max(p.dp, expert_dp)
                                            : p.pp;
    if (size > 1) out.push_back(d);
  }
  return out;
}

// What places the ranks: the dimensions of more than one rank in each of the two mappings, the
// attention's (tp, cp, dp, pp; ep has no place there) and the experts' (etp in tp's place, ep, the
// expert-data-parallel rest in dp's, pp; cp folds into that rest). Orders that agree on both place
// every rank alike: with etp 1, moving ep past tp changes neither (a probe found such MoE orders
// simulated twice, 1,184 of 6,008 plans). A dense model has no experts' mapping.
std::pair<std::vector<ParallelDim>, std::vector<ParallelDim>> placement(const ParallelismPlan& p, bool experts) {
  std::pair<std::vector<ParallelDim>, std::vector<ParallelDim>> out;
  const int expert_dp = experts ? expert_data_parallel_size(p) : 1;
  for (ParallelDim d : p.order) {
    const int attention = d == ParallelDim::tp ? p.tp : d == ParallelDim::cp ? p.cp : d == ParallelDim::ep ? 1 : d == ParallelDim::dp ? p.dp : p.pp;
    if (attention > 1) out.first.push_back(d);
    if (!experts) continue;
    const int expert = d == ParallelDim::tp ? p.etp : d == ParallelDim::cp ? 1 : d == ParallelDim::ep ? p.ep : d == ParallelDim::dp ? expert_dp : p.pp;
    if (expert > 1) out.second.push_back(d);
  }
  return out;
}

std::string order_text(const std::vector<ParallelDim>& order) {
  std::string s;
  for (ParallelDim d : order) {
    if (!s.empty()) s += '-';
    s += to_string(d);
  }
  return s;
}

// The settings a key and a plan text show only when they differ from the usual (so that the keys of
// plans without them stay as they were).
std::string unusual_order(const ParallelismPlan& p, bool experts) {
  ParallelismPlan megatron = p;
  megatron.order = ParallelismPlan().order;
  return placement(p, experts) == placement(megatron, experts) ? std::string() : order_text(effective_order(p));
}

}  // namespace

std::string plan_key(const TrainingJob& j, int unfilled_gpus) {
  const ParallelismPlan& p = j.plan;
  std::string s = fmt::format("gpus={} tp={} pp={} vpp={} cp={} ep={} dp={} micro={} zero={} recompute={} sp={}", unfilled_gpus > 0 ? unfilled_gpus : p.gpus(),
                              p.tp, p.pp, p.vpp, p.cp, p.ep, unfilled_gpus > 0 ? std::string("-") : std::to_string(p.dp), j.micro_batch, p.zero_stage,
                              recompute_name(j.recompute), p.sequence_parallel && p.tp > 1 ? 1 : 0);
  if (p.tp_overlap && p.sequence_parallel && p.tp > 1) s += " tp_overlap=1";
  if (dp_overlap_applies(j) && !p.overlap_grad_reduce) s += " grad_overlap=0";
  if (dp_overlap_applies(j) && !p.overlap_param_gather) s += " param_overlap=0";
  if (const std::string o = unusual_order(p, j.model.moe.has_value()); !o.empty()) s += " order=" + o;
  if (!p.flash_attention) s += " attention=unfused";
  if (p.overlap_p2p && p.pp > 1) s += fmt::format(" p2p_overlap={}", *p.overlap_p2p ? 1 : 0);  // no sends at pp 1
  if (!p.grad_accumulation_fusion) s += " grad_fusion=0";
  if (p.whole_gradient_all_reduce()) s += " grad_all_reduce=1";
  if (p.etp > 1) s += fmt::format(" etp={}", p.etp);
  if (p.vpp > 1 && p.microbatch_group > 0) s += fmt::format(" mb_group={}", p.microbatch_group);
  return s;
}

std::string plan_text(const TrainingJob& j, int unfilled_gpus) {
  const auto& p = j.plan;
  std::string s = fmt::format("TP{} PP{}", p.tp, p.pp);
  if (p.vpp > 1) s += fmt::format(" vpp{}", p.vpp);
  if (p.vpp > 1 && p.microbatch_group > 0) s += fmt::format(" groups of {}", p.microbatch_group);
  if (p.pp > 1 && p.schedule == PipelineSchedule::gpipe) s += " GPipe";
  if (p.cp > 1) s += fmt::format(" CP{}", p.cp);
  if (p.ep > 1) s += fmt::format(" EP{}", p.ep);
  if (p.etp > 1) s += fmt::format(" ETP{}", p.etp);
  s += fmt::format(" DP{} mb{} Z{} {}{}", unfilled_gpus > 0 ? std::string("-") : std::to_string(p.dp), j.micro_batch, p.zero_stage, to_string(j.recompute),
                   p.sequence_parallel && p.tp > 1 ? " SP" : "");
  if (p.tp_overlap && p.sequence_parallel && p.tp > 1) s += " TP-overlap";
  if (dp_overlap_applies(j) && (!p.overlap_grad_reduce || !p.overlap_param_gather)) s += " no-DP-overlap";
  if (const std::string o = unusual_order(p, j.model.moe.has_value()); !o.empty()) s += " order " + o;
  if (!p.flash_attention) s += " unfused-attention";
  if (p.pp > 1 && !p.p2p_overlapped()) s += " blocking-sends";
  if (unfused_accumulation(j)) s += " unfused-accumulation";
  if (p.whole_gradient_all_reduce()) s += " all-reduced-gradients";
  return s;
}

namespace {
// The GPUs a plan was asked for when no data-parallel degree fills them (its rejection says so), else
// 0: its key and text show them and dp "-", not the rounded-down dp and the GPUs that would use (a
// probe read "gpus=255 ... dp=51 of_gpus=256"). Such a plan is never simulated, so no resumed result
// carries its key.
int unfilled_gpus(const PlanOutcome& o) {
  const std::int64_t mp = checked_product({o.plan.tp, o.plan.pp, o.plan.cp});
  return mp > 0 && o.plan.gpus % mp != 0 ? o.plan.gpus : 0;
}
}  // namespace

int SearchResult::billed_gpus(const PlanOutcome& o) const {
  if (const auto it = billed.find({o.plan.system, o.plan.gpus}); it != billed.end()) return it->second;
  return topology(o).gpus_of_nodes_holding(o.plan.gpus);
}

std::string SearchResult::key(const PlanOutcome& o) const {
  std::string k = plan_key(job(o), unfilled_gpus(o));
  if (o.plan.system > 0) k += " topology=" + topology(o).name;
  return k;
}

std::string SearchResult::text(const PlanOutcome& o) const {
  std::string t = plan_text(job(o), unfilled_gpus(o));
  if (systems.size() > 1) t += " on " + topology(o).name;
  return t;
}

std::string SearchResult::reason(const PlanOutcome& o) const {
  switch (o.status) {
    case PlanOutcome::Status::simulated: return {};
    case PlanOutcome::Status::constraint: return o.reason;
    case PlanOutcome::Status::memory: return estimate_memory(job(o), *topology(o).gpu).verdict();
    case PlanOutcome::Status::bound:
    {
      // 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st.
      const int tens = keep % 100, ones = keep % 10;
      const char* suffix = tens >= 11 && tens <= 13 ? "th" : ones == 1 ? "st" : ones == 2 ? "nd" : ones == 3 ? "rd" : "th";
      return fmt::format("its lower bound {:.4g} s exceeds the {}{} best step {:.4g} s and cost{}", o.lower_bound_s, keep, suffix, o.bound_threshold_s,
                         systems.size() > 1 ? " on its topology" : "");
    }
  }
  return {};
}

SearchSpace default_space(const TrainingJob& job, const topology::Topology& topo) {
  SearchSpace s;
  // The scenario's plan is checked once the whole scenario is read (check_job); until then its
  // degrees may multiply past an int, which that check refuses.
  const std::int64_t own_gpus = checked_product({job.plan.tp, job.plan.pp, job.plan.dp, job.plan.cp});
  s.gpus = {static_cast<int>(std::min<std::int64_t>(own_gpus, std::numeric_limits<int>::max()))};
  int per_node = 0;
  const auto& gpus = topo.gpus();
  for (auto v : gpus) per_node += topo.device(v).node == topo.device(gpus.front()).node ? 1 : 0;
  for (int t = 1; t <= std::max(1, per_node); t *= 2) s.tp.push_back(t);
  for (int p = 1; p <= std::min(64, job.model.layers); ++p) {
    if (job.model.layers % p == 0) s.pp.push_back(p);
  }
  s.vpp = {1, 2, 4};
  s.cp = {1};
  s.ep = {1};
  s.etp = {1};
  if (job.model.moe) {
    for (int e = 2; e <= std::min(64, job.model.moe->experts); e *= 2) {
      if (job.model.moe->experts % e == 0) s.ep.push_back(e);
    }
    // Megatron-Core's two layouts: experts split like the dense layers (its default) and whole
    // experts (the recipes of large MoE models).
    s.etp.push_back(SearchSpace::kEtpFollowsTp);
  }
  s.micro = {1, 2, 4};
  s.zero = {1};
  s.recompute = {Recompute::none, Recompute::selective, Recompute::full};
  s.sequence_parallel = {true};
  // The job's own plan is always in the space, so that the search can say where it ranks.
  const auto with = [](std::vector<int>& v, int x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) {
      v.push_back(x);
      std::sort(v.begin(), v.end());
    }
  };
  with(s.tp, job.plan.tp);
  with(s.pp, job.plan.pp);
  with(s.vpp, job.plan.vpp);
  with(s.cp, job.plan.cp);
  with(s.ep, job.plan.ep);
  if (job.model.moe && job.plan.etp != job.plan.tp) with(s.etp, job.plan.etp);
  with(s.micro, job.micro_batch);
  with(s.zero, job.plan.zero_stage);
  if (!job.plan.sequence_parallel && job.plan.tp > 1) s.sequence_parallel.push_back(false);
  return s;
}

namespace {

template <class T>
std::vector<T> distinct(const std::vector<T>& v) {
  std::vector<T> out;
  for (const T& x : v) {
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  }
  return out;
}

// Ascending; in sqrt(n) steps, as n can be a batch of two billion sequences.
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}


}  // namespace

SearchResult search_plans(const TrainingJob& base, const topology::Topology& topo, const SearchSpace& space, const SearchOptions& options) {
  for (const auto* dim : {&space.gpus, &space.tp, &space.pp, &space.cp, &space.ep, &space.etp, &space.zero}) {
    if (dim->empty()) throw std::invalid_argument("every dimension of the search space needs at least one value");
  }
  for (const auto* dim : {&space.gpus, &space.tp, &space.pp, &space.vpp, &space.cp, &space.ep, &space.micro}) {
    if (std::any_of(dim->begin(), dim->end(), [](int v) { return v < 1; })) {
      throw std::invalid_argument("GPU counts, parallel degrees and micro-batch sizes of the search space are at least 1");
    }
  }
  if (std::any_of(space.etp.begin(), space.etp.end(), [](int v) { return v < 0; })) {
    throw std::invalid_argument("expert TP degrees of the search space are at least 1 (or 0: each plan's TP)");
  }
  if (std::any_of(space.zero.begin(), space.zero.end(), [](int z) { return z < 0 || z > 3; })) {
    throw std::invalid_argument("ZeRO stages of the search space are 0 to 3");
  }
  if ((space.vpp.empty() && !space.every_vpp) || (space.micro.empty() && !space.every_micro) || space.recompute.empty() || space.sequence_parallel.empty()) {
    throw std::invalid_argument("every dimension of the search space needs at least one value");
  }
  SearchResult out;
  out.systems.push_back({&topo, options.price_per_gpu_hour, {}});
  for (const SearchSystem& sys : space.systems) {
    if (!sys.topology) throw std::invalid_argument("a system of the search space has no topology");
    if ((sys.price_per_gpu_hour > 0) != (options.price_per_gpu_hour > 0)) {
      throw std::invalid_argument("either every system of the search space has a price or none has");
    }
    out.systems.push_back(sys);
  }
  for (const SearchSystem& sys : out.systems) {
    if (!sys.topology->gpu) throw std::invalid_argument(fmt::format("topology {} names no GPU hardware profile", sys.topology->name));
  }
  if (options.bound && options.shards > 1) throw std::invalid_argument("the lower-bound pruning runs in one process: leave --bound out under mpirun");
  const bool bound = options.bound && options.keep > 0;

  out.base = base;
  out.keep = bound ? options.keep : 0;
  std::vector<std::unique_ptr<BoundModel>> bounds;
  for (const SearchSystem& sys : out.systems) bounds.push_back(std::make_unique<BoundModel>(*sys.topology));
  // Cost per GPU-second of a plan's system (1: GPU-hours).
  const auto rate = [&](const PlanOutcome& o) {
    const double p = out.systems[static_cast<std::size_t>(o.plan.system)].price_per_gpu_hour;
    return p > 0 ? p : 1.0;
  };

  // Enumerate in a fixed order. Plans that differ only in a setting that does not apply (sequence
  // parallelism at TP 1, TP overlap without it, the place of a dimension of size 1 in the rank
  // order) are one plan.
  const PlanChoice own = choice_of(base);
  const std::vector<bool> tp_overlaps = space.tp_overlap.empty() ? std::vector<bool>{own.tp_overlap} : distinct(space.tp_overlap);
  std::vector<std::pair<bool, bool>> dp_overlaps;
  if (space.dp_overlap.empty()) {
    dp_overlaps = {{own.grad_overlap, own.param_overlap}};
  } else {
    for (bool d : distinct(space.dp_overlap)) dp_overlaps.emplace_back(d, d);
  }
  std::vector<std::array<ParallelDim, 5>> orders;
  if (space.orders.empty()) {
    orders = {own.order};
  } else {
    for (const auto& o : distinct(space.orders)) {
      if (o.size() != 5) throw std::invalid_argument("a rank order names each of tp, cp, ep, dp and pp once");
      std::array<ParallelDim, 5> a{};
      std::copy(o.begin(), o.end(), a.begin());
      orders.push_back(a);
    }
  }
  const std::vector<bool> attentions = space.flash_attention.empty() ? std::vector<bool>{own.flash_attention} : distinct(space.flash_attention);
  const std::vector<int> vpp_list = distinct(space.vpp), micro_list = distinct(space.micro);
  // The scenario's own plan: found among the enumerated plans, or added after them (the space's
  // lists need not hold its values), so that the output can always say where it ranks.
  const std::string own_key = plan_key(base);
  bool own_found = false;
  // The key decides; the cheap comparisons first spare building the job and formatting its key for
  // nearly every plan.
  const auto is_own = [&](const PlanChoice& c) {
    return c.system == 0 && c.gpus == own.gpus && c.tp == own.tp && c.pp == own.pp && c.vpp == own.vpp && c.cp == own.cp && c.ep == own.ep &&
           c.etp == own.etp && c.micro == own.micro && c.zero == own.zero && c.recompute == own.recompute && plan_key(apply_choice(base, c)) == own_key;
  };
  // The plans in enumeration order; the own plan (the first that is) found as they are listed.
  std::vector<PlanChoice> choices;
  const auto list = [&](const PlanChoice& c) {
    if (!own_found && is_own(c)) {
      own_found = true;
      out.own = choices.size();
    }
    choices.push_back(c);
  };
  // One plan's constraints, memory and cheap bound, with the bound models of the thread running it.
  const auto evaluate = [&](const PlanChoice& c, bool own_plan, std::vector<std::unique_ptr<BoundModel>>& models) {
    PlanOutcome o;
    o.plan = c;
    const TrainingJob j = apply_choice(base, c);
    const topology::Topology& topo = *out.systems[static_cast<std::size_t>(c.system)].topology;
    const int cluster = static_cast<int>(topo.gpus().size());
    // In 64 bits, checked (checked_product): the products of a space's values must not wrap. The
    // divisibility of the searched GPU count comes first, with the true numbers; check_job the rest.
    const std::int64_t model_parallel = checked_product({c.tp, c.pp, c.cp}), chunks = checked_product({c.pp, c.vpp});
    // Constraints first: they cost nothing.
    std::string why;
    if (model_parallel > c.gpus) {
      why = fmt::format("tp x pp x cp = {} x {} x {} does not divide the {} GPUs (it is more)", c.tp, c.pp, c.cp, c.gpus);
    } else if (c.gpus % model_parallel != 0) {
      why = fmt::format("tp x pp x cp = {} does not divide the {} GPUs", model_parallel, c.gpus);
    } else if (c.gpus > cluster) {
      why = fmt::format("{} GPUs but the topology has {}", c.gpus, cluster);
    } else if (!topo.gpu->supports(j.precision)) {
      why = fmt::format("precision {}: the {} has no {} tensor cores", hardware::to_string(j.precision), topo.gpu->name, hardware::to_string(j.precision));
    } else if (chunks > j.model.layers) {
      why = fmt::format("pp x vpp = {} x {} model chunks but the model has only {} layers", c.pp, c.vpp, j.model.layers);
    } else if (!space.uneven_layers && !own_plan && j.model.layers % chunks != 0) {  // the scenario may split its layers unevenly
      why = fmt::format("pp x vpp = {} does not divide the {} layers", chunks, j.model.layers);
    } else {
      try {
        check_job(j, cluster, topo.gpu.get());
      } catch (const std::invalid_argument& e) {
        why = e.what();
        // The scenario's micro-batch group, left out of this plan (apply_choice), is named: the
        // default's message would tell the user to set what they had set.
        if (base.plan.microbatch_group > 0 && j.plan.microbatch_group == 0 && j.plan.vpp > 1 &&
            !microbatch_groups_run(j.micro_batches(), j.plan.pp, j.plan.pp)) {
          why += fmt::format(" (the scenario's microbatch_group {} does not run with this plan's {} micro-batches per step, so it takes Megatron-Core's "
                             "default of pp)",
                             base.plan.microbatch_group, j.micro_batches());
        }
      }
    }
    if (!why.empty()) {
      o.status = PlanOutcome::Status::constraint;
      o.reason = std::move(why);
    } else {
      const MemoryReport mem = estimate_memory(j, *topo.gpu);
      o.memory_bytes = mem.worst().total().value();
      if (!mem.fits()) {
        o.status = PlanOutcome::Status::memory;
      } else {
        try {
          o.lower_bound_s = (*models[static_cast<std::size_t>(c.system)])(j);
        } catch (const sim::TimeRangeError& e) {
          o.status = PlanOutcome::Status::constraint;
          o.reason = past_the_clock(e);
        }
      }
    }
    return o;
  };
  // Every setting that leaves the plan's shape alone, for one shape, each distinct combination once.
  const std::vector<int> zeros = distinct(space.zero);
  const std::vector<Recompute> recomputes = distinct(space.recompute);
  const auto settings = [&](const PlanChoice& shape, const auto& visit) {
    std::vector<bool> sps;
    for (bool sp : space.sequence_parallel) sps.push_back(sp && shape.tp > 1);
    std::vector<std::array<ParallelDim, 5>> placements;  // orders that place ranks differently
    std::vector<std::pair<std::vector<ParallelDim>, std::vector<ParallelDim>>> seen;
    for (const auto& order : orders) {
      ParallelismPlan p;
      p.tp = shape.tp, p.pp = shape.pp, p.cp = shape.cp, p.ep = shape.ep, p.etp = shape.etp, p.dp = shape.dp;
      p.order.assign(order.begin(), order.end());
      auto where = placement(p, base.model.moe.has_value());
      if (std::find(seen.begin(), seen.end(), where) != seen.end()) continue;
      seen.push_back(std::move(where));
      placements.push_back(order);
    }
    // Where nothing is sharded (one data-parallel rank, and for MoE one expert-data-parallel rank),
    // every ZeRO stage is the same plan, and the scenario's stands for them: its own plan is always
    // in the space (a probe found ZeRO 1 and 2 at DP 1 listed twice with one step time).
    // (In 64 bits: a shape's degrees may be any int, and the constraints that refuse it come later.)
    const bool unsharded = shape.dp == 1 && shape.cp == 1 && (!base.model.moe || std::int64_t{shape.tp} == std::int64_t{shape.etp} * shape.ep);
    std::vector<int> shape_zeros;
    for (int zero : zeros) shape_zeros.push_back(unsharded ? own.zero : zero);
    PlanChoice c = shape;
    for (int zero : distinct(shape_zeros)) {
      c.zero = zero;
      for (Recompute rc : recomputes) {
        c.recompute = rc;
        for (bool sp : distinct(sps)) {
          c.sequence_parallel = sp;
          std::vector<bool> tpos;
          for (bool t : tp_overlaps) tpos.push_back(t && sp);
          for (bool tpo : distinct(tpos)) {
            c.tp_overlap = tpo;
            // Where the DP overlap settings do not apply, apply_choice gives them their defaults:
            // one plan.
            TrainingJob q;
            q.model.moe = base.model.moe;
            q.plan.zero_stage = zero, q.plan.dp = shape.dp, q.plan.cp = shape.cp, q.plan.tp = shape.tp, q.plan.ep = shape.ep, q.plan.etp = shape.etp;
            const std::vector<std::pair<bool, bool>> defaults{{true, true}};
            for (const auto& [grad, param] : dp_overlap_applies(q) ? dp_overlaps : defaults) {
              c.grad_overlap = grad;
              c.param_overlap = param;
              for (bool flash : attentions) {
                c.flash_attention = flash;
                for (const auto& order : placements) {
                  c.order = order;
                  visit(c);
                }
              }
            }
          }
        }
      }
    }
  };
  for (int system = 0; system < static_cast<int>(out.systems.size()); ++system) {
    for (int g : distinct(space.gpus)) {
      for (int tp : distinct(space.tp)) {
        for (int pp : distinct(space.pp)) {
          // `all`: every divisor of the layers a stage holds; with uneven_layers, every depth at
          // which each of the pp x vpp chunks still holds a layer.
          const auto every_vpp = [&] {
            if (pp == 1) return std::vector<int>{1};
            if (space.uneven_layers) {
              std::vector<int> all(static_cast<std::size_t>(std::max(1, base.model.layers / pp)));
              std::iota(all.begin(), all.end(), 1);
              return all;
            }
            return base.model.layers % pp != 0 ? std::vector<int>{1} : divisors(base.model.layers / pp);
          };
          const std::vector<int> vpps = !space.every_vpp ? vpp_list : every_vpp();
          for (int vpp : vpps) {
            for (int cp : distinct(space.cp)) {
              for (int ep : distinct(space.ep)) {
                // Expert TP applies to MoE models only; "follows TP" resolves to the shape's TP.
                std::vector<int> etps;
                for (int e : space.etp) etps.push_back(!base.model.moe ? 1 : e == SearchSpace::kEtpFollowsTp ? tp : e);
                for (int etp : distinct(etps)) {
                  PlanChoice shape = own;
                  shape.system = system;
                  shape.gpus = g;
                  shape.tp = tp;
                  shape.pp = pp;
                  shape.vpp = vpp;
                  shape.cp = cp;
                  shape.ep = ep;
                  shape.etp = etp;
                  shape.dp = static_cast<int>(std::max<std::int64_t>(1, g / checked_product({tp, pp, cp})));
                  const std::vector<int> micros =
                      !space.every_micro ? micro_list : base.global_batch % shape.dp != 0 ? std::vector<int>{1} : divisors(base.global_batch / shape.dp);
                  for (int micro : micros) {
                    shape.micro = micro;
                    settings(shape, list);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (!own_found) {
    out.own = choices.size();
    choices.push_back(own);
  }
  // Evaluated on the thread pool, each plan into its own place: the same outcomes for any thread
  // count (a bound model's memo of collective times changes no value). Thread 0's bound models are
  // the search's own, used again below.
  const int threads = std::max(1, options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency()));
  out.outcomes.resize(choices.size());
  {
    // Batches small enough that a small space is shared too, large enough to keep the counter cold.
    const std::size_t kBatch = std::clamp<std::size_t>(choices.size() / (8 * static_cast<std::size_t>(threads)), 1, 1024);
    // Thread 0 has the search's bound models; each other thread that will start gets its own, built
    // here (built on the worker itself, the Calculon-size search measured 37-45 s against 34-37 s).
    int started = 1;
    while (started < threads && static_cast<std::size_t>(started) * kBatch < choices.size()) ++started;
    std::vector<std::vector<std::unique_ptr<BoundModel>>> thread_bounds(static_cast<std::size_t>(started));
    thread_bounds[0] = std::move(bounds);
    for (int t = 1; t < started; ++t) {
      for (const SearchSystem& sys : out.systems) thread_bounds[static_cast<std::size_t>(t)].push_back(std::make_unique<BoundModel>(*sys.topology));
    }
    std::atomic<std::size_t> next_batch{0};
    // A plan whose evaluation throws stops the plans after it only, so the error reported is the
    // first plan's in enumeration order, as one thread would meet it.
    std::atomic<std::size_t> stop_at{choices.size()};
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(started));
    std::vector<std::size_t> error_at(static_cast<std::size_t>(started), choices.size());
    const auto work = [&](int t) {
      auto& models = thread_bounds[static_cast<std::size_t>(t)];
      for (;;) {
        const std::size_t first = next_batch.fetch_add(kBatch);
        for (std::size_t i = first; i < std::min(choices.size(), first + kBatch); ++i) {
          if (i >= stop_at) return;
          try {
            out.outcomes[i] = evaluate(choices[i], i == out.own, models);
          } catch (...) {
            errors[static_cast<std::size_t>(t)] = std::current_exception();
            error_at[static_cast<std::size_t>(t)] = i;
            std::size_t at = stop_at;
            while (i < at && !stop_at.compare_exchange_weak(at, i)) {
            }
            return;
          }
        }
        if (first >= choices.size()) return;
      }
    };
    on_threads(started, work);
    // The error of the earliest plan that failed, whichever thread met it.
    const auto first_error = std::min_element(error_at.begin(), error_at.end()) - error_at.begin();
    if (errors[static_cast<std::size_t>(first_error)]) std::rethrow_exception(errors[static_cast<std::size_t>(first_error)]);
    bounds = std::move(thread_bounds[0]);
  }
  std::vector<PlanChoice>().swap(choices);
  out.enumerated = out.outcomes.size();
  for (const PlanOutcome& o : out.outcomes) {
    if (out.billed.count({o.plan.system, o.plan.gpus}) == 0) out.billed[{o.plan.system, o.plan.gpus}] = out.topology(o).gpus_of_nodes_holding(o.plan.gpus);
  }

  // What an earlier run already simulated.
  std::map<std::string, nlohmann::json> done;
  if (!options.results.empty() && std::filesystem::is_directory(options.results)) {
    throw std::invalid_argument(fmt::format("the results file {} is a directory", options.results.string()));
  }
  nlohmann::json inputs;
  if (!options.results.empty()) inputs = results_inputs(base, out.systems);
  if (!options.results.empty() && std::filesystem::exists(options.results)) done = read_results(options.results, inputs);
  const double tokens_per_step = double(base.global_batch) * base.model.seq_len;
  std::vector<std::size_t> pending;  // this shard's plans to simulate or read back, in order
  std::vector<std::string> keys(out.outcomes.size());  // of the pending plans
  for (std::size_t i = 0; i < out.outcomes.size(); ++i) {
    PlanOutcome& o = out.outcomes[i];
    if (o.status != PlanOutcome::Status::simulated) continue;
    if (static_cast<int>(i % static_cast<std::size_t>(std::max(1, options.shards))) != options.shard) {
      o.evaluated = false;
      continue;
    }
    keys[i] = out.key(o);
    const auto it = done.find(keys[i]);
    // The line's step and throughput must agree with this search's tokens per step (an edited step
    // time would otherwise rank its plan anywhere); a line that does not is simulated again.
    const auto consistent = [&](const nlohmann::json& j) {
      const double tokens = j.value("tokens_per_s", 0.0) * j["step_s"].get<double>();
      return std::abs(tokens - tokens_per_step) <= 1e-6 * tokens_per_step;
    };
    if (it != done.end() && it->second.value("status", std::string()) == "simulated" && it->second.contains("step_s") && consistent(it->second)) {
      read_numbers(o, it->second);
      o.resumed = true;
      ++out.resumed;
    }
    pending.push_back(i);  // resumed plans too: the bound must treat them as a fresh run would
  }
  // Rewrite the file with what is known (drops torn lines and duplicates), then append as plans finish.
  std::ofstream results;
  std::mutex mutex;
  if (!options.results.empty()) {
    // Through a unique temporary beside it, removed on failure or interruption: a fixed name would
    // be truncated under a concurrent run and left behind by a failed rename.
    reports::AtomicFileWriter f(options.results);
    f.write(results_header(inputs).dump() + "\n");
    std::set<std::string> here;
    for (std::size_t i = 0; i < out.outcomes.size(); ++i) {
      if (!keys[i].empty()) here.insert(keys[i]);
      if (out.outcomes[i].resumed) f.write(to_line(out.outcomes[i], keys[i]).dump() + "\n");
    }
    // Plans outside this search's space (a narrower rerun) stay in the file for a later, wider one.
    for (const auto& [key, line] : done) {
      if (!here.count(key)) f.write(line.dump() + "\n");
    }
    f.commit();
    results.open(options.results, std::ios::app);
    if (!results) throw std::runtime_error(fmt::format("cannot append to the results file {}", options.results.string()));
  }
  // Rounds of a fixed size (the same for any thread count): prune by the bound, simulate the rest.
  // 16 plans per K up to 64: a round must find the K best before the bound can prune, and a small K
  // (validate --plans asks for the fastest alone) needs fewer.
  const std::size_t kRound = bound ? std::clamp<std::size_t>(16 * static_cast<std::size_t>(options.keep), 16, 64) : 64;
  // The data-parallel bound times collectives on the topology: one past the simulator's clock keeps
  // the cheap bound, and the plan's simulation says it runs past the clock (it had ended the search).
  const auto tighten_bound = [&](PlanOutcome& o) {
    try {
      o.lower_bound_s = (*bounds[static_cast<std::size_t>(o.plan.system)])(out.job(o), true);
    } catch (const sim::TimeRangeError&) {
    }
  };
  if (bound) {
    const auto by_bound = [&](std::size_t a, std::size_t b) { return out.outcomes[a].lower_bound_s < out.outcomes[b].lower_bound_s; };
    std::stable_sort(pending.begin(), pending.end(), by_bound);
    // No plan can be pruned before `keep` have been simulated, so the first rounds simulate whatever
    // the cheap bound ranks first, and it ignores data-parallel traffic: plans whose FSDP gathers
    // dominate would go first. The first four rounds' worth are re-ranked by the data-parallel
    // bound (still a lower bound; the scenario's own plan keeps its place, as it is always simulated).
    const std::size_t head = std::min(pending.size(), 4 * kRound);
    for (std::size_t n = 0; n < head; ++n) {
      PlanOutcome& o = out.outcomes[pending[n]];
      if (pending[n] != out.own) tighten_bound(o);
    }
    std::stable_sort(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(head), by_bound);
  }
  std::atomic<std::size_t> next{0}, finished{0};
  std::exception_ptr error;
  std::vector<std::size_t> round;
  std::vector<char> processed(out.outcomes.size(), 0);
  const auto worker = [&] {
    for (;;) {
      const std::size_t n = next.fetch_add(1);
      if (n >= round.size()) return;
      PlanOutcome& o = out.outcomes[round[n]];
      processed[round[n]] = 1;
      if (o.resumed) continue;  // read back from the results file
      try {
        const TrainingResult r = simulate_training(out.job(o), out.topology(o));
        o.step_s = r.step_time.value();
        o.mfu = r.mfu;
        o.tokens_per_s = r.tokens_per_s;
        o.time_to_train_s = r.time_to_train.value();
        o.breakdown = r.breakdown;
      } catch (const std::invalid_argument& e) {
        o.status = PlanOutcome::Status::constraint;
        o.reason = e.what();
      } catch (const sim::TimeRangeError& e) {
        o.status = PlanOutcome::Status::constraint;
        o.reason = past_the_clock(e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        next = round.size();
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (results.is_open()) {
        results << to_line(o, keys[round[n]]).dump() << "\n";
        results.flush();
        if (!results && !error) {
          // A full disk: stop rather than go on for hours with results that are not kept (the
          // search had exited 0 with 30 of 92 plans written and the last line cut short). The lines
          // written so far resume the search.
          const int code = errno;
          error = std::make_exception_ptr(std::runtime_error(
              fmt::format("cannot append to the results file {}{} (the lines written before resume the search: rerun with the same --results)",
                          options.results.string(), code ? std::string(": ") + std::strerror(code) : std::string())));
          next = round.size();
          return;
        }
      }
      const std::size_t f = ++finished;
      if (options.progress) options.progress(f, pending.size());
    }
  };
  // The keep-th best step time and cost (GPU-seconds per step at the system's price) among the plans
  // of each system simulated so far: each system keeps its own top K, so GPU types can be compared
  // (the top K over all systems are among them).
  std::vector<std::vector<double>> best_steps(out.systems.size()), best_costs(out.systems.size());
  const auto kth = [&](std::vector<double>& v) {
    if (static_cast<int>(v.size()) < options.keep) return 1e300;
    std::nth_element(v.begin(), v.begin() + (options.keep - 1), v.end());
    return v[static_cast<std::size_t>(options.keep - 1)];
  };
  for (std::size_t first = 0; first < pending.size() && !error; first += kRound) {
    round.clear();
    std::vector<double> best_times(out.systems.size(), 1e300), best_system_costs(out.systems.size(), 1e300);
    for (std::size_t k = 0; bound && k < out.systems.size(); ++k) {
      best_times[k] = kth(best_steps[k]);
      best_system_costs[k] = kth(best_costs[k]);
    }
    for (std::size_t n = first; n < std::min(pending.size(), first + kRound); ++n) {
      PlanOutcome& o = out.outcomes[pending[n]];
      const double best_time = best_times[static_cast<std::size_t>(o.plan.system)], best_cost = best_system_costs[static_cast<std::size_t>(o.plan.system)];
      const double billed_rate = out.billed_gpus(o) * rate(o);  // cost per second of the plan's step
      const auto loses = [&] { return o.lower_bound_s > best_time && o.lower_bound_s * billed_rate > best_cost; };
      // A plan the cheap bound keeps gets the data-parallel bound too before it is simulated.
      // The scenario's own plan is always simulated, so that the output can say where it ranks.
      const bool own_plan = pending[n] == out.own;
      if (bound && !own_plan && !loses() && best_time < 1e300) tighten_bound(o);
      if (bound && !own_plan && loses()) {
        if (o.resumed) --out.resumed;  // a run from scratch would not have simulated it either
        o.resumed = false;
        // Nor would it know the numbers the results file gave (plans.csv writes them where known).
        o.step_s = o.mfu = o.tokens_per_s = o.time_to_train_s = 0.0;
        o.breakdown = {};
        o.status = PlanOutcome::Status::bound;
        o.bound_threshold_s = best_time;
        // Settled without a simulation: progress counts it done (between rounds, on this thread).
        const std::size_t f = ++finished;
        if (options.progress) options.progress(f, pending.size());
      } else {
        round.push_back(pending[n]);
      }
    }
    if (threads > 1 && round.size() > 1) {
      std::vector<std::pair<double, std::size_t>> by_weight;
      for (std::size_t i : round) by_weight.emplace_back(-simulation_weight(out.job(out.outcomes[i])), i);
      std::stable_sort(by_weight.begin(), by_weight.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (std::size_t k = 0; k < round.size(); ++k) round[k] = by_weight[k].second;
    }
    next = 0;
    on_threads(std::max(1, std::min(threads, static_cast<int>(round.size()))), [&](int) { worker(); });
    for (std::size_t i : round) {
      const PlanOutcome& o = out.outcomes[i];
      if (o.status == PlanOutcome::Status::simulated && o.step_s > 0) {
        best_steps[static_cast<std::size_t>(o.plan.system)].push_back(o.step_s);
        best_costs[static_cast<std::size_t>(o.plan.system)].push_back(o.step_s * out.billed_gpus(o) * rate(o));
      }
    }
  }
  if (error) std::rethrow_exception(error);

  for (PlanOutcome& o : out.outcomes) {
    switch (o.status) {
      case PlanOutcome::Status::constraint: ++out.constraint; break;
      case PlanOutcome::Status::memory: ++out.memory; break;
      case PlanOutcome::Status::bound: ++out.bound; break;
      case PlanOutcome::Status::simulated:
        ++out.simulated;
        price(o, out, base.token_budget);
        break;
    }
  }
  return out;
}

std::string shard_lines(const SearchResult& result) {
  std::string out;
  for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
    const PlanOutcome& o = result.outcomes[i];
    if (!o.evaluated) continue;
    if (o.status == PlanOutcome::Status::simulated || (o.status == PlanOutcome::Status::constraint && o.lower_bound_s > 0)) {  // the simulation found it impossible
      nlohmann::json j = to_line(o, result.key(o));
      j["index"] = i;
      j["resumed"] = o.resumed;
      out += j.dump() + "\n";
    }
  }
  return out;
}

void merge_shard(SearchResult& into, const std::string& lines, double token_budget) {
  std::size_t start = 0;
  while (start < lines.size()) {
    const std::size_t end = lines.find('\n', start);
    const nlohmann::json j = nlohmann::json::parse(lines.substr(start, end - start));
    start = end == std::string::npos ? lines.size() : end + 1;
    const auto i = j["index"].get<std::size_t>();
    if (i >= into.outcomes.size() || into.key(into.outcomes[i]) != j["key"].get<std::string>()) {
      throw std::invalid_argument("a shard's results do not match this search space (were the ranks given the same scenario?)");
    }
    PlanOutcome& o = into.outcomes[i];
    if (o.evaluated) continue;
    o.evaluated = true;
    o.resumed = j.value("resumed", false);
    if (o.resumed) ++into.resumed;
    if (j["status"] == "simulated") {
      read_numbers(o, j);
      price(o, into, token_budget);
    } else {
      // Simulation found the plan impossible.
      o.status = PlanOutcome::Status::constraint;
      o.reason = j.value("reason", std::string());
      --into.simulated;
      ++into.constraint;
    }
  }
}

std::vector<std::size_t> pareto_front(const SearchResult& result) {
  std::vector<std::size_t> sim;
  std::vector<double> time, cost;
  for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
    const PlanOutcome& o = result.outcomes[i];
    if (o.status != PlanOutcome::Status::simulated) continue;
    sim.push_back(i);
    time.push_back(o.time_to_train_s > 0 ? o.time_to_train_s : o.step_s);
    cost.push_back(o.cost);
  }
  std::vector<std::size_t> front;
  for (std::size_t k : cs::pareto_front(time, cost)) front.push_back(sim[k]);
  return front;
}

}  // namespace cs::models
