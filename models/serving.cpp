#include "clustersim/models/serving.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <deque>
#include <map>
#include <memory>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"
#include "clustersim/common/plain_text.hpp"
#include "clustersim/common/sampling.hpp"
#include "clustersim/hardware/gemm_model.hpp"
#include "clustersim/sim/fluid_network.hpp"
#include "clustersim/sim/simulator.hpp"

namespace cs::models {

namespace {

constexpr double kPi = 3.14159265358979323846;

double standard_normal(std::uint64_t& s) {
  // Box-Muller.
  const double u1 = uniform01(s), u2 = uniform01(s);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}
// Gamma(shape k, scale 1) by Marsaglia and Tsang (2000); k < 1 by boosting with U^(1/k).
double gamma_sample(double k, std::uint64_t& s) {
  if (k < 1) return gamma_sample(k + 1, s) * std::pow(uniform01(s), 1.0 / k);
  const double d = k - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (;;) {
    double x, v;
    do {
      x = standard_normal(s);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform01(s);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double weight_bytes(const ReplicaConfig& c) {
  return c.weight_bytes_per_parameter > 0 ? c.weight_bytes_per_parameter : hardware::bytes_per_element(c.weights);
}

// The expected number of its experts the busiest of `ranks` GPUs computes, each GPU holding `local`
// experts, each touched with probability q. The step waits for the busiest (the TP all-reduce after
// the experts joins every rank). Taking the touches independent, a rank's count is Binomial(local,
// q) and E[max] = sum over m < local of 1 - F(m)^ranks: DeepSeek-V3's one decode token (top 8 of
// 256 experts over 8 GPUs) gives 2.54 against a mean of 1 (a Monte Carlo of the routing: 2.56).
double busiest_rank_experts(double local, double q, int ranks) {
  const auto n = static_cast<int>(std::llround(local));
  if (n <= 0 || q <= 0) return 0.0;
  if (q >= 1) return n;
  // The binomial's terms in logs (the first, (1 - q)^n, underflows for q near 1 and n in the hundreds).
  const double odds = std::log(q) - std::log1p(-q);
  double log_pmf = n * std::log1p(-q), cdf = 0, busiest = 0;
  for (int m = 0; m < n; ++m) {
    cdf = std::min(1.0, cdf + std::exp(log_pmf));
    busiest += 1.0 - std::pow(cdf, ranks);
    log_pmf += std::log(double(n - m) / double(m + 1)) + odds;
  }
  return busiest;
}

}  // namespace

double kv_bytes_per_layer_token(const ReplicaConfig& c) {
  const TransformerSpec& m = c.model;
  // K and V: kv_heads x head_dim each (MLA caches its compressed latent and rope key).
  const double per_layer = m.mla ? (m.mla->kv_lora_rank + m.mla->qk_rope_head_dim) : 2.0 * m.kv_heads * m.head_dim;
  // TP splits KV heads across GPUs (a KV head is replicated when there are fewer than tp of them).
  const double shards = m.mla ? 1.0 : std::min<double>(c.tp, std::max(1, m.kv_heads));
  return per_layer * c.kv_bytes_per_element / shards;
}

double kv_bytes_per_token(const ReplicaConfig& c) {
  // PP gives each stage its layers: the fullest stage counts.
  return std::ceil(static_cast<double>(c.model.layers) / std::max(1, c.pp)) * kv_bytes_per_layer_token(c);
}

std::vector<int> stage_layer_counts(int layers, int pp) {
  // vLLM's get_pp_indices (vllm/distributed/utils.py): the remainder goes one layer each to the
  // stages before the last, from the second-to-last back (the last runs the head, the first the
  // embedding).
  std::vector<int> counts(static_cast<std::size_t>(pp), layers / pp);
  for (int i = 2; i < layers % pp + 2; ++i) ++counts[static_cast<std::size_t>(pp - i)];
  return counts;
}

double stage_weight_bytes(const ReplicaConfig& c, int first_layer, int layers, bool first_stage, bool last_stage) {
  const TransformerSpec& m = c.model;
  const ParameterCount all = count_parameters(m);
  const double tp = c.tp, quantised = weight_bytes(c), wide = std::max(quantised, 2.0);
  // A layer's linear weights in the weights' dtype, split over TP (the KV projections of fewer KV
  // heads than TP replicated); its norms, the router, the embedding and the LM head in 16 bits, as
  // vLLM's and TensorRT-LLM's fp8 and int4 recipes leave them.
  const double attention = attention_parameters_per_rank(m, c.tp) * quantised;
  const int moe_layers = m.moe_layers();
  const double moe_ffn = moe_layers > 0 ? (all.routed_experts + all.shared_experts) / moe_layers / tp * quantised + all.router / moe_layers * wide : 0.0;
  const double dense_ffn = dense_ffn_parameters(m) / tp * quantised;
  double bytes = 0;
  for (int l = first_layer; l < first_layer + layers; ++l) bytes += attention + (m.is_moe_layer(l) ? moe_ffn : dense_ffn) + 2.0 * m.hidden * wide;
  const double vocab = static_cast<double>(m.vocab) * m.hidden / tp * wide;
  if (first_stage) bytes += vocab;
  // The LM head (with the final norm) on the last stage: its own weights, or the embedding's when
  // tied, which the last stage then holds too (vLLM builds embed_tokens there to tie it).
  if (last_stage) bytes += (m.tied_embeddings && first_stage ? 0.0 : vocab) + m.hidden * wide;
  return bytes;
}

std::int64_t kv_block_capacity(const ReplicaConfig& c, const hardware::HardwareProfile& hw) {
  if (c.tp < 1 || c.pp < 1 || c.ep < 1) throw std::invalid_argument("tp, pp and ep must be at least 1");
  if (c.pp > c.model.layers) throw std::invalid_argument(fmt::format("pp {} is more than the model's {} layers", c.pp, c.model.layers));
  if (c.ep > 1) {
    if (!c.model.moe) throw std::invalid_argument("expert parallelism (ep > 1) needs an MoE model");
    if (c.ep != c.tp) throw std::invalid_argument(fmt::format("ep must equal tp (experts spread over the replica's TP ranks); got ep {} and tp {}", c.ep, c.tp));
    if (c.model.moe->experts % c.ep != 0) {
      throw std::invalid_argument(fmt::format("expert parallelism over the TP {} ranks (expert_parallel) needs tp to divide the {} experts", c.ep,
                                              c.model.moe->experts));
    }
  }
  const double usable = hw.memory_capacity.value() * c.gpu_memory_utilization;
  // Every stage allocates the same number of KV blocks (vLLM takes the fewest any worker can hold):
  // the stage whose weights and layers leave the least room sets them.
  const TransformerSpec& m = c.model;
  const double kv_per_layer_token = kv_bytes_per_layer_token(c);
  std::int64_t blocks = std::numeric_limits<std::int64_t>::max();
  const std::vector<int> counts = stage_layer_counts(m.layers, c.pp);
  for (int st = 0, first = 0; st < c.pp; ++st) {
    const int count = counts[static_cast<std::size_t>(st)];
    const double weights = stage_weight_bytes(c, first, count, st == 0, st == c.pp - 1);
    if (weights >= usable) {
      throw std::invalid_argument(fmt::format("the weights need {} per GPU{} at TP {} x PP {} but {} x {} = {} is usable", to_string(Bytes(weights)),
                                              c.pp > 1 ? fmt::format(" on stage {} ({} layers{})", st, count, st == 0 ? " and the embedding" : "") : std::string(),
                                              c.tp, c.pp, to_string(hw.memory_capacity), c.gpu_memory_utilization, to_string(Bytes(usable))));
    }
    // At most 1 PB (the profile's bound) over at least 2 bytes a layer's token (one fp8 K and V
    // element): under 5e14 blocks and tokens, well inside 64 bits.
    blocks = std::min(blocks, static_cast<std::int64_t>((usable - weights) / (kv_per_layer_token * count * c.block_size)));
    first += count;
  }
  // vLLM refuses to start a server whose KV pool cannot hold one request of max_model_len tokens
  // (vllm/v1/core/kv_cache_utils.py, check_enough_kv_cache_memory).
  const int context = c.context();
  if (blocks * c.block_size < context) {
    throw std::invalid_argument(fmt::format("the KV pool holds {} tokens per replica ({} blocks of {}), fewer than one request of max_model_len ({}) needs; "
                                            "vLLM refuses to start such a server (raise gpu_memory_utilization or TP, or lower serving.max_model_len)",
                                            blocks * c.block_size, blocks, c.block_size, context));
  }
  return blocks;
}

IterationCost iteration_cost(const std::vector<BatchEntry>& batch, const ReplicaConfig& c, const hardware::HardwareProfile& hw, GemmTimeCache* cache,
                             int replica) {
  IterationCost cost;
  if (batch.empty()) return cost;
  const TransformerSpec& m = c.model;
  const double width = m.attention_width();
  double tokens = 0, attention_flops = 0, kv_read = 0, sampled = 0;
  // FLOPs of one query-key pair: its scores over the query-key width and its sum of values (MLA's
  // widths differ: 192 and 128 for DeepSeek-V3).
  const double pair_flops = 2.0 * m.heads * (m.qk_head_dim() + m.v_head_dim());
  for (const BatchEntry& e : batch) {
    const double n = e.new_tokens, p = e.context;
    tokens += n;
    attention_flops += pair_flops * n * (p + (n + 1) / 2.0);  // per layer; causal: token i attends to p + i keys
    kv_read += p + n;                                           // the cache read, the new entries written
    sampled += 1;                                               // each sequence's last position gets logits
  }
  const hardware::Dtype compute = hw.supports(c.weights) ? c.weights : hardware::Dtype::bf16;
  const double memory_rate = hw.memory_bandwidth.value() * hw.gemm.memory_efficiency;
  const double launch = hw.kernel_launch_overhead.value();
  const std::int64_t T = static_cast<std::int64_t>(tokens), h = m.hidden, tp = c.tp;
  // Int4 weight-only: the quantised layers' GEMMs read their weights at half a byte each and widen
  // them in registers (Marlin-style kernels). A memory-bound GEMM saves the bytes not read, down to a
  // quarter of its 16-bit time (the model's tile-waste compute time for a few rows is not a
  // weight-only kernel's); a compute-bound one runs the same 16-bit arithmetic and gains nothing.
  const bool int4 = c.weight_bytes_per_parameter > 0 && c.weight_bytes_per_parameter < hardware::bytes_per_element(compute);
  const auto gemm_of = [&](double M, double N, double K, bool quantised) {
    const auto i = [](double v) { return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(v))); };
    const hardware::GemmShape shape{i(M), i(N), i(K)};
    const bool narrow = quantised && int4;
    // The layers' linear weights run in the weights' dtype; the LM head and the MoE router stay
    // 16-bit, as vLLM's and TensorRT-LLM's fp8 and int4 recipes leave them.
    const hardware::Dtype dtype = quantised ? compute : hardware::Dtype::bf16;
    const auto time = [&] {
      const hardware::GemmEstimate e = hardware::estimate_gemm(hw, shape, dtype, hardware::Load::sustained);
      if (!narrow || !e.memory_bound) return e.time.value();
      const double saved = static_cast<double>(shape.k) * static_cast<double>(shape.n) * (hardware::bytes_per_element(compute) - c.weight_bytes_per_parameter) / memory_rate;
      return std::max(e.time.value() - saved, 0.25 * e.time.value());
    };
    return cache ? cache->get(shape.m, shape.n, shape.k, narrow ? c.weight_bytes_per_parameter : 0.0, dtype, time) : time();
  };
  const auto gemm16 = [&](double M, double N, double K) { return gemm_of(M, N, K, false); };
  const auto weight_gemm = [&](double M, double N, double K) { return gemm_of(M, N, K, true); };

  // Attention projections (TP-sharded as Megatron shards them; MLA's down projections replicated).
  double attention_gemms = 0;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const double heads = static_cast<double>(m.heads) / tp, qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    attention_gemms += a.q_lora_rank > 0 ? weight_gemm(T, a.q_lora_rank, h) + weight_gemm(T, heads * qk, a.q_lora_rank) : weight_gemm(T, heads * qk, h);
    attention_gemms += weight_gemm(T, a.kv_lora_rank + a.qk_rope_head_dim, h) + weight_gemm(T, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank);
    attention_gemms += weight_gemm(T, h, heads * a.v_head_dim);
  } else {
    const double qkv = (static_cast<double>(m.heads) / tp + 2.0 * kv_heads_per_rank(m, static_cast<int>(tp))) * m.head_dim;
    attention_gemms += weight_gemm(T, qkv, h) + weight_gemm(T, h, width / tp);
  }
  // The attention core: its FLOPs at the 16-bit ceiling or its KV reads, whichever is longer.
  const double attention_peak =
      hw.peak(hardware::Dtype::bf16).value() * hw.gemm.max_efficiency.at(hardware::Dtype::bf16) * hardware::load_factor(hw, hardware::Load::sustained);
  const double kv_per_layer = kv_bytes_per_layer_token(c);
  // Two kernels: the attention and, before it, the write of the new keys and values into the paged
  // cache (vLLM's reshape_and_cache_flash).
  const double core = std::max(attention_flops / tp / attention_peak, kv_read * kv_per_layer / memory_rate) + 2.0 * launch;
  // The memory-bound kernels between the GEMMs, in 16-bit activations: the residual add fused with
  // RMSNorm twice (read the residual stream and the branch, write both: 4 x 2 bytes per hidden element,
  // as vLLM's fused_add_rms_norm does), RoPE on this GPU's queries and keys (read and write), and the
  // gated activation (read the gate and up halves, write one). Each is one kernel: four.
  const double up = is_gated(m.activation) ? 2.0 : 1.0;
  const auto elementwise = [&](double ffn_width) {
    const double kv_heads = kv_heads_per_rank(m, static_cast<int>(tp));
    const double per_token = 2.0 * 4.0 * h * 2.0 + 2.0 * (static_cast<double>(m.heads) / tp + kv_heads) * m.qk_head_dim() * 2.0 + (up + 1.0) * ffn_width * 2.0;
    return tokens * per_token / memory_rate + 4.0 * launch;
  };
  // TP: 2 all-reduces of the hidden state per layer.
  const double all_reduce = c.tp > 1 && c.all_reduce_seconds ? 2.0 * c.all_reduce_seconds(tokens * h * 2.0) : 0.0;
  const double common = attention_gemms + core + all_reduce;

