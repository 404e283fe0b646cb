// Plan checks, rank placement, layer assignment and the memory model of a training job.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "clustersim/models/training.hpp"
#include "training_internal.hpp"

namespace cs::models {

std::vector<std::pair<std::string, double>> breakdown_parts(const StepBreakdown& b) {
  return {{"compute", b.compute}, {"tp_comm", b.tp_comm}, {"cp_comm", b.cp_comm}, {"ep_comm", b.ep_comm},
          {"dp_comm", b.dp_comm}, {"pp_comm", b.pp_comm}, {"pipeline_bubble", b.bubble}, {"optimizer", b.optimizer}};
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::string_view to_string(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved-1f1b";
  }
  return "?";
}

std::string_view to_string(ParallelDim d) {
  switch (d) {
    case ParallelDim::tp: return "tp";
    case ParallelDim::cp: return "cp";
    case ParallelDim::ep: return "ep";
    case ParallelDim::dp: return "dp";
    case ParallelDim::pp: return "pp";
  }
  return "?";
}

bool is_rank_order(std::vector<ParallelDim> order) {
  std::sort(order.begin(), order.end());
  return order == std::vector<ParallelDim>{ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::dp, ParallelDim::pp};
}

std::int64_t checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t r = 1;
  for (std::int64_t f : factors) {
    if (__builtin_mul_overflow(r, f, &r)) return std::numeric_limits<std::int64_t>::max();
  }
  return r;
}

namespace {

// Cheap and conservative: true when no GEMM of the step can reach the GEMM model's limits (2^31 a
// dimension, 2^62 outputs), so that the plan search's million plans skip building the op lists.
// Every dimension is at most the widest below, undivided by the plan; a batched product (attention
// over heads and micro-batches, the experts' FFNs over the local experts, in every pass) has at
// most its batch times the widest squared outputs, and attention's at most micro x heads x seq_len^2.
bool gemms_surely_in_range(const TrainingJob& job) {
  const TransformerSpec& m = job.model;
  const double tokens = double(job.micro_batch) * m.seq_len;
  const double up = is_gated(m.activation) ? 2.0 : 1.0;
  double widest = std::max({tokens, double(m.seq_len), double(job.micro_batch) * m.heads, double(m.hidden), double(m.vocab),
                            (double(m.heads) + 2.0 * m.kv_heads) * m.qk_head_dim(), double(m.attention_width()), up * m.ffn_hidden});
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    widest = std::max({widest, tokens * e.top_k * e.capacity_factor * job.plan.etp * job.plan.ep, double(e.experts), up * e.expert_ffn_hidden,
                       up * e.shared_experts * e.shared_expert_ffn_hidden});
  }
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    widest = std::max({widest, double(m.heads) * (a.qk_nope_head_dim + a.v_head_dim), double(a.kv_lora_rank) + a.qk_rope_head_dim, double(a.q_lora_rank)});
  }
  const double batch = std::max(double(job.micro_batch) * m.heads, m.moe ? double(m.moe->experts) : 1.0);
  return widest <= 0x1p30 && tokens * m.heads * m.seq_len <= 0x1p61 && batch * widest * widest <= 0x1p61;
}

// Whether every pass of the step is split into its layers (training_step.cpp): FSDP, or ZeRO-2
// overlapping each micro-batch's reduction with its backward.
bool splits_every_pass(const ParallelismPlan& p) { return p.zero_stage == 3 || (p.zero_stage == 2 && p.overlap_grad_reduce); }

}  // namespace

