// LLM serving on one replica: requests, the iteration-time roofline, a vLLM-style continuous-batching
// scheduler over a PagedAttention KV block pool, and the metrics vLLM's benchmark reports.
//
// Iteration time (one forward pass of the batch the scheduler formed), per GPU of a TP group:
//   FLOPs = 2 x active_parameters x tokens + attention, the causal attention core of a prefill chunk of
//           c tokens after p cached ones costing 4 x L x attention_width x c x (p + c/2), and a decode
//           step at context n costing 4 x L x attention_width x n (QK^T and PV, 2 FLOPs per MAC)
//   bytes = the weights once (active parameters x weight bytes) + every scheduled sequence's KV cache
//           read + the new KV entries written
//   t = max(FLOPs / (tp x peak x max_efficiency), bytes / (tp x HBM bandwidth x memory_efficiency))
//       + 2 x layers TP all-reduces of tokens x hidden x 2 bytes (tp > 1) + iteration_overhead
// (the roofline docs/serving.md derives; prefill lands on the compute side, decode on the bytes side).
//
// Scheduler (vLLM V1's, in its default shape): every iteration, running sequences first, each asks for
// its next tokens (1 when decoding, up to the chunk budget when prefilling); then waiting requests are
// admitted in arrival order while max_num_seqs and max_num_batched_tokens allow. A sequence needs KV
// blocks (block_size tokens each) for every token it holds; when the pool cannot give a running
// sequence its block, the most recently admitted running sequence is preempted by recompute: its
// blocks are freed and it returns to the front of the waiting queue, to prefill its prompt and the
// tokens it already produced again. A new request is admitted only while more than `watermark` of the
// blocks would stay free.
//
// Preemption by swap (vLLM V0's --preemption-mode swap) copies the victim's blocks to host memory over
// the GPU's host link instead, and copies them back when it is rescheduled; the copies' time is added
// to the iteration that does them. Static batching (for comparison) admits a batch only when the
// replica is empty, prefills it at once and decodes until its last sequence ends, finished sequences
// still computed as padding, as a framework's generate() over a padded batch does.
//
// A cluster (run_cluster) runs every replica on one event engine behind a router that picks a replica
// for each arrival: round-robin, least outstanding requests, or KV-aware (the most KV blocks left
// after the prompts already queued there). With prefill/decode disaggregation, prefill replicas run
// prompts to their first token; the router then picks a decode replica, which reserves the blocks
// and pulls the KV cache over the topology (flows on the fluid network, contention included) before
// decoding; the prefill replica holds the blocks until the copy ends.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "clustersim/common/units.hpp"
#include "clustersim/hardware/hardware_profile.hpp"
#include "clustersim/sim/time.hpp"
#include "clustersim/models/transformer.hpp"
#include "clustersim/sim/task_graph.hpp"