  // Dense FFN (every layer of a dense model, the leading ones of an MoE model).
  const double f = static_cast<double>(m.ffn_hidden) / tp;
  cost.dense_layer = common + weight_gemm(T, up * f, h) + weight_gemm(T, h, f) + elementwise(f);
  if (m.moe) {
    // Routed experts: each token goes to top_k of E experts. With EP (ep = tp) a GPU holds E / ep
    // whole experts and computes them for every token of the batch (the TP all-reduce combines);
    // without EP every GPU holds a 1/tp slice of every expert. An expert is touched with probability
    // 1 - (1 - k/E)^T and then computes its tokens as one GEMM pair that reads its weights once.
    // The experts run as one fused (grouped) kernel per projection, as vLLM's fused_moe and
    // SGLang's run them: two launches a layer, not two per touched expert (with 4 us launches that
    // had made DeepSeek-V3's decode without EP 4x slower than with it at the same bytes).
    const MoeSpec& e = *m.moe;
    const double E = e.experts, k = e.top_k;
    const double local = c.ep > 1 ? E / c.ep : E;
    const double fe = c.ep > 1 ? e.expert_ffn_hidden : static_cast<double>(e.expert_ffn_hidden) / tp;
    const double touched = 1.0 - std::pow(1.0 - k / E, tokens);
    const double per_expert = tokens * k / E * e.capacity_factor / std::max(touched, 1e-12);  // tokens of a touched expert
    const double pair = weight_gemm(per_expert, up * fe, h) + weight_gemm(per_expert, h, fe);
    // With EP the step waits for the GPU whose experts the batch touched most.
    const double computed = c.ep > 1 ? busiest_rank_experts(local, touched, c.ep) : local * touched;
    const double experts = computed * std::max(pair - 2.0 * launch, 0.0) + 2.0 * launch;
    double shared = 0;
    if (e.shared_experts > 0) {
      const double fs = static_cast<double>(e.shared_experts) * e.shared_expert_ffn_hidden / tp;
      shared = weight_gemm(T, up * fs, h) + weight_gemm(T, h, fs);
    }
    // The gated activation over the routed rows: all tokens x k at fe / tp without EP; with EP only
    // the tokens x k / ep routed to this GPU's experts, at full width: the same bytes, as ep = tp
    // (every token x k at full width had made EP prefill 2.7x slower on a wide-expert model).
    const double routed_width = k * fe / (c.ep > 1 ? c.ep : 1);
    cost.moe_layer = common + gemm16(T, E, h) + experts + shared + elementwise(routed_width + (e.shared_experts > 0 ? e.shared_experts * e.shared_expert_ffn_hidden / tp : 0.0));
  }
  // The LM head for each sampled sequence, then sampling: the fp32 logits are read by the softmax and
  // the top-k/top-p pass after the LM head writes them (3 passes of 4 bytes over the vocabulary slice;
  // an assumption from the kernels' structure, not a measurement: to be calibrated).
  cost.head = gemm16(sampled, static_cast<double>(m.vocab) / tp, h) + sampled * m.vocab / tp * 4.0 * 3.0 / memory_rate + launch;
  cost.fixed = c.iteration_overhead.value();
  // Pipeline parallelism: the hidden state of the batch's tokens passes between stages.
  if (c.pp > 1 && c.pp_send_seconds) {
    for (int b = 0; b + 1 < c.pp; ++b) cost.stage_sends.push_back(c.pp_send_seconds(replica, b, tokens * h * 2.0 / tp));
  }
  return cost;
}

double IterationCost::stage(const TransformerSpec& m, int first_layer, int layers, bool last) const {
  double t = 0;
  for (int l = first_layer; l < first_layer + layers; ++l) t += m.is_moe_layer(l) ? moe_layer : dense_layer;
  return t + (last ? head : 0.0);
}

double iteration_seconds(const std::vector<BatchEntry>& batch, const ReplicaConfig& c, const hardware::HardwareProfile& hw) {
  if (batch.empty()) return 0;
  const IterationCost cost = iteration_cost(batch, c, hw);
  return cost.fixed + cost.stage(c.model, 0, c.model.layers, true) + std::accumulate(cost.stage_sends.begin(), cost.stage_sends.end(), 0.0);
}

namespace {

struct Sequence {
  ServingRequest request;
  int known = 0;        // prompt + generated tokens
  int computed = 0;     // tokens whose KV is cached
  int generated = 0;
  std::int64_t blocks = 0;
  int scheduled = 0;    // new tokens in the current iteration
  bool started = false;
  bool swapped = false;     // its blocks are in host memory
  bool padding = false;     // static batching: finished, still computed until its batch ends
  bool in_flight = false;   // in a batch that has not left the pipeline yet
  int pending_flows = 0;    // disaggregated: KV copy flows still running
  std::int64_t held_blocks = 0;  // disaggregated: the prefill replica's blocks, held until the copy ends
  int prefix_ref = -1;           // prefix caching: the cached prefix it holds a reference to
  std::int64_t shared_blocks = 0;  // the blocks of that prefix (not its own)
  int held_prefix = -1;          // disaggregated: the prefill replica's prefix reference, until the copy ends
  double last_token = 0;
  RequestResult result;
};

class Cluster;

// One replica: its scheduler, KV pool and iterations, on the cluster's event engine.
class Replica final : public sim::EventHandler {
 public:
  enum class Role { unified, prefill, decode };

