// Serving on one replica: the iteration roofline, the continuous-batching scheduler over the KV block
// pool, workloads and metrics.
#include <algorithm>
#include <numeric>
#include <cmath>
#include <limits>
#include <fstream>

#include "catch.hpp"
#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/parts.hpp"
#include "clustersim/common/sampling.hpp"
#include "clustersim/models/serving.hpp"
#include "clustersim/models/serving_scenario.hpp"
#include "clustersim/models/serving_sizing.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::models;
using hardware::Dtype;

namespace {

hardware::HardwareProfile h100() {
  IncludeStack includes;
  return hardware::load_hardware_profile(resolve_part(std::string("h100-sxm5-80gb"), "hardware"), includes);
}

ReplicaConfig llama8b() {
  IncludeStack includes;
  ReplicaConfig c;
  c.model = load_transformer_file(resolve_part(std::string("llama3-8b"), "models"), includes);
  c.iteration_overhead = Seconds(200e-6);
  return c;
}

std::vector<ServingRequest> poisson(int n, double rate, int prompt, int output, std::uint64_t seed = 1) {
  return generate_requests(n, {ArrivalProcess::Kind::poisson, rate, 1}, {LengthDistribution::Kind::fixed, double(prompt), 0, {}},
                           {LengthDistribution::Kind::fixed, double(output), 0, {}}, seed);
}

}  // namespace

TEST_CASE("serving: a lone request's TTFT is its prefill iteration from the roofline") {
  const auto hw = h100();
  const ReplicaConfig c = llama8b();
  const ReplicaRun run = run_replica({{0, 1.5, 2000, 10}}, c, hw);
  REQUIRE(run.requests.size() == 1);
  const double prefill = iteration_seconds({{2000, 0}}, c, hw);
  // Expectation: TTFT = one iteration of 2000 new tokens at context 0 (to the engine's 1 ns).
  CHECK(run.requests[0].ttft() == Approx(prefill).margin(2e-9));
  // Then 9 decode steps at contexts 2000..2008.
  double decode = 0;
  for (int k = 0; k < 9; ++k) decode += iteration_seconds({{1, 2000 + k}}, c, hw);
  CHECK(run.requests[0].e2e() == Approx(prefill + decode).margin(2e-8));
  // A 2,000-token prefill of an 8B model is compute-bound: more than 2 x 7.5e9 x 2000 FLOPs at the
  // ceiling; a single decode step is bound by reading the 16 GB of bf16 weights (plus the fixed cost
  // of its 129 GEMM kernels, 64 attention and KV-cache write kernels, 129 elementwise and sampling
  // kernels, and the iteration overhead).
  CHECK(prefill > 2.0 * 7.5e9 * 2000 / (hw.peak(Dtype::bf16).value() * hw.gemm.max_efficiency.at(Dtype::bf16)));
  const double weights_read = active_parameters(c.model) * 2 / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);
  const double decode_step = iteration_seconds({{1, 2000}}, c, hw);
  CHECK(decode_step > weights_read + 200e-6);
  CHECK(decode_step < 1.05 * weights_read + 200e-6 + (129 + 64 + 129) * hw.kernel_launch_overhead.value());
}

TEST_CASE("serving: a layer's experts run as one fused kernel per projection, so launches do not grow with the experts touched") {
  // Found by a probe: each touched expert paid two launches; DeepSeek-V3's decode at TP 8 without
  // EP (some 220 experts touched a layer) took 4x its time with EP at the same bytes.
  IncludeStack includes;
  ReplicaConfig c = llama8b();
  c.model = load_transformer_file(resolve_part(std::string("deepseek-v3"), "models"), includes);
  c.tp = 8;
  c.weights = hardware::Dtype::fp8;
  hardware::HardwareProfile hw = h100(), no_launch = h100();
  no_launch.kernel_launch_overhead = Seconds(0);
  const std::vector<BatchEntry> decode(64, BatchEntry{1, 2000});
  const double with = iteration_cost(decode, c, hw).moe_layer, without = iteration_cost(decode, c, no_launch).moe_layer;
  // The layer's kernels: attention's five GEMMs, the router, the two expert and two shared-expert
  // GEMMs, three elementwise kernels; a handful of launches, whatever the experts touched.
  CHECK(with - without < 16 * hw.kernel_launch_overhead.value());
  CHECK(with > without);
}

TEST_CASE("serving: with expert parallelism a GPU activates only the tokens routed to its experts") {
  // Found by a probe: under EP the gated activation ran over every token x top_k at the experts'
  // full width, ep times the bytes; a wide-expert model's 8,000-token prefill took 2.7x its time
  // without EP. With ep = tp both layouts move the same activation bytes.
  ReplicaConfig c = llama8b();
  c.model.layers = 4;
  c.model.moe = MoeSpec{};
  c.model.moe->experts = 8;
  c.model.moe->top_k = 8;
  c.model.moe->expert_ffn_hidden = 65536;
  c.tp = 8;
  ReplicaConfig ep = c;
  ep.ep = 8;
  ep.expert_parallel = true;
  hardware::HardwareProfile hw = h100();
  const std::vector<BatchEntry> prefill{{8000, 0}};
  const double without = iteration_cost(prefill, c, hw).moe_layer, with = iteration_cost(prefill, ep, hw).moe_layer;
  // Every expert is touched by every token either way: the same GEMM bytes and FLOPs, the same
  // activation bytes; what differs is the GEMMs' shapes (full-width experts with EP).
  CHECK(with == Approx(without).epsilon(0.1));
}

TEST_CASE("serving: int4 weights speed up the weight reads of decoding, not compute-bound prefill") {
  const auto hw = h100();
  ReplicaConfig bf16 = llama8b(), int4 = llama8b();
  int4.weight_bytes_per_parameter = 0.5;
  // One layer's time (the LM head stays 16-bit).
  const auto time = [&](const ReplicaConfig& c, int tokens, int sequences) {
    const std::vector<BatchEntry> batch(static_cast<std::size_t>(sequences), BatchEntry{tokens, 0});
    return iteration_cost(batch, c, hw).dense_layer;
  };
  // Decoding one sequence reads a layer's 16-bit weights (0.44 GB): int4 reads a quarter of those
  // bytes, saving over 70% of their read time (the kernels' launches stay).
  const double layer_read = (attention_parameters(bf16.model) + dense_ffn_parameters(bf16.model)) * 2.0 / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);
  CHECK(time(bf16, 1, 1) - time(int4, 1, 1) > 0.7 * layer_read);
  CHECK(time(bf16, 1, 1) - time(int4, 1, 1) < 0.75 * layer_read);
  // An 8,192-token prefill is compute-bound: the same 16-bit arithmetic (the saved reads had been
  // subtracted from it: 3.5 ms faster).
  CHECK(time(int4, 8192, 1) == Approx(time(bf16, 8192, 1)).epsilon(0.005));
}

TEST_CASE("serving: a huge max_num_seqs limit costs nothing until batches grow") {
  // The batch-size histogram had been sized by the limit: 2e9 asked for 16 GB up front.
  ReplicaConfig c = llama8b();
  c.max_num_seqs = 2'000'000'000;
  const ReplicaRun run = run_replica(poisson(5, 1, 100, 10), c, h100());
  CHECK(run.requests.size() == 5);
  CHECK(run.batch_size_histogram.size() <= 6);
}

TEST_CASE("serving: Little's law holds on a simulated Poisson run") {
  // L (time-averaged requests in the system, integrated from the arrival and finish instants) equals
  // lambda x W (completions per second x mean time in the system).
  const auto hw = h100();
  const auto requests = poisson(2000, 20, 512, 128);
  const ReplicaRun run = run_replica(requests, llama8b(), hw);
  const ServingMetrics m = serving_metrics(run);
  REQUIRE(m.completed == 2000);
  std::vector<std::pair<double, int>> events;
  for (const auto& r : run.requests) {
    events.emplace_back(r.request.arrival, +1);
    events.emplace_back(r.finish, -1);
  }
  std::sort(events.begin(), events.end());
  double area = 0;
  int n = 0;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    n += events[i].second;
    area += n * (events[i + 1].first - events[i].first);
  }
  const double L = area / m.duration;
  CHECK(L == Approx(m.request_throughput * m.e2e.mean).epsilon(1e-9));
  CHECK(L == Approx(m.mean_concurrency).epsilon(1e-9));
  // The system keeps up at 20 req/s (it is stable): throughput matches the offered rate.
  CHECK(m.request_throughput == Approx(20).epsilon(0.1));
}

TEST_CASE("serving: the steady output rate leaves out the ramp and the drain, so a fleet that keeps up is priced at the offered load") {
  // 20 req/s of 128 output tokens for 30 s: 2,560 tok/s offered. Over the whole run (vLLM's
  // definition) the last requests' drain lowers the rate; in steady state the fleet emits what
  // arrives.
  const auto hw = h100();
  const auto requests = poisson(600, 20, 512, 128);
  const ServingMetrics m = serving_metrics(run_replica(requests, llama8b(), hw));
  REQUIRE(m.completed == 600);
  const double offered = 128.0 * (requests.size() - 1) / (requests.back().arrival - requests.front().arrival);
  CHECK(m.sustained_output_throughput == Approx(offered).epsilon(0.05));
  CHECK(m.output_throughput < m.sustained_output_throughput);
  CHECK(m.sustained_total_token_throughput == Approx(offered * (512 + 128) / 128).epsilon(0.05));
  // A handful of requests, or all at once (an offline batch): too few arrivals in the window to
  // measure a rate, the whole run's (two requests 1 ms apart had read 0 tokens/s, and a few prompts
  // counted whole in a short window had made the total rate 40 times the output's x 5).
  const std::vector<ServingRequest> few(requests.begin(), requests.begin() + 5);
  const ServingMetrics f = serving_metrics(run_replica(few, llama8b(), hw));
  CHECK(f.sustained_output_throughput == f.output_throughput);
  CHECK(f.sustained_total_token_throughput == f.total_token_throughput);
  std::vector<ServingRequest> burst = requests;
  for (auto& r : burst) r.arrival = 0;
  const ServingMetrics b = serving_metrics(run_replica(burst, llama8b(), hw));
  CHECK(b.sustained_output_throughput == b.output_throughput);
}

