// Training plan search: constraints and memory prune before simulating, the same outcomes whatever
// the thread count, a killed run resumes without losing or repeating plans, and the Pareto front.
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "catch.hpp"
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/models/plan_search.hpp"
#include "clustersim/models/training_scenario.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::models;

namespace {

TrainingScenario small() {
  test::TempDir dir;
  const auto file = dir.write("s.yaml", R"(scenario:
  name: small
  kind: training
  model: llama3-8b
  topology: {name: two, node: dgx-h100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 64}, {radix: 64}]}}
  parallelism: {tp: 2, pp: 2, dp: 4, sequence_parallel: true}
  batch: {micro: 1, global: 32}
  train_tokens: 1e9
  search: {gpus: [8, 16], tp: [1, 2, 4, 8], pp: [1, 2, 4], vpp: [1, 2], micro: [1, 2], recompute: [none, selective]}
)");
  return load_training_scenario(file);
}

// The k fastest simulated plans (step time and key), of one system or (system -1) of all.
std::vector<std::pair<double, std::string>> top(const SearchResult& r, std::size_t k, int system = -1) {
  std::vector<std::pair<double, std::string>> v;
  for (const auto& o : r.outcomes) {
    if (o.status == PlanOutcome::Status::simulated && (system < 0 || o.plan.system == system)) v.emplace_back(o.step_s, r.key(o));
  }
  std::sort(v.begin(), v.end());
  v.resize(std::min(k, v.size()));
  return v;
}

// Llama 3 8B on one DGX H100 at TP 2, DP 4, with the given lines of its search block.
std::string one_dgx_h100_scenario(const std::string& search) {
  return "scenario:\n  name: s\n  kind: training\n  model: llama3-8b\n"
         "  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}\n"
         "  parallelism: {tp: 2, dp: 4}\n  batch: {micro: 1, global: 64}\n  train_tokens: 1e9\n"
         "  search:\n" + search;
}

// Searches the scenario's space with the bound (keeping `keep`), checks that every simulated step is
// at or above its plan's bound, and returns how many were simulated.
int simulated_above_bound(const TrainingScenario& sc, int threads, int keep) {
  SearchOptions bb;
  bb.threads = threads;
  bb.bound = true;
  bb.keep = keep;
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, bb);
  int simulated = 0;
  for (const auto& o : r.outcomes) {
    if (o.status != PlanOutcome::Status::simulated) continue;
    ++simulated;
    INFO(r.text(o));
    CHECK(o.step_s >= o.lower_bound_s);
    CHECK(o.lower_bound_s > 0);
  }
  return simulated;
}

}  // namespace

TEST_CASE("plan search: a GPipe scenario's one-stage plans run 1F1B, and its pipelined plans say GPipe") {
  // Found by a probe: a pp-1 plan kept the scenario's gpipe and held every micro-batch's activations.
  TrainingScenario sc = small();
  sc.job.plan.schedule = PipelineSchedule::gpipe;
  PlanChoice c = choice_of(sc.job);
  c.pp = 1;
  c.dp = 8;
  const TrainingJob one = apply_choice(sc.job, c);
  CHECK(one.plan.schedule == PipelineSchedule::one_f_one_b);
  CHECK_THAT(plan_text(one), !Catch::Contains("GPipe"));
  c.pp = 2;
  c.dp = 4;
  const TrainingJob two = apply_choice(sc.job, c);
  CHECK(two.plan.schedule == PipelineSchedule::gpipe);
  CHECK_THAT(plan_text(two), Catch::Contains("TP2 PP2 GPipe"));
  CHECK(estimate_memory(one, *sc.topology->gpu).worst().total() < estimate_memory(two, *sc.topology->gpu).worst().total());
}

TEST_CASE("plan search: DP overlap settings apply where only an MoE model's experts reduce gradients across ranks") {
  // A review: at TP 2, dp 1 an MoE model's experts are reduced over the two TP ranks, so
  // overlap_grad_reduce means something there, but the search took it as not applying and ran the
  // scenario's `false` as true. A dense model at the same plan reduces nothing: the settings do not apply.
  TrainingScenario sc = small();
  PlanChoice c = choice_of(sc.job);
  c.tp = 2, c.pp = 1, c.dp = 1, c.cp = 1, c.ep = 1, c.etp = 1, c.zero = 1;
  c.grad_overlap = false;
  c.param_overlap = false;
  TrainingJob moe = sc.job;
  moe.model.moe = MoeSpec{};
  moe.model.moe->experts = 8;
  moe.model.moe->top_k = 2;
  moe.model.moe->expert_ffn_hidden = 1024;
  CHECK_FALSE(apply_choice(moe, c).plan.overlap_grad_reduce);
  CHECK_THAT(plan_key(apply_choice(moe, c)), Catch::Contains(" grad_overlap=0"));
  TrainingJob dense = sc.job;
  dense.model.moe.reset();
  CHECK(apply_choice(dense, c).plan.overlap_grad_reduce);
  CHECK_THAT(plan_key(apply_choice(dense, c)), !Catch::Contains("grad_overlap"));
}

TEST_CASE("plan search: a key shows the pipeline-send setting only where there are pipeline sends") {
  // A probe: a scenario's overlap_p2p went into the key of every plan searched from it, PP 1 included,
  // so one plan read differently by where it came from.
  TrainingScenario sc = small();
  sc.job.plan.overlap_p2p = true;
  PlanChoice c = choice_of(sc.job);
  c.tp = 1, c.pp = 1, c.dp = 4, c.cp = 1, c.ep = 1, c.etp = 1, c.vpp = 1;
  CHECK_THAT(plan_key(apply_choice(sc.job, c)), !Catch::Contains("p2p_overlap"));
  c.pp = 2, c.dp = 2;
  CHECK_THAT(plan_key(apply_choice(sc.job, c)), Catch::Contains(" p2p_overlap=1"));
}

TEST_CASE("plan search: constraints and memory prune before simulating: every plan has an outcome and a reason") {
  const TrainingScenario sc = small();
  SearchOptions opt;
  opt.threads = 2;
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, opt);
  CHECK(r.enumerated == r.outcomes.size());
  CHECK(r.constraint + r.memory + r.simulated == r.enumerated);
  CHECK(r.constraint > 0);
  CHECK(r.simulated > 10);
  bool own = false;
  for (const auto& o : r.outcomes) {
    if (o.status == PlanOutcome::Status::simulated) {
      CHECK(o.step_s > 0);
      CHECK(o.mfu > 0);
      // Whole steps: the steps 1e9 tokens need, rounded up, each step_s long.
      const double tokens_per_step = o.tokens_per_s * o.step_s;
      CHECK(o.time_to_train_s == Approx(std::ceil(1e9 / tokens_per_step) * o.step_s).epsilon(1e-9));
      own |= o.plan.tp == 2 && o.plan.pp == 2 && o.plan.dp == 4 && o.plan.micro == 1 && o.plan.recompute == Recompute::selective && o.plan.vpp == 1;
    } else {
      CHECK_FALSE(r.reason(o).empty());
    }
    if (o.plan.pp * o.plan.vpp > 1 && 32 % (o.plan.pp * o.plan.vpp) != 0) CHECK(o.status == PlanOutcome::Status::constraint);
  }
  CHECK(own);
  // The Pareto front: no simulated plan is both faster and cheaper than one on it.
  const auto front = pareto_front(r);
  REQUIRE_FALSE(front.empty());
  for (std::size_t i : front) {
    for (const auto& o : r.outcomes) {
      if (o.status != PlanOutcome::Status::simulated) continue;
      CHECK_FALSE((o.time_to_train_s < r.outcomes[i].time_to_train_s && o.cost < r.outcomes[i].cost));
    }
  }
}