  Replica(Cluster& cluster, int index, Role role, const ReplicaConfig& c, const hardware::HardwareProfile& hw);

  // kIterationEnd: the oldest batch in flight has left the last stage. kSchedule: the scheduler's
  // turn after the requests that arrived at this instant.
  enum : std::uint64_t { kIterationEnd = 0, kSchedule = 1 };
  void handle(std::uint64_t payload) override {
    integrate_kv();
    if (payload == kSchedule) {
      schedule_pending_ = false;
    } else {
      finish_iteration();
    }
    step();
  }

  // A request routed here (or, on a decode replica, returning after a preemption).
  void enqueue(int i);
  // Decode replicas: a prefilled request whose KV cache is to be copied here.
  void offer(int i);
  // Decode replicas: the KV copy of request i has arrived.
  void received(int i);
  // Prefill replicas: request i's KV has left; its blocks are free.
  void release(int i);

  [[nodiscard]] std::int64_t outstanding() const {
    return static_cast<std::int64_t>(waiting_.size() + running_.size() + swapped_.size() + incoming_.size()) + in_transfer_;
  }
  // KV blocks left after the tokens already queued here and, on a decode replica, the copies waiting
  // for blocks (left out, the KV-aware router had sent a burst of prefilled requests to one decode
  // replica while another idled).
  [[nodiscard]] std::int64_t kv_headroom() const { return available() - blocks_for(queued_tokens_) - incoming_blocks_; }
  // Tokens of the prefix this replica holds computed (0 when it holds none).
  [[nodiscard]] std::int64_t cached_prefix_tokens(int prefix) const {
    const auto it = cache_.find(prefix);
    return it != cache_.end() && it->second.blocks > 0 ? it->second.tokens : 0;
  }
  [[nodiscard]] std::int64_t blocks_for(std::int64_t tokens) const { return (tokens + c_.block_size - 1) / c_.block_size; }
  ReplicaRun& stats() { return run_; }
  // Adds the blocks in use since the last call, over the time since: blocks change only inside the
  // entry points, each of which calls this first.
  void integrate_kv() {
    const double t = now();
    run_.kv_block_seconds += static_cast<double>(run_.kv_blocks - free_ - evictable_) * (t - kv_since_);
    kv_since_ = t;
  }

 private:
  double now() const;
  Sequence& seq(int i);
  // Free blocks plus cached prefixes no running request uses (evicted, least recently used first,
  // when the blocks are taken).
  [[nodiscard]] std::int64_t available() const { return free_ + evictable_; }
  void take(std::int64_t blocks);
  void unref_prefix(Sequence& s);
  void register_prefix(Sequence& s);
  void push_waiting_front(int i);
  void recompute_later(int i);
  void preempt(int victim);
  void step();
  bool admit_static(std::vector<int>& batch, int& budget);
  void finish_iteration();
  void try_transfers();
  // Decode: the blocks a copy of sequence s takes here.
  [[nodiscard]] std::int64_t transfer_blocks(const Sequence& s) const;

  Cluster& cl_;
  int index_;
  bool schedule_pending_ = false;  // a kSchedule event is queued
  Role role_;
  const ReplicaConfig& c_;
  const hardware::HardwareProfile& hw_;
  GemmTimeCache gemm_times_;  // for c_ and hw_ only
  std::deque<int> waiting_;
  std::deque<int> swapped_;
  std::deque<int> incoming_;     // decode: prefilled requests waiting for blocks to copy into
  std::vector<int> running_;     // admission order
  std::int64_t queued_tokens_ = 0;  // tokens the waiting requests will need
  std::int64_t incoming_blocks_ = 0;  // decode: blocks the copies in incoming_ will take
  int outgoing_ = 0;                  // prefill: prefilled requests whose blocks are held until their copy leaves
  std::int64_t in_transfer_ = 0;
  std::int64_t free_ = 0;
  struct CachedPrefix {
    std::int64_t blocks = 0;
    int tokens = 0;
    int refs = 0;
    double last_used = 0;
  };
  std::map<int, CachedPrefix> cache_;  // prefix caching: prefix id -> its cached full blocks
  std::int64_t evictable_ = 0;         // blocks of cached prefixes with no reference
  double kv_since_ = 0;                // when integrate_kv last ran
  double swap_free_ = 0;
  double swap_seconds_ = 0;      // swap copies to charge to the next iteration
  double block_bytes_ = 0;
  // Batches in flight through the pipeline stages (at most pp; one without PP), oldest first.
  struct InFlight {
    std::vector<int> batch;
  };
  std::deque<InFlight> inflight_;
  std::vector<double> stage_free_;   // when each stage finishes the batches given to it
  std::vector<int> stage_layers_;    // each stage's layers (stage_layer_counts)
  ReplicaRun run_;
};

class Cluster final : public sim::EventHandler, public sim::FluidNetwork::Listener {
 public:
  Cluster(const std::vector<ServingRequest>& requests, const ClusterConfig& config, const hardware::HardwareProfile& hw,
          std::optional<ClosedLoop> closed)
      : config_(config), closed_(closed) {
    const ReplicaConfig& c = config.replica;
    if (config.disaggregation) {
      const Disaggregation& d = *config.disaggregation;
      if (d.prefill < 1 || d.decode < 1) throw std::invalid_argument("disaggregation needs at least one prefill and one decode replica");
      if (!d.kv_flows || d.link_capacities.empty()) throw std::invalid_argument("disaggregation needs the network the KV copies take");
      if (c.batching == Batching::static_batch) throw std::invalid_argument("static batching does not combine with disaggregation");
      network_.emplace(sim_, d.link_capacities);
      for (int p = 0; p < d.prefill; ++p) replicas_.push_back(std::make_unique<Replica>(*this, p, Replica::Role::prefill, c, hw));
      for (int k = 0; k < d.decode; ++k) replicas_.push_back(std::make_unique<Replica>(*this, d.prefill + k, Replica::Role::decode, c, hw));
      entry_ = d.prefill;
    } else {
      if (config.replicas < 1) throw std::invalid_argument("a cluster needs at least one replica");
      for (int k = 0; k < config.replicas; ++k) replicas_.push_back(std::make_unique<Replica>(*this, k, Replica::Role::unified, c, hw));
      entry_ = config.replicas;
    }
    // Each replica's pool holds one request of max_model_len tokens (kv_block_capacity, in its
    // constructor, refuses a smaller one), so a request inside the context fits it.
    const int context = c.context();
    for (const auto& r : requests) {
      if (r.prompt_tokens < 1 || r.output_tokens < 1) throw std::invalid_argument(fmt::format("request {}: prompt and output need at least 1 token", r.id));
      if (r.total_tokens() > context) {
        throw std::invalid_argument(fmt::format("request {} has {} tokens, more than max_model_len ({})", r.id, r.total_tokens(), context));
      }
      if (c.batching == Batching::static_batch && r.prompt_tokens > c.max_num_batched_tokens) {
        throw std::invalid_argument(fmt::format("request {} has a prompt of {} tokens, more than max_num_batched_tokens ({}), which bounds what a static "
                                                "batch prefills", r.id, r.prompt_tokens, c.max_num_batched_tokens));
      }
      if (!c.chunked_prefill && r.longest_pass_tokens() > c.max_num_batched_tokens) {
        throw std::invalid_argument(fmt::format("request {} may need a pass of {} tokens, more than max_num_batched_tokens ({}) without chunked prefill",
                                                r.id, r.longest_pass_tokens(), c.max_num_batched_tokens));
      }
      Sequence s;
      s.request = r;
      s.known = r.prompt_tokens;
      s.result.request = r;
      seqs_.push_back(s);
    }
  }

