// One training step as a task graph on the engine. See docs/training.md for the model.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "clustersim/models/collective_model.hpp"
#include "clustersim/models/training.hpp"
#include "clustersim/sim/task_graph.hpp"
#include "clustersim/topology/analysis.hpp"
#include "fold_shadows.hpp"
#include "training_internal.hpp"

namespace cs::models {

namespace {

using TaskId = sim::TaskGraph::TaskId;
using sim::Time;

constexpr int kComputeStream = 0;
constexpr int kDpStream = 1;       // data-parallel reductions and gathers
// Pipeline sends: a stream per pair of neighbouring stages and direction (activations, gradients).
// PyTorch runs each pair of ranks' point-to-point operations on a communicator and stream of their own,
// so a stage's receive from the previous stage and its send to the next proceed side by side (on one
// stream a stage had queued its first send behind the receives of its later micro-batches: overlapped
// sends came out slower than blocking ones on slow links, a probe's find). Pairs (s, s+1) alternate
// between two slots, so no GPU holds two pairs on one; the interleaved schedule's pair of the last and
// first stages takes the slot its parity leaves free, a third when pp is odd.
constexpr int kPipelineStreams = 2;  // the first of 6: slot x 2 + (0 activations, 1 gradients)
constexpr int kStreams = kPipelineStreams + 6;
int pipeline_stream(int from, int to, bool forward, int pp) {
  const int low = std::min(from, to), high = std::max(from, to);
  const int slot = high - low == 1 ? low % 2 : pp % 2 == 0 ? 1 : 2;
  return kPipelineStreams + 2 * slot + (forward ? 0 : 1);
}


// A stretch of layers that becomes one task when nothing needs to see inside it.
struct Unit {
  PassTime forward;
  PassTime backward;  // recompute included
  double dense = 0;   // parameters on one GPU
  double expert = 0;
  std::string name;
};

enum class WaitKind { pipeline, data_parallel, barrier };

struct Wait {
  TaskId first;  // the transfer's first task (pipeline), or the task itself
  TaskId last;
  WaitKind kind;
};

struct ComputeTask {
  TaskId id;
  PassTime parts;
  bool optimizer = false;
  std::vector<Wait> waits;
};

struct PassTasks {
  TaskId first = 0;
  TaskId last = 0;
  std::vector<TaskId> units;  // per unit when split, else empty
};

// The largest step, in compute tasks simulated rank by rank, that is unfolded on its own when its
// replicas' pipeline sends differ (a few seconds on the 2-core development machine).
constexpr std::int64_t kUnfoldOnItsOwnTasks = std::int64_t{1} << 17;
// The most compute tasks an unfolded step (--no-fold) may hold over all its ranks: each takes about
// 1 KB with its share of the flows and events (measured on the 2-core development machine: the
// shipped 405B step, 2.49 million, 2.2 GB and 12 s; the same at 128 micro-batches, 4.49 million,
// 4.5 GB and 18 s); past it memory runs out (a probe's 405B at 128 micro-batches and vpp 4, 17.2 million: bad_alloc).
constexpr std::int64_t kMaxUnfoldedComputeTasks = std::int64_t{1} << 22;

// The compute tasks of a step with every rank simulated: each stage's, times the ranks of a stage.
std::int64_t unfolded_compute_tasks(const TrainingJob& job) {
  const ParallelismPlan& p = job.plan;
  return checked_product({simulated_compute_tasks(job), p.tp, p.cp, p.dp});
}

// What to do about folding's optimism: --no-fold where the step is small enough to unfold.
std::string unfold_remedy(const TrainingJob& job) {
  return unfolded_compute_tasks(job) <= kMaxUnfoldedComputeTasks ? "--no-fold simulates every rank"
                                                                 : "the step is too large to simulate every rank (--no-fold's limit)";
}

// What folding leaves out: the other data-parallel replicas' pipeline sends meet the simulated
// traffic where flows are hashed over equal-cost paths or a tier is oversubscribed (docs/training.md,
// "Folding": random small plans on such fabrics came out fast; elsewhere within 1.1%). Empty where
// the fabric does neither.
std::string left_out_sends_note(const topology::Topology& topo, const topology::Router& router, int other_replicas, const std::string& remedy) {
  const auto tiers = topology::fabric_tiers(topo);
  const bool oversubscribed = std::any_of(tiers.begin(), tiers.end(), [](const topology::TierSummary& t) { return t.oversubscription() > 1 + 1e-9; });
  const bool hashed = hashes_flows(topo, router);
  if (!hashed && !oversubscribed) return {};
  return fmt::format(
      "folding leaves out the other {} data-parallel replicas' pipeline sends, which {} can put on the links of the simulated traffic: the "
      "step may come out fast (docs/training.md, \"Folding\"); {}",
      other_replicas,
      hashed && oversubscribed ? "hashing over equal-cost paths and an oversubscribed tier" : hashed ? "hashing over equal-cost paths" : "an oversubscribed tier",
      remedy);
}


// Whether the replicas' pipeline sends cross a stage boundary differently: some inside a node, some
// between nodes (tp 1, pp 2, dp 6 on two 8-GPU nodes: replicas 0-1 send inside node 0, 2-5 across
// the fabric). Folding takes every replica's sends to go as the representative's do.
bool replicas_send_differently(const ParallelismPlan& p, const topology::Topology& topo) {
  if (p.pp < 2) return false;
  const auto node = [&](int rank) { return topo.device(topo.gpus()[static_cast<std::size_t>(rank)]).node; };
  for (int s = 0; s < p.pp; ++s) {
    const int next = s + 1 < p.pp ? s + 1 : 0;  // the last stage sends to the first between model chunks
    if (next == 0 && p.vpp < 2) break;
    bool inside = false, across = false;
    for (int d = 0; d < p.dp; ++d) {
      for (int c = 0; c < p.cp; ++c) {
        for (int t = 0; t < p.tp; ++t) {
          const bool same = node(rank_of(p, RankCoord{t, c, d, s})) == node(rank_of(p, RankCoord{t, c, d, next}));
          inside = inside || same;
          across = across || !same;
          if (inside && across) return true;
        }
      }
    }
  }
  return false;
}


}  // namespace

TrainingResult simulate_training(const TrainingJob& job, const topology::Topology& topo, TrainingOptions options) {
  check_job(job, static_cast<int>(topo.gpus().size()), topo.gpu.get());
  if (!topo.gpu) throw std::invalid_argument(fmt::format("topology {} names no GPU hardware profile", topo.name));
  const hardware::HardwareProfile& hw = *topo.gpu;
  const ParallelismPlan& p = job.plan;
  const TransformerSpec& m = job.model;
  const int micro = job.micro_batches();
  const int chunks = p.vpp;
  const CollectiveModel cm(topo);
  const auto& gpus = topo.gpus();
  TrainingResult result;
  result.gpus = p.gpus();
  result.micro_batches = micro;

  auto gpu_of = [&](int tp, int cp, int dp, int pp) { return rank_of(p, RankCoord{tp, cp, dp, pp}); };

  // Unfolded, every rank of a stage holds its own tasks: the folded step's limit applies to all of
  // them (a 405B step at 128 micro-batches on 16,384 GPUs had exhausted memory with no refusal).
  if (!options.fold) {
    const std::int64_t tasks = simulated_compute_tasks(job);
    if (const std::int64_t unfolded = unfolded_compute_tasks(job); unfolded > kMaxUnfoldedComputeTasks) {
      throw PlanError("", fmt::format("simulating every rank would hold about {} compute tasks ({} with one rank a stage, times {} ranks a stage: tp {} x cp {} x dp {}); "
                                      "at most {} are simulated: fold the ranks (leave out --no-fold) or shrink the plan",
                                      unfolded == std::numeric_limits<std::int64_t>::max() ? std::string("more than 2^63") : fmt::format("{}", unfolded),
                                      tasks, checked_product({p.tp, p.cp, p.dp}), p.tp, p.cp, p.dp, kMaxUnfoldedComputeTasks));
    }
  }

  // Folding would time the replicas whose sends stay inside a node alone (a probe's two-node plan came
  // out 3-5% fast on a non-blocking switch): a step small enough is simulated rank by rank, a larger
  // one says so.
  if (options.fold && replicas_send_differently(p, topo)) {
    if (unfolded_compute_tasks(job) <= kUnfoldOnItsOwnTasks) {
      options.fold = false;
      result.notes.push_back("the data-parallel replicas' pipeline sends cross the stage boundaries differently (some inside a node, some between "
                             "nodes): every rank simulated, as --no-fold does");
    } else {
      result.notes.push_back("the data-parallel replicas' pipeline sends cross the stage boundaries differently (some inside a node, some between "
                             "nodes), and folding times the representative's alone: the step may come out fast; " + unfold_remedy(job));
    }
  }

  // ---- collective times of the representative groups (TP, CP and EP groups are alike)
  GroupCollectives groups(p, topo, cm);
  if (groups.tp_spans_nodes()) {
    result.notes.push_back(fmt::format("a TP group of {} GPUs spans nodes: TP collectives are timed alone on the topology, at the slowest group's placement", p.tp));
  }
  if (hw.gemm.sustained_fraction < 1.0) {
    result.notes.push_back(fmt::format("compute-bound kernels run at {:.3g} of their burst rate, the {}'s sustained clock under load (gemm.sustained_fraction)",
                                       hw.gemm.sustained_fraction, hw.name));
  }
  const CommTime comm = [&](CommGroup g, CollectiveOp op, double bytes) { return groups(g, op, bytes); };

  // ---- per-layer times
  const Shard shard = shard_of(job);
  const double weight_casts = fp8_weight_cast_share(job);
  auto timed = [&](const std::vector<Op>& ops) { return time_ops(ops, hw, job.precision, comm, job.recompute, p.tp_overlap, p.tp, weight_casts); };
  const OpsTime dense_layer = timed(layer_forward_ops(m, 0, shard));
  const OpsTime moe_layer = m.moe ? timed(layer_forward_ops(m, m.moe->dense_layers, shard)) : dense_layer;
  const OpsTime embedding = timed(embedding_forward_ops(m, shard));
  const OpsTime head = timed(head_forward_ops(m, shard));
  // Listed per operation (`run --ops`), with the backward passes' own kernels that no operation
  // holds: the unfused accumulation into the main gradients, and the embedding table's gradient.
  auto listed = [&](std::vector<OpTiming> ops, const StageParameters& params, double gradient_s) {
    if (const double a = grad_accumulation_seconds(job, hw, params); a > 0) ops.push_back({"grad_accumulation", OpKind::memory, 0.0, a, 0.0, 0.0, 0.0});
    if (gradient_s > 0) ops.push_back({"embedding_gradient", OpKind::memory, 0.0, gradient_s, 0.0, 0.0, 0.0});
    return ops;
  };
  // A model whose every layer has experts has no dense layer to list.
  if (!m.moe || m.moe->dense_layers > 0) result.layer_ops = listed(dense_layer.ops, layer_parameters(m, p, 0), 0.0);
  if (m.moe) result.moe_layer_ops = listed(moe_layer.ops, layer_parameters(m, p, m.moe->dense_layers), 0.0);
  result.embedding_ops = listed(embedding.ops, embedding_parameters(m, p), embedding_gradient_seconds(job, hw, embedding_parameters(m, p)));
  result.head_ops = listed(head.ops, head_parameters(m, p), 0.0);
  auto backward_of = [](const OpsTime& t) {
    PassTime b = t.backward;
    b += t.recompute;
    return b;
  };
  // A backward pass that also adds its weight gradients into the main gradients (unfused).
  auto with_accumulation = [&](PassTime b, const StageParameters& params) {
    b.compute += grad_accumulation_seconds(job, hw, params);
    return b;
  };

  // Units of each chunk of each stage, in forward order.
  const std::vector<LayerRange> ranges = chunk_ranges(m.layers, p.pp, p.vpp);
  std::vector<std::vector<std::vector<Unit>>> units(static_cast<std::size_t>(p.pp), std::vector<std::vector<Unit>>(static_cast<std::size_t>(chunks)));
  for (int s = 0; s < p.pp; ++s) {
    for (int v = 0; v < chunks; ++v) {
      const LayerRange& range = ranges[static_cast<std::size_t>(v * p.pp + s)];
      auto& list = units[static_cast<std::size_t>(s)][static_cast<std::size_t>(v)];
      for (int l = range.first; l < range.first + range.count; ++l) {
        const OpsTime& t = m.is_moe_layer(l) ? moe_layer : dense_layer;
        const StageParameters params = layer_parameters(m, p, l);
        list.push_back({t.forward, with_accumulation(backward_of(t), params), params.dense, params.expert, fmt::format("layer {}", l)});
      }
      if (s == 0 && v == 0) {
        list.front().forward += embedding.forward;
        PassTime embedding_backward = with_accumulation(backward_of(embedding), embedding_parameters(m, p));
        embedding_backward.compute += embedding_gradient_seconds(job, hw, embedding_parameters(m, p));
        list.front().backward += embedding_backward;
        list.front().dense += embedding_parameters(m, p).dense;
        list.front().name = "embedding + " + list.front().name;
      }
      if (s == p.pp - 1 && v == chunks - 1) {
        list.back().forward += head.forward;
        list.back().backward += with_accumulation(backward_of(head), head_parameters(m, p));
        list.back().dense += head_parameters(m, p).dense;
        list.back().name += " + output head";
      }
    }
  }

  // ---- the graph
  sim::Simulator sim;
  sim::FluidNetwork net(sim, cm.capacities());
  sim::ExecutorOptions exec;
  exec.streams_per_gpu = kStreams;
  sim::TaskGraph graph(sim, net, static_cast<int>(gpus.size()), exec);
  if (options.trace) {
    std::vector<std::string> names(topo.directed_link_count());
    for (auto [e, end] = boost::edges(topo.graph()); e != end; ++e) {
      names[topo.link(*e).id] = topo.device(boost::source(*e, topo.graph())).name + " -> " + topo.device(boost::target(*e, topo.graph())).name;
    }
    graph.trace_links(std::move(names));
  }

  // Replicas simulated: folded, one per stage (tp 0, cp 0, dp 0); unfolded, every rank.
  struct Replica {
    int tp, cp, dp;
  };
  std::vector<Replica> replicas;
  if (options.fold) {
    replicas.push_back({0, 0, 0});
  } else {
    for (int d = 0; d < p.dp; ++d) {
      for (int c = 0; c < p.cp; ++c) {
        for (int t = 0; t < p.tp; ++t) replicas.push_back({t, c, d});
      }
    }
  }
  const bool fsdp = p.zero_stage >= 3;
  const bool distributed = p.zero_stage >= 1;
  // (Gated on dp x cp alone, a plan whose experts alone have a data-parallel group had reduced no
  // expert gradient while its optimizer and memory took them as sharded.)
  const bool has_dp = reduces_gradients(job);
  const double grad_bytes = job.gradient_bytes();
  const double dense_shards = double(p.dp) * p.cp;
  const double bucket = p.bucket_parameters > 0 ? p.bucket_parameters : std::max(40e6, 1e6 * dense_shards);

  // Data-parallel groups of (tp, stage): every dp x cp rank; expert groups: the ranks holding the
  // same experts, one in ep along dp.
  auto dp_group = [&](int t, int s) {
    std::vector<topology::Vertex> g;
    for (int d = 0; d < p.dp; ++d) {
      for (int c = 0; c < p.cp; ++c) g.push_back(gpus[static_cast<std::size_t>(gpu_of(t, c, d, s))]);
    }
    return g;
  };
  // Data-parallel groups of every TP rank, folded or not, by stage and TP rank: the dense group, and
  // the expert groups (the ranks holding the same experts) whose lowest rank has that TP rank, so
  // that each is simulated once. Folded, replica 0's groups (the dense group of TP rank 0, the expert
  // group holding rank (0, 0, 0)) are the representative's, and the others its shadows, simulated
  // where they can meet the simulated traffic (fold_shadows.hpp): left out, Llama 3 405B on the
  // 16K-GPU RoCE Clos came out 3.4% fast. Folded, a group feeds replica 0's passes only if it holds
  // a rank of replica 0's TP group, which waits for it through the TP collectives: an expert group of
  // other replicas' ranks feeds those replicas.
  struct DpGroup {
    int id;  // dense: the TP rank; experts: the lowest rank
    std::vector<topology::Vertex> members;
    bool representative;
    bool feeds;
    int tp_rank;  // of every member, or FoldShadows::kSpansRanks
  };
  // [stage][tp rank][part: 0 dense, 1 experts]
  std::vector<std::vector<std::array<std::vector<DpGroup>, 2>>> dp_groups(static_cast<std::size_t>(p.pp),
                                                                          std::vector<std::array<std::vector<DpGroup>, 2>>(static_cast<std::size_t>(p.tp)));
  for (int s = 0; s < p.pp; ++s) {
    auto& stage = dp_groups[static_cast<std::size_t>(s)];
    for (int t = 0; t < p.tp; ++t) stage[static_cast<std::size_t>(t)][0].push_back({t, dp_group(t, s), !options.fold || t == 0, true, t});
    if (!m.moe) continue;
    std::map<int, int> tp_of;  // rank -> TP rank, for the stage's ranks
    for (int t = 0; t < p.tp; ++t) {
      for (int d = 0; d < p.dp; ++d) {
        for (int c = 0; c < p.cp; ++c) tp_of[gpu_of(t, c, d, s)] = t;
      }
    }
    const int rank0 = gpu_of(0, 0, 0, s);
    std::set<int> tp_group0;  // replica 0's TP group
    for (int t = 0; t < p.tp; ++t) tp_group0.insert(gpu_of(t, 0, 0, s));
    for (const std::vector<int>& ranks : stage_expert_data_parallel_groups(p, s)) {
      DpGroup g{ranks.front(), {}, !options.fold, !options.fold, tp_of.at(ranks.front())};
      for (int r : ranks) {
        g.members.push_back(gpus[static_cast<std::size_t>(r)]);
        g.representative = g.representative || r == rank0;
        g.feeds = g.feeds || tp_group0.count(r) > 0;
        if (tp_of.at(r) != g.tp_rank) g.tp_rank = FoldShadows::kSpansRanks;
      }
      stage[static_cast<std::size_t>(tp_of.at(ranks.front()))][1].push_back(std::move(g));
    }
  }
  FoldShadows shadows(cm.capacities(), topo.gpus().size());
  bool planning_dp = false;  // the first pass: plan and record, add nothing
  std::vector<TaskId> dp_lasts;                 // every data-parallel collective's last task
  std::vector<std::vector<TaskId>> stage_dp(static_cast<std::size_t>(p.pp));
  // Adds the reduction or gather of `dense` and `expert` parameters' worth of bytes for stage s. A
  // group's collective of one size is planned (routed) once and reused: ZeRO-3 gathers every layer
  // alike.
  //
  // A GPU's data-parallel stream runs its ready collectives lowest task id first, as a rank issues
  // them in program order. So they are added in that order for every rank at once: bucket by bucket
  // (or unit by unit), each one's dense part, then its expert part, for every TP rank. Added TP rank
  // by TP rank instead, a rank whose expert group another TP rank heads (rank order tp-dp-cp-ep-pp)
  // ran every expert collective of the step before its own dense ones, and unfolded steps of such
  // plans came out 5-37% slower than folded ones.
  std::map<std::tuple<int, int, int, int, double>, CollectivePlan> dp_plans;
  auto add_dp = [&](CollectiveOp op, double dense, double expert, double bytes_per, int s, const std::vector<TaskId>& after,
                    std::vector<std::pair<TaskId, TaskId>>* out, int t) {
    for (int part = 0; part < 2; ++part) {
      const double params = part == 0 ? dense : expert;
      if (params <= 0 || (part == 0 ? p.dp * p.cp : expert_data_parallel_size(p)) < 2) continue;
      for (const DpGroup& group : dp_groups[static_cast<std::size_t>(s)][static_cast<std::size_t>(t)][static_cast<std::size_t>(part)]) {
        const auto& [id, members, representative, feeds, tp_rank] = group;
        const auto key = std::make_tuple(static_cast<int>(op), id, s, part, params * bytes_per);
        auto it = dp_plans.find(key);
        if (it == dp_plans.end()) {
          Collective c;
          c.op = op;
          c.ranks = members;
          c.bytes = Bytes(params * bytes_per);
          it = dp_plans.emplace(key, cm.plan(c)).first;
        }
        if (planning_dp) {
          shadows.add_group_plan({part, id, s}, {static_cast<int>(op), params * bytes_per}, &it->second, representative, tp_rank);
          continue;
        }
        if (!representative && !shadows.simulated({part, id, s})) continue;
        const auto ids = cm.add_to(graph, it->second, kDpStream);
        for (TaskId a : after) graph.depend(a, ids.first);
        dp_lasts.push_back(ids.second);
        stage_dp[static_cast<std::size_t>(s)].push_back(ids.second);
        if (out && feeds) out->push_back(ids);
      }
    }
  };
  // Calls add(dense, expert, t) one part at a time, dense then expert, each for every TP rank: the
  // order every rank issues them in (above).
  const auto in_issue_order = [&](double dense, double expert, const auto& add) {
    for (int part = 0; part < 2; ++part) {
      for (int t = 0; t < p.tp; ++t) add(part == 0 ? dense : 0.0, part == 1 ? expert : 0.0, t);
    }
  };

  // Compute tasks, per replica, stage, chunk and micro-batch.
  std::vector<std::vector<ComputeTask>> timeline(static_cast<std::size_t>(p.pp));  // replica 0
  // [replica][stage][chunk][micro] for forward and backward
  using Grid = std::vector<std::vector<std::vector<std::vector<PassTasks>>>>;
  Grid fwd(replicas.size(), std::vector<std::vector<std::vector<PassTasks>>>(
                                static_cast<std::size_t>(p.pp), std::vector<std::vector<PassTasks>>(static_cast<std::size_t>(chunks),
                                                                                                  std::vector<PassTasks>(static_cast<std::size_t>(micro)))));
  Grid bwd = fwd;
  std::vector<std::vector<TaskId>> last_compute(replicas.size(), std::vector<TaskId>(static_cast<std::size_t>(p.pp)));
  std::vector<std::vector<Pass>> orders(static_cast<std::size_t>(p.pp));
  for (int s = 0; s < p.pp; ++s) orders[static_cast<std::size_t>(s)] = schedule_order(p, micro, s);

  const bool gather_at_start = distributed && !fsdp && p.overlap_param_gather && has_dp;
  // ZeRO-2 reduce-scatters every micro-batch's gradients, overlapped unit by unit with its backward.
  // (ZeRO-3 reduces inside its FSDP passes below.)
  const bool zero2 = p.shards_gradients() && !fsdp;
  const bool reduce_every_micro = zero2 && p.overlap_grad_reduce && has_dp;
  // Without sequence parallelism the TP ranks hold whole activations: Megatron's scatter-gather sends
  // 1/tp of them and the receiving stage all-gathers them over its TP group before its pass.
  const double pipeline_bytes = double(job.micro_batch) * m.seq_len / p.cp * m.hidden * 2.0;
  const double receive_gather = p.pp > 1 && p.tp > 1 && !p.sequence_parallel ? comm(CommGroup::tp, CollectiveOp::all_gather, pipeline_bytes).value() : 0.0;
  auto receives = [&](const Pass& pass, int s) {
    if (p.pp == 1) return false;
    return pass.forward ? !(s == 0 && pass.chunk == 0) : !(s == p.pp - 1 && pass.chunk == chunks - 1);
  };
  // Each compute task's successor on its stream, for blocking pipeline sends.
  const bool blocking_sends = p.pp > 1 && !p.p2p_overlapped();
  std::map<TaskId, TaskId> next_compute;
  // Unfolded: each replica's compute tasks per stage, in order, to start a TP and CP group's alike
  // tasks together (below).
  std::vector<std::vector<std::vector<TaskId>>> passes(options.fold ? 0 : replicas.size(), std::vector<std::vector<TaskId>>(static_cast<std::size_t>(p.pp)));
  for (std::size_t r = 0; r < replicas.size(); ++r) {
    const Replica& rep = replicas[r];
    for (int s = 0; s < p.pp; ++s) {
      const int gpu = gpu_of(rep.tp, rep.cp, rep.dp, s);
      std::optional<TaskId> prev;
      const auto& order = orders[static_cast<std::size_t>(s)];
      for (const Pass& pass : order) {
        const auto& list = units[static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)];
        const bool split = fsdp || (!pass.forward && (pass.micro == micro - 1 || reduce_every_micro)) || (pass.forward && pass.micro == 0 && gather_at_start);
        PassTasks& pt = (pass.forward ? fwd : bwd)[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)][static_cast<std::size_t>(pass.micro)];
        bool first = true;
        auto add = [&](PassTime parts, const std::string& name) {
          if (first && receive_gather > 0 && receives(pass, s)) parts.tp += receive_gather;
          first = false;
          const TaskId id = graph.add_compute(gpu, kComputeStream, Time::seconds(parts.total()), name, pass.forward ? "forward" : "backward");
          if (prev) {
            graph.depend(*prev, id);
            if (blocking_sends) next_compute[*prev] = id;
          }
          prev = id;
          if (!options.fold) passes[r][static_cast<std::size_t>(s)].push_back(id);
          if (r == 0) timeline[static_cast<std::size_t>(s)].push_back({id, parts, false, {}});
          return id;
        };
        const std::string label = fmt::format("{} mb{} chunk{}", pass.forward ? "F" : "B", pass.micro, pass.chunk);
        if (split) {
          const std::size_t n = list.size();
          for (std::size_t i = 0; i < n; ++i) {
            const Unit& u = pass.forward ? list[i] : list[n - 1 - i];
            const TaskId id = add(pass.forward ? u.forward : u.backward, label + " " + u.name);
            if (i == 0) pt.first = id;
            pt.last = id;
            pt.units.push_back(id);
          }
        } else {
          PassTime total;
          for (const Unit& u : list) total += pass.forward ? u.forward : u.backward;
          const TaskId id = add(total, label);
          pt.first = pt.last = id;
        }
      }
      last_compute[r][static_cast<std::size_t>(s)] = *prev;
    }
  }
  // Where each of replica 0's compute tasks sits in its stage's timeline, to record what it waits on.
  std::vector<std::map<TaskId, std::size_t>> where(static_cast<std::size_t>(p.pp));
  for (int s = 0; s < p.pp; ++s) {
    for (std::size_t i = 0; i < timeline[static_cast<std::size_t>(s)].size(); ++i) where[static_cast<std::size_t>(s)][timeline[static_cast<std::size_t>(s)][i].id] = i;
  }
  auto wait_on = [&](std::size_t r, int s, TaskId task, Wait w) {
    if (r != 0) return;
    auto it = where[static_cast<std::size_t>(s)].find(task);
    if (it != where[static_cast<std::size_t>(s)].end()) timeline[static_cast<std::size_t>(s)][it->second].waits.push_back(w);
  };

  // ---- pipeline pairs. Folded, the pipeline sends of replica 0's other TP and CP ranks are shadows
  // (fold_shadows.hpp): simulated where they can meet simulated traffic, on replica 0's passes, which
  // wait for them as their TP collectives and ring attention make them wait for the slowest rank.
  // The other data-parallel replicas' sends are not simulated (docs/training.md, "Folding").
  std::vector<Replica> senders = replicas;  // folded: replica 0, then its shadows
  if (options.fold) {
    for (int c = 0; c < p.cp; ++c) {
      for (int t = 0; t < p.tp; ++t) {
        if (t != 0 || c != 0) senders.push_back({t, c, 0});
      }
    }
  }
  std::map<std::pair<int, int>, CollectivePlan> pair_plans;  // by sending and receiving rank
  // `rep`: the replica that sends; folded, any but replica 0 is a shadow.
  const auto pipeline_plan = [&](const Replica& rep, int from, int to) -> const CollectivePlan& {
    auto it = pair_plans.find({from, to});
    if (it == pair_plans.end()) {
      Collective c;
      c.op = CollectiveOp::send_recv;
      c.ranks = {gpus[static_cast<std::size_t>(from)], gpus[static_cast<std::size_t>(to)]};
      c.bytes = Bytes(pipeline_bytes / p.tp);  // 1/tp each: sequence parallelism's shard, or Megatron's scatter-gather
      it = pair_plans.emplace(std::make_pair(from, to), cm.plan(c)).first;
      // The pair may carry a forward and a backward send at once.
      if (options.fold) shadows.add_source({&it->second}, 2.0, rep.tp, rep.tp != 0 || rep.cp != 0 || rep.dp != 0);
    }
    return it->second;
  };
  // A replica's sends, in the order they are added: each stage's and chunk's input from the previous
  // stage (or the last stage's previous chunk), then its gradient from the next stage (or the first
  // stage's next chunk).
  struct Hop {
    int from, from_chunk, to, to_chunk;
    bool forward;
  };
  std::vector<Hop> hops;
  if (p.pp > 1) {
    for (int s = 0; s < p.pp; ++s) {
      for (int v = 0; v < chunks; ++v) {
        if (s > 0) hops.push_back({s - 1, v, s, v, true});
        if (s == 0 && v > 0) hops.push_back({p.pp - 1, v - 1, s, v, true});
        if (s < p.pp - 1) hops.push_back({s + 1, v, s, v, false});
        if (s == p.pp - 1 && v + 1 < chunks) hops.push_back({0, v + 1, s, v, false});
      }
    }
  }
  if (options.fold) {
    for (std::size_t e = 0; e < senders.size(); ++e) {
      const Replica& rep = senders[e];
      for (const Hop& h : hops) {
        const CollectivePlan& plan = pipeline_plan(rep, gpu_of(rep.tp, rep.cp, rep.dp, h.from), gpu_of(rep.tp, rep.cp, rep.dp, h.to));
        shadows.add_group_plan({FoldShadows::kPipeline, static_cast<int>(e), 0}, {static_cast<int>(CollectiveOp::send_recv), h.from * p.pp + h.to}, &plan, e == 0, rep.tp);
      }
    }
  }

  // The pairs holding the tied embeddings (below), planned here for the choice of shadows. Folded,
  // those of replica 0's other TP and CP ranks are shadows, as their pipeline pairs are (left out,
  // a step with dp 1 on a 3:1 tree came out 9% under --no-fold).
  std::vector<CollectivePlan> tied_plans;
  if (m.tied_embeddings && p.pp > 1) {
    const double bytes = embedding_parameters(m, p).dense * grad_bytes;
    tied_plans.reserve(senders.size());  // the shadows keep pointers to them
    for (std::size_t e = 0; e < senders.size(); ++e) {
      const Replica& rep = senders[e];
      Collective c;
      c.op = CollectiveOp::all_reduce;
      c.ranks = {gpus[static_cast<std::size_t>(gpu_of(rep.tp, rep.cp, rep.dp, 0))], gpus[static_cast<std::size_t>(gpu_of(rep.tp, rep.cp, rep.dp, p.pp - 1))]};
      c.bytes = Bytes(bytes);
      tied_plans.push_back(cm.plan(c));
      if (options.fold) {
        shadows.add_source({&tied_plans.back()}, 1.0, rep.tp, e != 0);
        shadows.add_group_plan({FoldShadows::kTied, static_cast<int>(e), 0}, {static_cast<int>(CollectiveOp::all_reduce), bytes}, &tied_plans.back(), e == 0,
                               rep.tp);
      }
    }
  }

  // ---- data parallelism (has_dp above)
  // The tasks whose end makes each unit's gradient final, per stage: every simulated replica's.
  // Folded, every TP rank's traffic follows replica 0's tasks: the others do the same work at the same
  // times.
  std::vector<std::vector<std::size_t>> replicas_of_tp(static_cast<std::size_t>(p.tp));
  for (std::size_t r = 0; r < replicas.size(); ++r) replicas_of_tp[static_cast<std::size_t>(replicas[r].tp)].push_back(r);
  if (options.fold) {
    for (auto& reps : replicas_of_tp) reps = {0};
  }
  const auto add_dp_traffic = [&] {
    if (has_dp && !fsdp) {
      for (int s = 0; s < p.pp; ++s) {
        // Units in the order their gradients become final: the last micro-batch's backward passes.
        struct Ready {
          int chunk;
          std::size_t unit;
        };
        std::vector<Ready> ready;
        for (const Pass& pass : orders[static_cast<std::size_t>(s)]) {
          if (pass.forward || pass.micro != micro - 1) continue;
          const auto& list = units[static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)];
          for (std::size_t i = list.size(); i-- > 0;) ready.push_back({pass.chunk, i});
        }
        // Buckets of at least `bucket` parameters (one bucket for all when not overlapped).
        struct Bucket {
          double dense = 0, expert = 0;
          std::vector<Ready> members;
        };
        std::vector<Bucket> buckets(1);
        for (const Ready& rd : ready) {
          const Unit& u = units[static_cast<std::size_t>(s)][static_cast<std::size_t>(rd.chunk)][rd.unit];
          buckets.back().dense += u.dense;
          buckets.back().expert += u.expert;
          buckets.back().members.push_back(rd);
          if (p.overlap_grad_reduce && buckets.back().dense + buckets.back().expert >= bucket) buckets.emplace_back();
        }
        if (buckets.back().members.empty()) buckets.pop_back();
        // ZeRO-2 keeps only its shard of the gradients, so every micro-batch's backward reduce-scatters
        // them (DeepSpeed stage 2; FSDP's SHARD_GRAD_OP outside no_sync); stages 0 and 1 accumulate
        // whole gradients and reduce the last micro-batch's. A micro-batch's units finish in the same
        // order (chunk by chunk, last layer first) whichever micro-batch it is.
        // Not overlapped, each micro-batch's reduction blocks its stage (below): the pass the stage
        // runs next after a micro-batch's last backward (one bucket then, so one chunk), found once.
        std::vector<const Pass*> after_backward(static_cast<std::size_t>(micro), nullptr);
        if (zero2 && !p.overlap_grad_reduce && !buckets.empty()) {
          const auto& order = orders[static_cast<std::size_t>(s)];
          const int chunk = buckets.back().members.back().chunk;
          for (std::size_t i = 0; i + 1 < order.size(); ++i) {
            if (!order[i].forward && order[i].chunk == chunk) after_backward[static_cast<std::size_t>(order[i].micro)] = &order[i + 1];
          }
        }
        for (int mb = zero2 ? 0 : micro - 1; mb < micro; ++mb) {
          for (const Bucket& b : buckets) {
            in_issue_order(b.dense, b.expert, [&](double dense, double expert, int t) {
              std::vector<TaskId> after;
              for (std::size_t r : replicas_of_tp[static_cast<std::size_t>(t)]) {
                const Ready& lastm = b.members.back();
                const PassTasks& pt = bwd[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(lastm.chunk)][static_cast<std::size_t>(mb)];
                // pt.units holds the chunk's units in backward order.
                const std::size_t n = units[static_cast<std::size_t>(s)][static_cast<std::size_t>(lastm.chunk)].size();
                if (p.overlap_grad_reduce) {
                  after.push_back(pt.units[n - 1 - lastm.unit]);
                } else {
                  after.push_back(mb == micro - 1 ? last_compute[r][static_cast<std::size_t>(s)] : pt.last);
                }
              }
              // Not overlapped, a micro-batch's reduction blocks its stage (DeepSpeed's stage 2 without
              // overlap_comm reduces inside the backward pass and waits): the stage's next pass waits for it.
              // The last micro-batch's reduction already ends the step before the optimizer.
              const bool blocks = !p.overlap_grad_reduce && mb < micro - 1;
              std::vector<std::pair<TaskId, TaskId>> ids;
              add_dp(p.reduce_scatters_gradients() ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, dense, expert, grad_bytes, s, after,
                     blocks ? &ids : nullptr, t);
              if (const Pass* next = blocks ? after_backward[static_cast<std::size_t>(mb)] : nullptr) {
                for (std::size_t r : replicas_of_tp[static_cast<std::size_t>(t)]) {
                  const TaskId f = (next->forward ? fwd : bwd)[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(next->chunk)][static_cast<std::size_t>(next->micro)].first;
                  for (const auto& id : ids) {
                    graph.depend(id.second, f);
                    wait_on(r, s, f, {id.first, id.second, WaitKind::data_parallel});
                  }
                }
              }
            });
          }
        }
        if (gather_at_start) {
          // Next step's parameter all-gathers, issued in forward order; the first micro-batch's
          // forward of a unit waits for its bucket.
          for (std::size_t bi = buckets.size(); bi-- > 0;) {
            const Bucket& b = buckets[bi];
            // The first unit of the bucket in forward order is its last member.
            const Ready& first = b.members.back();
            in_issue_order(b.dense, b.expert, [&](double dense, double expert, int t) {
              std::vector<std::pair<TaskId, TaskId>> ids;
              add_dp(CollectiveOp::all_gather, dense, expert, 2.0, s, {}, &ids, t);
              for (std::size_t r : replicas_of_tp[static_cast<std::size_t>(t)]) {
                const TaskId f = fwd[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(first.chunk)][0].units[first.unit];
                for (const auto& id : ids) {
                  graph.depend(id.second, f);
                  wait_on(r, s, f, {id.first, id.second, WaitKind::data_parallel});
                }
              }
            });
          }
        }
      }
    }
    if (has_dp && fsdp) {
      // FSDP: every pass gathers each unit's weights (one unit ahead) and every backward
      // reduce-scatters its gradients. One stream (one communicator) carries both in the order they
      // are issued: a unit's backward prefetches the next unit's gather before its own gradients are
      // ready (FSDP's BACKWARD_PRE), so the gather of unit i + 1 goes ahead of the reduce-scatter of
      // unit i, not behind it, where it would wait for unit i's backward to end.
      for (int s = 0; s < p.pp; ++s) {
        // Per replica, the stage's last two units before the pass: the first two gathers of a pass
        // wait for them, as FSDP prefetches across passes one unit ahead. (Without, every pass's first
        // two gathers were ready at the step's start, and the stream ran later passes' in the gaps of
        // the first: out of program order and past FSDP's two gathers in flight.)
        std::vector<std::vector<TaskId>> recent(replicas.size());
        for (const Pass& pass : orders[static_cast<std::size_t>(s)]) {
          const auto& list = units[static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)];
          const std::size_t n = list.size();
          std::optional<std::size_t> pending;  // the unit whose reduce-scatter waits for the next gather
          const auto reduce_scatter = [&](std::size_t i) {
            const Unit& u = list[n - 1 - i];
            in_issue_order(u.dense, u.expert, [&](double dense, double expert, int t) {
              std::vector<TaskId> done;
              for (std::size_t r : replicas_of_tp[static_cast<std::size_t>(t)]) {
                done.push_back((bwd[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)][static_cast<std::size_t>(pass.micro)]).units[i]);
              }
              add_dp(CollectiveOp::reduce_scatter, dense, expert, grad_bytes, s, done, nullptr, t);
            });
          };
          for (std::size_t i = 0; i < n; ++i) {
            const std::size_t ui = pass.forward ? i : n - 1 - i;
            const Unit& u = list[ui];
            in_issue_order(u.dense, u.expert, [&](double dense, double expert, int t) {
              const auto& reps = replicas_of_tp[static_cast<std::size_t>(t)];
              std::vector<TaskId> after;
              for (std::size_t r : reps) {
                const PassTasks& pt = (pass.forward ? fwd : bwd)[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)][static_cast<std::size_t>(pass.micro)];
                // Prefetch one unit ahead: gather i once the unit two before it has finished.
                const std::vector<TaskId>& before = recent[r];
                if (i >= 2) {
                  after.push_back(pt.units[i - 2]);
                } else if (before.size() >= 2 - i) {
                  after.push_back(before[before.size() - (2 - i)]);
                }
              }
              std::vector<std::pair<TaskId, TaskId>> ids;
              add_dp(CollectiveOp::all_gather, dense, expert, 2.0, s, after, &ids, t);
              for (std::size_t r : reps) {
                const PassTasks& pt = (pass.forward ? fwd : bwd)[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)][static_cast<std::size_t>(pass.micro)];
                for (const auto& id : ids) {
                  graph.depend(id.second, pt.units[i]);
                  wait_on(r, s, pt.units[i], {id.first, id.second, WaitKind::data_parallel});
                }
              }
            });
            if (!pass.forward) {
              if (pending) reduce_scatter(*pending);
              pending = i;
            }
          }
          if (pending) reduce_scatter(*pending);
          for (std::size_t r = 0; r < replicas.size(); ++r) {
            const PassTasks& pt = (pass.forward ? fwd : bwd)[r][static_cast<std::size_t>(s)][static_cast<std::size_t>(pass.chunk)][static_cast<std::size_t>(pass.micro)];
            std::vector<TaskId>& rc = recent[r];
            rc.insert(rc.end(), pt.units.begin(), pt.units.end());
            if (rc.size() > 2) rc.erase(rc.begin(), rc.end() - 2);
          }
        }
      }
    }
  };

  const bool gather_after_optimizer = has_dp && distributed && !fsdp && !gather_at_start;
  if (options.fold) {
    // The first pass: plan every data-parallel collective of the step, then choose the shadows to
    // simulate (the pipeline pairs and tied-embedding pairs are planned above).
    planning_dp = true;
    add_dp_traffic();
    if (gather_after_optimizer) {
      for (int s = 0; s < p.pp; ++s) {
        const StageParameters sp = stage_parameters(m, p, s);
        in_issue_order(sp.dense, sp.expert, [&](double dense, double expert, int t) { add_dp(CollectiveOp::all_gather, dense, expert, 2.0, s, {}, nullptr, t); });
      }
    }
    planning_dp = false;
    shadows.choose();
  }

  // ---- pipeline sends: the simulated replicas', then the shadows simulated, on replica 0's passes
  if (p.pp > 1) {
    auto send = [&](const Replica& rep, int from, int to, TaskId after, TaskId before, int stream, std::size_t r, int s_from, int s_to) {
      const auto ids = cm.add_to(graph, pipeline_plan(rep, from, to), stream);
      graph.depend(after, ids.first);
      graph.depend(ids.second, before);
      wait_on(r, s_to, before, {ids.first, ids.second, WaitKind::pipeline});
      if (blocking_sends) {
        // Blocking: the sender's next pass starts once its send has finished.
        if (auto n = next_compute.find(after); n != next_compute.end()) {
          graph.depend(ids.second, n->second);
          wait_on(r, s_from, n->second, {ids.first, ids.second, WaitKind::pipeline});
        }
      }
    };
    for (std::size_t e = 0; e < senders.size(); ++e) {
      const bool shadow = e >= replicas.size();
      if (shadow && !shadows.simulated({FoldShadows::kPipeline, static_cast<int>(e), 0})) continue;
      const Replica& rep = senders[e];
      const std::size_t r = shadow ? 0 : e;
      for (const Hop& h : hops) {
        const Grid& grid = h.forward ? fwd : bwd;
        for (int i = 0; i < micro; ++i) {
          send(rep, gpu_of(rep.tp, rep.cp, rep.dp, h.from), gpu_of(rep.tp, rep.cp, rep.dp, h.to),
               grid[r][static_cast<std::size_t>(h.from)][static_cast<std::size_t>(h.from_chunk)][static_cast<std::size_t>(i)].last,
               grid[r][static_cast<std::size_t>(h.to)][static_cast<std::size_t>(h.to_chunk)][static_cast<std::size_t>(i)].first,
               pipeline_stream(h.from, h.to, h.forward, p.pp), r, h.from, h.to);
        }
      }
    }
  }

  add_dp_traffic();

  // ---- tied embeddings held by two stages: the first stage's embedding and the last stage's output
  // projection are one weight, so once each has its data-parallel reduction the pair all-reduces
  // that weight's main gradient (Megatron's _allreduce_embedding_grads, DeepSpeed's ReduceTiedGrads).
  if (m.tied_embeddings && p.pp > 1) {
    std::vector<TaskId> ends;
    for (std::size_t e = 0; e < tied_plans.size(); ++e) {
      // Folded, a shadow pair starts when replica 0's does.
      if (options.fold && e != 0 && !shadows.simulated({FoldShadows::kTied, static_cast<int>(e), 0})) continue;
      const std::size_t r = options.fold ? 0 : e;
      const auto ids = cm.add_to(graph, tied_plans[e], kDpStream);
      for (int s : {0, p.pp - 1}) {
        graph.depend(last_compute[r][static_cast<std::size_t>(s)], ids.first);
        for (TaskId t : stage_dp[static_cast<std::size_t>(s)]) graph.depend(t, ids.first);
      }
      ends.push_back(ids.second);
    }
    for (TaskId t : ends) {
      dp_lasts.push_back(t);
      stage_dp.front().push_back(t);
      stage_dp.back().push_back(t);
    }
  }

  // ---- optimizer: after every gradient is reduced everywhere (the global gradient-norm clip)
  const TaskId barrier = graph.add_delay(Time(), "gradients reduced");
  for (TaskId t : dp_lasts) graph.depend(t, barrier);
  for (const auto& per_stage : last_compute) {
    for (TaskId t : per_stage) graph.depend(t, barrier);
  }
  std::vector<StageParameters> stage_params;
  std::vector<double> optimizer_seconds;
  for (int s = 0; s < p.pp; ++s) {
    const StageParameters sp = stage_parameters(m, p, s);
    stage_params.push_back(sp);
    optimizer_seconds.push_back(optimizer_step_seconds(job, hw, sp));
  }
  std::vector<TaskId> step_ends;
  for (std::size_t r = 0; r < replicas.size(); ++r) {
    for (int s = 0; s < p.pp; ++s) {
      const double seconds = optimizer_seconds[static_cast<std::size_t>(s)];
      const int gpu = gpu_of(replicas[r].tp, replicas[r].cp, replicas[r].dp, s);
      const TaskId opt = graph.add_compute(gpu, kComputeStream, Time::seconds(seconds), "optimizer step", "optimizer");
      graph.depend(barrier, opt);
      graph.depend(last_compute[r][static_cast<std::size_t>(s)], opt);
      if (r == 0) {
        PassTime parts;
        parts.compute = seconds;
        timeline[static_cast<std::size_t>(s)].push_back({opt, parts, true, {{barrier, barrier, WaitKind::barrier}}});
      }
      step_ends.push_back(opt);
    }
  }
  if (gather_after_optimizer) {
    // Parameter all-gathers after the optimizer, not overlapped with anything.
    for (int s = 0; s < p.pp; ++s) {
      const StageParameters& sp = stage_params[static_cast<std::size_t>(s)];
      std::vector<TaskId> after;
      for (std::size_t r = 0; r < replicas.size(); ++r) after.push_back(step_ends[r * static_cast<std::size_t>(p.pp) + static_cast<std::size_t>(s)]);
      in_issue_order(sp.dense, sp.expert, [&](double dense, double expert, int t) { add_dp(CollectiveOp::all_gather, dense, expert, 2.0, s, after, nullptr, t); });
    }
  }

  if (!options.fold && p.tp * p.cp > 1) {
    // The TP and CP ranks of a replica synchronise inside every layer, through their TP collectives
    // and ring attention's exchanges, which are timed, not simulated: so each of their alike tasks
    // (a pass, or a unit of a split pass) starts once all of them may. Folded, the representative
    // waits instead for the other TP and CP ranks' traffic that feeds its passes: their parameter
    // gathers, and their pipeline sends where they are simulated.
    std::map<std::pair<int, int>, std::vector<std::size_t>> group_of;  // (dp rank, stage) -> replicas
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      for (int s = 0; s < p.pp; ++s) group_of[{replicas[r].dp, s}].push_back(r);
    }
    std::vector<std::vector<TaskId>> sets;
    for (const auto& [where, members] : group_of) {
      const auto& first = passes[members.front()][static_cast<std::size_t>(where.second)];
      for (std::size_t k = 0; k < first.size(); ++k) {
        auto& set = sets.emplace_back();
        for (std::size_t r : members) set.push_back(passes[r][static_cast<std::size_t>(where.second)][k]);
      }
    }
    graph.start_together(sets, "TP and CP ranks start together");
  }
  const Time end = graph.run();
  const double step = end.to_seconds();
  if (options.fold && p.pp > 1 && p.dp > 1) {
    if (std::string note = left_out_sends_note(topo, cm.router(), p.dp - 1, unfold_remedy(job)); !note.empty()) result.notes.push_back(std::move(note));
  }
  result.step_time = Seconds(step);
  result.stats = sim.stats();
  result.tasks = graph.size();
  result.folded = options.fold;

  // ---- breakdown: stage timelines of replica 0, averaged over stages
  // The optimizer's barrier waits for every stage's compute and every gradient reduction. The part
  // of that wait before the last backward pass anywhere ends is the pipeline draining (bubble); the
  // rest is data-parallel traffic left exposed on the step's critical path.
  double compute_done = 0;
  for (const auto& per_stage : last_compute) {
    for (TaskId t : per_stage) compute_done = std::max(compute_done, graph.record(t).end.to_seconds());
  }
  StepBreakdown sum;
  for (int s = 0; s < p.pp; ++s) {
    double clock = 0;
    for (const ComputeTask& ct : timeline[static_cast<std::size_t>(s)]) {
      const auto& rec = graph.record(ct.id);
      const double start = rec.start.to_seconds();
      const double gap = std::max(0.0, start - clock);
      if (gap > 0) {
        // What held the task back: the predecessor that ended last.
        const Wait* blocking = nullptr;
        double latest = -1;
        for (const Wait& w : ct.waits) {
          const double e = graph.record(w.last).end.to_seconds();
          if (e > latest) {
            latest = e;
            blocking = &w;
          }
        }
        if (blocking && latest >= start - 1e-12) {
          if (blocking->kind == WaitKind::data_parallel) {
            sum.dp_comm += gap;
          } else if (blocking->kind == WaitKind::pipeline) {
            const double sent = graph.record(blocking->first).start.to_seconds();
            const double comm_part = std::clamp(start - std::max(sent, clock), 0.0, gap);
            sum.pp_comm += comm_part;
            sum.bubble += gap - comm_part;
          } else {
            const double dp_part = std::clamp(start - std::max(clock, compute_done), 0.0, gap);
            sum.dp_comm += dp_part;
            sum.bubble += gap - dp_part;
          }
        } else {
          sum.bubble += gap;
        }
      }
      if (ct.optimizer) {
        sum.optimizer += ct.parts.compute;
      } else {
        sum.compute += ct.parts.compute;
        sum.tp_comm += ct.parts.tp;
        sum.cp_comm += ct.parts.cp;
        sum.ep_comm += ct.parts.ep;
      }
      clock = rec.end.to_seconds();
    }
    // After the stage's optimizer: parameter gathers not overlapped, or waiting for other stages.
    const double tail = std::max(0.0, step - clock);
    if (has_dp && distributed && !fsdp && !gather_at_start) {
      sum.dp_comm += tail;
    } else {
      sum.bubble += tail;
    }
  }
  const double stages = p.pp;
  StepBreakdown& b = result.breakdown;
  b.compute = sum.compute / stages;
  b.tp_comm = sum.tp_comm / stages;
  b.cp_comm = sum.cp_comm / stages;
  b.ep_comm = sum.ep_comm / stages;
  b.dp_comm = sum.dp_comm / stages;
  b.pp_comm = sum.pp_comm / stages;
  b.bubble = sum.bubble / stages;
  b.optimizer = sum.optimizer / stages;

  // ---- throughput and FLOPs
  result.tokens_per_step = double(job.global_batch) * m.seq_len;
  result.tokens_per_s = result.tokens_per_step / step;
  result.model_flops_per_step = model_flops_per_token(m) * result.tokens_per_step;
  double hw_flops = 0;  // per replica of one micro-batch over the whole model (tp x cp ranks)
  {
    const auto add = [&](const OpsTime& t, double count) {
      hw_flops += count * (t.forward.flops + t.backward.flops + t.recompute.flops);
    };
    add(dense_layer, m.layers - m.moe_layers());
    add(moe_layer, m.moe_layers());
    add(embedding, 1);
    add(head, 1);
    // An MoE layer's expert FLOPs per rank cover ep ranks' tokens over ep of the experts: the
    // per-rank figure is already the rank's share; every op is per rank of a tp x cp group.
    hw_flops *= double(p.tp) * p.cp * micro * p.dp;
  }
  result.hardware_flops_per_step = hw_flops;
  const hardware::Dtype peak_dtype = job.precision == hardware::Dtype::fp16 ? hardware::Dtype::fp16 : hardware::Dtype::bf16;
  const double peak = hw.supports(peak_dtype) ? hw.peak(peak_dtype).value() : hw.peak(job.precision).value();
  result.mfu = result.model_flops_per_step / (step * p.gpus() * peak);
  result.hfu = result.hardware_flops_per_step / (step * p.gpus() * peak);
  result.tflops_per_gpu = result.model_flops_per_step / (step * p.gpus()) / 1e12;
  if (result.hfu < result.mfu) {
    result.notes.push_back("HFU is below MFU: MFU counts the whole attention matrix (PaLM's formula, and Megatron-LM's before 2025), while the causal kernels compute only half of it");
  }
  if (job.precision == hardware::Dtype::fp8 && peak_dtype != job.precision && hw.supports(peak_dtype)) {
    // MFU and HFU keep the 16-bit peak (docs/training.md, Results); the fp8 peak's share is said too,
    // so that an fp8 MFU near or above 100% is not read as a saturated GPU.
    const double fp8_peak = hw.peak(hardware::Dtype::fp8).value();
    result.notes.push_back(fmt::format("MFU and HFU are over the {}'s 16-bit peak ({:.0f} TFLOP/s); over its fp8 peak ({:.0f} TFLOP/s) they are {:.1f}% and {:.1f}%",
                                       hw.name, peak / 1e12, fp8_peak / 1e12, 100 * result.model_flops_per_step / (step * p.gpus() * fp8_peak),
                                       100 * result.hardware_flops_per_step / (step * p.gpus() * fp8_peak)));
  }
  result.memory = estimate_memory(job, hw);
  if (job.token_budget > 0) {
    // Whole steps: a budget smaller than a step still takes one (1,000 tokens on a 16.8 M-token step
    // had read 1.4e-7 hours and 0 GPU-hours).
    result.time_to_train = Seconds(std::ceil(job.token_budget / result.tokens_per_step) * step);
    result.gpu_hours = result.time_to_train.value() * p.gpus() / 3600.0;
  }
  if (p.tp == 1 && (p.sequence_parallel || p.tp_overlap)) {
    // Megatron turns sequence parallelism off without TP (arguments.py warns "Disabling sequence
    // parallelism"); the overlap has no TP collective to hide.
    const bool both = p.sequence_parallel && p.tp_overlap;
    result.notes.push_back(fmt::format("{} {} with tp > 1 only: at tp 1 {} nothing",
                                       both ? "sequence_parallel and tp_overlap" : p.sequence_parallel ? "sequence_parallel" : "tp_overlap",
                                       both ? "apply" : "applies", both ? "they change" : "it changes"));
  }
  if (p.gpus() < static_cast<int>(gpus.size())) {
    result.notes.push_back(fmt::format("the plan uses {} of the topology's {} GPUs (the first ones in topology order)", p.gpus(), gpus.size()));
  }
  if (options.trace) {
    graph.trace_streams({"compute", "data-parallel collectives", "pipeline activations (stages 0-1, 2-3, ...)", "pipeline gradients (stages 0-1, 2-3, ...)",
                         "pipeline activations (stages 1-2, 3-4, ...; last and first at even pp)", "pipeline gradients (stages 1-2, 3-4, ...; last and first at even pp)",
                         "pipeline activations (last and first stage, odd pp)", "pipeline gradients (last and first stage, odd pp)"});
    result.trace = graph.chrome_trace();
  }
  return result;
}

