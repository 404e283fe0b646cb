// Internals shared by the training model's source files.
#pragma once

#include <vector>

#include "clustersim/models/training.hpp"

namespace cs::models {

// One forward or backward pass of a model chunk over a micro-batch, in a stage's execution order.
struct Pass {
  bool forward = true;
  int micro = 0;
  int chunk = 0;
};

// The order a pipeline stage runs its passes in: GPipe (every forward, then every backward), 1F1B
// (PipeDream-Flush: pp - stage - 1 warm-up forwards, then one forward and one backward in turn),
// or Megatron's interleaved 1F1B over vpp chunks (Narayanan et al. 2021, section 2.2.2).
std::vector<Pass> schedule_order(const ParallelismPlan& plan, int micro_batches, int stage);

struct StageParameters {
  double dense = 0;   // replicated over dp x cp
  double expert = 0;  // replicated over dp x cp / ep
};
StageParameters stage_parameters(const TransformerSpec& m, const ParallelismPlan& p, int stage);

// Activation bytes one micro-batch leaves stored in one layer until its backward pass.
double layer_activation_bytes(const TransformerSpec& m, int layer, const Shard& s, Recompute recompute);

}  // namespace cs::models
