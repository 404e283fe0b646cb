// Training: a transformer, a parallelism plan and a topology become one simulated training step.
//
// The plan is turned into per-layer operations (GEMMs, attention, memory-bound kernels and the
// tensor/context/expert-parallel collectives between them), timed from the hardware profile, and
// laid out as a per-rank task graph in the pipeline schedule's order. Data-parallel gradient
// reductions and parameter gathers, and pipeline sends, are flows on the topology that contend
// with each other. docs/training.md documents the model, its formulas and its limitations.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "clustersim/common/units.hpp"
#include "clustersim/hardware/dtype.hpp"
#include "clustersim/hardware/gemm_model.hpp"
#include "clustersim/hardware/hardware_profile.hpp"
#include "clustersim/models/collective.hpp"
#include "clustersim/models/transformer.hpp"
#include "clustersim/sim/simulator.hpp"
#include "clustersim/topology/graph.hpp"

namespace cs::models {

enum class Recompute { none, selective, full };
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved };
enum class ParallelDim { tp, cp, ep, dp, pp };
std::string_view to_string(Recompute r);
std::string_view to_string(PipelineSchedule s);
std::string_view to_string(ParallelDim d);

// Whether `order` names each of tp, cp, ep, dp and pp exactly once.
bool is_rank_order(std::vector<ParallelDim> order);

struct ParallelismPlan {
  int tp = 1;
  int pp = 1;
  int dp = 1;  // data-parallel replicas of the dense weights
  int cp = 1;
  int ep = 1;  // experts split over ep ranks (MoE parallel folding: expert_parallel_ranks)
  // Expert tensor parallelism: each expert's FFN split over etp ranks (Megatron's
  // --expert-tensor-parallel-size; Megatron-Core's default when unset is tp, recipes for large MoE
  // models set 1). 1: whole experts.
  int etp = 1;
  int vpp = 1;  // model chunks per pipeline rank (interleaved 1F1B when > 1)
  // Interleaved 1F1B: micro-batches that run through one model chunk before the stage turns to the
  // next (Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage); 0: pp, its default.
  // Megatron-Core runs it from pp to the step's micro-batches, with a last, smaller group of 0 or
  // at least pp (schedules.py, forward_backward_pipelining_with_interleaving).
  int microbatch_group = 0;
  [[nodiscard]] int vp_group() const { return microbatch_group > 0 ? microbatch_group : pp; }
  bool sequence_parallel = false;
  bool tp_overlap = false;  // tensor-parallel collectives pipelined with their GEMMs
  bool flash_attention = true;  // fused attention; false: Megatron's unfused path (scores, softmax, dropout, context)
  int zero_stage = 1;       // 0: all-reduce; 1: distributed optimizer; 2: + sharded gradients; 3: FSDP
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  std::vector<ParallelDim> order{ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::dp, ParallelDim::pp};
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  // Pipeline sends run beside the compute. Off: a stage waits for its own sends to finish before its
  // next pass (Megatron's blocking batch_isend_irecv + wait, every schedule before 2023). Unset:
  // Megatron-Core's behaviour, overlapped for the interleaved schedule only (--overlap-p2p-communication).
  std::optional<bool> overlap_p2p;
  [[nodiscard]] bool p2p_overlapped() const { return overlap_p2p.value_or(schedule == PipelineSchedule::interleaved); }
  double bucket_parameters = 0;  // gradient bucket; 0: Megatron's max(40M, 1M x dp) parameters
  // Weight-gradient GEMMs accumulate straight into the main gradient buffer (Megatron's
  // --gradient-accumulation-fusion, Transformer Engine). Off: every micro-batch's backward adds each
  // 16-bit weight gradient into the main gradients in a separate pass over them.
  bool grad_accumulation_fusion = true;
  // ZeRO-1 that all-reduces the whole gradient before each rank updates its shard of the optimizer
  // (DeepSpeed's BF16_Optimizer, its only path for bf16 with pipeline parallelism), instead of the
  // distributed optimizer's reduce-scatter. Twice the gradient traffic; the weights are all-gathered
  // after the update either way.
  bool all_reduce_gradients = false;
  // all_reduce_gradients where it applies (ZeRO-1; stage 0 always all-reduces, 2 and 3 shard the gradients).
  [[nodiscard]] bool whole_gradient_all_reduce() const { return zero_stage == 1 && all_reduce_gradients; }
  // Whether each rank keeps only its shard of the gradients (ZeRO-2 and 3): they are reduce-scattered
  // every micro-batch and no rank accumulates whole ones.
  [[nodiscard]] bool shards_gradients() const { return zero_stage >= 2; }
  // Whether the data-parallel gradient reduction is a reduce-scatter (else an all-reduce).
  [[nodiscard]] bool reduce_scatters_gradients() const { return zero_stage >= 1 && !whole_gradient_all_reduce(); }
  [[nodiscard]] int gpus() const { return tp * pp * dp * cp; }
};

