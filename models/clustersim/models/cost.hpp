// What a run costs and when it finishes on each way of buying capacity (docs/cost.md).
//
// A run is `work` seconds of failure-free training on `nodes` nodes, checkpointed every interval.
// Interruptions: hardware failures (Poisson, a rate per node-day) lose the work since the last
// checkpoint and cost detection + restart; spot preemptions (Poisson or Weibull, per node or per zone)
// come with a notice: when the notice covers a checkpoint write the job saves and loses nothing,
// otherwise it loses what a failure loses; then it waits for capacity (not billed) and restarts.
//
// Closed forms: Young's interval sqrt(2 delta M), Daly's (2006) higher-order interval and expected
// wall time T_w = M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau, with noticed preemptions added as a
// fixed cost each. The Monte Carlo runs the whole job on the event engine, trial by trial (seeded),
// and gives the distributions of finish time and cost.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "clustersim/common/input_error.hpp"

namespace cs::models {

enum class Pricing { on_demand, spot, reserved, owned, mixed };
std::string_view to_string(Pricing p);

// Spot preemptions: Poisson (a rate per node-hour), a Weibull instance lifetime, independent per
// node or one event for the whole zone (a zone is one failure group), or a replayed availability
// trace of the market (the whole job loses and regains capacity when the trace says).
struct PreemptionProcess {
  enum class Kind { none, poisson, weibull, trace } kind = Kind::none;
  double rate_per_node_hour = 0;  // poisson
  double shape = 1;               // weibull k (< 1: early preemptions likelier)
  double scale_hours = 0;         // weibull eta of one instance
  bool zone = false;
  // trace: (seconds from the trace's start, capacity available from then on), sorted, starting at 0;
  // the last entry's time is the trace's end, after which it repeats. Each trial starts at a random
  // offset into it.
  std::vector<std::pair<double, bool>> availability;
  // The trace's losses per available hour and mean unavailable spell (s), for the closed forms.
  [[nodiscard]] double trace_losses_per_available_hour() const;
  [[nodiscard]] double trace_mean_unavailable_s() const;
};

struct Offering {
  std::string name, provider, region, gpu;
  SourceLocation where;            // its entry in the cost sheet
  int gpus_per_node = 8;
  Pricing pricing = Pricing::on_demand;
  double price_per_gpu_hour = 0;   // USD (on-demand, spot, reserved)
  double billing_granularity_s = 1;
  std::string as_of, source;
  // reserved / committed
  double term_hours = 0;
  double upfront_per_gpu = 0;
  // spot
  PreemptionProcess preemption;
  double notice_s = 0;
  double capacity_wait_s = 0;      // mean time to get capacity back (exponential)
  double max_lifetime_s = 0;       // 0: none (GCP preemptible VMs: 24 h)
  // owned
  double capex_per_gpu = 0;        // server and network share included
  double lifetime_years = 3;
  double wacc = 0;                 // cost of capital per year
  double power_w_per_gpu = 0;      // at the wall, server share included
  double pue = 1;
  double price_per_kwh = 0;
  double utilisation = 1;