TEST_CASE("plan search: one thread or two give the same outcomes, and a killed run resumes without losing or repeating a plan") {
  const TrainingScenario sc = small();
  SearchOptions one;
  one.threads = 1;
  const SearchResult a = search_plans(sc.job, *sc.topology, sc.search, one);
  SearchOptions two;
  two.threads = 2;
  const SearchResult b = search_plans(sc.job, *sc.topology, sc.search, two);
  REQUIRE(a.outcomes.size() == b.outcomes.size());
  CHECK(a.own == b.own);
  for (std::size_t i = 0; i < a.outcomes.size(); ++i) {
    CHECK(a.key(a.outcomes[i]) == b.key(b.outcomes[i]));
    CHECK(a.outcomes[i].status == b.outcomes[i].status);
    CHECK(a.outcomes[i].reason == b.outcomes[i].reason);
    CHECK(a.outcomes[i].memory_bytes == b.outcomes[i].memory_bytes);
    CHECK(a.outcomes[i].lower_bound_s == b.outcomes[i].lower_bound_s);
    CHECK(a.outcomes[i].step_s == b.outcomes[i].step_s);
  }
  test::TempDir dir;
  const auto file = dir.path() / "results.jsonl";
  SearchOptions resumable = two;
  resumable.results = file;
  (void)search_plans(sc.job, *sc.topology, sc.search, resumable);
  // As if killed: keep the header, the first half of the results and a torn one.
  std::string header;
  std::vector<std::string> lines;
  {
    std::ifstream in(file);
    std::getline(in, header);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  CHECK_THAT(header, Catch::StartsWith("{\"fingerprint\":"));
  REQUIRE(lines.size() == a.simulated);
  {
    std::ofstream out(file, std::ios::trunc);
    out << header << "\n";
    for (std::size_t i = 0; i < lines.size() / 2; ++i) out << lines[i] << "\n";
    out << lines.back().substr(0, lines.back().size() / 2);
  }
  const SearchResult c = search_plans(sc.job, *sc.topology, sc.search, resumable);
  CHECK(c.resumed == lines.size() / 2);
  REQUIRE(c.outcomes.size() == a.outcomes.size());
  for (std::size_t i = 0; i < a.outcomes.size(); ++i) {
    CHECK(c.key(c.outcomes[i]) == a.key(a.outcomes[i]));
    CHECK(c.outcomes[i].step_s == Approx(a.outcomes[i].step_s).epsilon(1e-12));
  }
  // The file now holds its header and each simulated plan exactly once.
  std::set<std::string> keys;
  std::size_t count = 0;
  {
    std::ifstream in(file);
    std::string first;
    std::getline(in, first);
    CHECK(first == header);
    for (std::string l; std::getline(in, l); ++count) keys.insert(l.substr(0, l.find("\"status\"")));
  }
  CHECK(count == a.simulated);
  CHECK(keys.size() == a.simulated);
  const SearchResult d = search_plans(sc.job, *sc.topology, sc.search, resumable);
  CHECK(d.resumed == a.simulated);
}

TEST_CASE("plan search: vpp all with uneven layers tries every depth at which each chunk holds a layer") {
  // Expectation: Llama 3 8B (32 layers) at pp 3, which does not divide them: with uneven_layers,
  // `vpp: all` enumerates vpp 1 to 10 (3 x 10 chunks of at least one layer), as an explicit list
  // of them would; without uneven_layers pp 3 breaks the constraint whatever the vpp.
  test::TempDir dir;
  const auto file = dir.write("s.yaml", R"(scenario:
  name: uneven
  kind: training
  model: llama3-8b
  topology: {name: two, node: dgx-h100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 64}, {radix: 64}]}}
  parallelism: {tp: 2, pp: 3, dp: 1, sequence_parallel: true}
  batch: {micro: 1, global: 30}
  search: {gpus: [6], tp: [2], pp: [3], vpp: all, micro: [1], recompute: [selective], uneven_layers: true}
)");
  const TrainingScenario sc = load_training_scenario(file);
  SearchOptions opt;
  opt.threads = 1;
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, opt);
  std::set<int> depths;
  for (const auto& o : r.outcomes) {
    if (o.plan.pp == 3) depths.insert(o.plan.vpp);
  }
  CHECK(depths == std::set<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

TEST_CASE("plan search: a plan whose step runs past the simulator's clock is refused with its reason, and the search goes on") {
  // Expectation: at 1 kB/s of HBM every step takes decades; the plans whose steps pass the clock's
  // 146 years are refused one by one (they had ended the whole search with the clock's error).
  TrainingScenario sc = small();
  topology::Topology slow = *sc.topology;
  hardware::HardwareProfile hw = *slow.gpu;
  hw.memory_bandwidth = BytesPerSec(1e3);
  slow.gpu = std::make_shared<const hardware::HardwareProfile>(hw);
  sc.job.global_batch = 128;
  SearchOptions opt;
  opt.threads = 1;
  const SearchResult r = search_plans(sc.job, slow, sc.search, opt);
  int past = 0, simulated = 0;
  for (const auto& o : r.outcomes) {
    if (o.status == PlanOutcome::Status::constraint && o.reason.find("runs past the simulator's clock") != std::string::npos) ++past;
    if (o.status == PlanOutcome::Status::simulated) ++simulated;
  }
  CHECK(past > 0);
  CHECK(simulated > 0);
}

TEST_CASE("plan search: the scenario's micro-batch group is kept where a plan can run it, else Megatron-Core's default") {
  // Expectation: groups of 6 run at pp 2 (6 micro-batches) and pp 4 (12); pp 8 (24 micro-batches)
  // needs groups of at least 8, so it takes the default of pp; at pp 2 with micro 2 (3 micro-batches)
  // neither 6 nor the default group of 2 runs, and the plan is refused with check_job's reason.
  test::TempDir dir;
  const auto file = dir.write("s.yaml", R"(scenario:
  name: groups
  kind: training
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {tp: 1, pp: 4, vpp: 2, dp: 2, microbatch_group: 6}
  batch: {micro: 1, global: 24}
  search: {gpus: [8], tp: [1], pp: [2, 4, 8], vpp: [2], micro: [1, 2], recompute: [full]}
)");
  const TrainingScenario sc = load_training_scenario(file);
  SearchOptions opt;
  opt.threads = 1;
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, opt);
  std::map<std::pair<int, int>, std::string> keys;  // (pp, micro) -> key
  for (const auto& o : r.outcomes) {
    keys[{o.plan.pp, o.plan.micro}] = r.key(o);
    if (o.plan.pp == 2 && o.plan.micro == 2) {
      CHECK(o.status == PlanOutcome::Status::constraint);
      CHECK_THAT(o.reason, Catch::Contains("multiple of pp") && Catch::Contains("the scenario's microbatch_group 6 does not run with this plan's 3 micro-batches"));
    }
  }
  REQUIRE(keys.size() == 6);
  CHECK_THAT(keys.at({2, 1}), Catch::Contains("mb_group=6"));
  CHECK_THAT(keys.at({4, 1}), Catch::Contains("mb_group=6"));
  CHECK_THAT(keys.at({8, 1}), !Catch::Contains("mb_group"));
  CHECK_THAT(keys.at({4, 2}), Catch::Contains("mb_group=6"));  // 6 micro-batches: one group
}