// Whether Megatron-Core runs `micro` micro-batches a step in interleaved groups of `group` over `pp`
// stages: the group from pp to micro, and a last group of 0 or at least pp.
inline bool microbatch_groups_run(int micro, int pp, int group) {
  return group >= pp && group <= micro && (micro % group == 0 || micro % group >= pp);
}

struct TrainingJob {
  TransformerSpec model;
  ParallelismPlan plan;
  int micro_batch = 1;
  int global_batch = 0;  // sequences per step
  Recompute recompute = Recompute::selective;
  hardware::Dtype precision = hardware::Dtype::bf16;
  // Bytes per gradient element; 0: 4 with bf16, else 2. Megatron forces fp32 main gradients for bf16
  // (accumulate_allreduce_grads_in_fp32). fp8 takes NeMo's fp8 recipes, which synchronise gradients
  // in bf16 (grad_sync_dtype: bf16 in NeMo-Framework-Launcher's fp8 examples); Megatron-LM's --fp8
  // runs on --bf16 and keeps fp32 (gradient_dtype: fp32 in a scenario).
  double grad_bytes = 0;
  double token_budget = 0;  // tokens to train, for time-to-train (0: not asked)

  [[nodiscard]] int micro_batches() const { return global_batch / (micro_batch * plan.dp); }
  [[nodiscard]] double gradient_bytes() const { return grad_bytes > 0 ? grad_bytes : precision == hardware::Dtype::bf16 ? 4.0 : 2.0; }
};

// The most micro-batches a step may have per data-parallel replica: the step graph holds tasks per
// micro-batch, and real runs have at most a few thousand.
inline constexpr int kMaxMicroBatches = 65536;
// The most compute tasks one step's graph may hold (folded: one rank per pipeline stage): each takes
// about 850 bytes with its dependencies and its share of the engine's events (2^21: about 1.8 GB and
// 5 s on the 2-core development machine); a plan past it is refused, as past it memory and time grew
// without bound (a probe's 16.8 million passes took 16 GB). The largest shipped or published plan
// needs under 0.5% of it.
inline constexpr std::int64_t kMaxComputeTasks = std::int64_t{1} << 21;
// An upper bound on the compute tasks a step of the job simulates: two passes per micro-batch and
// model chunk on each stage, each split into its layers where gradients or weights move layer by
// layer (FSDP; ZeRO-2 overlapping every micro-batch's reduction), and always for the passes that
// start and end the step.
std::int64_t simulated_compute_tasks(const TrainingJob& job);

// The product of plan degrees, or the largest int64 when it overflows: each degree may be any
// positive int, and products of them (tp x pp x dp x cp) pass both int and int64. Only compared,
// never printed saturated.
std::int64_t checked_product(std::initializer_list<std::int64_t> factors);

// A plan that cannot run. `field` is the scenario setting to blame, dotted from the scenario's top
// ("parallelism.tp", "batch.global", "precision"), for a reader to point at its line.
struct PlanError : std::invalid_argument {
  PlanError(std::string field_, const std::string& what) : std::invalid_argument(what), field(std::move(field_)) {}
  std::string field;
};

// Checks a job against itself and the cluster's GPU count; throws PlanError naming the setting and
// the numbers that clash. Products of the plan's degrees are checked before any is taken in int
// (ParallelismPlan::gpus, micro_batches). With the GPU's profile, also that the GEMM model can time
// every matrix product of the step (gemm_range_problem).
void check_job(const TrainingJob& job, int cluster_gpus, const hardware::HardwareProfile* gpu = nullptr);

