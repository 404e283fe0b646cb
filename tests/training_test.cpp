// The training model: FLOPs and parameters against closed forms, memory against the ZeRO paper,
// pipeline bubbles against (p-1)/(m+p-1), data-parallel overlap, folding, and scenario errors.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/models/training.hpp"
#include "clustersim/models/training_scenario.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "../models/training_internal.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::models;

namespace {

topology::Topology from_text(const std::string& text) { return test::topology_from_text(text); }

topology::Topology h100_nodes(int n) {
  if (n == 1) return from_text("topology: {name: t, node: dgx-h100, nodes: 1, fabric: {kind: none}}\n");
  return from_text(fmt::format(
      "topology:\n  name: t\n  node: dgx-h100\n  nodes: {}\n  fabric: {{kind: rail-optimized, scalable_unit: 32, tiers: [{{radix: 64}}, {{radix: 64}}]}}\n", n));
}

// Two single-GPU hosts, each on a leaf of its own, the leaves joined through a spine by 10 Gb/s
// links (fabric.link_bandwidth sets switch-to-switch cables only): any traffic between the hosts
// crosses them.
topology::Topology two_hosts_on_a_slow_link() {
  return from_text(
      "topology:\n  name: t\n  node: single-gpu-host\n  nodes: 2\n"
      "  fabric: {kind: fat-tree, link_bandwidth: 10Gbps, tiers: [{radix: 2}, {radix: 2}]}\n");
}

// A 4-layer GPT on two data-parallel ranks (for two_hosts_on_a_slow_link), ZeRO-1 with neither the
// gradient reduction nor the parameter gather overlapped, micro-batches of one sequence.
TrainingJob zero1_without_overlap(int global_batch);

TransformerSpec preset(const std::string& name) {
  IncludeStack includes;
  return load_transformer_file(resolve_part(name, "models"), includes);
}

TransformerSpec gpt(int layers, int hidden, int heads, int seq, int vocab = 51200) {
  TransformerSpec m;
  m.name = "gpt";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden = 4 * hidden;
  m.activation = Activation::gelu;
  m.vocab = vocab;
  m.seq_len = seq;
  return m;
}

// A job of micro-batches of one sequence, sequence parallel where there is TP.
TrainingJob job_of(TransformerSpec model, int tp, int pp, int dp, int global_batch) {
  TrainingJob job;
  job.model = std::move(model);
  job.plan.tp = tp;
  job.plan.pp = pp;
  job.plan.dp = dp;
  job.plan.sequence_parallel = tp > 1;
  job.micro_batch = 1;
  job.global_batch = global_batch;
  return job;
}

TrainingJob zero1_without_overlap(int global_batch) {
  TrainingJob job = job_of(gpt(4, 2048, 16, 2048, 512), 1, 1, 2, global_batch);
  job.plan.zero_stage = 1;
  job.plan.overlap_grad_reduce = false;
  job.plan.overlap_param_gather = false;
  return job;
}

}  // namespace

TEST_CASE("parameter counts of the presets match their published sizes") {
  CHECK(count_parameters(preset("gpt3-175b")).total() / 1e9 == Approx(174.6).epsilon(0.005));
  CHECK(count_parameters(preset("llama3-70b")).total() / 1e9 == Approx(70.55).epsilon(0.005));
  CHECK(count_parameters(preset("llama3-405b")).total() / 1e9 == Approx(405.85).epsilon(0.005));
  const TransformerSpec mixtral = preset("mixtral-8x7b");
  CHECK(count_parameters(mixtral).total() / 1e9 == Approx(46.7).epsilon(0.005));
  // Active: every dense weight, 2 of 8 experts, and the output projection (no input embedding).
  CHECK(active_parameters(mixtral) / 1e9 == Approx(12.88 - 0.131).epsilon(0.01));
  const TransformerSpec ds = preset("deepseek-v3");
  CHECK(count_parameters(ds).total() / 1e9 == Approx(671).epsilon(0.005));
  for (const auto& name : shipped_part_names("models")) {
    INFO(name);
    CHECK(count_parameters(preset(name)).total() > 1e9);
  }
}

TEST_CASE("FLOPs per token of the op list equal 6N + 12 L h s") {
  const TransformerSpec m = gpt(96, 12288, 96, 2048);
  const Shard shard{1, 1, 1, 1, false, hardware::Dtype::bf16, true};
  double gemm = 0, attention = 0;
  for (int l = 0; l < m.layers; ++l) {
    for (const Op& op : layer_forward_ops(m, l, shard)) {
      if (op.kind == OpKind::gemm) gemm += op.flops;
      if (op.kind == OpKind::attention) attention += op.flops;
    }
  }
  for (const Op& op : head_forward_ops(m, shard)) gemm += op.flops;
  const double tokens = m.seq_len;
  // Forward + backward = 3 x forward; the causal attention op does half the score matrix.
  const double per_token = 3.0 * (gemm + 2.0 * attention) / tokens;
  const double closed = 6.0 * active_parameters(m) + 12.0 * m.layers * m.hidden * m.seq_len;
  CHECK(per_token == Approx(closed).epsilon(0.002));
  CHECK(model_flops_per_token(m) == Approx(closed));
  // Tensor parallelism splits every GEMM and the attention by tp.
  const Shard tp8{1, 8, 1, 1, true, hardware::Dtype::bf16, true};
  double split = 0;
  for (const Op& op : layer_forward_ops(m, 0, tp8)) split += op.kind == OpKind::comm || op.kind == OpKind::memory ? 0 : op.flops;
  double whole = 0;
  for (const Op& op : layer_forward_ops(m, 0, shard)) whole += op.kind == OpKind::comm || op.kind == OpKind::memory ? 0 : op.flops;
  CHECK(split * 8 == Approx(whole).epsilon(1e-6));
}

TEST_CASE("MLA's model FLOPs count its query-key and value widths apart") {
  const TransformerSpec ds = preset("deepseek-v3");
  REQUIRE(ds.mla);
  const double attention = 6.0 * ds.layers * ds.heads * (192 + 128) * double(ds.seq_len);
  CHECK(model_flops_per_token(ds) == Approx(6.0 * active_parameters(ds) + attention));
  // The unfused op list, forward and backward over the whole matrix, does the same attention work.
  const Shard unfused{1, 1, 1, 1, false, hardware::Dtype::bf16, false};
  double core = 0;
  for (const Op& op : layer_forward_ops(ds, ds.moe->dense_layers, unfused)) {
    if (op.name == "attention_scores" || op.name == "attention_context") core += op.flops;
  }
  CHECK(3.0 * core / ds.seq_len * ds.layers == Approx(attention));
}

TEST_CASE("a capacity factor pads what the all-to-alls carry as it pads the experts' work") {
  TransformerSpec m = preset("mixtral-8x7b");
  const Shard s{1, 2, 1, 8, true, hardware::Dtype::bf16, true};
  auto bytes_and_flops = [&] {
    double a2a = 0, experts = 0;
    for (const Op& op : layer_forward_ops(m, 0, s)) {
      if (op.name == "ep_dispatch" || op.name == "ep_combine") a2a += op.bytes;
      if (op.name.rfind("expert_", 0) == 0) experts += op.flops;
    }
    return std::pair{a2a, experts};
  };
  const auto [a2a, experts] = bytes_and_flops();
  REQUIRE(a2a > 0);
  m.moe->capacity_factor = 2.0;
  const auto [padded_a2a, padded_experts] = bytes_and_flops();
  CHECK(padded_experts == Approx(2.0 * experts));
  CHECK(padded_a2a == Approx(2.0 * a2a));
}

TEST_CASE("an MoE model's expert-data-parallel group gets a communicator of its own") {
  const hardware::HardwareProfile hw = *h100_nodes(1).gpu;
  TrainingJob job = job_of(preset("mixtral-8x7b"), 2, 1, 4, 64);
  job.plan.sequence_parallel = true;
  job.plan.ep = 2;
  job.model.seq_len = 4096;
  // tp, dp x cp and ep groups, and the expert-data-parallel group (tp x dp / ep = 4 ranks).
  CHECK(estimate_memory(job, hw).worst().comm_buffers.value() == Approx(4 * 0.5e9));
  job.model.moe.reset();
  CHECK(estimate_memory(job, hw).worst().comm_buffers.value() == Approx(3 * 0.5e9));
}

TEST_CASE("memory follows the ZeRO paper: 16 bytes per parameter and its stage 1/2/3 reductions") {
  const hardware::HardwareProfile hw = *h100_nodes(1).gpu;
  TrainingJob job;
  job.model = gpt(24, 2048, 16, 2048);
  job.precision = hardware::Dtype::fp16;  // mixed-precision Adam: 2 + 2 + 12 bytes
  job.plan.dp = 8;
  job.global_batch = 8;
  const double n = stage_parameters(job.model, job.plan, 0).dense;
  auto states = [&](int stage) {
    job.plan.zero_stage = stage;
    const StageMemory s = estimate_memory(job, hw).worst();
    return std::array<double, 3>{s.weights.value() / n, s.gradients.value() / n, s.optimizer.value() / n};
  };
  const auto z0 = states(0);
  CHECK(z0[0] + z0[1] + z0[2] == Approx(16.0));
  const auto z1 = states(1);
  CHECK(z1[0] + z1[1] + z1[2] == Approx(2 + 2 + 12.0 / 8));
  const auto z2 = states(2);
  CHECK(z2[1] + z2[2] == Approx(14.0 / 8));
  const auto z3 = states(3);
  CHECK(z3[1] + z3[2] == Approx(14.0 / 8));
  // Stage 3 also shards the weights, keeping only the unit in use and the next, prefetched, whole:
  // here the first, the embedding (51,200 x 2,048) with layer 0, and layer 1.
  const double layer = attention_parameters(job.model) + dense_ffn_parameters(job.model) + 2.0 * job.model.hidden;
  const double embedding = 51200.0 * 2048;
  CHECK(z3[0] * n == Approx(2.0 * n / 8 + 2.0 * (layer + embedding + layer)).epsilon(0.01));
  // With one data-parallel rank, stage 3 has nothing to shard and gathers nothing: stage 2's memory.
  job.plan.dp = 1;
  job.global_batch = 1;
  CHECK(states(3) == states(2));
  job.plan.dp = 8;
  job.global_batch = 8;
  // bf16 keeps Megatron's fp32 main gradients: 18 bytes.
  job.precision = hardware::Dtype::bf16;
  job.plan.zero_stage = 0;
  const StageMemory s = estimate_memory(job, hw).worst();
  CHECK((s.weights + s.gradients + s.optimizer).value() / n == Approx(18.0));
}

TEST_CASE("full recompute re-materialises a layer on the input it kept, counted once") {
  // A probe: a stage of one layer with one micro-batch in flight needed more activation memory under
  // full recompute than without any, by exactly one layer input: the kept input and the re-run
  // layer's first norm input are one tensor. Expectation: full recompute holds the kept input plus
  // the rest of one layer, which is what no recompute holds for that one layer.
  const hardware::HardwareProfile hw = *h100_nodes(1).gpu;
  TrainingJob job = job_of(gpt(2, 1024, 8, 2048, 32000), 1, 2, 1, 1);
  job.recompute = Recompute::none;
  const double none = estimate_memory(job, hw).stages[0].activations.value();
  job.recompute = Recompute::full;
  const double full = estimate_memory(job, hw).stages[0].activations.value();
  CHECK(full == Approx(none).epsilon(1e-12));
}

TEST_CASE("activation memory matches Korthikanti et al. 2022 for a GPT layer") {
  TransformerSpec m = gpt(1, 12288, 96, 2048);
  const double sbh = 2048.0 * 12288;
  const double as_h = 96.0 * 2048 / 12288;
  Shard s{1, 8, 1, 1, true, hardware::Dtype::fp16, false};
  CHECK(layer_activation_bytes(m, 0, s, Recompute::none) == Approx(sbh * (34.0 / 8 + 5.0 * as_h / 8)));
  CHECK(layer_activation_bytes(m, 0, s, Recompute::selective) == Approx(sbh * 34.0 / 8));
  s.sequence_parallel = false;
  CHECK(layer_activation_bytes(m, 0, s, Recompute::selective) == Approx(sbh * (10 + 24.0 / 8)));
  CHECK(layer_activation_bytes(m, 0, s, Recompute::full) == Approx(2 * sbh));
}

TEST_CASE("under fp8 a linear layer keeps its input as the fp8 cast its GEMM ran on") {
  // Transformer Engine saves the fp8 input of each linear layer for its weight gradient: the QKV and
  // FFN inputs and the activation's output (fc2's input) at 1 byte instead of 2; fused attention
  // keeps its 16-bit output beside the output projection's fp8 copy. A GPT layer (4h FFN): 5 sbh
  // less without recompute, 7 sbh with selective (the attention's output then recomputed).
  const TransformerSpec m = gpt(1, 4096, 32, 2048);
  const double sbh = 2048.0 * 4096;
  Shard s{1, 1, 1, 1, false, hardware::Dtype::bf16, true};
  const double none16 = layer_activation_bytes(m, 0, s, Recompute::none);
  const double selective16 = layer_activation_bytes(m, 0, s, Recompute::selective);
  s.dtype = hardware::Dtype::fp8;
  CHECK(layer_activation_bytes(m, 0, s, Recompute::none) == Approx(none16 - 5 * sbh));
  CHECK(layer_activation_bytes(m, 0, s, Recompute::selective) == Approx(selective16 - 7 * sbh));
  // Full recompute keeps the layer's 16-bit input alone, fp8 or not.
  CHECK(layer_activation_bytes(m, 0, s, Recompute::full) == Approx(2 * sbh));
  // The layers' weights gain their fp8 copies and the copies' transposes: 2 bytes a parameter.
  const hardware::HardwareProfile hw = *h100_nodes(1).gpu;
  TrainingJob job = job_of(gpt(8, 4096, 32, 2048), 1, 1, 8, 64);
  const double bf16 = estimate_memory(job, hw).worst().weights.value();
  job.precision = hardware::Dtype::fp8;
  const double fp8 = estimate_memory(job, hw).worst().weights.value();
  const ParameterCount n = count_parameters(job.model);
  CHECK((fp8 - bf16) / (n.attention + n.dense_ffn) == Approx(2.0).epsilon(0.01));
  // Under ZeRO-3 over 8 ranks every pass gathers and casts afresh: the copies of the two gathered
  // layers only, not of all 8 (a probe found them kept for the whole shard).
  job.plan.zero_stage = 3;
  const double z3_fp8 = estimate_memory(job, hw).worst().weights.value();
  job.precision = hardware::Dtype::bf16;
  const double z3_bf16 = estimate_memory(job, hw).worst().weights.value();
  CHECK((z3_fp8 - z3_bf16) / ((n.attention + n.dense_ffn) / 8) == Approx(2.0 * 2.0).epsilon(0.01));
}