TEST_CASE("plan search: on a fabric that hashes flows the bound counts data-parallel traffic by what the NICs must carry, and holds") {
  // Expectation: Llama 3 8B on 64 GPUs of the shipped 3-tier RoCE Clos, gradients reduced after the
  // backward pass. A collective timed alone there is no lower bound: the step's own flows hash onto
  // other paths (its ZeRO-0 step came out 0.7% under a bound that counted the reduction so). What
  // each node's NICs must carry is one whatever the hash: the refined bound now counts the reduction
  // (it had left it out, and stayed at the compute's bound), and still holds.
  test::TempDir dir;
  const auto file = dir.write("roce.yaml", R"(scenario:
  name: roce
  kind: training
  model: llama3-8b
  topology: h100-clos-16k
  parallelism: {tp: 8, pp: 2, dp: 4, sequence_parallel: true, zero_stage: 1, order: tp-pp-dp-cp-ep, overlap_grad_reduce: false}
  batch: {micro: 1, global: 64, seq_len: 4096}
  recompute: selective
  precision: bf16
  search: {gpus: [64], tp: [8], pp: [2], vpp: [1], micro: [1], zero_stage: [0, 1], recompute: [selective], dp_overlap: [false], order: [tp-pp-dp-cp-ep]}
)");
  const TrainingScenario sc = load_training_scenario(file);
  CHECK(simulated_above_bound(sc, 1, 1) == 2);
  SearchOptions coarse, refined;
  refined.bound = true;
  refined.keep = 100;  // every plan refined and simulated
  const SearchResult a = search_plans(sc.job, *sc.topology, sc.search, coarse), b = search_plans(sc.job, *sc.topology, sc.search, refined);
  REQUIRE(a.outcomes.size() == b.outcomes.size());
  int refined_plans = 0;
  for (std::size_t i = 0; i < a.outcomes.size(); ++i) {
    // (The scenario's own plan is simulated whatever its bound, which is not refined.)
    if (b.outcomes[i].status != PlanOutcome::Status::simulated || i == b.own) continue;
    ++refined_plans;
    INFO(b.text(b.outcomes[i]) << ": coarse bound " << a.outcomes[i].lower_bound_s << " s, refined " << b.outcomes[i].lower_bound_s << " s");
    CHECK(b.outcomes[i].lower_bound_s > a.outcomes[i].lower_bound_s * 1.001);  // the reduction counts
    CHECK(b.outcomes[i].step_s >= b.outcomes[i].lower_bound_s);
  }
  CHECK(refined_plans == 1);  // ZeRO 0 (ZeRO 1 is the scenario's)
}

TEST_CASE("plan search: branch and bound finds the same best plans as the exhaustive search, for any thread count") {
  const TrainingScenario sc = small();
  SearchOptions all;
  all.threads = 2;
  const SearchResult full = search_plans(sc.job, *sc.topology, sc.search, all);
  SearchOptions bb = all;
  bb.bound = true;
  bb.keep = 5;
  const SearchResult pruned = search_plans(sc.job, *sc.topology, sc.search, bb);
  bb.threads = 1;
  const SearchResult pruned1 = search_plans(sc.job, *sc.topology, sc.search, bb);
  CHECK(top(pruned, 5) == top(full, 5));
  CHECK(pruned.simulated + pruned.bound == full.simulated);
  REQUIRE(pruned.bound > 0);  // the checks below need pruned plans
  {
    // Resumed from the exhaustive search's results, the bounded search is the fresh one: a pruned
    // plan carries no step, as it would not have one without the file.
    test::TempDir dir;
    SearchOptions everything = all;
    everything.results = dir.path() / "results.jsonl";
    (void)search_plans(sc.job, *sc.topology, sc.search, everything);
    SearchOptions resumed = bb;
    resumed.results = everything.results;
    const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, resumed);
    REQUIRE(r.outcomes.size() == pruned.outcomes.size());
    for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
      CHECK(r.outcomes[i].status == pruned.outcomes[i].status);
      CHECK(r.outcomes[i].step_s == pruned.outcomes[i].step_s);
      CHECK(r.outcomes[i].mfu == pruned.outcomes[i].mfu);
      CHECK(r.outcomes[i].time_to_train_s == pruned.outcomes[i].time_to_train_s);
    }
  }
  for (const auto& o : full.outcomes) {
    // The bound holds: no simulated step beats its plan's lower bound.
    if (o.status == PlanOutcome::Status::simulated) CHECK(o.step_s >= o.lower_bound_s);
  }
  {
    // Likewise with unfused gradient accumulation, which the bound counts in every backward pass.
    TrainingScenario unfused = sc;
    unfused.job.plan.grad_accumulation_fusion = false;
    const SearchResult u = search_plans(unfused.job, *unfused.topology, unfused.search, all);
    for (const auto& o : u.outcomes) {
      if (o.status == PlanOutcome::Status::simulated) CHECK(o.step_s >= o.lower_bound_s);
    }
  }
  REQUIRE(pruned1.outcomes.size() == pruned.outcomes.size());
  for (std::size_t i = 0; i < pruned.outcomes.size(); ++i) CHECK(pruned1.outcomes[i].status == pruned.outcomes[i].status);
  SearchOptions sharded = bb;
  sharded.shards = 2;
  CHECK_THROWS_WITH(search_plans(sc.job, *sc.topology, sc.search, sharded), Catch::Contains("one process"));
}

TEST_CASE("plan search: every divisor, every rank order, TP and DP overlap: settings that do not apply make no duplicates, and the data-parallel bound holds", "[long]") {
  test::TempDir dir;
  const auto file = dir.write("s.yaml", R"(scenario:
  name: wide
  kind: training
  model: llama3-8b
  topology: {name: two, node: dgx-h100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 64}, {radix: 64}]}}
  parallelism: {tp: 2, pp: 2, dp: 4, sequence_parallel: true}
  batch: {micro: 1, global: 16}
  train_tokens: 1e9
  search: {tp: [1, 2, 4], pp: [1, 2], vpp: all, micro: all, zero_stage: [1, 3], recompute: [selective], sequence_parallel: [false, true],
           tp_overlap: [false, true], dp_overlap: [true, false], order: all}
)");
  const TrainingScenario sc = load_training_scenario(file);
  CHECK(sc.search.every_vpp);
  CHECK(sc.search.every_micro);
  CHECK(sc.search.orders.size() == 120);
  SearchOptions all;
  all.threads = 2;
  const SearchResult full = search_plans(sc.job, *sc.topology, sc.search, all);
  std::set<std::string> keys;
  int tp1 = 0, orders_tp2_pp2_dp4 = 0;
  for (const auto& o : full.outcomes) {
    CHECK(keys.insert(full.key(o)).second);  // no two outcomes are the same plan
    const TrainingJob j = full.job(o);
    if (o.plan.tp == 1) {
      ++tp1;
      CHECK_FALSE(j.plan.sequence_parallel);
      CHECK_FALSE(j.plan.tp_overlap);
    }
    if (o.plan.tp == 2 && o.plan.pp == 2 && o.plan.micro == 1 && o.plan.zero == 1 && o.plan.vpp == 1 && !o.plan.sequence_parallel && o.plan.grad_overlap) ++orders_tp2_pp2_dp4;
    if (o.status == PlanOutcome::Status::simulated) CHECK(o.step_s >= o.lower_bound_s);
    // FSDP reduces and gathers around every pass: the DP overlap settings do not apply to it.
    if (o.plan.zero == 3) CHECK((o.plan.grad_overlap && o.plan.param_overlap));
  }
  // tp, dp and pp all above 1 on 16 GPUs: every order of the three is a distinct placement.
  CHECK(orders_tp2_pp2_dp4 == 6);
  // At TP 1 sequence parallelism and TP overlap do not apply: one plan per (pp, vpp, micro, zero, DP overlap, order).
  CHECK(tp1 > 0);
  // vpp: all gave every divisor of layers / pp (32 layers, pp 2: 1, 2, 4, 8, 16); micro: all every divisor of batch / dp.
  std::set<int> vpps, micros;
  for (const auto& o : full.outcomes) {
    if (o.plan.pp == 2) vpps.insert(o.plan.vpp);
    if (o.plan.tp == 1 && o.plan.pp == 1) micros.insert(o.plan.micro);
  }
  CHECK(vpps == std::set<int>{1, 2, 4, 8, 16});
  CHECK(micros == std::set<int>{1});  // dp 16, batch 16
  // Branch and bound with the data-parallel bound: the same top 5, and no simulated step below its bound.
  SearchOptions bb = all;
  bb.bound = true;
  bb.keep = 5;
  const SearchResult pruned = search_plans(sc.job, *sc.topology, sc.search, bb);
  CHECK(top(pruned, 5) == top(full, 5));
  CHECK(pruned.bound > 0);
  for (const auto& o : pruned.outcomes) {
    if (o.status == PlanOutcome::Status::simulated) CHECK(o.step_s >= o.lower_bound_s);
  }
  // The refined bound is at least the first one, and still below every simulated step of the full search.
  for (std::size_t i = 0; i < full.outcomes.size(); ++i) {
    if (pruned.outcomes[i].status == PlanOutcome::Status::simulated) CHECK(pruned.outcomes[i].lower_bound_s >= full.outcomes[i].lower_bound_s);
    if (full.outcomes[i].status == PlanOutcome::Status::simulated) CHECK(full.outcomes[i].step_s >= pruned.outcomes[i].lower_bound_s * (pruned.outcomes[i].status == PlanOutcome::Status::simulated ? 1.0 : 0.0));
  }
}

