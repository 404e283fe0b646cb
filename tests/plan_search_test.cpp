// Training plan search: constraints and memory prune before simulating, the same outcomes whatever
// the thread count, a killed run resumes without losing or repeating plans, and the Pareto front.
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

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

}  // namespace

TEST_CASE("plan search: constraints and memory prune before simulating; every plan has an outcome and a reason") {
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
      CHECK(o.time_to_train_s == Approx(1e9 / o.tokens_per_s).epsilon(1e-9));
      own |= o.job.plan.tp == 2 && o.job.plan.pp == 2 && o.job.plan.dp == 4 && o.job.micro_batch == 1 && o.job.recompute == Recompute::selective &&
             o.job.plan.vpp == 1;
    } else {
      CHECK_FALSE(o.reason.empty());
    }
    if (o.job.plan.pp * o.job.plan.vpp > 1 && 32 % (o.job.plan.pp * o.job.plan.vpp) != 0) CHECK(o.status == PlanOutcome::Status::constraint);
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
  for (std::size_t i = 0; i < a.outcomes.size(); ++i) {
    CHECK(a.outcomes[i].key == b.outcomes[i].key);
    CHECK(a.outcomes[i].step_s == b.outcomes[i].step_s);
  }
  test::TempDir dir;
  const auto file = dir.path() / "results.jsonl";
  SearchOptions resumable = two;
  resumable.results = file;
  (void)search_plans(sc.job, *sc.topology, sc.search, resumable);
  // As if killed: keep the first half of the lines and a torn one.
  std::vector<std::string> lines;
  {
    std::ifstream in(file);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  REQUIRE(lines.size() == a.simulated);
  {
    std::ofstream out(file, std::ios::trunc);
    for (std::size_t i = 0; i < lines.size() / 2; ++i) out << lines[i] << "\n";
    out << lines.back().substr(0, lines.back().size() / 2);
  }
  const SearchResult c = search_plans(sc.job, *sc.topology, sc.search, resumable);
  CHECK(c.resumed == lines.size() / 2);
  REQUIRE(c.outcomes.size() == a.outcomes.size());
  for (std::size_t i = 0; i < a.outcomes.size(); ++i) {
    CHECK(c.outcomes[i].key == a.outcomes[i].key);
    CHECK(c.outcomes[i].step_s == Approx(a.outcomes[i].step_s).epsilon(1e-12));
  }
  // The file now holds each simulated plan exactly once.
  std::set<std::string> keys;
  std::size_t count = 0;
  {
    std::ifstream in(file);
    for (std::string l; std::getline(in, l); ++count) keys.insert(l.substr(0, l.find("\"status\"")));
  }
  CHECK(count == a.simulated);
  CHECK(keys.size() == a.simulated);
  const SearchResult d = search_plans(sc.job, *sc.topology, sc.search, resumable);
  CHECK(d.resumed == a.simulated);
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
  const auto top = [](const SearchResult& r, std::size_t k) {
    std::vector<std::pair<double, std::string>> v;
    for (const auto& o : r.outcomes) {
      if (o.status == PlanOutcome::Status::simulated) v.emplace_back(o.step_s, o.key);
    }
    std::sort(v.begin(), v.end());
    v.resize(std::min(k, v.size()));
    return v;
  };
  CHECK(top(pruned, 5) == top(full, 5));
  CHECK(pruned.simulated + pruned.bound == full.simulated);
  for (const auto& o : full.outcomes) {
    // The bound holds: no simulated step beats its plan's lower bound.
    if (o.status == PlanOutcome::Status::simulated) CHECK(o.step_s >= o.lower_bound_s);
  }
  REQUIRE(pruned1.outcomes.size() == pruned.outcomes.size());
  for (std::size_t i = 0; i < pruned.outcomes.size(); ++i) CHECK(pruned1.outcomes[i].status == pruned.outcomes[i].status);
  SearchOptions sharded = bb;
  sharded.shards = 2;
  CHECK_THROWS_WITH(search_plans(sc.job, *sc.topology, sc.search, sharded), Catch::Contains("one process"));
}
