// The cost model: Young's and Daly's closed forms against Daly's worked values, the Monte Carlo
// against the closed forms, spot without preemptions, seeds, and runs that cannot finish.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "catch.hpp"

#include "clustersim/models/cost.hpp"

using namespace cs::models;

namespace {

constexpr double kMinute = 60, kHour = 3600;

// A run whose checkpoint takes `delta` and whose restart (detect + restart + reading the checkpoint
// back) takes `restart`, with failures every `mtbf` on average over the whole job.
RunSpec daly_run(double solve, double delta, double restart, double mtbf) {
  RunSpec r;
  r.work_s = solve;
  r.nodes = 100;
  r.gpus = 800;
  r.tokens = 1e12;
  r.checkpoint.bytes = delta * 1e9;
  r.checkpoint.write_bandwidth = 1e9;
  r.reliability.restart_s = restart - delta;  // + the checkpoint read (delta) = restart
  r.reliability.failures_per_1000_node_days = 1000.0 * 86400.0 / (mtbf * r.nodes);
  return r;
}

Offering on_demand(double price) {
  Offering o;
  o.name = "od";
  o.pricing = Pricing::on_demand;
  o.price_per_gpu_hour = price;
  return o;
}

// A job of `work_s` on one 8-GPU node, at the shipped scenarios' 3.79 failures per 1,000 node-days.
RunSpec one_node_run(double work_s) {
  RunSpec run = daly_run(work_s, 1 * kMinute, 5 * kMinute, 1e12);
  run.nodes = 1;
  run.gpus = 8;
  run.reliability.failures_per_1000_node_days = 3.79;
  return run;
}

// Spot at $1 per GPU-hour, preempted node by node at a Poisson rate, with this notice and wait.
Offering poisson_spot(double notice_s, double capacity_wait_s, double per_node_hour) {
  Offering o = on_demand(1.0);
  o.name = "spot";
  o.pricing = Pricing::spot;
  o.notice_s = notice_s;
  o.capacity_wait_s = capacity_wait_s;
  o.preemption.kind = PreemptionProcess::Kind::poisson;
  o.preemption.rate_per_node_hour = per_node_hour;
  return o;
}

}  // namespace

TEST_CASE("cost: Young's and Daly's intervals and Daly's expected wall time reproduce Daly's worked values") {
  // Daly 2006: T_s = 500 h, R = 10 min, delta = 5 min.
  const double delta = 5 * kMinute, restart = 10 * kMinute, solve = 500 * kHour;
  CHECK(young_interval(delta, 24 * kHour) / kMinute == Approx(120).epsilon(0.001));
  const double tau = daly_interval(delta, 24 * kHour);
  CHECK(tau / kMinute == Approx(117).epsilon(0.01));
  CHECK(daly_wall_time(solve, tau, delta, restart, 24 * kHour) / solve == Approx(1.096).epsilon(0.002));
  CHECK(daly_interval(delta, 6 * kHour) / kMinute == Approx(57).epsilon(0.02));
  CHECK(daly_wall_time(solve, daly_interval(delta, 6 * kHour), delta, restart, 6 * kHour) / solve == Approx(1.220).epsilon(0.003));
  CHECK(daly_interval(delta, 15 * kMinute) / kMinute == Approx(9.1).epsilon(0.02));
  CHECK(daly_wall_time(solve, daly_interval(delta, 15 * kMinute), delta, restart, 15 * kMinute) / solve == Approx(5.01).epsilon(0.01));
  // delta >= 2M: the interval is M.
  CHECK(daly_interval(3 * kHour, 1 * kHour) == 1 * kHour);
}

TEST_CASE("cost: the closed forms stay finite and right for a vanishing failure rate and an interval past the run") {
  const double delta = 5 * kMinute, restart = 10 * kMinute, solve = 500 * kHour;
  // M near the largest double: 2 delta M overflows, and e^((tau + delta)/M) - 1 cancels to 0. The
  // interval is Young's sqrt(2 delta M), and the run takes its failure-free time.
  const double huge = 1e307;
  const double tau = daly_interval(delta, huge);
  REQUIRE(std::isfinite(tau));
  CHECK(tau == Approx(std::sqrt(2 * delta) * std::sqrt(huge)).epsilon(1e-9));
  CHECK(daly_wall_time(solve, tau, delta, restart, huge) == Approx(solve).epsilon(1e-9));
  // An interval of the whole run or more: one segment that ends in the finish, E = M e^(R/M) (e^(T/M) - 1),
  // finite however long the interval (Daly's per-interval form made it infinite).
  const double m = 100 * kHour;
  const double one_segment = m * std::exp(restart / m) * std::expm1(solve / m);
  CHECK(daly_wall_time(solve, 1e300, delta, restart, m) == Approx(one_segment).epsilon(1e-12));
  CHECK(daly_wall_time(solve, solve, delta, restart, m) == Approx(one_segment).epsilon(1e-12));
  // Without failures: the run, plus a checkpoint per interval before the finish, none past it.
  const double never = std::numeric_limits<double>::infinity();
  CHECK(daly_wall_time(solve, 1e300, delta, restart, never) == solve);
  CHECK(daly_wall_time(solve, solve, delta, restart, never) == solve);
  CHECK(daly_wall_time(solve, solve / 4, delta, restart, never) == Approx(solve + 3 * delta));
  // Interruptions so frequent that s / M overflows: no finite time, not NaN.
  CHECK(daly_wall_time(solve, solve / 4, delta, restart, 1e-310) == never);
}

TEST_CASE("cost: the Monte Carlo agrees with Daly's closed form within sampling error") {
  const RunSpec run = daly_run(500 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour);
  CostOptions opt;
  opt.trials = 400;
  const auto rows = estimate_costs(run, {on_demand(2.0)}, opt);
  REQUIRE(rows.size() == 1);
  const CostEstimate& e = rows[0];
  CHECK(e.interval_s / kMinute == Approx(117).epsilon(0.01));
  CHECK(e.expected_wall_s / run.work_s == Approx(1.096).epsilon(0.002));
  CHECK(e.finished == 400);
  // About 22 failures a run: the mean wall time's standard error is about 0.4% of it.
  CHECK(e.wall_s.mean == Approx(e.expected_wall_s).epsilon(0.015));
  CHECK(e.cost.mean == Approx(e.expected_cost).epsilon(0.015));
  CHECK(e.mean_interruptions == Approx(e.expected_wall_s / (24 * kHour)).epsilon(0.1));
  CHECK(e.wall_s.p50 <= e.wall_s.p90);
  CHECK(e.wall_s.p90 <= e.wall_s.p99);
  CHECK(e.cost_per_million_tokens == Approx(e.cost.mean / 1e6));
}

TEST_CASE("cost: spot without preemptions costs its price ratio, and the same seed gives the same numbers") {
  RunSpec run = daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour);
  Offering spot = on_demand(1.0);
  spot.name = "spot";
  spot.pricing = Pricing::spot;
  spot.notice_s = 120;
  CostOptions opt;
  opt.trials = 200;
  const auto a = estimate_costs(run, {on_demand(4.0), spot}, opt);
  REQUIRE(a.size() == 2);
  CHECK(a[1].cost.mean / a[0].cost.mean == Approx(0.25).epsilon(1e-9));
  CHECK(a[1].wall_s.mean == Approx(a[0].wall_s.mean).epsilon(1e-12));
  CHECK(a[1].expected_cost / a[0].expected_cost == Approx(0.25).epsilon(1e-9));
  const auto b = estimate_costs(run, {on_demand(4.0), spot}, opt);
  CHECK(b[0].walls == a[0].walls);
  CHECK(b[1].costs == a[1].costs);
  opt.seed = 2;
  const auto c = estimate_costs(run, {on_demand(4.0), spot}, opt);
  CHECK(c[0].walls != a[0].walls);
}