TEST_CASE("plan search: where nothing is sharded every ZeRO stage is one plan, the scenario's") {
  // A probe: ZeRO 1 and 2 at DP 1 were two rows with one step time. On 8 GPUs TP 8 leaves DP 1 (one
  // plan); TP 4 leaves DP 2, where the stages differ (two plans).
  test::TempDir dir;
  const auto zeros_by_dp = [&](int scenario_zero) {
    const auto file = dir.write(fmt::format("z{}.yaml", scenario_zero), fmt::format(R"(scenario:
  name: zero
  kind: training
  model: llama3-8b
  topology: {{name: one, node: dgx-h100, nodes: 1}}
  parallelism: {{tp: 8, pp: 1, dp: 1, sequence_parallel: true, zero_stage: {}}}
  batch: {{micro: 1, global: 8}}
  search: {{tp: [4, 8], pp: [1], micro: [1], zero_stage: [2, 1], recompute: [selective]}}
)",
                                                                                   scenario_zero));
    const TrainingScenario sc = load_training_scenario(file);
    const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, SearchOptions{});
    std::map<int, std::multiset<int>> zeros;
    for (const auto& o : r.outcomes) {
      if (o.plan.vpp == 1) zeros[o.plan.dp].insert(o.plan.zero);
    }
    return zeros;
  };
  // The scenario's ZeRO 1 stands for both at DP 1.
  auto one = zeros_by_dp(1);
  CHECK(one[1] == std::multiset<int>{1});
  CHECK(one[2] == std::multiset<int>{1, 2});
  // A scenario of ZeRO 2 is its own plan's stage, not a second row beside ZeRO 1's.
  auto two = zeros_by_dp(2);
  CHECK(two[1] == std::multiset<int>{2});
  CHECK(two[2] == std::multiset<int>{1, 2});
  // Not listed, the scenario's stage still stands for them: its own plan is always in the space.
  auto three = zeros_by_dp(3);
  CHECK(three[1] == std::multiset<int>{3});
}

TEST_CASE("plan search: under FSDP the data-parallel bound holds for an MoE model with a dense first layer") {
  // A dense first layer and MoE layers after it gather different weights: the bound's per-pass
  // gathers must follow each pass's own order of layers (forward first to last, backward last to
  // first) and never exceed the simulated step.
  test::TempDir dir;
  const auto file = dir.write("moe.yaml", R"(scenario:
  name: moe-fsdp
  kind: training
  model: {name: small-moe, layers: 8, hidden: 2048, heads: 16, kv_heads: 8, head_dim: 128, ffn_hidden: 16384,
          activation: swiglu, vocab: 32000, seq_len: 4096,
          moe: {experts: 8, top_k: 2, expert_ffn_hidden: 2048, dense_layers: 1}}
  topology: {name: two, node: dgx-h100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 64}, {radix: 64}]}}
  parallelism: {tp: 1, pp: 2, dp: 8, ep: 2, zero_stage: 3}
  batch: {micro: 1, global: 32}
  search: {tp: [1, 2], pp: [1, 2], vpp: all, micro: [1], ep: [1, 2], zero_stage: [3], recompute: [none]}
)");
  CHECK(simulated_above_bound(load_training_scenario(file), 2, 3) >= 3);
}

TEST_CASE("plan search bills every GPU of the nodes a plan runs on, and keys a plan no dp fills by the GPUs asked for") {
  // Expectation: offerings rent whole nodes, so 12 GPUs of 8-GPU DGX H100 nodes pay for 16, as
  // `clustersim cost` bills them (a review found plan search and cost disagreeing); GPU-hours stay
  // the plan's own.
  test::TempDir dir;
  const auto file = dir.write("twelve.yaml", R"(scenario:
  name: twelve
  kind: training
  model: llama3-8b
  topology: {name: h100-two, node: dgx-h100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 64}, {radix: 64}]}}
  parallelism: {tp: 4, pp: 1, dp: 3, sequence_parallel: true}
  batch: {micro: 1, global: 48}
  train_tokens: 1e9
  search: {gpus: [8, 12, 16], tp: [4], pp: [1, 3], micro: [1], recompute: [selective]}
  cost:
    sheet: public-clouds-2026-11
    offerings: [aws-p5-on-demand]
    checkpoint: {write_bandwidth: 5GB/s}
)");
  const TrainingScenario sc = load_training_scenario(file);
  SearchOptions options;
  options.threads = 1;
  options.price_per_gpu_hour = sc.price_per_gpu_hour;
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, options);
  int seen = 0, unfilled = 0;
  for (const auto& o : r.outcomes) {
    INFO(r.key(o));
    if (o.plan.gpus % (o.plan.tp * o.plan.pp) != 0) {
      // No dp fills these GPUs: the GPUs asked for and dp "-", not a rounded-down dp (a probe's
      // "gpus=255 ... dp=51 of_gpus=256").
      CHECK(r.key(o).rfind(fmt::format("gpus={} ", o.plan.gpus), 0) == 0);
      CHECK_THAT(r.key(o), Catch::Contains(" dp=- "));
      CHECK_THAT(r.text(o), Catch::Contains(" DP- "));
      ++unfilled;
    }
    if (o.status != PlanOutcome::Status::simulated) continue;
    const int billed = o.plan.gpus == 12 ? 16 : o.plan.gpus;
    CHECK(o.cost == Approx(o.time_to_train_s / 3600.0 * billed * sc.price_per_gpu_hour).epsilon(1e-12));
    CHECK(o.gpu_hours == Approx(o.time_to_train_s / 3600.0 * o.plan.gpus).epsilon(1e-12));
    seen += o.plan.gpus == 12 ? 1 : 0;
  }
  CHECK(seen >= 1);
  CHECK(unfilled > 0);
}