TEST_CASE("serving: KV blocks never exceed the pool, and preempted requests still complete") {
  // Memory for only ~3 of the 40 long requests at once: the scheduler must preempt by recompute.
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  const double weights = count_parameters(c.model).total() * 2;
  const double kv_for = 3.0 * 3000 * kv_bytes_per_token(c);
  c.gpu_memory_utilization = (weights + kv_for) / hw.memory_capacity.value();
  const auto requests = generate_requests(40, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::fixed, 1000, 0, {}},
                                          {LengthDistribution::Kind::fixed, 2000, 0, {}}, 7);
  const ReplicaRun run = run_replica(requests, c, hw);
  CHECK(run.kv_blocks == kv_block_capacity(c, hw));
  CHECK(run.peak_kv_blocks <= run.kv_blocks);
  CHECK(run.preemptions > 0);
  for (const auto& r : run.requests) {
    CHECK(r.finish > r.first_token);
    CHECK(r.first_token > r.request.arrival);
  }
  CHECK(std::any_of(run.requests.begin(), run.requests.end(), [](const auto& r) { return r.preemptions > 0; }));
}

TEST_CASE("serving: a request that can never fit is refused") {
  ReplicaConfig c = llama8b();
  c.gpu_memory_utilization = (count_parameters(c.model).total() * 2 + 100 * 16 * kv_bytes_per_token(c)) / h100().memory_capacity.value();
  // A pool of 1,600 tokens cannot hold one request of Llama 3's 8,192-token context: vLLM would not start.
  CHECK_THROWS_WITH(kv_block_capacity(c, h100()), Catch::Contains("the KV pool holds 1600 tokens") && Catch::Contains("max_model_len (8192)"));
  c.max_model_len = 1600;
  CHECK(kv_block_capacity(c, h100()) == 100);
  CHECK_THROWS_WITH(run_replica({{0, 0, 5000, 10}}, c, h100()), Catch::Contains("5010 tokens, more than max_model_len (1600)"));
  CHECK(run_replica({{0, 0, 1590, 10}}, c, h100()).requests.size() == 1);
  c.gpu_memory_utilization = 0.1;  // 8 GB: less than the 16 GB of weights
  CHECK_THROWS_WITH(kv_block_capacity(c, h100()), Catch::Contains("the weights need"));
}

TEST_CASE("serving: a trace replay reproduces its arrival times exactly") {
  test::TempDir dir;
  const auto file = dir.write("trace.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,100,20\n0.25,300,5\n0.25,50,50\n1.75,1000,1\n");
  const auto requests = read_trace(file);
  REQUIRE(requests.size() == 4);
  const ReplicaRun run = run_replica(requests, llama8b(), h100());
  const double expected[] = {0.0, 0.25, 0.25, 1.75};
  for (int i = 0; i < 4; ++i) {
    CHECK(run.requests[static_cast<std::size_t>(i)].request.arrival == expected[i]);
    CHECK(run.requests[static_cast<std::size_t>(i)].first_scheduled >= expected[i]);
  }
  CHECK(run.requests[3].request.output_tokens == 1);
  CHECK(run.requests[3].finish == run.requests[3].first_token);

  const auto bad = [&](const std::string& text) { return test::input_error([&] { (void)read_trace(dir.write("bad.csv", text)); }); };
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens\n1.0,10,10\n0.5,10,10\n"),
             Catch::Contains("bad.csv:3:1") && Catch::Contains("no earlier than the previous row's"));
  CHECK_THAT(bad("arrival,prompt,output\n"), Catch::Contains("bad.csv:1:1") && Catch::Contains("header"));
  // A bad cell is named by its column, at the column where it starts; blanks around a number and a
  // leading '+' are allowed in every column.
  CHECK(read_trace(dir.write("blanks.csv", "arrival_s,prompt_tokens,output_tokens\n +0.5 , 10 ,+10\t\n")).at(0).prompt_tokens == 10);
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,100,10,+-1,0\n"),
             Catch::Contains("bad.csv:2:10: field 'prefix_id': expected a prefix id from -1 (none) to 2147483647, found '+-1'"));
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens\n0.1,99999999999,10\n"),
             Catch::Contains("bad.csv:2:5: field 'prompt_tokens': expected a token count from 1 to 2147483647, found '99999999999'"));
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens\n0.1,ten,10\n"),
             Catch::Contains("bad.csv:2:5: field 'prompt_tokens': expected a token count from 1 to 2147483647, found 'ten'"));
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens\n0.1,10,0\n"),
             Catch::Contains("bad.csv:2:8: field 'output_tokens': expected a token count from 1 to 2147483647, found '0'"));
  // A header and no request; an arrival beyond the simulated clock; one prefix given two lengths.
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens\n"), Catch::Contains("the trace holds no request"));
  // A NUL or another control character in a row is refused at its line, not quoted into the message.
  CHECK_THAT(bad(std::string("arrival_s,prompt_tokens,output_tokens\n0,1") + '\0' + "00,10\n"),
             Catch::Contains("bad.csv:2:1: expected a text row of comma-separated values, but it holds the control character \\x00"));
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens\n1e300,10,10\n"), Catch::Contains("bad.csv:2:1: field 'arrival_s': expected a time in seconds from 0 to 2.31e+09, found '1e300'"));
  CHECK_THAT(bad("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,900,10,1,500\n1,900,10,1,600\n"),
             Catch::Contains("bad.csv:3:12: field 'prefix_tokens': expected 500 tokens, as the earlier rows with prefix id 1 give, found '600'"));
}

TEST_CASE("serving: goodput never exceeds throughput, and a tight SLO lowers it") {
  const auto hw = h100();
  const ReplicaRun run = run_replica(poisson(500, 40, 1024, 256, 3), llama8b(), hw);
  const ServingMetrics loose = serving_metrics(run);
  CHECK(loose.request_goodput == Approx(loose.request_throughput));
  const ServingMetrics tight = serving_metrics(run, {loose.ttft.median, 0, 0});
  CHECK(tight.request_goodput <= tight.request_throughput);
  CHECK(tight.request_goodput < loose.request_goodput);
  CHECK(loose.ttft.p99 >= loose.ttft.median);
  CHECK(loose.e2e.p90 >= loose.e2e.median);
  CHECK(loose.output_throughput == Approx(loose.request_throughput * 256));
}

TEST_CASE("serving: random lengths are drawn to fit the model's context, and the requests that fit stay as the seed gave them") {
  const ArrivalProcess p{ArrivalProcess::Kind::poisson, 10, 1};
  const LengthDistribution prompt{LengthDistribution::Kind::lognormal, 600, 0.8, {}};
  const LengthDistribution output{LengthDistribution::Kind::lognormal, 200, 0.6, {}};
  const SharedPrefix prefix{100, 4};
  const int context = 2048;
  const auto free = generate_requests(5000, p, prompt, output, 9, prefix);
  const auto fitted = generate_requests(5000, p, prompt, output, 9, prefix, context);
  REQUIRE(free.size() == fitted.size());
  int redrawn = 0;
  for (std::size_t i = 0; i < free.size(); ++i) {
    CHECK(fitted[i].total_tokens() <= context);
    CHECK(fitted[i].arrival == free[i].arrival);
    CHECK(fitted[i].prefix_id == free[i].prefix_id);
    CHECK_FALSE(free[i].redrawn);
    // Flagged exactly where the first draw did not fit (run's `lengths` line counts them).
    CHECK(fitted[i].redrawn == (free[i].total_tokens() > context));
    if (free[i].total_tokens() <= context) {
      CHECK(fitted[i].prompt_tokens == free[i].prompt_tokens);
      CHECK(fitted[i].output_tokens == free[i].output_tokens);
    } else {
      ++redrawn;
    }
  }
  // About P(prompt + output > 2048) of them: a few percent.
  CHECK(redrawn > 20);
  CHECK(redrawn < 500);
  // Lengths that cannot fit: refused after kMaxLengthDraws misses; fixed ones are left to the caller.
  const LengthDistribution wide{LengthDistribution::Kind::uniform, 3000, 4000, {}};
  CHECK_THROWS_AS(generate_requests(3, p, wide, output, 9, {}, context), std::invalid_argument);
  const LengthDistribution fixed{LengthDistribution::Kind::fixed, 3000, 0, {}};
  CHECK(generate_requests(3, p, fixed, fixed, 9, {}, context).front().total_tokens() == 6000);
}

TEST_CASE("serving: workloads are seeded and follow their distributions") {
  const ArrivalProcess p{ArrivalProcess::Kind::poisson, 10, 1};
  const LengthDistribution u{LengthDistribution::Kind::uniform, 100, 200, {}};
  const auto a = generate_requests(20000, p, u, u, 42), b = generate_requests(20000, p, u, u, 42), other = generate_requests(200, p, u, u, 43);
  CHECK(std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
    return x.arrival == y.arrival && x.prompt_tokens == y.prompt_tokens && x.output_tokens == y.output_tokens;
  }));
  CHECK(other[5].arrival != a[5].arrival);
  // Expectations: mean gap 1/rate = 0.1 s; uniform lengths in [100, 200] with mean 150.
  CHECK(a.back().arrival / 20000 == Approx(0.1).epsilon(0.03));
  double sum = 0;
  for (const auto& r : a) {
    CHECK((r.prompt_tokens >= 100 && r.prompt_tokens <= 200));
    sum += r.prompt_tokens;
  }
  CHECK(sum / 20000 == Approx(150).epsilon(0.01));
  // Gamma arrivals with burstiness 0.25 keep the rate but spread the gaps: coefficient of variation
  // 1 / sqrt(0.25) = 2.
  const auto g = generate_requests(20000, {ArrivalProcess::Kind::gamma, 10, 0.25}, u, u, 5);
  std::vector<double> gaps;
  for (std::size_t i = 1; i < g.size(); ++i) gaps.push_back(g[i].arrival - g[i - 1].arrival);
  double mean = 0, var = 0;
  for (double x : gaps) mean += x;
  mean /= static_cast<double>(gaps.size());
  for (double x : gaps) var += (x - mean) * (x - mean);
  var /= static_cast<double>(gaps.size());
  CHECK(mean == Approx(0.1).epsilon(0.05));
  CHECK(std::sqrt(var) / mean == Approx(2.0).epsilon(0.1));
  // A lognormal tail far past an int (median 800, sigma 5.5: e^(5.5 x 4) x 800 ~ 3e12) stays a
  // representable length of at least 1 (a fuzzer found the overflow).
  const LengthDistribution heavy{LengthDistribution::Kind::lognormal, 800, 5.5, {}};
  int longest = 0;
  for (const auto& r : generate_requests(20000, p, heavy, heavy, 4)) {
    CHECK(r.prompt_tokens >= 1);
    longest = std::max(longest, r.prompt_tokens);
  }
  CHECK(longest == std::numeric_limits<int>::max());
}

TEST_CASE("serving: closed-loop clients keep at most their concurrency in the system") {
  const auto requests = generate_requests(200, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::fixed, 256, 0, {}},
                                          {LengthDistribution::Kind::fixed, 64, 0, {}}, 1);
  const ReplicaRun run = run_replica(requests, llama8b(), h100(), ClosedLoop{4});
  const ServingMetrics m = serving_metrics(run);
  CHECK(m.completed == 200);
  CHECK(m.mean_concurrency <= 4.0 + 1e-9);
  CHECK(m.mean_concurrency > 3.9);  // a client waits for nothing between its requests
}