TEST_CASE("cost: noticed spot preemptions cost a checkpoint, a wait and a restart each, as the closed form says") {
  RunSpec run = daly_run(200 * kHour, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  // A 120 s notice covers the 1-minute checkpoint (nothing is lost); half an hour to get capacity
  // back; 100 nodes: one preemption every 5 h.
  Offering spot = poisson_spot(120, 1800, 0.002);
  CostOptions opt;
  opt.trials = 300;
  const auto rows = estimate_costs(run, {on_demand(3.0), spot}, opt);
  const CostEstimate& e = rows[1];
  CHECK(e.can_finish);
  CHECK(e.wall_s.mean == Approx(e.expected_wall_s).epsilon(0.02));
  CHECK(e.cost.mean == Approx(e.expected_cost).epsilon(0.02));
  CHECK(e.mean_interruptions == Approx(40 * 1.07).epsilon(0.1));
  // Spot at a third of the price stays cheaper until preemptions come much more often.
  REQUIRE(e.break_even_preemptions_per_node_hour);
  CHECK(*e.break_even_preemptions_per_node_hour > 0.002);
  // A notice too short for the checkpoint: each preemption loses the work since the last one.
  spot.notice_s = 30;
  const auto short_notice = estimate_costs(run, {on_demand(3.0), spot}, opt);
  CHECK(short_notice[1].wall_s.mean > e.wall_s.mean);
  CHECK(short_notice[1].mtbi_s == Approx(5 * kHour).epsilon(1e-9));
}

TEST_CASE("cost: the preemption closed forms hold where preemptions are frequent, and a shorter notice never raises the break-even") {
  // Expectation: with a noticed preemption every 24 min against a 6-minute restart (rate x (delta +
  // R) = 0.29) and with preemptions whose notice is too short, the closed forms' wall time and cost
  // stay within 3% of the Monte Carlo (a preemption during a restart ends it early; a wait for
  // capacity is not a restart that can be interrupted). The break-even preemption rate is lower for
  // a notice too short to save in than for one that covers the checkpoint, and at it the Monte
  // Carlo's mean cost is within 3% of on-demand's (at half again spot's price).
  RunSpec run = daly_run(50 * kHour, 1 * kMinute, 6 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  run.nodes = 10;
  run.gpus = 80;
  Offering spot = poisson_spot(0, 600, 0);
  CostOptions opt;
  opt.trials = 400;
  double break_even[2] = {0, 0};
  int k = 0;
  for (double notice : {120.0, 30.0}) {
    spot.notice_s = notice;
    spot.preemption.rate_per_node_hour = 0.25;  // 10 nodes: every 24 min
    const CostEstimate e = estimate_costs(run, {on_demand(1.5), spot}, opt)[1];
    INFO("notice " << notice << " s");
    REQUIRE(e.can_finish);
    REQUIRE(e.finished == e.trials);
    CHECK(e.expected_wall_s == Approx(e.wall_s.mean).epsilon(0.03));
    CHECK(e.expected_cost == Approx(e.cost.mean).epsilon(0.03));
    REQUIRE(e.break_even_preemptions_per_node_hour);
    break_even[k++] = *e.break_even_preemptions_per_node_hour;
    spot.preemption.rate_per_node_hour = *e.break_even_preemptions_per_node_hour;
    const auto at = estimate_costs(run, {on_demand(1.5), spot}, opt);
    CHECK(at[1].cost.mean == Approx(at[0].cost.mean).epsilon(0.03));
  }
  CHECK(break_even[1] < break_even[0]);
}

namespace {
// One on-demand offering's estimate from 20 trials capped at cap_factor x the failure-free time.
CostEstimate on_demand_estimate(const RunSpec& run, double cap_factor) {
  CostOptions opt;
  opt.trials = 20;
  opt.cap_factor = cap_factor;
  return estimate_costs(run, {on_demand(2.0)}, opt)[0];
}
}  // namespace

TEST_CASE("cost: a run whose expected wall time is past the cap (failures every 20 min against a 90-min checkpoint and restart) is reported, not infinite") {
  const CostEstimate e = on_demand_estimate(daly_run(100 * kHour, 30 * kMinute, 60 * kMinute, 20 * kMinute), 20);
  CHECK_FALSE(e.can_finish);
  CHECK_THAT(e.verdict, Catch::Contains("cannot finish"));
  CHECK(e.finished == 0);
  CHECK(std::isinf(e.expected_wall_s));
}

TEST_CASE("cost: interruptions sooner than a checkpoint and a restart still finish when Daly's expectation is under the cap") {
  // MTBF 12 min against a 5 min checkpoint and a 10 min restart: most attempts are lost, but one of
  // e^((tau + delta)/M) survives, and Daly's expected wall time is about 7 x the work, under 100 x.
  const RunSpec run = daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 12 * kMinute);
  const CostEstimate e = on_demand_estimate(run, 100);
  CHECK(e.mtbi_s < e.checkpoint_s + e.restart_s);
  CHECK(e.finished == e.trials);
  CHECK(e.can_finish);
  CHECK(e.verdict.empty());
  CHECK(e.expected_wall_s > 3 * run.work_s);
  CHECK(e.expected_wall_s < 20 * run.work_s);
  // The closed form and the trials agree on what they say.
  CHECK(e.wall_s.mean == Approx(e.expected_wall_s).epsilon(0.15));
  // Under a cap below the expectation the same run cannot finish, and the verdict says how far off it is.
  const CostEstimate capped = on_demand_estimate(run, 2);
  CHECK_FALSE(capped.can_finish);
  CHECK_THAT(capped.verdict, Catch::Contains("cannot finish within 2 x the failure-free time") && Catch::Contains("x the failure-free time"));
}

namespace {
// The refusal estimate_costs makes, or a failed test when it runs the Monte Carlo instead.
CostInputError refusal(const RunSpec& run, const std::vector<Offering>& offerings) {
  CostOptions opt;
  opt.trials = 1;
  try {
    (void)estimate_costs(run, offerings, opt);
  } catch (const CostInputError& e) {
    return e;
  }
  FAIL("expected a CostInputError");
  return CostInputError(CostInputError::Input::failures, "", "");
}
}  // namespace

TEST_CASE("cost: a run past the Monte Carlo's bounds is refused before any trial, blaming the input that puts it there") {
  using Input = CostInputError::Input;
  SECTION("failures faster than a restart: a trial would run to its cap, interrupted all the way") {
    // MTBF 3 s, restart 1 h: no restart completes, so a trial runs to its cap (100 x 100 h) and is
    // interrupted 3.6e7 / 3 = 1.2e7 times, past the 1e6 simulated per trial.
    const CostInputError e = refusal(daly_run(100 * kHour, 5 * kMinute, 60 * kMinute, 3.0), {on_demand(2.0)});
    CHECK(e.input() == Input::failures);
    CHECK_THAT(e.what(), Catch::Contains("a failure comes every 3 s on average on the job's 100 nodes") &&
                             Catch::Contains("interrupted about 1.2e+07 times") && Catch::Contains("at most 1,000,000"));
  }
  SECTION("a spot offering preempted every few milliseconds is blamed by name") {
    Offering spot = on_demand(1.0);
    spot.name = "flaky-spot";
    spot.pricing = Pricing::spot;
    spot.preemption.kind = PreemptionProcess::Kind::poisson;
    spot.preemption.rate_per_node_hour = 1e4;  // x 100 nodes: every 3.6 ms
    const CostInputError e = refusal(daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour), {on_demand(2.0), spot});
    CHECK(e.input() == Input::preemption);
    CHECK(e.offering() == "flaky-spot");
    CHECK_THAT(e.what(), Catch::Contains("preempted every 0.0036 s"));
  }
  SECTION("a checkpoint write so fast that Daly's interval is microseconds") {
    // delta = 1e9 B / 1e27 B/s = 1e-18 s; tau* ~ sqrt(2 delta M) = sqrt(2e-18 x 86400) = 0.416 us, so
    // 100 h of work would checkpoint 3.6e5 / 4.16e-7 = 8.7e11 times.
    RunSpec run = daly_run(100 * kHour, 1.0, 10 * kMinute, 24 * kHour);
    run.checkpoint.write_bandwidth = 1e27;
    const CostInputError e = refusal(run, {on_demand(2.0)});
    CHECK(e.input() == Input::write_bandwidth);
    CHECK_THAT(e.what(), Catch::Contains("Daly's optimal interval for a 1e-18 s checkpoint write is 4.16e-07 s") &&
                             Catch::Contains("checkpoint about 8.7e+11 times"));
  }
  SECTION("a given interval: shorter than the write, or too many checkpoints") {
    RunSpec run = daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour);
    run.checkpoint.interval_s = 1e-9;
    CostInputError e = refusal(run, {on_demand(2.0)});
    CHECK(e.input() == Input::interval);
    CHECK_THAT(e.what(), Catch::Contains("a checkpoint every 1e-09 s of work is shorter than the 5 min one takes to write (300 GB at 1e+09 B/s)"));
    // 10,000 h of work checkpointed every 10 s (a 1 s write): about 3.6e7 s / 10 s = 3.6e6 checkpoints.
    run = daly_run(10000 * kHour, 1.0, 10 * kMinute, 24 * kHour);
    run.checkpoint.interval_s = 10;
    e = refusal(run, {on_demand(2.0)});
    CHECK(e.input() == Input::interval);
    CHECK_THAT(e.what(), Catch::Contains("a checkpoint every 10 s of a 417 days failure-free run") && Catch::Contains("checkpoint about 3.6e+06 times"));
  }
  SECTION("durations past the 146 years of the event engine's clock, infinite ones included") {
    // The run itself: 300 years failure-free.
    CostInputError e = refusal(daly_run(300 * 365.25 * 24 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour), {on_demand(2.0)});
    CHECK(e.input() == Input::train_tokens);
    CHECK_THAT(e.what(), Catch::Contains("the run takes 300 years failure-free, longer than the 146 years the Monte Carlo's clock spans"));
    // A checkpoint written at 1e-300 B/s takes an infinite time (the division overflows).
    RunSpec run = daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour);
    run.checkpoint.write_bandwidth = 1e-300;
    e = refusal(run, {on_demand(2.0)});
    CHECK(e.input() == Input::write_bandwidth);
    CHECK_THAT(e.what(), Catch::Contains("writing the 300 GB checkpoint at 1e-300 B/s takes forever"));
    // Detection and restart that add up to infinity.
    run = daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour);
    run.reliability.detect_s = run.reliability.restart_s = 1e308;
    e = refusal(run, {on_demand(2.0)});
    CHECK(e.input() == Input::reliability);
    CHECK_THAT(e.what(), Catch::Contains("a restart (detection") && Catch::Contains("takes forever"));
  }
}