// Adam's step reads the gradient, reads and writes fp32 master weights, momentum and variance,
// writes the 16-bit weights, and the gradient-norm clip reads the gradient once more; it is bound by
// HBM bandwidth.
double optimizer_step_seconds(const TrainingJob& job, const hardware::HardwareProfile& hw, const StageParameters& stage) {
  const ParallelismPlan& p = job.plan;
  const double dense_shards = double(p.dp) * p.cp;
  const double shard = stage.dense / dense_shards + stage.expert / expert_data_parallel_size(p);
  const double local = p.zero_stage >= 1 ? shard : stage.dense + stage.expert;
  const double adam_bytes_per_parameter = 2.0 * job.gradient_bytes() + 3.0 * 8.0 + 2.0;
  // The main-gradient buffer is zeroed for the next step's accumulation (Megatron's
  // zero_grad_buffer, DeepSpeed's clear_hp_grads): all of the stage's gradients, a shard from ZeRO-2.
  const double gradient_buffer = p.shards_gradients() ? shard : stage.dense + stage.expert;
  return (local * adam_bytes_per_parameter + gradient_buffer * job.gradient_bytes()) / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);
}

namespace {
// ZeRO-2 and 3 reduce-scatter each micro-batch's 16-bit gradients and add only their shard, where
// there is a data-parallel group to shard over: alone (dp x cp = 1 and no expert-data-parallel
// group) a rank keeps and adds whole gradients, as ZeRO-0 and 1 do. (An MoE plan whose experts alone
// have such a group counts as sharded; a dense TP 8 plan at dp 1 had counted TP as one and dropped its
// accumulation cost under ZeRO-2 and 3.)
bool gradients_sharded(const TrainingJob& job) { return job.plan.shards_gradients() && reduces_gradients(job); }
}  // namespace