// ------------------------------------------------------------------ operations of one layer

enum class OpKind { gemm, attention, memory, comm };
enum class CommGroup { tp, cp, ep, etp };

struct Op {
  std::string name;
  OpKind kind = OpKind::memory;
  hardware::GemmShape shape;   // gemm: one of `count` identical GEMMs
  double count = 1;
  double flops = 0;            // executed in the forward pass (attention: causal)
  double bytes = 0;            // memory: bytes read and written; comm: the collective's nccl-tests size
                               // (send_recv over a group: what each member sends the next)
  int ring = 0;                // comm: a ring exchange's members (ring attention's cp), 0 otherwise
  double backward_bytes = 0;   // memory: bytes of its backward pass when known (0: 1.5 x bytes)
  double row_flops = 0;        // attention: forward FLOPs of one 128-query block over the whole sequence
  CollectiveOp comm_op = CollectiveOp::all_reduce;
  CommGroup group = CommGroup::tp;
  // comm: the passes it runs in. Most run forward and, as their inverse, backward; Megatron's
  // vocab-parallel embedding all-reduces forward only (reduce_from_tensor_model_parallel_region,
  // identity backward), its output layer's input backward only (copy_to_tensor_model_parallel_region),
  // and its cross-entropy's reductions forward only.
  enum class Passes { both, forward, backward };
  Passes passes = Passes::both;
  bool attention_core = false;  // recomputed by selective recompute
  // Inside a transformer layer, so full recompute re-runs it. Megatron checkpoints the transformer
  // layers only (--recompute-granularity full): the embedding, the output head and the loss run once.
  bool in_layer = true;
  bool weight_grad = true;      // gemm: its backward has a weight gradient
  // gemm: runs in fp8 when the job trains in fp8. Transformer Engine's fp8 covers the linear layers
  // inside transformer layers; Megatron's output layer is a plain ColumnParallelLinear, in 16 bits.
  bool fp8 = true;
  // comm (TP): under tp_overlap Transformer Engine's userbuffers can hide it. They serve the qkv,
  // proj, fc1 and fc2 GEMMs; a TP collective of another layer (MLA's latent gathers) stays exposed.
  bool userbuffers = true;
  // comm (a TP all-gather entering a TP region): it gathers a linear layer's input, which the
  // backward gathers again for the weight gradient. MLA's rope key is gathered for the attention,
  // not for a GEMM: its backward is the reduce-scatter alone.
  bool linear_input = true;
};

// The shard of work one rank does for one micro-batch.
struct Shard {
  int micro_batch = 1;
  int tp = 1;
  int cp = 1;
  int ep = 1;
  bool sequence_parallel = false;
  hardware::Dtype dtype = hardware::Dtype::bf16;
  bool flash_attention = true;
  int etp = 1;  // expert tensor parallelism
};

// Forward operations of transformer layer `layer` (0-based), in execution order.
std::vector<Op> layer_forward_ops(const TransformerSpec& m, int layer, const Shard& s);
// Input embedding (first pipeline stage) and final norm, output projection and loss (last stage).
std::vector<Op> embedding_forward_ops(const TransformerSpec& m, const Shard& s);
std::vector<Op> head_forward_ops(const TransformerSpec& m, const Shard& s);
// The first GEMM of a step on this shard, forward or either backward product, that the GEMM model
// cannot time ("the fc1 GEMM: GEMM of ..."), or "" when every one can.
// Fused attention is timed from the profile's measured efficiency where it has one, not as GEMMs.
std::string gemm_range_problem(const TransformerSpec& m, const Shard& s, const hardware::HardwareProfile& gpu);

// Time of one collective of a group; supplied by the step model from the topology.
using CommTime = std::function<Seconds(CommGroup group, CollectiveOp op, double bytes)>;

// Time split of a pass over some operations.
struct PassTime {
  double compute = 0;   // seconds of GEMM, attention and memory-bound kernels
  double tp = 0;        // exposed tensor-parallel communication
  double cp = 0;        // exposed context-parallel communication
  double ep = 0;        // expert-parallel all-to-all
  double flops = 0;     // executed FLOPs
  [[nodiscard]] double total() const { return compute + tp + cp + ep; }
  PassTime& operator+=(const PassTime& o);
};

