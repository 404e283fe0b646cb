// Internals shared by the training model's source files.
#pragma once

#include <map>
#include <tuple>
#include <vector>

#include "clustersim/models/collective_model.hpp"
#include "clustersim/models/training.hpp"

namespace cs::models {

// Bytes of an activation element: activations are kept in 16-bit floats, fp8 GEMMs included.
inline constexpr double kActivationBytes = 2.0;

// One forward or backward pass of a model chunk over a micro-batch, in a stage's execution order.
struct Pass {
  bool forward = true;
  int micro = 0;
  int chunk = 0;
};

// The order a pipeline stage runs its passes in: GPipe (every forward, then every backward), 1F1B
// (PipeDream-Flush: pp - stage - 1 warm-up forwards, then one forward and one backward in turn),
// or Megatron's interleaved 1F1B over vpp chunks (Narayanan et al. 2021, section 2.2.2) in
// Megatron-Core's groups of plan.vp_group() micro-batches a chunk.
std::vector<Pass> schedule_order(const ParallelismPlan& plan, int micro_batches, int stage);
// The most activation bytes a stage holds at once under that order, when each micro-batch leaves
// chunk_bytes[c] stored in chunk c from its forward until its backward (in O(group x vpp) when the
// groups are whole, not in the order's length).
double peak_live_bytes(const ParallelismPlan& plan, int micro_batches, int stage, const std::vector<double>& chunk_bytes);

// Layers [first, first + count) of each model chunk, indexed chunk * pp + stage (chunk_layers' split).
struct LayerRange {
  int first = 0;
  int count = 0;
};
std::vector<LayerRange> chunk_ranges(int layers, int pp, int vpp);

// Parameters on one GPU.
struct StageParameters {
  double dense = 0;   // replicated over dp x cp
  double expert = 0;  // replicated over dp x cp / ep
  StageParameters& operator+=(const StageParameters& o) {
    dense += o.dense;
    expert += o.expert;
    return *this;
  }
};
// One GPU's share of layer `layer` (TP splits dense weights, EP the experts), of the input
// embedding (first stage), and of the output head (last stage: the output projection, a synced copy
// of a tied embedding when another stage holds the original, and the final norm).
StageParameters layer_parameters(const TransformerSpec& m, const ParallelismPlan& p, int layer);
StageParameters embedding_parameters(const TransformerSpec& m, const ParallelismPlan& p);
StageParameters head_parameters(const TransformerSpec& m, const ParallelismPlan& p);
StageParameters stage_parameters(const TransformerSpec& m, const ParallelismPlan& p, int stage);

// Seconds of one stage's optimizer step (ZeRO >= 1: on its shard of the stage's parameters), with
// the zeroing of the stage's main-gradient buffer for the next step (its shard under FSDP).
double optimizer_step_seconds(const TrainingJob& job, const hardware::HardwareProfile& hw, const StageParameters& stage);
// Seconds one micro-batch's backward spends adding the weight gradients of `parameters` (on one GPU)
// into the main gradients when that is not fused into the weight-gradient GEMMs: read the 16-bit
// gradient, read and write the main gradient (gradient_bytes each), bound by HBM bandwidth. 0 when
// fused, and under FSDP, which reduce-scatters each micro-batch's gradients and accumulates only its
// 1/dp shard.
double grad_accumulation_seconds(const TrainingJob& job, const hardware::HardwareProfile& hw, const StageParameters& parameters);
// Seconds one micro-batch's backward spends on the weight gradient of the embedding table slice
// `table` (one GPU), beyond the lookup's scatter of the tokens' rows. No fused weight-gradient GEMM
// covers a lookup: PyTorch's embedding backward (ATen embedding_backward_cuda_kernel) first fills a
// dense 16-bit gradient of the whole slice with zeros, and Megatron's DDP hook then adds it into the
// main gradient (param.main_grad.add_(param.grad)): read 2 bytes, read and write gradient_bytes.
// The add is left to grad_accumulation_seconds when that counts it (unfused accumulation), and to
// the per-micro-batch reduce-scatter under ZeRO-2 and 3.
double embedding_gradient_seconds(const TrainingJob& job, const hardware::HardwareProfile& hw, const StageParameters& table);

// The shard of work each rank of the job does per micro-batch.
Shard shard_of(const TrainingJob& job);
// The share of an fp8 weight cast each micro-batch pays (time_ops' weight_casts): 1 / micro-batches,
// as Transformer Engine casts once a step; 1 under ZeRO-3 with something to shard, whose passes
// gather the 16-bit weights afresh (and whose fp8 copy estimate_memory shards too).
double fp8_weight_cast_share(const TrainingJob& job);

// Activation bytes one micro-batch leaves stored in one layer until its backward pass.
double layer_activation_bytes(const TransformerSpec& m, int layer, const Shard& s, Recompute recompute);

// The groups of each kind (TP, CP, EP, ETP) that the plan places differently: one group for each
// distinct placement, a placement being its members' nodes relative to the first member's, their
// GPU indices within the node, and whether each meets the fabric at the first member's leaf, another
// leaf of its scalable unit (or pod), or another unit's (a TP 6 group on 8-GPU nodes lies in one
// node or straddles two; a TP 16 group on NVL72 racks in one rack or two; a group across nodes on
// one leaf or across the spines). Inside one node whose GPUs all meet the same NVSwitches, every
// group of a size is placed alike.
struct GroupPlacements {
  std::vector<std::vector<topology::Vertex>> tp, cp, ep, etp;
  [[nodiscard]] const std::vector<std::vector<topology::Vertex>>& of(CommGroup g) const {
    return g == CommGroup::tp ? tp : g == CommGroup::cp ? cp : g == CommGroup::ep ? ep : etp;
  }
};
GroupPlacements group_placements(const ParallelismPlan& p, const topology::Topology& topo);
// Whether the fabric spreads flows over equal-cost paths by a hash of the flow (Ethernet ECMP, two
// tiers or more), so that which flows collide depends on the flows themselves.
bool hashes_flows(const topology::Topology& topo, const topology::Router& router);
// Rank 0's group of each kind alone: what a lower bound may time (the step takes the slowest
// placement, so any one of them bounds it from below), without enumerating the ranks.
GroupPlacements first_groups(const ParallelismPlan& p, const topology::Topology& topo);

// TP, CP and EP collectives of a plan, each timed alone on the topology for every distinct
// placement of its groups, the slowest counting (a step waits for its slowest group: the
// data-parallel replicas meet at the gradient reduction, the stages at every pipeline send), cached
// by op and size. The step simulation and the plan search's lower bound time them with this one
// function. send_recv over a group is a ring of sends: each member sends the bytes to the next, all
// at once (ring attention's exchange).
class GroupCollectives {
 public:
  GroupCollectives(const ParallelismPlan& p, const topology::Topology& topo, const CollectiveModel& cm);
  GroupCollectives(GroupPlacements placements, const topology::Topology& topo, const CollectiveModel& cm);
  Seconds operator()(CommGroup g, CollectiveOp op, double bytes);
  [[nodiscard]] const GroupPlacements& placements() const { return placements_; }
  [[nodiscard]] bool tp_spans_nodes() const;

 private:
  const topology::Topology& topo_;
  const CollectiveModel& cm_;
  GroupPlacements placements_;
  std::map<std::tuple<int, int, double>, double> cache_;
};

}  // namespace cs::models