namespace cs::models {

struct ServingRequest {
  int id = 0;
  double arrival = 0;  // s
  int prompt_tokens = 1;   // the shared prefix included
  int output_tokens = 1;
  int prefix_id = -1;      // requests with the same id start with the same prefix_tokens (a system prompt)
  int prefix_tokens = 0;
  int trace_line = 0;      // the trace CSV's line it was read from (0: generated)
  bool redrawn = false;    // generated: its first lengths exceeded the context, these were drawn again
  // Prompt and output together, in 64 bits: each may be as large as an int.
  [[nodiscard]] std::int64_t total_tokens() const { return std::int64_t{prompt_tokens} + output_tokens; }
  // The most tokens one pass of it prefills without chunking: its prompt, or after a preemption by
  // recompute its prompt and every token generated but the last, which is never fed back.
  [[nodiscard]] std::int64_t longest_pass_tokens() const { return total_tokens() - 1; }
};

enum class Batching { continuous, static_batch };
enum class Preemption { recompute, swap };
enum class Router { round_robin, least_outstanding, kv_aware };
std::string_view to_string(Batching b);
std::string_view to_string(Preemption p);
std::string_view to_string(Router r);

struct ReplicaConfig {
  TransformerSpec model;
  int tp = 1;
  int pp = 1;                                       // pipeline stages (layers split evenly, the last takes the LM head)
  int ep = 1;                                       // MoE: 1 = experts TP-sliced; = tp: whole experts spread over the TP ranks
  bool expert_parallel = false;                     // the scenario's expert_parallel: ep follows tp wherever tp is set (plan sizing)
  hardware::Dtype weights = hardware::Dtype::bf16;  // the GEMMs' dtype (fp8 weights run fp8 GEMMs)
  double weight_bytes_per_parameter = 0;            // 0: the dtype's size; 0.5 for int4 weight-only
  double kv_bytes_per_element = 2;                  // 2 for fp16/bf16, 1 for fp8
  int max_model_len = 0;                            // tokens a request may hold (vLLM's); 0: the model's seq_len
  int max_num_seqs = 256;                           // vLLM's default
  int max_num_batched_tokens = 8192;                // vLLM V1's default with chunked prefill
  bool chunked_prefill = true;
  // Admission: false reserves KV blocks as tokens need them and preempts when the pool runs dry (vLLM);
  // true reserves a request's whole prompt + output at admission and never preempts (TensorRT-LLM's
  // default GUARANTEED_NO_EVICT capacity scheduler).
  bool reserve_full_kv = false;
  int block_size = 16;                              // vLLM's default
  double watermark = 0.01;                          // vLLM's default
  double gpu_memory_utilization = 0.9;              // vLLM's default: what the KV pool may fill, with the weights
  Seconds iteration_overhead = Seconds(0);          // scheduling and launch cost of one iteration
  Batching batching = Batching::continuous;
  // Automatic prefix caching (vLLM V1's default): the full blocks of a shared prefix stay cached after
  // their first computation; later requests with that prefix reuse them instead of computing them;
  // unreferenced cached blocks are evicted least recently used first when blocks run short.
  bool prefix_caching = true;
  Preemption preemption = Preemption::recompute;
  double swap_space_bytes = 4.0 * (1ull << 30);     // host memory for swapped blocks per GPU (vLLM's swap_space, 4 GiB)
  double swap_bandwidth = 0;                        // bytes/s between a GPU and host memory; swap needs it > 0
  // Time of one TP all-reduce of `bytes` (from the collective model); nothing: 0 (tp = 1 needs none).
  std::function<double(double bytes)> all_reduce_seconds;
  // Time of the pipeline send from stage `boundary` to the next of replica `replica` (pp > 1): each
  // of the stage's GPUs sends `bytes` to its counterpart, all at once.
  std::function<double(int replica, int boundary, double bytes)> pp_send_seconds;