void check_job(const TrainingJob& job, int cluster_gpus, const hardware::HardwareProfile* gpu) {
  const ParallelismPlan& p = job.plan;
  const TransformerSpec& m = job.model;
  auto fail = [](const char* field, const std::string& what) { throw PlanError(field, what); };
  if (const std::int64_t gpus = checked_product({p.tp, p.pp, p.dp, p.cp}); gpus > cluster_gpus) {
    fail("parallelism", gpus == std::numeric_limits<std::int64_t>::max()
             ? fmt::format("the plan needs tp x pp x dp x cp = {} x {} x {} x {} GPUs, more than 2^63; the topology has {}", p.tp, p.pp, p.dp, p.cp,
                           cluster_gpus)
             : fmt::format("the plan needs tp x pp x dp x cp = {} x {} x {} x {} = {} GPUs; the topology has {}", p.tp, p.pp, p.dp, p.cp, gpus,
                           cluster_gpus));
  }
  if (const std::string why = tp_split_problem(m, p.tp); !why.empty()) fail("parallelism.tp", why);
  if (!m.mla && m.kv_heads % p.tp != 0) {
    // Serving engines replicate key/value heads over a TP group larger than their count; Megatron-Core
    // splits them (attention.py: divide(num_query_groups, tp), which asserts).
    fail("parallelism.tp", fmt::format("tp = {} must divide the model's {} key/value heads (Megatron-Core splits them over the TP group)", p.tp, m.kv_heads));
  }
  // ffn_hidden is the dense layers' width: a model whose every layer is a mixture of experts has none.
  if ((!m.moe || m.moe->dense_layers > 0) && m.ffn_hidden % p.tp != 0) {
    fail("parallelism.tp", fmt::format("tp = {} must divide ffn_hidden = {}", p.tp, m.ffn_hidden));
  }
  if (m.moe && m.moe->shared_experts > 0) {
    // Megatron-Core runs the shared experts as one MLP of their summed width
    // (moe_shared_expert_intermediate_size), split over the TP group as a dense FFN is.
    const std::int64_t shared = std::int64_t{m.moe->shared_experts} * m.moe->shared_expert_ffn_hidden;
    if (shared % p.tp != 0) {
      fail("parallelism.tp", fmt::format("tp = {} must divide the shared experts' summed FFN width {} x {} = {}", p.tp, m.moe->shared_experts,
                                         m.moe->shared_expert_ffn_hidden, shared));
    }
  }
  if (checked_product({p.pp, p.vpp}) > m.layers) {
    fail(p.vpp > 1 ? "parallelism.vpp" : "parallelism.pp", fmt::format("pp x vpp = {} x {} model chunks but the model has only {} layers", p.pp, p.vpp, m.layers));
  }
  if (p.vpp > 1 && p.pp == 1) fail("parallelism.vpp", "vpp > 1 (interleaved 1F1B) needs pp > 1");
  if (job.micro_batch < 1) fail("batch.micro", fmt::format("micro batch must be positive, found {}", job.micro_batch));
  if (checked_product({job.micro_batch, p.dp}) > job.global_batch) {
    fail("batch.global", fmt::format("micro batch x dp = {} x {} is more than the global batch of {}", job.micro_batch, p.dp, job.global_batch));
  }
  if (job.global_batch % (job.micro_batch * p.dp) != 0) {
    fail("batch.global", fmt::format("global batch {} is not a multiple of micro batch x dp = {} x {} = {}", job.global_batch, job.micro_batch, p.dp,
                     job.micro_batch * p.dp));
  }
  const int micro = job.micro_batches();
  if (micro > kMaxMicroBatches) {
    fail("batch.global", fmt::format("global batch / (micro batch x dp) = {} / ({} x {}) = {} micro-batches per step; at most {} are simulated (raise the micro "
                     "batch or dp)",
                     job.global_batch, job.micro_batch, p.dp, micro, kMaxMicroBatches));
  }
  if (const std::int64_t tasks = simulated_compute_tasks(job); tasks > kMaxComputeTasks) {
    fail(p.vpp > 1 ? "parallelism.vpp" : "batch.global",
         fmt::format("the step's graph would hold about {} compute tasks ({} micro-batches x 2 passes x {} model chunks on each of {} stages{}); at most {} are "
                     "simulated (raise the micro batch or dp{})",
                     tasks, micro, p.vpp, p.pp, splits_every_pass(p) ? ", split into their layers" : "", kMaxComputeTasks, p.vpp > 1 ? ", or lower vpp" : ""));
  }
  if (p.schedule == PipelineSchedule::interleaved && p.pp == 2 && !p.p2p_overlapped()) {
    // Megatron-LM's arguments.py: with blocking sends, interleaving needs pp > 2 "to avoid having
    // multiple p2p sends and recvs between same 2 ranks per communication batch" (the 2021-22 code
    // asked pp > 2 of every interleaved schedule).
    fail("parallelism.overlap_p2p", "interleaved 1F1B at pp = 2 needs overlapped pipeline sends: Megatron refuses it with blocking sends (pp > 2, or "
                                    "overlap_p2p: true)");
  }
  if (p.schedule == PipelineSchedule::interleaved) {
    // Megatron-Core's checks (forward_backward_pipelining_with_interleaving): groups of pp to all the
    // step's micro-batches, and a last group that is whole or at least pp (a smaller one would leave
    // the later stages waiting on the earlier ones).
    const int group = p.vp_group();
    const std::string micro_text = fmt::format("{} = {} / ({} x {})", micro, job.global_batch, job.micro_batch, p.dp);
    if (p.microbatch_group > 0 && (group < p.pp || group > micro)) {
      fail("parallelism.microbatch_group",
           fmt::format("microbatch_group = {} must lie between pp = {} and the step's micro-batches ({})", group, p.pp, micro_text));
    }
    if (micro < p.pp) {
      fail("batch.global", fmt::format("interleaved 1F1B needs at least pp = {} micro-batches per step, found {}", p.pp, micro_text));
    }
    if (const int rest = micro % group; !microbatch_groups_run(micro, p.pp, group)) {
      if (p.microbatch_group > 0) {
        fail("parallelism.microbatch_group",
             fmt::format("microbatch_group = {} leaves a last group of {} micro-batches ({} mod {}), fewer than pp = {}; Megatron-Core refuses it (the later "
                         "stages would wait on the earlier ones)",
                         group, rest, micro, group, p.pp));
      }
      int fits = p.pp;  // the smallest group Megatron-Core runs: micro itself at the latest
      while (!microbatch_groups_run(micro, p.pp, fits)) ++fits;
      fail("batch.global", fmt::format("interleaved 1F1B in groups of pp = {} micro-batches (Megatron-Core's default) needs the micro-batches per step ({}) to be a "
                                       "multiple of pp; or set parallelism.microbatch_group to a group size from {} to {} whose remainder is 0 or at least {} "
                                       "(the smallest: {})",
                                       p.pp, micro_text, p.pp, micro, p.pp, fits));
    }
  }
  if (m.seq_len % (2 * p.cp) != 0 && p.cp > 1) {
    fail("parallelism.cp", fmt::format("cp = {}: seq_len {} must split into 2 x cp load-balanced chunks", p.cp, m.seq_len));
  }
  if (p.sequence_parallel && p.tp > 1 && (m.seq_len / p.cp) % p.tp != 0) {
    fail("parallelism.sequence_parallel", fmt::format("sequence parallelism: the {} tokens of a CP rank do not split over tp = {}", m.seq_len / p.cp, p.tp));
  }
  if (p.ep > 1 || p.etp > 1) {
    if (!m.moe) fail(p.ep > 1 ? "parallelism.ep" : "parallelism.etp", fmt::format("ep = {} and etp = {} but the model {} has no experts", p.ep, p.etp, m.name));
    if (m.moe->expert_ffn_hidden % p.etp != 0) fail("parallelism.etp", fmt::format("etp = {} must divide the experts' FFN width {}", p.etp, m.moe->expert_ffn_hidden));
    if ((p.tp * p.cp * p.dp) % checked_product({p.etp, p.ep}) != 0) {
      fail("parallelism.ep", fmt::format("etp x ep = {} x {} must divide tp x cp x dp = {} (the ranks of a pipeline stage, which the experts' mapping splits into etp x ep x "
                       "the rest)",
                       p.etp, p.ep, p.tp * p.cp * p.dp));
    }
    if (m.moe->experts % p.ep != 0) fail("parallelism.ep", fmt::format("ep = {} must divide the {} experts", p.ep, m.moe->experts));
  }
  if (m.moe && p.pp > 1 && !experts_share_stages(p)) {
    // Megatron-Core refuses such an order (parallel_state.initialize_model_parallel): "When not using
    // pp-last rank ordering, the data parallel size of the attention and moe layers must be the
    // same", and the attention's and the experts' pipeline groups must agree.
    std::vector<std::string_view> names;
    for (ParallelDim d : p.order) names.push_back(to_string(d));
    if (expert_data_parallel_size(p) == p.dp) {
      // Equal data parallelism, but the two mappings stride the pipeline stages differently.
      fail("parallelism.order", fmt::format("order {} puts a rank on one pipeline stage in the attention's mapping and on another in the experts' (a stage "
                                            "every {} ranks against every {}), which Megatron-Core refuses: put pp last",
                                            fmt::join(names, "-"), dense_stage_stride(p), expert_stage_stride(p)));
    }
    fail("parallelism.order", fmt::format("order {} with pp before another dimension needs the experts' data parallelism equal to the attention's "
                                          "(etp x ep = {} x {} against tp x cp = {} x {}, expert dp {} against dp {}), as Megatron-Core requires: put pp "
                                          "last, or make etp x ep = tp x cp",
                                          fmt::join(names, "-"), p.etp, p.ep, p.tp, p.cp, expert_data_parallel_size(p), p.dp));
  }
  if (m.moe && p.tp > 1 && !p.sequence_parallel) {
    // Megatron-Core refuses it (TransformerConfig: with expert and tensor parallelism, sequence
    // parallelism must be used; arguments.py: MoE with TP needs SP): its MoE layer routes the
    // sequence-split tokens of each TP rank.
    fail("parallelism.sequence_parallel", fmt::format("a mixture of experts with tp = {} needs sequence_parallel (Megatron's MoE layers route each TP rank's share of the tokens)", p.tp));
  }
  if (p.zero_stage < 0 || p.zero_stage > 3) fail("parallelism.zero_stage", fmt::format("zero_stage must be 0, 1, 2 or 3, found {}", p.zero_stage));
  if (p.tp_overlap && !p.sequence_parallel && p.tp > 1) fail("parallelism.tp_overlap", "tp_overlap needs sequence_parallel (as Megatron's does)");
  if (p.cp > 1 && !p.flash_attention) {
    // Transformer Engine: "Context parallelism is only implemented with Flash Attention and Fused
    // Attention!"; Megatron's unfused path has no context parallelism.
    fail("parallelism.attention", fmt::format("cp = {} needs fused attention (attention: flash): context parallelism runs only in Transformer Engine's "
                                              "flash and fused attention kernels",
                                              p.cp));
  }
  if (!is_rank_order(p.order)) fail("parallelism.order", "order must name each of tp, cp, ep, dp, pp once");
  if (gpu && !gemms_surely_in_range(job)) {
    const Shard shard = shard_of(job);
    if (std::string problem = gemm_range_problem(m, shard, *gpu); !problem.empty()) {
      // A GEMM past what the GEMM model times: blame what is enough to fix it, the micro batch, else
      // the sequence, else the model's widths.
      Shard one = shard;
      one.micro_batch = 1;
      TransformerSpec shorter = m;
      shorter.seq_len = std::min(m.seq_len, 4096);
      const char* field = gemm_range_problem(m, one, *gpu).empty() ? "batch.micro" : gemm_range_problem(shorter, one, *gpu).empty() ? "batch.seq_len" : "model";
      fail(field, fmt::format("{}, in a micro-batch of {} x {} tokens on a GPU ({})", problem, job.micro_batch, m.seq_len,
                              field == std::string_view("batch.micro")     ? "a smaller micro batch fits"
                              : field == std::string_view("batch.seq_len") ? "a shorter sequence fits"
                                                                           : "the model's widths are past it"));
    }
  }
  if (job.precision == hardware::Dtype::fp8) {
    // Transformer Engine runs an fp8 GEMM only on operands whose rows divide by 8 and columns by 16
    // (assert_dim_for_fp8_exec); Megatron pads neither the tokens nor the widths. A GEMM sees a
    // micro-batch's tokens on its CP rank (sequence parallelism gathers them back) and the layers'
    // widths on its TP rank.
    const std::int64_t tokens = std::int64_t{job.micro_batch} * m.seq_len / p.cp;
    if (tokens % 8 != 0) {
      fail("batch.seq_len", fmt::format("fp8 GEMMs need the tokens of a micro-batch on a CP rank to divide by 8 (Transformer Engine); micro {} x seq_len {} / cp {} = {}",
                                        job.micro_batch, m.seq_len, p.cp, tokens));
    }
    std::vector<std::pair<const char*, std::int64_t>> widths{{"hidden", m.hidden}, {"attention width / tp", m.attention_width() / p.tp}};
    if (!m.moe || m.moe->dense_layers > 0) widths.emplace_back("ffn_hidden / tp", m.ffn_hidden / p.tp);
    if (m.mla) {
      // MLA's projections (training_ops.cpp): the latent down-projections' outputs, the up-projections'
      // inputs and outputs on a TP rank.
      const MlaSpec& a = *m.mla;
      const std::int64_t heads = m.heads / p.tp;
      if (a.q_lora_rank > 0) widths.emplace_back("q_lora_rank", a.q_lora_rank);
      widths.emplace_back("kv_lora_rank + qk_rope_head_dim", std::int64_t{a.kv_lora_rank} + a.qk_rope_head_dim);
      widths.emplace_back("kv_lora_rank", a.kv_lora_rank);
      widths.emplace_back("heads / tp x (qk_nope_head_dim + qk_rope_head_dim)", heads * (a.qk_nope_head_dim + a.qk_rope_head_dim));
      widths.emplace_back("heads / tp x (qk_nope_head_dim + v_head_dim)", heads * (a.qk_nope_head_dim + a.v_head_dim));
    }
    if (m.moe) {
      widths.emplace_back("expert_ffn_hidden / etp", m.moe->expert_ffn_hidden / p.etp);
      // Megatron-Core runs the shared experts as one MLP of their summed width, split over TP.
      if (m.moe->shared_experts > 0) {
        widths.emplace_back("shared experts' width / tp", std::int64_t{m.moe->shared_experts} * m.moe->shared_expert_ffn_hidden / p.tp);
      }
    }
    for (const auto& [what, width] : widths) {
      if (width % 16 != 0) {
        fail("precision", fmt::format("fp8 GEMMs need the layers' widths on a TP rank to divide by 16 (Transformer Engine); the model's {} is {}", what, width));
      }
    }
  }
}