TEST_CASE("serving: reserving whole requests never preempts, and whole prefills run without chunking") {
  // The memory-starved workload of the preemption test: with TensorRT-LLM-style admission (KV for the
  // whole prompt + output reserved up front) nothing is ever preempted and fewer requests run at
  // once; without chunked prefill every first token comes after one whole-prompt iteration.
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  c.gpu_memory_utilization = (count_parameters(c.model).total() * 2 + 3.0 * 3000 * kv_bytes_per_token(c)) / hw.memory_capacity.value();
  c.reserve_full_kv = true;
  const auto requests = generate_requests(40, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::fixed, 1000, 0, {}},
                                          {LengthDistribution::Kind::fixed, 2000, 0, {}}, 7);
  const ReplicaRun reserved = run_replica(requests, c, hw);
  CHECK(reserved.preemptions == 0);
  CHECK(reserved.peak_kv_blocks <= reserved.kv_blocks);
  for (const auto& r : reserved.requests) CHECK(r.finish > r.first_token);

  ReplicaConfig whole = llama8b();
  whole.chunked_prefill = false;
  const ReplicaRun run = run_replica(poisson(50, 5, 3000, 16), whole, hw);
  for (const auto& r : run.requests) {
    // The first token needs at least the prompt's own prefill iteration.
    CHECK(r.first_token - r.first_scheduled >= iteration_seconds({{3000, 0}}, whole, hw) - 1e-9);
  }
  whole.max_model_len = 16384;  // inside the context, past one batch
  CHECK_THROWS_WITH(run_replica({{0, 0, 9000, 10}}, whole, hw), Catch::Contains("max_num_batched_tokens"));
}

TEST_CASE("serving: the ITL distribution holds every gap, and its mean is the decode time over the tokens after the first") {
  const auto hw = h100();
  const ReplicaConfig c = llama8b();
  const auto requests = generate_requests(400, {ArrivalProcess::Kind::poisson, 20, 1}, {LengthDistribution::Kind::lognormal, 500, 0.7, {}},
                                          {LengthDistribution::Kind::lognormal, 150, 0.6, {}}, 3);
  const ReplicaRun run = run_replica(requests, c, hw);
  double decode = 0;
  std::int64_t gaps = 0;
  for (const auto& r : run.requests) {
    decode += r.finish - r.first_token;
    gaps += r.request.output_tokens - 1;
  }
  CHECK(run.itl.count() == gaps);
  CHECK(run.itl.mean() == Approx(decode / double(gaps)).epsilon(1e-9));
  const ServingMetrics m = serving_metrics(run);
  CHECK(m.itl.median <= m.itl.p90);
  CHECK(m.itl.p90 <= m.itl.p99);
  CHECK(m.itl.p99 <= m.itl_max.p99 * 1.001);
  // The histogram's quantiles against exact ones on known data: within its 0.05% bin width.
  GapHistogram h;
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) {
    const double x = 1e-3 * (1 + 0.01 * i * i);
    v.push_back(x);
    h.add(x);
  }
  for (double q : {0.0, 0.25, 0.5, 0.9, 0.99, 1.0}) {
    const double pos = q * 999;
    const auto lo = static_cast<std::size_t>(pos);
    const double exact = v[lo] + (pos - double(lo)) * (v[std::min<std::size_t>(lo + 1, 999)] - v[lo]);
    CHECK(h.quantile(q) == Approx(exact).epsilon(6e-4));
  }
}

TEST_CASE("serving: requests of one output token have no inter-token gap, so they count in neither TPOT nor the max ITL") {
  const auto hw = h100();
  const ReplicaConfig c = llama8b();
  // Three of four requests stop at their first token (a probe's mix put the max-ITL median at 0).
  const auto requests = generate_requests(200, {ArrivalProcess::Kind::poisson, 10, 1}, {LengthDistribution::Kind::fixed, 300, 0, {}},
                                          {LengthDistribution::Kind::empirical, 0, 0, {1, 1, 1, 200}}, 5);
  const ReplicaRun run = run_replica(requests, c, hw);
  std::vector<double> longest;
  for (const auto& r : run.requests) {
    if (r.request.output_tokens > 1) longest.push_back(r.max_itl);
  }
  REQUIRE(longest.size() > 20);
  REQUIRE(longest.size() < run.requests.size() / 2);
  std::sort(longest.begin(), longest.end());
  const ServingMetrics m = serving_metrics(run);
  CHECK(m.itl_max.median > 0);
  CHECK(m.itl_max.median == Approx(quantile_sorted(longest, 0.5)).epsilon(1e-12));
  CHECK(m.itl_max.mean >= m.tpot.mean);
}

TEST_CASE("serving: least-outstanding and KV-aware routers balance what round-robin piles on one replica") {
  const auto hw = h100();
  ClusterConfig config;
  config.replica = llama8b();
  config.replicas = 2;
  // Alternating long and short answers: round-robin sends every long one to replica 0.
  std::vector<ServingRequest> requests;
  for (int i = 0; i < 40; ++i) requests.push_back({i, 0.05 * i, 200, i % 2 == 0 ? 1500 : 20});
  double makespan[3];
  int k = 0;
  for (Router r : {Router::round_robin, Router::least_outstanding, Router::kv_aware}) {
    config.router = r;
    const ClusterRun run = run_cluster(requests, config, hw);
    REQUIRE(run.requests.size() == requests.size());
    int long_on_0 = 0;
    for (const auto& q : run.requests) {
      CHECK(q.finish > 0);
      if (q.request.output_tokens == 1500 && q.replica == 0) ++long_on_0;
    }
    if (r == Router::round_robin) CHECK(long_on_0 == 20);
    if (r != Router::round_robin) CHECK(long_on_0 < 16);
    makespan[k++] = serving_metrics(run).duration;
  }
  CHECK(makespan[1] < makespan[0]);
  CHECK(makespan[2] < makespan[0]);
}

TEST_CASE("serving: static batching admits a batch only when the last one has ended, and loses throughput") {
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  c.max_num_seqs = 16;
  const auto requests = generate_requests(96, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::uniform, 100, 800, {}},
                                          {LengthDistribution::Kind::uniform, 10, 400, {}}, 5);
  const ReplicaRun continuous = run_replica(requests, c, hw);
  c.batching = Batching::static_batch;
  const ReplicaRun fixed = run_replica(requests, c, hw);
  std::vector<RequestResult> rs = fixed.requests;
  std::sort(rs.begin(), rs.end(), [](const auto& a, const auto& b) { return a.first_scheduled < b.first_scheduled; });
  double batch_start = -1, batch_end = 0;
  int batches = 0, size = 0, prompts = 0;
  for (const auto& r : rs) {
    CHECK(r.finish > 0);
    if (r.first_scheduled != batch_start) {
      CHECK(r.first_scheduled >= batch_end);  // the next batch waits for the slowest of the last one
      batch_start = r.first_scheduled;
      ++batches;
      size = prompts = 0;
    }
    ++size;
    prompts += r.request.prompt_tokens;
    CHECK(size <= c.max_num_seqs);
    CHECK(prompts <= c.max_num_batched_tokens);  // a batch's prompts run in one iteration
    batch_end = std::max(batch_end, r.finish);
  }
  CHECK(batches >= 96 / c.max_num_seqs);
  CHECK(serving_metrics(fixed).output_throughput < 0.9 * serving_metrics(continuous).output_throughput);
}

TEST_CASE("serving: swap preemption keeps the work done, falls back to recompute without swap space") {
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  c.gpu_memory_utilization = 0.25;  // a small pool: 20 GB less 16 GB of weights
  c.preemption = Preemption::swap;
  c.swap_bandwidth = 50e9;
  const auto requests = generate_requests(120, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::fixed, 1000, 0, {}},
                                          {LengthDistribution::Kind::fixed, 1000, 0, {}}, 1);
  const ReplicaRun swap = run_replica(requests, c, hw);
  CHECK(swap.preemptions > 0);
  CHECK(swap.swaps == swap.preemptions);
  for (const auto& r : swap.requests) CHECK(r.finish > 0);
  CHECK(swap.peak_kv_blocks <= swap.kv_blocks);
  c.swap_space_bytes = 0;
  const ReplicaRun none = run_replica(requests, c, hw);
  CHECK(none.preemptions > 0);
  CHECK(none.swaps == 0);
  c.swap_bandwidth = 0;
  c.swap_space_bytes = 1e9;
  CHECK_THROWS_WITH(run_replica(requests, c, hw), Catch::Contains("swap_bandwidth"));
}

TEST_CASE("serving: swapped sequences whose cached prefixes pin the pool still finish") {
  // A probe: two requests of two prefixes (32 tokens: 2 blocks each) on an 8-block pool. The second
  // is swapped out, then the first swaps itself out; each needs 5 blocks beside its prefix, and the
  // other's pinned prefix leaves 4: both had waited swapped for good ("never served"). Now the latest
  // swapped gives its host copy up and recomputes, and both finish.
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  c.max_model_len = 128;
  c.gpu_memory_utilization = 0.20097;  // a few blocks beside 16 GB of weights
  c.preemption = Preemption::swap;
  c.swap_bandwidth = 50e9;
  c.prefix_caching = true;
  REQUIRE(kv_block_capacity(c, hw) == 8);
  std::vector<ServingRequest> requests(2);
  for (int k = 0; k < 2; ++k) requests[k] = {k, 0.0, 40, 80, k + 1, 32, 0};
  const ReplicaRun run = run_replica(requests, c, hw);
  for (const auto& r : run.requests) CHECK(r.finish > 0);
  CHECK(run.swaps > 0);
  // And a replica never runs more than max_num_seqs, swapped sequences coming back included.
  c.max_num_seqs = 1;
  const ReplicaRun one = run_replica(requests, c, hw);
  CHECK(one.batch_size_histogram.size() <= 2);
}

TEST_CASE("serving: an idle cached prefix loses blocks from its tail, as many as needed, and keeps the rest") {
  // A probe: on an 8-block pool A leaves its 64-token prefix cached (4 blocks); B, without one, needs
  // 5 blocks with 4 free. The whole prefix had been evicted for one block, so C, of A's prefix, missed
  // all of it. vLLM evicts the tail block alone: C hits 48 tokens.
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  c.max_model_len = 128;
  c.gpu_memory_utilization = 0.20097;
  c.prefix_caching = true;
  REQUIRE(kv_block_capacity(c, hw) == 8);
  const std::vector<ServingRequest> requests{{0, 0.0, 72, 3, 1, 64, 0}, {1, 10.0, 70, 2, -1, 0, 0}, {2, 20.0, 72, 3, 1, 64, 0}};
  const ReplicaRun run = run_replica(requests, c, hw);
  for (const auto& r : run.requests) CHECK(r.finish > 0);
  CHECK(run.prefix_hit_tokens == 48);
}