  ClusterRun run() {
    if (closed_) {
      next_closed_ = std::min<std::size_t>(static_cast<std::size_t>(closed_->concurrency), seqs_.size());
      for (std::size_t i = 0; i < next_closed_; ++i) {
        seqs_[i].request.arrival = seqs_[i].result.request.arrival = 0;
        sim_.schedule_at(sim::Time::zero(), this, i);
      }
    } else {
      for (std::size_t i = 0; i < seqs_.size(); ++i) sim_.schedule_at(sim::Time::seconds(seqs_[i].request.arrival), this, i);
    }
    sim_.run();
    // Every request must have finished: one left over is a scheduling defect, never a result.
    for (const auto& s : seqs_) {
      if (s.generated < s.request.output_tokens || s.result.replica < 0) {
        throw std::logic_error(fmt::format("request {} was never served ({} of {} tokens generated): a serving-model defect, please report it",
                                           s.request.id, s.generated, s.request.output_tokens));
      }
    }
    for (auto& r : replicas_) r->integrate_kv();
    ClusterRun out;
    for (const auto& s : seqs_) {
      out.requests.push_back(s.result);
      ReplicaRun& r = replicas_[static_cast<std::size_t>(s.result.replica)]->stats();
      r.requests.push_back(s.result);
      r.makespan = std::max(r.makespan, s.result.finish);
      if (s.result.decode_replica >= 0) {
        ReplicaRun& d = replicas_[static_cast<std::size_t>(s.result.decode_replica)]->stats();
        d.requests.push_back(s.result);
        d.makespan = std::max(d.makespan, s.result.finish);
        ++out.kv_transfers;
        out.kv_transfer_seconds += s.result.kv_transfer_end - s.result.kv_transfer_start;
      }
    }
    const auto by_id = [](const auto& a, const auto& b) { return a.request.id < b.request.id; };
    std::sort(out.requests.begin(), out.requests.end(), by_id);
    for (auto& r : replicas_) {
      std::sort(r->stats().requests.begin(), r->stats().requests.end(), by_id);
      out.replicas.push_back(std::move(r->stats()));
    }
    out.events = sim_.stats().events;
    for (auto& r : out.replicas) r.events = out.events;
    return out;
  }

  // An arrival: route it among the entry replicas.
  void handle(std::uint64_t payload) override {
    const int i = static_cast<int>(payload);
    const int k = pick(0, entry_, round_robin_entry_, &seqs_[static_cast<std::size_t>(i)].request);
    seqs_[static_cast<std::size_t>(i)].result.replica = k;
    replicas_[static_cast<std::size_t>(k)]->enqueue(i);
  }

  void flow_done(sim::FluidNetwork::FlowId, std::uint64_t tag) override {
    Sequence& s = seqs_[static_cast<std::size_t>(tag)];
    if (--s.pending_flows > 0) return;
    s.result.kv_transfer_end = now();
    replicas_[static_cast<std::size_t>(s.result.replica)]->release(static_cast<int>(tag));
    replicas_[static_cast<std::size_t>(s.result.decode_replica)]->received(static_cast<int>(tag));
  }

  // A request produced its last token.
  void finished(int) {
    if (closed_ && next_closed_ < seqs_.size()) {
      Sequence& next = seqs_[next_closed_];
      next.request.arrival = next.result.request.arrival = now();
      sim_.schedule_at(sim_.now(), this, next_closed_);
      ++next_closed_;
    }
  }

  // Disaggregated: request i has its first token on a prefill replica; send it to a decode replica.
  void prefilled(int i) {
    const int k = pick(entry_, static_cast<int>(replicas_.size()), round_robin_decode_, nullptr);
    seqs_[static_cast<std::size_t>(i)].result.decode_replica = k;
    replicas_[static_cast<std::size_t>(k)]->offer(i);
  }

  // Decode replica `to` has reserved the blocks: copy request i's KV cache there.
  void start_transfer(int i, int to, double bytes_per_gpu) {
    Sequence& s = seqs_[static_cast<std::size_t>(i)];
    s.result.kv_transfer_start = now();
    const std::vector<sim::FlowSpec> flows = config_.disaggregation->kv_flows(s.result.replica, to - entry_, bytes_per_gpu);
    s.pending_flows = static_cast<int>(flows.size());
    if (flows.empty()) {
      s.pending_flows = 1;
      flow_done(0, static_cast<std::uint64_t>(i));
      return;
    }
    for (const auto& f : flows) network_->start(f.path, f.bytes, f.latency, this, static_cast<std::uint64_t>(i), f.rate_cap);
  }

  sim::Simulator& sim() { return sim_; }
  Sequence& seq(int i) { return seqs_[static_cast<std::size_t>(i)]; }
  double now() const { return sim_.now().to_seconds(); }

 private:
  // The router's choice among replicas [first, last) for a request (null: a prefilled request that
  // goes to a decode replica, whose whole prompt arrives as KV).
  int pick(int first, int last, std::int64_t& rr, const ServingRequest* request) {
    switch (config_.router) {
      case Router::round_robin: return first + static_cast<int>(rr++ % (last - first));
      case Router::least_outstanding: {
        int best = first;
        for (int k = first + 1; k < last; ++k) {
          if (replicas_[static_cast<std::size_t>(k)]->outstanding() < replicas_[static_cast<std::size_t>(best)]->outstanding()) best = k;
        }
        return best;
      }
      case Router::kv_aware: {
        // NVIDIA Dynamo's KV router cost (docs.nvidia.com/dynamo, "Router Design", overlap score
        // weight 1): the blocks the request must prefill there (its prompt less the prefix that
        // replica holds) plus the blocks that would then be active there (those in use or queued,
        // and the request's new ones: the held prefix's blocks are shared, not new); the least
        // wins, then the fewest outstanding requests. A held prefix is worth twice its blocks of
        // load, no more: a holder with more than that queued loses to an idle replica.
        const auto key = [&](int k) {
          const Replica& r = *replicas_[static_cast<std::size_t>(k)];
          std::int64_t fresh = 0;
          if (request) {
            const std::int64_t cached = request->prefix_id >= 0 ? r.cached_prefix_tokens(request->prefix_id) : 0;
            fresh = r.blocks_for(std::max<std::int64_t>(request->prompt_tokens - cached, 1));
          }
          return std::make_pair(2 * fresh - r.kv_headroom(), r.outstanding());
        };
        int best = first;
        for (int k = first + 1; k < last; ++k) {
          if (key(k) < key(best)) best = k;
        }
        return best;
      }
    }
    return first;
  }

  const ClusterConfig& config_;
  std::optional<ClosedLoop> closed_;
  sim::Simulator sim_;
  std::optional<sim::FluidNetwork> network_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<Sequence> seqs_;
  int entry_ = 0;  // replicas [0, entry_) take the arrivals
  std::int64_t round_robin_entry_ = 0, round_robin_decode_ = 0;
  std::size_t next_closed_ = 0;
};

Replica::Replica(Cluster& cluster, int index, Role role, const ReplicaConfig& c, const hardware::HardwareProfile& hw)
    : cl_(cluster), index_(index), role_(role), c_(c), hw_(hw) {
  run_.kv_blocks = kv_block_capacity(c, hw);
  free_ = run_.kv_blocks;
  swap_free_ = c.swap_space_bytes;
  block_bytes_ = kv_bytes_per_token(c) * c.block_size;
  stage_free_.assign(static_cast<std::size_t>(c.pp), 0.0);
  stage_layers_ = stage_layer_counts(c.model.layers, c.pp);
}

double Replica::now() const { return cl_.now(); }
Sequence& Replica::seq(int i) { return cl_.seq(i); }

void Replica::enqueue(int i) {
  integrate_kv();
  Sequence& s = seq(i);
  waiting_.push_back(i);
  queued_tokens_ += s.known - s.computed;
  // The scheduler runs once the other requests arriving at this instant are queued too, as vLLM's
  // engine loop finds every request that arrived before its step (scheduled here at once, the
  // first of an offline batch ran alone and the rest waited a whole iteration behind it).
  if (!schedule_pending_) {
    schedule_pending_ = true;
    cl_.sim().schedule_at(cl_.sim().now(), this, kSchedule);
  }
}

void Replica::push_waiting_front(int i) {
  Sequence& s = seq(i);
  waiting_.push_front(i);
  queued_tokens_ += s.known - s.computed;
}

void Replica::offer(int i) {
  integrate_kv();
  incoming_.push_back(i);
  incoming_blocks_ += transfer_blocks(seq(i));
  try_transfers();
}

std::int64_t Replica::transfer_blocks(const Sequence& s) const {
  return c_.reserve_full_kv ? blocks_for(s.request.total_tokens()) : blocks_for(s.known);
}

void Replica::try_transfers() {
  const auto reserve = static_cast<std::int64_t>(std::ceil(c_.watermark * static_cast<double>(run_.kv_blocks)));
  // Requests preempted here (waiting to recompute, or swapped out) come back first, first come first
  // served, as vLLM V1's waiting queue puts them at its head: new copies had taken every block freed
  // before a preempted request's turn, and the run's earliest requests finished last.
  if (!waiting_.empty() || !swapped_.empty()) return;
  while (!incoming_.empty()) {
    const int i = incoming_.front();
    Sequence& s = seq(i);
    const std::int64_t need = transfer_blocks(s);
    const bool idle = running_.empty() && in_transfer_ == 0;
    if (need > available() || (!idle && available() - need < reserve) ||
        static_cast<int>(running_.size()) + in_transfer_ >= c_.max_num_seqs) {
      return;
    }
    incoming_.pop_front();
    incoming_blocks_ -= need;
    take(need);
    s.blocks = need;  // the prefill replica's blocks stay there until the copy ends
    ++in_transfer_;
    // The cached tokens' KV (the first generated token's entry is computed here).
    cl_.start_transfer(i, index_, kv_bytes_per_token(c_) * s.computed);
  }
}

void Replica::received(int i) {
  integrate_kv();
  --in_transfer_;
  running_.push_back(i);
  step();
}

void Replica::release(int i) {
  integrate_kv();
  Sequence& s = seq(i);
  free_ += s.held_blocks;
  s.held_blocks = 0;
  --outgoing_;
  if (s.held_prefix >= 0) {
    CachedPrefix& e = cache_.at(s.held_prefix);
    if (--e.refs == 0) {
      evictable_ += e.blocks;
      e.last_used = now();
    }
    s.held_prefix = -1;
  }
  step();
}

void Replica::take(std::int64_t blocks) {
  while (free_ < blocks && evictable_ > 0) {
    // Evict blocks of the least recently used prefix no request holds, from its tail, as many as
    // needed: vLLM's free queue hands a freed sequence's blocks back tail first, so a prefix loses its
    // last blocks and keeps hitting on the rest (it had been evicted whole for one block: a later
    // request of it missed all 64 tokens where vLLM hits 48).
    auto victim = cache_.end();
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->second.refs == 0 && it->second.blocks > 0 && (victim == cache_.end() || it->second.last_used < victim->second.last_used)) victim = it;
    }
    CachedPrefix& e = victim->second;
    const std::int64_t evicted = std::min(e.blocks, blocks - free_);
    e.blocks -= evicted;
    e.tokens = static_cast<int>(e.blocks * c_.block_size);
    evictable_ -= evicted;
    free_ += evicted;
    if (e.blocks == 0) cache_.erase(victim);
  }
  free_ -= blocks;
}