bool unfused_accumulation(const TrainingJob& job) { return !job.plan.grad_accumulation_fusion && !gradients_sharded(job); }

double grad_accumulation_seconds(const TrainingJob& job, const hardware::HardwareProfile& hw, const StageParameters& parameters) {
  if (!unfused_accumulation(job)) return 0.0;
  const double bytes_per_parameter = 2.0 + 2.0 * job.gradient_bytes();
  return (parameters.dense + parameters.expert) * bytes_per_parameter / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);
}

double embedding_gradient_seconds(const TrainingJob& job, const hardware::HardwareProfile& hw, const StageParameters& table) {
  double bytes_per_parameter = 2.0;  // the zero fill of the 16-bit dense gradient
  if (!gradients_sharded(job) && job.plan.grad_accumulation_fusion) bytes_per_parameter += 2.0 + 2.0 * job.gradient_bytes();
  return (table.dense + table.expert) * bytes_per_parameter / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);
}

bool hashes_flows(const topology::Topology& topo, const topology::Router& router) {
  return topo.fabric_tiers >= 2 && !router.routes_by_destination();
}

namespace {

// The fabric leaf nearest a GPU (through its node's switches and NICs), or none without a fabric.
std::optional<topology::Vertex> nearest_leaf(const topology::Topology& topo, topology::Vertex gpu) {
  const auto& g = topo.graph();
  std::vector<topology::Vertex> frontier{gpu};
  std::set<topology::Vertex> seen{gpu};
  while (!frontier.empty()) {
    std::vector<topology::Vertex> next;
    for (topology::Vertex v : frontier) {
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        const topology::Vertex w = boost::target(*e, g);
        const topology::DeviceKind kind = topo.device(w).kind;
        if (kind == topology::DeviceKind::leaf) return w;
        if (kind == topology::DeviceKind::gpu || topology::is_fabric_switch(kind) || !seen.insert(w).second) continue;
        next.push_back(w);
      }
    }
    frontier = std::move(next);
  }
  return std::nullopt;
}