TEST_CASE("serving: the KV-aware router counts the copies already waiting for a decode replica") {
  // A probe: one prefill and two decode replicas of one sequence each; after two long requests, six
  // short ones all went to decode replica 1 (its headroom did not count the copies queued there) and
  // ran one after another while replica 2 idled. Expectation: they alternate, as least-outstanding does.
  test::TempDir dir;
  std::string trace = "arrival_s,prompt_tokens,output_tokens\n0,10,30\n0,60,30\n";
  for (int k = 0; k < 6; ++k) trace += "0,60,2\n";
  dir.write("t.csv", trace);
  const auto file = dir.write("s.yaml", R"(scenario:
  name: t
  kind: inference
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1}
  serving: {tp: 1, iteration_overhead: 1s, disaggregation: {prefill: 1, decode: 2}, max_model_len: 128, max_num_seqs: 1, router: kv-aware}
  workload:
    arrival: {kind: trace, file: t.csv}
)");
  const InferenceResult r = simulate_inference(load_inference_scenario(file));
  std::map<int, int> per_decode;
  for (std::size_t k = 2; k < r.requests.size(); ++k) ++per_decode[r.requests[k].decode_replica];
  CHECK(per_decode.size() == 2);
  for (const auto& [replica, n] : per_decode) CHECK(n == 3);
}

TEST_CASE("serving: a decode replica takes back the requests it preempted before new KV copies") {
  // A probe: two prefill replicas feed one decode replica of 8 blocks; a request preempted there had
  // waited while every freed block went to new copies, and the run's first requests finished last
  // (request 2 of 400, arrived at 0.13 s, at the very end). Expectation: first come, first served, so
  // the first tenth of the requests all finish before the last tenth's median.
  test::TempDir dir;
  const auto file = dir.write("s.yaml", R"(scenario:
  name: s
  kind: inference
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1}
  serving: {tp: 1, disaggregation: {prefill: 2, decode: 1}, max_model_len: 128, gpu_memory_utilization: 0.20097, iteration_overhead: 10ms}
  workload:
    requests: 400
    arrival: {kind: poisson, rate: 12}
    prompt_tokens: {kind: uniform, min: 20, max: 40}
    output_tokens: {kind: uniform, min: 40, max: 80}
    seed: 1
)");
  const InferenceResult r = simulate_inference(load_inference_scenario(file));
  REQUIRE(r.requests.size() == 400);
  CHECK(std::any_of(r.requests.begin(), r.requests.end(), [](const auto& q) { return q.preemptions > 0; }));
  std::vector<double> last;
  for (std::size_t k = 360; k < 400; ++k) last.push_back(r.requests[k].finish);
  std::sort(last.begin(), last.end());
  for (std::size_t k = 0; k < 40; ++k) CHECK(r.requests[k].finish < last[20]);
}

TEST_CASE("serving: max_model_len sets the context requests must fit, in place of the model's seq_len") {
  test::TempDir dir;
  const auto scenario = [&](const std::string& serving) {
    return dir.write("s.yaml", fmt::format(R"(scenario:
  name: context
  kind: inference
  model: llama3-8b
  topology: {{name: one, node: dgx-h100, nodes: 1}}
  serving: {}
  workload:
    requests: 2000
    arrival: {{kind: offline}}
    prompt_tokens: {{kind: lognormal, median: 6000, sigma: 0.5}}
    output_tokens: 100
)",
                                           serving));
  };
  // Llama 3 8B's seq_len, 8,192, holds some of these prompts and not others: they are drawn to fit it.
  const InferenceScenario within = load_inference_scenario(scenario("{tp: 1}"));
  CHECK(within.replica.max_model_len == 8192);
  // A server extended to 32K admits the long ones as drawn.
  const InferenceScenario extended = load_inference_scenario(scenario("{tp: 1, max_model_len: 32768}"));
  int longer = 0;
  for (std::size_t i = 0; i < within.requests.size(); ++i) {
    CHECK(within.requests[i].total_tokens() <= 8192);
    CHECK(extended.requests[i].total_tokens() <= 32768);
    if (extended.requests[i].total_tokens() > 8192) ++longer;
  }
  CHECK(longer > 100);
  CHECK_THAT(test::input_error([&] { load_inference_scenario(scenario("{tp: 1, max_model_len: 0}")); }), Catch::Contains("max_model_len"));
}

TEST_CASE("serving: disaggregated prefill and decode copy the KV cache over the fabric, and copies contend") {
  test::TempDir dir;
  const auto scenario = [&](const std::string& serving, double rate) {
    return dir.write("s.yaml", fmt::format(R"(scenario:
  name: disaggregated
  kind: inference
  model: llama3-8b
  topology: {{name: two, node: dgx-h100, nodes: 2, fabric: {{kind: rail-optimized, scalable_unit: 2, tiers: [{{radix: 64}}, {{radix: 64}}]}}}}
  serving: {}
  workload:
    requests: 64
    arrival: {{kind: poisson, rate: {}}}
    prompt_tokens: 4000
    output_tokens: 50
    seed: 2
)",
                                           serving, rate));
  };
  // 8 prefill replicas on node 0, 8 decode replicas on node 1: every copy crosses the InfiniBand rail.
  const InferenceScenario sc = load_inference_scenario(scenario("{tp: 1, weights: bf16, disaggregation: {prefill: 8, decode: 8}}", 4));
  REQUIRE(sc.disaggregation);
  const InferenceResult r = simulate_inference(sc);
  REQUIRE(r.requests.size() == 64);
  ReplicaConfig c = sc.replica;
  const double kv_bytes = kv_bytes_per_token(c) * 4000;  // 512 MiB per request for Llama 3 8B in bf16
  const double nic = 50e9;                                // ConnectX-7 NDR: 400 Gb/s
  for (const auto& q : r.requests) {
    CHECK(q.replica >= 0);
    CHECK(q.replica < 8);
    CHECK(q.decode_replica >= 8);
    CHECK(q.decode_replica < 16);
    CHECK(q.kv_transfer_start >= q.first_token);
    CHECK(q.kv_transfer_end - q.kv_transfer_start >= kv_bytes / nic);
    CHECK(q.finish > q.kv_transfer_end);
  }
  CHECK(r.metrics.kv_transfers == 64);
  // A burst of arrivals makes copies share the rail: they take longer on average than alone.
  const InferenceResult burst = simulate_inference(load_inference_scenario(scenario("{tp: 1, weights: bf16, disaggregation: {prefill: 8, decode: 8}}", 400)));
  CHECK(burst.metrics.mean_kv_transfer > 1.2 * r.metrics.mean_kv_transfer);
  // Bad plans are named.
  CHECK_THAT(test::input_error([&] { load_inference_scenario(scenario("{tp: 1, replicas: 4, disaggregation: {prefill: 1, decode: 1}}", 4)); }),
             Catch::Contains("either replicas or disaggregation"));
  CHECK_THAT(test::input_error([&] { load_inference_scenario(scenario("{tp: 1, disaggregation: {prefill: 9, decode: 8}}", 4)); }),
             Catch::Contains("impossible plan"));
}

// Llama 3 8B on one DGX H100: a chat workload at 100 requests/s and a sizing section over H100 and A100.
constexpr const char* kSizingScenario = R"(scenario:
  name: sizing
  kind: inference
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1}
  serving: {tp: 1, replicas: 1}
  workload:
    duration: 20s
    arrival: {kind: poisson, rate: 100}
    prompt_tokens: {kind: lognormal, median: 800, sigma: 0.5}
    output_tokens: {kind: lognormal, median: 150, sigma: 0.5}
    seed: 4
  slo: {ttft: 500ms, tpot: 30ms}
  sizing:
    attainment: 0.9
    max_gpus: 16
    tp: [1, 2]
    gpus:
      - {node: dgx-h100, price_per_gpu_hour: 6.88, as_of: "2026-11", source: "test"}
      - {node: dgx-a100, price_per_gpu_hour: 3.431, as_of: "2026-11", source: "test"}
)";

// kSizingScenario with each (from, to) replaced once; a `from` not in it fails the test.
std::string sizing_scenario(const std::vector<std::pair<std::string, std::string>>& edits) {
  std::string text = kSizingScenario;
  for (const auto& [from, to] : edits) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  }
  return text;
}

TEST_CASE("sizing: the cheapest configuration meets the SLO and one replica fewer does not") {
  test::TempDir dir;
  const auto file = dir.write("s.yaml", kSizingScenario);
  const InferenceScenario sc = load_inference_scenario(file);
  const SizingResult r = size_fleet(sc);
  CHECK(r.rate == 100);
  REQUIRE(r.candidates.size() == 4);
  REQUIRE(r.candidates.front().feasible);
  double previous = 0;
  for (const auto& c : r.candidates) {
    if (!c.feasible) continue;
    CHECK(c.cost_per_hour >= previous);  // cheapest first
    previous = c.cost_per_hour;
    CHECK(c.attainment >= 0.9);
    CHECK(c.metrics.request_goodput <= c.metrics.request_throughput);
  }
  // Billed for whole 8-GPU nodes: the 12 A100s that meet the SLO pay for 16 ($54.90 an hour), the
  // 4 H100s of the next for 8 ($55.04); by the GPUs alone H100 had come first. The fleet reported
  // fills the nodes it pays for: 16 replicas, 12 the fewest that met the SLO.
  const SizingCandidate& best = r.candidates.front();
  CHECK(best.gpu == "A100-SXM4-80GB");
  CHECK(best.gpus_billed == (best.gpus + 7) / 8 * 8);
  CHECK(best.gpus == best.gpus_billed);
  CHECK(best.cost_per_hour == Approx(best.gpus_billed * 3.431));
  REQUIRE(best.fewest_replicas > 0);
  CHECK(best.fewest_replicas < best.replicas);
  CHECK(best.fewest_replicas * best.tp * best.pp > best.gpus_billed - 8);  // the same nodes
  for (const auto& c : r.candidates) {
    if (c.feasible) CHECK(c.gpus == c.gpus_billed);  // max_gpus 16 leaves room to fill each
  }
  // Minimal: the cheapest configuration with one replica fewer than the fewest misses the SLO.
  const int fewest = best.fewest_replicas;
  REQUIRE(fewest > 1);
  {
    InferenceScenario fewer = sc;
    topology::TopologySpec spec;
    spec.name = "fewer";
    IncludeStack includes;
    spec.node = topology::load_node_file(resolve_part(best.node, "nodes"), includes);
    spec.nodes = (best.gpus_billed + spec.node->gpus() - 1) / spec.node->gpus();
    if (spec.nodes > 1) {
      spec.fabric.kind = topology::FabricKind::fat_tree;
      spec.fabric.technology = topology::Technology::infiniband;
      spec.fabric.tiers = {{64, 1.0}, {64, 1.0}};
    }
    fewer.topology = std::make_shared<const topology::Topology>(topology::build_topology(spec));
    fewer.replica.tp = best.tp;
    fewer.replica.all_reduce_seconds = best.tp > 1 ? tp_all_reduce_seconds(fewer.topology, best.tp) : nullptr;
    fewer.replicas = fewest - 1;
    const ServingMetrics m = simulate_inference(fewer).metrics;
    CHECK(m.request_goodput / m.request_throughput < 0.9);
  }
  // Priced at the steady rate, not over the drain of the run's last requests.
  CHECK(best.cost_per_million_output_tokens == Approx(best.cost_per_hour / (best.metrics.sustained_output_throughput * 3600) * 1e6));
  CHECK(best.metrics.sustained_output_throughput > best.metrics.output_throughput);
  // The same input gives the same answer.
  const SizingResult again = size_fleet(sc);
  CHECK(again.candidates.front().cost_per_hour == best.cost_per_hour);
  CHECK(again.candidates.front().attainment == best.attainment);
}