// One operation's times in a micro-batch (exposed time for collectives).
struct OpTiming {
  std::string name;
  OpKind kind = OpKind::memory;
  double forward = 0;
  double backward = 0;   // without recompute
  double recompute = 0;
  double flops = 0;      // forward FLOPs (gemm, attention)
  double bytes = 0;      // forward bytes (memory kernels, collectives)
};

struct OpsTime {
  PassTime forward;
  PassTime backward;   // without recompute
  PassTime recompute;  // re-run forward work in the backward pass
  std::vector<OpTiming> ops;  // per operation, in forward order
};

// `dtype` is the training precision (GEMMs run in it; fp8 adds Transformer Engine's casts).
// `weight_casts` is the share of each fp8 GEMM's weight cast one micro-batch pays: Transformer
// Engine casts the weights on a step's first micro-batch and reuses that copy on the others
// (`is_first_microbatch`, which Megatron-Core's schedules set), so a step pays one cast, spread
// here over its micro-batches (fp8_weight_cast_share).
OpsTime time_ops(const std::vector<Op>& ops, const hardware::HardwareProfile& hw, hardware::Dtype dtype, const CommTime& comm,
                 Recompute recompute, bool tp_overlap, int tp, double weight_casts = 1.0);

// ------------------------------------------------------------------ memory

struct StageMemory {
  int stage = 0;
  double parameters = 0;  // on one GPU of this stage
  Bytes weights;
  Bytes gradients;
  Bytes optimizer;
  Bytes activations;
  Bytes comm_buffers;
  Bytes allowance;  // CUDA context, workspaces, allocator fragmentation
  [[nodiscard]] Bytes total() const { return weights + gradients + optimizer + activations + comm_buffers + allowance; }
};

struct MemoryReport {
  std::vector<StageMemory> stages;
  int worst_stage = 0;
  Bytes capacity;
  [[nodiscard]] const StageMemory& worst() const { return stages.at(static_cast<std::size_t>(worst_stage)); }
  [[nodiscard]] bool fits() const { return worst().total() <= capacity; }
  // Over capacity only through the fragmentation share of the allowance, an assumption: every stage's
  // tensors, context and buffers fit, so the plan runs if the allocator wastes little (false when
  // the plan fits, or when some stage is over without it).
  [[nodiscard]] bool marginal() const;
  // "fits" or what overflows and by how much.
  [[nodiscard]] std::string verdict() const;
};

// Layers of each model chunk: chunk c of stage s is index c * pp + s, as Megatron numbers them.
std::vector<int> chunk_layers(int layers, int pp, int vpp);

MemoryReport estimate_memory(const TrainingJob& job, const hardware::HardwareProfile& hw);

// ------------------------------------------------------------------ the step

struct StepBreakdown {
  double compute = 0;
  double tp_comm = 0;
  double cp_comm = 0;
  double ep_comm = 0;
  double dp_comm = 0;   // exposed data-parallel reduction and gathering
  double pp_comm = 0;   // waiting for pipeline sends beyond the schedule's bubble
  double bubble = 0;
  double optimizer = 0;
};
// The parts by the names summary.json uses (compute, tp_comm, cp_comm, ep_comm, dp_comm, pp_comm,
// pipeline_bubble, optimizer), in that order.
std::vector<std::pair<std::string, double>> breakdown_parts(const StepBreakdown& b);

struct TrainingOptions {
  bool fold = true;      // simulate one representative rank per pipeline stage (see docs/training.md)
  bool trace = false;    // keep a Perfetto trace of the step
};

struct TrainingResult {
  Seconds step_time;
  int micro_batches = 0;
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double model_flops_per_step = 0;
  double hardware_flops_per_step = 0;
  double mfu = 0;
  double hfu = 0;
  double tflops_per_gpu = 0;  // model FLOPs
  StepBreakdown breakdown;    // mean over pipeline stages; sums to the step time
  MemoryReport memory;
  Seconds time_to_train;      // token_budget / tokens_per_s
  double gpu_hours = 0;
  int gpus = 0;
  sim::RunStats stats;
  std::size_t tasks = 0;
  bool folded = true;         // TrainingOptions::fold: representatives and shadows, or every rank
  std::string trace;          // Chrome/Perfetto JSON when asked
  std::vector<std::string> notes;
  // Per-operation times of one micro-batch on one rank: a dense layer, an MoE layer (MoE models)
  // and the output head (final norm, logits, loss).
  std::vector<OpTiming> layer_ops, moe_layer_ops, embedding_ops, head_ops;
};