int rank_of(const ParallelismPlan& plan, const RankCoord& c) {
  int rank = 0;
  int stride = 1;
  for (ParallelDim d : plan.order) {
    int size = 1, index = 0;
    switch (d) {
      case ParallelDim::tp: size = plan.tp; index = c.tp; break;
      case ParallelDim::cp: size = plan.cp; index = c.cp; break;
      case ParallelDim::ep: break;  // the attention's mapping has no expert dimension (expert_parallel_ranks)
      case ParallelDim::dp: size = plan.dp; index = c.dp; break;
      case ParallelDim::pp: size = plan.pp; index = c.pp; break;
    }
    rank += index * stride;
    stride *= size;
  }
  return rank;
}

std::int64_t simulated_compute_tasks(const TrainingJob& job) {
  const ParallelismPlan& p = job.plan;
  const std::int64_t chunks = checked_product({p.pp, p.vpp});
  const std::int64_t passes = checked_product({2, job.global_batch / std::max<std::int64_t>(1, checked_product({job.micro_batch, p.dp})), p.vpp});
  const std::int64_t units = job.model.layers / std::max<std::int64_t>(1, chunks) + 2;  // a chunk's layers, the embedding and the head
  const bool every_pass_split = splits_every_pass(p);
  const std::int64_t per_stage = every_pass_split ? checked_product({passes, units}) : passes + 2 * p.vpp * units;
  return checked_product({per_stage, p.pp});
}