TEST_CASE("sizing: a target met exactly counts as met (attainment from the request counts)") {
  // A probe: 9 of 10 requests within the SLO gave an attainment of 0.8999999999999999 (the ratio of
  // two rates), short of a 0.9 target; the sizing then bought up to 3x the GPUs. The SLO here sits
  // between the 9th and the 10th request's latency of the one-replica run, whatever the model's times.
  test::TempDir dir;
  // Ten requests at 5 a second on one H100, an E2E SLO, no GPU beyond the one.
  const auto text = [](const std::string& slo) {
    return sizing_scenario({{"    duration: 20s\n", "    requests: 10\n"},
                            {"rate: 100}", "rate: 5}"},
                            {"prompt_tokens: {kind: lognormal, median: 800, sigma: 0.5}", "prompt_tokens: {kind: lognormal, median: 800, sigma: 0.8}"},
                            {"seed: 4", "seed: 6"},
                            {"slo: {ttft: 500ms, tpot: 30ms}", "slo: {e2e: " + slo + "}"},
                            {"max_gpus: 16\n    tp: [1, 2]", "max_gpus: 1\n    tp: [1]"},
                            {"      - {node: dgx-a100, price_per_gpu_hour: 3.431, as_of: \"2026-11\", source: \"test\"}\n", ""}});
  };
  const InferenceResult one = simulate_inference(load_inference_scenario(dir.write("probe.yaml", text("100s"))));
  std::vector<double> e2e;
  for (const auto& r : one.requests) e2e.push_back(r.e2e());
  REQUIRE(e2e.size() == 10);
  std::sort(e2e.begin(), e2e.end());
  REQUIRE(e2e[8] < e2e[9]);
  const double slo_ms = 1e3 * (e2e[8] + e2e[9]) / 2;
  const SizingResult r = size_fleet(load_inference_scenario(dir.write("s.yaml", text(fmt::format("{:.6f}ms", slo_ms)))));
  REQUIRE(r.candidates.size() == 1);
  CHECK(r.candidates.front().attainment == 0.9);
  CHECK(r.candidates.front().feasible);
  CHECK(r.candidates.front().metrics.met_slo == 9);
}

TEST_CASE("sizing: a fleet too large for the sizer's fabric ends the search at the largest that runs") {
  // A probe: max_gpus 4096 on 8-GPU nodes doubled past the 2,048 GPUs the sizer's 2-tier fabric
  // holds, and reported the fabric's refusal alone, as if the GPU could not run at all.
  test::TempDir dir;
  // The chat workload of the test above at a fifth of its rate, an SLO no fleet meets, and TP 8 up
  // to 4,096 GPUs.
  const std::string text = sizing_scenario({{"duration: 20s", "duration: 10s"},
                                             {"rate: 100}", "rate: 20}"},
                                             {"slo: {ttft: 500ms, tpot: 30ms}", "slo: {ttft: 1ms}"},
                                             {"    attainment: 0.9\n    max_gpus: 16\n    tp: [1, 2]\n", "    max_gpus: 4096\n    disaggregation: false\n    tp: [8]\n"},
                                             {"      - {node: dgx-a100, price_per_gpu_hour: 3.431, as_of: \"2026-11\", source: \"test\"}\n", ""}});
  const SizingResult r = size_fleet(load_inference_scenario(dir.write("s.yaml", text)));
  REQUIRE(r.candidates.size() == 1);
  const SizingCandidate& c = r.candidates.front();
  CHECK_FALSE(c.feasible);
  CHECK(c.attainment >= 0);  // it ran, and missed the SLO
  CHECK(c.gpus == 2048);
  CHECK_THAT(c.reason, Catch::Contains("even with 2048 GPUs (max_gpus 4096); 4096 GPUs cannot run: "));
}

TEST_CASE("sizing: expert parallelism follows each TP tried, whatever the scenario's TP") {
  // The sizing kept the scenario's ep: from TP 2 every other TP was refused ("ep must equal tp"),
  // from TP 1 expert parallelism was dropped at every TP. Each tried TP is now sized as `run` with
  // that TP and expert_parallel would run it.
  test::TempDir dir;
  const auto text = [](int tp) {
    return fmt::format(R"(scenario:
  name: ep
  kind: inference
  model: mixtral-8x7b
  topology: {{name: h200, node: hgx-h200, nodes: 1}}
  serving: {{tp: {}, expert_parallel: true}}
  workload: {{duration: 4s, arrival: {{kind: poisson, rate: 10}}, prompt_tokens: 600, output_tokens: 50, seed: 2}}
  slo: {{ttft: 1s, tpot: 50ms}}
  sizing:
    tp: [2, 4]
    max_gpus: 8
    gpus: [{{node: hgx-h200, price_per_gpu_hour: 7.91, as_of: "2026-11", source: test}}]
)",
                       tp);
  };
  const SizingResult from1 = size_fleet(load_inference_scenario(dir.write("ep1.yaml", text(1))));
  const SizingResult from2 = size_fleet(load_inference_scenario(dir.write("ep2.yaml", text(2))));
  REQUIRE(from1.candidates.size() == 2);
  REQUIRE(from2.candidates.size() == 2);
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(from2.candidates[k].attainment >= 0);  // not refused
    CHECK(from1.candidates[k].tp == from2.candidates[k].tp);
    CHECK(from1.candidates[k].metrics.tpot.p90 == from2.candidates[k].metrics.tpot.p90);
  }
  // And each is what `run` gives at that TP with experts spread over it.
  InferenceScenario at4 = load_inference_scenario(dir.write("ep4.yaml", text(4)));
  at4.replica.all_reduce_seconds = tp_all_reduce_seconds(at4.topology, 4);
  const auto& four = from1.candidates[0].tp == 4 ? from1.candidates[0] : from1.candidates[1];
  REQUIRE(four.tp == 4);
  // One replica met the SLO; the fleet fills the node it pays for with two.
  CHECK(four.fewest_replicas == 1);
  REQUIRE(four.replicas == 2);
  at4.replicas = four.replicas;
  CHECK(simulate_inference(at4).metrics.tpot.p90 == Approx(four.metrics.tpot.p90).epsilon(1e-9));
}

TEST_CASE("serving: a TP all-reduce between two cached sizes is timed between them, not at the larger") {
  // Found by a probe: sizes were rounded up to a power of two, so one token past 1,024 in a Llama 3
  // 70B prefill at TP 4 paid for twice the bytes in every all-reduce (TTFT 79.7 -> 99.7 ms). Expectation:
  // continuous in the size, exact at the powers of two, and linear between them.
  const auto topo = std::make_shared<const topology::Topology>(test::topology_from_text("topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}\n"));
  const auto all_reduce = tp_all_reduce_seconds(topo, 4);
  const double mib = 1024.0 * 1024.0;
  const double at16 = all_reduce(16 * mib), at32 = all_reduce(32 * mib);
  CHECK(at32 > at16);
  CHECK(all_reduce(16 * mib + 8192 * 2) == Approx(at16).epsilon(0.002));
  CHECK(all_reduce(24 * mib) == Approx((at16 + at32) / 2).epsilon(1e-12));
  CHECK(all_reduce(0.5) == all_reduce(1.0));
}