void Replica::unref_prefix(Sequence& s) {
  if (s.prefix_ref < 0) return;
  CachedPrefix& e = cache_.at(s.prefix_ref);
  if (--e.refs == 0) {
    evictable_ += e.blocks;
    e.last_used = now();
  }
  s.prefix_ref = -1;
  s.shared_blocks = 0;
}

// The first sequence to compute a prefix's full blocks hands them to the cache, keeping a reference.
// One that started from a prefix trimmed by eviction (take) hands back the blocks it computed again,
// so the prefix grows whole once more (a trimmed prefix had stayed trimmed for good, and hit less
// than whole eviction had).
void Replica::register_prefix(Sequence& s) {
  if (!c_.prefix_caching || c_.batching == Batching::static_batch || s.request.prefix_id < 0) return;
  const std::int64_t full = s.request.prefix_tokens / c_.block_size;
  if (full == 0 || s.computed < full * c_.block_size) return;
  if (s.prefix_ref >= 0) {
    CachedPrefix& e = cache_.at(s.prefix_ref);
    const std::int64_t missing = full - e.blocks;
    if (s.prefix_ref != s.request.prefix_id || missing <= 0 || s.shared_blocks != e.blocks || s.blocks < missing) return;
    e.blocks = full;
    e.tokens = static_cast<int>(full * c_.block_size);
    s.blocks -= missing;
    s.shared_blocks = full;
    return;
  }
  if (cache_.count(s.request.prefix_id) != 0 || s.blocks < full) return;
  CachedPrefix& e = cache_[s.request.prefix_id];
  e.blocks = full;
  e.tokens = static_cast<int>(full * c_.block_size);
  e.refs = 1;
  s.blocks -= full;
  s.shared_blocks = full;
  s.prefix_ref = s.request.prefix_id;
}

// Frees a sequence's blocks: to host memory when swapping is on and there is room (it resumes where it
// was), else for good (it waits again, to recompute what it had).
void Replica::preempt(int i) {
  Sequence& s = seq(i);
  running_.erase(std::find(running_.begin(), running_.end(), i));
  ++s.result.preemptions;
  ++run_.preemptions;
  const double bytes = static_cast<double>(s.blocks) * block_bytes_;
  free_ += s.blocks;
  s.scheduled = 0;
  if (c_.preemption == Preemption::swap && bytes <= swap_free_) {
    swap_free_ -= bytes;
    swap_seconds_ += bytes / c_.swap_bandwidth;
    s.swapped = true;
    ++run_.swaps;
    swapped_.push_back(i);
    return;
  }
  recompute_later(i);
}

// Sequence i gives up what it computed and its prefix, and waits at the head of the queue to compute
// it again.
void Replica::recompute_later(int i) {
  Sequence& s = seq(i);
  s.blocks = 0;
  s.computed = 0;
  unref_prefix(s);
  push_waiting_front(i);
}

// Static batching: a new batch only when the last one has ended, all of its prompts in one iteration.
bool Replica::admit_static(std::vector<int>& batch, int& budget) {
  if (!running_.empty()) {
    bool live = false;
    for (int i : running_) live |= !seq(i).padding;
    if (live) return false;
    for (int i : running_) {
      free_ += seq(i).blocks;
      seq(i).blocks = 0;
    }
    running_.clear();
  }
  int prompts = 0;
  while (!waiting_.empty() && static_cast<int>(batch.size()) < c_.max_num_seqs) {
    const int i = waiting_.front();
    Sequence& s = seq(i);
    const int n = s.known - s.computed;
    const std::int64_t need = blocks_for(s.request.total_tokens());
    if (need > available() || (!batch.empty() && prompts + n > c_.max_num_batched_tokens)) break;
    waiting_.pop_front();
    queued_tokens_ -= n;
    take(need);
    s.blocks = need;
    s.scheduled = n;
    prompts += n;
    if (!s.started) {
      s.started = true;
      s.result.first_scheduled = now();
    }
    running_.push_back(i);
    batch.push_back(i);
  }
  budget = 0;
  return true;
}

