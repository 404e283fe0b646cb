// Per-layer operations of a training step and their times. Formulas: docs/training.md.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "clustersim/hardware/attention_model.hpp"
#include "clustersim/models/training.hpp"
#include "training_internal.hpp"

namespace cs::models {

namespace {

// Transformer Engine's userbuffer overlap of the TP collectives (Megatron's --tp-comm-overlap with
// no --tp-comm-overlap-cfg, which leaves every layer at initialize_ub's default; TE 1.x
// transformer_engine/pytorch/module/base.py):
//   ring_exchange (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad): the GEMM in tp chunks, each running
//     while the next chunk arrives peer to peer over the copy engines (no SMs taken);
//   pipeline (proj_fprop, fc2_fprop): the GEMM in num_splits = 4 chunks, each chunk's
//     reduce-scatter behind the next chunk's GEMM, the last one's after it;
//   bulk (qkv/fc1 dgrad and wgrad): the re-gather of the saved input behind the data-gradient GEMM,
//     the input gradient's reduce-scatter behind the weight-gradient GEMM.
// The pipeline and bulk kernels run on num_sm = 16 SMs beside the GEMM (set_sm_margin 0), which
// loses that share of the GPU while they run.
constexpr double kTpPipelineSplits = 4.0;
constexpr double kTpCommSms = 16.0;

Op gemm(std::string name, std::int64_t m, std::int64_t n, std::int64_t k, double count = 1, bool weight_grad = true) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::gemm;
  // `count` identical products run as one batched kernel (cuBLAS strided-batched, grouped GEMM).
  op.shape = {std::max<std::int64_t>(m, 1), std::max<std::int64_t>(n, 1), std::max<std::int64_t>(k, 1), std::max<std::int64_t>(std::llround(count), 1)};
  op.count = count;
  op.flops = 2.0 * double(op.shape.m) * double(op.shape.n) * double(op.shape.k) * count;
  op.weight_grad = weight_grad;
  return op;
}

Op memory(std::string name, double bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::memory;
  op.bytes = bytes;
  return op;
}

Op comm(std::string name, CommGroup group, CollectiveOp c, double bytes) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::comm;
  op.group = group;
  op.comm_op = c;
  op.bytes = bytes;
  return op;
}

struct Dims {
  double tokens;        // per rank and micro-batch, after the context-parallel split
  double sp_tokens;     // held between TP regions (tokens / tp with sequence parallelism)
  bool tp_comm;
  bool sp;
};

Dims dims_of(const TransformerSpec& m, const Shard& s) {
  Dims d;
  d.tokens = double(s.micro_batch) * m.seq_len / s.cp;
  d.tp_comm = s.tp > 1;
  d.sp = s.sequence_parallel && s.tp > 1;
  d.sp_tokens = d.sp ? d.tokens / s.tp : d.tokens;
  return d;
}

// Entering a TP region: sequence parallelism all-gathers the sequence-split activations.
void enter_tp(std::vector<Op>& ops, const Dims& d, double width, const char* name) {
  if (d.sp) ops.push_back(comm(name, CommGroup::tp, CollectiveOp::all_gather, d.tokens * width * kActivationBytes));
}
// Leaving it: an all-reduce, or a reduce-scatter back to the sequence split.
void leave_tp(std::vector<Op>& ops, const Dims& d, double width, const char* name) {
  if (!d.tp_comm) return;
  ops.push_back(comm(name, CommGroup::tp, d.sp ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, d.tokens * width * kActivationBytes));
}

std::int64_t i64(double v) { return static_cast<std::int64_t>(std::llround(v)); }

void ffn_ops(std::vector<Op>& ops, const TransformerSpec& m, double tokens, double ffn, const std::string& prefix, double count = 1) {
  const double up = is_gated(m.activation) ? 2.0 : 1.0;
  ops.push_back(gemm(prefix + "fc1", i64(tokens), i64(up * ffn), m.hidden, count));
  // Activation (and the gate's product) reads the up-projections and writes one.
  ops.push_back(memory(prefix + "act", (up + 1.0) * tokens * ffn * kActivationBytes * count));
  ops.push_back(gemm(prefix + "fc2", i64(tokens), m.hidden, i64(ffn), count));
}

}  // namespace