TEST_CASE("serving: each pipeline boundary's send is timed where its GPUs are") {
  // TP 4 x PP 4 on two DGX H100: boundary 1 (GPUs 4-7 to 8-11) crosses the fabric, 0 and 2 stay on
  // NVLink. Every boundary had been timed as replica 0's first, so the crossing cost an NVLink send.
  const auto topo = std::make_shared<const topology::Topology>(test::topology_from_text(R"(topology:
  name: two
  node: dgx-h100
  nodes: 2
  fabric: {kind: fat-tree, tiers: [{radix: 64}, {radix: 64}]}
)"));
  const auto send = pp_send_seconds(topo, 4, 4);
  const double bytes = 8000 * 8192 * 2.0 / 4;  // a 70B prefill's hidden states, per TP rank
  CHECK(send(0, 0, bytes) == send(0, 2, bytes));
  // NVLink 4 (450 GB/s a direction) against one 400 Gb/s NIC a GPU: about 9 times slower.
  CHECK(send(0, 1, bytes) > 5 * send(0, 0, bytes));
  // Each of the four GPUs sends on its own NIC: a NIC's time for its share, not four shares.
  CHECK(send(0, 1, bytes) == Approx(bytes / 50e9).epsilon(0.15));
  // Where a replica past the first may hold other boundaries: TP 2 x PP 3 on 8-GPU nodes, replica 1
  // holds GPUs 6-11, its boundary 0 (6-7 to 8-9) crosses, replica 0's does not.
  const auto three = pp_send_seconds(topo, 2, 3);
  CHECK(three(1, 0, bytes) > 5 * three(0, 0, bytes));
  CHECK_THROWS_AS(pp_send_seconds(topo, 8, 3), std::invalid_argument);  // 24 GPUs of 16
}

TEST_CASE("serving: TP groups fill each node whole, a TP that does not divide the node leaving GPUs idle") {
  // Groups had been packed GPU after GPU, so TP 6 on 8-GPU nodes was refused at a node's edge, and
  // sizing skipped every TP that does not divide the node (TP 16 on a 72-GPU NVL72 rack).
  const topology::Topology topo = test::topology_from_text(R"(topology:
  name: two
  node: dgx-h100
  nodes: 2
  fabric: {kind: fat-tree, tiers: [{radix: 64}, {radix: 64}]}
)");
  const ServingLayout six(topo, 6);
  CHECK(six.groups() == 2);
  CHECK(six.first_gpu(0) == 0);
  CHECK(six.first_gpu(1) == 8);
  CHECK_THROWS_AS(six.first_gpu(2), std::invalid_argument);
  CHECK(six.gpus_billed(1) == 8);
  CHECK(six.gpus_billed(2) == 16);
  // Where TP divides the node, the groups are consecutive, as before.
  const ServingLayout four(topo, 4);
  CHECK(four.groups() == 4);
  for (int g = 0; g < 4; ++g) CHECK(four.first_gpu(g) == static_cast<std::size_t>(4 * g));
  CHECK(four.gpus_billed(3) == 16);
  CHECK_NOTHROW(check_placement(topo, 6, 1, 2));
  CHECK_NOTHROW(check_placement(topo, 6, 2, 1));
  CHECK_THROWS_AS(check_placement(topo, 5, 1, 3), std::invalid_argument);  // 15 GPUs of 16, but 2 groups of 5
  CHECK_THROWS_AS(ServingLayout(topo, 0), std::invalid_argument);
  const auto shared = std::make_shared<const topology::Topology>(topo);
  const double bytes = 64e6;
  // TP 3 x PP 2: a node holds two groups (GPUs 0-2 and 3-5; 6 and 7 idle), so replica 1 is GPUs 8-10
  // and 11-13 and its boundary stays on NVLink; packed GPU after GPU it had been 6-8 and 9-11,
  // across the fabric. Replica 0's boundary of TP 3 x PP 3 crosses (its third group is GPUs 8-10).
  const auto three_by_two = pp_send_seconds(shared, 3, 2);
  const auto three_by_three = pp_send_seconds(shared, 3, 3);
  CHECK(three_by_three(0, 1, bytes) == Approx(bytes / 50e9).epsilon(0.15));  // a NIC's rate
  CHECK(three_by_two(1, 0, bytes) * 5 < three_by_three(0, 1, bytes));
  CHECK(three_by_two(1, 0, bytes) == Approx(three_by_two(0, 0, bytes)));
  // KV copies of TP 6 from prefill replica 0 (GPUs 0-5) to decode replica 0 (the second group: GPUs
  // 8-13): every GPU's copy leaves the node (GPU, PCIe switch, NIC, leaf and back: more than the two
  // links of an NVLink path); packed, decode had been GPUs 6-11 and two copies had stayed on NVLink.
  Disaggregation d;
  d.prefill = 1;
  d.decode = 1;
  kv_transfer_network(shared, 6, 1, d);
  const auto flows = d.kv_flows(0, 0, bytes);
  REQUIRE(flows.size() >= 6);
  for (const auto& f : flows) CHECK(f.path.size() > 2);
}

TEST_CASE("serving: without chunked prefill a request of max_num_batched_tokens + 1 tokens runs (its last token is never recomputed)") {
  // A probe: prompt 500 + output 13 under a budget of 512 was refused, though a recompute after a
  // preemption prefills at most the prompt and the 12 tokens generated before the last.
  test::TempDir dir;
  const auto scenario = [&](int budget) {
    return dir.write(fmt::format("b{}.yaml", budget), fmt::format(R"(scenario:
  name: budget
  kind: inference
  model: llama3-8b
  topology: {{name: one, node: dgx-h100, nodes: 1}}
  serving: {{tp: 1, chunked_prefill: false, max_num_batched_tokens: {}, max_num_seqs: 64}}
  workload: {{requests: 20, arrival: {{kind: offline}}, prompt_tokens: 200, output_tokens: 10}}
)",
                                                                   budget));
  };
  CHECK(simulate_inference(load_inference_scenario(scenario(209))).metrics.completed == 20);
  CHECK_THAT(test::input_error([&] { load_inference_scenario(scenario(208)); }), Catch::Contains("may need a pass of 209 tokens"));
}

TEST_CASE("sizing: TP 16 on a 72-GPU NVL72 rack is sized, four replicas a rack, billed for the rack") {
  test::TempDir dir;
  const auto file = dir.write("nvl72.yaml", R"(scenario:
  name: nvl72
  kind: inference
  model: llama3-70b
  topology: {name: rack, node: gb200-nvl72, nodes: 1}
  serving: {tp: 16, replicas: 1}
  workload: {duration: 4s, arrival: {kind: poisson, rate: 5}, prompt_tokens: 500, output_tokens: 50, seed: 3}
  slo: {ttft: 2s, tpot: 100ms}
  sizing:
    tp: [16]
    max_gpus: 72
    gpus: [{node: gb200-nvl72, price_per_gpu_hour: 10, as_of: "2026-11", source: test}]
)");
  const SizingResult r = size_fleet(load_inference_scenario(file));
  REQUIRE(r.candidates.size() == 1);
  const SizingCandidate& c = r.candidates.front();
  CHECK(c.reason.find("divide") == std::string::npos);
  REQUIRE(c.feasible);
  CHECK(c.gpus_billed == 72);
  CHECK(c.cost_per_hour == Approx(720));
  // The fleet fills the rack it pays for: four groups of 16, eight GPUs idle, which the layout (not
  // max_gpus) leaves (a review found such a row called "grown to max_gpus").
  CHECK(c.replicas == 4);
  CHECK(c.gpus == 64);
  CHECK(c.fewest_replicas >= 1);
  CHECK(c.fewest_replicas < 4);
  CHECK_FALSE(c.capped_by_max_gpus);
  // Growing asks again for counts the doubling had simulated: each configuration is simulated once.
  CHECK(r.simulations <= 3);  // 1, 2 and 4 replicas at most
}

TEST_CASE("sizing: a sizing section needs an SLO, and a rate needs a generated workload") {
  test::TempDir dir;
  const auto scenario = [&](const std::string& slo, const std::string& arrival) {
    return dir.write("s.yaml", fmt::format(R"(scenario:
  name: sizing
  kind: inference
  model: llama3-8b
  topology: {{name: one, node: dgx-h100, nodes: 1}}
  serving: {{tp: 1}}
  workload: {{requests: 10, arrival: {}, prompt_tokens: 100, output_tokens: 10}}
{}  sizing:
    rate: 5
    gpus: [{{node: dgx-h100, price_per_gpu_hour: 6.88, as_of: "2026-11", source: "test"}}]
)",
                                           arrival, slo));
  };
  CHECK_THAT(test::input_error([&] { load_inference_scenario(scenario("", "{kind: poisson, rate: 1}")); }), Catch::Contains("sizing needs an slo"));
  CHECK_THAT(test::input_error([&] { load_inference_scenario(scenario("  slo: {ttft: 1s}\n", "{kind: offline}")); }),
             Catch::Contains("a sizing rate needs a poisson or gamma workload"));

  // A count of requests at the workload's own rate spans a time; at the sizing rate the same span
  // holds more requests (10 at 1 req/s: 10 s, 50 at 5). Keeping the count squeezed 400 requests
  // into a 0.4 s burst at 1,000 req/s, and a fleet that serves 53 req/s "met" it.
  const InferenceScenario sc = load_inference_scenario(scenario("  slo: {ttft: 1s}\n", "{kind: poisson, rate: 1}"));
  REQUIRE(sc.recipe);
  CHECK(sc.recipe->span() == Approx(10));
  CHECK(sc.recipe->count_at(1) == 10);
  CHECK(sc.recipe->count_at(5) == 50);
  const SizingResult r = size_fleet(sc);
  CHECK(r.requests == 50);
  CHECK(r.span_s == Approx(10).epsilon(0.5));  // the 50 Poisson arrivals' first to last
}

TEST_CASE("serving: prefix caching reuses a shared system prompt's blocks, evicts under pressure, and KV-aware routing follows it") {
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  const SharedPrefix system_prompt{2000, 1};
  const auto requests = generate_requests(300, {ArrivalProcess::Kind::poisson, 10, 1}, {LengthDistribution::Kind::fixed, 100, 0, {}},
                                          {LengthDistribution::Kind::fixed, 50, 0, {}}, 7, system_prompt);
  for (const auto& r : requests) {
    CHECK(r.prompt_tokens == 2100);
    CHECK(r.prefix_id == 0);
  }
  const ReplicaRun cached = run_replica(requests, c, hw);
  c.prefix_caching = false;
  const ReplicaRun uncached = run_replica(requests, c, hw);
  const ServingMetrics mc = serving_metrics(cached), mu = serving_metrics(uncached);
  // All but the first request (and any admitted before it finished its prefix) skip the 2,000 tokens.
  CHECK(mc.prefix_hit_rate > 0.9 * 2000.0 / 2100.0);
  CHECK(mc.prefix_hit_rate < 2000.0 / 2100.0);
  CHECK(mu.prefix_hit_rate == 0);
  CHECK(mc.ttft.mean < 0.5 * mu.ttft.mean);
  for (const auto& r : cached.requests) CHECK(r.finish > 0);

  // Many prefixes in a small pool: cached blocks are evicted to make room; nothing overflows.
  c.prefix_caching = true;
  c.gpu_memory_utilization = 0.25;
  const auto crowded = generate_requests(400, {ArrivalProcess::Kind::poisson, 20, 1}, {LengthDistribution::Kind::fixed, 200, 0, {}},
                                         {LengthDistribution::Kind::fixed, 100, 0, {}}, 8, SharedPrefix{3000, 40});
  const ReplicaRun tight = run_replica(crowded, c, hw);
  CHECK(tight.peak_kv_blocks <= tight.kv_blocks);
  CHECK(tight.prefix_hit_tokens > 0);
  for (const auto& r : tight.requests) CHECK(r.finish > 0);

  // Four replicas, four system prompts: KV-aware routing sends a prompt where it is cached.
  ClusterConfig config;
  config.replica = llama8b();
  config.replicas = 4;
  const auto grouped = generate_requests(400, {ArrivalProcess::Kind::poisson, 20, 1}, {LengthDistribution::Kind::fixed, 100, 0, {}},
                                         {LengthDistribution::Kind::fixed, 50, 0, {}}, 9, SharedPrefix{2000, 4});
  config.router = Router::round_robin;
  const double rr = serving_metrics(run_cluster(grouped, config, hw)).prefix_hit_rate;
  config.router = Router::kv_aware;
  const double aware = serving_metrics(run_cluster(grouped, config, hw)).prefix_hit_rate;
  CHECK(aware > rr);
}