int expert_data_parallel_size(const ParallelismPlan& plan) {
  // In 64 bits, checked: the plan search orders the ranks of shapes it has not checked yet
  // (effective_order), whose degrees may multiply past an int; their size is only compared with 1.
  const std::int64_t size = checked_product({plan.tp, plan.cp, plan.dp}) / checked_product({plan.etp, plan.ep});
  return static_cast<int>(std::min<std::int64_t>(size, std::numeric_limits<int>::max()));
}

bool reduces_gradients(const TrainingJob& job) {
  const ParallelismPlan& p = job.plan;
  return p.dp * p.cp > 1 || (job.model.moe && expert_data_parallel_size(p) > 1);
}

bool dp_overlap_applies(const TrainingJob& job) { return job.plan.zero_stage < 3 && reduces_gradients(job); }

namespace {

// One dimension of a decomposition of the ranks (the experts' or the attention's): its stride and size.
struct RankDim {
  int stride = 1, size = 1;
};

struct ExpertDims {
  RankDim etp, ep, edp;
};

// Where etp (in tp's place), ep and the expert-data-parallel dimension (in dp's) sit in the plan's
// order, with context parallelism 1.
ExpertDims expert_dims(const ParallelismPlan& plan) {
  RankDim etp, ep, edp;
  int stride = 1;
  for (ParallelDim d : plan.order) {
    int size = 1;
    if (d == ParallelDim::tp) {
      etp = {stride, plan.etp};
      size = plan.etp;
    } else if (d == ParallelDim::ep) {
      ep = {stride, plan.ep};
      size = plan.ep;
    } else if (d == ParallelDim::dp) {
      edp = {stride, expert_data_parallel_size(plan)};
      size = edp.size;
    } else if (d == ParallelDim::pp) {
      size = plan.pp;
    }
    stride *= size;
  }
  return {etp, ep, edp};
}

// The ranks that differ from `rank` in dimension `dim` only.
std::vector<int> along(int rank, RankDim dim) {
  const int base = rank - (rank / dim.stride % dim.size) * dim.stride;
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(dim.size));
  for (int i = 0; i < dim.size; ++i) out.push_back(base + i * dim.stride);
  return out;
}

// A dimension's size in the attention's mapping (rank_of's; ep has no ranks there).
int dense_size(const ParallelismPlan& plan, ParallelDim d) {
  return d == ParallelDim::tp ? plan.tp : d == ParallelDim::cp ? plan.cp : d == ParallelDim::dp ? plan.dp : d == ParallelDim::pp ? plan.pp : 1;
}