PassTime& PassTime::operator+=(const PassTime& o) {
  compute += o.compute;
  tp += o.tp;
  cp += o.cp;
  ep += o.ep;
  flops += o.flops;
  return *this;
}

std::vector<Op> layer_forward_ops(const TransformerSpec& m, int layer, const Shard& s) {
  const Dims d = dims_of(m, s);
  const double h = m.hidden;
  const double tp = s.tp;
  std::vector<Op> ops;
  // Attention block.
  ops.push_back(memory("norm1", 2.0 * d.sp_tokens * h * kActivationBytes));
  const double heads = m.heads / tp;
  // Grouped KV heads fewer than the TP degree are replicated, one per rank.
  const double kv_heads = kv_heads_per_rank(m, s.tp);
  double kv_width = 0;  // keys and values this rank exchanges with its CP peers, per token
  if (m.mla) {
    // Megatron-Core builds MLA's down-projections duplicated (TELinear, parallel_mode "duplicated":
    // whole on every TP rank, as attention_parameters_per_rank counts them). With sequence
    // parallelism each rank runs them on its own sequence shard, and what crosses TP is the latents:
    // the column-parallel up-projections all-gather their (normed) inputs, and the rope key is
    // gathered on its own (MLASelfAttention.get_query_key_value_tensors). Transformer Engine's
    // userbuffers serve the qkv, proj, fc1 and fc2 GEMMs only, so under tp_overlap these gathers,
    // and the hidden states' gather before a column-parallel q_proj (no query compression), stay
    // exposed.
    const MlaSpec& a = *m.mla;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    auto gather = [&](double width, const char* name) {
      enter_tp(ops, d, width, name);
      if (d.sp) ops.back().userbuffers = false;
    };
    if (a.q_lora_rank > 0) {
      ops.push_back(gemm("q_down", i64(d.sp_tokens), a.q_lora_rank, m.hidden));
      ops.push_back(memory("q_norm", 2.0 * d.sp_tokens * a.q_lora_rank * kActivationBytes));
    }
    ops.push_back(gemm("kv_down", i64(d.sp_tokens), a.kv_lora_rank + a.qk_rope_head_dim, m.hidden));
    gather(a.qk_rope_head_dim, "tp_allgather_rope_key");
    if (d.sp) ops.back().linear_input = false;
    ops.push_back(memory("kv_norm", 2.0 * d.sp_tokens * a.kv_lora_rank * kActivationBytes));
    if (a.q_lora_rank > 0) {
      gather(a.q_lora_rank, "tp_allgather_q_latent");
      ops.push_back(gemm("q_up", i64(d.tokens), i64(heads * qk), a.q_lora_rank));
    } else {
      gather(h, "tp_allgather_attn");
      ops.push_back(gemm("q_proj", i64(d.tokens), i64(heads * qk), m.hidden));
    }
    gather(a.kv_lora_rank, "tp_allgather_kv_latent");
    ops.push_back(gemm("kv_up", i64(d.tokens), i64(heads * (a.qk_nope_head_dim + a.v_head_dim)), a.kv_lora_rank));
    kv_width = heads * (qk + a.v_head_dim);
  } else {
    enter_tp(ops, d, h, "tp_allgather_attn");
    ops.push_back(gemm("qkv", i64(d.tokens), i64((heads + 2.0 * kv_heads) * m.head_dim), m.hidden));
    kv_width = 2.0 * kv_heads * m.head_dim;
  }
  ops.push_back(memory("rope", 2.0 * d.tokens * (heads + kv_heads) * m.qk_head_dim() * kActivationBytes));
  if (s.cp > 1) {
    // Ring attention (Transformer Engine's default P2P exchange, AttnFuncWithCPAndKVP2P): in cp - 1
    // steps each CP rank passes the keys and values it holds to the next rank of the group, every
    // rank at once, so a send between nodes takes one GPU's NIC (an NCCL all-gather would spread its
    // rings over every NIC of the node). It runs inside the attention core, so selective recompute
    // re-runs it with the kernel.
    Op exchange = comm("cp_kv_exchange", CommGroup::cp, CollectiveOp::send_recv, (s.cp - 1.0) * d.tokens * kv_width * kActivationBytes);
    exchange.attention_core = true;
    exchange.ring = s.cp;
    ops.push_back(exchange);
  }
  const double v_dim = m.v_head_dim();
  if (s.flash_attention) {
    Op att;
    att.name = "attention";
    att.kind = OpKind::attention;
    att.attention_core = true;
    // Causal: a token attends to the half of the sequence before it on average (CP ranks hold
    // load-balanced chunks, so each rank does the same share).
    const double keys = m.seq_len / 2.0;
    att.flops = 2.0 * d.tokens * keys * heads * (m.qk_head_dim() + v_dim);
    // The equivalent batched GEMMs (one product per head), for profiles without a measured
    // attention efficiency.
    att.shape = {i64(d.tokens), i64(keys), m.qk_head_dim(), std::max<std::int64_t>(i64(heads), 1)};
    att.count = heads * (m.qk_head_dim() + v_dim) / m.qk_head_dim();
    // The longest walk in the kernel: the last block of queries against every key of the sequence
    // (with context parallelism the ring's steps together still walk the whole sequence).
    att.row_flops = hardware::attention_row_flops(m.seq_len, m.qk_head_dim(), v_dim);
    ops.push_back(att);
  } else {
    // Megatron's unfused path: batched score GEMMs over the whole s x s matrix (the causal mask is
    // applied, not skipped), a fused scale-mask-softmax, dropout on the probabilities (none at p = 0), and the
    // context GEMM; every s x s tensor passes through HBM.
    const double q_len = double(m.seq_len) / s.cp;
    const double batch = double(s.micro_batch) * heads;
    const double elements = batch * q_len * m.seq_len;
    Op scores = gemm("attention_scores", i64(q_len), m.seq_len, m.qk_head_dim(), batch);
    scores.attention_core = true;
    scores.fp8 = false;  // attention stays in 16 bits under fp8
    ops.push_back(scores);
    Op softmax = memory("softmax", elements * (kActivationBytes + kActivationBytes));
    softmax.attention_core = true;
    ops.push_back(softmax);
    if (m.attention_dropout > 0) {
      Op dropout = memory("attention_dropout", elements * (kActivationBytes + kActivationBytes + 1.0));
      dropout.attention_core = true;
      ops.push_back(dropout);
    }
    Op context = gemm("attention_context", i64(q_len), i64(v_dim), m.seq_len, batch);
    context.attention_core = true;
    context.fp8 = false;
    ops.push_back(context);
  }
  ops.push_back(gemm("out_proj", i64(d.tokens), m.hidden, i64(heads * m.v_head_dim())));
  leave_tp(ops, d, h, "tp_reduce_attn");
  ops.push_back(memory("residual1", 3.0 * d.sp_tokens * h * kActivationBytes));
  // FFN block.
  ops.push_back(memory("norm2", 2.0 * d.sp_tokens * h * kActivationBytes));
  if (!m.is_moe_layer(layer)) {
    enter_tp(ops, d, h, "tp_allgather_ffn");
    ffn_ops(ops, m, d.tokens, m.ffn_hidden / tp, "");
    leave_tp(ops, d, h, "tp_reduce_ffn");
  } else {
    const MoeSpec& e = *m.moe;
    // Megatron's MoE with TP needs sequence parallelism: each TP rank routes its own tokens, and
    // experts are not split over TP (expert tensor parallelism 1).
    const double routed = d.tp_comm ? d.tokens / tp : d.tokens;
    Op router = gemm("router", i64(routed), e.experts, m.hidden);
    router.fp8 = false;  // Megatron's router is a plain linear layer, outside Transformer Engine
    ops.push_back(router);
    // A capacity factor above 1 pads each expert's tokens to its capacity when they are permuted,
    // before the all-to-all (Megatron-Core's drop_and_pad, moe_pad_expert_input_to_capacity): the
    // padded buffers are what is exchanged and what the experts compute on.
    const double dispatched = routed * e.top_k * e.capacity_factor;
    ops.push_back(memory("permute", 2.0 * dispatched * h * kActivationBytes));
    if (s.ep > 1) ops.push_back(comm("ep_dispatch", CommGroup::ep, CollectiveOp::all_to_all, dispatched * h * kActivationBytes));
    // Expert tensor parallelism (Megatron-Core's alltoall dispatcher): the tokens an EP rank
    // received are all-gathered over its expert-tensor-parallel group, each rank runs 1/etp of its
    // experts' FFN on all of them, and the outputs are reduce-scattered back before the combine.
    const double gathered = dispatched * s.etp;
    if (s.etp > 1) ops.push_back(comm("etp_allgather", CommGroup::etp, CollectiveOp::all_gather, gathered * h * kActivationBytes));
    const double local_experts = double(e.experts) / s.ep;
    const double per_expert = gathered * s.ep / e.experts;
    ffn_ops(ops, m, per_expert, e.expert_ffn_hidden / s.etp, "expert_", local_experts);
    if (s.etp > 1) ops.push_back(comm("etp_reducescatter", CommGroup::etp, CollectiveOp::reduce_scatter, gathered * h * kActivationBytes));
    if (s.ep > 1) ops.push_back(comm("ep_combine", CommGroup::ep, CollectiveOp::all_to_all, dispatched * h * kActivationBytes));
    ops.push_back(memory("unpermute", 2.0 * dispatched * h * kActivationBytes));
    if (e.shared_experts > 0) {
      enter_tp(ops, d, h, "tp_allgather_shared");
      ffn_ops(ops, m, d.tokens, double(e.shared_experts) * e.shared_expert_ffn_hidden / tp, "shared_");
      leave_tp(ops, d, h, "tp_reduce_shared");
    }
  }
  ops.push_back(memory("residual2", 3.0 * d.sp_tokens * h * kActivationBytes));
  return ops;
}