// Forms the next batch and starts its iteration (or goes idle).
void Replica::step() {
  // As vLLM V1's engine loop (step_with_batch_queue): a batch is formed whenever fewer than pp are
  // in flight, and waits for the first stage if it is busy. (Waiting to form it until the stage was
  // free let batches that came out meanwhile merge into one, never to split again: a loaded PP-4
  // replica drifted to one batch of nearly every sequence and ran at a PP-1 replica's rate.)
  if (static_cast<int>(inflight_.size()) >= c_.pp) return;
  int budget = c_.max_num_batched_tokens;
  std::vector<int> batch;
  bool preempted = false;
  if (c_.batching == Batching::static_batch) {
    if (!admit_static(batch, budget)) {
      // The batch decodes on; finished sequences are padding, computed but producing nothing.
      for (int i : running_) {
        seq(i).scheduled = 1;
        batch.push_back(i);
      }
    }
  } else {
    // Running sequences first, in admission order; a sequence that cannot get its blocks preempts
    // the most recently admitted one (itself, when it is the last).
    for (std::size_t k = 0; k < running_.size() && budget > 0;) {
      const int i = running_[k];
      Sequence& s = seq(i);
      if (s.in_flight) {
        ++k;  // its last batch is still in the pipeline
        continue;
      }
      const int n = std::min(s.known - s.computed, budget);
      if (!c_.chunked_prefill && n < s.known - s.computed) {
        ++k;  // a whole prefill that does not fit this iteration's budget waits; the others still run
        continue;
      }
      const std::int64_t need = std::max<std::int64_t>(0, blocks_for(s.computed + n) - s.blocks - s.shared_blocks);  // 0 when reserved up front
      if (need > available()) {
        // The most recently admitted sequence not in the pipeline gives its blocks up.
        int victim = -1;
        for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
          if (!seq(*it).in_flight) {
            victim = *it;
            break;
          }
        }
        if (victim < 0) break;  // every other sequence is in flight: wait for blocks to come back
        preempt(victim);
        preempted = true;
        continue;  // running_[k] is unchanged unless it was the one preempted (then the loop ends)
      }
      take(need);
      s.blocks += need;
      s.scheduled = n;
      budget -= n;
      batch.push_back(i);
      ++k;
    }
    const auto reserve = static_cast<std::int64_t>(std::ceil(c_.watermark * static_cast<double>(run_.kv_blocks)));
    // Swapped-out sequences come back before new requests are admitted: not in an iteration that had
    // to preempt, unless that left the batch empty (a sequence that swapped itself out while another
    // waited swapped, with room for it, had stopped the replica for good: nothing was left to run and
    // no event to step it again).
    const auto swap_in = [&] {
      while ((!preempted || batch.empty()) && !swapped_.empty() && budget > 0 && static_cast<int>(running_.size()) + in_transfer_ < c_.max_num_seqs) {
        const int i = swapped_.front();
        Sequence& s = seq(i);
        const int n = std::min(s.known - s.computed, budget);
        const std::int64_t need = std::max(s.blocks, blocks_for(s.computed + n) - s.shared_blocks);
        if (need > available() || (!running_.empty() && available() - need < reserve)) break;
        swapped_.pop_front();
        const double bytes = static_cast<double>(s.blocks) * block_bytes_;
        swap_free_ += bytes;
        swap_seconds_ += bytes / c_.swap_bandwidth;
        s.swapped = false;
        take(need);
        s.blocks = need;
        s.scheduled = n;
        budget -= n;
        running_.push_back(i);
        batch.push_back(i);
      }
    };
    swap_in();
    // Nothing runs, no copy is coming in or held for going out (whose ends step the replica again),
    // and the head of the swapped cannot come back: the blocks the other swapped sequences' cached
    // prefixes pin keep it out (two sequences of two prefixes on a pool that holds one of them whole
    // had both waited swapped for good). The latest swapped gives its host copy up and will
    // recompute, as a preemption without swap does, releasing its prefix, until the head fits.
    while (batch.empty() && running_.empty() && inflight_.empty() && in_transfer_ == 0 && outgoing_ == 0 && !swapped_.empty()) {
      const int i = swapped_.back();
      Sequence& s = seq(i);
      swapped_.pop_back();
      swap_free_ += static_cast<double>(s.blocks) * block_bytes_;
      --run_.swaps;  // recomputed after all: not among the preemptions swapped to host memory
      s.swapped = false;
      recompute_later(i);
      swap_in();
    }
    // Then waiting requests, first come first served, while the limits and the watermark allow (none
    // in an iteration that had to preempt: memory is short; none while sequences are swapped out).
    // (An idle replica always admits the head of the queue, whatever the watermark, so a request that
    // fits the pool can never wait forever.)
    while ((!preempted || batch.empty()) && swapped_.empty() && !waiting_.empty() && budget > 0 &&
           static_cast<int>(running_.size()) + in_transfer_ < c_.max_num_seqs) {
      const int i = waiting_.front();
      Sequence& s = seq(i);
      // A cached prefix skips its tokens (at least the prompt's last token is computed, for its logits).
      int cached = 0;
      std::int64_t shared = 0;
      if (c_.prefix_caching && s.computed == 0 && s.request.prefix_id >= 0) {
        if (const auto it = cache_.find(s.request.prefix_id); it != cache_.end()) {
          cached = std::min(it->second.tokens, s.known - 1) / c_.block_size * c_.block_size;
          shared = cached / c_.block_size;
        }
      }
      const int n = std::min(s.known - s.computed - cached, budget);
      // Without chunked prefill the whole uncached prompt runs in one iteration, or waits.
      if (!c_.chunked_prefill && n < s.known - s.computed - cached) break;
      // Whole-request reservation covers what the replica will hold: the prompt and its first token on a
      // prefill replica, the prompt and the whole output otherwise.
      const std::int64_t held = role_ == Role::prefill ? std::int64_t{s.request.prompt_tokens} + 1 : s.request.total_tokens();
      const std::int64_t need = (c_.reserve_full_kv ? blocks_for(held) : blocks_for(s.computed + cached + n)) - s.blocks - shared;
      // Reviving an idle cached prefix takes its blocks out of the evictable ones.
      const std::int64_t revived = shared > 0 && cache_.at(s.request.prefix_id).refs == 0 ? shared : 0;
      const std::int64_t room = available() - revived;
      if (need > room || ((!running_.empty() || in_transfer_ > 0) && room - need < reserve)) break;
      waiting_.pop_front();
      queued_tokens_ -= s.known - s.computed;
      if (c_.prefix_caching && s.computed == 0) run_.prefix_query_tokens += s.known;
      if (shared > 0) {
        CachedPrefix& e = cache_.at(s.request.prefix_id);
        if (e.refs++ == 0) evictable_ -= e.blocks;
        s.prefix_ref = s.request.prefix_id;
        s.shared_blocks = shared;
        s.computed = cached;
        run_.prefix_hit_tokens += cached;
      }
      take(need);
      s.blocks += need;
      s.scheduled = n;
      budget -= n;
      if (!s.started) {
        s.started = true;
        s.result.first_scheduled = now();
      }
      running_.push_back(i);
      batch.push_back(i);
    }
  }
  if (batch.empty()) {
    if (role_ == Role::decode) try_transfers();
    return;
  }
  std::vector<BatchEntry> entries;
  entries.reserve(batch.size());
  for (int i : batch) {
    entries.push_back({seq(i).scheduled, seq(i).computed});
    seq(i).in_flight = true;
  }
  // Through the stages in order: each starts the batch when the batch arrives and the stage is free.
  const IterationCost cost = iteration_cost(entries, c_, hw_, &gemm_times_, index_);
  double ready = now() + cost.fixed + swap_seconds_;
  swap_seconds_ = 0;
  for (int st = 0, first = 0; st < c_.pp; ++st) {
    const int count = stage_layers_[static_cast<std::size_t>(st)];
    const double start = std::max(ready, stage_free_[static_cast<std::size_t>(st)]);
    const double end = start + cost.stage(c_.model, first, count, st == c_.pp - 1);
    stage_free_[static_cast<std::size_t>(st)] = end;
    ready = end + (st < c_.pp - 1 && !cost.stage_sends.empty() ? cost.stage_sends[static_cast<std::size_t>(st)] : 0.0);
    first += count;
  }
  const std::int64_t used = run_.kv_blocks - free_ - evictable_;
  run_.peak_kv_blocks = std::max(run_.peak_kv_blocks, used);
  ++run_.iterations;
  // Grown as batches grow (sized by max_num_seqs, a limit of 2e9 had asked for 16 GB).
  if (batch.size() >= run_.batch_size_histogram.size()) run_.batch_size_histogram.resize(batch.size() + 1, 0);
  ++run_.batch_size_histogram[batch.size()];
  inflight_.push_back({std::move(batch)});
  cl_.sim().schedule_at(sim::Time::seconds(stage_free_.back()), this, kIterationEnd);
  if (c_.pp > 1) step();  // the next batch may enter the first stage once it frees
}

void Replica::finish_iteration() {
  std::vector<int> batch_ = std::move(inflight_.front().batch);
  inflight_.pop_front();
  const double t = now();
  double last_gap_source = -1;  // most sequences share the previous token's time: add their gaps together
  std::int64_t same = 0;
  const auto flush = [&] {
    if (same > 0) run_.itl.add(t - last_gap_source, same);
    same = 0;
  };
  for (int i : batch_) {
    Sequence& s = seq(i);
    s.in_flight = false;
    s.computed += s.scheduled;
    s.scheduled = 0;
    register_prefix(s);
    if (s.padding) continue;
    if (s.computed < s.known) continue;  // a prefill chunk short of the end: no token yet
    // The step reached the last known token: the model emits the next one.
    ++s.generated;
    ++s.known;
    if (s.generated == 1 && s.result.first_token == 0) s.result.first_token = t;
    if (s.generated > 1) {
      s.result.max_itl = std::max(s.result.max_itl, t - s.last_token);
      if (s.last_token != last_gap_source) {
        flush();
        last_gap_source = s.last_token;
      }
      ++same;
    }
    s.last_token = t;
    if (s.generated >= s.request.output_tokens) {
      s.result.finish = t;
      if (c_.batching == Batching::static_batch) {
        s.padding = true;  // its slot and blocks stay with the batch
      } else {
        free_ += s.blocks;
        s.blocks = 0;
        unref_prefix(s);
        running_.erase(std::find(running_.begin(), running_.end(), i));
      }
      cl_.finished(i);
    } else if (role_ == Role::prefill && s.generated == 1) {
      // Prefill done: the KV cache moves to a decode replica; the blocks stay until it has gone.
      s.held_blocks = s.blocks;
      ++outgoing_;
      s.blocks = 0;
      s.held_prefix = s.prefix_ref;
      s.prefix_ref = -1;
      s.shared_blocks = 0;
      running_.erase(std::find(running_.begin(), running_.end(), i));
      cl_.prefilled(i);
    }
  }
  flush();
  if (role_ == Role::decode) try_transfers();
}

LatencyStats stats_of(std::vector<double> v) {
  const SampleSummary x = summarize(std::move(v));
  return {x.mean, x.p50, x.p90, x.p99};
}

constexpr double kGapFloor = 1e-6;       // s: the histogram's first bin
constexpr double kGapRatio = 1.001;      // bin width as a ratio
constexpr int kGapBins = 23028;          // ln(1e10) / ln(1.001): up to 10^4 s