// Where `which` sits in the attention's mapping.
RankDim dense_dim(const ParallelismPlan& plan, ParallelDim which) {
  int stride = 1;
  for (ParallelDim d : plan.order) {
    if (d == which) return {stride, dense_size(plan, which)};
    stride *= dense_size(plan, d);
  }
  return {stride, 1};
}

}  // namespace

namespace {
// The product of the sizes of the dimensions before pp in the plan's order: the rank distance
// between neighbouring pipeline stages, with each dimension's size from size_of.
template <class Size>
int stage_stride(const ParallelismPlan& plan, Size&& size_of) {
  int stride = 1;
  for (ParallelDim d : plan.order) {
    if (d == ParallelDim::pp) break;
    stride *= size_of(d);
  }
  return stride;
}
}  // namespace

int dense_stage_stride(const ParallelismPlan& plan) {
  return stage_stride(plan, [&](ParallelDim d) { return dense_size(plan, d); });
}

int expert_stage_stride(const ParallelismPlan& plan) {
  return stage_stride(plan, [&](ParallelDim d) {
    return d == ParallelDim::tp ? plan.etp : d == ParallelDim::ep ? plan.ep : d == ParallelDim::dp ? expert_data_parallel_size(plan) : 1;
  });
}

bool experts_share_stages(const ParallelismPlan& plan) {
  if (plan.pp == 1 || expert_data_parallel_size(plan) == plan.dp) return dense_stage_stride(plan) == expert_stage_stride(plan);
  // pp last, but for dimensions of one rank in both mappings (any order string with the same
  // placement would do, and one of them ends in pp).
  const auto pp_at = std::find(plan.order.begin(), plan.order.end(), ParallelDim::pp);
  const bool pp_last = std::all_of(std::next(pp_at), plan.order.end(), [&](ParallelDim d) {
    switch (d) {
      case ParallelDim::tp: return plan.tp == 1 && plan.etp == 1;
      case ParallelDim::cp: return plan.cp == 1;
      case ParallelDim::ep: return plan.ep == 1;
      case ParallelDim::dp: return plan.dp == 1 && expert_data_parallel_size(plan) == 1;
      case ParallelDim::pp: return true;
    }
    return true;
  });
  return pp_last;
}

std::vector<int> tensor_parallel_ranks(const ParallelismPlan& plan, int rank) { return along(rank, dense_dim(plan, ParallelDim::tp)); }

std::vector<int> context_parallel_ranks(const ParallelismPlan& plan, int rank) { return along(rank, dense_dim(plan, ParallelDim::cp)); }

std::vector<int> expert_parallel_ranks(const ParallelismPlan& plan, int rank) { return along(rank, expert_dims(plan).ep); }

std::vector<int> expert_data_parallel_ranks(const ParallelismPlan& plan, int rank) { return along(rank, expert_dims(plan).edp); }

std::vector<int> expert_tensor_parallel_ranks(const ParallelismPlan& plan, int rank) { return along(rank, expert_dims(plan).etp); }

std::vector<std::vector<int>> stage_expert_data_parallel_groups(const ParallelismPlan& plan, int stage) {
  const RankDim edp = expert_dims(plan).edp;
  std::vector<std::vector<int>> out;
  std::set<int> seen;  // each group by its lowest rank (along() lists a group's ranks in order)
  for (int t = 0; t < plan.tp; ++t) {
    for (int d = 0; d < plan.dp; ++d) {
      for (int c = 0; c < plan.cp; ++c) {
        std::vector<int> group = along(rank_of(plan, RankCoord{t, c, d, stage}), edp);
        if (seen.insert(group.front()).second) out.push_back(std::move(group));
      }
    }
  }
  return out;
}

std::vector<int> chunk_layers(int layers, int pp, int vpp) {
  const int chunks = pp * vpp;
  const int base = (layers + chunks - 1) / chunks;
  std::vector<int> out(static_cast<std::size_t>(chunks), base);
  // Fewer layers go to the chunks that also hold the output head and the embedding (the last and
  // the first), then alternate inward, as Llama 3 405B's 126 layers sat on 16 stages.
  int deficit = base * chunks - layers;
  int lo = 0, hi = chunks - 1;
  bool from_end = true;
  while (deficit > 0) {
    const int c = from_end ? hi-- : lo++;
    --out[static_cast<std::size_t>(c)];
    --deficit;
    from_end = !from_end;
  }
  return out;
}

namespace {

constexpr double kOptimizerBytes = 12.0;  // Adam: fp32 master weights, momentum and variance (ZeRO, Rajbhandari et al. 2020, sec. 3.1)
// CUDA context and cuBLAS/cuDNN workspaces: 300 MB to 1 GB per GPU (NAIRR GPU estimation guide;
// Fujii's memory estimator); the upper end is taken.
constexpr double kContextBytes = 1.0 * (1ull << 30);
// NCCL buffers per communicator: about 0.5 GB (Fujii et al., arXiv 2411.06465, memory estimator).
constexpr double kNcclBytesPerCommunicator = 0.5e9;
// Allocator fragmentation: runs Fujii et al. estimated below 80% of HBM never ran out of memory;
// a 10% allowance over tensors is taken (an assumption between that and exact accounting).
constexpr double kFragmentation = 0.10;

}  // namespace