std::vector<Op> embedding_forward_ops(const TransformerSpec& m, const Shard& s) {
  const Dims d = dims_of(m, s);
  std::vector<Op> ops;
  ops.push_back(memory("embedding", d.tokens * m.hidden * kActivationBytes));
  // Vocabulary-parallel embedding: each TP rank looks up its slice of the vocabulary, then the
  // partial rows are summed.
  leave_tp(ops, d, m.hidden, "tp_reduce_embedding");
  // Without sequence parallelism the all-reduce's backward is the identity: the embedding's
  // gradient is the whole output gradient every rank holds already.
  if (d.tp_comm && !d.sp) ops.back().passes = Op::Passes::forward;
  for (Op& op : ops) op.in_layer = false;
  return ops;
}

std::vector<Op> head_forward_ops(const TransformerSpec& m, const Shard& s) {
  const Dims d = dims_of(m, s);
  std::vector<Op> ops;
  ops.push_back(memory("final_norm", 2.0 * d.sp_tokens * m.hidden * kActivationBytes));
  enter_tp(ops, d, m.hidden, "tp_allgather_head");
  if (d.tp_comm && !d.sp) {
    // Without sequence parallelism the output layer's input enters the TP region as is (identity
    // forward) and its gradient is all-reduced backward (copy_to_tensor_model_parallel_region).
    Op grad = comm("tp_reduce_head_input_grad", CommGroup::tp, CollectiveOp::all_reduce, d.tokens * m.hidden * kActivationBytes);
    grad.passes = Op::Passes::backward;
    ops.push_back(grad);
  }
  const double vocab = double(m.vocab) / s.tp;
  Op logits_gemm = gemm("logits", i64(d.tokens), i64(vocab), m.hidden);
  logits_gemm.fp8 = false;
  ops.push_back(logits_gemm);
  // Megatron's vocab-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py) makes
  // whole passes over the fp32 logits slice. Forward: cast the 16-bit logits to fp32 (read 2, write
  // 4 bytes per element), row max (read 4), subtract it in place (read and write 4), exp in place
  // (read and write 4), row sum (read 4), divide in place to the softmax kept for backward (read and
  // write 4): 38 bytes. Backward: scale the softmax by the incoming gradient in place (read and
  // write 4) and cast the gradient back to 16 bits (read 4, write 2): 14 bytes.
  const double logits = d.tokens * vocab;
  Op loss = memory("cross_entropy", logits * (kActivationBytes + 4.0 + 4.0 + 8.0 + 8.0 + 4.0 + 8.0));
  loss.backward_bytes = logits * (8.0 + 4.0 + kActivationBytes);
  ops.push_back(loss);
  if (d.tp_comm) {
    // The row max, the sum of exponentials and the target logits, reduced forward; the backward
    // scales the saved softmax locally.
    Op reduce = comm("tp_reduce_loss", CommGroup::tp, CollectiveOp::all_reduce, d.tokens * 4.0 * 3.0);
    reduce.passes = Op::Passes::forward;
    ops.push_back(reduce);
  }
  for (Op& op : ops) op.in_layer = false;
  return ops;
}

