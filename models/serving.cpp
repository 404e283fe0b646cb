#include "clustersim/models/serving.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/hardware/gemm_model.hpp"
#include "clustersim/sim/simulator.hpp"

namespace cs::models {

namespace {

constexpr double kPi = 3.14159265358979323846;

// splitmix64 (Steele, Lea and Flood 2014): a fixed, portable generator, so a seed gives the same
// requests on every platform (std's distributions are implementation-defined).
std::uint64_t next_u64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Uniform in (0, 1).
double uniform01(std::uint64_t& s) { return (static_cast<double>(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; }
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

}  // namespace

double kv_bytes_per_token(const ReplicaConfig& c) {
  const TransformerSpec& m = c.model;
  // K and V per layer: kv_heads x head_dim each (MLA caches its compressed latent and rope key).
  const double per_layer = m.mla ? (m.mla->kv_lora_rank + m.mla->qk_rope_head_dim) : 2.0 * m.kv_heads * m.head_dim;
  // TP splits KV heads across GPUs (a KV head is replicated when there are fewer than tp of them).
  const double shards = m.mla ? 1.0 : std::min<double>(c.tp, std::max(1, m.kv_heads));
  return m.layers * per_layer * c.kv_bytes_per_element / shards;
}

std::int64_t kv_block_capacity(const ReplicaConfig& c, const hardware::HardwareProfile& hw) {
  const double params = count_parameters(c.model).total();
  const double weights_per_gpu = params * weight_bytes(c) / c.tp;
  const double usable = hw.memory_capacity.value() * c.gpu_memory_utilization;
  if (weights_per_gpu >= usable) {
    throw std::invalid_argument(fmt::format("the weights need {} per GPU at TP {} but {} x {} = {} is usable", to_string(Bytes(weights_per_gpu)),
                                            c.tp, to_string(hw.memory_capacity), c.gpu_memory_utilization, to_string(Bytes(usable))));
  }
  const double block_bytes = kv_bytes_per_token(c) * c.block_size;
  return static_cast<std::int64_t>((usable - weights_per_gpu) / block_bytes);
}

double iteration_seconds(const std::vector<BatchEntry>& batch, const ReplicaConfig& c, const hardware::HardwareProfile& hw) {
  if (batch.empty()) return 0;
  const TransformerSpec& m = c.model;
  const double attn = static_cast<double>(m.layers) * m.attention_width();
  double tokens = 0, attention_flops = 0, kv_read = 0, sampled = 0;
  for (const BatchEntry& e : batch) {
    const double n = e.new_tokens, p = e.context;
    tokens += n;
    attention_flops += 4.0 * attn * n * (p + (n + 1) / 2.0);  // causal: token i attends to p + i keys
    kv_read += p + n;                                          // the cache read, the new entries written
    sampled += 1;                                              // each sequence's last position gets logits
  }
  const hardware::Dtype compute = hw.supports(c.weights) ? c.weights : hardware::Dtype::bf16;
  const double memory_rate = hw.memory_bandwidth.value() * hw.gemm.memory_efficiency;
  double t = 0;
  if (!m.moe && !m.mla) {
    // Dense layers: the four GEMMs of a layer from the GEMM model at the batch's shapes (a decode batch
    // is a skinny GEMM that the model finds memory-bound), TP-sharded as Megatron shards them.
    const std::int64_t T = static_cast<std::int64_t>(tokens), h = m.hidden, tp = c.tp;
    const std::int64_t kv_shards = std::min<std::int64_t>(tp, std::max(1, m.kv_heads));
    const std::int64_t qkv = static_cast<std::int64_t>(m.heads) * m.head_dim / tp + 2LL * m.kv_heads * m.head_dim / kv_shards;
    const std::int64_t f = m.ffn_hidden / tp;
    const bool gated = m.activation == Activation::swiglu || m.activation == Activation::geglu;
    const auto gemm = [&](std::int64_t M, std::int64_t N, std::int64_t K) {
      return hardware::estimate_gemm(hw, {M, std::max<std::int64_t>(1, N), std::max<std::int64_t>(1, K)}, compute).time.value();
    };
    const double layer = gemm(T, qkv, h) + gemm(T, h, static_cast<std::int64_t>(m.attention_width()) / tp) + gemm(T, gated ? 2 * f : f, h) + gemm(T, h, f);
    t += m.layers * layer + gemm(static_cast<std::int64_t>(sampled), m.vocab / tp, h);
    // Int4 weight-only: the GEMM model streamed 16-bit weights; it reads a quarter of those bytes.
    if (c.weight_bytes_per_parameter > 0 && c.weight_bytes_per_parameter < hardware::bytes_per_element(compute)) {
      const double saved = active_parameters(m) / tp * (hardware::bytes_per_element(compute) - c.weight_bytes_per_parameter) / memory_rate;
      t = std::max(t - saved, t * 0.25);
    }
  } else {
    // MoE and MLA layers: the whole pass as one roofline (weights once, 2 FLOPs per active parameter).
    const double flops = 2.0 * active_parameters(m) * tokens;
    const double peak = hw.peak(compute).value() * hw.gemm.max_efficiency.at(compute);
    t += std::max(flops / c.tp / peak, active_parameters(m) * weight_bytes(c) / c.tp / memory_rate);
  }
  // The attention core: its FLOPs at the 16-bit ceiling or its KV reads, whichever is longer.
  const double attention_peak = hw.peak(hardware::Dtype::bf16).value() * hw.gemm.max_efficiency.at(hardware::Dtype::bf16);
  t += std::max(attention_flops / c.tp / attention_peak, kv_read * kv_bytes_per_token(c) / memory_rate);
  t += c.iteration_overhead.value();
  if (c.tp > 1 && c.all_reduce_seconds) t += 2.0 * m.layers * c.all_reduce_seconds(tokens * m.hidden * 2.0);
  return t;
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
  double last_token = 0;
  RequestResult result;
};

class Replica final : public sim::EventHandler {
 public:
  Replica(const std::vector<ServingRequest>& requests, const ReplicaConfig& c, const hardware::HardwareProfile& hw,
          std::optional<ClosedLoop> closed)
      : c_(c), hw_(hw), closed_(closed) {
    run_.kv_blocks = kv_block_capacity(c, hw);
    free_ = run_.kv_blocks;
    for (const auto& r : requests) {
      if (r.prompt_tokens < 1 || r.output_tokens < 1) throw std::invalid_argument(fmt::format("request {}: prompt and output need at least 1 token", r.id));
      const std::int64_t need = blocks_for(r.prompt_tokens + r.output_tokens);
      if (need > run_.kv_blocks) {
        throw std::invalid_argument(fmt::format("request {} needs {} KV blocks ({} tokens) but the replica holds {}", r.id, need,
                                                r.prompt_tokens + r.output_tokens, run_.kv_blocks));
      }
      if (!c.chunked_prefill && r.prompt_tokens + r.output_tokens > c.max_num_batched_tokens) {
        throw std::invalid_argument(fmt::format("request {} has {} tokens, more than max_num_batched_tokens ({}) without chunked prefill", r.id,
                                                r.prompt_tokens + r.output_tokens, c.max_num_batched_tokens));
      }
      Sequence s;
      s.request = r;
      s.known = r.prompt_tokens;
      s.result.request = r;
      seqs_.push_back(s);
    }
    run_.batch_size_histogram.assign(static_cast<std::size_t>(c.max_num_seqs) + 1, 0);
  }

  ReplicaRun run() {
    if (closed_) {
      next_closed_ = std::min<std::size_t>(static_cast<std::size_t>(closed_->concurrency), seqs_.size());
      for (std::size_t i = 0; i < next_closed_; ++i) {
        seqs_[i].request.arrival = seqs_[i].result.request.arrival = 0;
        sim_.schedule_at(sim::Time::zero(), this, i << 1);
      }
    } else {
      for (std::size_t i = 0; i < seqs_.size(); ++i) sim_.schedule_at(sim::Time::seconds(seqs_[i].request.arrival), this, i << 1);
    }
    sim_.run();
    for (const auto& s : seqs_) {
      run_.requests.push_back(s.result);
      run_.makespan = std::max(run_.makespan, s.result.finish);
    }
    std::sort(run_.requests.begin(), run_.requests.end(), [](const auto& a, const auto& b) { return a.request.id < b.request.id; });
    run_.events = sim_.stats().events;
    return std::move(run_);
  }

  void handle(std::uint64_t payload) override {
    if ((payload & 1) == 0) {
      waiting_.push_back(static_cast<int>(payload >> 1));
      if (!busy_) step();
    } else {
      finish_iteration();
      step();
    }
  }

 private:
  std::int64_t blocks_for(std::int64_t tokens) const { return (tokens + c_.block_size - 1) / c_.block_size; }
  double now() const { return sim_.now().to_seconds(); }

  // Frees a sequence's blocks and sends it back to wait, to recompute what it had.
  void preempt(int i) {
    Sequence& s = seqs_[static_cast<std::size_t>(i)];
    free_ += s.blocks;
    s.blocks = 0;
    s.computed = 0;
    s.scheduled = 0;
    ++s.result.preemptions;
    ++run_.preemptions;
    running_.erase(std::find(running_.begin(), running_.end(), i));
    waiting_.push_front(i);
  }

  // Forms the next batch and starts its iteration (or goes idle).
  void step() {
    int budget = c_.max_num_batched_tokens;
    std::vector<int> batch;
    bool preempted = false;
    // Running sequences first, in admission order; a sequence that cannot get its blocks preempts
    // the most recently admitted one (itself, when it is the last).
    for (std::size_t k = 0; k < running_.size() && budget > 0;) {
      const int i = running_[k];
      Sequence& s = seqs_[static_cast<std::size_t>(i)];
      const int n = std::min(s.known - s.computed, budget);
      if (!c_.chunked_prefill && n < s.known - s.computed) {
        ++k;  // a whole prefill that does not fit this iteration's budget waits; the others still run
        continue;
      }
      const std::int64_t need = std::max<std::int64_t>(0, blocks_for(s.computed + n) - s.blocks);  // 0 when reserved up front
      if (need > free_) {
        preempt(running_.back());
        preempted = true;
        continue;  // running_[k] is unchanged unless it was the one preempted (then the loop ends)
      }
      free_ -= need;
      s.blocks += need;
      s.scheduled = n;
      budget -= n;
      batch.push_back(i);
      ++k;
    }
    // Then waiting requests, first come first served, while the limits and the watermark allow (none
    // in an iteration that had to preempt: memory is short).
    const auto reserve = static_cast<std::int64_t>(std::ceil(c_.watermark * static_cast<double>(run_.kv_blocks)));
    // (An idle replica always admits the head of the queue, whatever the watermark, so a request that
    // fits the pool can never wait forever.)
    while ((!preempted || batch.empty()) && !waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < c_.max_num_seqs) {
      const int i = waiting_.front();
      Sequence& s = seqs_[static_cast<std::size_t>(i)];
      const int n = std::min(s.known - s.computed, budget);
      if (!c_.chunked_prefill && n < s.known - s.computed) break;
      const std::int64_t need =
          (c_.reserve_full_kv ? blocks_for(s.request.prompt_tokens + s.request.output_tokens) : blocks_for(s.computed + n)) - s.blocks;
      if (need > free_ || (!running_.empty() && free_ - need < reserve)) break;
      waiting_.pop_front();
      free_ -= need;
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
    if (batch.empty()) {
      busy_ = false;
      return;
    }
    std::vector<BatchEntry> entries;
    entries.reserve(batch.size());
    for (int i : batch) entries.push_back({seqs_[static_cast<std::size_t>(i)].scheduled, seqs_[static_cast<std::size_t>(i)].computed});
    const double t = iteration_seconds(entries, c_, hw_);
    const std::int64_t used = run_.kv_blocks - free_;
    run_.peak_kv_blocks = std::max(run_.peak_kv_blocks, used);
    run_.kv_block_seconds += static_cast<double>(used) * t;
    ++run_.iterations;
    ++run_.batch_size_histogram[std::min(batch.size(), run_.batch_size_histogram.size() - 1)];
    batch_ = std::move(batch);
    busy_ = true;
    sim_.schedule_in(sim::Time::seconds(t), this, 1);
  }

  void finish_iteration() {
    const double t = now();
    for (int i : batch_) {
      Sequence& s = seqs_[static_cast<std::size_t>(i)];
      s.computed += s.scheduled;
      s.scheduled = 0;
      if (s.computed < s.known) continue;  // a prefill chunk short of the end: no token yet
      // The step reached the last known token: the model emits the next one.
      ++s.generated;
      ++s.known;
      if (s.generated == 1 && s.result.first_token == 0) s.result.first_token = t;
      if (s.generated > 1) s.result.max_itl = std::max(s.result.max_itl, t - s.last_token);
      s.last_token = t;
      if (s.generated >= s.request.output_tokens) {
        s.result.finish = t;
        free_ += s.blocks;
        s.blocks = 0;
        running_.erase(std::find(running_.begin(), running_.end(), i));
        if (closed_ && next_closed_ < seqs_.size()) {
          Sequence& next = seqs_[next_closed_];
          next.request.arrival = next.result.request.arrival = t;
          sim_.schedule_at(sim_.now(), this, next_closed_ << 1);
          ++next_closed_;
        }
      }
    }
    batch_.clear();
  }

  const ReplicaConfig& c_;
  const hardware::HardwareProfile& hw_;
  std::optional<ClosedLoop> closed_;
  sim::Simulator sim_;
  std::vector<Sequence> seqs_;
  std::deque<int> waiting_;
  std::vector<int> running_;  // admission order
  std::vector<int> batch_;
  std::int64_t free_ = 0;
  bool busy_ = false;
  std::size_t next_closed_ = 0;
  ReplicaRun run_;
};

LatencyStats stats_of(std::vector<double> v) {
  LatencyStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) {
    // Linear interpolation between closest ranks (numpy's default, as vLLM's benchmark uses).
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  return s;
}

}  // namespace

ReplicaRun run_replica(const std::vector<ServingRequest>& requests, const ReplicaConfig& c, const hardware::HardwareProfile& hw,
                       std::optional<ClosedLoop> closed_loop) {
  if (c.tp < 1 || c.max_num_seqs < 1 || c.max_num_batched_tokens < 1 || c.block_size < 1) {
    throw std::invalid_argument("tp, max_num_seqs, max_num_batched_tokens and block_size must be at least 1");
  }
  if (closed_loop && closed_loop->concurrency < 1) throw std::invalid_argument("closed-loop concurrency must be at least 1");
  for (std::size_t i = 1; i < requests.size(); ++i) {
    if (requests[i].arrival < requests[i - 1].arrival) throw std::invalid_argument("requests must be sorted by arrival time");
  }
  Replica r(requests, c, hw, closed_loop);
  return r.run();
}

ServingMetrics serving_metrics(const ReplicaRun& run, const Slo& slo) {
  ServingMetrics m;
  std::vector<double> ttft, tpot, itl, e2e, queue;
  double first_arrival = 1e300, last_finish = 0, output = 0, total = 0, in_system = 0;
  int good = 0;
  for (const auto& r : run.requests) {
    if (r.finish <= 0) continue;
    ++m.completed;
    first_arrival = std::min(first_arrival, r.request.arrival);
    last_finish = std::max(last_finish, r.finish);
    ttft.push_back(r.ttft());
    if (r.request.output_tokens > 1) tpot.push_back(r.tpot());
    itl.push_back(r.max_itl);
    e2e.push_back(r.e2e());
    queue.push_back(r.first_scheduled - r.request.arrival);
    output += r.request.output_tokens;
    total += r.request.output_tokens + r.request.prompt_tokens;
    in_system += r.e2e();
    const bool ok = (slo.ttft <= 0 || r.ttft() <= slo.ttft) && (slo.tpot <= 0 || r.tpot() <= slo.tpot) && (slo.e2e <= 0 || r.e2e() <= slo.e2e);
    good += ok ? 1 : 0;
  }
  if (m.completed == 0) return m;
  m.duration = last_finish - first_arrival;
  const double d = m.duration > 0 ? m.duration : 1e-300;
  m.request_throughput = m.completed / d;
  m.request_goodput = good / d;
  m.output_throughput = output / d;
  m.total_token_throughput = total / d;
  m.ttft = stats_of(ttft);
  m.tpot = stats_of(tpot);
  m.itl_max = stats_of(itl);
  m.e2e = stats_of(e2e);
  m.queueing = stats_of(queue);
  m.mean_concurrency = in_system / d;
  m.mean_kv_use = run.kv_blocks > 0 && run.makespan > 0 ? run.kv_block_seconds / (static_cast<double>(run.kv_blocks) * d) : 0;
  m.preemptions = run.preemptions;
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
  return std::max(1, static_cast<int>(v));
}

std::vector<ServingRequest> generate_requests(int count, const ArrivalProcess& arrivals, const LengthDistribution& prompt,
                                              const LengthDistribution& output, std::uint64_t seed) {
  if (count < 0) throw std::invalid_argument("the request count cannot be negative");
  if (arrivals.kind != ArrivalProcess::Kind::offline && !(arrivals.rate > 0)) throw std::invalid_argument("the arrival rate must be positive");
  if (arrivals.kind == ArrivalProcess::Kind::gamma && !(arrivals.burstiness > 0)) throw std::invalid_argument("the burstiness must be positive");
  std::uint64_t state = seed;
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
    out.push_back(r);
  }
  return out;
}

std::vector<ServingRequest> read_trace(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("{}: cannot open the trace", file.string()));
  const auto where = [&](int line) { return SourceLocation{std::make_shared<const std::string>(file.string()), line, 1}; };
  std::string line;
  int number = 0;
  std::vector<ServingRequest> out;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1) {
      if (line != "arrival_s,prompt_tokens,output_tokens") {
        throw InputError(where(1), "header", "'arrival_s,prompt_tokens,output_tokens'", "'" + line + "'");
      }
      continue;
    }
    if (line.empty()) continue;
    std::stringstream row(line);
    std::string a, p, o, extra;
    std::getline(row, a, ',');
    std::getline(row, p, ',');
    std::getline(row, o, ',');
    if (std::getline(row, extra, ',') || o.empty()) throw InputError(where(number), "row", "3 comma-separated values", "'" + line + "'");
    ServingRequest r;
    r.id = static_cast<int>(out.size());
    try {
      std::size_t used = 0;
      r.arrival = std::stod(a, &used);
      if (used != a.size() || !(r.arrival >= 0) || !std::isfinite(r.arrival)) throw std::invalid_argument("arrival");
      r.prompt_tokens = std::stoi(p, &used);
      if (used != p.size() || r.prompt_tokens < 1) throw std::invalid_argument("prompt");
      r.output_tokens = std::stoi(o, &used);
      if (used != o.size() || r.output_tokens < 1) throw std::invalid_argument("output");
    } catch (const std::exception&) {
      throw InputError(where(number), "row", "an arrival time >= 0 in seconds and two token counts >= 1", "'" + line + "'");
    }
    if (!out.empty() && r.arrival < out.back().arrival) {
      throw InputError(where(number), "arrival_s", fmt::format("a time no earlier than the previous row's ({})", out.back().arrival), a);
    }
    out.push_back(r);
  }
  if (number == 0) throw InputError(where(0), "the trace is empty (expected the header arrival_s,prompt_tokens,output_tokens)");
  return out;
}

}  // namespace cs::models