double layer_activation_bytes(const TransformerSpec& m, int layer, const Shard& s, Recompute recompute) {
  const double t = s.tp;
  const double tokens = double(s.micro_batch) * m.seq_len / s.cp;
  const bool sp = s.sequence_parallel && s.tp > 1;
  const double h = m.hidden;
  const double e = kActivationBytes;
  // A linear layer's input, kept for its weight-gradient GEMM: under fp8 Transformer Engine keeps
  // the fp8 cast it ran the forward GEMM on, 1 byte an element (_Linear.forward saves inputmat or
  // inputmat_t in fp8 where it saves the 16-bit input otherwise; LayerNormLinear and LayerNormMLP
  // their fp8 ln_out and activation output). The tensors other kernels need (norm inputs, the FFN's
  // first output for the activation's backward, fused attention's output) stay 16-bit.
  const bool fp8 = s.dtype == hardware::Dtype::fp8;
  const double linear_in = fp8 ? 1.0 : e;
  // Tensors that sequence parallelism splits (replicated over TP without it).
  const double split = sp ? 1.0 / t : 1.0;
  if (recompute == Recompute::full) return e * tokens * h * split;  // the layer's input only
  const double heads = m.heads / t;
  const double kv_heads = kv_heads_per_rank(m, s.tp);
  const double v_dim = m.v_head_dim();
  // Korthikanti et al. 2022 (arXiv 2205.05198) section 4.1, generalised to GQA, MLA, any FFN width
  // and gated activations; with a GPT layer it gives sbh(34/t + 5as/(ht)) as their Table 2.
  double bytes = 0;
  bytes += 2 * e * tokens * h * split;                       // both norms' inputs
  bytes += linear_in * tokens * h * split;                   // QKV input
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    // The down-projections' outputs (the latent norms' inputs, and the rope key) and the norms'
    // outputs, kept by the up-projections for their weight gradients: on this rank's sequence shard
    // under sequence parallelism (the down-projections run on it; Transformer Engine keeps the
    // gathered input's local part and gathers it again backward).
    bytes += tokens * split * (e * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) + linear_in * (a.q_lora_rank + a.kv_lora_rank));
    bytes += e * tokens * heads * (m.qk_head_dim() * 2 + v_dim);
  } else {
    bytes += e * tokens * (heads + 2 * kv_heads) * m.head_dim;  // Q, K, V
  }
  if (recompute == Recompute::none) {
    if (s.flash_attention) {
      // Fused attention keeps its output (counted as the projection's input) and the softmax
      // statistics; the s x s scores are never stored.
      bytes += 4.0 * tokens * heads;
    } else {
      // Softmax output, dropout mask and dropout output: 5as^2b/t (Korthikanti et al.); without
      // attention dropout the softmax output alone, 2as^2b/t.
      const double per_score = m.attention_dropout > 0 ? 5.0 : 2.0;
      bytes += per_score * s.micro_batch * heads * (double(m.seq_len) / s.cp) * m.seq_len;
    }
  }
  // The output projection's input: the attention's output, which fused attention also keeps 16-bit
  // for its own backward (under fp8 both are kept).
  bytes += (fp8 && s.flash_attention && recompute == Recompute::none ? e + linear_in : linear_in) * tokens * heads * v_dim;
  const double hidden_mask = m.hidden_dropout > 0 ? tokens * h * split : 0.0;  // a hidden dropout's one-byte mask
  bytes += hidden_mask;                                     // after the attention's output projection
  bytes += linear_in * tokens * h * split;                  // FFN input
  const double up = is_gated(m.activation) ? 2.0 : 1.0;
  // fc1's output (16-bit, for the activation's backward) and the activation's output (fc2's input).
  auto ffn = [&](double tok, double width) { return tok * width * (e * up + linear_in); };
  if (!m.is_moe_layer(layer)) {
    bytes += ffn(tokens, m.ffn_hidden / t);
  } else {
    const MoeSpec& x = *m.moe;
    const double routed = s.tp > 1 ? tokens / t : tokens;
    // Tokens the rank's experts see: its share of the routed ones, gathered over its
    // expert-tensor-parallel group, each through 1/etp of the FFN.
    const double expert_tokens = routed * x.top_k * x.capacity_factor * s.etp;
    bytes += (linear_in + e) * expert_tokens * h;  // permuted tokens in (the experts' fc1 input), expert outputs back
    bytes += ffn(expert_tokens, x.expert_ffn_hidden / s.etp);
    if (x.shared_experts > 0) bytes += ffn(tokens, double(x.shared_experts) * x.shared_expert_ffn_hidden / t);
  }
  bytes += hidden_mask;  // after the FFN's output projection
  return bytes;
}

std::vector<LayerRange> chunk_ranges(int layers, int pp, int vpp) {
  std::vector<LayerRange> out;
  int first = 0;
  for (int count : chunk_layers(layers, pp, vpp)) {
    out.push_back({first, count});
    first += count;
  }
  return out;
}

StageParameters layer_parameters(const TransformerSpec& m, const ParallelismPlan& p, int layer) {
  const double t = p.tp;
  StageParameters out;
  out.dense = attention_parameters_per_rank(m, p.tp) + 2.0 * m.hidden;  // + the two norms
  if (!m.is_moe_layer(layer)) {
    out.dense += dense_ffn_parameters(m) / t;
    return out;
  }
  const MoeSpec& x = *m.moe;
  out.dense += double(m.hidden) * x.experts;  // router
  out.dense += double(x.shared_experts) * (is_gated(m.activation) ? 3.0 : 2.0) * m.hidden * x.shared_expert_ffn_hidden / t;
  out.expert = double(x.experts) / p.ep * expert_parameters(m) / p.etp;
  return out;
}

StageParameters embedding_parameters(const TransformerSpec& m, const ParallelismPlan& p) {
  return {double(m.vocab) * m.hidden / p.tp, 0.0};
}

StageParameters head_parameters(const TransformerSpec& m, const ParallelismPlan& p) {
  StageParameters out{double(m.hidden), 0.0};  // final norm
  if (!m.tied_embeddings || p.pp > 1) out += embedding_parameters(m, p);
  return out;
}