// Whether every GPU of the first node meets the same NVSwitches over links of the same bandwidth:
// then any GPUs of one node are placed alike for what runs among them (NVSwitch nodes; not PCIe
// trees or NVLink meshes, where which GPUs matters).
bool switched_alike(const topology::Topology& topo) {
  const auto& g = topo.graph();
  std::optional<std::vector<std::pair<int, double>>> first;
  const int node = topo.gpus().empty() ? -1 : topo.device(topo.gpus().front()).node;
  for (topology::Vertex gpu : topo.gpus()) {
    if (topo.device(gpu).node != node) break;
    std::vector<std::pair<int, double>> switches;
    for (auto [e, end] = boost::out_edges(gpu, g); e != end; ++e) {
      const topology::Device& d = topo.device(boost::target(*e, g));
      if (d.kind == topology::DeviceKind::nvswitch) switches.emplace_back(d.local_index, topo.link(*e).bandwidth.value());
    }
    std::sort(switches.begin(), switches.end());
    if (switches.empty()) return false;
    if (!first) first = switches;
    if (switches != *first) return false;
  }
  return true;
}

}  // namespace

GroupPlacements group_placements(const ParallelismPlan& p, const topology::Topology& topo) {
  const auto& gpus = topo.gpus();
  const int ranks = p.tp * p.cp * p.dp * p.pp;
  // Where a GPU meets the fabric, to tell a group within one leaf (or scalable unit) from one that
  // crosses to another; looked up only for groups that leave a node.
  std::vector<std::optional<std::optional<topology::Vertex>>> leaf(static_cast<std::size_t>(ranks));
  const auto leaf_of = [&](int r) -> const std::optional<topology::Vertex>& {
    auto& l = leaf[static_cast<std::size_t>(r)];
    if (!l) l = nearest_leaf(topo, gpus[static_cast<std::size_t>(r)]);
    return *l;
  };
  const bool alike_in_node = switched_alike(topo);
  const auto reach = [&](int member, int first) {
    if (topo.device(gpus[static_cast<std::size_t>(member)]).node == topo.device(gpus[static_cast<std::size_t>(first)]).node) return 0;
    const auto& a = leaf_of(member);
    const auto& b = leaf_of(first);
    if (!a || !b || *a == *b) return 0;
    return topo.device(*a).unit == topo.device(*b).unit ? 1 : 2;
  };
  // Each distinct placement once, by its first group in rank order.
  const auto collect = [&](std::vector<std::vector<topology::Vertex>>& into, auto&& group_of) {
    std::set<std::vector<std::tuple<int, int, int>>> seen;
    std::vector<char> grouped(static_cast<std::size_t>(ranks), 0);
    for (int r = 0; r < ranks; ++r) {
      if (grouped[static_cast<std::size_t>(r)]) continue;
      const std::vector<int> members = group_of(r);
      std::vector<std::tuple<int, int, int>> placement;
      std::vector<topology::Vertex> group;
      const int first_node = topo.device(gpus[static_cast<std::size_t>(members.front())]).node;
      const bool one_node = std::all_of(members.begin(), members.end(), [&](int m) { return topo.device(gpus[static_cast<std::size_t>(m)]).node == first_node; });
      for (std::size_t i = 0; i < members.size(); ++i) {
        const int m = members[i];
        grouped[static_cast<std::size_t>(m)] = 1;
        const topology::Device& d = topo.device(gpus[static_cast<std::size_t>(m)]);
        // Inside one switched node only the group's size matters: its members by position.
        const int index = one_node && alike_in_node ? static_cast<int>(i) : d.local_index;
        placement.emplace_back(d.node - first_node, index, reach(m, members.front()));
        group.push_back(gpus[static_cast<std::size_t>(m)]);
      }
      if (seen.insert(std::move(placement)).second) into.push_back(std::move(group));
    }
  };
  GroupPlacements g;
  collect(g.tp, [&](int r) { return tensor_parallel_ranks(p, r); });
  collect(g.cp, [&](int r) { return context_parallel_ranks(p, r); });
  collect(g.ep, [&](int r) { return expert_parallel_ranks(p, r); });
  collect(g.etp, [&](int r) { return expert_tensor_parallel_ranks(p, r); });
  return g;
}