  // The price of one GPU-hour of use: the list price; reserved adds its upfront over the term; owned
  // is (capex x CRF(wacc, life) + power x PUE x 8,760 h x price) / (8,760 h x utilisation).
  [[nodiscard]] double effective_price_per_gpu_hour() const;
};

struct Reliability {
  double failures_per_1000_node_days = 0;
  double detect_s = 0;
  double restart_s = 0;
};

struct Checkpointing {
  double bytes = 0;            // one checkpoint (weights and optimizer state)
  double write_bandwidth = 0;  // bytes/s the whole job writes (and reads) at
  bool async = false;          // training resumes after a snapshot to host memory; the write follows
  double snapshot_s = 0;       // async: the pause
  double interval_s = 0;       // 0: Daly's optimum
};

struct RunSpec {
  double work_s = 0;           // failure-free training time (step time x steps)
  int nodes = 1;
  // GPUs held and billed: every GPU of the nodes the job runs on, as offerings rent whole nodes (a
  // plan of 12 GPUs on 8-GPU nodes pays for 16).
  int gpus = 1;
  double tokens = 0;           // for cost per million tokens
  int dp_replicas = 1;         // data-parallel replicas (elastic shrink drops one per preempted node)
  Reliability reliability;
  Checkpointing checkpoint;
};

// Closed forms (delta: checkpoint time, M: mean time between interruptions, R: restart, T_s: solve
// time, tau: compute between checkpoints; seconds).
double young_interval(double delta, double mtbf);
double daly_interval(double delta, double mtbf);
// write: for an async checkpoint, the write's time after its snapshot (delta then the snapshot);
// 0 for a blocking one. A checkpoint counts only once written, so each segment is reached at
// e^(write/M) over Daly's cost (see daly_wall_time).
double daly_wall_time(double solve, double tau, double delta, double restart, double mtbf, double write = 0);

struct CostOptions {
  int trials = 1000;
  std::uint64_t seed = 1;
  double deadline_s = 0;       // mixed: finish by this wall time (0: no mixed row)
  double cap_factor = 100;     // a trial that needs more than this x work_s does not finish
  bool elastic = false;        // add an elastic row for each per-node spot offering (dp_replicas > 1)
  // Called as a row's trials run (every hundredth of them and at the end): its name, trials done, trials.
  std::function<void(const std::string&, int, int)> progress;
};

struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

struct CostEstimate {
  std::string offering;        // "spot-name + on-demand-name" for mixed
  Pricing pricing = Pricing::on_demand;
  double price_per_gpu_hour = 0;           // mixed: while on spot
  double fallback_price_per_gpu_hour = 0;  // mixed: on on-demand after the switch
  double interval_s = 0, checkpoint_s = 0, restart_s = 0;
  double mtbi_s = 0;           // mean time between work-losing interruptions
  bool can_finish = true;
  std::string verdict;         // why not, when it cannot finish
  double expected_wall_s = 0;  // closed form
  double expected_cost = 0;
  int trials = 0, finished = 0;
  int started_on_demand = 0;   // mixed: trials the deadline started on on-demand (no slack for spot)
  Distribution wall_s, cost;
  double mean_interruptions = 0;
  double gpu_hours_lost_per_event = 0;
  double cost_per_million_tokens = 0;  // mean cost / tokens
  double on_demand_fraction = 0;       // mixed: share of billed GPU-hours on on-demand
  std::optional<double> break_even_preemptions_per_node_hour;  // spot: where it costs as much as on-demand
  bool break_even_per_zone = false;    // that rate is per zone-hour (a zone's nodes go together)
  std::string break_even_none;         // spot whose break-even is 0: why ("no cheaper than on-demand unpreempted")
  std::optional<double> break_even_utilisation;                // owned: where it costs as much as on-demand
  std::vector<double> walls, costs;    // every finished trial, in trial order
  std::vector<int> finished_trials;    // their trial numbers (each trial's seed follows from it)
};

// The Monte Carlo's bounds (docs/cost.md, "Bounds"), checked before any trial runs. A trial's clock
// is the event engine's (2^62 - 1 nanoseconds, about 146 years: sim::Time::kLimit), less two seconds for the
// events it clamps past its cap: no simulated duration (the failure-free time, a checkpoint write, a
// restart) may be longer. And one trial is expected to simulate at most kMaxTrialEvents
// interruptions and checkpoints, counted before it runs from the closed form's expected wall time
// (or the cap, when it cannot finish sooner): far above real runs (Llama 3 70B on 32 nodes for 49
// days: about 800 checkpoints and 6 failures), and about half a second per trial at the bound.
inline constexpr double kMaxTrialEvents = 1e6;
inline constexpr const char* kMaxTrialEventsText = "1,000,000";
[[nodiscard]] double simulated_time_limit_s();

// A run estimate_costs refuses to simulate: past the bounds above, or a checkpoint interval shorter
// than the checkpoint's own write. `input` is the input to blame, for the caller to point at where
// it was given; `offering` the offering whose spot preemptions are blamed.
class CostInputError : public std::invalid_argument {
 public:
  enum class Input { train_tokens, failures, reliability, preemption, write_bandwidth, interval, deadline };
  CostInputError(Input input, std::string offering, const std::string& message)
      : std::invalid_argument(message), input_(input), offering_(std::move(offering)) {}
  [[nodiscard]] Input input() const { return input_; }
  [[nodiscard]] const std::string& offering() const { return offering_; }

 private:
  Input input_;
  std::string offering_;
};

// One row per offering (and a mixed row when a deadline is given and spot and on-demand offerings
// exist). Throws CostInputError for a run past the bounds above, std::invalid_argument for a spec
// it cannot cost at all (no work, no checkpoint bandwidth).
std::vector<CostEstimate> estimate_costs(const RunSpec& run, const std::vector<Offering>& offerings, const CostOptions& options);

}  // namespace cs::models