TEST_CASE("serving: requests that arrive at the same instant are scheduled together") {
  // Scheduled as each arrived, the first of an offline batch ran alone and the rest waited a whole
  // iteration (static batching: 200 decode steps) behind it, at half the throughput.
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  c.max_num_seqs = 16;
  c.prefix_caching = false;
  c.batching = Batching::static_batch;
  const auto offline = generate_requests(16, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::fixed, 200, 0, {}},
                                         {LengthDistribution::Kind::fixed, 200, 0, {}}, 1);
  const ReplicaRun fixed = run_replica(offline, c, hw);
  REQUIRE(fixed.batch_size_histogram.size() == 17);
  CHECK(fixed.batch_size_histogram[16] == 200);
  CHECK(std::accumulate(fixed.batch_size_histogram.begin(), fixed.batch_size_histogram.end(), std::int64_t{0}) == 200);
  // Continuous batching: four 1,000-token prompts that arrive together share one prefill, so each
  // has the same first token.
  c.batching = Batching::continuous;
  const ReplicaRun together = run_replica({{0, 1.0, 1000, 1}, {1, 1.0, 1000, 1}, {2, 1.0, 1000, 1}, {3, 1.0, 1000, 1}}, c, hw);
  REQUIRE(together.requests.size() == 4);
  for (const auto& r : together.requests) CHECK(r.first_token == together.requests.front().first_token);
}

TEST_CASE("serving: a cached prefix counts once per admission, and whole prefills start on a cache hit") {
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  // Without chunked prefill a request whose prefix is cached runs its uncached tokens in one
  // iteration. The check compared them with the whole prompt, so after the first request nothing
  // was admitted again: 1 of 20 served (open loop) or a crash (closed loop).
  c.chunked_prefill = false;
  const auto requests = generate_requests(20, {ArrivalProcess::Kind::poisson, 2, 1}, {LengthDistribution::Kind::fixed, 500, 0, {}},
                                          {LengthDistribution::Kind::fixed, 50, 0, {}}, 1, SharedPrefix{1000, 1});
  for (const std::optional<ClosedLoop> loop : {std::optional<ClosedLoop>{}, std::optional<ClosedLoop>{ClosedLoop{4}}}) {
    const ReplicaRun run = run_replica(requests, c, hw, loop);
    REQUIRE(run.requests.size() == 20);
    for (const auto& r : run.requests) CHECK(r.finish > r.request.arrival);
    // The first admissions miss (open loop: the first request; closed loop: the four that start
    // together, before the prefix is computed); the others hit its 62 whole blocks (992 tokens) of 1,500.
    const double misses = loop ? 4 : 1;
    CHECK(serving_metrics(run).prefix_hit_rate == Approx((20 - misses) * 992.0 / (20 * 1500.0)));
  }
  // A preempted request looks its tokens up again when it is readmitted, and its hits count against
  // that lookup (vLLM's prefix-cache queries): the rate had reached 809% under 713 preemptions.
  c.chunked_prefill = true;
  c.gpu_memory_utilization = 0.22;
  const auto long_outputs = generate_requests(100, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::fixed, 16, 0, {}},
                                              {LengthDistribution::Kind::fixed, 4000, 0, {}}, 1, SharedPrefix{4000, 1});
  const ReplicaRun crowded = run_replica(long_outputs, c, hw);
  CHECK(crowded.preemptions > 0);
  CHECK(crowded.prefix_query_tokens > 100 * 4016);
  const double rate = serving_metrics(crowded).prefix_hit_rate;
  CHECK(rate > 0);
  CHECK(rate <= 1);
}

TEST_CASE("serving: KV-aware routing weighs a cached prefix against load, and does not pile shared prefixes on one replica") {
  // Expectation: under heavy load with four system prompts on eight replicas, the KV-aware router
  // (Dynamo's cost: prefill blocks plus active blocks) spreads the requests about as evenly as
  // round-robin and serves them as fast; preferring a prefix holder whatever its queue sent a third
  // of them to one replica, at 29% less throughput.
  const auto hw = h100();
  ClusterConfig config;
  config.replica = llama8b();
  config.replicas = 8;
  config.replica.max_model_len = 32768;  // the lognormal tails pass Llama 3's 8,192
  const auto requests = generate_requests(7200, {ArrivalProcess::Kind::poisson, 120, 1}, {LengthDistribution::Kind::lognormal, 600, 0.8, {}},
                                          {LengthDistribution::Kind::lognormal, 200, 0.6, {}}, 1, SharedPrefix{1000, 4});
  config.router = Router::round_robin;
  const ServingMetrics rr = serving_metrics(run_cluster(requests, config, hw));
  config.router = Router::kv_aware;
  const ClusterRun aware_run = run_cluster(requests, config, hw);
  const ServingMetrics aware = serving_metrics(aware_run);
  std::vector<int> per_replica(8, 0);
  for (const auto& q : aware_run.requests) ++per_replica[static_cast<std::size_t>(q.replica)];
  const int most = *std::max_element(per_replica.begin(), per_replica.end());
  CHECK(most < 1.5 * 7200 / 8);
  CHECK(aware.request_throughput > 0.95 * rr.request_throughput);
  CHECK(aware.prefix_hit_rate >= 0.99 * rr.prefix_hit_rate);
}

TEST_CASE("serving: a trace may name each request's prefix") {
  test::TempDir dir;
  const auto file = dir.write("t.csv", "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,1100,10,3,1000\n0.5,1200,10,3,1000\n1,50,5,-1,0\n");
  const auto r = read_trace(file);
  REQUIRE(r.size() == 3);
  CHECK(r[1].prefix_id == 3);
  CHECK(r[1].prefix_tokens == 1000);
  CHECK(r[2].prefix_id == -1);
  const ReplicaRun run = run_replica(r, llama8b(), h100());
  CHECK(run.prefix_hit_tokens == 992);  // the second request reuses the first's 62 full blocks of 16
  const auto bad = dir.write("b.csv", "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,100,10,3,1000\n");
  CHECK_THAT(test::input_error([&] { read_trace(bad); }), Catch::Contains("b.csv:2:12: field 'prefix_tokens': expected a prefix length from 0 to the prompt's 100 tokens, found '1000'"));
}

TEST_CASE("serving: a pipeline-parallel replica keeps its stages busy with several batches in flight") {
  const auto hw = h100();
  ReplicaConfig c = llama8b();
  c.pp = 2;
  c.pp_send_seconds = [](int, int, double bytes) { return 5e-6 + bytes / 400e9; };
  // A lone request: its prefill passes both stages and one send.
  const ReplicaRun lone = run_replica({{0, 0.0, 3000, 2}}, c, hw);
  const IterationCost cost = iteration_cost({{3000, 0}}, c, hw);
  CHECK(lone.requests[0].ttft() == Approx(cost.fixed + cost.stage(c.model, 0, 16, false) + cost.stage_sends.at(0) + cost.stage(c.model, 16, 16, true)).margin(3e-9));
  CHECK(iteration_seconds({{3000, 0}}, c, hw) == Approx(lone.requests[0].ttft()).margin(3e-9));
  // Each GPU holds half the layers: twice the KV tokens per byte.
  ReplicaConfig one = llama8b();
  CHECK(kv_bytes_per_token(c) == Approx(kv_bytes_per_token(one) / 2));
  CHECK(kv_block_capacity(c, hw) > 2 * kv_block_capacity(one, hw));
  // Saturated: two GPUs as one PP-2 replica come close to two replicas of one GPU (a pipeline with
  // one batch at a time would reach about half).
  const auto requests = generate_requests(600, {ArrivalProcess::Kind::offline, 1, 1}, {LengthDistribution::Kind::fixed, 500, 0, {}},
                                          {LengthDistribution::Kind::fixed, 200, 0, {}}, 3);
  const double piped = serving_metrics(run_replica(requests, c, hw)).output_throughput;
  ClusterConfig two;
  two.replica = one;
  two.replicas = 2;
  const double replicas = serving_metrics(run_cluster(requests, two, hw)).output_throughput;
  CHECK(piped > 0.7 * replicas);
  CHECK(piped < 1.2 * replicas);
  // Under arrivals over time, batches that leave the pipeline while the first stage is busy stay
  // apart (they had merged, for good: a PP-4 replica at 60 requests/s drifted to one batch of 247 of
  // its 256 sequences and served 35 requests/s, a PP-1 replica's rate). Expectation: a PP-4 replica
  // never runs nine tenths of its sequences in one batch, and outserves one GPU (about 33 requests/s)
  // by 15% or more. (New requests still join whichever batch forms next, as in vLLM V1, so the
  // batches need not come out equal: here they settle at 12, 21, 47 and 176 sequences.)
  ReplicaConfig four = llama8b();
  four.pp = 4;
  four.pp_send_seconds = c.pp_send_seconds;
  const auto arriving = generate_requests(3000, {ArrivalProcess::Kind::poisson, 60, 1}, {LengthDistribution::Kind::fixed, 600, 0, {}},
                                          {LengthDistribution::Kind::fixed, 240, 0, {}}, 1);
  const ReplicaRun run4 = run_replica(arriving, four, hw);
  std::int64_t big = 0;
  for (std::size_t n = 0; n < run4.batch_size_histogram.size(); ++n) {
    if (static_cast<double>(n) > 0.9 * four.max_num_seqs) big += run4.batch_size_histogram[n];
  }
  CHECK(big == 0);
  CHECK(serving_metrics(run4).request_throughput > 1.15 * serving_metrics(run_replica(arriving, one, hw)).request_throughput);
  c.pp = 40;
  CHECK_THROWS_WITH(kv_block_capacity(c, hw), Catch::Contains("more than the model's 32 layers"));
}

TEST_CASE("serving: mean KV use is the blocks held over time, with or without pipeline stages") {
  // Expectation: one request of 2,000 + 2,000 tokens holds about 3,000 tokens on average (its KV
  // grows from 2,000 to 4,000 while it decodes), whatever the pipeline depth. The use had been counted
  // only while the first stage computed, a quarter of the truth at PP 4.
  const auto hw = h100();
  for (int pp : {1, 2, 4}) {
    ReplicaConfig c = llama8b();
    c.pp = pp;
    c.pp_send_seconds = [](int, int, double bytes) { return 5e-6 + bytes / 400e9; };
    const ReplicaRun run = run_replica({{0, 0.0, 2000, 2000}}, c, hw);
    const double tokens = serving_metrics(run).mean_kv_use * static_cast<double>(run.kv_blocks * c.block_size);
    INFO("pp " << pp);
    CHECK(tokens == Approx(3000).epsilon(0.03));
  }
}