TEST_CASE("plan search over GPU types: each topology at its own price, its own top K under the bound, and fp8 only where the GPU has it") {
  test::TempDir dir;
  const auto file = dir.write("types.yaml", R"(scenario:
  name: types
  kind: training
  model: llama3-8b
  topology: {name: h100-two, node: dgx-h100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 64}, {radix: 64}]}}
  parallelism: {tp: 2, pp: 2, dp: 4, sequence_parallel: true}
  batch: {micro: 1, global: 32}
  train_tokens: 1e9
  search:
    gpus: [8, 16]
    tp: [1, 2, 4, 8]
    pp: [1, 2, 4]
    micro: [1, 2]
    recompute: [none, selective]
    topology:
      - {name: a100-two, node: dgx-a100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 40}, {radix: 40}]}}
      - {name: h100-two, node: dgx-h100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 64}, {radix: 64}]}}
    cost_sheet: public-clouds-2026-11
)");
  const TrainingScenario sc = load_training_scenario(file);
  REQUIRE(sc.search.systems.size() == 1);  // the scenario's own topology, listed again, is tried once
  CHECK(sc.price_per_gpu_hour > 0);
  CHECK(sc.search.systems[0].price_per_gpu_hour > 0);
  CHECK(sc.search.systems[0].price_per_gpu_hour < sc.price_per_gpu_hour);  // A100 rents for less than H100
  SearchOptions all;
  all.threads = 2;
  all.price_per_gpu_hour = sc.price_per_gpu_hour;
  const SearchResult full = search_plans(sc.job, *sc.topology, sc.search, all);
  REQUIRE(full.systems.size() == 2);
  std::set<std::string> keys;
  std::map<std::string, double> step;  // by key
  for (const auto& o : full.outcomes) {
    CHECK(keys.insert(full.key(o)).second);
    CHECK((full.key(o).find("topology=a100-two") != std::string::npos) == (o.plan.system == 1));
    CHECK(full.text(o).find(o.plan.system == 1 ? " on a100-two" : " on h100-two") != std::string::npos);
    if (o.status != PlanOutcome::Status::simulated) continue;
    const double price = full.systems[static_cast<std::size_t>(o.plan.system)].price_per_gpu_hour;
    CHECK(o.cost == Approx(o.gpu_hours * price).epsilon(1e-12));
    step[full.key(o)] = o.step_s;
  }
  // The same plan runs faster on H100 than on A100.
  int compared = 0;
  for (const auto& [k, s] : step) {
    if (k.find(" topology=") != std::string::npos) continue;
    const auto a100 = step.find(k + " topology=a100-two");
    if (a100 == step.end()) continue;
    CHECK(s < a100->second);
    ++compared;
  }
  CHECK(compared > 5);
  // Branch and bound keeps each topology's top 3 exact.
  SearchOptions bb = all;
  bb.bound = true;
  bb.keep = 3;
  const SearchResult pruned = search_plans(sc.job, *sc.topology, sc.search, bb);
  CHECK(top(pruned, 3, 0) == top(full, 3, 0));
  CHECK(top(pruned, 3, 1) == top(full, 3, 1));
  CHECK(pruned.bound > 0);
  // fp8: a constraint on A100, which has no fp8 tensor cores.
  TrainingJob fp8 = sc.job;
  fp8.precision = hardware::Dtype::fp8;
  const SearchResult f = search_plans(fp8, *sc.topology, sc.search, all);
  for (const auto& o : f.outcomes) {
    if (o.plan.system == 1) {
      CHECK(o.status == PlanOutcome::Status::constraint);
      CHECK_THAT(f.reason(o), Catch::Contains("no fp8 tensor cores") || Catch::Contains("divide") || Catch::Contains("multiple"));
    }
  }
}

TEST_CASE("plan search: degrees whose product overflows 32 bits are constraints with the true numbers, never a crash") {
  // tp x pp = 8 x 2^29 = 2^32 wrapped to 0 in int (a division by zero), and 2^31 - 1 x 16 to -16.
  TrainingScenario sc = small();
  sc.search.gpus = {8, 16};
  sc.search.tp = {2, 8, 2147483647};
  sc.search.pp = {1, 16, 536870912};
  SearchOptions opt;
  opt.threads = 2;
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, opt);
  int huge = 0;
  for (const auto& o : r.outcomes) {
    if (o.plan.tp * std::int64_t{o.plan.pp} * o.plan.cp <= o.plan.gpus) continue;
    ++huge;
    INFO(r.text(o));
    CHECK(o.status == PlanOutcome::Status::constraint);
    // Expectation: "tp x pp x cp = 8 x 536870912 x 1 does not divide the 8 GPUs (it is more)", each factor as given.
    CHECK(o.reason == fmt::format("tp x pp x cp = {} x {} x {} does not divide the {} GPUs (it is more)", o.plan.tp, o.plan.pp, o.plan.cp, o.plan.gpus));
    // No data-parallel degree fills them: the plan's text says DP-, not a rounded-down DP0.
    CHECK_THAT(r.text(o), Catch::Contains(" DP- "));
  }
  CHECK(huge > 0);
  CHECK(r.simulated > 0);  // tp 2, pp 1 still runs
  sc.search.pp = {0};
  CHECK_THROWS_WITH(search_plans(sc.job, *sc.topology, sc.search, opt), Catch::Contains("at least 1"));
}

namespace {
// A small MoE model's training scenario on one DGX H100 (8 experts, top 2), with the parallelism
// given (sequence parallelism on) and `search` after "search:".
std::string small_moe_scenario(const std::string& name, const std::string& parallelism, const std::string& search) {
  return "scenario:\n  name: " + name + "\n  kind: training\n"
         "  model: {name: small-moe, layers: 8, hidden: 2048, heads: 16, kv_heads: 8, head_dim: 128, ffn_hidden: 16384,\n"
         "          activation: swiglu, vocab: 32000, seq_len: 4096, moe: {experts: 8, top_k: 2, expert_ffn_hidden: 2048}}\n"
         "  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}\n"
         "  parallelism: {" + parallelism + ", sequence_parallel: true}\n  batch: {micro: 1, global: 16}\n  recompute: none\n"
         "  search:" + search;
}
}  // namespace