TEST_CASE("cost: interruptions are counted over the held time, so holds of milliseconds between hour-long waits are a row that cannot finish, not a refusal") {
  // Preempted every 3.6 ms while held, an hour's wait after each: a trial on its way to the cap
  // holds the capacity a few seconds in all and meets about cap / wait interruptions, where counting
  // them over the whole span (waits included) refused it as 1e11.
  Offering spot = poisson_spot(0.0, kHour, 1e4);  // x 100 nodes: every 3.6 ms
  spot.name = "flaky-spot";
  CostOptions opt;
  opt.trials = 20;
  const CostEstimate e = estimate_costs(daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 24 * kHour), {on_demand(2.0), spot}, opt)[1];
  CHECK_FALSE(e.can_finish);
  CHECK(e.finished == 0);
  CHECK(e.mean_interruptions == Approx(100 * 100.0).epsilon(0.1));  // the cap (100 x 100 h) over 1-h waits
}

TEST_CASE("cost: a run too long for 100 x its failure-free time on the clock stops at the clock's end") {
  // 10 years of work; 100 x that is past the clock's 146 years, so a trial stops there. MTBF 10 h
  // against a 10-day restart: a restart completes with probability e^-24, so it never finishes; it is
  // interrupted about 146 years / 10 h = 1.3e5 times on the way, within the bound.
  const RunSpec run = daly_run(10 * 365.25 * 24 * kHour, 5 * kMinute, 10 * 24 * kHour, 10 * kHour);
  CostOptions opt;
  opt.trials = 1;
  const auto rows = estimate_costs(run, {on_demand(2.0)}, opt);
  CHECK(rows[0].finished == 0);
  CHECK_THAT(rows[0].verdict, Catch::Contains("1 of 1 trials did not finish within 146 years (the Monte Carlo's clock)"));
}

TEST_CASE("cost: a trial that reaches the end of its work late in a long run finishes there") {
  // 42,249,019 s of work with no checkpoint (the interval is longer than the run) and a failure
  // every half of it: an attempt survives with probability e^-2, so a trial finishes after some
  // 1e8 s, where a double holds the clock only to about 1e-8 s. The cap (100 x the work) holds over
  // 100 attempts, all of which fail with probability (1 - e^-2)^100 = 5e-7: every trial must finish
  // when its last attempt reaches the end of the work, not fall nanoseconds short of it by the
  // clock's rounding and then checkpoint zero-length segments until the cap.
  const double work = 42249019.21749115;
  RunSpec run = daly_run(work, 5 * kMinute, 20 * kMinute, work / 2);
  run.checkpoint.interval_s = 2 * work;
  CostOptions opt;
  opt.trials = 20;
  const auto rows = estimate_costs(run, {on_demand(2.0)}, opt);
  CHECK(rows[0].finished == 20);
  // Every trial's wall time is its work plus what its failures cost, never less.
  for (double wall : rows[0].walls) CHECK(wall >= work);
}

TEST_CASE("cost: a reserved row bills the job's share of its term and says what the whole term commits") {
  Offering reserved = on_demand(2.0);
  reserved.name = "1yr";
  reserved.pricing = Pricing::reserved;
  reserved.term_hours = 8760;
  reserved.upfront_per_gpu = 8760;  // $1 an hour over the term
  CHECK(reserved.effective_price_per_gpu_hour() == Approx(3.0));
  RunSpec run = daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 1e12);
  CostOptions opt;
  opt.trials = 10;
  const CostEstimate e = estimate_costs(run, {on_demand(4.0), reserved}, opt)[1];
  CHECK(e.cost.mean == Approx(3.0 * run.gpus * e.wall_s.mean / kHour).epsilon(0.01));
  // 800 GPUs x ($2 x 8,760 h + $8,760) = $21.0M.
  CHECK_THAT(e.verdict, Catch::Contains("which commits 800 GPUs to $21.0M (upfront included)"));
  // A billion or more in billions ("$1.6e+03M" had been printed).
  reserved.upfront_per_gpu = 2e6;
  CHECK_THAT(estimate_costs(run, {on_demand(4.0), reserved}, opt)[1].verdict, Catch::Contains("which commits 800 GPUs to $1.61B (upfront included)"));
  // A job as long as the term or longer uses it all: no note.
  run.work_s = 9000 * kHour;
  CHECK(estimate_costs(run, {on_demand(4.0), reserved}, opt)[1].verdict.find("commits") == std::string::npos);
}

TEST_CASE("cost: owned hardware prices a GPU-hour from capex, power and utilisation, and mixed meets the deadline") {
  Offering owned;
  owned.name = "owned";
  owned.pricing = Pricing::owned;
  owned.capex_per_gpu = 40000;
  owned.lifetime_years = 4;
  owned.power_w_per_gpu = 1000;
  owned.pue = 1.25;
  owned.price_per_kwh = 0.1;
  owned.utilisation = 0.5;
  // (40,000 / 4 + 1 kW x 1.25 x 8,760 h x $0.1) / (8,760 h x 0.5)
  CHECK(owned.effective_price_per_gpu_hour() == Approx((10000.0 + 1095.0) / 4380.0));
  RunSpec run = daly_run(100 * kHour, 5 * kMinute, 10 * kMinute, 48 * kHour);
  CostOptions opt;
  opt.trials = 100;
  const auto rows = estimate_costs(run, {on_demand(4.0), owned}, opt);
  REQUIRE(rows[1].break_even_utilisation);
  CHECK(*rows[1].break_even_utilisation == Approx((10000.0 + 1095.0) / 8760.0 / 4.0));

  Offering spot = poisson_spot(30, 6 * kHour, 0.001);
  opt.deadline_s = 130 * kHour;
  const auto mixed = estimate_costs(run, {on_demand(4.0), spot}, opt);
  REQUIRE(mixed.size() == 3);
  const CostEstimate& m = mixed[2];
  CHECK(m.pricing == Pricing::mixed);
  CHECK(m.finished == 100);
  CHECK(m.wall_s.p50 <= 130 * kHour);         // the fallback keeps the deadline in expectation
  CHECK(m.wall_s.p90 <= 130 * kHour * 1.03);  // (failures after the switch can still push it out)
  CHECK(mixed[1].wall_s.p90 > 130 * kHour);  // spot alone does not
  CHECK(m.on_demand_fraction > 0);
  CHECK(m.cost.mean < mixed[0].cost.mean);
  // Its prices: spot's, then on-demand's after the switch (the table had shown only spot's).
  CHECK(m.price_per_gpu_hour == Approx(spot.price_per_gpu_hour));
  CHECK(m.fallback_price_per_gpu_hour == Approx(4.0));
  CHECK(mixed[1].fallback_price_per_gpu_hour == 0);
}

TEST_CASE("cost: a mixed row meets a tight deadline on average, keeping the slack for one more interruption") {
  // A probe: one node, on-demand alone 74 h against an 84 h deadline, spot preempted every 5 h
  // with a 0.2 h wait. The run had switched only once the slack was gone, and the next interruption
  // finished it late: the mean 0.8-1.0 h past the deadline, 75% of the trials late.
  RunSpec run = daly_run(74 * kHour, 560, 0.4 * kHour, 1e12);
  run.nodes = 1;
  run.gpus = 8;
  run.reliability.failures_per_1000_node_days = 3.79;
  CostOptions opt;
  opt.trials = 300;
  opt.deadline_s = 84 * kHour;
  for (std::uint64_t seed : {1, 2, 3}) {
    opt.seed = seed;
    const auto rows = estimate_costs(run, {on_demand(4.0), poisson_spot(0, 0.2 * kHour, 0.2)}, opt);
    REQUIRE(rows.size() == 3);
    const CostEstimate& m = rows[2];
    REQUIRE(m.pricing == Pricing::mixed);
    CHECK(m.wall_s.mean <= opt.deadline_s);
    CHECK(m.wall_s.p50 <= opt.deadline_s);
    CHECK(m.cost.mean < rows[0].cost.mean);  // still cheaper than on-demand alone
  }
}

TEST_CASE("cost: a deadline with less slack than one interruption costs starts the mixed row on on-demand") {
  // A probe: on-demand alone 36.95 h against a 37 h deadline. The mixed row started on spot, switched
  // at its first interruption, paid a restart and finished late in every trial. Expectation: it
  // starts on on-demand, so it finishes as on-demand alone does and costs the same.
  RunSpec run = daly_run(36 * kHour, 560, 911, 1e12);
  run.nodes = 1;
  run.gpus = 8;
  run.reliability.failures_per_1000_node_days = 3.79;
  CostOptions opt;
  opt.trials = 200;
  const auto alone = estimate_costs(run, {on_demand(4.0)}, opt);
  opt.deadline_s = alone[0].expected_wall_s + 0.05 * kHour;
  const auto rows = estimate_costs(run, {on_demand(4.0), poisson_spot(0, kHour, 0.1)}, opt);
  REQUIRE(rows.size() == 3);
  const CostEstimate& m = rows[2];
  REQUIRE(m.pricing == Pricing::mixed);
  const auto late = std::count_if(m.walls.begin(), m.walls.end(), [&](double w) { return w > opt.deadline_s; });
  CHECK(late < m.trials / 5);
  CHECK(m.started_on_demand == m.trials);
  CHECK(m.cost.mean == Approx(rows[0].cost.mean).epsilon(0.01));
}