  // The tokens a request may hold: max_model_len, or the model's seq_len when it is 0.
  [[nodiscard]] int context() const { return max_model_len > 0 ? max_model_len : model.seq_len; }
};

// KV cache bytes of one token in one layer (K and V), per GPU of the TP group.
double kv_bytes_per_layer_token(const ReplicaConfig& c);
// KV cache bytes of one token on the fullest pipeline stage (all layers without PP), per GPU.
double kv_bytes_per_token(const ReplicaConfig& c);
// Layers of each of pp pipeline stages, as vLLM splits them: the remainder one each to the stages
// before the last, from the second-to-last back.
std::vector<int> stage_layer_counts(int layers, int pp);
// Weight bytes one GPU of a pipeline stage holds: `layers` layers from `first_layer`, the embedding
// on the first stage, the LM head on the last.
double stage_weight_bytes(const ReplicaConfig& c, int first_layer, int layers, bool first_stage, bool last_stage);
// KV blocks the replica's memory holds after its weights, on the stage with the least room; throws
// std::invalid_argument when a stage's weights alone do not fit.
std::int64_t kv_block_capacity(const ReplicaConfig& c, const hardware::HardwareProfile& hw);

// One sequence's work in an iteration.
struct BatchEntry {
  int new_tokens = 0;   // prefill chunk length, or 1 for a decode step
  int context = 0;      // tokens already in the KV cache before this step
};
// An iteration's cost split by layer kind, for pipeline stages: a stage's time is its layers' costs
// (plus the head on the last stage); the batch's fixed cost is paid once, each stage boundary adds a send.
struct IterationCost {
  double dense_layer = 0;  // one dense layer on one GPU of the stage
  double moe_layer = 0;    // one MoE layer
  double head = 0;         // LM head and sampling
  double fixed = 0;        // iteration_overhead
  std::vector<double> stage_sends;  // per stage boundary: the batch's hidden states to the next stage
  [[nodiscard]] double stage(const TransformerSpec& m, int first_layer, int layers, bool last) const;
};
// Memo of the GEMM times one replica asks for: its iterations repeat a few shapes (the weights' N and
// K, the batch's token count as M) millions of times in an hour of traffic. Valid for one profile.
class GemmTimeCache {
 public:
  template <class Compute>
  double get(std::int64_t m, std::int64_t n, std::int64_t k, double b_bytes, hardware::Dtype dtype, Compute&& compute) {
    const Key key{m, n, k, b_bytes, dtype};
    if (auto it = times_.find(key); it != times_.end()) return it->second;
    const double t = compute();
    times_.emplace(key, t);
    return t;
  }

 private:
  struct Key {
    std::int64_t m, n, k;
    double b_bytes;  // the weights' bytes per element when narrower than the compute dtype (0: not)
    hardware::Dtype dtype;  // the GEMM's: the quantised layers', or 16-bit for the head and router
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key& x) const noexcept {
      std::uint64_t h = static_cast<std::uint64_t>(x.m) * 0x9E3779B97F4A7C15ULL;
      h ^= static_cast<std::uint64_t>(x.n) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
      h ^= static_cast<std::uint64_t>(x.k) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
      h ^= static_cast<std::uint64_t>(x.b_bytes * 16) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
      h ^= static_cast<std::uint64_t>(x.dtype) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
      return static_cast<std::size_t>(h);
    }
  };
  std::unordered_map<Key, double, Hash> times_;
};
// `cache` (optional) must only ever see this replica config and profile; `replica`: whose stage
// boundaries the sends cross.
IterationCost iteration_cost(const std::vector<BatchEntry>& batch, const ReplicaConfig& c, const hardware::HardwareProfile& hw,
                             GemmTimeCache* cache = nullptr, int replica = 0);
// The iteration's duration on an idle replica (replica 0): fixed + every layer + head + the sends.
double iteration_seconds(const std::vector<BatchEntry>& batch, const ReplicaConfig& c, const hardware::HardwareProfile& hw);

// Inter-token gaps of every output token after the first (vLLM's ITL), binned on a log scale of
// ratio 1.001 from 1 us to 10^4 s: quantiles within 0.05%, the mean exact.
class GapHistogram {
 public:
  void add(double seconds, std::int64_t count = 1);
  void merge(const GapHistogram& other);
  [[nodiscard]] std::int64_t count() const { return count_; }
  [[nodiscard]] double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  // The q-quantile (0..1) by numpy's linear interpolation between closest ranks, on bin centres.
  [[nodiscard]] double quantile(double q) const;

 private:
  std::vector<std::int64_t> bins_;
  std::int64_t count_ = 0;
  double sum_ = 0;
};