// Simulates one step on the first plan.gpus() GPUs of the topology, in topology order.
TrainingResult simulate_training(const TrainingJob& job, const topology::Topology& topo, TrainingOptions options = {});

// GPU (index into topo.gpus()) of each rank coordinate under the plan's order: the attention's
// mapping, in which ep has no place (Megatron-Core's decoder RankGenerator has ep = 1).
struct RankCoord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};
int rank_of(const ParallelismPlan& plan, const RankCoord& c);
// The attention's tensor- and context-parallel groups of a rank (all its ranks, in order).
std::vector<int> tensor_parallel_ranks(const ParallelismPlan& plan, int rank);
std::vector<int> context_parallel_ranks(const ParallelismPlan& plan, int rank);

// The expert layers' mapping of the same ranks: Megatron-Core's MoE parallel folding (Liu et al.
// 2025, arXiv 2504.14960; parallel_state.py builds a second RankGenerator for the experts with the
// plan's order, tp = expert tensor parallelism and context parallelism 1). Each GPU holds experts /
// ep experts, each split over etp ranks; in the order, etp takes tp's place, ep its own, and the
// expert-data-parallel rest, tp x cp x dp / (etp x ep) ranks, takes dp's. With Megatron's
// tp-cp-ep-dp-pp and etp 1 an EP group is ep consecutive ranks (one node's GPUs for ep 8) whatever
// tp and cp are. Ranks are GPU indices, as from rank_of.
int expert_data_parallel_size(const ParallelismPlan& plan);
// Whether the job reduces gradients across ranks: the dense ones over dp x cp, an MoE model's expert
// ones over their expert-data-parallel group, which TP ranks alone can make (tp 2, dp 1, etp 1:
// each expert on both TP ranks, which route different tokens). A dense model has no expert group,
// whatever tp makes expert_data_parallel_size.
bool reduces_gradients(const TrainingJob& job);
// Whether every micro-batch's backward adds the weight gradients in a pass of its own (accumulation
// not fused into the GEMMs, and not sharded: ZeRO-2 and FSDP accumulate only their shard, unless
// nothing is sharded): when the step charges that pass.
bool unfused_accumulation(const TrainingJob& job);
// Whether overlap_grad_reduce and overlap_param_gather mean anything: not under ZeRO-3 (FSDP gathers
// and reduces around every pass) nor where no gradients are reduced across ranks (an MoE model's
// expert group counts: it had been left out, and a plan search took such a plan's settings as not
// applying).
bool dp_overlap_applies(const TrainingJob& job);
// The rank distance between neighbouring pipeline stages in the attention's mapping (rank_of) and in
// the experts'. Where they differ, an expert group would span stages.
int dense_stage_stride(const ParallelismPlan& plan);
int expert_stage_stride(const ParallelismPlan& plan);
// Whether Megatron-Core would place the plan's experts: with pp > 1, pp last in the order (but for
// dimensions of one rank) or the experts' data parallelism equal to the attention's, and the two
// mappings' stages the same. check_job refuses MoE plans where it does not hold.
bool experts_share_stages(const ParallelismPlan& plan);
// The ranks of the expert-parallel group that holds `rank`, in ep order.
std::vector<int> expert_parallel_ranks(const ParallelismPlan& plan, int rank);
// The ranks that split the same experts with `rank` (its expert-tensor-parallel group), in order.
std::vector<int> expert_tensor_parallel_ranks(const ParallelismPlan& plan, int rank);
// The ranks holding the same experts as `rank` (its expert-data-parallel group), in order.
std::vector<int> expert_data_parallel_ranks(const ParallelismPlan& plan, int rank);
// Every expert-data-parallel group of pipeline stage `stage`, each once, in the order its first rank
// is met going through the stage's ranks by TP rank, then dp, then cp.
std::vector<std::vector<int>> stage_expert_data_parallel_groups(const ParallelismPlan& plan, int stage);

}  // namespace cs::models