TEST_CASE("cost: the on-demand fallback is the offering with the smallest bill, billing granularity included") {
  // A probe: a day-billed offering at $3.90 an hour had been taken over a second-billed one at $4.00
  // for a 37-hour job (48 h billed: $1,498 against $1,182 for 8 GPUs). Expectation: the mixed row
  // falls back on the second-billed one.
  RunSpec run = daly_run(36 * kHour, 560, 911, 1e12);
  run.nodes = 1;
  run.gpus = 8;
  run.reliability.failures_per_1000_node_days = 3.79;
  Offering daily = on_demand(3.9), by_second = on_demand(4.0);
  daily.name = "od-daily";
  daily.billing_granularity_s = 24 * kHour;
  by_second.name = "od-second";
  Offering spot = poisson_spot(30, 0.1 * kHour, 0.05);
  spot.price_per_gpu_hour = 3.0;  // below its break-even: a mixed row (at 3.85 it is past it, and gets none)
  CostOptions opt;
  opt.trials = 50;
  opt.deadline_s = 60 * kHour;
  const auto rows = estimate_costs(run, {daily, by_second, spot}, opt);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].expected_cost > rows[1].expected_cost);
  CHECK(rows[3].offering == "spot + od-second");
}

TEST_CASE("cost: a Weibull lifetime of shape 1 is the Poisson process, and a replayed availability trace drives losses and waits") {
  RunSpec run = daly_run(100 * kHour, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  Offering poisson = poisson_spot(120, 1800, 0.002);
  poisson.name = "poisson";
  Offering weibull = poisson;
  weibull.name = "weibull";
  weibull.preemption.kind = PreemptionProcess::Kind::weibull;
  weibull.preemption.shape = 1;
  weibull.preemption.scale_hours = 1 / 0.002;
  CostOptions opt;
  opt.trials = 300;
  const auto rows = estimate_costs(run, {on_demand(3.0), poisson, weibull}, opt);
  CHECK(rows[2].expected_wall_s == Approx(rows[1].expected_wall_s).epsilon(1e-9));
  CHECK(rows[2].wall_s.mean == Approx(rows[1].wall_s.mean).epsilon(0.03));
  CHECK(rows[2].mean_interruptions == Approx(rows[1].mean_interruptions).epsilon(0.1));

  // A market available for 90 h, then not for 10 h, over and over; each trial starts somewhere in it.
  Offering traced = poisson;
  traced.name = "trace";
  traced.preemption = {};
  traced.preemption.kind = PreemptionProcess::Kind::trace;
  traced.preemption.availability = {{0, true}, {90 * kHour, false}, {100 * kHour, true}};
  CHECK(traced.preemption.trace_losses_per_available_hour() == Approx(1.0 / 90));
  CHECK(traced.preemption.trace_mean_unavailable_s() == Approx(10 * kHour));
  RunSpec shorter = run;
  shorter.work_s = 20 * kHour;
  opt.trials = 1000;
  const auto t = estimate_costs(shorter, {on_demand(3.0), traced}, opt);
  const CostEstimate& e = t[1];
  CHECK(e.finished == 1000);
  for (double w : e.walls) CHECK(w >= shorter.work_s);
  // The longest a trial can take: 20 h of work around one 10-h outage, plus the restart.
  CHECK(e.wall_s.p99 <= 30 * kHour + 2 * e.restart_s + 60);
  // Starting in the outage (10%) waits 5 h on average; starting within 20 h before it (20%) waits
  // 10 h less what was worked: about 2.5 h of waiting on average, as the closed form estimates.
  CHECK(e.wall_s.mean == Approx(e.expected_wall_s).epsilon(0.1));
  // Only the trials that start within 20 h before the outage are interrupted (the 0.3 this once
  // expected held a second, spurious interruption of those that started in the outage, at the
  // trace's wrap-round).
  CHECK(e.mean_interruptions == Approx(0.2).margin(0.04));
  // Always available: no interruption, the price ratio.
  traced.preemption.availability = {{0, true}, {50 * kHour, true}};
  const auto always = estimate_costs(shorter, {on_demand(3.0), traced}, opt);
  CHECK(always[1].mean_interruptions == 0);
  CHECK(always[1].cost.mean / always[0].cost.mean == Approx(1.0 / 3).epsilon(1e-9));
}

TEST_CASE("cost: a preemption whose notice is shorter than the write loses what a failure loses, and a trace's outage interrupts once") {
  // Found by a probe: the notice counted the segment's progress twice in the work lost (about double
  // a failure's GPU-hours per event), and a trace's capacity came back a hair before its change, was
  // held and billed through the outage, and interrupted again.
  RunSpec run = daly_run(200 * kHour, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  CostOptions opt;
  opt.trials = 400;
  const auto spot = estimate_costs(run, {on_demand(3.0), poisson_spot(1, 1, 0.001)}, opt);  // 0.1 per hour for the job
  const auto failing = estimate_costs(daly_run(200 * kHour, 1 * kMinute, 5 * kMinute, 10 * kHour), {on_demand(3.0)}, opt);
  REQUIRE(spot[1].mean_interruptions > 10);
  CHECK(spot[1].gpu_hours_lost_per_event == Approx(failing[0].gpu_hours_lost_per_event).epsilon(0.15));

  // 20 h available, 2 h not, over and over; 60 h of work cross three outages at most.
  Offering traced = poisson_spot(120, 1, 0);
  traced.name = "trace";
  traced.preemption = {};
  traced.preemption.kind = PreemptionProcess::Kind::trace;
  traced.preemption.availability = {{0, true}, {20 * kHour, false}, {22 * kHour, true}};
  RunSpec sixty = run;
  sixty.work_s = 60 * kHour;
  const auto t = estimate_costs(sixty, {on_demand(3.0), traced}, opt);
  CHECK(t[1].finished == opt.trials);
  CHECK(t[1].mean_interruptions <= 3.3);  // a fourth only where the wall, restarts included, reaches it
  CHECK(t[1].mean_interruptions >= 2.0);
}

namespace {

// A run on 8 nodes of one data-parallel replica each, without failures, and elastic options.
RunSpec eight_replicas(double work_s) {
  RunSpec run = daly_run(work_s, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  run.nodes = 8;
  run.gpus = 64;
  run.dp_replicas = 8;
  return run;
}
CostOptions elastic_options(int trials) {
  CostOptions opt;
  opt.trials = trials;
  opt.elastic = true;
  return opt;
}

}  // namespace

TEST_CASE("cost: elastic shrink keeps the other data-parallel replicas working while a node's capacity is away") {
  const RunSpec run = eight_replicas(100 * kHour);
  Offering spot = poisson_spot(120, 6 * kHour, 0.01);  // 8 nodes: one preemption every 12.5 h
  const CostOptions opt = elastic_options(200);
  const auto rows = estimate_costs(run, {on_demand(3.0), spot}, opt);
  REQUIRE(rows.size() == 3);
  const CostEstimate& whole = rows[1];
  const CostEstimate& elastic = rows[2];
  CHECK(elastic.offering == "spot (elastic)");
  CHECK(elastic.finished == 200);
  // Stopping the whole job for every 6-hour wait costs about half the time again; shrinking costs
  // only the lost replica's share while it is away.
  CHECK(elastic.wall_s.mean < 0.9 * whole.wall_s.mean);
  CHECK(elastic.wall_s.mean > run.work_s);
  // Billing follows the nodes up: never more than every GPU for the whole wall time.
  CHECK(elastic.cost.mean < elastic.wall_s.mean / kHour * run.gpus * 1.0);
  // Without preemptions the elastic row is plain spot.
  spot.preemption.rate_per_node_hour = 0;
  const auto calm = estimate_costs(run, {on_demand(3.0), spot}, opt);
  CHECK(calm[2].wall_s.mean == Approx(calm[1].wall_s.mean).epsilon(1e-9));
  CHECK(calm[2].cost.mean == Approx(calm[1].cost.mean).epsilon(1e-6));
}

TEST_CASE("cost: an elastic row whose trials finish can finish, whatever the whole-job closed form says") {
  // Expectation: 8 nodes preempted without notice at 2 per node-hour (the job every 3.75 min), an
  // hour's wait each: stopping the whole job for each cannot finish within 100 x its work, but shrinking to the
  // replicas still up does, and the row says so. It had said "cannot finish" beside 100 of 100
  // finished trials, taking the verdict from the whole-job closed form.
  const auto rows = estimate_costs(eight_replicas(20 * kHour), {on_demand(3.0), poisson_spot(0, 1 * kHour, 2.0)}, elastic_options(100));
  REQUIRE(rows.size() == 3);
  CHECK_FALSE(rows[1].can_finish);
  const CostEstimate& elastic = rows[2];
  REQUIRE(elastic.offering == "spot (elastic)");
  CHECK(elastic.finished == 100);
  CHECK(elastic.can_finish);
  CHECK(elastic.verdict.find("cannot finish") == std::string::npos);
  CHECK(elastic.expected_wall_s == Approx(elastic.wall_s.mean));
}

TEST_CASE("cost: elastic rows pay the billing granularity per replica stretch, and mixed rows fall back on on-demand's own terms") {
  // Expectations:
  // - a day's billing granularity raises the elastic row's cost, as it does plain spot's (each
  //   replica's stretch of holding is rounded up);
  // - with async checkpoints (a 1 s snapshot for an hour's write) a mixed row reckons its
  //   fallback with the snapshot's cost and on-demand's own interval: it stays on spot as long as
  //   spot alone would meet the deadline (on-demand fraction near 0, as without async), rather than
  //   charging an hour's write every half hour and falling back almost at once;
  // - a deadline with no spot offering cheaper than the fallback is refused, and a dearer spot
  //   offering gets no mixed row;
  // - a deadline shorter than on-demand alone is expected to take is reported as missed.
  RunSpec run = daly_run(100 * kHour, 20 * kMinute, 30 * kMinute, 400 * kHour);
  run.nodes = 8;
  run.gpus = 64;
  run.dp_replicas = 8;
  run.reliability.failures_per_1000_node_days = 1000.0 * 86400.0 / (400 * kHour * run.nodes);
  Offering spot = poisson_spot(30 * kMinute, 2 * kHour, 0.005);  // 8 nodes: every 25 h
  CostOptions opt;
  opt.trials = 200;
  opt.elastic = true;
  const double per_second = estimate_costs(run, {on_demand(3.0), spot}, opt)[2].cost.mean;
  spot.billing_granularity_s = 24 * kHour;
  const auto daily = estimate_costs(run, {on_demand(3.0), spot}, opt);
  CHECK(daily[2].offering == "spot (elastic)");
  CHECK(daily[2].cost.mean > 1.02 * per_second);
  spot.billing_granularity_s = 0;

  opt.elastic = false;
  opt.deadline_s = 230 * kHour;
  // An hour's write: reckoned every 28 minutes (the async interval), on-demand would look 3 times
  // slower than it is.
  RunSpec slow_write = daly_run(100 * kHour, 60 * kMinute, 70 * kMinute, 400 * kHour);
  slow_write.nodes = run.nodes;
  slow_write.gpus = run.gpus;
  slow_write.reliability.failures_per_1000_node_days = run.reliability.failures_per_1000_node_days;
  spot.notice_s = 2 * kHour;
  const auto sync = estimate_costs(slow_write, {on_demand(3.0), spot}, opt);
  slow_write.checkpoint.async = true;
  slow_write.checkpoint.snapshot_s = 1;
  const auto async = estimate_costs(slow_write, {on_demand(3.0), spot}, opt);
  REQUIRE(async.size() == 3);
  CHECK(async[2].pricing == Pricing::mixed);
  CHECK(async[1].wall_s.p99 < 230 * kHour);  // spot alone meets the deadline
  CHECK(sync[2].on_demand_fraction < 0.05);
  CHECK(async[2].on_demand_fraction < 0.05);

  spot.notice_s = 30 * kMinute;
  run.checkpoint.async = true;
  run.checkpoint.snapshot_s = 1;
  Offering dear = spot;
  dear.name = "dear spot";
  dear.price_per_gpu_hour = 5.0;
  const auto rows = estimate_costs(run, {on_demand(3.0), spot, dear}, opt);
  CHECK(std::count_if(rows.begin(), rows.end(), [](const CostEstimate& e) { return e.pricing == Pricing::mixed; }) == 1);
  try {
    (void)estimate_costs(run, {on_demand(3.0), dear}, opt);
    FAIL("a deadline with only a dearer spot offering was accepted");
  } catch (const CostInputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("no spot offering costs less per GPU-hour than od"));
  }

  opt.deadline_s = 100.1 * kHour;  // above the failure-free 100 h, below on-demand's expected time
  const auto tight = estimate_costs(run, {on_demand(3.0), spot}, opt);
  CHECK_THAT(tight[2].verdict, Catch::Contains("trials finished after the 4.17 days deadline") && Catch::Contains("on-demand alone is expected to take"));
  // Above on-demand's expected time by less than a restart: the run starts on on-demand (it had
  // started on spot and switched at an interruption, late in most trials) and is late as often as
  // on-demand alone, which the note says (it had said nothing, a probe's deadline 0.16 h over
  // on-demand's 11.84 h).
  opt.deadline_s = tight[0].expected_wall_s + 0.5 * tight[0].restart_s;
  const auto just = estimate_costs(run, {on_demand(3.0), spot}, opt);
  CHECK_THAT(just[2].verdict, Catch::Contains("trials finished after the") && Catch::Contains("every trial started on on-demand, late as often as on-demand alone"));
  CHECK(just[2].cost.mean == Approx(just[0].cost.mean).epsilon(0.01));
}

TEST_CASE("cost: Daly's interval for an async checkpoint is never under the write's time, so the trials save work and agree with the closed form") {
  // A 0.1 s snapshot, a 20-minute write and a failure every 10 hours: Daly's optimum from the
  // snapshot is about 85 s, so every snapshot would have replaced the write in flight and no
  // checkpoint would have become durable (the trials ran for many times the closed form's days).
  RunSpec run = daly_run(50 * kHour, 20 * kMinute, 30 * kMinute, 10 * kHour);
  run.checkpoint.async = true;
  run.checkpoint.snapshot_s = 0.1;
  CostOptions opt;
  opt.trials = 400;
  const auto rows = estimate_costs(run, {on_demand(3.0)}, opt);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].interval_s >= 20 * kMinute);
  CHECK(rows[0].finished == 400);
  CHECK(rows[0].wall_s.mean == Approx(rows[0].expected_wall_s).epsilon(0.05));
}