ServingMetrics metrics_of(const std::vector<RequestResult>& requests, double kv_blocks, double kv_block_seconds, double makespan,
                          const GapHistogram& itl, const Slo& slo) {
  ServingMetrics m;
  std::vector<double> ttft, tpot, itl_max, e2e, queue;
  double first_arrival = 1e300, last_arrival = 0, last_finish = 0, output = 0, total = 0, in_system = 0;
  int good = 0;
  for (const auto& r : requests) {
    if (r.finish <= 0) continue;
    ++m.completed;
    first_arrival = std::min(first_arrival, r.request.arrival);
    last_arrival = std::max(last_arrival, r.request.arrival);
    last_finish = std::max(last_finish, r.finish);
    ttft.push_back(r.ttft());
    // A request of one output token has no inter-token gap: it counts in neither (vLLM's benchmark
    // leaves it out of TPOT; counting its max gap as 0 had pulled the max-ITL median to 0).
    if (r.request.output_tokens > 1) {
      tpot.push_back(r.tpot());
      itl_max.push_back(r.max_itl);
    }
    e2e.push_back(r.e2e());
    // The clock holds the arrival to its tick, which may fall a few ns before the arrival itself.
    queue.push_back(std::max(0.0, r.first_scheduled - r.request.arrival));
    output += r.request.output_tokens;
    total += static_cast<double>(r.request.total_tokens());
    in_system += r.e2e();
    const bool ok = (slo.ttft <= 0 || r.ttft() <= slo.ttft) && (slo.tpot <= 0 || r.tpot() <= slo.tpot) && (slo.e2e <= 0 || r.e2e() <= slo.e2e);
    good += ok ? 1 : 0;
  }
  if (m.completed == 0) return m;
  m.duration = last_finish - first_arrival;
  const double d = m.duration > 0 ? m.duration : 1e-300;
  m.request_throughput = m.completed / d;
  m.met_slo = static_cast<int>(good);
  m.request_goodput = good / d;
  m.output_throughput = output / d;
  m.total_token_throughput = total / d;
  m.ttft = stats_of(ttft);
  m.tpot = stats_of(tpot);
  m.itl_max = stats_of(itl_max);
  m.itl.mean = itl.mean();
  m.itl.median = itl.quantile(0.5);
  m.itl.p90 = itl.quantile(0.9);
  m.itl.p99 = itl.quantile(0.99);
  m.e2e = stats_of(e2e);
  m.queueing = stats_of(queue);
  m.sustained_output_throughput = m.output_throughput;
  m.sustained_total_token_throughput = m.total_token_throughput;
  // The ramp ends when the first requests have left: after the 90th percentile's time in the system,
  // but never later than 90% of the arrivals' span (a continuous rule: a threshold with a fallback
  // to the drain-included rate had moved $/M 1.5x between two equal runs on either side of it).
  const double span = last_arrival - first_arrival;
  const double from = first_arrival + std::min(m.e2e.p90, 0.9 * span), to = last_arrival;
  // The share of [a, b] inside the window (all of it at an instant inside).
  const auto inside = [&](double a, double b) {
    if (b <= a) return a >= from && a <= to ? 1.0 : 0.0;
    return std::clamp((std::min(b, to) - std::max(a, from)) / (b - a), 0.0, 1.0);
  };
  // Too few arrivals in the window to measure a rate (a handful of requests, or a few far apart):
  // the whole run's rates. (20 is a choice, not a measurement: a Poisson count of 20 is off its
  // mean by more than 22%, one standard deviation, about one time in three.)
  constexpr int kFewestArrivals = 20;
  const auto arrived = std::count_if(requests.begin(), requests.end(),
                                     [&](const RequestResult& r) { return r.finish > 0 && r.request.arrival >= from && r.request.arrival <= to; });
  if (span > 0 && arrived >= kFewestArrivals) {
    double emitted = 0, prompts = 0;
    for (const auto& r : requests) {
      if (r.finish <= 0) continue;
      // The first token at its instant, the others spread to the finish; the prompt's tokens over
      // its prefill, from first scheduling to the first token (counted whole at that instant, a few
      // prompts in a short window had made the total rate 40 times the output's x 4).
      emitted += inside(r.first_token, r.first_token);
      if (r.request.output_tokens > 1) emitted += (r.request.output_tokens - 1) * inside(r.first_token, r.finish);
      prompts += static_cast<double>(r.request.total_tokens() - r.request.output_tokens) * inside(r.first_scheduled, r.first_token);
    }
    m.sustained_output_throughput = emitted / (to - from);
    m.sustained_total_token_throughput = (emitted + prompts) / (to - from);
  }
  m.mean_concurrency = in_system / d;
  m.mean_kv_use = kv_blocks > 0 && makespan > 0 ? kv_block_seconds / (kv_blocks * d) : 0;
  return m;
}

}  // namespace

std::string_view to_string(Batching b) { return b == Batching::continuous ? "continuous" : "static"; }
std::string_view to_string(Preemption p) { return p == Preemption::recompute ? "recompute" : "swap"; }
std::string_view to_string(Router r) {
  switch (r) {
    case Router::round_robin: return "round-robin";
    case Router::least_outstanding: return "least-outstanding";
    case Router::kv_aware: return "kv-aware";
  }
  return "?";
}

void GapHistogram::add(double seconds, std::int64_t count) {
  if (count <= 0) return;
  if (bins_.empty()) bins_.assign(kGapBins, 0);
  const double x = std::max(seconds, kGapFloor);
  const int bin = std::min(kGapBins - 1, static_cast<int>(std::log(x / kGapFloor) / std::log(kGapRatio)));
  bins_[static_cast<std::size_t>(bin)] += count;
  count_ += count;
  sum_ += seconds * static_cast<double>(count);
}

void GapHistogram::merge(const GapHistogram& o) {
  if (o.bins_.empty()) return;
  if (bins_.empty()) bins_.assign(kGapBins, 0);
  for (std::size_t i = 0; i < bins_.size(); ++i) bins_[i] += o.bins_[i];
  count_ += o.count_;
  sum_ += o.sum_;
}

double GapHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  const auto centre = [](std::size_t bin) { return kGapFloor * std::pow(kGapRatio, static_cast<double>(bin) + 0.5); };
  // The values of ranks lo and lo + 1 (0-based), then numpy's interpolation between them.
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(count_ - 1);
  const auto lo = static_cast<std::int64_t>(std::floor(pos));
  double v_lo = 0, v_hi = 0;
  bool have_lo = false;
  std::int64_t seen = 0;
  for (std::size_t b = 0; b < bins_.size(); ++b) {
    if (bins_[b] == 0) continue;
    seen += bins_[b];
    if (!have_lo && seen > lo) {
      v_lo = centre(b);
      have_lo = true;
    }
    if (seen > lo + 1 || (have_lo && lo + 1 >= count_)) {
      v_hi = centre(b);
      break;
    }
  }
  return v_lo + (pos - static_cast<double>(lo)) * (v_hi - v_lo);
}

ClusterRun run_cluster(const std::vector<ServingRequest>& requests, const ClusterConfig& config, const hardware::HardwareProfile& hw,
                       std::optional<ClosedLoop> closed_loop) {
  const ReplicaConfig& c = config.replica;
  if (c.tp < 1 || c.pp < 1 || c.max_num_seqs < 1 || c.max_num_batched_tokens < 1 || c.block_size < 1) {
    throw std::invalid_argument("tp, pp, max_num_seqs, max_num_batched_tokens and block_size must be at least 1");
  }
  if (c.pp > 1 && c.batching == Batching::static_batch) throw std::invalid_argument("static batching does not combine with pipeline parallelism");
  if (c.pp > 1 && !c.pp_send_seconds) throw std::invalid_argument("pipeline parallelism needs the stages' send time (pp_send_seconds)");
  if (c.preemption == Preemption::swap && !(c.swap_bandwidth > 0)) {
    throw std::invalid_argument("swap preemption needs the GPU's host-link bandwidth (swap_bandwidth > 0)");
  }
  if (!(c.swap_space_bytes >= 0)) throw std::invalid_argument("the swap space cannot be negative");
  if (closed_loop && closed_loop->concurrency < 1) throw std::invalid_argument("closed-loop concurrency must be at least 1");
  for (std::size_t i = 1; i < requests.size(); ++i) {
    if (requests[i].arrival < requests[i - 1].arrival) throw std::invalid_argument("requests must be sorted by arrival time");
  }
  Cluster cluster(requests, config, hw, closed_loop);
  return cluster.run();
}

ReplicaRun run_replica(const std::vector<ServingRequest>& requests, const ReplicaConfig& c, const hardware::HardwareProfile& hw,
                       std::optional<ClosedLoop> closed_loop) {
  ClusterConfig config;
  config.replica = c;
  ClusterRun run = run_cluster(requests, config, hw, closed_loop);
  return std::move(run.replicas.front());
}

namespace {
// Tokens served from the prefix cache over the tokens looked up in it.
double hit_rate(std::int64_t hits, std::int64_t queries) { return queries > 0 ? static_cast<double>(hits) / static_cast<double>(queries) : 0; }
}  // namespace

ServingMetrics serving_metrics(const ReplicaRun& run, const Slo& slo) {
  ServingMetrics m = metrics_of(run.requests, static_cast<double>(run.kv_blocks), run.kv_block_seconds, run.makespan, run.itl, slo);
  m.preemptions = run.preemptions;
  m.swaps = run.swaps;
  m.prefix_hit_rate = hit_rate(run.prefix_hit_tokens, run.prefix_query_tokens);
  return m;
}

ServingMetrics serving_metrics(const ClusterRun& run, const Slo& slo) {
  // The pools summed in a double: 262,144 replicas of up to 5e14 blocks each pass 64 bits.
  std::int64_t preemptions = 0, swaps = 0, hits = 0, queries = 0;
  double blocks = 0, block_seconds = 0, makespan = 0;
  GapHistogram itl;
  for (const auto& r : run.replicas) {
    blocks += static_cast<double>(r.kv_blocks);
    block_seconds += r.kv_block_seconds;
    makespan = std::max(makespan, r.makespan);
    preemptions += r.preemptions;
    swaps += r.swaps;
    hits += r.prefix_hit_tokens;
    queries += r.prefix_query_tokens;
    itl.merge(r.itl);
  }
  ServingMetrics m = metrics_of(run.requests, blocks, block_seconds, makespan, itl, slo);
  m.preemptions = preemptions;
  m.swaps = swaps;
  m.prefix_hit_rate = hit_rate(hits, queries);
  m.kv_transfers = run.kv_transfers;
  m.mean_kv_transfer = run.kv_transfers > 0 ? run.kv_transfer_seconds / static_cast<double>(run.kv_transfers) : 0;
  return m;
}

int LengthDistribution::sample(std::uint64_t& state) const {
  double v = a;
  switch (kind) {
    case Kind::fixed: v = a; break;
    case Kind::uniform: v = a + std::floor(uniform01(state) * (b - a + 1)); break;
    case Kind::lognormal: v = std::round(a * std::exp(b * standard_normal(state))); break;
    case Kind::empirical:
      if (values.empty()) throw std::invalid_argument("an empirical length distribution needs values");
      v = values[static_cast<std::size_t>(uniform01(state) * static_cast<double>(values.size()))];
      break;
  }
  // A heavy tail (a lognormal's large sigma) can draw lengths past an int: keep them representable;
  // a request that long is then refused for not fitting the context, with its size.
  if (!(v >= 1.0)) return 1;
  if (v >= static_cast<double>(std::numeric_limits<int>::max())) return std::numeric_limits<int>::max();
  return static_cast<int>(v);
}