StageParameters stage_parameters(const TransformerSpec& m, const ParallelismPlan& p, int stage) {
  const std::vector<LayerRange> ranges = chunk_ranges(m.layers, p.pp, p.vpp);
  StageParameters out;
  for (int v = 0; v < p.vpp; ++v) {
    const LayerRange& r = ranges[static_cast<std::size_t>(v * p.pp + stage)];
    for (int l = r.first; l < r.first + r.count; ++l) out += layer_parameters(m, p, l);
  }
  if (stage == 0) out += embedding_parameters(m, p);
  if (stage == p.pp - 1) out += head_parameters(m, p);
  return out;
}

Shard shard_of(const TrainingJob& job) {
  const ParallelismPlan& p = job.plan;
  return {job.micro_batch, p.tp, p.cp, p.ep, p.sequence_parallel, job.precision, p.flash_attention, p.etp};
}

double fp8_weight_cast_share(const TrainingJob& job) {
  const ParallelismPlan& p = job.plan;
  if (p.zero_stage >= 3 && reduces_gradients(job)) return 1.0;
  return 1.0 / std::max(1, job.micro_batches());
}

MemoryReport estimate_memory(const TrainingJob& job, const hardware::HardwareProfile& hw) {
  const ParallelismPlan& p = job.plan;
  const TransformerSpec& m = job.model;
  MemoryReport report;
  report.capacity = hw.memory_capacity;
  const Shard shard = shard_of(job);
  const std::vector<LayerRange> ranges = chunk_ranges(m.layers, p.pp, p.vpp);
  const double dense_shards = double(p.dp) * p.cp;
  const double expert_shards = expert_data_parallel_size(p);
  // Transformer Engine keeps an fp8 copy of the transformer layers' weights and of their transposes
  // (the backward's data-gradient GEMM takes the transpose; _Linear.forward's weight_fp8 and
  // weight_t_fp8, cached from the first micro-batch): 2 bytes per parameter (not of the embedding
  // and the output layer, which run in 16 bits).
  const double fp8_copy_bytes = job.precision == hardware::Dtype::fp8 ? 2.0 : 0.0;
  const double grad_bytes = job.gradient_bytes();
  int communicators = 0;
  for (int size : {p.tp, p.pp, p.dp * p.cp, p.cp, p.ep, p.etp}) communicators += size > 1 ? 1 : 0;
  // The expert-data-parallel group reducing the experts' gradients is a process group of its own
  // (Megatron-Core builds it for every MoE model), with its own communicator.
  if (m.moe && expert_shards > 1) ++communicators;
  const int micro = job.micro_batches();
  // Every dense layer stores alike, and every MoE layer.
  const double dense_activations = layer_activation_bytes(m, 0, shard, job.recompute);
  const double moe_activations = m.moe ? layer_activation_bytes(m, m.moe->dense_layers, shard, job.recompute) : dense_activations;
  for (int s = 0; s < p.pp; ++s) {
    StageMemory sm;
    sm.stage = s;
    const StageParameters params = stage_parameters(m, p, s);
    sm.parameters = params.dense + params.expert;
    const double sharded = params.dense / dense_shards + params.expert / expert_shards;
    const double whole = sm.parameters;
    StageParameters in_layers;
    for (int v = 0; v < p.vpp; ++v) {
      const LayerRange& r = ranges[static_cast<std::size_t>(v * p.pp + s)];
      for (int l = r.first; l < r.first + r.count; ++l) in_layers += layer_parameters(m, p, l);
    }
    const double layers_whole = in_layers.dense + in_layers.expert;
    // Under ZeRO-3 over more than one rank every pass gathers and casts afresh (fp8_weight_cast_share):
    // the fp8 copies are of the two gathered layers only (below), none kept for the shard.
    const bool recast = p.zero_stage >= 3 && reduces_gradients(job);
    sm.weights = Bytes(2.0 * (p.zero_stage >= 3 ? sharded : whole) + (recast ? 0.0 : fp8_copy_bytes * layers_whole));
    if (p.zero_stage >= 3) {
      // FSDP gathers one unit at a time and prefetches the next: at most two neighbouring units of
      // the stage's program order whole, in 16-bit, of the parts it shards (a group of one shards
      // nothing, gathers nothing). The units are the step's (training_step.cpp): a layer each, the
      // embedding with the first stage's first layer and the output layer with the last stage's
      // last, whose vocabulary slice can outweigh a layer. (Twice the largest unit had counted the
      // embedding's unit twice: about 1 GB too much for Llama 3 8B.) The fp8 copies are of the two
      // gathered layers' weights.
      const double dense_gathered = dense_shards > 1 ? 1.0 : 0.0, expert_gathered = expert_shards > 1 ? 1.0 : 0.0;
      std::vector<double> units, layers;  // in program order: gathered parameters, and the layers' alone
      for (int v = 0; v < p.vpp; ++v) {
        const LayerRange& r = ranges[static_cast<std::size_t>(v * p.pp + s)];
        for (int l = r.first; l < r.first + r.count; ++l) {
          StageParameters lp = layer_parameters(m, p, l);
          layers.push_back(lp.dense + lp.expert);
          if (s == 0 && v == 0 && l == r.first) lp += embedding_parameters(m, p);
          if (s == p.pp - 1 && v == p.vpp - 1 && l == r.first + r.count - 1) lp += head_parameters(m, p);
          units.push_back(dense_gathered * lp.dense + expert_gathered * lp.expert);
        }
      }
      const auto two_neighbours = [](const std::vector<double>& v) {
        double most = v.empty() ? 0.0 : v.front();
        for (std::size_t i = 1; i < v.size(); ++i) most = std::max(most, v[i - 1] + v[i]);
        return most;
      };
      sm.weights += Bytes(2.0 * two_neighbours(units) + (recast ? fp8_copy_bytes * two_neighbours(layers) : 0.0));
    }
    sm.gradients = Bytes(grad_bytes * (p.shards_gradients() ? sharded : whole));
    sm.optimizer = Bytes(kOptimizerBytes * (p.zero_stage >= 1 ? sharded : whole));
    // Activations: the most the schedule ever holds, following its order of passes.
    std::vector<double> chunk_bytes(static_cast<std::size_t>(p.vpp), 0.0);
    for (int v = 0; v < p.vpp; ++v) {
      const LayerRange& r = ranges[static_cast<std::size_t>(v * p.pp + s)];
      for (int l = r.first; l < r.first + r.count; ++l) chunk_bytes[static_cast<std::size_t>(v)] += m.is_moe_layer(l) ? moe_activations : dense_activations;
    }
    if (s == p.pp - 1) {
      // Logits (16-bit) and the fp32 softmax the loss keeps for its backward, per micro-batch.
      const double tokens = double(job.micro_batch) * m.seq_len / p.cp;
      chunk_bytes.back() += tokens * (double(m.vocab) / p.tp) * (2.0 + 4.0);
    }
    double peak = peak_live_bytes(p, micro, s, chunk_bytes);
    if (job.recompute == Recompute::full) {
      // The backward pass re-materialises one layer's activations at a time, on the input already
      // kept (its first norm saves that same tensor, counted once: it had been counted twice, and a
      // one-layer stage under full recompute needed more than without recompute).
      double layer_full = layer_activation_bytes(m, 0, shard, Recompute::none);
      if (m.moe) layer_full = std::max(layer_full, layer_activation_bytes(m, m.moe->dense_layers, shard, Recompute::none));
      peak += layer_full - layer_activation_bytes(m, 0, shard, Recompute::full);
    }
    sm.activations = Bytes(peak);
    sm.comm_buffers = Bytes(kNcclBytesPerCommunicator * communicators);
    const double tensors = sm.weights.value() + sm.gradients.value() + sm.optimizer.value() + sm.activations.value();
    sm.allowance = Bytes(kContextBytes + kFragmentation * tensors);
    report.stages.push_back(sm);
  }
  for (std::size_t i = 0; i < report.stages.size(); ++i) {
    if (report.stages[i].total() > report.worst().total()) report.worst_stage = static_cast<int>(i);
  }
  return report;
}