struct RequestResult {
  ServingRequest request;
  int replica = -1;            // the replica that admitted it (the prefill replica when disaggregated)
  int decode_replica = -1;     // disaggregated: the replica that decoded it
  double kv_transfer_start = 0;  // s, disaggregated: the KV copy to the decode replica
  double kv_transfer_end = 0;
  double first_scheduled = 0;  // s: when it first entered a batch
  double first_token = 0;      // s
  double finish = 0;           // s
  int preemptions = 0;
  double max_itl = 0;          // s: the longest gap between two output tokens
  [[nodiscard]] double ttft() const { return first_token - request.arrival; }
  [[nodiscard]] double e2e() const { return finish - request.arrival; }
  // Time per output token after the first (vLLM's TPOT); 0 for a one-token output.
  [[nodiscard]] double tpot() const {
    return request.output_tokens > 1 ? (finish - first_token) / (request.output_tokens - 1) : 0.0;
  }
};

struct ReplicaRun {
  std::vector<RequestResult> requests;  // in request id order
  std::int64_t kv_blocks = 0;           // the pool
  std::int64_t peak_kv_blocks = 0;      // most blocks in use at once
  double kv_block_seconds = 0;          // integral of blocks in use over time
  std::int64_t iterations = 0;
  std::int64_t preemptions = 0;
  std::int64_t swaps = 0;               // preemptions that swapped out instead of recomputing
  std::int64_t prefix_hit_tokens = 0;   // tokens served from the prefix cache
  std::int64_t prefix_query_tokens = 0; // tokens looked up in it: every admission's prompt (and a
                                        // recomputed request's output so far), as vLLM counts them
  std::vector<std::int64_t> batch_size_histogram;  // [n] = iterations that ran n sequences
  GapHistogram itl;                     // gaps of the tokens it produced
  double makespan = 0;                  // s: the last finish
  std::uint64_t events = 0;
};

// Closed-loop load: each of `concurrency` clients sends its next request as soon as the last one
// finished. `requests` then gives the lengths, in order; their arrival times are set by the run.
struct ClosedLoop {
  int concurrency = 1;
};

// Runs the requests (sorted by arrival) through one replica on the event engine. Throws
// std::invalid_argument for a request that can never fit in the KV pool.
ReplicaRun run_replica(const std::vector<ServingRequest>& requests, const ReplicaConfig& c, const hardware::HardwareProfile& hw,
                       std::optional<ClosedLoop> closed_loop = std::nullopt);

// Prefill/decode disaggregation: `prefill` replicas take the arrivals, `decode` replicas the rest.
struct Disaggregation {
  int prefill = 1;
  int decode = 1;
  // The network the KV copies share (directed link capacities, bytes/s) and the flows that copy
  // `bytes_per_gpu` from each GPU of prefill replica p to its peer of decode replica d.
  std::vector<double> link_capacities;
  std::function<std::vector<sim::FlowSpec>(int p, int d, double bytes_per_gpu)> kv_flows;
};

struct ClusterConfig {
  ReplicaConfig replica;
  int replicas = 1;  // aggregated replicas (with disaggregation: prefill + decode)
  Router router = Router::round_robin;
  std::optional<Disaggregation> disaggregation;
};

struct ClusterRun {
  std::vector<ReplicaRun> replicas;     // aggregated ones; disaggregated: the prefill ones, then the decode ones
  std::vector<RequestResult> requests;  // every request, in id order
  std::int64_t kv_transfers = 0;
  double kv_transfer_seconds = 0;       // sum over the copies
  std::uint64_t events = 0;
};

// Runs the requests (sorted by arrival) through the cluster on one event engine. Throws
// std::invalid_argument for an impossible configuration or a request that can never fit.
ClusterRun run_cluster(const std::vector<ServingRequest>& requests, const ClusterConfig& config, const hardware::HardwareProfile& hw,
                       std::optional<ClosedLoop> closed_loop = std::nullopt);