TEST_CASE("plan search: expert TP is searched for MoE models (whole experts and each plan's TP by default), and not for dense ones") {
  test::TempDir dir;
  const auto moe = [&](const std::string& search) {
    return dir.write("moe.yaml", small_moe_scenario("moe-etp", "tp: 2, dp: 4, ep: 2",
                                                    "\n    tp: [1, 2, 4]\n    pp: [1]\n    vpp: [1]\n    ep: [1, 2]\n    micro: [1]\n    recompute: [none]\n" + search));
  };
  const auto etps_by_tp = [](const SearchResult& r) {
    std::map<int, std::set<int>> out;  // tp -> etp values enumerated (at ep 2)
    std::set<std::string> keys;
    for (const auto& o : r.outcomes) {
      if (o.plan.ep == 2) out[o.plan.tp].insert(o.plan.etp);
      CHECK(keys.insert(r.key(o)).second);  // no plan twice
    }
    return out;
  };
  SearchOptions one;
  one.threads = 1;
  // Default: etp 1 and etp = tp; at TP 1 they are one plan.
  {
    const TrainingScenario sc = load_training_scenario(moe(""));
    const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, one);
    const auto e = etps_by_tp(r);
    CHECK(e.at(1) == std::set<int>{1});
    CHECK(e.at(2) == std::set<int>{1, 2});
    CHECK(e.at(4) == std::set<int>{1, 4});
    // Expert TP changes the step (the experts' GEMMs split, their all-to-all carries etp x the tokens),
    // and both layouts are simulated with their own keys and texts.
    const auto find = [&](int tp, int etp) -> const PlanOutcome& {
      for (const auto& o : r.outcomes) {
        if (o.plan.tp == tp && o.plan.ep == 2 && o.plan.etp == etp) return o;
      }
      FAIL("no plan TP" << tp << " EP2 ETP" << etp);
      return r.outcomes.front();
    };
    const PlanOutcome& whole = find(2, 1);
    const PlanOutcome& split = find(2, 2);
    REQUIRE(whole.status == PlanOutcome::Status::simulated);
    REQUIRE(split.status == PlanOutcome::Status::simulated);
    CHECK(whole.step_s != split.step_s);
    CHECK_THAT(r.key(split), Catch::Contains(" etp=2"));
    CHECK_THAT(r.text(split), Catch::Contains("ETP2"));
    CHECK_THAT(r.key(whole), !Catch::Contains("etp="));
    // The branch and bound's lower bound holds for either layout.
    SearchOptions bb;
    bb.threads = 1;
    bb.bound = true;
    bb.keep = 2;
    const SearchResult b = search_plans(sc.job, *sc.topology, sc.search, bb);
    for (const auto& o : b.outcomes) {
      if (o.status != PlanOutcome::Status::simulated) continue;
      INFO(b.text(o));
      CHECK(o.lower_bound_s > 0);
      CHECK(o.step_s >= o.lower_bound_s * (1 - 1e-9));  // equal up to rounding where nothing overlaps
    }
  }
  // An explicit list, with `tp` for each plan's TP; values that do not divide are constraints.
  {
    const TrainingScenario sc = load_training_scenario(moe("    etp: [tp, 4]\n"));
    const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, one);
    const auto e = etps_by_tp(r);
    CHECK(e.at(1) == std::set<int>{1, 4});
    CHECK(e.at(2) == std::set<int>{1, 2, 4});  // etp 1: the scenario's own plan, added
    CHECK(e.at(4) == std::set<int>{4});
    // The scenario's own plan (etp 1) is in the space although the list leaves it out.
    REQUIRE(r.own < r.outcomes.size());
    CHECK(r.outcomes[r.own].plan.etp == 1);
  }
  // The scenario's own etp (here 2 at TP 4) joins the default list, and is tried at every TP.
  {
    auto own = dir.write("own.yaml", "scenario:\n  name: moe-own\n  kind: training\n"
                                     "  model: {name: small-moe, layers: 8, hidden: 2048, heads: 16, kv_heads: 8, head_dim: 128, ffn_hidden: 16384,\n"
                                     "          activation: swiglu, vocab: 32000, seq_len: 4096, moe: {experts: 8, top_k: 2, expert_ffn_hidden: 2048}}\n"
                                     "  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}\n"
                                     "  parallelism: {tp: 4, dp: 2, ep: 2, etp: 2, sequence_parallel: true}\n  batch: {micro: 1, global: 16}\n"
                                     "  recompute: none\n  search:\n    tp: [2, 4, 8]\n    pp: [1]\n    vpp: [1]\n    ep: [1, 2]\n    micro: [1]\n"
                                     "    recompute: [none]\n");
    const TrainingScenario sc = load_training_scenario(own);
    const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, one);
    const auto e = etps_by_tp(r);
    CHECK(e.at(2) == std::set<int>{1, 2});
    CHECK(e.at(4) == std::set<int>{1, 2, 4});
    CHECK(e.at(8) == std::set<int>{1, 2, 8});
    REQUIRE(r.own < r.enumerated);
    CHECK(r.outcomes[r.own].plan.etp == 2);
    CHECK(r.outcomes[r.own].plan.tp == 4);
    // Huge degrees: expert TP following a TP of 2^31 - 1 must not overflow the expert-data-parallel
    // size (etp x ep) before the constraints reject the plan.
    SearchSpace huge = sc.search;
    huge.tp = {2, 2147483647};
    const SearchResult h = search_plans(sc.job, *sc.topology, huge, one);
    int rejected = 0;
    for (const auto& o : h.outcomes) {
      if (o.plan.tp != 2147483647) continue;
      ++rejected;
      CHECK(o.status == PlanOutcome::Status::constraint);
      CHECK(!h.text(o).empty());
    }
    CHECK(rejected > 0);
  }
  CHECK_THAT(test::input_error([&] { load_training_scenario(moe("    etp: [0]\n")); }),
             Catch::Contains("field 'scenario.search.etp[0]': expected an integer from 1 to 8") && Catch::Contains("or tp") && Catch::Contains("found '0'"));
  CHECK_THAT(test::input_error([&] { load_training_scenario(moe("    etp: [ep]\n")); }), Catch::Contains("field 'scenario.search.etp[0]'"));
  // A dense model: expert TP does not apply, so a list of it makes no more plans.
  {
    const auto dense = dir.write("dense.yaml", R"(scenario:
  name: dense
  kind: training
  model: llama3-8b
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {tp: 2, dp: 4}
  batch: {micro: 1, global: 16}
  recompute: none
  search: {tp: [1, 2], pp: [1], vpp: [1], micro: [1], recompute: [none], etp: [1, 2, tp]}
)");
    const TrainingScenario sc = load_training_scenario(dense);
    const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, one);
    CHECK(r.outcomes.size() == 2);
    for (const auto& o : r.outcomes) CHECK(o.plan.etp == 1);
  }
}

TEST_CASE("plan search: MoE rank orders that place every rank alike in both mappings are one plan") {
  // With etp 1, moving ep past tp changes neither the attention's mapping (no ep there) nor the
  // experts' (etp 1 in tp's place): one plan, not two with the same step (a probe found 1,184 of
  // 6,008 plans of a Mixtral search duplicated this way). With etp 2 the experts' mapping differs.
  test::TempDir dir;
  const auto moe = [&](const std::string& etp) {
    return dir.write("moe.yaml", small_moe_scenario("moe-orders", "tp: 2, dp: 4, ep: 4, etp: " + etp,
                                                    " {tp: [2], pp: [1], vpp: [1], ep: [4], etp: [" + etp +
                                                        "], micro: [1], recompute: [none], order: [tp-cp-ep-dp-pp, ep-tp-cp-dp-pp]}\n"));
  };
  SearchOptions one;
  one.threads = 1;
  const TrainingScenario whole = load_training_scenario(moe("1"));
  CHECK(search_plans(whole.job, *whole.topology, whole.search, one).outcomes.size() == 1);
  const TrainingScenario split = load_training_scenario(moe("2"));
  CHECK(search_plans(split.job, *split.topology, split.search, one).outcomes.size() == 2);
}

TEST_CASE("plan search: a scenario's search values are bounded by what they divide, with the file, line and field") {
  test::TempDir dir;
  const auto scenario = [&](const std::string& search) {
    return dir.write("s.yaml", "scenario:\n  name: s\n  kind: training\n  model: llama3-8b\n"
                               "  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}\n"
                               "  parallelism: {tp: 2, dp: 4}\n  batch: {micro: 1, global: 64}\n  search:\n" + search);
  };
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario("    pp: [1, 536870912]\n")); }),
             Catch::Contains("s.yaml:9:") && Catch::Contains("field 'scenario.search.pp[1]': expected an integer from 1 to 8") && Catch::Contains("found '536870912'"));
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario("    tp: [2147483647]\n")); }),
             Catch::Contains("field 'scenario.search.tp[0]': expected an integer from 1 to 8"));
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario("    micro: [1000000]\n")); }),
             Catch::Contains("field 'scenario.search.micro[0]': expected an integer from 1 to 64"));
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario("    vpp: [33]\n")); }),
             Catch::Contains("field 'scenario.search.vpp[0]': expected an integer from 1 to 32"));
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario("    gpus: [16]\n")); }),
             Catch::Contains("field 'scenario.search.gpus[0]': expected an integer from 1 to 8"));
  // The bound of a degree is the largest GPU count searched.
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario("    gpus: [4]\n    cp: [8]\n")); }),
             Catch::Contains("field 'scenario.search.cp[0]': expected an integer from 1 to 4"));
  CHECK(load_training_scenario(scenario("    tp: [8]\n    pp: [8]\n    micro: [64]\n")).search.pp == std::vector<int>{8});
}