TEST_CASE("a model trained without dropout keeps no dropout masks and runs no dropout kernel") {
  TransformerSpec m = gpt(1, 12288, 96, 2048);
  const double sbh = 2048.0 * 12288;
  const double as_h = 96.0 * 2048 / 12288;
  Shard s{1, 8, 1, 1, true, hardware::Dtype::fp16, false};
  auto has_dropout_op = [&] {
    const auto ops = layer_forward_ops(m, 0, s);
    return std::any_of(ops.begin(), ops.end(), [](const Op& op) { return op.name == "attention_dropout"; });
  };
  CHECK(has_dropout_op());
  m.hidden_dropout = 0.0;
  // Korthikanti et al.'s two one-byte hidden masks (sbh each, split by sequence parallelism) go.
  CHECK(layer_activation_bytes(m, 0, s, Recompute::none) == Approx(sbh * (32.0 / 8 + 5.0 * as_h / 8)));
  m.attention_dropout = 0.0;
  // The probabilities' mask (as^2b) and dropout output (2as^2b) go; the softmax output stays.
  CHECK(layer_activation_bytes(m, 0, s, Recompute::none) == Approx(sbh * (32.0 / 8 + 2.0 * as_h / 8)));
  CHECK(layer_activation_bytes(m, 0, s, Recompute::selective) == Approx(sbh * 32.0 / 8));
  CHECK(layer_activation_bytes(m, 0, s, Recompute::full) == Approx(2 * sbh / 8));
  CHECK_FALSE(has_dropout_op());
}

TEST_CASE("schedules run every pass once, backward after forward, with 1F1B's warm-up") {
  ParallelismPlan p;
  p.pp = 4;
  for (int stage = 0; stage < 4; ++stage) {
    const auto order = schedule_order(p, 8, stage);
    REQUIRE(order.size() == 16);
    int forwards = 0;
    while (order[static_cast<std::size_t>(forwards)].forward) ++forwards;
    CHECK(forwards == 4 - stage);  // warm-up plus the first steady forward
  }
  p.vpp = 2;
  p.schedule = PipelineSchedule::interleaved;
  const auto order = schedule_order(p, 8, 0);
  REQUIRE(order.size() == 32);
  std::set<std::tuple<bool, int, int>> seen;
  for (const Pass& x : order) {
    CHECK(seen.insert({x.forward, x.micro, x.chunk}).second);
    if (!x.forward) CHECK(seen.count({true, x.micro, x.chunk}) == 1);
  }
}

TEST_CASE("the interleaved schedule runs Megatron-Core's table of micro-batch groups") {
  // schedules.py's own example: PP 2, VP 2, 5 micro-batches in groups of 3 (N3M5): virtual
  // micro-batches 0-9 run micro-batches 0 1 2 0 1 2 3 4 3 4 on chunks 0 0 0 1 1 1 0 0 1 1.
  ParallelismPlan p;
  p.pp = 2;
  p.vpp = 2;
  p.schedule = PipelineSchedule::interleaved;
  p.microbatch_group = 3;
  for (int stage = 0; stage < 2; ++stage) {
    std::vector<std::pair<int, int>> forwards, backwards;
    for (const Pass& x : schedule_order(p, 5, stage)) (x.forward ? forwards : backwards).push_back({x.micro, x.chunk});
    CHECK(forwards == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}});
    // Backward passes take the same table with the chunks reversed.
    CHECK(backwards == std::vector<std::pair<int, int>>{{0, 1}, {1, 1}, {2, 1}, {0, 0}, {1, 0}, {2, 0}, {3, 1}, {4, 1}, {3, 0}, {4, 0}});
  }
  // Warm-up (get_pp_rank_microbatches): 2 per later stage plus a group per chunk past the first.
  const auto warmup = [&](int micro, int stage) {
    int n = 0;
    for (const Pass& x : schedule_order(p, micro, stage)) {
      if (!x.forward) break;
      ++n;
    }
    return n - 1;  // the first steady forward precedes the first backward
  };
  CHECK(warmup(5, 0) == 2 + 3);
  CHECK(warmup(5, 1) == 0 + 3);
  // Groups of pp (the default) are the table of Narayanan et al.'s interleaving.
  for (int pp : {2, 3, 4}) {
    for (int vpp : {2, 3}) {
      ParallelismPlan d;
      d.pp = pp;
      d.vpp = vpp;
      d.schedule = PipelineSchedule::interleaved;
      const int micro = 4 * pp;
      std::vector<Pass> forwards;
      for (const Pass& x : schedule_order(d, micro, 0)) {
        if (x.forward) forwards.push_back(x);
      }
      REQUIRE(forwards.size() == static_cast<std::size_t>(micro * vpp));
      for (int k = 0; k < micro * vpp; ++k) {
        CHECK(forwards[static_cast<std::size_t>(k)].micro == k / (pp * vpp) * pp + k % pp);
        CHECK(forwards[static_cast<std::size_t>(k)].chunk == k % (pp * vpp) / pp);
      }
    }
  }
}