std::string gemm_range_problem(const TransformerSpec& m, const Shard& s, const hardware::HardwareProfile& gpu) {
  std::vector<Op> ops = layer_forward_ops(m, 0, s);
  if (m.moe && !m.is_moe_layer(0)) {
    const std::vector<Op> moe = layer_forward_ops(m, m.moe->dense_layers, s);
    ops.insert(ops.end(), moe.begin(), moe.end());
  }
  const std::vector<Op> head = head_forward_ops(m, s);
  ops.insert(ops.end(), head.begin(), head.end());
  for (const Op& op : ops) {
    if (op.shape.m <= 0) continue;  // no matrix product
    if (op.kind == OpKind::attention && gpu.attention.measured()) continue;
    const auto [m_, n, k, batch] = op.shape;
    // The forward product and the backward's two (as the step times them).
    for (const hardware::GemmShape shape : {op.shape, hardware::GemmShape{m_, k, n, batch}, hardware::GemmShape{k, n, m_, batch}}) {
      if (std::string problem = hardware::gemm_shape_problem(shape); !problem.empty()) return fmt::format("the {} {}", op.name, problem);
    }
  }
  return {};
}

namespace {

// A training step keeps the GPU busy: its compute runs at the sustained rate.
double gemm_seconds(const hardware::HardwareProfile& hw, hardware::GemmShape shape, hardware::Dtype dtype) {
  return hardware::estimate_gemm(hw, shape, dtype, hardware::Load::sustained).time.value();
}

double memory_seconds(const hardware::HardwareProfile& hw, double bytes) {
  return bytes / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency) + hw.kernel_launch_overhead.value();
}