std::vector<ServingRequest> generate_requests(int count, const ArrivalProcess& arrivals, const LengthDistribution& prompt,
                                              const LengthDistribution& output, std::uint64_t seed, const SharedPrefix& prefix, int context) {
  if (prefix.tokens < 0 || prefix.groups < 1) throw std::invalid_argument("a shared prefix needs tokens >= 0 and at least one group");
  std::uint64_t prefix_state = seed ^ 0x5deece66dull;
  if (count < 0) throw std::invalid_argument("the request count cannot be negative");
  if (arrivals.kind != ArrivalProcess::Kind::offline && !(arrivals.rate > 0)) throw std::invalid_argument("the arrival rate must be positive");
  if (arrivals.kind == ArrivalProcess::Kind::gamma && !(arrivals.burstiness > 0)) throw std::invalid_argument("the burstiness must be positive");
  std::uint64_t state = seed;
  // Fixed lengths are never drawn again: they are the caller's to refuse.
  const bool redraw = context > 0 && (prompt.kind != LengthDistribution::Kind::fixed || output.kind != LengthDistribution::Kind::fixed);
  std::vector<ServingRequest> out;
  out.reserve(static_cast<std::size_t>(count));
  double t = 0;
  for (int i = 0; i < count; ++i) {
    if (arrivals.kind == ArrivalProcess::Kind::poisson) {
      t += -std::log(uniform01(state)) / arrivals.rate;
    } else if (arrivals.kind == ArrivalProcess::Kind::gamma) {
      // Gamma inter-arrivals with shape = burstiness and mean 1/rate (vLLM benchmark_serving's).
      t += gamma_sample(arrivals.burstiness, state) / (arrivals.burstiness * arrivals.rate);
    }
    ServingRequest r;
    r.id = i;
    r.arrival = t;
    r.prompt_tokens = prompt.sample(state);
    r.output_tokens = output.sample(state);
    const auto fits = [&] { return std::int64_t{r.prompt_tokens} + prefix.tokens + r.output_tokens <= context; };
    if (redraw && !fits()) {
      // Drawn again from a stream of the request's own, so that the requests that fit (and every
      // arrival) are the ones the seed gives without the context.
      std::uint64_t mix = seed ^ (0x632be59bd9b4e019ull * static_cast<std::uint64_t>(i + 1));
      std::uint64_t again = splitmix64(mix);  // hashed, so that it is none of the main stream's states
      for (int draws = 1; !fits(); ++draws) {
        if (draws == kMaxLengthDraws) {
          throw std::invalid_argument(fmt::format("{} draws in a row of request {}'s prompt{} and output lengths exceed max_model_len ({} tokens)",
                                                  kMaxLengthDraws, i, prefix.tokens > 0 ? " (with its shared prefix)" : "", context));
        }
        r.prompt_tokens = prompt.sample(again);
        r.output_tokens = output.sample(again);
      }
      r.redrawn = true;
    }
    if (prefix.tokens > 0) {
      r.prefix_id = static_cast<int>(uniform01(prefix_state) * prefix.groups);
      r.prefix_tokens = prefix.tokens;
      if (std::int64_t{r.prompt_tokens} + prefix.tokens > std::numeric_limits<int>::max()) {
        throw std::invalid_argument(fmt::format("request {}'s prompt of {} tokens and shared prefix of {} are more tokens than a request can hold", i,
                                                r.prompt_tokens, prefix.tokens));
      }
      r.prompt_tokens += prefix.tokens;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<ServingRequest> read_trace(const std::filesystem::path& file) {
  std::ifstream in = open_input_file(file, "a request trace (CSV)");
  InputsRead::note(file);
  const auto where = [&](int line) { return SourceLocation{std::make_shared<const std::string>(file.string()), line, 1}; };
  std::string line;
  int number = 0;
  bool with_prefix = false;
  std::vector<ServingRequest> out;
  std::map<int, int> prefix_lengths;  // prefix id -> its tokens, from the first row that names it
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // A control character or a byte that is not UTF-8 (a binary file, a NUL in a row) is refused at
    // its line: quoted in a message it had cut the message short on the terminal.
    if (const std::string why = plain_text_problem(line); !why.empty()) {
      throw InputError(where(number), fmt::format("expected a text row of comma-separated values, but {}", why));
    }
    if (number == 1) {
      if (line == "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens") {
        with_prefix = true;
      } else if (line != "arrival_s,prompt_tokens,output_tokens") {
        throw InputError(where(1), "header", "'arrival_s,prompt_tokens,output_tokens' (optionally ',prefix_id,prefix_tokens')", "'" + line + "'");
      }
      continue;
    }
    if (line.empty()) continue;
    std::stringstream row(line);
    std::string a, p, o, pid, ptok, extra;
    std::getline(row, a, ',');
    std::getline(row, p, ',');
    std::getline(row, o, ',');
    if (with_prefix) {
      std::getline(row, pid, ',');
      std::getline(row, ptok, ',');
    }
    const std::size_t columns = with_prefix ? 5 : 3;
    if (std::getline(row, extra, ',') || o.empty() || (with_prefix && ptok.empty())) {
      throw InputError(where(number), "row", fmt::format("{} comma-separated values", columns), "'" + line + "'");
    }
    ServingRequest r;
    r.id = static_cast<int>(out.size());
    r.trace_line = number;
    // Each cell is checked on its own, and a refusal names its column and where it starts.
    const std::array<const std::string*, 5> cells = {&a, &p, &o, &pid, &ptok};
    const auto refuse = [&](std::size_t column, const char* name, const std::string& expected) {
      int at = 1;
      for (std::size_t k = 0; k < column; ++k) at += static_cast<int>(cells[k]->size()) + 1;
      throw InputError(SourceLocation{std::make_shared<const std::string>(file.string()), number, at}, name, expected, "'" + *cells[column] + "'");
    };
    // A cell's number without the blanks around it and a leading '+', which every column allows;
    // nothing for a blank cell or a '+' before another sign ('+-1' is no number).
    const auto bare = [](const std::string& cell) -> std::string_view {
      const std::size_t first = cell.find_first_not_of(" \t"), last = cell.find_last_not_of(" \t");
      if (first == std::string::npos) return {};
      std::string_view v = std::string_view(cell).substr(first, last - first + 1);
      if (v.size() > 1 && v.front() == '+') {
        v.remove_prefix(1);
        if (v.front() == '+' || v.front() == '-') return {};
      }
      return v;
    };
    // A whole number within [low, high], or nothing (the caller refuses it, its message built then).
    const auto whole = [&](std::size_t column, int low, int high) -> std::optional<int> {
      const std::string_view digits = bare(*cells[column]);
      int v = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v < low || v > high) return std::nullopt;
      return v;
    };
    {
      // A decimal number (std::stod also took hexadecimal, 0x10 as 16 s).
      const std::string_view digits = bare(a);
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r.arrival);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || !(r.arrival >= 0) || !(r.arrival <= kMaxArrivalSeconds)) {
        refuse(0, "arrival_s", fmt::format("a time in seconds from 0 to {:.3g}", kMaxArrivalSeconds));
      }
    }
    constexpr int kMax = std::numeric_limits<int>::max();
    const auto count = [&](std::size_t column, const char* name) {
      const auto v = whole(column, 1, kMax);
      if (!v) refuse(column, name, fmt::format("a token count from 1 to {}", kMax));
      return *v;
    };
    r.prompt_tokens = count(1, "prompt_tokens");
    r.output_tokens = count(2, "output_tokens");
    if (with_prefix) {
      const auto id = whole(3, -1, kMax);
      if (!id) refuse(3, "prefix_id", fmt::format("a prefix id from -1 (none) to {}", kMax));
      const auto length = whole(4, 0, r.prompt_tokens);
      if (!length) refuse(4, "prefix_tokens", fmt::format("a prefix length from 0 to the prompt's {} tokens", r.prompt_tokens));
      r.prefix_id = *id;
      r.prefix_tokens = *length;
    }
    if (r.prefix_id < 0 && r.prefix_tokens != 0) {
      // Prefix id -1 is no shared prefix: a length for it would be silently dropped.
      refuse(4, "prefix_tokens", "0 with prefix id -1 (no shared prefix)");
    }
    if (!out.empty() && r.arrival < out.back().arrival) {
      refuse(0, "arrival_s", fmt::format("a time no earlier than the previous row's ({})", out.back().arrival));
    }
    if (r.prefix_id >= 0) {
      // One prefix is one text: every request naming it shares the same number of its tokens.
      const auto [it, fresh] = prefix_lengths.emplace(r.prefix_id, r.prefix_tokens);
      if (!fresh && it->second != r.prefix_tokens) {
        refuse(4, "prefix_tokens", fmt::format("{} tokens, as the earlier rows with prefix id {} give", it->second, r.prefix_id));
      }
    }
    out.push_back(r);
  }
  if (number == 0) throw InputError(where(0), "the trace is empty (expected the header arrival_s,prompt_tokens,output_tokens)");
  if (out.empty()) throw InputError(where(number), "the trace holds no request (expected rows after the header)");
  return out;
}

}  // namespace cs::models