TEST_CASE("the peak of stored activations, found in one period of the schedule, is the full walk's peak") {
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved}) {
    for (int pp : {1, 2, 3, 4, 8}) {
      for (int vpp : {1, 2, 3, 4}) {
        if ((schedule == PipelineSchedule::interleaved) != (vpp > 1)) continue;
        for (int micro : {1, 2, 3, 4, 8, 10, 12, 24, 64}) {
          for (int group : {0, pp + 1, pp + 2, 2 * pp, micro}) {
            if (group > 0 && schedule != PipelineSchedule::interleaved) continue;
            if (schedule == PipelineSchedule::interleaved && !microbatch_groups_run(micro, pp, group > 0 ? group : pp)) continue;
            ParallelismPlan p;
            p.pp = pp;
            p.vpp = vpp;
            p.schedule = schedule;
            p.microbatch_group = group;
            std::vector<double> bytes;
            for (int c = 0; c < vpp; ++c) bytes.push_back(1.0 + 0.37 * c + (c == vpp - 1 ? 2.5 : 0.0));  // the last chunk holds the logits
            for (int stage = 0; stage < pp; ++stage) {
              double live = 0, peak = 0;
              std::set<std::tuple<bool, int, int>> seen;
              for (const Pass& x : schedule_order(p, micro, stage)) {
                CHECK(seen.insert({x.forward, x.micro, x.chunk}).second);
                if (!x.forward) CHECK(seen.count({true, x.micro, x.chunk}) == 1);
                live += x.forward ? bytes[static_cast<std::size_t>(x.chunk)] : -bytes[static_cast<std::size_t>(x.chunk)];
                peak = std::max(peak, live);
              }
              INFO(fmt::format("{} pp {} vpp {} micro {} group {} stage {}", to_string(schedule), pp, vpp, micro, group, stage));
              CHECK(seen.size() == static_cast<std::size_t>(2 * micro * vpp));
              CHECK(peak_live_bytes(p, micro, stage, bytes) == Approx(peak).epsilon(1e-12));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("uneven layers go to the first and last chunks") {
  CHECK(chunk_layers(126, 16, 1) == std::vector<int>{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7});
  CHECK(chunk_layers(96, 8, 2) == std::vector<int>(16, 6));
}

TEST_CASE("the 1F1B bubble is (p-1)/(m+p-1), divided by vpp when interleaved") {
  // An idealised pipeline: one GPU per stage, no data or tensor parallelism, a vocabulary too
  // small to unbalance the end stages, activations small enough that sends take no time.
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job;
  job.model = gpt(16, 4096, 32, 2048, 128);
  job.plan.pp = 4;
  job.micro_batch = 1;
  job.global_batch = 16;
  const double m = 16, p = 4;
  TrainingResult r = simulate_training(job, topo);
  CHECK(r.breakdown.bubble / r.step_time.value() == Approx((p - 1) / (m + p - 1)).epsilon(0.03));
  job.plan.vpp = 2;
  job.plan.schedule = PipelineSchedule::interleaved;
  r = simulate_training(job, topo);
  CHECK(r.breakdown.bubble / r.step_time.value() == Approx(((p - 1) / 2) / (m + (p - 1) / 2)).epsilon(0.05));
  // Larger micro-batch groups (Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage)
  // hold more activations but leave the bubble as it was.
  const double pp_groups = r.step_time.value();
  job.plan.microbatch_group = 8;
  r = simulate_training(job, topo);
  CHECK(r.step_time.value() == Approx(pp_groups).epsilon(0.01));
  // Groups also run step sizes that are no multiple of pp: 10 micro-batches in groups of 6 and 4.
  job.global_batch = 10;
  job.plan.microbatch_group = 6;
  r = simulate_training(job, topo);
  CHECK(r.breakdown.bubble / r.step_time.value() == Approx(((p - 1) / 2) / (10 + (p - 1) / 2)).epsilon(0.05));
  job.plan.microbatch_group = 0;
  CHECK_THROWS_WITH(simulate_training(job, topo), Catch::Contains("to be a multiple of pp") && Catch::Contains("(the smallest: 5)"));
  job.plan.microbatch_group = 7;  // a last group of 3
  CHECK_THROWS_WITH(simulate_training(job, topo), Catch::Contains("leaves a last group of 3 micro-batches (10 mod 7), fewer than pp = 4"));
  job.plan.microbatch_group = 3;
  CHECK_THROWS_WITH(simulate_training(job, topo), Catch::Contains("microbatch_group = 3 must lie between pp = 4 and the step's micro-batches"));
  job.plan.microbatch_group = 11;
  CHECK_THROWS_WITH(simulate_training(job, topo), Catch::Contains("must lie between pp = 4 and the step's micro-batches (10 = 10 / (1 x 1))"));
  job.global_batch = 16;
  job.plan.microbatch_group = 0;
  job.plan.vpp = 1;
  job.plan.schedule = PipelineSchedule::gpipe;
  r = simulate_training(job, topo);
  CHECK(r.breakdown.bubble / r.step_time.value() == Approx((p - 1) / (m + p - 1)).epsilon(0.03));
}

TEST_CASE("a data-parallel all-reduce hides behind a long backward pass") {
  const topology::Topology topo = h100_nodes(4);
  TrainingJob job;
  job.model = gpt(32, 1024, 8, 8192, 1024);  // small weights, long sequences: backward dwarfs the all-reduce
  job.plan.dp = 32;
  job.plan.zero_stage = 0;
  job.plan.bucket_parameters = 1;  // a bucket per layer
  job.micro_batch = 8;
  job.global_batch = 512;
  const TrainingResult hidden = simulate_training(job, topo);
  CHECK(hidden.breakdown.dp_comm < 0.01 * hidden.step_time.value());
  job.plan.overlap_grad_reduce = false;
  const TrainingResult exposed = simulate_training(job, topo);
  // Only the last bucket, reduced after the last layer's backward, is left to wait for: one of 32.
  CHECK(hidden.breakdown.dp_comm < 0.1 * exposed.breakdown.dp_comm);
  CHECK(exposed.step_time.value() > hidden.step_time.value());
  // The step grows by the exposed all-reduce and nothing else.
  CHECK(exposed.step_time.value() - hidden.step_time.value() ==
        Approx(exposed.breakdown.dp_comm - hidden.breakdown.dp_comm).epsilon(0.02));
}

TEST_CASE("a stage that waits for the pipeline to drain counts the wait as bubble, not as its gradient reduction") {
  // Four stages, ZeRO-1 without overlap: each stage reduce-scatters its gradients after its last
  // backward pass and all-gathers its weights after the optimizer. The last stage ends its backward
  // passes first and waits for the first. Two replicas against one with half the batch: the same
  // passes, so the second step is longer by the exposed reduction and gather (and the optimizer
  // shrinks to its shard).
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job;
  job.model = gpt(16, 4096, 32, 2048, 128);
  job.plan.pp = 4;
  job.plan.zero_stage = 1;
  job.plan.overlap_grad_reduce = false;
  job.plan.overlap_param_gather = false;
  job.micro_batch = 1;
  job.global_batch = 8;
  const TrainingResult alone = simulate_training(job, topo);
  job.plan.dp = 2;
  job.global_batch = 16;
  const TrainingResult reduced = simulate_training(job, topo);
  REQUIRE(alone.breakdown.dp_comm == 0.0);
  CHECK(reduced.breakdown.dp_comm > 0.0);
  const double optimizer_saved = alone.breakdown.optimizer - reduced.breakdown.optimizer;
  CHECK(reduced.step_time.value() - alone.step_time.value() + optimizer_saved ==
        Approx(reduced.breakdown.dp_comm).epsilon(0.05));
  CHECK(reduced.breakdown.bubble == Approx(alone.breakdown.bubble).epsilon(0.02));
}

TEST_CASE("breakdown parts add up to the step time") {
  const topology::Topology topo = h100_nodes(4);
  TrainingJob job;
  job.model = preset("llama3-8b");
  job.plan.tp = 4;
  job.plan.pp = 2;
  job.plan.dp = 4;
  job.plan.sequence_parallel = true;
  job.micro_batch = 1;
  job.global_batch = 32;
  const TrainingResult r = simulate_training(job, topo);
  const StepBreakdown& b = r.breakdown;
  CHECK(b.compute + b.tp_comm + b.cp_comm + b.ep_comm + b.dp_comm + b.pp_comm + b.bubble + b.optimizer ==
        Approx(r.step_time.value()).epsilon(1e-6));
  CHECK(r.mfu > 0.2);
  CHECK(r.mfu < 0.8);
  CHECK(r.tokens_per_s == Approx(32.0 * 8192 / r.step_time.value()));
}

namespace {

// Llama 3 8B on one DGX H100 at TP 2 (sequence parallel), DP 4, selective recompute, micro-batches
// of one sequence.
TrainingJob llama3_8b_tp2_dp4(int global_batch) {
  TrainingJob job;
  job.model = preset("llama3-8b");
  job.plan.tp = 2;
  job.plan.dp = 4;
  job.plan.sequence_parallel = true;
  job.recompute = Recompute::selective;
  job.micro_batch = 1;
  job.global_batch = global_batch;
  return job;
}

}  // namespace

TEST_CASE("per-operation times add up to the layer's pass times") {
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job = llama3_8b_tp2_dp4(8);
  const TrainingResult r = simulate_training(job, topo);
  REQUIRE_FALSE(r.layer_ops.empty());
  Shard shard;
  shard.tp = 2;
  shard.sequence_parallel = true;
  const CommTime no_comm = [](CommGroup, CollectiveOp, double) { return Seconds(0); };
  const OpsTime t = time_ops(layer_forward_ops(job.model, 0, shard), *topo.gpu, job.precision, no_comm, job.recompute, false, shard.tp);
  double forward = 0, backward = 0, recompute = 0;
  for (const auto& op : t.ops) {
    forward += op.forward;
    backward += op.backward;
    recompute += op.recompute;
    // Selective recompute re-runs the attention core only.
    if (op.name != "attention") CHECK(op.recompute == 0);
  }
  CHECK(forward == Approx(t.forward.total()).epsilon(1e-12));
  CHECK(backward == Approx(t.backward.total()).epsilon(1e-12));
  CHECK(recompute == Approx(t.recompute.total()).epsilon(1e-12));
  CHECK(recompute > 0);
  // The step's table lists the same operations in forward order.
  REQUIRE(r.layer_ops.size() == t.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) CHECK(r.layer_ops[i].name == t.ops[i].name);
  // Megatron's fp32 cross-entropy: 38 bytes per logit forward, 14 backward.
  const auto ce = std::find_if(r.head_ops.begin(), r.head_ops.end(), [](const OpTiming& o) { return o.name == "cross_entropy"; });
  REQUIRE(ce != r.head_ops.end());
  CHECK(ce->bytes == Approx(8192.0 * (128256.0 / 2) * 38));
}

TEST_CASE("TP overlap hides each collective behind its own linear layer's GEMMs, in both passes") {
  const topology::Topology topo = h100_nodes(1);
  Shard shard;
  shard.tp = 8;
  shard.sequence_parallel = true;
  const TransformerSpec m = gpt(4, 8192, 64, 4096);
  const auto tp_of = [&](bool overlap, double c) {
    const CommTime fixed = [c](CommGroup, CollectiveOp, double) { return Seconds(c); };
    return time_ops(layer_forward_ops(m, 0, shard), *topo.gpu, hardware::Dtype::bf16, fixed, Recompute::none, overlap, shard.tp);
  };
  const double c = 20e-6;  // every TP collective takes 20 us: far less than any GEMM below
  const OpsTime plain = tp_of(false, c);
  // Without overlap: two all-gathers and two reduce-scatters forward; backward their mirrors, and
  // each column-parallel layer's re-gather of its saved sequence-split input for the weight
  // gradient (a probe found it left out, so that the overlap could make a step slower).
  CHECK(plain.forward.tp == Approx(4 * c));
  CHECK(plain.backward.tp == Approx(6 * c));
  CHECK(tp_of(true, c).backward.tp < plain.backward.tp);
  // Transformer Engine's defaults (initialize_ub): the all-gathers before qkv and fc1 are ring
  // exchanges that start on the chunk already held (nothing shows); the reduce-scatters after the
  // output projection and fc2 are pipelined in 4 chunks, the last of which shows, and the first
  // three take 16 of the H100's 132 SMs from the GEMM chunks they run beside.
  const double sm = 16.0 / 132.0;
  const OpsTime hidden = tp_of(true, c);
  CHECK(hidden.forward.tp == Approx(2 * (c / 4 + 3 * sm * c / 4)));
  // Backward: a column-parallel layer's bulk re-gather and reduce-scatter hide whole behind its data-
  // and weight-gradient GEMMs, each taking 16 SMs while it runs; a row-parallel layer's output-
  // gradient all-gather is a ring exchange again.
  CHECK(hidden.backward.tp == Approx(2 * sm * 2 * c));
  int seen = 0;
  for (const auto& op : hidden.ops) {
    if (op.name == "tp_allgather_attn") {
      CHECK(op.forward == 0.0);
      ++seen;
    }
    if (op.name == "tp_reduce_ffn") {
      CHECK(op.backward == 0.0);
      ++seen;
    }
  }
  CHECK(seen == 2);
  // A collective far longer than its GEMM shows whole but for the GEMM it hides behind: a ring
  // exchange hides behind 7 of the 8 GEMM chunks, the pipeline behind 3 of its 4.
  const double slow = 10.0;
  const OpsTime exposed = tp_of(true, slow);
  const OpsTime no_comm = tp_of(false, 0.0);
  auto gemm_fwd = [&](const char* name) {
    for (const auto& op : no_comm.ops) {
      if (op.name == name) return op.forward;
    }
    FAIL("no op " << name);
    return 0.0;
  };
  seen = 0;
  for (const auto& op : exposed.ops) {
    if (op.name == "tp_allgather_attn" || op.name == "tp_reduce_ffn") ++seen;
    if (op.name == "tp_allgather_attn") CHECK(op.forward == Approx(slow - gemm_fwd("qkv") * 7.0 / 8.0));
    if (op.name == "tp_reduce_ffn") CHECK(op.forward == Approx(slow - gemm_fwd("fc2") * 3.0 / 4.0 + sm * 3.0 * gemm_fwd("fc2") / 4.0));
  }
  CHECK(seen == 2);
  // Outside Transformer Engine nothing is pipelined: the output layer's forward all-gather and the
  // embedding's reduce-scatter show whole; the output layer's backward overlaps with its own GEMMs.
  const CommTime fixed = [c](CommGroup, CollectiveOp, double) { return Seconds(c); };
  const OpsTime head = time_ops(head_forward_ops(m, shard), *topo.gpu, hardware::Dtype::bf16, fixed, Recompute::none, true, shard.tp);
  const OpsTime embedding = time_ops(embedding_forward_ops(m, shard), *topo.gpu, hardware::Dtype::bf16, fixed, Recompute::none, true, shard.tp);
  bool seen_head = false, seen_embedding = false;
  for (const auto& op : head.ops) {
    if (op.name != "tp_allgather_head") continue;
    seen_head = true;
    CHECK(op.forward == Approx(c));
    CHECK(op.backward == 0.0);
  }
  for (const auto& op : embedding.ops) {
    if (op.name != "tp_reduce_embedding") continue;
    seen_embedding = true;
    CHECK(op.forward == Approx(c));
    CHECK(op.backward == Approx(c));
  }
  CHECK(seen_head);
  CHECK(seen_embedding);
}

TEST_CASE("without sequence parallelism the embedding all-reduces forward, the output layer's input gradient backward, the loss forward only") {
  // Megatron-Core: the vocab-parallel embedding ends in reduce_from_tensor_model_parallel_region
  // (all-reduce forward, identity backward); the output layer's input passes
  // copy_to_tensor_model_parallel_region (identity forward, all-reduce backward); the vocab-parallel
  // cross-entropy reduces forward only. A probe found the embedding's all-reduce charged backward
  // and the output layer's missing, which moved one all-reduce a micro-batch to the first stage.
  const topology::Topology topo = h100_nodes(1);
  Shard shard;
  shard.tp = 8;
  const TransformerSpec m = gpt(4, 8192, 64, 4096);
  const double c = 20e-6;
  const CommTime fixed = [c](CommGroup, CollectiveOp, double) { return Seconds(c); };
  const OpsTime embedding = time_ops(embedding_forward_ops(m, shard), *topo.gpu, hardware::Dtype::bf16, fixed, Recompute::none, false, shard.tp);
  const OpsTime head = time_ops(head_forward_ops(m, shard), *topo.gpu, hardware::Dtype::bf16, fixed, Recompute::none, false, shard.tp);
  CHECK(embedding.forward.tp == Approx(c));
  CHECK(embedding.backward.tp == 0.0);
  CHECK(head.forward.tp == Approx(c));   // the loss's reductions
  CHECK(head.backward.tp == Approx(c));  // the output layer's input gradient
  int seen = 0;
  for (const auto& op : head.ops) {
    if (op.name == "tp_reduce_head_input_grad") {
      CHECK(op.forward == 0.0);
      CHECK(op.backward == Approx(c));
      CHECK(op.bytes == Approx(double(m.seq_len) * m.hidden * 2));
      ++seen;
    }
    if (op.name == "tp_reduce_loss") {
      CHECK(op.backward == 0.0);
      ++seen;
    }
  }
  CHECK(seen == 2);
}

TEST_CASE("full recompute re-runs the transformer layers, never the output head or the embedding") {
  const topology::Topology topo = h100_nodes(1);
  Shard shard;
  const CommTime no_comm = [](CommGroup, CollectiveOp, double) { return Seconds(0); };
  const TransformerSpec m = gpt(4, 2048, 16, 2048);
  const OpsTime layer = time_ops(layer_forward_ops(m, 0, shard), *topo.gpu, hardware::Dtype::bf16, no_comm, Recompute::full, false, 1);
  // Expectation: a checkpointed layer's recompute is its whole forward again.
  CHECK(layer.recompute.total() == Approx(layer.forward.total()).epsilon(1e-12));
  // Megatron checkpoints the transformer layers only: the logits, the loss and the embedding run once.
  for (const auto& ops : {head_forward_ops(m, shard), embedding_forward_ops(m, shard)}) {
    const OpsTime t = time_ops(ops, *topo.gpu, hardware::Dtype::bf16, no_comm, Recompute::full, false, 1);
    CHECK(t.recompute.total() == 0.0);
    CHECK(t.recompute.flops == 0.0);
  }
}

TEST_CASE("fp8 training runs the layers' GEMMs in fp8 and the output layer in 16 bits") {
  const topology::Topology topo = h100_nodes(1);
  Shard shard;
  shard.dtype = hardware::Dtype::fp8;
  const CommTime no_comm = [](CommGroup, CollectiveOp, double) { return Seconds(0); };
  const TransformerSpec m = gpt(4, 4096, 32, 2048);
  const OpsTime head = time_ops(head_forward_ops(m, shard), *topo.gpu, hardware::Dtype::fp8, no_comm, Recompute::none, false, 1);
  const auto logits = std::find_if(head.ops.begin(), head.ops.end(), [](const OpTiming& o) { return o.name == "logits"; });
  REQUIRE(logits != head.ops.end());
  // Expectation: the bf16 GEMM's time under sustained load, no fp8 casts.
  const double bf16 = hardware::estimate_gemm(*topo.gpu, {2048, 51200, 4096}, hardware::Dtype::bf16, hardware::Load::sustained).time.value();
  CHECK(logits->forward == Approx(bf16).epsilon(1e-12));
  const OpsTime layer = time_ops(layer_forward_ops(m, 0, shard), *topo.gpu, hardware::Dtype::fp8, no_comm, Recompute::none, false, 1);
  const auto fc1 = std::find_if(layer.ops.begin(), layer.ops.end(), [](const OpTiming& o) { return o.name == "fc1"; });
  REQUIRE(fc1 != layer.ops.end());
  CHECK(fc1->forward < hardware::estimate_gemm(*topo.gpu, {2048, 16384, 4096}, hardware::Dtype::bf16, hardware::Load::sustained).time.value());
}

TEST_CASE("fp8 training casts the weights once a step, the activations every micro-batch") {
  // Transformer Engine caches each step's fp8 weights from the first micro-batch on
  // (is_first_microbatch): a micro-batch pays weight_casts of the cast, 1 / micro-batches.
  const hardware::HardwareProfile hw = *h100_nodes(1).gpu;
  Shard shard;
  shard.dtype = hardware::Dtype::fp8;
  const CommTime no_comm = [](CommGroup, CollectiveOp, double) { return Seconds(0); };
  const TransformerSpec m = gpt(4, 4096, 32, 2048);
  const std::vector<Op> ops = layer_forward_ops(m, 0, shard);
  const OpsTime once = time_ops(ops, hw, hardware::Dtype::fp8, no_comm, Recompute::none, false, 1, 1.0);
  const OpsTime quarter = time_ops(ops, hw, hardware::Dtype::fp8, no_comm, Recompute::none, false, 1, 0.25);
  const auto fc1 = [](const OpsTime& t) { return *std::find_if(t.ops.begin(), t.ops.end(), [](const OpTiming& o) { return o.name == "fc1"; }); };
  // Expectation: fc1's weight is k x n = 4096 x 16384; its cast reads 2 and writes 1 byte per element
  // at the profile's HBM rate. Three quarters of it go.
  const double weight_cast = 3.0 * 4096.0 * 16384.0 / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);
  CHECK(fc1(once).forward - fc1(quarter).forward == Approx(0.75 * weight_cast).epsilon(1e-9));
  CHECK(fc1(once).backward == Approx(fc1(quarter).backward).epsilon(1e-12));
  // The step: 8 micro-batches share one cast; under ZeRO-3 every pass gathers (and casts) afresh.
  TrainingJob job;
  job.model = m;
  job.precision = hardware::Dtype::fp8;
  job.micro_batch = 1;
  job.global_batch = 8;
  CHECK(fp8_weight_cast_share(job) == Approx(1.0 / 8));
  job.plan.dp = 2;
  job.global_batch = 16;
  job.plan.zero_stage = 3;
  CHECK(fp8_weight_cast_share(job) == 1.0);
}

TEST_CASE("an fp8 step's MFU stays over the 16-bit peak, and a note gives its share of the fp8 peak") {
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job;
  job.model = gpt(2, 4096, 32, 2048);
  job.plan.tp = 8;
  job.micro_batch = 1;
  job.global_batch = 4;
  job.precision = hardware::Dtype::fp8;
  const TrainingResult r = simulate_training(job, topo);
  const auto& hw = *topo.gpu;
  // Expectation: MFU = model FLOPs / (step x GPUs x bf16 peak); the note's percentages scale it by
  // bf16 peak / fp8 peak (989 / 1979 TFLOP/s on the H100 SXM datasheet).
  const double bf16 = hw.peak(hardware::Dtype::bf16).value(), fp8 = hw.peak(hardware::Dtype::fp8).value();
  CHECK(r.mfu == Approx(r.model_flops_per_step / (r.step_time.value() * 8 * bf16)));
  const std::string expected = fmt::format("over its fp8 peak ({:.0f} TFLOP/s) they are {:.1f}% and {:.1f}%", fp8 / 1e12, 100 * r.mfu * bf16 / fp8,
                                           100 * r.hfu * bf16 / fp8);
  bool found = false;
  for (const auto& n : r.notes) found = found || n.find(expected) != std::string::npos;
  CHECK(found);
  job.precision = hardware::Dtype::bf16;
  for (const auto& n : simulate_training(job, topo).notes) CHECK(n.find("fp8 peak") == std::string::npos);
}

TEST_CASE("a step whose HFU is below its MFU says why, one with full recompute has no such note") {
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job;
  job.model = gpt(2, 2048, 16, 8192);  // long sequences: attention is a large share of the FLOPs
  job.plan.tp = 8;
  job.micro_batch = 1;
  job.global_batch = 2;
  job.recompute = Recompute::none;
  const auto has_note = [](const TrainingResult& r) {
    for (const auto& n : r.notes)
      if (n.find("HFU is below MFU") != std::string::npos) return true;
    return false;
  };
  // Expectation: without recompute the kernels execute the causal half of the attention MFU counts
  // whole, so HFU < MFU; full recompute adds a whole forward pass, so HFU > MFU.
  const TrainingResult plain = simulate_training(job, topo);
  CHECK(plain.hfu < plain.mfu);
  CHECK(has_note(plain));
  job.recompute = Recompute::full;
  const TrainingResult full = simulate_training(job, topo);
  CHECK(full.hfu > full.mfu);
  CHECK_FALSE(has_note(full));
}

TEST_CASE("a rank's attention weights are those its operations multiply, grouped KV heads fewer than tp replicated") {
  // Expectation: the layer's GEMM weights (n x k of each weight GEMM) are the layer's parameters on
  // one rank less its two norms, whatever the KV heads.
  for (int kv : {1, 2, 8, 32}) {
    INFO("kv_heads " << kv);
    TransformerSpec m = gpt(2, 4096, 32, 2048);
    m.kv_heads = kv;
    ParallelismPlan p;
    p.tp = 8;
    Shard shard;
    shard.tp = 8;
    double weights = 0;
    for (const Op& op : layer_forward_ops(m, 0, shard)) {
      if (op.kind == OpKind::gemm && op.weight_grad) weights += double(op.shape.n) * double(op.shape.k) * op.count;
    }
    CHECK(weights == Approx(layer_parameters(m, p, 0).dense - 2.0 * m.hidden));
  }
  // So one KV head or eight on eight ranks hold the same weights.
  TransformerSpec mqa = gpt(2, 4096, 32, 2048);
  mqa.kv_heads = 1;
  TransformerSpec gqa = mqa;
  gqa.kv_heads = 8;
  ParallelismPlan p;
  p.tp = 8;
  CHECK(layer_parameters(mqa, p, 0).dense == layer_parameters(gqa, p, 0).dense);
}

TEST_CASE("ZeRO-2 reduce-scatters every micro-batch's gradients, ZeRO-1 only the accumulated ones") {
  // Two single-GPU hosts on one slow link, no overlap, two micro-batches: the reductions dwarf the
  // compute, so each is on the step's path.
  const topology::Topology topo = two_hosts_on_a_slow_link();
  TrainingJob job = zero1_without_overlap(4);
  const TrainingResult one = simulate_training(job, topo);
  job.plan.zero_stage = 2;
  const TrainingResult two = simulate_training(job, topo);
  // Expectation: ZeRO-1's data-parallel part is an fp32 reduce-scatter R and a bf16 gather R / 2;
  // ZeRO-2 adds the first micro-batch's reduce-scatter, R = two thirds of ZeRO-1's part, less the
  // second micro-batch's compute it overlaps (small here).
  CHECK(two.breakdown.dp_comm - one.breakdown.dp_comm == Approx(one.breakdown.dp_comm * 2.0 / 3.0).epsilon(0.1));
  CHECK(two.step_time.value() > one.step_time.value());
  // And it keeps a shard of the gradients.
  CHECK(two.memory.worst().gradients.value() == Approx(one.memory.worst().gradients.value() / 2).epsilon(0.01));
}

TEST_CASE("ZeRO-2 without overlap waits for every micro-batch's reduce-scatter, even where compute could hide it") {
  // Two hosts on a 100 Gb/s link, micro-batches of 16 sequences: each micro-batch's compute outlasts
  // a reduce-scatter, so only blocking shows the reductions. Four micro-batches: ZeRO-2 reduces
  // three more times than ZeRO-1, each R = two thirds of ZeRO-1's data-parallel part (an fp32
  // reduce-scatter R and a bf16 gather R / 2), all on the step's path.
  const topology::Topology topo = from_text(
      "topology:\n  name: t\n  node: single-gpu-host\n  nodes: 2\n"
      "  fabric: {kind: fat-tree, link_bandwidth: 100Gbps, tiers: [{radix: 2}, {radix: 2}]}\n");
  TrainingJob job = zero1_without_overlap(128);
  job.micro_batch = 16;
  const TrainingResult one = simulate_training(job, topo);
  REQUIRE(one.micro_batches == 4);
  const double r = one.breakdown.dp_comm * 2.0 / 3.0;
  REQUIRE(one.breakdown.compute / 4 > r);  // a micro-batch's compute could hide a reduction
  job.plan.zero_stage = 2;
  const TrainingResult blocking = simulate_training(job, topo);
  CHECK(blocking.step_time.value() - one.step_time.value() == Approx(3 * r).epsilon(0.05));
  // Overlapped, the next micro-batch's compute hides them.
  job.plan.overlap_grad_reduce = true;
  const TrainingResult overlapped = simulate_training(job, topo);
  CHECK(overlapped.step_time.value() < blocking.step_time.value() - 2 * r);
}

TEST_CASE("alone on its GPU a rank has nothing to shard: ZeRO-2 and 3 time and hold what ZeRO-1 does") {
  const topology::Topology topo = from_text("topology:\n  name: t\n  node: single-gpu-host\n  nodes: 1\n  fabric: {kind: none}\n");
  TrainingJob job = job_of(gpt(4, 2048, 16, 2048), 1, 1, 1, 8);
  job.plan.zero_stage = 1;
  const TrainingResult one = simulate_training(job, topo);
  for (int stage : {2, 3}) {
    job.plan.zero_stage = stage;
    const TrainingResult r = simulate_training(job, topo);
    // The embedding's gradient is still added into the whole fp32 buffer every micro-batch.
    CHECK(r.step_time.value() == Approx(one.step_time.value()).epsilon(1e-9));
    CHECK(r.memory.worst().total().value() == Approx(one.memory.worst().total().value()).epsilon(1e-9));
  }
}

TEST_CASE("under ZeRO-3 the next layer's gather goes ahead of this layer's reduce-scatter") {
  // Two single-GPU hosts on one slow link, long sequences: each layer's backward takes about as
  // long as its gather and reduce-scatter. Queued behind this layer's reduce-scatter (one
  // communicator, one stream), the next layer's gather would wait for this layer's backward to
  // end, and the data-parallel stream would idle through every backward: more compute (full
  // recompute) could then shorten the step. In FSDP's order it never does.
  const topology::Topology topo = two_hosts_on_a_slow_link();
  TrainingJob job;
  job.model = gpt(8, 1024, 8, 32768, 1024);
  job.plan.dp = 2;
  job.plan.zero_stage = 3;
  job.micro_batch = 1;
  job.global_batch = 2;
  std::map<Recompute, double> step;
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
    job.recompute = r;
    step[r] = simulate_training(job, topo).step_time.value();
  }
  CHECK(step[Recompute::none] < step[Recompute::selective]);
  CHECK(step[Recompute::selective] < step[Recompute::full]);
}

TEST_CASE("under ZeRO-3 each micro-batch's passes cost alike: a pass's first gathers wait for the one before") {
  // A probe: the first two gathers of every pass were ready at the step's start, so the stream ran
  // later passes' gathers in the gaps of the first (out of FSDP's order), and the step grew less than
  // linearly, then more, with the micro-batches. Expectation: linear in the micro-batches, past the
  // first pass's warm-up, folded and unfolded alike.
  const topology::Topology topo = h100_nodes(2);
  TrainingJob job = job_of(gpt(8, 4096, 32, 4096, 32000), 8, 1, 2, 2);
  job.plan.zero_stage = 3;
  job.recompute = Recompute::none;
  std::map<int, double> step;
  for (int m : {1, 2, 4, 8}) {
    job.global_batch = 2 * m;
    step[m] = simulate_training(job, topo).step_time.value();
    TrainingOptions unfolded;
    unfolded.fold = false;
    CHECK(simulate_training(job, topo, unfolded).step_time.value() == Approx(step[m]).epsilon(1e-9));
  }
  const double per_micro = step[2] - step[1];
  CHECK(step[4] - step[2] == Approx(2 * per_micro).epsilon(0.01));
  CHECK(step[8] - step[4] == Approx(4 * per_micro).epsilon(0.01));
}

TEST_CASE("replicas whose pipeline sends cross the stage boundary differently are simulated rank by rank") {
  // A probe: tp 1, pp 2, dp 6 on two 8-GPU nodes puts stage 1 on ranks 6-11: replicas 0 and 1 send
  // inside node 0, replicas 2-5 across the fabric. Folded, replica 0's NVLink sends stood for all, and
  // the step came out 3.2% fast. Expectation: such a small step is unfolded on its own, says so, and
  // gives --no-fold's time; with dp 8 every stage is one whole node and folding stands.
  const topology::Topology topo = h100_nodes(2);
  TrainingJob job = job_of(gpt(4, 2048, 16, 4096, 32000), 1, 2, 6, 48);
  job.recompute = Recompute::none;
  const TrainingResult folded = simulate_training(job, topo);
  TrainingOptions every_rank;
  every_rank.fold = false;
  CHECK_FALSE(folded.folded);
  CHECK(folded.step_time.value() == Approx(simulate_training(job, topo, every_rank).step_time.value()).epsilon(1e-12));
  CHECK(std::any_of(folded.notes.begin(), folded.notes.end(), [](const std::string& n) { return n.find("cross the stage boundaries differently") != std::string::npos; }));
  job = job_of(gpt(4, 2048, 16, 4096, 32000), 1, 2, 8, 64);
  job.recompute = Recompute::none;
  CHECK(simulate_training(job, topo).folded);
}

TEST_CASE("an MoE plan whose experts alone have a data-parallel group reduces their gradients") {
  // A probe: at TP 2, dp 1 (etp 1, ep 1) each expert sits on both TP ranks, which route different
  // tokens, so Megatron-Core reduces its gradients over that pair of ranks; gated on dp x cp > 1, no
  // expert gradient was reduced, while the optimizer step and memory took their states as sharded.
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job = job_of(gpt(4, 4096, 32, 4096, 32000), 2, 1, 1, 4);
  job.model.moe = MoeSpec{};
  job.model.moe->experts = 8;
  job.model.moe->top_k = 2;
  job.model.moe->expert_ffn_hidden = 14336;
  REQUIRE(expert_data_parallel_size(job.plan) == 2);
  for (int zero : {0, 1, 3}) {
    job.plan.zero_stage = zero;
    INFO("ZeRO-" << zero);
    const TrainingResult folded = simulate_training(job, topo);
    CHECK(folded.breakdown.dp_comm > 0);
    TrainingOptions unfolded;
    unfolded.fold = false;
    CHECK(simulate_training(job, topo, unfolded).step_time.value() == Approx(folded.step_time.value()).epsilon(1e-9));
  }
}

TEST_CASE("a dense plan alone on its data-parallel rank costs the same under ZeRO 1, 2 and 3") {
  // A probe: a dense TP 8 plan at dp 1 counted TP's ranks as an expert group and dropped its unfused
  // accumulation under ZeRO-2 and 3. With nothing to shard, every stage adds whole gradients.
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job = job_of(gpt(8, 4096, 32, 4096, 32000), 8, 1, 1, 8);
  job.plan.grad_accumulation_fusion = false;
  std::map<int, double> step;
  for (int zero : {1, 2, 3}) {
    job.plan.zero_stage = zero;
    step[zero] = simulate_training(job, topo).step_time.value();
  }
  // (ZeRO-3 times its passes unit by unit: the same seconds summed in another order.)
  CHECK(step[2] == Approx(step[1]).epsilon(1e-9));
  CHECK(step[3] == Approx(step[1]).epsilon(1e-6));
}

TEST_CASE("unfused gradient accumulation adds a pass over the main gradients to every backward") {
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job;
  job.model = gpt(8, 2048, 16, 2048, 1024);
  job.precision = hardware::Dtype::bf16;  // fp32 main gradients: read 2 + 4, write 4 bytes per parameter
  job.micro_batch = 1;
  job.global_batch = 8;  // one GPU: 8 micro-batches
  const TrainingResult fused = simulate_training(job, topo);
  job.plan.grad_accumulation_fusion = false;
  const TrainingResult unfused = simulate_training(job, topo);
  const double params = count_parameters(job.model).total();
  const double table = embedding_parameters(job.model, job.plan).dense;
  const double rate = topo.gpu->memory_bandwidth.value() * topo.gpu->gemm.memory_efficiency;
  // Expectation: 8 micro-batches x 10 bytes at the achievable HBM rate for every parameter but the
  // embedding table's, whose gradient is added into the main gradient outside any GEMM either way.
  CHECK(unfused.step_time.value() - fused.step_time.value() == Approx(8 * (params - table) * 10.0 / rate).epsilon(0.002));
  // FSDP over data-parallel ranks accumulates its 1/dp shard only: nothing to add.
  job.plan.zero_stage = 3;
  job.plan.dp = 8;
  CHECK(grad_accumulation_seconds(job, *topo.gpu, {1e9, 0}) == 0.0);
  // Alone there is nothing to shard: the whole gradients are added as under ZeRO-1.
  job.plan.dp = 1;
  CHECK(grad_accumulation_seconds(job, *topo.gpu, {1e9, 0}) == Approx(1e9 * 10.0 / rate));
}

TEST_CASE("the embedding table's gradient is zero-filled and added into the main gradient every micro-batch") {
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job;
  job.model = gpt(8, 2048, 16, 2048, 1024);
  job.precision = hardware::Dtype::bf16;  // fp32 main gradients
  const double rate = topo.gpu->memory_bandwidth.value() * topo.gpu->gemm.memory_efficiency;
  const StageParameters table{1e9, 0};
  // Fused accumulation covers GEMMs only: zero fill (2 bytes), then read the 16-bit gradient (2) and
  // read and write the fp32 main gradient (4 + 4).
  CHECK(embedding_gradient_seconds(job, *topo.gpu, table) == Approx(1e9 * 12.0 / rate));
  // Unfused accumulation adds it already (grad_accumulation_seconds); FSDP reduce-scatters it.
  job.plan.grad_accumulation_fusion = false;
  CHECK(embedding_gradient_seconds(job, *topo.gpu, table) == Approx(1e9 * 2.0 / rate));
  job.plan.grad_accumulation_fusion = true;
  job.plan.zero_stage = 3;
  job.plan.dp = 8;
  CHECK(embedding_gradient_seconds(job, *topo.gpu, table) == Approx(1e9 * 2.0 / rate));
  // Alone on its GPU there is no reduce-scatter: the add is charged as under ZeRO-1.
  job.plan.dp = 1;
  CHECK(embedding_gradient_seconds(job, *topo.gpu, table) == Approx(1e9 * 12.0 / rate));
  // fp16 keeps 16-bit main gradients: 2 + 2 + 2 + 2 bytes.
  job.plan.zero_stage = 1;
  job.precision = hardware::Dtype::fp16;
  CHECK(embedding_gradient_seconds(job, *topo.gpu, table) == Approx(1e9 * 8.0 / rate));
  // Whether the step charges unfused accumulation (and `run`'s plan line says so): not where the
  // gradients are sharded, but alone on a GPU nothing is (a probe's plan line had said it under
  // ZeRO-2 at dp 4, where nothing is charged, and not under ZeRO-3 at dp 1, where it is).
  job.plan.grad_accumulation_fusion = false;
  job.plan.zero_stage = 2;
  job.plan.dp = 4;
  CHECK_FALSE(unfused_accumulation(job));
  job.plan.zero_stage = 3;
  job.plan.dp = 1;
  CHECK(unfused_accumulation(job));
}

namespace {

// A 4-layer, 4,096-wide model in two pipeline stages of one GPU each, micro-batches of 1.
TrainingJob two_stage_job(int vocab, int global_batch) {
  TrainingJob job;
  job.model = gpt(4, 4096, 32, 4096, vocab);
  job.plan.pp = 2;
  job.micro_batch = 1;
  job.global_batch = global_batch;
  job.recompute = Recompute::none;
  job.precision = hardware::Dtype::bf16;
  return job;
}

}  // namespace

TEST_CASE("blocking pipeline sends keep each stage waiting for its own sends") {
  // Two stages on two nodes joined by one slow link: each send of a micro-batch's activations
  // takes a visible share of a pass.
  const topology::Topology topo = two_hosts_on_a_slow_link();
  TrainingJob job = two_stage_job(512, 8);
  job.plan.overlap_p2p = true;
  const TrainingResult overlapped = simulate_training(job, topo);
  job.plan.overlap_p2p = false;
  const TrainingResult blocking = simulate_training(job, topo);
  CHECK(blocking.step_time.value() > overlapped.step_time.value());
  // The wait shows as pipeline sends, and the parts still add up.
  CHECK(blocking.breakdown.pp_comm > overlapped.breakdown.pp_comm);
  const StepBreakdown& b = blocking.breakdown;
  CHECK(b.compute + b.tp_comm + b.cp_comm + b.ep_comm + b.dp_comm + b.pp_comm + b.bubble + b.optimizer ==
        Approx(blocking.step_time.value()).epsilon(1e-6));
  // Folding changes nothing: every rank of a stage blocks alike.
  CHECK(simulate_training(job, topo, {.fold = false}).step_time.value() == Approx(blocking.step_time.value()).epsilon(0.01));
}

TEST_CASE("a tied embedding held by two pipeline stages all-reduces its gradient between them once a step") {
  // Two stages on two hosts joined by one 10 Gb/s link, one data-parallel rank: the only difference
  // tying makes is the all-reduce of the embedding's fp32 main gradient between the stages.
  const topology::Topology topo = two_hosts_on_a_slow_link();
  TrainingJob job = two_stage_job(4096, 4);
  const TrainingResult untied = simulate_training(job, topo);
  job.model.tied_embeddings = true;
  const TrainingResult tied = simulate_training(job, topo);
  // A two-rank all-reduce moves the whole buffer over the link once: 4,096 x 4,096 x 4 bytes at
  // 1.25 GB/s.
  const double bytes = 4096.0 * 4096.0 * 4.0;
  CHECK(tied.step_time.value() - untied.step_time.value() == Approx(bytes / 1.25e9).epsilon(0.02));
  CHECK(tied.breakdown.dp_comm > untied.breakdown.dp_comm);
  CHECK(simulate_training(job, topo, {.fold = false}).step_time.value() == Approx(tied.step_time.value()).epsilon(1e-9));
  // The all-reduce is one more collective in the step's graph ...
  CHECK(tied.tasks > untied.tasks);
  // ... which one stage, holding the weight once, does not have.
  job.plan.pp = 1;
  const TrainingResult one_stage_tied = simulate_training(job, topo);
  job.model.tied_embeddings = false;
  CHECK(one_stage_tied.tasks == simulate_training(job, topo).tasks);
}

namespace {

// The folded step against the unfolded one (every rank simulated), for each ZeRO stage given.
void check_folding(TrainingJob job, const topology::Topology& topo, std::initializer_list<int> zero_stages, double tolerance) {
  for (int zero : zero_stages) {
    INFO("zero stage " << zero);
    job.plan.zero_stage = zero;
    const TrainingResult folded = simulate_training(job, topo, {.fold = true});
    const TrainingResult unfolded = simulate_training(job, topo, {.fold = false});
    CHECK(unfolded.tasks > folded.tasks);
    CHECK(folded.step_time.value() == Approx(unfolded.step_time.value()).epsilon(tolerance));
  }
}

// DGX H100 nodes on a non-blocking 3-tier fat tree of radix-`radix` switches.
topology::Topology three_tier_fat_tree(int nodes, const std::string& technology, int radix) {
  return from_text(fmt::format("topology: {{name: t, node: dgx-h100, nodes: {}, fabric: {{kind: fat-tree, technology: {}, "
                               "tiers: [{{radix: {}}}, {{radix: {}}}, {{radix: {}}}]}}}}\n",
                               nodes, technology, radix, radix, radix));
}

// An 8-layer GPT of hidden 4096 and 2K tokens.
TrainingJob gpt_job(int tp, int pp, int dp, int global_batch, int vocab = 51200) {
  return job_of(gpt(8, 4096, 32, 2048, vocab), tp, pp, dp, global_batch);
}

}  // namespace

TEST_CASE("folded and unfolded simulations agree") {
  check_folding(gpt_job(2, 2, 8, 32), h100_nodes(4), {0, 1, 3}, 0.01);
}

namespace {

// Mixtral 8x7B at 4K tokens with sequence parallelism and full recompute, 64 sequences a step.
TrainingJob mixtral_job(int tp, int cp, int dp, int ep) {
  TrainingJob job;
  job.model = preset("mixtral-8x7b");
  job.model.seq_len = 4096;
  job.plan.tp = tp;
  job.plan.cp = cp;
  job.plan.dp = dp;
  job.plan.ep = ep;
  job.plan.sequence_parallel = true;
  job.recompute = Recompute::full;
  job.global_batch = 64;
  return job;
}

}  // namespace

TEST_CASE("folded and unfolded simulations agree where routing mixes the TP ranks' data-parallel traffic") {
  // A 3-tier RoCE fat tree: ECMP hashes the eight TP ranks' data-parallel rings onto shared uplinks.
  // Folding had simulated TP rank 0's rings alone and came out 43-62% fast (ZeRO-1: 0.068 s against
  // 0.120 s).
  check_folding(gpt_job(8, 1, 16, 64, 32000), three_tier_fat_tree(16, "roce", 16), {0, 1, 3}, 0.01);
  // A mixture of experts with expert groups across TP ranks, on a smaller tree of the same kind.
  TrainingJob moe = mixtral_job(8, 1, 8, 2);
  moe.model.layers = 4;
  check_folding(moe, three_tier_fat_tree(8, "roce", 8), {1}, 0.01);
}

TEST_CASE("folded and unfolded simulations agree when an expert group spans the TP ranks' dense groups") {
  // Expert parallelism 1: one expert group holds every rank of the stage, both TP ranks'. The two
  // dense groups run their reduce-scatters at once on a 3-tier InfiniBand tree; counted as one
  // source with the expert group (they only meet through it), they were left out: 4.7% fast.
  TrainingJob job = mixtral_job(2, 1, 32, 1);
  job.model.layers = 4;
  check_folding(job, three_tier_fat_tree(8, "infiniband", 16), {2}, 0.02);
}

TEST_CASE("folded and unfolded simulations agree when another TP rank heads a rank's expert group") {
  // Rank order tp-dp-cp-ep-pp with TP 8, EP 8 on rails: each expert data-parallel group is four TP
  // ranks of one node, headed by TP rank 0 or 4. Its collectives had been added with their head's TP
  // rank, so TP ranks 1-3 and 5-7 ran the step's every expert gather before their own dense ones:
  // unfolded 37% slower than folded with ZeRO-3, 5-7% with ZeRO 0 and 1.
  TrainingJob job = mixtral_job(8, 1, 4, 8);
  job.model.layers = 4;
  job.model.seq_len = 2048;
  job.global_batch = 16;
  job.recompute = Recompute::none;
  job.plan.order = {ParallelDim::tp, ParallelDim::dp, ParallelDim::cp, ParallelDim::ep, ParallelDim::pp};
  check_folding(job, h100_nodes(4), {0, 1, 3}, 1e-9);
}

TEST_CASE("an unfolded step starts a TP group's alike tasks together, as its TP collectives make it") {
  // Experts with ZeRO-2 and -3 on rails: each TP rank's expert and FSDP traffic runs on its own rail
  // at its own pace. The unfolded step's TP collectives are timed, not simulated, and had let each TP
  // rank run at its own pace, away from the folded step, which waits for every TP rank's traffic.
  TrainingJob job = mixtral_job(8, 1, 8, 2);
  job.model.layers = 4;
  check_folding(job, h100_nodes(8), {2, 3}, 1e-9);
}

TEST_CASE("a folded step simulates the other TP ranks' pipeline sends where they meet its traffic") {
  // TP 8, PP 4 on a 3-tier RoCE fat tree: ECMP hashes the eight TP ranks' sends between two stages
  // onto shared uplinks. Folding had simulated TP rank 0's sends alone. With one data-parallel
  // replica the folded step now holds every rank's traffic, and the two steps agree exactly.
  check_folding(job_of(gpt(4, 1024, 16, 8192, 32000), 8, 4, 1, 16), three_tier_fat_tree(4, "roce", 8), {0}, 1e-9);
  // So do their tied-embedding pairs between the first and last stages: folded, only TP rank 0's
  // pair had been simulated, and a step with a large tied vocabulary came out fast (9% on a 3:1
  // tree found by a probe).
  TransformerSpec tied = gpt(4, 1024, 16, 8192, 256000);
  tied.tied_embeddings = true;
  check_folding(job_of(tied, 8, 4, 1, 16), three_tier_fat_tree(4, "roce", 8), {0, 1}, 1e-9);
}

TEST_CASE("a folded step says when it leaves out other replicas' pipeline sends that can meet its traffic") {
  const auto says = [](const TrainingResult& r) {
    return std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("folding leaves out the other") != std::string::npos; });
  };
  const TrainingJob job = job_of(gpt(4, 1024, 16, 4096, 32000), 2, 2, 4, 16);
  // ECMP hashing on RoCE: said, and not when every rank is simulated.
  const topology::Topology roce = three_tier_fat_tree(2, "roce", 8);
  CHECK(says(simulate_training(job, roce)));
  CHECK_FALSE(says(simulate_training(job, roce, {.fold = false})));
  // Rails, and D-mod-k on a non-blocking InfiniBand tree: not said.
  CHECK_FALSE(says(simulate_training(job, h100_nodes(2))));
  CHECK_FALSE(says(simulate_training(job, three_tier_fat_tree(2, "infiniband", 8))));
  // A 3:1 oversubscribed leaf tier: said.
  CHECK(says(simulate_training(job, from_text("topology: {name: t, node: dgx-h100, nodes: 2, fabric: {kind: fat-tree, "
                                              "technology: infiniband, tiers: [{radix: 16, oversubscription: 3}, {radix: 16}]}}\n"))));
  // One data-parallel replica: nothing left out.
  CHECK_FALSE(says(simulate_training(job_of(gpt(4, 1024, 16, 4096, 32000), 8, 2, 1, 16), roce)));
}

TEST_CASE("a folded step simulates no other TP rank's traffic where it cannot meet the representative's") {
  // Rail-optimized: each TP rank's data-parallel ring stays on its own rail, so the folded run's
  // flows are the representative's alone, and the step is the unfolded one's.
  const topology::Topology rails = h100_nodes(16);
  const TrainingJob job = gpt_job(8, 1, 16, 64, 32000);
  const TrainingResult folded = simulate_training(job, rails, {.fold = true});
  const TrainingResult unfolded = simulate_training(job, rails, {.fold = false});
  CHECK(folded.step_time.value() == Approx(unfolded.step_time.value()).epsilon(1e-6));
  // Every data-parallel flow of the folded run is TP rank 0's: 8 x fewer than the unfolded run's
  // data-parallel flows; pp is 1, so there are no others.
  CHECK(unfolded.stats.flows == 8 * folded.stats.flows);
}

TEST_CASE("MoE with expert parallelism and context parallelism run and count their communication") {
  const topology::Topology topo = h100_nodes(8);
  TrainingJob job = mixtral_job(2, 2, 16, 8);
  const TrainingResult r = simulate_training(job, topo);
  CHECK(r.breakdown.ep_comm > 0);
  CHECK(r.step_time.value() > 0);
  job.plan.ep = 3;
  CHECK_THROWS_AS(simulate_training(job, topo), std::invalid_argument);
}

TEST_CASE("the experts' mapping folds ep after expert tensor parallelism 1, as Megatron-Core's second RankGenerator does") {
  // Grok-1's DGX Cloud plan: TP 4, CP 2, DP 8, EP 8, PP 8 on 512 GPUs.
  ParallelismPlan p;
  p.tp = 4, p.cp = 2, p.dp = 8, p.ep = 8, p.pp = 8;
  CHECK(expert_data_parallel_size(p) == 8);  // 4 x 2 x 8 ranks a stage over ep 8
  // tp-cp-ep-dp-pp: an EP group is eight consecutive ranks (one DGX node), whatever tp and cp are.
  CHECK(expert_parallel_ranks(p, 0) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(expert_parallel_ranks(p, 13) == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(expert_data_parallel_ranks(p, 13) == std::vector<int>{5, 13, 21, 29, 37, 45, 53, 61});
  // The next stage's groups are the same shape, 64 ranks on.
  CHECK(expert_parallel_ranks(p, 64 + 13) == std::vector<int>{72, 73, 74, 75, 76, 77, 78, 79});
  // With ep after dp in the order, the expert-data-parallel rest varies fastest instead.
  p.order = {ParallelDim::tp, ParallelDim::cp, ParallelDim::dp, ParallelDim::ep, ParallelDim::pp};
  CHECK(expert_parallel_ranks(p, 0) == std::vector<int>{0, 8, 16, 24, 32, 40, 48, 56});
  CHECK(expert_data_parallel_ranks(p, 0) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // The attention's mapping ignores ep: both orders place every (tp, cp, dp, pp) rank alike.
  ParallelismPlan q = p;
  q.order = ParallelismPlan().order;
  for (int d = 0; d < p.dp; ++d) CHECK(rank_of(p, RankCoord{1, 1, d, 2}) == rank_of(q, RankCoord{1, 1, d, 2}));
}

TEST_CASE("an order with pp before another dimension needs the experts' data parallelism equal to the attention's, as Megatron-Core requires") {
  // TP 2, PP 2 with etp 1, ep 1 and pp before dp: the attention's stages are ranks {0, 1} and
  // {2, 3}; the experts' 2 expert-data-parallel ranks come after pp, so their stages would be
  // {0, 2} and {1, 3}: an expert group held ranks of both stages (the step died in a map lookup).
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job = mixtral_job(2, 1, 1, 1);
  job.model.layers = 4;
  job.global_batch = 2;
  job.plan.pp = 2;
  job.plan.order = {ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::pp, ParallelDim::dp};
  CHECK(dense_stage_stride(job.plan) == 2);
  CHECK(expert_stage_stride(job.plan) == 1);
  CHECK_FALSE(experts_share_stages(job.plan));
  CHECK_THROWS_WITH(simulate_training(job, topo), Catch::Contains("needs the experts' data parallelism equal to the attention's"));
  // pp last, or the experts' ranks before pp as many as the attention's (ep 2 in tp's place): it runs.
  job.plan.order = ParallelismPlan().order;
  CHECK(simulate_training(job, topo).step_time.value() > 0);
  job.plan.order = {ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::pp, ParallelDim::dp};
  job.plan.ep = 2;
  CHECK(experts_share_stages(job.plan));
  CHECK(simulate_training(job, topo).step_time.value() > 0);
  // dp 2 with etp 2, ep 2: expert dp 1, not 2. Megatron refuses pp before dp even where the two
  // mappings' stages happen to agree (pp first: the stride is 1 in both).
  job.plan.dp = 2;
  job.global_batch = 4;
  job.plan.etp = 2;
  job.plan.order = {ParallelDim::pp, ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::dp};
  CHECK(dense_stage_stride(job.plan) == expert_stage_stride(job.plan));
  CHECK_FALSE(experts_share_stages(job.plan));
  CHECK_THROWS_WITH(simulate_training(job, h100_nodes(1)), Catch::Contains("expert dp 1 against dp 2"));
  // Equal data parallelism (TP 2, DP 2, EP 2: expert dp 2), but pp before cp, ep and dp: the
  // attention's stages are every 2 ranks, the experts' every 4 (etp x ep before pp), and the message
  // says so rather than comparing equal sizes.
  job.plan.etp = 1;
  job.plan.ep = 2;
  job.plan.order = {ParallelDim::tp, ParallelDim::pp, ParallelDim::cp, ParallelDim::ep, ParallelDim::dp};
  REQUIRE(expert_data_parallel_size(job.plan) == job.plan.dp);
  CHECK_FALSE(experts_share_stages(job.plan));
  CHECK_THROWS_WITH(simulate_training(job, h100_nodes(1)),
                    Catch::Contains("puts a rank on one pipeline stage in the attention's mapping and on another in the experts'") &&
                        Catch::Contains(fmt::format("a stage every {} ranks against every {}", dense_stage_stride(job.plan), expert_stage_stride(job.plan))));
  // A dimension of one rank after pp does not count: tp-cp-ep-dp-pp and tp-cp-ep-pp-dp with dp 1
  // place alike.
  job.plan.dp = 1;
  job.global_batch = 2;
  job.plan.etp = 1;
  job.plan.ep = 2;
  job.plan.order = {ParallelDim::tp, ParallelDim::ep, ParallelDim::pp, ParallelDim::cp, ParallelDim::dp};
  CHECK(experts_share_stages(job.plan));
  // A dense model has no experts' mapping: any order runs.
  job.model = preset("llama3-8b");
  job.model.layers = 4;
  job.plan.ep = 1;
  job.plan.order = {ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::pp, ParallelDim::dp};
  CHECK(simulate_training(job, topo).step_time.value() > 0);
}

TEST_CASE("expert tensor parallelism splits each expert over etp ranks, which gather the tokens their EP rank received") {
  // 16 ranks a stage, TP 4, EP 2, ETP 2: the experts' mapping is etp (2) x ep (2) x the rest (4).
  ParallelismPlan p;
  p.tp = 4, p.dp = 4, p.ep = 2, p.etp = 2;
  CHECK(expert_data_parallel_size(p) == 4);
  CHECK(expert_tensor_parallel_ranks(p, 0) == std::vector<int>{0, 1});
  CHECK(expert_parallel_ranks(p, 0) == std::vector<int>{0, 2});
  CHECK(expert_data_parallel_ranks(p, 0) == std::vector<int>{0, 4, 8, 12});
  TrainingJob job = mixtral_job(4, 1, 4, 2);
  job.plan.etp = 2;
  // Each GPU holds 8 / 2 experts, each split in two.
  ParallelismPlan whole_experts = job.plan;
  whole_experts.etp = 1;
  CHECK(layer_parameters(job.model, job.plan, 0).expert == Approx(layer_parameters(job.model, whole_experts, 0).expert / 2));
  // The layer gathers the 1,024 tokens each rank routes (4,096 / TP 4) x top 2 over the ETP pair and
  // runs 1/2 of the 16,384-wide FFN on them: 4,096 tokens an EP rank, 1,024 an expert.
  const Shard shard = shard_of(job);
  const auto ops = layer_forward_ops(job.model, 0, shard);
  auto find = [&](const std::string& name) { return *std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return o.name == name; }); };
  CHECK(find("etp_allgather").bytes == Approx(1024.0 * 2 * 2 * 4096 * 2));
  CHECK(find("etp_reducescatter").bytes == Approx(find("etp_allgather").bytes));
  CHECK(find("expert_fc1").shape.m == 1024);
  CHECK(find("expert_fc1").shape.n == 2 * 14336 / 2);
  // It runs, its gathers count as expert communication, and folding agrees with every rank simulated.
  const topology::Topology topo = h100_nodes(2);
  job.global_batch = 16;
  const TrainingResult folded = simulate_training(job, topo);
  CHECK(folded.breakdown.ep_comm > 0);
  CHECK(simulate_training(job, topo, {.fold = false}).step_time.value() == Approx(folded.step_time.value()).epsilon(0.01));
  job.plan.etp = 3;
  CHECK_THROWS_AS(simulate_training(job, topo), std::invalid_argument);
}

TEST_CASE("an EP group of eight stays on one node's NVLink, and the experts' optimizer shards over every rank holding them") {
  const topology::Topology topo = h100_nodes(8);
  TrainingJob job = mixtral_job(2, 1, 32, 8);
  const TrainingResult folded = simulate_training(job, topo);
  // The same EP group spread over eight nodes (a rank every eighth GPU): the all-to-alls cross the
  // fabric, slower than NVLink.
  job.plan.order = {ParallelDim::tp, ParallelDim::dp, ParallelDim::ep, ParallelDim::cp, ParallelDim::pp};
  const TrainingResult spread = simulate_training(job, topo);
  CHECK(spread.breakdown.ep_comm > 2.0 * folded.breakdown.ep_comm);
  // 64 ranks a stage over ep 8: eight ranks hold each expert, so its optimizer states are an eighth.
  job.plan.order = ParallelismPlan().order;
  const MemoryReport m = estimate_memory(job, *topo.gpu);
  const StageParameters params = stage_parameters(job.model, job.plan, 0);
  CHECK(m.stages[0].optimizer.value() == Approx(12.0 * (params.dense / 32.0 + params.expert / 8.0)));
  // Folding agrees with the unfolded simulation, which reduces every expert-data-parallel group.
  job.global_batch = 32;
  CHECK(simulate_training(job, topo, {.fold = false}).step_time.value() == Approx(simulate_training(job, topo).step_time.value()).epsilon(0.01));
}

TEST_CASE("sequence parallelism or TP overlap asked for at tp 1 changes nothing and says so") {
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job = job_of(gpt(4, 2048, 16, 2048), 1, 1, 8, 16);
  const TrainingResult plain = simulate_training(job, topo);
  job.plan.sequence_parallel = true;
  const TrainingResult sp = simulate_training(job, topo);
  CHECK(sp.step_time.value() == Approx(plain.step_time.value()).epsilon(1e-12));
  CHECK(std::any_of(sp.notes.begin(), sp.notes.end(), [](const std::string& n) { return n == "sequence_parallel applies with tp > 1 only: at tp 1 it changes nothing"; }));
  CHECK(std::none_of(plain.notes.begin(), plain.notes.end(), [](const std::string& n) { return n.find("tp > 1 only") != std::string::npos; }));
}

TEST_CASE("time to train counts whole steps: a budget under one step takes one") {
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job = job_of(gpt(4, 2048, 16, 2048), 1, 1, 8, 64);
  job.token_budget = 1000;  // under one step's 64 x 2048 tokens
  const TrainingResult one = simulate_training(job, topo);
  CHECK(one.time_to_train.value() == Approx(one.step_time.value()));
  CHECK(one.gpu_hours == Approx(one.step_time.value() * 8 / 3600));
  // 2.5 steps' tokens take 3 steps.
  job.token_budget = 2.5 * 64 * 2048;
  CHECK(simulate_training(job, topo).time_to_train.value() == Approx(3 * one.step_time.value()));
}

TEST_CASE("an OOM verdict names what overflows and by how much") {
  TrainingJob job;
  job.model = preset("llama3-70b");
  job.plan.dp = 8;
  job.global_batch = 8;
  job.plan.zero_stage = 0;
  const MemoryReport m = estimate_memory(job, *h100_nodes(1).gpu);
  CHECK_FALSE(m.fits());
  CHECK_THAT(m.verdict(), Catch::Contains("OOM") && Catch::Contains("GiB over") && Catch::Contains("optimizer states"));
  // Far over: the tensors alone overflow, so nothing is called marginal.
  CHECK_THAT(m.verdict(), !Catch::Contains("marginal"));
}

TEST_CASE("an OOM that only the fragmentation allowance causes is called marginal, with the waste it tolerates") {
  const auto gib = [](double g) { return Bytes(g * double(1ull << 30)); };
  MemoryReport m;
  m.capacity = gib(74.5);
  StageMemory s;
  s.weights = gib(28.0);
  s.gradients = gib(15.0);
  s.optimizer = gib(11.0);
  s.activations = gib(18.0);  // tensors 72 GiB
  s.comm_buffers = gib(0.5);
  s.allowance = gib(1.0 + 7.2);  // the CUDA context and 10% of the tensors
  m.stages.push_back(s);
  REQUIRE_FALSE(m.fits());
  // 72 + 0.5 + 1 = 73.5 GiB without fragmentation: 1.0 GiB to spare, 1.4% of the tensors.
  CHECK_THAT(m.verdict(), Catch::Contains("OOM") && Catch::Contains("takes 73.5 GiB and fits") && Catch::Contains("wastes under 1.0 GiB (1.4% of the tensors)") &&
                              Catch::Contains("marginal"));
  CHECK(m.marginal());
  // A second stage over without the allowance makes the plan a plain OOM, though the first, fuller
  // by its allowance, is marginal (the verdict describes the fullest stage).
  StageMemory firm = s;
  firm.allowance = gib(1.0);
  firm.comm_buffers = gib(3.0);  // 72 + 3 + 1 = 76 GiB
  firm.stage = 1;
  m.stages.push_back(firm);
  CHECK_FALSE(m.marginal());
  // The verdict names the stage that stops the plan, not the fuller marginal one.
  CHECK_THAT(m.verdict(), Catch::Contains("OOM: stage 1 needs 76.0 GiB") && !Catch::Contains("marginal"));
  m.stages.pop_back();
  // One GiB more of activations and even the tensors overflow: a plain OOM.
  m.stages[0].activations = gib(19.5);
  CHECK_FALSE(m.marginal());
  CHECK_THAT(m.verdict(), Catch::Contains("OOM") && !Catch::Contains("marginal"));
  // A few MiB over reads as over, not "74.5 GiB of 74.5 GiB, 0.0 GiB over".
  m.stages[0].allowance = Bytes(0);
  m.stages[0].comm_buffers = Bytes(0);
  m.stages[0].activations = Bytes(gib(74.5 - 28.0 - 15.0 - 11.0).value() + 3.0 * (1ull << 20));
  CHECK_THAT(m.verdict(), Catch::Contains("needs 74.50 GiB of 74.50 GiB, 3 MiB over"));
}

TEST_CASE("impossible plans in a scenario name the file, the line and the clash") {
  test::TempDir dir;
  const auto file = dir.write("s.yaml", R"(scenario:
  name: bad
  kind: training
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {tp: 3, dp: 2}
  batch: {global: 8}
)");
  const std::string msg = test::input_error([&] { load_training_scenario(file); });
  CHECK_THAT(msg, Catch::Contains("s.yaml:6:") && Catch::Contains("tp = 3 must divide the model's 32 attention heads"));
  const auto big = dir.write("big.yaml", R"(scenario:
  name: bad
  kind: training
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {tp: 8, dp: 2}
  batch: {global: 8}
)");
  CHECK_THAT(test::input_error([&] { load_training_scenario(big); }), Catch::Contains("16 GPUs; the topology has 8"));
  const auto typo = dir.write("typo.yaml", R"(scenario:
  name: bad
  kind: training
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {tp: 8, sequence_paralel: true}
  batch: {global: 8}
)");
  CHECK_THAT(test::input_error([&] { load_training_scenario(typo); }), Catch::Contains("sequence_parallel"));
  const auto sharded = dir.write("sharded.yaml", R"(scenario:
  name: bad
  kind: training
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {dp: 8, zero_stage: 2, all_reduce_gradients: true}
  batch: {global: 8}
)");
  CHECK_THAT(test::input_error([&] { load_training_scenario(sharded); }),
             Catch::Contains("sharded.yaml:6:") && Catch::Contains("all_reduce_gradients") && Catch::Contains("zero_stage 2"));
}

TEST_CASE("ZeRO-1 that all-reduces whole gradients (DeepSpeed's BF16_Optimizer) moves more than the reduce-scatter") {
  // Two single-GPU hosts on one slow link, no overlap: the gradient reduction is on the step's path.
  const topology::Topology topo = two_hosts_on_a_slow_link();
  TrainingJob job = zero1_without_overlap(2);
  const TrainingResult scattered = simulate_training(job, topo);
  job.plan.all_reduce_gradients = true;
  const TrainingResult reduced = simulate_training(job, topo);
  // Expectation from ring arithmetic: the reduce-scatter path is an fp32 reduce-scatter (R) and a
  // bf16 weight all-gather (R / 2); the all-reduce path is R + R (the all-reduce is a reduce-scatter
  // and an all-gather of the same bytes) + R / 2. So the DP part grows by two thirds, within the
  // collectives' latencies.
  CHECK(reduced.breakdown.dp_comm > scattered.breakdown.dp_comm);
  CHECK(reduced.breakdown.dp_comm - scattered.breakdown.dp_comm == Approx(scattered.breakdown.dp_comm * 2.0 / 3.0).epsilon(0.05));
  CHECK(reduced.step_time.value() > scattered.step_time.value());
  // Memory is ZeRO-1's either way.
  CHECK(reduced.memory.worst().total().value() == Approx(scattered.memory.worst().total().value()));
}

TEST_CASE("the step's Perfetto trace has every GPU's passes and the links' loads") {
  const topology::Topology topo = h100_nodes(2);
  TrainingJob job;
  job.model = gpt(4, 1024, 8, 2048, 1024);
  job.plan.pp = 2;
  job.plan.dp = 8;
  job.global_batch = 32;
  const TrainingResult r = simulate_training(job, topo, {.fold = true, .trace = true});
  const auto trace = nlohmann::json::parse(r.trace);
  const auto& events = trace.is_array() ? trace : trace.at("traceEvents");
  std::set<int> gpus_with_passes;
  int forward = 0, counters = 0;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "forward") {
      ++forward;
      gpus_with_passes.insert(e.at("pid").get<int>());
    }
    if (e.value("ph", "") == "C") ++counters;
  }
  // Two stages of one folded pipeline, 4 micro-batches each.
  CHECK(gpus_with_passes.size() == 2);
  CHECK(forward >= 2 * 4);
  CHECK(counters > 0);
  // Every process an event sits on is named (the barrier after the gradients had sat on an unnamed
  // one), and the GPUs' streams are named as docs/training.md describes them.
  std::set<int> pids, named;
  std::map<int, std::string> streams;
  for (const auto& e : events) {
    pids.insert(e.at("pid").get<int>());
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") named.insert(e.at("pid").get<int>());
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" && e.at("pid") == 0) streams[e.at("tid").get<int>()] = e.at("args").at("name");
  }
  CHECK(pids == named);
  CHECK(streams[0] == "compute");
  CHECK(streams[1] == "data-parallel collectives");
  CHECK(simulate_training(job, topo).trace.empty());
}

TEST_CASE("a Megatron-Core 1.7B step on one H200: a little faster than eager PyTorch measured there") {
  // tests/data/calibrate/h200-device-2026-12-04/torch-probe-step.json: scripts/torch-probe.py's
  // whole step of the 1.7B (24 layers, h 2048, vocab 131072, 4 micro-batches of one 4k sequence,
  // cuDNN attention, Megatron's mixed-precision AdamW) on one H200 SXM. Eager PyTorch runs unfused
  // kernels (bias and GeLU apart, q/k/v copies, a per-tensor optimizer), so the model of
  // Megatron's fused step must come out faster, but not by much.
  std::ifstream in(std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/h200-device-2026-12-04/torch-probe-step.json");
  REQUIRE(in);
  const auto probe = nlohmann::json::parse(in);
  double measured = 0;
  for (const auto& s : probe.at("samples")) {
    if (s.at("section") == "step" && s.at("name") == "train_step") measured = s.at("seconds");
  }
  REQUIRE(measured > 0);
  const topology::Topology topo = from_text("topology: {name: t, node: hgx-h200, nodes: 1, fabric: {kind: none}}\n");
  TrainingJob job;
  job.model = gpt(24, 2048, 16, 4096, 131072);
  job.micro_batch = 1;
  job.global_batch = 4;
  job.recompute = Recompute::none;
  const TrainingResult r = simulate_training(job, topo);
  INFO("predicted " << r.step_time.value() << " s, measured " << measured << " s");
  CHECK(r.step_time.value() < measured);
  CHECK(r.step_time.value() > 0.85 * measured);
}

TEST_CASE("the attention op's causal-tail FLOPs: one 128-query block over the whole sequence, MLA and CP alike") {
  // row_flops = 2 x 128 x s x (d_qk + d_v): QK^T and PV of one query block against all s keys.
  // DeepSeek-V3's MLA: d_qk = 128 + 64 = 192, d_v = 128, s = 4096.
  const TransformerSpec ds = preset("deepseek-v3");
  Shard shard;
  const auto att = [](const std::vector<Op>& ops) {
    for (const auto& op : ops) {
      if (op.kind == OpKind::attention) return op;
    }
    FAIL("no attention op");
    return Op{};
  };
  const Op mla = att(layer_forward_ops(ds, 0, shard));
  CHECK(mla.row_flops == Approx(2.0 * 128 * 4096 * (192 + 128)));
  // Its FLOPs: 2 x tokens x (s/2) x heads x (d_qk + d_v), the causal half.
  CHECK(mla.flops == Approx(2.0 * 4096 * 2048 * 128 * (192 + 128)));
  // With context parallelism a rank holds s/cp queries but its ring steps still walk all s keys: the
  // FLOPs split by cp, the tail does not (docs/training.md, Limitations).
  const TransformerSpec m = gpt(4, 4096, 32, 8192);
  const Op whole = att(layer_forward_ops(m, 0, shard));
  shard.cp = 2;
  const Op split = att(layer_forward_ops(m, 0, shard));
  CHECK(split.flops == Approx(whole.flops / 2));
  CHECK(split.row_flops == Approx(whole.row_flops));
  CHECK(whole.row_flops == Approx(2.0 * 128 * 8192 * 256));
}

TEST_CASE("MLA under sequence parallelism: duplicated down-projections on the shard, latents gathered over TP") {
  // Expectation (Megatron-Core's MLASelfAttention with TELinear down-projections, parallel_mode
  // "duplicated"): at TP 8 with sequence parallelism each rank runs q_down and kv_down on its T/8
  // tokens, and the TP all-gathers carry the rope key (64), the query latent (1536) and the
  // key/value latent (512) of all T tokens, not the 7168-wide hidden states. They are not
  // userbuffers GEMMs, so tp_overlap leaves them exposed. Without sequence parallelism the
  // down-projections run on all T tokens of every rank and nothing is gathered.
  const TransformerSpec ds = preset("deepseek-v3");
  Shard shard;
  shard.tp = 8;
  shard.sequence_parallel = true;
  const double tokens = ds.seq_len;
  auto find = [](const std::vector<Op>& ops, const std::string& name) -> const Op* {
    for (const auto& op : ops) {
      if (op.name == name) return &op;
    }
    return nullptr;
  };
  const std::vector<Op> sp = layer_forward_ops(ds, 0, shard);
  REQUIRE(find(sp, "q_down"));
  CHECK(find(sp, "q_down")->shape.m == tokens / 8);
  CHECK(find(sp, "kv_down")->shape.m == tokens / 8);
  CHECK(find(sp, "q_up")->shape.m == tokens);
  CHECK(find(sp, "tp_allgather_attn") == nullptr);
  double gathered = 0;
  for (const auto& op : sp) {
    if (op.kind == OpKind::comm && op.comm_op == CollectiveOp::all_gather && op.name.find("ffn") == std::string::npos) {
      CHECK_FALSE(op.userbuffers);
      gathered += op.bytes;
    }
  }
  CHECK(gathered == Approx(tokens * (64 + 1536 + 512) * 2.0));
  shard.sequence_parallel = false;
  const std::vector<Op> whole = layer_forward_ops(ds, 0, shard);
  CHECK(find(whole, "q_down")->shape.m == tokens);
  for (const auto& op : whole) CHECK_FALSE((op.kind == OpKind::comm && op.comm_op == CollectiveOp::all_gather));
  // The latents kept, the norms' inputs (16-bit) and outputs (the up-projections' inputs), split with
  // the sequence: 1,024 more query-latent columns keep 4 bytes a token each, on T/8 tokens with
  // sequence parallelism, on all T without.
  TransformerSpec wider = ds;
  wider.mla->q_lora_rank += 1024;
  for (bool sp : {true, false}) {
    shard.sequence_parallel = sp;
    const double delta = layer_activation_bytes(wider, 0, shard, Recompute::selective) - layer_activation_bytes(ds, 0, shard, Recompute::selective);
    CHECK(delta == Approx((sp ? tokens / 8 : tokens) * 1024 * 4.0));
  }
  // Under tp_overlap the latent gathers stay exposed (20 us each, both ways, the backward a
  // reduce-scatter beside the linear input's re-gather), and the rope key, no GEMM's input, is not
  // gathered again backward.
  shard.sequence_parallel = true;
  const CommTime fixed = [](CommGroup, CollectiveOp, double) { return Seconds(20e-6); };
  const topology::Topology topo = h100_nodes(1);
  const OpsTime t = time_ops(layer_forward_ops(ds, 0, shard), *topo.gpu, hardware::Dtype::bf16, fixed, Recompute::none, true, shard.tp);
  for (const auto& op : t.ops) {
    if (op.name == "tp_allgather_q_latent" || op.name == "tp_allgather_kv_latent") {
      CHECK(op.forward == Approx(20e-6));
      CHECK(op.backward == Approx(40e-6));
    }
    if (op.name == "tp_allgather_rope_key") CHECK(op.backward == Approx(20e-6));
  }
}

TEST_CASE("the per-operation tables account for every second of compute and TP communication") {
  // Expectation: one stage (no bubble), Llama 3 8B at TP 2, DP 4, with and without fused gradient
  // accumulation: the layer table times the layers, plus the embedding's and the head's tables, times
  // the micro-batches, is the step's compute plus exposed TP time. The unfused accumulation and the
  // embedding table's gradient are rows of their own.
  const topology::Topology topo = h100_nodes(1);
  TrainingJob job = llama3_8b_tp2_dp4(16);
  for (bool fused : {true, false}) {
    job.plan.grad_accumulation_fusion = fused;
    const TrainingResult r = simulate_training(job, topo);
    auto total = [](const std::vector<OpTiming>& ops) {
      double t = 0;
      for (const auto& op : ops) t += op.forward + op.backward + op.recompute;
      return t;
    };
    auto has = [](const std::vector<OpTiming>& ops, const char* name) {
      return std::any_of(ops.begin(), ops.end(), [&](const OpTiming& o) { return o.name == name; });
    };
    const double listed = (total(r.layer_ops) * job.model.layers + total(r.embedding_ops) + total(r.head_ops)) * job.micro_batches();
    CHECK(listed == Approx(r.breakdown.compute + r.breakdown.tp_comm).epsilon(1e-9));
    CHECK(has(r.embedding_ops, "embedding_gradient"));
    CHECK(has(r.layer_ops, "grad_accumulation") == !fused);
  }
}

TEST_CASE("a TP group that straddles two nodes sets the pace of every TP collective") {
  // Expectation: TP 6 on 8-GPU DGX H100 nodes. The first replica's group is GPUs 0-5, in one node;
  // the second's is GPUs 6-11, across two, whose all-gathers cross the fabric. With one replica the
  // TP time is the NVLink group's; with two it is the straddling group's, several times longer.
  const topology::Topology topo = h100_nodes(4);
  TrainingJob job;
  job.model = gpt(16, 6144, 48, 3072, 32256);
  job.plan.tp = 6;
  job.plan.sequence_parallel = true;
  job.micro_batch = 1;
  job.global_batch = 16;
  job.recompute = Recompute::selective;
  job.plan.dp = 1;
  CHECK(group_placements(job.plan, topo).tp.size() == 1);
  const TrainingResult one = simulate_training(job, topo);
  job.plan.dp = 2;
  const GroupPlacements two_groups = group_placements(job.plan, topo);
  REQUIRE(two_groups.tp.size() == 2);
  CHECK(topo.device(two_groups.tp[1].front()).node != topo.device(two_groups.tp[1].back()).node);
  const TrainingResult two = simulate_training(job, topo);
  // Per micro-batch: the same work per replica, the TP collectives slower.
  const double tp_one = one.breakdown.tp_comm / one.micro_batches, tp_two = two.breakdown.tp_comm / two.micro_batches;
  CHECK(tp_two > 2.0 * tp_one);
  CHECK(std::any_of(two.notes.begin(), two.notes.end(), [](const std::string& n) { return n.find("a TP group of 6 GPUs spans nodes") != std::string::npos; }));
  CHECK(std::none_of(one.notes.begin(), one.notes.end(), [](const std::string& n) { return n.find("spans nodes") != std::string::npos; }));
}

TEST_CASE("groups across nodes are told apart by where they meet the fabric") {
  // Expectation: TP 16 on 4 DGX H100 nodes of a rail-optimized fabric whose scalable units hold 3
  // nodes: the first group (nodes 0 and 1) meets each rail at one leaf; the second (nodes 2 and 3)
  // crosses from the first unit's leaves to the second's. Same node offsets and GPU indices, two
  // placements, and the crossing one is no faster.
  const topology::Topology topo = from_text(
      "topology:\n  name: t\n  node: dgx-h100\n  nodes: 4\n"
      "  fabric: {kind: rail-optimized, scalable_unit: 3, tiers: [{radix: 64}, {radix: 64}]}\n");
  ParallelismPlan p;
  p.tp = 16;
  p.dp = 2;
  const GroupPlacements g = group_placements(p, topo);
  REQUIRE(g.tp.size() == 2);
  CHECK(topo.device(g.tp[0].front()).node == 0);
  CHECK(topo.device(g.tp[1].front()).node == 2);
  const CollectiveModel cm(topo);
  auto all_gather = [&](const std::vector<topology::Vertex>& members) {
    Collective c;
    c.op = CollectiveOp::all_gather;
    c.ranks = members;
    c.bytes = Bytes(64.0 * (1 << 20));
    return cm.simulate(c).time.value();
  };
  CHECK(all_gather(g.tp[1]) >= all_gather(g.tp[0]));
  GroupCollectives timed(p, topo, cm);
  CHECK(timed(CommGroup::tp, CollectiveOp::all_gather, 64.0 * (1 << 20)).value() == Approx(std::max(all_gather(g.tp[0]), all_gather(g.tp[1]))));
  // Inside a node whose GPUs all meet the same NVSwitches, TP 2's four pairs are one placement; in
  // a PCIe tree, where which GPUs share a switch matters, they are not.
  ParallelismPlan pairs;
  pairs.tp = 2;
  pairs.dp = 4;
  CHECK(group_placements(pairs, h100_nodes(1)).tp.size() == 1);
  const topology::Topology pcie = from_text("topology: {name: t, node: l40s-pcie-8x, nodes: 1, fabric: {kind: none}}\n");
  CHECK(group_placements(pairs, pcie).tp.size() > 1);
}

TEST_CASE("ring attention passes keys and values to the next CP rank, on one GPU's NIC between nodes, and selective recompute re-runs it") {
  // CP 16 over two DGX H100 nodes: GPUs 7 and 15 send to the other node, each through one NIC. As an
  // NCCL all-gather (rings over all eight NICs) the exchange had come out 7x fast (a probe's find).
  const topology::Topology topo = h100_nodes(2);
  TrainingJob job;
  job.model = preset("llama3-8b");
  job.model.layers = 2;
  job.model.seq_len = 16384;
  job.plan.cp = 16;
  job.recompute = Recompute::selective;
  job.global_batch = 2;
  const TrainingResult r = simulate_training(job, topo);
  const auto op = [&](const char* name) {
    const auto it = std::find_if(r.layer_ops.begin(), r.layer_ops.end(), [&](const OpTiming& o) { return o.name == name; });
    REQUIRE(it != r.layer_ops.end());
    return *it;
  };
  const OpTiming exchange = op("cp_kv_exchange"), attention = op("attention");
  // Each rank sends the other 15 ranks' keys and values on: 15 chunks of 1,024 tokens x 2 x 8 heads x 128.
  CHECK(exchange.bytes == Approx(15.0 * 1024 * 2 * 8 * 128 * 2));
  const CollectiveModel cm(topo);
  Collective hop;
  hop.op = CollectiveOp::send_recv;
  hop.ranks = {topo.gpus()[7], topo.gpus()[8]};
  hop.bytes = Bytes(exchange.bytes);
  const double one_nic = cm.simulate(hop).time.value();
  // Exposed beyond the 15 of 16 attention steps it runs beside (the last has nothing to send), the
  // rest hidden.
  CHECK(exchange.forward == Approx(std::max(0.0, one_nic - attention.forward * 15 / 16)).epsilon(0.02));
  CHECK(exchange.forward > 0);
  CHECK(exchange.recompute == exchange.forward);
  // CP 2 across the nodes (TP 8 in each) at 2,048 tokens, where the transfer outlasts the attention:
  // one step of the two hides it (a probe found it hidden behind both).
  job.plan.tp = 8;
  job.plan.cp = 2;
  job.plan.sequence_parallel = true;
  job.model.seq_len = 2048;
  const TrainingResult pair = simulate_training(job, topo);
  const auto pair_op = [&](const char* name) {
    return *std::find_if(pair.layer_ops.begin(), pair.layer_ops.end(), [&](const OpTiming& o) { return o.name == name; });
  };
  hop.ranks = {topo.gpus()[0], topo.gpus()[8]};
  hop.bytes = Bytes(pair_op("cp_kv_exchange").bytes);
  REQUIRE(cm.simulate(hop).time.value() > pair_op("attention").forward);
  CHECK(pair_op("cp_kv_exchange").forward == Approx(cm.simulate(hop).time.value() - pair_op("attention").forward / 2).epsilon(0.02));
}

TEST_CASE("a rank's TP and CP groups are the ranks rank_of gives it with only tp, or only cp, changed") {
  ParallelismPlan p;
  p.tp = 2, p.cp = 3, p.dp = 2, p.pp = 2;
  const std::vector<std::vector<ParallelDim>> orders = {ParallelismPlan().order,
                                                        {ParallelDim::dp, ParallelDim::cp, ParallelDim::pp, ParallelDim::ep, ParallelDim::tp},
                                                        {ParallelDim::pp, ParallelDim::ep, ParallelDim::tp, ParallelDim::dp, ParallelDim::cp}};
  for (const auto& order : orders) {
    p.order = order;
    for (int t = 0; t < p.tp; ++t) {
      for (int c = 0; c < p.cp; ++c) {
        for (int d = 0; d < p.dp; ++d) {
          for (int s = 0; s < p.pp; ++s) {
            const int r = rank_of(p, RankCoord{t, c, d, s});
            std::vector<int> tp, cp;
            for (int i = 0; i < p.tp; ++i) tp.push_back(rank_of(p, RankCoord{i, c, d, s}));
            for (int i = 0; i < p.cp; ++i) cp.push_back(rank_of(p, RankCoord{t, i, d, s}));
            CHECK(tensor_parallel_ranks(p, r) == tp);
            CHECK(context_parallel_ranks(p, r) == cp);
          }
        }
      }
    }
  }
}

TEST_CASE("fp8 plans whose GEMM shapes Transformer Engine refuses are refused, and those it runs are not") {
  // TE's fp8 GEMMs need rows divisible by 8 and columns by 16 (assert_dim_for_fp8_exec). The widths
  // checked are the ones a TP (or expert-TP) rank multiplies: MLA's output projection takes
  // heads x v_head_dim, MoE experts their own width over etp.
  const auto job = [](TransformerSpec m, int tp, int etp) {
    TrainingJob j;
    j.model = std::move(m);
    j.plan.tp = tp;
    j.plan.etp = etp;
    j.plan.ep = 1;
    j.plan.dp = 1;
    j.plan.sequence_parallel = tp > 1;
    j.global_batch = 1;
    j.precision = hardware::Dtype::fp8;
    return j;
  };
  TransformerSpec ds = preset("deepseek-v3");
  CHECK_NOTHROW(check_job(job(ds, 8, 1), 1 << 20));
  ds.moe->expert_ffn_hidden = 1408;  // 88 a rank at etp 16
  CHECK_THROWS_WITH(check_job(job(ds, 16, 16), 1 << 20), Catch::Contains("expert_ffn_hidden / etp is 88"));
  // MLA: 20 heads of qk 72 and v 128 at TP 4 project 640 columns a rank (not 20 x 72 / 4 = 360).
  TransformerSpec mla = preset("deepseek-v3");
  mla.heads = 20;
  mla.kv_heads = 20;
  mla.head_dim = 72;
  CHECK_NOTHROW(check_job(job(mla, 4, 1), 1 << 20));
  // A model whose every layer has experts is not held to a dense ffn_hidden it never runs.
  TransformerSpec all_moe = preset("deepseek-v3");
  all_moe.moe->dense_layers = 0;
  all_moe.ffn_hidden = 8000;  // 1000 a rank at TP 8: not by 16
  CHECK_NOTHROW(check_job(job(all_moe, 8, 1), 1 << 20));
  all_moe.moe->dense_layers = 3;
  CHECK_THROWS_WITH(check_job(job(all_moe, 8, 1), 1 << 20), Catch::Contains("ffn_hidden / tp"));
}

TEST_CASE("TP divides the FFN widths a rank runs: none for a model of experts only, the shared experts' summed width") {
  const auto job = [](TransformerSpec m, int tp) {
    TrainingJob j;
    j.model = std::move(m);
    j.plan.tp = tp;
    j.plan.ep = 1;
    j.plan.dp = 1;
    j.plan.sequence_parallel = tp > 1;
    j.global_batch = 1;
    return j;
  };
  // Every layer has experts: ffn_hidden is never run, so TP need not divide it (a probe's Mixtral
  // with ffn_hidden 1004 had been refused at TP 8, though its step does not depend on the field).
  TransformerSpec mixtral = preset("mixtral-8x7b");
  REQUIRE(mixtral.moe->dense_layers == 0);
  mixtral.ffn_hidden = 1004;
  CHECK_NOTHROW(check_job(job(mixtral, 8), 1 << 20));
  mixtral.moe->dense_layers = 1;
  CHECK_THROWS_WITH(check_job(job(mixtral, 8), 1 << 20), Catch::Contains("tp = 8 must divide ffn_hidden = 1004"));
  // Two shared experts of 1028 are one MLP of 2056, which TP 8 divides; three of 1028 (3084) not.
  TransformerSpec ds = preset("deepseek-v3");
  ds.moe->shared_experts = 2;
  ds.moe->shared_expert_ffn_hidden = 1028;
  CHECK_NOTHROW(check_job(job(ds, 8), 1 << 20));
  ds.moe->shared_experts = 3;
  CHECK_THROWS_WITH(check_job(job(ds, 8), 1 << 20), Catch::Contains("summed FFN width 3 x 1028 = 3084"));
}

TEST_CASE("a stage's receive from the previous stage and its send to the next run side by side: overlapped sends are never slower than blocking") {
  // A probe's plan: four one-GPU stages on four nodes behind 25 Gb/s NICs, where a send of a
  // micro-batch's activations (8.4 MB, 2.7 ms) takes about a forward pass. With the pipeline's
  // sends on one stream per GPU, stage 1's send of micro-batch 0 had queued behind its receives of
  // micro-batches 1-3 (the outgoing link idle while the incoming one ran): overlapped 0.129 s against
  // 0.122 s blocking. PyTorch runs each pair of ranks on its own communicator and stream.
  test::TempDir dir;
  const auto file = dir.write("p.yaml", R"(scenario:
  name: p
  kind: training
  model: {name: m, layers: 16, hidden: 2048, heads: 16, ffn_hidden: 8192, activation: gelu, vocab: 256, seq_len: 2048,
          tied_embeddings: false, attention_dropout: 0.0, hidden_dropout: 0.0}
  topology:
    name: slow
    node:
      name: slow1
      gpu: h100-sxm5-80gb
      devices:
      - {name: gpu, kind: gpu, count: 1}
      - {name: nic, kind: nic, count: 1, rate: 25Gbps}
      links:
      - {from: gpu, to: nic, kind: pcie, bandwidth: 63GB/s}
    nodes: 4
    fabric: {kind: fat-tree, tiers: [{radix: 64}]}
  parallelism: {pp: 4, schedule: 1f1b, overlap_p2p: true}
  batch: {micro: 1, global: 8}
)");
  TrainingScenario sc = load_training_scenario(file);
  const double overlapped = simulate_training(sc.job, *sc.topology).step_time.value();
  sc.job.plan.overlap_p2p = false;
  const double blocking = simulate_training(sc.job, *sc.topology).step_time.value();
  CHECK(overlapped < blocking);
  // The same with the interleaved schedule (vpp 2, 16 micro-batches), whose last stage sends to the first.
  sc.job.plan.vpp = 2;
  sc.job.plan.schedule = PipelineSchedule::interleaved;
  sc.job.global_batch = 16;
  sc.job.plan.overlap_p2p = true;
  const double interleaved_overlapped = simulate_training(sc.job, *sc.topology).step_time.value();
  sc.job.plan.overlap_p2p = false;
  CHECK(interleaved_overlapped < simulate_training(sc.job, *sc.topology).step_time.value());
}