TEST_CASE("plan search: the results file is rewritten through a unique temporary, and a directory is refused without leaving one") {
  const TrainingScenario sc = small();
  test::TempDir dir;
  SearchOptions opt;
  opt.threads = 2;
  // Another file at the name a fixed temporary would take is neither truncated nor renamed away.
  dir.write("r.jsonl.tmp", "someone else's\n");
  opt.results = dir.path() / "r.jsonl";
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, opt);
  std::ifstream other(dir.path() / "r.jsonl.tmp");
  std::string text;
  std::getline(other, text);
  CHECK(text == "someone else's");
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{"r.jsonl", "r.jsonl.tmp"});  // no temporary left behind
  // A directory: refused before anything is written beside it.
  std::filesystem::create_directory(dir.path() / "d");
  opt.results = dir.path() / "d";
  CHECK_THROWS_WITH(search_plans(sc.job, *sc.topology, sc.search, opt), Catch::Contains("is a directory"));
  names.clear();
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{"d", "r.jsonl", "r.jsonl.tmp"});
  CHECK(std::filesystem::is_empty(dir.path() / "d"));
}

TEST_CASE("plan search: a results file is read back only for the inputs it was simulated for, and refused otherwise") {
  const TrainingScenario sc = small();
  test::TempDir dir;
  SearchOptions opt;
  opt.threads = 2;
  opt.results = dir.path() / "r.jsonl";
  const SearchResult bf16 = search_plans(sc.job, *sc.topology, sc.search, opt);
  const auto refusal = [&](const TrainingJob& job, const topology::Topology& topo, const SearchSpace& space) {
    return test::input_error([&] { (void)search_plans(job, topo, space, opt); });
  };
  // Another precision: every plan's step changes, so the bf16 steps must not be read back as fp8's.
  TrainingJob fp8 = sc.job;
  fp8.precision = hardware::Dtype::fp8;
  const std::string where = (dir.path() / "r.jsonl").string() + ":1: ";
  CHECK_THAT(refusal(fp8, *sc.topology, sc.search),
             Catch::StartsWith(where + "these results were simulated for other inputs than this search's (") &&
                 Catch::Contains("precision: \"bf16\" in the file, \"fp8\" now") && Catch::Contains("remove the file, or give another --results"));
  // Another batch, model or tokens to train.
  TrainingJob batch = sc.job;
  batch.global_batch = 64;
  CHECK_THAT(refusal(batch, *sc.topology, sc.search), Catch::Contains("global_batch: 32 in the file, 64 now"));
  TrainingJob model = sc.job;
  model.model.seq_len = 4096;
  CHECK_THAT(refusal(model, *sc.topology, sc.search), Catch::Contains("model.seq_len: 8192 in the file, 4096 now"));
  TrainingJob tokens = sc.job;
  tokens.token_budget = 2e9;
  CHECK_THAT(refusal(tokens, *sc.topology, sc.search), Catch::Contains("train_tokens"));
  // The same name on other hardware: the digest of the system differs.
  const topology::Topology a100 = test::topology_from_text(
      "topology: {name: two, node: dgx-a100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 40}, {radix: 40}]}}");
  CHECK_THAT(refusal(sc.job, a100, sc.search), Catch::Contains("systems.0.digest") && Catch::Contains("systems.0.gpu"));
  // The file was kept as it was, and still resumes its own inputs, whatever the space's lists.
  SearchSpace fewer = sc.search;
  fewer.tp = {2};
  const SearchResult again = search_plans(sc.job, *sc.topology, fewer, opt);
  CHECK(again.resumed == again.simulated);
  CHECK(again.resumed > 0);
  // Results of another build (its sources' digest differs, even under the same version number).
  {
    std::ifstream in(dir.path() / "r.jsonl");
    std::string header, rest, line;
    std::getline(in, header);
    while (std::getline(in, line)) rest += line + "\n";
    nlohmann::json h = nlohmann::json::parse(header);
    const std::string mine = h["inputs"]["sources"].get<std::string>();
    CHECK(mine.size() == 16);
    h["inputs"]["sources"] = "0123456789abcdef";
    dir.write("other-build.jsonl", h.dump() + "\n" + rest);
    SearchOptions other = opt;
    other.results = dir.path() / "other-build.jsonl";
    CHECK_THAT(test::input_error([&] { (void)search_plans(sc.job, *sc.topology, sc.search, other); }),
               Catch::Contains("sources: \"0123456789abcdef\" in the file, \"" + mine + "\" now"));
    // A system the search has and the file lacks (added to search.topology since) is named by its
    // index: a probe's ended in the JSON library's "array index '-' (2) is out of range".
    h["inputs"]["sources"] = mine;
    h["inputs"]["systems"] = nlohmann::json::array();
    dir.write("fewer-systems.jsonl", h.dump() + "\n" + rest);
    other.results = dir.path() / "fewer-systems.jsonl";
    CHECK_THAT(test::input_error([&] { (void)search_plans(sc.job, *sc.topology, sc.search, other); }),
               Catch::Contains("systems.0: absent in the file, {\"digest\":"));
  }
  // A file without the header (an earlier clustersim's) is refused, not overwritten.
  dir.write("old.jsonl", "{\"key\": \"gpus=16 tp=2\", \"status\": \"simulated\", \"step_s\": 1}\n");
  opt.results = dir.path() / "old.jsonl";
  CHECK_THAT(refusal(sc.job, *sc.topology, sc.search), Catch::Contains("old.jsonl:1: expected the header of a plan results file"));
  std::ifstream old(dir.path() / "old.jsonl");
  std::string line;
  std::getline(old, line);
  CHECK_THAT(line, Catch::Contains("gpus=16 tp=2"));
}

TEST_CASE("plan search: a topology name used twice is the same system tried once, or refused naming both places, never dropped") {
  test::TempDir dir;
  const auto scenario = [&](const std::string& topologies) {
    return dir.write("s.yaml", one_dgx_h100_scenario("    cost_sheet: public-clouds-2026-11\n    topology:\n" + topologies));
  };
  const std::string file = (dir.path() / "s.yaml").string();
  // The scenario's name on A100s: refused at the item, naming the scenario's topology (line 5).
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario("      - {name: one, node: dgx-a100, nodes: 1, fabric: {kind: none}}\n")); }),
             Catch::StartsWith(file + ":12:9: field 'scenario.search.topology[0]': topology name 'one' is already given to another system at " + file + ":5:13") &&
                 Catch::Contains("there 8 H100-SXM5-80GB GPUs") && Catch::Contains("here 8 A100-SXM4-80GB GPUs"));
  // Two of the search's own under one name, the second with two nodes: refused at the second, naming the first.
  CHECK_THAT(test::input_error([&] {
               load_training_scenario(scenario("      - {name: a100, node: dgx-a100, nodes: 1, fabric: {kind: none}}\n"
                                               "      - {name: a100, node: dgx-a100, nodes: 2, fabric: {kind: rail-optimized, scalable_unit: 2, tiers: [{radix: 40}, {radix: 40}]}}\n"));
             }),
             Catch::StartsWith(file + ":13:9: field 'scenario.search.topology[1]': topology name 'a100' is already given to another system at " + file + ":12:9"));
  // The same system again: tried once, and the other one is kept.
  const TrainingScenario sc = load_training_scenario(scenario("      - {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}\n"
                                                              "      - {name: a100, node: dgx-a100, nodes: 1, fabric: {kind: none}}\n"
                                                              "      - {name: a100, node: dgx-a100, nodes: 1, fabric: {kind: none}}\n"));
  REQUIRE(sc.search.systems.size() == 1);
  CHECK(sc.search.systems[0].topology->name == "a100");
}