TEST_CASE("cost: an async checkpoint counts only once written, and the closed form charges the write's durability as its trials do") {
  // A 0.1 s snapshot of a 45-minute write, a failure every 1.25 hours (one per node-day on ~19
  // nodes, a 1 GB/s write of a 70B checkpoint): a failure during a write loses the segment before as
  // well. Daly's form with the snapshot as the cost was 45% under the trials here; the write's
  // durability is e^(write/M) per segment.
  const double write = 45 * kMinute, m = 1.25 * kHour;
  RunSpec run = daly_run(100 * kHour, write, 30 * kMinute, m);
  run.checkpoint.async = true;
  run.checkpoint.snapshot_s = 0.1;
  const double tau = 2 * kHour, restart = 30 * kMinute, solve = 100 * kHour;
  CHECK(daly_wall_time(solve, tau, 0.1, restart, m, write) == Approx(std::exp(write / m) * daly_wall_time(solve, tau, 0.1, restart, m)).epsilon(1e-12));
  // One segment ends in the finish, not a checkpoint: nothing to wait for.
  CHECK(daly_wall_time(solve, solve, 0.1, restart, m, write) == daly_wall_time(solve, solve, 0.1, restart, m));
  CostOptions opt;
  opt.trials = 400;
  const auto rows = estimate_costs(run, {on_demand(3.0)}, opt);
  REQUIRE(rows.size() == 1);
  REQUIRE(rows[0].finished == 400);
  CHECK(rows[0].wall_s.mean == Approx(rows[0].expected_wall_s).epsilon(0.04));
  // Spot preempted faster than its notice covers the write (lossy preemptions): the Weibull form
  // counts a segment saved once durable, as the Poisson one does.
  Offering spot = poisson_spot(10, 0, 0.002);
  spot.preemption.kind = PreemptionProcess::Kind::weibull;
  spot.preemption.shape = 1.0;
  spot.preemption.scale_hours = 1.0 / (0.002 * run.nodes);
  spot.preemption.zone = true;
  const auto weibull = estimate_costs(run, {on_demand(3.0), spot}, opt);
  REQUIRE(weibull.size() == 2);
  REQUIRE(weibull[1].finished == 400);
  CHECK(weibull[1].wall_s.mean == Approx(weibull[1].expected_wall_s).epsilon(0.05));
}

TEST_CASE("cost: spot holds cut by a lifetime, notices too short to save in, and holds shorter than their notice, in the closed form as in the trials") {
  // A 10-minute write, a failure every 50 hours, and spot preempted at 0.0003 per node-hour (a hold
  // of 33 h on average over 100 nodes) but never held past 3 h: nearly every hold ends at its
  // lifetime. Taken as exponential at one over the mean hold, the closed form was 35% under the
  // trials in a probe's case; the renewal form follows the cut holds.
  RunSpec run = daly_run(100 * kHour, 10 * kMinute, 15 * kMinute, 50 * kHour);
  CostOptions opt;
  opt.trials = 300;
  Offering capped = poisson_spot(30, 1800, 0.0003);
  capped.max_lifetime_s = 3 * kHour;
  const CostEstimate cut = estimate_costs(run, {on_demand(3.0), capped}, opt)[1];
  REQUIRE(cut.finished == cut.trials);
  CHECK(cut.expected_wall_s == Approx(cut.wall_s.mean).epsilon(0.05));
  // Its interval minimises that form (Daly's, for memoryless interruptions, lost the last segment
  // of most holds): the trials at Daly's interval take longer.
  RunSpec daly = run;
  daly.checkpoint.interval_s = daly_interval(10 * kMinute, cut.mtbi_s);
  const CostEstimate at_daly = estimate_costs(daly, {on_demand(3.0), capped}, opt)[1];
  CHECK(cut.interval_s != Approx(at_daly.interval_s).epsilon(0.01));
  CHECK(cut.wall_s.mean < at_daly.wall_s.mean);

  // A notice too short to save in is worked through, the write in flight included: any such notice
  // gives the trials of none (a second short of the write had taken 28% longer than none).
  Offering none = poisson_spot(0, 1800, 0.005);
  Offering almost = poisson_spot(10 * kMinute - 1, 1800, 0.005);
  const auto rows = estimate_costs(run, {on_demand(3.0), none, almost}, opt);
  CHECK(rows[1].wall_s.mean == rows[2].wall_s.mean);
  CHECK(rows[2].expected_wall_s == Approx(rows[2].wall_s.mean).epsilon(0.03));
  run.checkpoint.async = true;
  run.checkpoint.snapshot_s = 1;
  const auto async_rows = estimate_costs(run, {on_demand(3.0), none, almost}, opt);
  CHECK(async_rows[1].wall_s.mean == async_rows[2].wall_s.mean);
  CHECK(async_rows[2].expected_wall_s == Approx(async_rows[2].wall_s.mean).epsilon(0.03));

  // A hold shorter than its notice ends with the hold (the capacity was held a whole notice on,
  // 24% over the closed form): 2-hour notices, holds of 1 hour on average.
  Offering long_notice = poisson_spot(2 * kHour, 1800, 0.01);
  const CostEstimate held = estimate_costs(run, {on_demand(3.0), long_notice}, opt)[1];
  REQUIRE(held.finished == held.trials);
  CHECK(held.expected_wall_s == Approx(held.wall_s.mean).epsilon(0.03));
  CHECK(held.expected_cost == Approx(held.cost.mean).epsilon(0.03));
}