GroupPlacements first_groups(const ParallelismPlan& p, const topology::Topology& topo) {
  const auto vertices = [&](const std::vector<int>& ranks) {
    std::vector<topology::Vertex> out;
    for (int r : ranks) out.push_back(topo.gpus()[static_cast<std::size_t>(r)]);
    return std::vector<std::vector<topology::Vertex>>{out};
  };
  return {vertices(tensor_parallel_ranks(p, 0)), vertices(context_parallel_ranks(p, 0)), vertices(expert_parallel_ranks(p, 0)),
          vertices(expert_tensor_parallel_ranks(p, 0))};
}

GroupCollectives::GroupCollectives(const ParallelismPlan& p, const topology::Topology& topo, const CollectiveModel& cm)
    : GroupCollectives(group_placements(p, topo), topo, cm) {}

GroupCollectives::GroupCollectives(GroupPlacements placements, const topology::Topology& topo, const CollectiveModel& cm)
    : topo_(topo), cm_(cm), placements_(std::move(placements)) {}

bool GroupCollectives::tp_spans_nodes() const {
  return std::any_of(placements_.tp.begin(), placements_.tp.end(), [&](const std::vector<topology::Vertex>& group) {
    return std::any_of(group.begin(), group.end(), [&](topology::Vertex v) { return topo_.device(v).node != topo_.device(group.front()).node; });
  });
}