TEST_CASE("plan search: the scenario's own plan is in the space and simulated even when the space's lists leave its values out") {
  TrainingScenario sc = small();  // its plan: TP2 PP2 DP4 mb1 selective on 16 GPUs
  const std::string own = plan_key(sc.job);
  sc.search.tp = {4};
  sc.search.micro = {2};
  SearchOptions opt;
  opt.threads = 2;
  for (bool bound : {false, true}) {
    opt.bound = bound;
    opt.keep = 2;
    const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, opt);
    std::vector<std::size_t> found;
    for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
      if (r.key(r.outcomes[i]) == own) found.push_back(i);
    }
    REQUIRE(found.size() == 1);  // added once, after the enumerated plans
    CHECK(found[0] == r.outcomes.size() - 1);
    CHECK(r.own == found[0]);
    CHECK(r.outcomes[r.own].status == PlanOutcome::Status::simulated);
    CHECK(r.outcomes[r.own].step_s > 0);
    CHECK(r.enumerated == r.outcomes.size());
  }
  // Listed by the space: found where the enumeration puts it, not added again.
  sc.search.tp = {2, 4};
  sc.search.micro = {1, 2};
  opt.bound = false;
  const SearchResult listed = search_plans(sc.job, *sc.topology, sc.search, opt);
  CHECK(listed.key(listed.outcomes[listed.own]) == own);
  CHECK(listed.own < listed.outcomes.size() - 1);
  // A plan of the scenario's that splits the layers unevenly is searched even without uneven_layers
  // (the plan's own model has 32 layers; PP3 gives 11, 11 and 10).
  TrainingScenario uneven = small();
  uneven.job.plan = ParallelismPlan{};
  uneven.job.plan.tp = 2;
  uneven.job.plan.pp = 3;
  uneven.job.plan.dp = 2;
  uneven.job.plan.sequence_parallel = true;
  uneven.search.gpus = {12};
  uneven.search.pp = {1, 2, 4};
  const SearchResult u = search_plans(uneven.job, *uneven.topology, uneven.search, opt);
  CHECK(u.key(u.outcomes[u.own]) == plan_key(uneven.job));
  CHECK(u.reason(u.outcomes[u.own]).find("does not divide") == std::string::npos);
  // Under ZeRO-3 the DP overlap settings do not apply: a scenario that turns them off is the one
  // enumerated plan, not a second copy of it ranked against itself.
  TrainingScenario z3 = small();
  z3.job.plan.zero_stage = 3;
  z3.job.plan.overlap_grad_reduce = false;
  z3.job.plan.overlap_param_gather = false;
  z3.search.gpus = {16};
  z3.search.tp = {2};
  z3.search.pp = {2};
  z3.search.vpp = {1};
  z3.search.micro = {1};
  z3.search.recompute = {z3.job.recompute};
  z3.search.zero = {3};
  z3.search.dp_overlap = {true, false};
  const SearchResult zr = search_plans(z3.job, *z3.topology, z3.search, opt);
  CHECK(zr.outcomes.size() == 1);
  CHECK(zr.own == 0);
  CHECK_THAT(zr.key(zr.outcomes[0]), !Catch::Contains("overlap=0"));
}

TEST_CASE("plan search: a mixture of experts under every rank order rejects the orders Megatron-Core refuses, and simulates the rest") {
  test::TempDir dir;
  dir.write("tiny-moe.yaml", R"(model:
  name: tiny-moe
  layers: 8
  hidden: 2048
  heads: 16
  kv_heads: 8
  head_dim: 128
  ffn_hidden: 4096
  activation: swiglu
  vocab: 32000
  seq_len: 2048
  tied_embeddings: false
  moe: {experts: 8, top_k: 2, expert_ffn_hidden: 4096}
)");
  const auto file = dir.write("s.yaml", R"(scenario:
  name: moe-orders
  kind: training
  model: tiny-moe.yaml
  topology: {name: one, node: dgx-h100, nodes: 1, fabric: {kind: none}}
  parallelism: {tp: 2, pp: 2, dp: 2, sequence_parallel: true}
  batch: {micro: 1, global: 4}
  recompute: full
  search: {tp: [2], pp: [2], ep: [1], etp: [1], micro: [1], recompute: [full], order: all}
)");
  const TrainingScenario sc = load_training_scenario(file);
  SearchOptions opt;
  opt.threads = 1;
  // The whole search had died in a map lookup on the first such order.
  const SearchResult r = search_plans(sc.job, *sc.topology, sc.search, opt);
  int refused = 0, simulated = 0;
  for (const auto& o : r.outcomes) {
    const TrainingJob j = r.job(o);
    // Megatron-Core's two conditions, from the ranks themselves: pp last among the dimensions of
    // more than one rank, or expert dp = dp; and every rank on the same stage in both mappings.
    const auto& p = j.plan;
    bool pp_last = true, after_pp = false;
    for (ParallelDim d : p.order) {
      if (d == ParallelDim::pp) after_pp = true;
      const bool wide = (d == ParallelDim::tp && (p.tp > 1 || p.etp > 1)) || (d == ParallelDim::cp && p.cp > 1) || (d == ParallelDim::ep && p.ep > 1) ||
                        (d == ParallelDim::dp && (p.dp > 1 || expert_data_parallel_size(p) > 1));
      if (d != ParallelDim::pp && after_pp && wide) pp_last = false;
    }
    bool same_stages = true;
    for (int r = 0; r < p.tp * p.pp * p.dp * p.cp; ++r) {
      for (int e : expert_data_parallel_ranks(p, r)) same_stages = same_stages && e / dense_stage_stride(p) % p.pp == r / dense_stage_stride(p) % p.pp;
    }
    const bool megatron = (pp_last || expert_data_parallel_size(p) == p.dp) && same_stages;
    const bool order_refused = o.reason.find("needs the experts' data parallelism equal to the attention's") != std::string::npos ||
                               o.reason.find("on one pipeline stage in the attention's mapping and on another in the experts'") != std::string::npos;
    if (o.status == PlanOutcome::Status::constraint && order_refused) {
      ++refused;
      CHECK_FALSE(megatron);
    }
    if (o.status == PlanOutcome::Status::simulated) {
      ++simulated;
      CHECK(megatron);
    }
  }
  CHECK(refused > 0);
  CHECK(simulated > 0);
}

TEST_CASE("plan search: plans are priced at an offering of their nodes' size, not a cheaper one of another") {
  // Expectation: a sheet with H100s at $1 in 4-GPU nodes and $2 in 8-GPU nodes prices a DGX H100
  // search at $2 (the offering it can rent, as the cost section picks); with only the 4-GPU offering
  // the search cannot be priced, and says why.
  test::TempDir dir;
  const auto scenario = [&](const std::string& offerings) {
    return dir.write("s.yaml", one_dgx_h100_scenario("    tp: [2]\n    cost_sheet:\n      name: s\n      offerings:\n" + offerings));
  };
  const std::string quad = "        - {name: quad, gpu: H100-SXM5-80GB, gpus_per_node: 4, pricing: on-demand, price_per_gpu_hour: 1, as_of: x, source: y}\n";
  const std::string eight = "        - {name: eight, gpu: H100-SXM5-80GB, pricing: on-demand, price_per_gpu_hour: 2, as_of: x, source: y}\n";
  const TrainingScenario sc = load_training_scenario(scenario(quad + eight));
  CHECK(sc.price_offering == "eight");
  CHECK(sc.price_per_gpu_hour == 2.0);
  CHECK_THAT(test::input_error([&] { load_training_scenario(scenario(quad)); }),
             Catch::Contains("has no on-demand offering for the scenario's H100-SXM5-80GB in nodes of 8 GPUs"));
}