TEST_CASE("serving: an MoE decode step reads the experts its tokens touch, and expert parallelism spreads whole experts") {
  const auto hw = h100();
  IncludeStack includes;
  ReplicaConfig c;
  c.model = load_transformer_file(resolve_part(std::string("mixtral-8x7b"), "models"), includes);
  c.tp = 2;
  c.all_reduce_seconds = [](double bytes) { return 10e-6 + bytes / 300e9; };
  const double rate = hw.memory_bandwidth.value() * hw.gemm.memory_efficiency;
  const double all_weights = count_parameters(c.model).total() * 2 / c.tp / rate;
  const auto decode = [&](int batch) {
    std::vector<BatchEntry> b(static_cast<std::size_t>(batch), BatchEntry{1, 500});
    return iteration_seconds(b, c, hw);
  };
  // One token touches 2 of 8 experts per layer: well under all the weights; 256 tokens touch all.
  CHECK(decode(1) < 0.6 * all_weights);
  CHECK(decode(1) > 0.3 * all_weights);
  CHECK(decode(256) > 0.95 * all_weights);
  // Whole experts over the 2 TP ranks read on average the same bytes per GPU as 1/2-slices of all 8,
  // but the step waits for the busier GPU. One token's 2 experts sit on one GPU 12 times in 28 (that
  // GPU reads 2 experts, else each reads 1): 1.43 experts expected on the busier, against one
  // expert's bytes a GPU sliced (the model's independent-touch estimate: 1.46). Every layer pays the
  // difference; with 256 tokens every expert is touched either way.
  const double sliced1 = decode(1), sliced256 = decode(256);
  c.ep = 2;
  const double expert_read = 3.0 * 4096 * 14336 * 2 / rate;
  CHECK(decode(1) - sliced1 > 0.40 * expert_read * 32);
  CHECK(decode(1) - sliced1 < 0.50 * expert_read * 32);
  CHECK(decode(256) == Approx(sliced256).epsilon(0.2));
  CHECK(kv_block_capacity(c, hw) > 0);
  c.ep = 3;
  CHECK_THROWS_WITH(kv_block_capacity(c, hw), Catch::Contains("ep must equal tp"));
}

TEST_CASE("serving: a replica's memo of GEMM times gives the same iteration costs as timing every GEMM") {
  const auto hw = h100();
  const ReplicaConfig c = llama8b();
  GemmTimeCache cache;
  // Prefill, decode and mixed batches, each twice: the second time every GEMM comes from the memo.
  const std::vector<std::vector<BatchEntry>> batches{{{2000, 0}}, {{1, 2000}}, {{1, 10}, {1, 500}, {300, 0}}, {{8192, 0}}};
  for (int round = 0; round < 2; ++round) {
    for (const auto& b : batches) {
      const IterationCost plain = iteration_cost(b, c, hw);
      const IterationCost memo = iteration_cost(b, c, hw, &cache);
      CHECK(memo.dense_layer == plain.dense_layer);
      CHECK(memo.head == plain.head);
      CHECK(memo.fixed == plain.fixed);
    }
  }
}

TEST_CASE("sizing: a TP degree whose replica needs more GPUs than max_gpus is refused without simulating, and one listed twice is an error") {
  test::TempDir dir;
  const auto scenario = [&](const std::string& tp, int max_gpus) {
    return dir.write("s.yaml", fmt::format(R"(scenario:
  name: sizing
  kind: inference
  model: llama3-8b
  topology: {{name: one, node: dgx-h100, nodes: 1}}
  serving: {{tp: 1}}
  workload: {{requests: 20, arrival: {{kind: poisson, rate: 5}}, prompt_tokens: 100, output_tokens: 10}}
  slo: {{ttft: 1s}}
  sizing:
    max_gpus: {}
    tp: {}
    gpus: [{{node: dgx-h100, price_per_gpu_hour: 6.88, as_of: "2026-11", source: "test"}}]
)",
                                           max_gpus, tp));
  };
  // Expectation: with max_gpus 4, TP 8 cannot make one replica (8 GPUs): it is listed with that
  // reason and no simulated figures; TP 2 is sized as usual.
  const SizingResult r = size_fleet(load_inference_scenario(scenario("[2, 8]", 4)));
  REQUIRE(r.candidates.size() == 2);
  const auto tp8 = std::find_if(r.candidates.begin(), r.candidates.end(), [](const SizingCandidate& c) { return c.tp == 8; });
  REQUIRE(tp8 != r.candidates.end());
  CHECK_FALSE(tp8->feasible);
  CHECK(tp8->attainment < 0);
  CHECK_THAT(tp8->reason, Catch::Contains("one replica needs TP 8 x PP 1 = 8 GPUs, more than max_gpus (4)"));
  CHECK_THAT(test::input_error([&] { load_inference_scenario(scenario("[8, 8]", 16)); }), Catch::Contains("expected each TP degree once, found 8 a second time"));
}

TEST_CASE("serving: a petabyte of memory, the profiles' bound, keeps the KV pool's counts inside 64 bits") {
  // The least KV a model can cache: one layer of one KV head of dimension 1 in fp8, 2 bytes a
  // token, in blocks of one token, on 1 PB.
  hardware::HardwareProfile hw = h100();
  hw.memory_capacity = Bytes(1e15);
  ReplicaConfig c = llama8b();
  c.model.layers = 1;
  c.model.kv_heads = 1;
  c.model.head_dim = 1;
  c.kv_bytes_per_element = 1;
  c.block_size = 1;
  const double usable = hw.memory_capacity.value() * c.gpu_memory_utilization;
  const std::int64_t blocks = kv_block_capacity(c, hw);
  // Expectation: (usable - weights) / 2 bytes, about 4.5e14 blocks.
  CHECK(blocks == static_cast<std::int64_t>((usable - stage_weight_bytes(c, 0, 1, true, true)) / 2.0));
  CHECK(blocks > 4e14);
  // 262,144 replicas (a topology's most GPUs) of that pool hold 1.2e20 blocks, past int64. Each used
  // half its pool over the 1 s its request took. Expectation: a mean KV use of 0.5, not a wrapped sum's.
  ClusterRun run;
  RequestResult request;
  request.first_token = 0.5;
  request.finish = 1;
  run.requests = {request};
  ReplicaRun replica;
  replica.kv_blocks = blocks;
  replica.kv_block_seconds = 0.5 * static_cast<double>(blocks);
  replica.makespan = 1;
  run.replicas.assign(262'144, replica);
  CHECK(serving_metrics(run).mean_kv_use == Approx(0.5));
}

TEST_CASE("serving: the pool is set by the stage with the least room, and fp8 or int4 layers leave the embedding and LM head 16-bit") {
  const auto hw = h100();
  ReplicaConfig c = llama8b();  // 32 layers, untied 128,256 x 4,096 embedding and head
  const ParameterCount p = count_parameters(c.model);
  const double layer = (p.attention + p.dense_ffn) / c.model.layers + 2.0 * c.model.hidden;
  const double vocab = double(c.model.vocab) * c.model.hidden;
  const double usable = hw.memory_capacity.value() * c.gpu_memory_utilization;
  // vLLM's split: the remainder to the stages before the last, from the second-to-last back.
  CHECK(stage_layer_counts(32, 3) == std::vector<int>{11, 11, 10});
  CHECK(stage_layer_counts(61, 4) == std::vector<int>{15, 15, 16, 15});
  CHECK(stage_layer_counts(7, 4) == std::vector<int>{2, 2, 2, 1});
  // PP 3: stages of 11, 11 and 10 layers; the first holds the embedding, the last the head. The
  // first (11 layers and the embedding) binds: its KV is 11 layers' and its weights the most.
  c.pp = 3;
  const double kv_layer = kv_bytes_per_token(c) / 11.0;
  CHECK(stage_weight_bytes(c, 0, 11, true, false) == Approx((11 * layer + vocab) * 2.0));
  CHECK(stage_weight_bytes(c, 22, 10, false, true) == Approx((10 * layer + vocab + c.model.hidden) * 2.0));
  const auto blocks = static_cast<std::int64_t>((usable - stage_weight_bytes(c, 0, 11, true, false)) / (11 * kv_layer * c.block_size));
  CHECK(kv_block_capacity(c, hw) == blocks);
  // Tied embeddings: with PP the last stage holds the embedding too (vLLM builds it there to tie
  // the head); on one stage it is held once.
  ReplicaConfig tied = c;
  tied.model.tied_embeddings = true;
  CHECK(stage_weight_bytes(tied, 22, 10, false, true) == Approx((10 * layer + vocab + c.model.hidden) * 2.0));
  CHECK(stage_weight_bytes(tied, 0, 32, true, true) == Approx((32 * layer + vocab + c.model.hidden) * 2.0));
  // fp8 layers: the embedding and head stay 2 bytes a parameter, every other linear weight 1.
  c.pp = 1;
  c.weights = hardware::Dtype::fp8;
  CHECK(stage_weight_bytes(c, 0, 32, true, true) == Approx((p.attention + p.dense_ffn) + (p.norms + 2 * vocab) * 2.0));
  // ... and the head is timed as the 16-bit GEMM it is (it had run as an fp8 one).
  ReplicaConfig bf16 = c;
  bf16.weights = hardware::Dtype::bf16;
  const std::vector<BatchEntry> decode(64, BatchEntry{1, 2000});
  CHECK(iteration_cost(decode, c, hw).head == Approx(iteration_cost(decode, bf16, hw).head));
  CHECK(iteration_cost(decode, c, hw).dense_layer < iteration_cost(decode, bf16, hw).dense_layer);
  c.weight_bytes_per_parameter = 0.5;  // int4
  CHECK(stage_weight_bytes(c, 0, 32, true, true) == Approx((p.attention + p.dense_ffn) * 0.5 + (p.norms + 2 * vocab) * 2.0));
  // MoE at TP 2: experts split over TP in the weights' dtype, the router whole on each GPU in 16 bits.
  IncludeStack includes;
  ReplicaConfig moe = llama8b();
  moe.model = load_transformer_file(resolve_part(std::string("mixtral-8x7b"), "models"), includes);
  moe.tp = 2;
  moe.weights = hardware::Dtype::fp8;
  const ParameterCount q = count_parameters(moe.model);
  const double moe_layer = attention_parameters_per_rank(moe.model, 2) + (q.routed_experts + q.shared_experts) / moe.model.layers / 2.0 +
                           q.router / moe.model.layers * 2.0 + 2.0 * moe.model.hidden * 2.0;
  CHECK(stage_weight_bytes(moe, 0, 1, false, false) == Approx(moe_layer));
  // A stage whose own weights overflow the GPU is refused, naming it, though the average would fit.
  TransformerSpec big = c.model;
  big.layers = 3;
  big.hidden = 32768;
  big.heads = 256;
  big.kv_heads = 8;
  big.head_dim = 128;
  big.ffn_hidden = 190464;
  big.vocab = 32000;
  big.seq_len = 2048;
  ReplicaConfig b = llama8b();
  b.model = big;
  b.pp = 2;
  b.max_model_len = 2048;
  const ParameterCount w = count_parameters(big);
  CHECK(w.total() * 2.0 / 2 < usable);
  CHECK_THROWS_WITH(kv_block_capacity(b, hw), Catch::Contains("per GPU on stage 0 (2 layers and the embedding) at TP 1 x PP 2"));
}