// Metrics with vLLM benchmark names, over finished requests.
struct LatencyStats {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};
struct Slo {
  double ttft = 0;  // s; 0: no limit
  double tpot = 0;
  double e2e = 0;
};
struct ServingMetrics {
  int completed = 0;
  int met_slo = 0;                 // requests meeting every SLO given (the goodput's count)
  double duration = 0;             // s: first arrival to last finish
  double request_throughput = 0;   // req/s
  double request_goodput = 0;      // req/s meeting every SLO given
  double output_throughput = 0;    // tok/s: output tokens over the duration (vLLM's benchmark_serving)
  // tok/s emitted in steady state: from the first arrival plus the 90th percentile's time in the
  // system (at most 90% of the arrivals' span) to the last arrival, without the start's ramp or the
  // last requests' drain (each request's tokens after its first spread evenly to its finish); the
  // pricing's rate, as the fleet serves a continuing load. Where fewer than 20 requests arrive in
  // that window (all at once, a handful, or a few far apart), output_throughput.
  double sustained_output_throughput = 0;
  double sustained_total_token_throughput = 0;  // the same window: outputs, and prompts spread over their prefill
  double total_token_throughput = 0;
  LatencyStats ttft, tpot, itl, itl_max, e2e, queueing;  // itl: every gap; itl_max: each request's largest
  double mean_concurrency = 0;     // requests in the system, time-averaged (Little's L)
  double mean_kv_use = 0;          // fraction of the pool, time-averaged
  std::int64_t preemptions = 0;
  std::int64_t swaps = 0;
  double prefix_hit_rate = 0;      // tokens served from the prefix cache / tokens looked up in it
  std::int64_t kv_transfers = 0;
  double mean_kv_transfer = 0;     // s
};
ServingMetrics serving_metrics(const ReplicaRun& run, const Slo& slo = {});
ServingMetrics serving_metrics(const ClusterRun& run, const Slo& slo = {});

// Workloads, seeded and reproducible.
struct LengthDistribution {
  enum class Kind { fixed, uniform, lognormal, empirical } kind = Kind::fixed;
  double a = 128, b = 128;          // fixed: a; uniform: [a, b]; lognormal: median a, sigma b
  std::vector<int> values;          // empirical: drawn uniformly
  int sample(std::uint64_t& state) const;
};
struct ArrivalProcess {
  enum class Kind { poisson, gamma, offline } kind = Kind::poisson;
  double rate = 1;                  // requests/s
  double burstiness = 1;            // gamma shape (1 = Poisson; < 1 burstier), as vLLM's --burstiness
};
// Shared prefixes: each request starts with one of `groups` prefixes of `tokens` tokens (drawn
// uniformly, from its own seeded stream) before its own prompt tokens.
struct SharedPrefix {
  int tokens = 0;
  int groups = 1;
};
// The latest a workload's requests may arrive (s): half the simulated clock's range
// (sim::Time::kLimit, about 146 years), so that the requests' own times after them still fit.
// Traces are held to it row by row, generated workloads by their mean span.
inline constexpr double kMaxArrivalSeconds = 0.5 * static_cast<double>(sim::Time::kLimit) * 1e-9;
// With `context` > 0 (the server's max_model_len), random lengths are drawn from the distributions
// truncated to requests whose prompt (its shared prefix included) and output fit `context` tokens,
// as a client that must fit the context sends them: a pair that does not fit is drawn again, from a
// stream of the request's own (std::invalid_argument after kMaxLengthDraws misses in a row). Fixed
// lengths are kept as given, for the caller to refuse. std::invalid_argument too for a prompt and
// shared prefix past an int.
inline constexpr int kMaxLengthDraws = 1000;
std::vector<ServingRequest> generate_requests(int count, const ArrivalProcess& arrivals, const LengthDistribution& prompt,
                                              const LengthDistribution& output, std::uint64_t seed, const SharedPrefix& prefix = {},
                                              int context = 0);
// A trace CSV with header `arrival_s,prompt_tokens,output_tokens` (optionally `,prefix_id,prefix_tokens`);
// throws InputError naming the file and line for a malformed or unsorted row.
std::vector<ServingRequest> read_trace(const std::filesystem::path& file);

}  // namespace cs::models