TEST_CASE("cost: the Monte Carlo reports its progress row by row, every hundredth of the trials and at the end") {
  RunSpec run = daly_run(20 * kHour, 1 * kMinute, 5 * kMinute, 50 * kHour);
  CostOptions opt;
  opt.trials = 250;
  std::vector<std::tuple<std::string, int, int>> calls;
  opt.progress = [&](const std::string& row, int done, int trials) { calls.emplace_back(row, done, trials); };
  const auto rows = estimate_costs(run, {on_demand(3.0), poisson_spot(120, 600, 0.001)}, opt);
  REQUIRE(rows.size() == 2);
  // Every other trial (250 / 100 rounds down to 2): 125 calls and the end, for each row.
  REQUIRE(calls.size() == 2 * 126);
  CHECK(calls.front() == std::tuple<std::string, int, int>{"od", 0, 250});
  CHECK(calls[125] == std::tuple<std::string, int, int>{"od", 250, 250});
  CHECK(std::get<0>(calls[126]) == rows[1].offering);
  CHECK(calls.back() == std::tuple<std::string, int, int>{rows[1].offering, 250, 250});
  for (std::size_t i = 1; i < calls.size(); ++i) {
    if (std::get<0>(calls[i]) == std::get<0>(calls[i - 1])) CHECK(std::get<1>(calls[i]) > std::get<1>(calls[i - 1]));
  }
  // Reporting changes nothing.
  opt.progress = nullptr;
  const auto quiet = estimate_costs(run, {on_demand(3.0), poisson_spot(120, 600, 0.001)}, opt);
  CHECK(quiet[1].wall_s.mean == rows[1].wall_s.mean);
}