namespace {
// A stage's memory less the fragmentation share of its allowance (kFragmentation, an assumption).
double firm_bytes(const StageMemory& m) { return m.total().value() - std::max(0.0, m.allowance.value() - kContextBytes); }
}  // namespace

bool MemoryReport::marginal() const {
  if (fits()) return false;
  return std::all_of(stages.begin(), stages.end(), [&](const StageMemory& m) { return firm_bytes(m) <= capacity.value(); });
}

std::string MemoryReport::verdict() const {
  // The fullest stage, unless it is over only through the fragmentation allowance while another is
  // over without it: then that one, which is what stops the plan.
  const StageMemory* fullest = &worst();
  if (!fits() && !marginal() && firm_bytes(*fullest) <= capacity.value()) {
    for (const StageMemory& m : stages) {
      if (firm_bytes(m) > firm_bytes(*fullest)) fullest = &m;
    }
  }
  const StageMemory& w = *fullest;
  if (fits()) return fmt::format("fits: {:.1f} of {:.1f} GiB on the fullest GPU (stage {})", w.total().value() / (1ull << 30),
                                 capacity.value() / (1ull << 30), w.stage);
  struct Part {
    const char* name;
    double bytes;
  };
  const Part parts[] = {{"weights", w.weights.value()},         {"gradients", w.gradients.value()},
                        {"optimizer states", w.optimizer.value()}, {"activations", w.activations.value()},
                        {"communication buffers", w.comm_buffers.value()}, {"allowance", w.allowance.value()}};
  const Part* largest = &parts[0];
  for (const Part& p : parts) {
    if (p.bytes > largest->bytes) largest = &p;
  }
  constexpr double kGiB = double(1ull << 30);
  const double over = w.total().value() - capacity.value();
  // Under 0.05 GiB over, one decimal would read "74.5 of 74.5 GiB, 0.0 GiB over": two decimals and MiB.
  const bool close = over < 0.05 * kGiB;
  std::string text = fmt::format("OOM: stage {} needs {:.{}f} GiB of {:.{}f} GiB, {}; the largest part is {} at {:.1f} GiB", w.stage,
                                 w.total().value() / kGiB, close ? 2 : 1, capacity.value() / kGiB, close ? 2 : 1,
                                 close ? fmt::format("{:.0f} MiB over", std::ceil(over / double(1ull << 20))) : fmt::format("{:.1f} GiB over", over / kGiB),
                                 largest->name, largest->bytes / kGiB);
  // The fragmentation share of the allowance is an assumption (kFragmentation), not a measurement:
  // where only it tips the stage over, say so and how little fragmentation the plan would tolerate.
  const double fragmentation = std::max(0.0, w.allowance.value() - kContextBytes);
  const double firm = firm_bytes(w);
  if (marginal() && fragmentation > 0) {
    const double tensors = firm - kContextBytes - w.comm_buffers.value();
    text += fmt::format("; without the {:.0f}% fragmentation allowance ({:.1f} GiB) it takes {:.1f} GiB and fits, so it runs only if the allocator "
                        "wastes under {:.1f} GiB ({:.1f}% of the tensors): marginal",
                        100 * kFragmentation, fragmentation / kGiB, firm / kGiB, (capacity.value() - firm) / kGiB,
                        tensors > 0 ? 100 * (capacity.value() - firm) / tensors : 0.0);
  }
  return text;
}

}  // namespace cs::models