// The dtype attention runs in: 16-bit (fp8 training keeps attention in bf16, as Transformer
// Engine's recipes do by default).
hardware::Dtype attention_dtype(hardware::Dtype d) { return d == hardware::Dtype::fp16 ? hardware::Dtype::fp16 : hardware::Dtype::bf16; }

double attention_seconds(const hardware::HardwareProfile& hw, const Op& op, hardware::Dtype dtype, bool backward) {
  const hardware::Dtype ad = attention_dtype(dtype);
  const double flops = hardware::attention_pass_flops(op.flops, backward);
  if (hw.attention.measured()) {
    const Flops row(hardware::attention_pass_flops(op.row_flops, backward));
    return hardware::fused_attention_time(hw, Flops(flops), row, ad, backward, hardware::Load::sustained).value();
  }
  // No measured efficiency: the GEMM model at the attention's matrix-product shape.
  const auto e = hardware::estimate_gemm(hw, op.shape, ad, hardware::Load::sustained);
  const double per_flop = e.time.value() / (2.0 * double(op.shape.batch) * double(op.shape.m) * double(op.shape.n) * double(op.shape.k));
  return flops * per_flop;
}

}  // namespace

OpsTime time_ops(const std::vector<Op>& ops, const hardware::HardwareProfile& hw, hardware::Dtype dtype, const CommTime& comm_time,
                 Recompute recompute, bool tp_overlap, int tp, double weight_casts) {
  const bool fp8 = dtype == hardware::Dtype::fp8;
  if (!hw.supports(dtype)) {
    throw std::invalid_argument(fmt::format("precision {}: the {} profile has no {} peak", hardware::to_string(dtype), hw.name,
                                            hardware::to_string(dtype)));
  }
  OpsTime out;
  // Times of each op's forward and backward, then the exposed part of each collective.
  std::vector<double> fwd(ops.size(), 0.0), bwd(ops.size(), 0.0);
  std::vector<double> dgrad_of(ops.size(), 0.0), wgrad_of(ops.size(), 0.0);  // a GEMM's backward, in its two products
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    switch (op.kind) {
      case OpKind::gemm: {
        // One batched kernel per pass direction; a fractional count scales the time.
        const auto [m, n, k, batch] = op.shape;
        const double scale = op.count / double(batch);
        const bool in_fp8 = fp8 && op.fp8;
        const hardware::Dtype gd = fp8 && !op.fp8 ? hardware::Dtype::bf16 : dtype;
        const double one = gemm_seconds(hw, op.shape, gd);
        const double dgrad = gemm_seconds(hw, {m, k, n, batch}, gd);
        const double wgrad = op.weight_grad ? gemm_seconds(hw, {k, n, m, batch}, gd) : 0.0;
        fwd[i] = one * scale;
        bwd[i] = (dgrad + wgrad) * scale;
        dgrad_of[i] = dgrad * scale;
        wgrad_of[i] = wgrad * scale;
        if (in_fp8) {
          // Transformer Engine casts each GEMM input to fp8 (read 16-bit, write 8-bit) in both passes:
          // the activations every micro-batch, the weights once a step (weight_casts).
          const double cast = 3.0 * (double(m) * double(k) + weight_casts * double(k) * double(n)) * op.count;
          fwd[i] += memory_seconds(hw, cast);
          bwd[i] += memory_seconds(hw, 3.0 * double(m) * double(n) * op.count);
        }
        out.forward.flops += op.flops;
        out.backward.flops += op.flops * (op.weight_grad ? 2.0 : 1.0);
        break;
      }
      case OpKind::attention:
        fwd[i] = attention_seconds(hw, op, dtype, false);
        bwd[i] = attention_seconds(hw, op, dtype, true);
        out.forward.flops += op.flops;
        out.backward.flops += hardware::attention_pass_flops(op.flops, true);
        break;
      case OpKind::memory:
        fwd[i] = memory_seconds(hw, op.bytes);
        // The backward pass reads the incoming gradient and the saved input and writes a gradient.
        bwd[i] = memory_seconds(hw, op.backward_bytes > 0 ? op.backward_bytes : 1.5 * op.bytes);
        break;
      case OpKind::comm: break;
    }
  }
  auto neighbour_gemm = [&](std::size_t i, bool after, const std::vector<double>& t) {
    if (after) {
      for (std::size_t j = i + 1; j < ops.size(); ++j) {
        if (ops[j].kind == OpKind::gemm) return t[j];
      }
    } else {
      for (std::size_t j = i; j-- > 0;) {
        if (ops[j].kind == OpKind::gemm) return t[j];
      }
    }
    return 0.0;
  };
  auto attention_time = [&](const std::vector<double>& t) {
    double a = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == OpKind::attention) a += t[i];
    }
    return a;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.kind != OpKind::comm) continue;
    // The backward of an all-gather is a reduce-scatter and vice versa; an all-reduce and an
    // all-to-all stay what they are. Ring attention sends keys and values forward, and sends
    // their gradients back as well in the backward pass.
    CollectiveOp back = op.comm_op;
    if (op.comm_op == CollectiveOp::all_gather) back = CollectiveOp::reduce_scatter;
    if (op.comm_op == CollectiveOp::reduce_scatter) back = CollectiveOp::all_gather;
    const double f = comm_time(op.group, op.comm_op, op.bytes).value();
    double b = comm_time(op.group, back, op.bytes).value();
    if (op.group == CommGroup::cp) b += f;
    double fe = f, be = b;
    // Entering the TP region under sequence parallelism: the backward re-gathers the saved
    // sequence-split input for the weight gradient (the forward's all-gather again) besides
    // reduce-scattering the input gradient (Megatron's LinearWithGradAccumulationAndAsyncCommunication,
    // Transformer Engine's Linear). Without tp_overlap both are exposed (docs/training.md,
    // Limitations); the re-gather had been left out, so turning the overlap on could slow a step.
    if (op.group == CommGroup::tp && op.comm_op == CollectiveOp::all_gather && op.linear_input) be = b + f;
    // The embedding's reduce-scatter has no GEMM beside it, and the loss's all-reduce is a few bytes.
    const bool overlapped = op.comm_op == CollectiveOp::all_gather || (op.comm_op == CollectiveOp::reduce_scatter && op.in_layer);
    if (op.group == CommGroup::tp && tp_overlap && overlapped && op.userbuffers) {
      // Each collective hides behind the GEMM of its own linear layer, in both passes. Entering the
      // TP region (an all-gather before a column-parallel GEMM): forward, a ring exchange; backward,
      // bulk overlaps of the re-gather of the saved sequence-split input (the forward's all-gather
      // again) and of the input gradient's reduce-scatter. Leaving it (a reduce-scatter after a
      // row-parallel GEMM): forward, the pipelined reduce-scatter; backward, a ring exchange of the
      // output gradient's all-gather behind the data-gradient product.
      const bool gather = op.comm_op == CollectiveOp::all_gather;
      const double g = neighbour_gemm(i, gather, fwd);
      const double dg = neighbour_gemm(i, gather, dgrad_of), wg = neighbour_gemm(i, gather, wgrad_of);
      // A ring exchange of tp chunks starts on the chunk already held: the tp - 1 transfers run
      // behind tp - 1 of the tp GEMM chunks.
      const double ring_share = tp > 1 ? double(tp - 1) / double(tp) : 0.0;
      const double sm_share = hw.sm_count > 0 ? std::min(1.0, kTpCommSms / double(hw.sm_count)) : 0.0;
      if (gather && !op.in_layer) {
        // The output layer is Megatron's own ColumnParallelLinear, outside Transformer Engine: its
        // forward all-gather blocks; backward it overlaps the re-gather with the data-gradient GEMM
        // and the reduce-scatter with the weight-gradient GEMM (NCCL, asynchronously).
        be = std::max(0.0, f - dg) + std::max(0.0, b - wg);
      } else if (gather) {
        fe = std::max(0.0, f - g * ring_share);
        // Each bulk collective takes its 16 SMs from the GEMM it runs beside, for as long as both run.
        be = std::max(0.0, f - dg) + std::max(0.0, b - wg) + sm_share * (std::min(f, dg) + std::min(b, wg));
      } else {
        // Four chunks: the reduce-scatters of the first three run behind the GEMMs of the next three.
        const double chunk_f = f / kTpPipelineSplits, chunk_g = g / kTpPipelineSplits;
        fe = chunk_f + (kTpPipelineSplits - 1.0) * std::max(0.0, chunk_f - chunk_g) +
             sm_share * (kTpPipelineSplits - 1.0) * std::min(chunk_f, chunk_g);
        be = std::max(0.0, b - dg * ring_share);
      }
    }
    if (op.group == CommGroup::cp) {
      // Ring attention overlaps each exchange with the attention on the chunk already there: cp
      // steps of attention, the cp - 1 transfers beside the first cp - 1 of them (the last step's
      // chunk has nothing left to send beside it), as the TP ring exchange above.
      const double cp_share = op.ring > 1 ? double(op.ring - 1) / double(op.ring) : 1.0;
      fe = std::max(0.0, f - attention_time(fwd) * cp_share);
      be = std::max(0.0, b - attention_time(bwd) * cp_share);
    }
    // A collective of one pass only (the embedding's and the loss's reductions, the output layer's
    // input gradient), whatever the overlaps above made of the other.
    if (op.passes == Op::Passes::forward) be = 0;
    if (op.passes == Op::Passes::backward) fe = 0;
    fwd[i] = fe;
    bwd[i] = be;
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    auto add = [&](PassTime& p, double t) {
      if (op.kind != OpKind::comm) {
        p.compute += t;
      } else if (op.group == CommGroup::tp) {
        p.tp += t;
      } else if (op.group == CommGroup::cp) {
        p.cp += t;
      } else {
        p.ep += t;
      }
    };
    add(out.forward, fwd[i]);
    add(out.backward, bwd[i]);
    const bool again = (recompute == Recompute::full && op.in_layer) || (recompute == Recompute::selective && op.attention_core);
    if (again) {
      add(out.recompute, fwd[i]);
      if (op.kind == OpKind::gemm || op.kind == OpKind::attention) out.recompute.flops += op.flops;
    }
    out.ops.push_back({op.name, op.kind, fwd[i], bwd[i], again ? fwd[i] : 0.0, op.kind == OpKind::gemm || op.kind == OpKind::attention ? op.flops : 0.0,
                       op.kind == OpKind::memory || op.kind == OpKind::comm ? op.bytes : 0.0});
  }
  return out;
}

}  // namespace cs::models