Seconds GroupCollectives::operator()(CommGroup g, CollectiveOp op, double bytes) {
  const auto& groups = placements_.of(g);
  if (groups.empty() || groups.front().size() < 2 || bytes <= 0) return Seconds(0);
  const auto key = std::make_tuple(static_cast<int>(g), static_cast<int>(op), bytes);
  if (auto it = cache_.find(key); it != cache_.end()) return Seconds(it->second);
  double slowest = 0;
  for (const auto& members : groups) {
    Collective c;
    c.op = op;
    c.ranks = members;
    c.bytes = Bytes(bytes);
    if (op == CollectiveOp::send_recv) {
      // Over a group, a ring of sends: each member sends `bytes` to the next, all at once (the grouped
      // sends and receives of an all-to-allv with only those pairs), contending where they share links.
      const std::size_t n = members.size();
      c.op = CollectiveOp::all_to_all;
      c.pair_bytes.assign(n * n, 0.0);
      for (std::size_t i = 0; i < n; ++i) c.pair_bytes[i * n + (i + 1) % n] = bytes;
      c.bytes = Bytes(bytes * static_cast<double>(n));
    }
    slowest = std::max(slowest, cm_.simulate(c).time.value());
  }
  cache_[key] = slowest;
  return Seconds(slowest);
}

}  // namespace cs::models