TEST_CASE("cost: a capacity wait of 0 s is at once, unfinished trials make the percentiles past them infinite, and mixed falls back from a market that never has capacity") {
  RunSpec run = daly_run(20 * kHour, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  Offering spot = poisson_spot(120, 0, 0.002);
  CostOptions opt;
  opt.trials = 100;
  // Expectation: with no wait every trial finishes (a zero mean once drew an infinite wait).
  spot.capacity_wait_s = 0;
  const auto zero = estimate_costs(run, {on_demand(3.0), spot}, opt);
  CHECK(zero[1].finished == 100);
  CHECK(std::isfinite(zero[1].wall_s.p99));

  // A market with no capacity for most of a long cycle: few trials finish within 3 x the work.
  // Expectation: P50 (and past it) is infinite when over half the trials are unfinished, and $/M
  // tokens is left unset; the finished trials alone would have given a P50 near the work.
  Offering scarce = spot;
  scarce.name = "scarce";
  scarce.preemption = {};
  scarce.preemption.kind = PreemptionProcess::Kind::trace;
  scarce.preemption.availability = {{0, true}, {25 * kHour, false}, {1000 * kHour, true}};
  opt.cap_factor = 3;
  const auto rows = estimate_costs(run, {on_demand(3.0), scarce}, opt);
  const CostEstimate& s = rows[1];
  REQUIRE(s.finished < 50);
  REQUIRE(s.finished > 0);
  // The finished trials keep their own numbers (distributions.csv had renumbered them 0, 1, ...), so
  // a row matches its trial and seed: rising, under the trials run, and with gaps where trials did
  // not finish.
  REQUIRE(s.finished_trials.size() == static_cast<std::size_t>(s.finished));
  CHECK(std::adjacent_find(s.finished_trials.begin(), s.finished_trials.end(), std::greater_equal<>()) == s.finished_trials.end());
  CHECK(s.finished_trials.back() < 100);
  CHECK(s.finished_trials.back() >= s.finished);
  CHECK(std::isinf(s.wall_s.p50));
  CHECK(std::isinf(s.wall_s.p99));
  CHECK(std::isinf(s.cost.mean));
  CHECK(s.cost_per_million_tokens == 0);

  // Expectation: with a deadline, a market that never has capacity gets no mixed row (spot alone
  // cannot finish, so on-demand alone is the answer), and its spot row says so.
  Offering never = spot;
  never.name = "never";
  never.preemption = {};
  never.preemption.kind = PreemptionProcess::Kind::trace;
  never.preemption.availability = {{0, false}, {100 * kHour, false}};
  opt.cap_factor = 100;
  opt.deadline_s = 40 * kHour;
  const auto mixed = estimate_costs(run, {on_demand(3.0), never}, opt);
  CHECK(std::none_of(mixed.begin(), mixed.end(), [](const CostEstimate& e) { return e.pricing == Pricing::mixed; }));
  const auto n = std::find_if(mixed.begin(), mixed.end(), [](const CostEstimate& e) { return e.offering == "never"; });
  REQUIRE(n != mixed.end());
  CHECK_FALSE(n->can_finish);
  CHECK_THAT(n->verdict, Catch::Contains("no mixed row with od: spot alone cannot finish"));
}

TEST_CASE("cost: a mixed row only for spot capacity that can be taken away and is expected to cost less than on-demand") {
  // A probe's finds: a spot market never preempted went 100% on on-demand behind a reserve that
  // counted a wait for capacity that cannot come (twice the spot row's cost); and markets past their
  // break-even gave mixed rows that cost less the more often spot failed, and more than on-demand alone.
  const RunSpec run = one_node_run(18 * kHour);
  Offering od = on_demand(4.0);
  Offering calm = poisson_spot(6 * 3600, 0, 0.0);
  calm.name = "calm";
  calm.preemption = {};  // kind none: never preempted
  calm.price_per_gpu_hour = 2.0;
  Offering stormy = poisson_spot(0, 0.1 * kHour, 6.0);  // 6 preemptions a node-hour, without notice
  stormy.name = "stormy";
  stormy.price_per_gpu_hour = 2.0;
  Offering fair = poisson_spot(3600, 0, 0.02);
  fair.name = "fair";
  fair.price_per_gpu_hour = 2.0;
  CostOptions opt;
  opt.trials = 100;
  opt.deadline_s = 36 * kHour;
  const auto rows = estimate_costs(run, {od, calm, stormy, fair}, opt);
  const auto row = [&](const std::string& name) {
    const auto it = std::find_if(rows.begin(), rows.end(), [&](const CostEstimate& e) { return e.offering == name; });
    REQUIRE(it != rows.end());
    return *it;
  };
  CHECK_THAT(row("calm").verdict, Catch::Contains("no mixed row with od: this capacity is never preempted"));
  CHECK_THAT(row("stormy").verdict, Catch::Contains("no mixed row with od"));
  CHECK(row("fair").expected_cost < row("od").expected_cost);
  CHECK(row("fair + od").pricing == Pricing::mixed);
  CHECK(std::count_if(rows.begin(), rows.end(), [](const CostEstimate& e) { return e.pricing == Pricing::mixed; }) == 1);
}

TEST_CASE("cost: a trace repeats, so the change where it wraps round is a loss like any other, and a trace never available cannot finish") {
  RunSpec run = daly_run(20 * kHour, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  Offering off_first = poisson_spot(120, 0, 0.0);
  off_first.name = "off first";
  off_first.preemption = {};
  off_first.preemption.kind = PreemptionProcess::Kind::trace;
  off_first.preemption.availability = {{0, false}, {10 * kHour, true}, {100 * kHour, true}};
  Offering on_first = off_first;
  on_first.name = "on first";
  on_first.preemption.availability = {{0, true}, {90 * kHour, false}, {100 * kHour, true}};
  // Expectation: the same market seen from another start: one loss per 90 available hours and 10-h
  // waits, for both (the off-first trace counted no loss: the failure-free time at the price ratio).
  for (const Offering* o : {&off_first, &on_first}) {
    CHECK(o->preemption.trace_losses_per_available_hour() == Approx(1.0 / 90));
    CHECK(o->preemption.trace_mean_unavailable_s() == Approx(10 * kHour));
  }
  CostOptions opt;
  opt.trials = 400;
  const auto rows = estimate_costs(run, {on_demand(3.0), off_first, on_first}, opt);
  CHECK(rows[1].expected_wall_s == Approx(rows[2].expected_wall_s).epsilon(1e-12));
  CHECK(rows[1].expected_wall_s > 1.1 * run.work_s);
  for (int i : {1, 2}) CHECK(rows[static_cast<std::size_t>(i)].wall_s.mean == Approx(rows[static_cast<std::size_t>(i)].expected_wall_s).epsilon(0.1));

  Offering never = off_first;
  never.name = "never";
  never.preemption.availability = {{0, false}, {10 * kHour, false}};
  CHECK(std::isinf(never.preemption.trace_losses_per_available_hour()));
  const auto none = estimate_costs(run, {on_demand(3.0), never}, opt);
  CHECK_FALSE(none[1].can_finish);
  CHECK(std::isinf(none[1].expected_cost));
  CHECK(none[1].finished == 0);
  CHECK(none[1].verdict.find("never has capacity") != std::string::npos);
}

TEST_CASE("cost: the closed-form expected cost bills each stretch of holding rounded up to the billing granularity, as the trials do") {
  RunSpec run = daly_run(6 * kHour, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  Offering daily = on_demand(2.0);
  daily.name = "daily";
  daily.billing_granularity_s = 86400;
  Offering hourly_spot = poisson_spot(120, 1800, 0.02);
  hourly_spot.name = "hourly spot";
  hourly_spot.billing_granularity_s = kHour;
  Offering per_second_spot = hourly_spot;
  per_second_spot.name = "per-second spot";
  per_second_spot.billing_granularity_s = 1;
  CostOptions opt;
  opt.trials = 2000;
  const auto rows = estimate_costs(run, {on_demand(2.0), daily, hourly_spot, per_second_spot}, opt);
  // Expectation: a 6-h run billed by the day costs a day, in every trial and in the closed form (it
  // gave the 6 h); spot billed by the hour pays about half an hour more per stretch of holding.
  CHECK(rows[1].cost.p50 == Approx(run.gpus * 24 * 2.0));
  CHECK(rows[1].expected_cost == Approx(run.gpus * 24 * 2.0));
  CHECK(rows[0].expected_cost == Approx(rows[0].cost.mean).epsilon(0.01));
  CHECK(rows[2].expected_cost == Approx(rows[2].cost.mean).epsilon(0.05));
  CHECK(rows[2].expected_cost > rows[3].expected_cost * 1.05);
  // Stretches short against the granularity each bill a whole day, the last one too: within 10% of
  // the trials (the last stretch rounded up by half a day had made it 20% low), and a vanishing
  // preemption rate bills as none (its formula had been infinity minus infinity).
  RunSpec one_node = run;
  one_node.nodes = 1;
  one_node.gpus = 8;
  Offering daily_spot = poisson_spot(120, 600, 0.2);
  daily_spot.name = "daily spot";
  daily_spot.billing_granularity_s = 86400;
  Offering rare = daily_spot;
  rare.name = "rare";
  rare.preemption.rate_per_node_hour = 1e-310;
  const auto long_bills = estimate_costs(one_node, {on_demand(2.0), daily_spot, rare}, opt);
  CHECK(long_bills[1].expected_cost == Approx(long_bills[1].cost.mean).epsilon(0.1));
  CHECK(long_bills[2].expected_cost == Approx(one_node.gpus * 24 * 1.0));
  // The break-even of the hourly row is lower: its stretches cost more.
  REQUIRE(rows[2].break_even_preemptions_per_node_hour.has_value());
  REQUIRE(rows[3].break_even_preemptions_per_node_hour.has_value());
  CHECK(*rows[2].break_even_preemptions_per_node_hour < *rows[3].break_even_preemptions_per_node_hour);
}

TEST_CASE("cost: Weibull holds of shape below 1 shorter on average than the restart still finish, in the closed form as in the trials") {
  // 32 nodes, Weibull(0.5, 45 h) each: the job's hold is the first of 32, Weibull(0.5, 2.6 min),
  // 5.3 minutes on average against a 15-minute restart, but a hold that outlives the restart goes on
  // far longer. Taking the holds as exponential of their mean, the closed form said 330 x the
  // failure-free time, "cannot finish", beside trials that all finished near 50 x.
  RunSpec run = daly_run(12 * kHour, 20, 15 * kMinute, 1e12);
  run.nodes = 32;
  run.gpus = 256;
  run.reliability.failures_per_1000_node_days = 3.79;
  for (const double notice : {5.0, 30.0}) {  // lossy (short of the 20 s write), then saved
    INFO("notice " << notice);
    Offering spot = poisson_spot(notice, kHour, 0.0);
    spot.preemption.kind = PreemptionProcess::Kind::weibull;
    spot.preemption.shape = 0.5;
    spot.preemption.scale_hours = 45;
    CostOptions opt;
    opt.trials = 100;
    const CostEstimate e = estimate_costs(run, {on_demand(3.0), spot}, opt)[1];
    REQUIRE(e.finished == e.trials);
    CHECK(e.can_finish);
    CHECK(e.wall_s.mean > 20 * run.work_s);
    CHECK(e.expected_wall_s == Approx(e.wall_s.mean).epsilon(0.06));
  }
}

TEST_CASE("cost: the Weibull closed form at small shapes: integrals over many decades, and holds cut where the job ends") {
  // Shape 0.1 spreads S over 16 decades: one Gauss-Kronrod over the range missed its mass (the sum
  // of saved segments 90% low), so adding a failure rate of 1e-9 a second made the job 7 times
  // faster. Continuity: no failures and failures every 30,000 years give the same closed form (at
  // shape 0.1 the mean hold is 7 years, so rarer failures than that are needed to change nothing).
  RunSpec run = daly_run(36 * kHour, 20, 15 * kMinute, 1e12);
  run.nodes = 1;
  run.gpus = 8;
  Offering spot = poisson_spot(5.0, kHour, 0.0);  // a 5 s notice: short of the 20 s write, lossy
  spot.preemption.kind = PreemptionProcess::Kind::weibull;
  CostOptions opt;
  opt.trials = 100;
  for (const double shape : {0.1, 0.2, 0.3}) {
    INFO("shape " << shape);
    spot.preemption.shape = shape;
    spot.preemption.scale_hours = 1.0 / 60;  // one minute
    run.reliability.failures_per_1000_node_days = 0;
    const CostEstimate none = estimate_costs(run, {on_demand(3.0), spot}, opt)[1];
    run.reliability.failures_per_1000_node_days = 1000.0 * 86400.0 / 1e12;  // one every 1e12 s
    const CostEstimate rare = estimate_costs(run, {on_demand(3.0), spot}, opt)[1];
    CHECK(rare.expected_wall_s == Approx(none.expected_wall_s).epsilon(1e-3));
  }
  // Holds far longer than the job (shape 1 and 100, a scale of years against 12 hours): almost no
  // preemption comes, and the closed form is the failure-free run's, as its trials and the Poisson
  // form say (a hold cut at the job's end had been charged a restart, a notice and a wait: 2 x a
  // short run's time).
  for (const double notice : {30.0, 5.0}) {  // saved, then lossy
    for (const double shape : {1.0, 100.0}) {
      INFO("notice " << notice << " shape " << shape);
      RunSpec brief = daly_run(12 * kHour, 20, 15 * kMinute, 1e12);
      brief.nodes = 32;
      brief.gpus = 256;
      brief.reliability.failures_per_1000_node_days = 0;
      Offering calm = poisson_spot(notice, kHour, 1.0 / (3650 * 24.0));
      Offering lasting = calm;
      lasting.preemption.kind = PreemptionProcess::Kind::weibull;
      lasting.preemption.shape = shape;
      lasting.preemption.scale_hours = 3650 * 24.0;
      const auto rows = estimate_costs(brief, {on_demand(3.0), calm, lasting}, opt);
      CHECK(rows[2].expected_wall_s == Approx(rows[2].wall_s.mean).epsilon(0.01));
      if (shape == 1.0) CHECK(rows[2].expected_wall_s == Approx(rows[1].expected_wall_s).epsilon(0.01));
    }
  }
  // Holds whose mean exceeds the job (shape 0.2, a minute's scale: 2 hours on average against 36
  // hours of work, most far shorter, a few far longer): a hold that outlives the job counts only
  // the job's work. Uncut, the closed form was 37% under the trials; cut, it is within 20%.
  spot.preemption.shape = 0.2;
  spot.notice_s = 60;  // saved preemptions
  run.reliability.failures_per_1000_node_days = 3.79;
  const CostEstimate e = estimate_costs(run, {on_demand(3.0), spot}, opt)[1];
  REQUIRE(e.finished == e.trials);
  CHECK(e.expected_wall_s == Approx(e.wall_s.mean).epsilon(0.2));
}

TEST_CASE("cost: a maximum lifetime ends each hold at E[min(X, T)] on average, in the closed form as in the trials") {
  // Expectations: preemptions at 1 an hour for the job (100 nodes x 0.01) beside a 1-hour lifetime
  // end a hold every (1 - e^-1) h on average, 1.58 an hour, not max(1, 1/T) = 1 (the closed form
  // had taken that: 15% short in wall time against a probe's trials); the closed form's wall time
  // and cost then agree with the trials within 5%; a Weibull lifetime of shape 2 cut short by the
  // lifetime ends its holds at the regularized incomplete gamma's mean.
  RunSpec run = daly_run(100 * kHour, 1 * kMinute, 5 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  // A 30 s notice, short of the 1-minute write: each preemption loses work (and counts in mtbi_s).
  Offering spot = poisson_spot(30, 1800, 0.01);
  spot.max_lifetime_s = 1 * kHour;
  CostOptions opt;
  opt.trials = 200;
  const CostEstimate e = estimate_costs(run, {on_demand(3.0), spot}, opt)[1];
  REQUIRE(e.finished == e.trials);
  CHECK(e.expected_wall_s == Approx(e.wall_s.mean).epsilon(0.05));
  CHECK(e.expected_cost == Approx(e.cost.mean).epsilon(0.05));
  CHECK(e.mtbi_s == Approx(kHour * (1 - std::exp(-1.0))).epsilon(1e-9));
  // Every node of one zone at once, Weibull(2, 2 h), cut at 1 h.
  spot.preemption = {};
  spot.preemption.kind = PreemptionProcess::Kind::weibull;
  spot.preemption.shape = 2;
  spot.preemption.scale_hours = 2;
  spot.preemption.zone = true;
  const CostEstimate w = estimate_costs(run, {on_demand(3.0), spot}, opt)[1];
  REQUIRE(w.finished == w.trials);
  // E[min(W, 1 h)] = 2 h x Gamma(1.5) x P(0.5, 0.25) = 0.9226 h.
  CHECK(w.mtbi_s == Approx(0.9226 * kHour).epsilon(1e-3));
  // The closed form follows the holds themselves (renewal-reward; taking them as exponential of that
  // mean had been 6% over the trials here).
  CHECK(w.expected_wall_s == Approx(w.wall_s.mean).epsilon(0.02));
  // A lifetime far inside a steep Weibull's scale: every hold lasts the lifetime. ((T/eta)^k had
  // underflowed to 0, the rate gone to infinity, and the row said it could never finish.)
  spot.preemption.shape = 100;
  spot.preemption.scale_hours = 2000;
  const CostEstimate steep = estimate_costs(run, {on_demand(3.0), spot}, opt)[1];
  CHECK(steep.can_finish);
  CHECK(steep.mtbi_s == Approx(kHour).epsilon(1e-9));
  // Cheaper by the hour than on-demand, dearer once its lifetime's preemptions are paid for: the
  // break-even says which ("no cheaper than on-demand unpreempted" had blamed the price).
  Offering capped = poisson_spot(30, 1800, 0.01);
  capped.price_per_gpu_hour = 2.9;
  capped.max_lifetime_s = 0.2 * kHour;
  const CostEstimate dear = estimate_costs(run, {on_demand(3.0), capped}, opt)[1];
  REQUIRE(dear.break_even_preemptions_per_node_hour);
  CHECK(*dear.break_even_preemptions_per_node_hour == 0);
  CHECK(dear.break_even_none == "dearer than on-demand at its lifetime's preemptions alone");
  // A lifetime past the run with a 30-day billing granularity: the billing is to blame, not the
  // lifetime (a review's find).
  capped.max_lifetime_s = 1000 * kHour;
  capped.billing_granularity_s = 30 * 24 * kHour;
  const CostEstimate billed = estimate_costs(run, {on_demand(3.0), capped}, opt)[1];
  REQUIRE(billed.break_even_preemptions_per_node_hour);
  CHECK(*billed.break_even_preemptions_per_node_hour == 0);
  CHECK(billed.break_even_none == "no cheaper than on-demand unpreempted");
}

TEST_CASE("cost: an elastic row keeps each replica's maximum lifetime") {
  // Expectations: without preemptions, every replica taken at the start reaches a 10-hour lifetime
  // at once, and the elastic row stops and waits as the whole job does (it had ignored the lifetime
  // and run 100 h without an interruption); with preemptions, replicas back at different times
  // reach their lifetimes apart, and each departure costs a restart: more interruptions than
  // without a lifetime.
  const RunSpec run = eight_replicas(100 * kHour);
  Offering spot = poisson_spot(120, 1 * kHour, 0);
  spot.max_lifetime_s = 10 * kHour;
  const CostOptions opt = elastic_options(100);
  const auto calm = estimate_costs(run, {on_demand(3.0), spot}, opt);
  REQUIRE(calm.size() == 3);
  REQUIRE(calm[2].offering == "spot (elastic)");
  CHECK(calm[1].mean_interruptions >= 9);
  CHECK(calm[2].mean_interruptions == Approx(calm[1].mean_interruptions).epsilon(1e-9));
  CHECK(calm[2].wall_s.mean == Approx(calm[1].wall_s.mean).epsilon(1e-9));
  spot.preemption.rate_per_node_hour = 0.02;
  const CostEstimate capped = estimate_costs(run, {on_demand(3.0), spot}, opt)[2];
  spot.max_lifetime_s = 0;
  const CostEstimate free = estimate_costs(run, {on_demand(3.0), spot}, opt)[2];
  CHECK(capped.mean_interruptions > free.mean_interruptions + 9);
  CHECK(capped.wall_s.mean > free.wall_s.mean);
}

TEST_CASE("cost: a replica that leaves or returns during an elastic restart joins that restart rather than beginning it afresh") {
  // Expectation: 64 replicas whose 1-hour lifetimes fall apart after a preemption leave and return
  // every half minute or so, against a 15-minute restart. Each change beginning the restart afresh,
  // no trial had finished within 100 x its work (a review's find); joining the restart under way,
  // every one does, slower than stopping the whole job at each lifetime's end.
  RunSpec run = daly_run(90 * kHour, 0.5 * kMinute, 15 * kMinute, 1e12);
  run.reliability.failures_per_1000_node_days = 0;
  run.nodes = 64;
  run.gpus = 512;
  run.dp_replicas = 64;
  Offering spot = poisson_spot(30, 1800, 0.001);
  spot.max_lifetime_s = 1 * kHour;
  const auto rows = estimate_costs(run, {on_demand(4.0), spot}, elastic_options(20));
  REQUIRE(rows.size() == 3);
  const CostEstimate& elastic = rows[2];
  REQUIRE(elastic.offering == "spot (elastic)");
  CHECK(elastic.finished == 20);
  CHECK(elastic.wall_s.mean > rows[1].wall_s.mean);
}

TEST_CASE("cost: holds cut by a lifetime take the renewal form whatever ends them, the interval that form prefers, and one break-even per market") {
  // Expectations (a probe's cases, scaled down): a lifetime with no preemptions at all (kind none)
  // is the same market as a Poisson rate of 1e-9 with that lifetime, in the closed form as in the
  // trials (it had taken the exponential form at one over the lifetime: 18% slow); a higher rate
  // never finishes sooner (the interval search had stopped between the saw-teeth a lifetime makes:
  // 5,000 times the preemptions came out faster); the break-even rate is the market's, not the
  // row's own (two rows of one lifetime had 0.37 and 1.03 preemptions per node-hour).
  RunSpec run = daly_run(40 * kHour, 30, 15 * kMinute, 1e12);
  run.nodes = 2;
  run.gpus = 16;
  run.reliability.failures_per_1000_node_days = 10;
  CostOptions opt;
  opt.trials = 200;
  Offering none = poisson_spot(0, 0, 0);
  none.name = "none";
  none.preemption.kind = PreemptionProcess::Kind::none;
  none.max_lifetime_s = 2 * kHour;
  Offering tiny = poisson_spot(0, 0, 1e-9);
  tiny.name = "tiny";
  tiny.max_lifetime_s = 2 * kHour;
  Offering more = poisson_spot(0, 0, 0.005);
  more.name = "more";
  more.max_lifetime_s = 2 * kHour;
  const auto rows = estimate_costs(run, {on_demand(2.0), none, tiny, more}, opt);
  const CostEstimate &n = rows[1], &t = rows[2], &m = rows[3];
  REQUIRE(n.finished == n.trials);
  CHECK(n.interval_s == Approx(t.interval_s).epsilon(1e-6));
  CHECK(n.expected_wall_s == Approx(t.expected_wall_s).epsilon(1e-6));
  CHECK(n.expected_wall_s == Approx(n.wall_s.mean).epsilon(0.03));
  CHECK(t.expected_wall_s <= m.expected_wall_s);
  CHECK(t.wall_s.mean <= m.wall_s.mean * 1.005);
  // The interval found is no worse than any count of whole segments a hold could fit.
  for (double j = 1; j <= 40; ++j) {
    RunSpec fixed = run;
    fixed.checkpoint.interval_s = (2 * kHour - (15 * kMinute)) / j - 30 - 1e-3;
    if (fixed.checkpoint.interval_s < 30) break;
    CostOptions one = opt;
    one.trials = 1;
    CHECK(estimate_costs(fixed, {on_demand(2.0), tiny}, one)[1].expected_wall_s >= t.expected_wall_s * (1 - 1e-9));
  }
  REQUIRE(t.break_even_preemptions_per_node_hour);
  REQUIRE(m.break_even_preemptions_per_node_hour);
  CHECK(*t.break_even_preemptions_per_node_hour > 0);
  CHECK(*t.break_even_preemptions_per_node_hour == Approx(*m.break_even_preemptions_per_node_hour).epsilon(1e-3));
}

TEST_CASE("cost: a mixed row keeps a rarely preempted market on spot: its reserve is weighted by the chance of a preemption") {
  // A probe's find: CoreWeave's shipped 0.00027 preemptions a node-hour and 1.1 h wait, a 19 h run with
  // 2.35 h of slack before its deadline. A reserve of a whole wait for capacity (3.4 h) started every
  // trial on on-demand, at twice the spot row's cost, where a preemption comes in 0.5% of runs.
  const RunSpec run = one_node_run(18 * kHour);
  Offering od = on_demand(4.0);
  Offering rare = poisson_spot(30, 1.1 * kHour, 0.00027);
  rare.name = "rare";
  rare.price_per_gpu_hour = 2.0;
  CostOptions opt;
  opt.trials = 200;
  opt.deadline_s = 21 * kHour;
  const auto rows = estimate_costs(run, {od, rare}, opt);
  const auto mixed = std::find_if(rows.begin(), rows.end(), [](const CostEstimate& e) { return e.pricing == Pricing::mixed; });
  REQUIRE(mixed != rows.end());
  CHECK(mixed->on_demand_fraction < 0.05);
  CHECK(mixed->started_on_demand == 0);
  const auto spot = std::find_if(rows.begin(), rows.end(), [](const CostEstimate& e) { return e.offering == "rare"; });
  REQUIRE(spot != rows.end());
  CHECK(mixed->cost.mean < 1.1 * spot->cost.mean);
}
