#include "clustersim/models/cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include <boost/math/quadrature/gauss_kronrod.hpp>
#include <boost/math/special_functions/gamma.hpp>
#include <fmt/format.h>

#include "clustersim/common/sampling.hpp"
#include "clustersim/sim/simulator.hpp"

namespace cs::models {

namespace {

constexpr double kHour = 3600.0;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A spot hold under Weibull instance lifetimes: the first of n lifetimes Weibull(k, eta), itself
// Weibull(k, eta' = eta n^(-1/k)), cut at the maximum lifetime T (infinite without one). The trials
// draw it, the closed forms integrate it.
struct WeibullHold {
  double k = 1, eta = 1, lifetime = kInfinity;
  WeibullHold(const PreemptionProcess& p, double nodes, double max_lifetime)
      : k(p.shape), eta(p.scale_hours * kHour * std::pow(nodes, -1.0 / p.shape)),
        lifetime(max_lifetime > 0 ? max_lifetime : kInfinity) {}
  // P(hold > t).
  [[nodiscard]] double survival(double t) const { return t >= lifetime ? 0.0 : std::exp(-std::pow(t / eta, k)); }
  // An uncut draw from the uniform u in (0, 1].
  [[nodiscard]] double draw(double u) const { return eta * std::pow(-std::log(u), 1.0 / k); }
  // The integral of S from a to b: eta' Gamma(1 + 1/k) times the difference of the regularized
  // incomplete gammas at (t/eta')^k, the lower ones' where both ends are inside the scale (the upper
  // ones would cancel there), and b - a where S stays 1 to 1e-12 (a steep shape far inside its scale,
  // where even the lower ones underflow: the mean hold had gone to 0 and the rate to infinity).
  // held_between(0, inf) is the mean hold.
  [[nodiscard]] double held_between(double a, double b) const {
    b = std::min(b, lifetime);
    if (!(a < b)) return 0.0;
    const double xa = std::pow(a / eta, k), xb = std::isfinite(b) ? std::pow(b / eta, k) : kInfinity;
    if (xb < 1e-12) return b - a;
    const double g = eta * std::tgamma(1.0 + 1.0 / k);
    if (xb <= 1) return g * (boost::math::gamma_p(1.0 / k, xb) - boost::math::gamma_p(1.0 / k, xa));
    return g * (boost::math::gamma_q(1.0 / k, xa) - (std::isfinite(xb) ? boost::math::gamma_q(1.0 / k, xb) : 0.0));
  }
};

// Adds a note to a row's verdict.
void add_note(CostEstimate& e, const std::string& note) { e.verdict = e.verdict.empty() ? note : e.verdict + "; " + note; }

// "2.7 s", "88 min", "3.2 h", "48.9 days", "1.3e+17 years", for messages.
std::string duration(double s) {
  if (!std::isfinite(s)) return "forever";
  if (s < 120) return fmt::format("{:.3g} s", s);
  if (s < 2 * kHour) return fmt::format("{:.3g} min", s / 60);
  if (s < 2 * 86400.0) return fmt::format("{:.3g} h", s / kHour);
  if (s < 2 * 365.25 * 86400.0) return fmt::format("{:.3g} days", s / 86400.0);
  const double years = s / (365.25 * 86400.0);
  return years < 1e6 ? fmt::format("{:.0f} years", years) : fmt::format("{:.3g} years", years);
}

// Two durations a message compares, in hours to as many digits as tell them apart ("36.9 h is
// shorter than 36.9 h" had said nothing).
std::pair<std::string, std::string> compared_durations(double a, double b) {
  std::string x = duration(a), y = duration(b);
  for (int digits = 4; x == y && digits <= 12; ++digits) {
    x = fmt::format("{:.{}g} h", a / kHour, digits);
    y = fmt::format("{:.{}g} h", b / kHour, digits);
  }
  return {x, y};
}

// "800", "1.6e+08": a count of expected events, for messages.
std::string about(double n) { return n < 1e5 ? fmt::format("{:.0f}", n) : fmt::format("{:.2g}", n); }

// An exponential draw of this mean: a mean of 0 is at once (a capacity wait of 0 s), an infinite
// one never (no failures).
double exponential(double mean, std::uint64_t& s) {
  if (!(mean > 0)) return 0.0;
  return std::isfinite(mean) ? -mean * std::log(uniform01(s)) : kInfinity;
}

// `held` seconds billed in whole units of `granularity` (as held when it is 0); a hair under a whole
// unit is that unit.
double billed_seconds(double held, double granularity) { return granularity > 0 ? std::ceil(held / granularity - 1e-9) * granularity : held; }

// Over every trial: the `unfinished` ones end later than any finished one (past the cap), so a
// quantile that reaches into them is infinite ("never" in the table), and so is the mean. Taken
// over the finished trials alone, P50-P99 would describe only the lucky ones.
Distribution distribution_of(std::vector<double> v, int unfinished) {
  if (unfinished <= 0) {
    const SampleSummary x = summarize(std::move(v));
    return {x.mean, x.p50, x.p90, x.p99};
  }
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size() + static_cast<std::size_t>(unfinished);
  return {kInfinity, quantile_with_unfinished(v, n, 0.5), quantile_with_unfinished(v, n, 0.9), quantile_with_unfinished(v, n, 0.99)};
}

// What the run model needs of an offering: its interruption processes and prices.
struct Plan {
  double failure_rate = 0;       // per second, whole job
  bool spot = false;
  PreemptionProcess preemption;
  double notice = 0, capacity_wait = 0, max_lifetime = 0;
  double price = 0;              // per GPU-hour while holding spot (or the only price)
  double fallback_price = 0;     // mixed: on-demand price after the switch
  double granularity = 1, fallback_granularity = 1;
  double deadline = 0;           // mixed: switch to on-demand to finish by this
  double fallback_interval = 0;  // mixed: the checkpoint interval on on-demand (its closed form's)
  bool elastic = false;          // a preempted node takes its data-parallel replica out; the rest go on
  // A trace's entries: from entry i on, the first whose capacity is up (next_up) or down
  // (next_down), or the entry count when none is (so that a change is found without scanning a long
  // trace at every event).
  std::vector<std::size_t> next_up, next_down;
  // The mean wait for capacity after a loss, for the closed forms: a trace's mean outage, else the
  // offering's.
  [[nodiscard]] double mean_wait() const {
    return preemption.kind == PreemptionProcess::Kind::trace ? preemption.trace_mean_unavailable_s() : capacity_wait;
  }
  void index_trace() {
    const auto& a = preemption.availability;
    next_up.assign(a.size() + 1, a.size());
    next_down.assign(a.size() + 1, a.size());
    // The last entry only marks the end, where the trace repeats: no state starts there.
    for (std::size_t i = a.size() > 0 ? a.size() - 1 : 0; i-- > 0;) {
      next_up[i] = a[i].second ? i : next_up[i + 1];
      next_down[i] = a[i].second ? next_down[i + 1] : i;
    }
  }
};

struct Trial {
  double wall = 0, cost = 0, lost = 0, on_demand_gpu_hours = 0, gpu_hours = 0;
  int interruptions = 0;
  bool finished = false;
  bool started_on_demand = false;  // mixed: the deadline left no slack for spot at the start
};

// One trial of the whole run on the event engine.
class RunTrial final : public sim::EventHandler {
 public:
  // ck: what a checkpoint costs the job (delta, or the snapshot when async).
  RunTrial(const RunSpec& run, const Plan& plan, double tau, double delta, double ck, double restart, double cap, std::uint64_t seed)
      : run_(run), plan_(plan), tau_(tau), delta_(delta), ck_(ck), restart_(restart), cap_(cap), rng_(seed), next_checkpoint_(tau) {}

  Trial run() {
    if (trace()) {
      offset_ = uniform01(rng_) * period();
      if (!available_at(0)) {
        // The market has no capacity when the run starts: wait for it (not billed).
        mode_ = Mode::waiting;
        first_wait_ = true;
        double wait = time_until(0, true) + 1e-3;
        if (past_deadline_after(wait)) {
          // Mixed: the capacity comes back too late (or never) to finish by the deadline on on-demand
          // after it: start on on-demand at once, as capacity_lost() switches later on.
          switch_to_on_demand();
          wait = 0;
        }
        at(wait, Event::capacity_back, generation_);
        sim_.run(sim::Time::seconds(cap_));
        if (!result_.finished) release();
        result_.wall = result_.finished ? finish_time_ : cap_;
        return result_;
      }
    }
    // Mixed: a deadline that leaves less slack than one interruption on spot is expected to cost
    // starts on on-demand, as an interruption later on would switch (every trial of a deadline just
    // past on-demand's time had started on spot, switched at its first interruption and ended late).
    // A fresh start on on-demand pays no restart, which on_demand_time() counts for a switch: hence
    // the restart taken off.
    if (plan_.spot && past_deadline_after(-restart_)) {
      switch_to_on_demand();
      result_.started_on_demand = true;
    }
    acquire(false);
    sim_.run(sim::Time::seconds(cap_));
    if (!result_.finished) release();
    result_.wall = result_.finished ? finish_time_ : cap_;
    return result_;
  }

  void handle(std::uint64_t payload) override {
    const auto kind = static_cast<Event>(payload & 0xff);
    const std::uint64_t generation = payload >> 8;
    if (kind == Event::replica_back) {
      if (generation == epoch_) replica_back();  // else the whole job has since lost its capacity
      return;
    }
    if (kind == Event::failure || kind == Event::notice || kind == Event::save || kind == Event::capacity_gone) {
      if (generation != interrupt_generation_) return;  // capacity since released
    } else if (generation != generation_) {
      return;  // superseded by an interruption
    }
    switch (kind) {
      case Event::reached: reached(); break;
      case Event::checkpoint_done: checkpoint_done(); break;
      case Event::durable:
        saved_ = pending_;
        break;
      case Event::restart_done: start_running(); break;
      case Event::failure: failure(); break;
      case Event::notice: notice(); break;
      case Event::save:
        // The last write before the capacity goes: the job idles after it. (A job restarting then
        // has nothing new to save; one that finishes before the capacity goes does not stop to.)
        if ((mode_ == Mode::running || mode_ == Mode::checkpointing) && run_.work_s - progress() > (capacity_goes_at_ - now()) * rate()) {
          save_now();
          ++generation_;
          mode_ = Mode::waiting;
        }
        break;
      case Event::capacity_gone:
        // The end of a notice too short to save in, which the job worked through: what it did since
        // its last durable checkpoint goes with the capacity.
        lose_work();
        ++generation_;
        mode_ = Mode::waiting;
        capacity_lost();
        break;
      case Event::capacity_back:
        acquire(!first_wait_);
        first_wait_ = false;
        break;
      case Event::replica_back: break;
    }
  }

 private:
  enum class Event : std::uint8_t { reached, checkpoint_done, durable, restart_done, failure, notice, save, capacity_gone, capacity_back, replica_back };
  enum class Mode { running, checkpointing, restarting, waiting, done };

  double now() const { return sim_.now().to_seconds(); }
  void at(double t, Event e, std::uint64_t generation) {
    sim_.schedule_at(sim::Time::seconds(std::min(t, cap_ + 1)), this, (generation << 8) | static_cast<std::uint64_t>(e));
  }
  void after(double dt, Event e) { at(now() + dt, e, generation_); }

  // Progress so far, when running.
  double progress() const { return mode_ == Mode::running ? progress_ + (now() - run_start_) * rate() : progress_; }
  // Elastic: the replicas up, each held since its own start; the job runs at the share of its
  // data-parallel replicas that are up.
  int active() const { return static_cast<int>(replica_since_.size()); }
  // When the capacity now held was taken: the whole job's, or (elastic) its longest-held replica's.
  double held_since() const {
    return plan_.elastic && !replica_since_.empty() ? *std::min_element(replica_since_.begin(), replica_since_.end()) : hold_start_;
  }
  double rate() const { return plan_.elastic ? static_cast<double>(active()) / run_.dp_replicas : 1.0; }
  int nodes_up() const { return plan_.elastic ? active() * (run_.nodes / run_.dp_replicas) : run_.nodes; }

  // Bills `gpus` held for `held` seconds, rounded up to the billing granularity; returns the GPU
  // hours billed.
  double bill(double held, double gpus, double granularity, double price) {
    const double billed = billed_seconds(held, granularity);
    result_.cost += billed / kHour * gpus * price;
    result_.gpu_hours += billed / kHour * gpus;
    return billed / kHour * gpus;
  }
  // Elastic billing: each replica's nodes are billed for their own stretch of holding, up to when
  // their capacity goes (a preempted replica's at the notice's end, as a whole job's) or the job ends.
  void drop_replica(std::size_t i, double until) {
    bill(until - replica_since_[i], static_cast<double>(run_.gpus) / run_.dp_replicas, plan_.granularity, plan_.price);
    replica_since_.erase(replica_since_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  void add_replica() { replica_since_.push_back(now()); }

  void acquire(bool restart) {
    holding_ = true;
    capacity_going_ = false;
    hold_start_ = now();
    if (plan_.elastic) replica_since_.assign(static_cast<std::size_t>(run_.dp_replicas), now());
    schedule_interrupts();
    if (restart) {
      ++generation_;
      mode_ = Mode::restarting;
      after(restart_, Event::restart_done);
    } else {
      start_running();
    }
  }

  // The next failure and (spot) the next preemption notice from now, memoryless.
  void schedule_interrupts() {
    ++interrupt_generation_;
    // Failures while the nodes are held; spot preemptions while spot nodes are held.
    at(now() + exponential(plan_.failure_rate > 0 ? 1.0 / plan_.failure_rate : kInfinity, rng_), Event::failure, interrupt_generation_);
    if (on_spot()) {
      double until = kInfinity;
      const PreemptionProcess& p = plan_.preemption;
      const double n = p.zone ? 1.0 : nodes_up();
      if (p.kind == PreemptionProcess::Kind::poisson && p.rate_per_node_hour > 0) {
        until = exponential(kHour / (p.rate_per_node_hour * n), rng_);
      } else if (p.kind == PreemptionProcess::Kind::weibull && p.scale_hours > 0) {
        until = WeibullHold(p, n, 0.0).draw(uniform01(rng_));
      } else if (trace()) {
        until = time_until(now(), false);
      }
      // The maximum lifetime runs from when the capacity was taken: the whole job's, or (elastic)
      // the longest-held replica's.
      lifetime_notice_ = false;
      if (plan_.max_lifetime > 0) {
        const double lifetime_left = std::max(0.0, held_since() + plan_.max_lifetime - now());
        lifetime_notice_ = lifetime_left <= until;
        until = std::min(until, lifetime_left);
      }
      // The notice arrives that long before the capacity goes (at once, for a hold shorter than the
      // notice: the capacity still goes when the hold ends, not a whole notice later).
      capacity_goes_at_ = now() + until;
      if (std::isfinite(until)) at(now() + std::max(0.0, until - plan_.notice), Event::notice, interrupt_generation_);
    }
  }

  void release() {
    if (!holding_) return;
    capacity_going_ = false;
    if (plan_.elastic) {
      while (!replica_since_.empty()) drop_replica(replica_since_.size() - 1, now());
      holding_ = false;
      ++interrupt_generation_;
      ++epoch_;
      return;
    }
    const bool fallback = !on_spot() && plan_.deadline > 0;
    const double gpu_hours = bill(now() - hold_start_, run_.gpus, fallback ? plan_.fallback_granularity : plan_.granularity,
                                  fallback ? plan_.fallback_price : plan_.price);
    if (fallback) result_.on_demand_gpu_hours += gpu_hours;
    holding_ = false;
    ++interrupt_generation_;
  }

  bool on_spot() const { return plan_.spot && !switched_; }
  // Mixed: from now on on-demand, checkpointing at its own interval from the last save.
  void switch_to_on_demand() {
    switched_ = true;
    tau_ = plan_.fallback_interval;
    next_checkpoint_ = saved_ + tau_;
  }

  void start_running() {
    ++generation_;
    mode_ = Mode::running;
    run_start_ = now();
    target_ = std::min(next_checkpoint_, run_.work_s);
    after((target_ - progress_) / rate(), Event::reached);
  }

  void reached() {
    // The segment ran uninterrupted to its target (an interruption would have superseded this event).
    // Taken as it is rather than from the clock: late in a long trial the clock's rounding leaves
    // the progress it gives nanoseconds short, and the last segment would then end in a checkpoint
    // and a zero-length segment, over and over, instead of the finish.
    progress_ = target_;
    if (progress_ >= run_.work_s) {
      mode_ = Mode::done;
      finish_time_ = now();
      result_.finished = true;
      release();
      ++generation_;
      ++interrupt_generation_;
      return;
    }
    ++generation_;
    mode_ = Mode::checkpointing;
    if (run_.checkpoint.async) {
      pending_ = progress_;
      after(run_.checkpoint.snapshot_s, Event::checkpoint_done);
    } else {
      after(delta_, Event::checkpoint_done);
    }
  }

  void checkpoint_done() {
    if (run_.checkpoint.async) {
      // The snapshot is in host memory; the write completes in the background.
      at(now() + delta_, Event::durable, generation_ + 1);
    } else {
      saved_ = progress_;
    }
    next_checkpoint_ = progress_ + tau_;
    start_running();
  }

  // An emergency checkpoint within a notice: what the job has done is saved; the write costs delta.
  void save_now() {
    progress_ = progress();
    saved_ = progress_;
    next_checkpoint_ = saved_ + tau_;
    result_.lost += delta_;
  }

  void lose_work() {
    progress_ = progress();
    result_.lost += progress_ - saved_;
    progress_ = saved_;
    next_checkpoint_ = saved_ + tau_;
  }

  void failure() {
    if (mode_ == Mode::waiting) return;  // the capacity is going anyway: the job has stopped
    ++result_.interruptions;
    lose_work();
    ++generation_;
    mode_ = Mode::restarting;
    result_.lost += restart_;
    if (on_spot() && past_deadline_after(restart_)) {
      // Mixed: the failure ate the slack; restart on on-demand capacity instead.
      release();
      switch_to_on_demand();
      acquire(true);
      return;
    }
    after(restart_, Event::restart_done);
    // The next failure, memoryless.
    at(now() + exponential(plan_.failure_rate > 0 ? 1.0 / plan_.failure_rate : kInfinity, rng_), Event::failure, interrupt_generation_);
  }

  void notice() {
    ++result_.interruptions;
    const bool restarting = mode_ == Mode::restarting;
    const double left = std::max(0.0, capacity_goes_at_ - now());  // the notice, or the rest of a shorter hold
    // Elastic: at a lifetime's notice the replicas whose nodes reach it go together; at a
    // preemption's, one node, of a replica drawn uniformly (which one matters through its lifetime
    // and its billing stretch).
    std::vector<std::size_t> going;
    if (plan_.elastic) {
      for (std::size_t i = 0; lifetime_notice_ && i < replica_since_.size(); ++i) {
        if (replica_since_[i] + plan_.max_lifetime <= now() + left + 1e-6) going.push_back(i);
      }
      if (going.empty()) going.push_back(std::min(replica_since_.size() - 1, static_cast<std::size_t>(uniform01(rng_) * replica_since_.size())));
    }
    if (!plan_.elastic || going.size() == replica_since_.size()) {
      // The whole job's capacity goes. It works on through the notice and saves a write's time
      // before the end, if the notice covers a write and it is not restarting then; what is not
      // saved (or durable: an async write in flight may still end in time) goes with the capacity.
      // (Until 2026-12-06 it saved at the notice and idled the rest, and a notice too short to save
      // in stopped it and dropped the write in flight: a notice a second short of the write took 28%
      // longer than none.)
      if (left >= delta_) at(capacity_goes_at_ - delta_, Event::save, interrupt_generation_);
      at(capacity_goes_at_, Event::capacity_gone, interrupt_generation_);
      capacity_going_ = true;  // no replica joins capacity that is going
      return;
    }
    // Some replicas leave: the others save within the notice (or lose what is unsaved), restart
    // without them and go on. A job already restarting goes on with that restart, without them (a
    // restart begun afresh at every change had never ended where changes come faster than a
    // restart takes).
    if (!restarting && left >= delta_) {
      save_now();
    } else {
      lose_work();  // takes the progress from the clock itself (taking it here first counted the segment twice)
    }
    for (auto i = going.rbegin(); i != going.rend(); ++i) {
      drop_replica(*i, now() + left);
      at(now() + left + exponential(plan_.capacity_wait, rng_), Event::replica_back, epoch_);
    }
    if (!restarting) {
      ++generation_;
      mode_ = Mode::restarting;
      result_.lost += restart_;
      after(restart_, Event::restart_done);
    }
    schedule_interrupts();
  }

  // Elastic: a node is back; the job checkpoints and restarts with its replica again (or, when it is
  // restarting already, takes the replica into that restart).
  void replica_back() {
    if (mode_ == Mode::done || mode_ == Mode::waiting || !holding_ || capacity_going_) return;
    if (mode_ == Mode::restarting) {
      add_replica();
      schedule_interrupts();
      return;
    }
    progress_ = progress();
    add_replica();
    saved_ = progress_;
    next_checkpoint_ = saved_ + tau_;
    result_.lost += delta_ + restart_;
    ++generation_;
    mode_ = Mode::restarting;
    after(delta_ + restart_, Event::restart_done);
    schedule_interrupts();
  }

  void capacity_lost() {
    release();
    result_.lost += restart_;
    // A trace's capacity goes at one of its changes, which the clock's rounding may put a hair
    // before: read the trace 1 ms on, and come back 1 ms past its next change (else the job took
    // the capacity straight back, held and billed it through the outage, and was interrupted again).
    double wait = trace() ? 2e-3 + time_until(now() + 1e-3, true) : exponential(plan_.capacity_wait, rng_);
    if (!switched_ && past_deadline_after(wait)) {
      // Mixed: waiting for spot would leave too little time to finish on on-demand: switch now.
      switch_to_on_demand();
      wait = 0;
    }
    at(now() + wait, Event::capacity_back, generation_);
  }

  // Expected time to finish the unsaved rest on on-demand capacity: a restart, then Daly's wall time
  // for the remaining work under failures alone.
  bool trace() const { return plan_.preemption.kind == PreemptionProcess::Kind::trace && plan_.preemption.availability.size() >= 2; }
  double period() const { return plan_.preemption.availability.back().first; }
  // The trace's state at run time t.
  bool available_at(double t) const {
    const double x = std::fmod(offset_ + t, period());
    const auto& a = plan_.preemption.availability;
    auto it = std::upper_bound(a.begin(), a.end(), x, [](double v, const auto& e) { return v < e.first; });
    return std::prev(it)->second;
  }
  // Seconds from run time t until the trace's capacity is `state`: 0 if it is; infinity if never. Entry
  // i holds from its time on; the last entry only marks the end, where the trace repeats.
  double time_until(double t, bool state) const {
    if (available_at(t) == state) return 0;
    const auto& a = plan_.preemption.availability;
    const double x = std::fmod(offset_ + t, period());
    const auto& next = state ? plan_.next_up : plan_.next_down;
    // The first entry after x in this lap, else the first of the next.
    const auto after = static_cast<std::size_t>(std::upper_bound(a.begin(), a.end(), x, [](double v, const auto& e) { return v < e.first; }) - a.begin());
    if (const std::size_t i = next[after]; i + 1 < a.size()) return a[i].first - x;
    if (const std::size_t i = next[0]; i + 1 < a.size()) return a[i].first + period() - x;
    return kInfinity;
  }

  // Mixed: what one more interruption on spot is expected to cost (half a segment of work lost, a
  // restart, the wait for capacity). Staying on spot keeps that much slack beyond on-demand's time,
  // so that the next interruption, whenever it comes, still leaves time to switch: without it the
  // run switched only once the slack was gone, and the interruption after finished it late (a
  // probe's mixed rows were late on average, 75% of trials by 0.8-1 h).
  // Weighted by the chance that spot takes the capacity before the rest of the work is done: a
  // market preempted 0.00027 times a node-hour had started a 19-hour run on on-demand behind a
  // reserve of a whole wait for capacity (a probe's find), where a preemption came in 0.5% of runs.
  // Poisson preemptions only; a lifetime, a Weibull hold or a trace keeps the whole reserve.
  double reserve() const {
    const double full = (tau_ + ck_) / 2.0 + restart_ + plan_.mean_wait();
    const PreemptionProcess& p = plan_.preemption;
    if (p.kind != PreemptionProcess::Kind::poisson || plan_.max_lifetime > 0) return full;
    const double rate = p.rate_per_node_hour * (p.zone ? 1.0 : nodes_up()) / kHour;
    const double rest = std::max(0.0, run_.work_s - saved_);
    return full * -std::expm1(-rate * rest);
  }
  // Mixed: whether staying on spot through `delay` (a restart, a wait for capacity) would leave less
  // than on-demand's time for the rest and that reserve before the deadline.
  bool past_deadline_after(double delay) const {
    return plan_.deadline > 0 && now() + delay + on_demand_time() + reserve() > plan_.deadline;
  }

  double on_demand_time() const {
    const double rest = std::max(0.0, run_.work_s - saved_);
    const double mtbf = plan_.failure_rate > 0 ? 1.0 / plan_.failure_rate : kInfinity;
    return restart_ + (rest > 0 ? daly_wall_time(rest, plan_.fallback_interval, ck_, restart_, mtbf, run_.checkpoint.async ? delta_ : 0.0) : 0.0);
  }

  const RunSpec& run_;
  const Plan& plan_;
  double tau_, delta_, ck_, restart_, cap_;
  std::uint64_t rng_;
  sim::Simulator sim_;
  Mode mode_ = Mode::running;
  double next_checkpoint_;
  double progress_ = 0, saved_ = 0, pending_ = 0, run_start_ = 0, hold_start_ = 0, finish_time_ = 0, target_ = 0;
  bool holding_ = false, switched_ = false, first_wait_ = false;
  double offset_ = 0;
  std::vector<double> replica_since_;  // elastic: when each replica up was last acquired
  bool lifetime_notice_ = false;       // the notice scheduled is a maximum lifetime's, not a preemption's
  double capacity_goes_at_ = kInfinity;  // when the capacity now held goes (its notice comes before)
  bool capacity_going_ = false;          // the whole job's capacity has had its notice
  std::uint64_t epoch_ = 0;
  std::uint64_t generation_ = 0, interrupt_generation_ = 0;
  Trial result_;
};

// The expected seconds billed for `held` seconds of holding at `granularity` g, each stretch rounded
// up (as the trials bill), when the capacity is lost `rate` r times per held second: r held losses,
// each ending a stretch L ~ Exp(r) that wastes E[ceil(L/g) g - L] = g / (1 - e^(-r g)) - 1 / r, and
// a last stretch, ended by the job, taken as X = min(Exp(r), held), which wastes E[ceil(X/g) g - X]
// = g (1 - e^(-r g K)) / (1 - e^(-r g)) - (1 - e^(-r held)) / r with K = ceil(held / g). Without
// losses that is ceil(held / g) g; where a stretch is short against g, every stretch bills a whole g.
double expected_billed_s(double held, double rate, double granularity) {
  if (!(granularity > 0) || !std::isfinite(held)) return held;
  const double g = granularity;
  const double k = billed_seconds(held, g) / g;
  if (!(rate > 0)) return k * g;
  const double x = rate * g;
  // (In series where r g or r held is tiny, where the closed forms lose everything to rounding.)
  const double per_loss = x < 1e-6 ? g * (0.5 + x / 12.0) : g / -std::expm1(-x) - 1.0 / rate;
  const double billed_last = g * (x * k < 1e-9 ? k : std::expm1(-x * k) / std::expm1(-x));
  const double mean_last = rate * held < 1e-9 ? held : -std::expm1(-rate * held) / rate;
  return held + rate * held * per_loss + (billed_last - mean_last);
}

double crf(double rate, double years) { return rate > 0 ? rate / (1.0 - std::pow(1.0 + rate, -years)) : 1.0 / years; }

}  // namespace

// The trace repeats: its last state runs into its first, so a change there is a change like any other
// (an "off, then on" trace loses its capacity where it wraps round, as the trials see it).
double PreemptionProcess::trace_losses_per_available_hour() const {
  const std::size_t states = availability.size() - 1;  // the last entry only marks the end
  double up = 0;
  int losses = 0;
  for (std::size_t i = 0; i < states; ++i) {
    if (availability[i].second) up += availability[i + 1].first - availability[i].first;
    if (availability[(i + states - 1) % states].second && !availability[i].second) ++losses;
  }
  if (up <= 0) return kInfinity;  // never available: the capacity is lost as soon as it comes
  return losses / (up / kHour);
}

double PreemptionProcess::trace_mean_unavailable_s() const {
  const std::size_t states = availability.size() - 1;
  double down = 0;
  int spells = 0;
  for (std::size_t i = 0; i < states; ++i) {
    if (!availability[i].second) {
      down += availability[i + 1].first - availability[i].first;
      if (availability[(i + states - 1) % states].second) ++spells;
    }
  }
  if (down > 0 && spells == 0) return kInfinity;  // never available
  return spells > 0 ? down / spells : 0.0;
}

std::string_view to_string(Pricing p) {
  switch (p) {
    case Pricing::on_demand: return "on-demand";
    case Pricing::spot: return "spot";
    case Pricing::reserved: return "reserved";
    case Pricing::owned: return "owned";
    case Pricing::mixed: return "mixed";
  }
  return "?";
}

double Offering::effective_price_per_gpu_hour() const {
  switch (pricing) {
    case Pricing::reserved: return price_per_gpu_hour + (term_hours > 0 ? upfront_per_gpu / term_hours : 0.0);
    case Pricing::owned: {
      const double year_hours = 8760.0;
      const double yearly = capex_per_gpu * crf(wacc, lifetime_years) + power_w_per_gpu / 1000.0 * pue * year_hours * price_per_kwh;
      return yearly / (year_hours * std::max(utilisation, 1e-9));
    }
    default: return price_per_gpu_hour;
  }
}

double young_interval(double delta, double mtbf) { return std::sqrt(2.0 * delta * mtbf); }

double daly_interval(double delta, double mtbf) {
  if (delta >= 2.0 * mtbf) return mtbf;
  const double x = delta / (2.0 * mtbf);
  // sqrt(2 delta) sqrt(M) rather than sqrt(2 delta M), whose product overflows for a very rare
  // interruption (M past about 1e306 s).
  return std::sqrt(2.0 * delta) * std::sqrt(mtbf) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - delta;
}

double daly_wall_time(double solve, double tau, double delta, double restart, double mtbf, double write) {
  // Without interruptions: the run plus a checkpoint at each interval's end before the finish (none
  // when the interval is the whole run or more).
  if (!std::isfinite(mtbf)) return solve + (tau > 0 && tau < solve ? std::ceil(solve / tau - 1e-9) - 1 : 0) * delta;
  // M e^(R/M) (e^(s/M) - 1) per segment of s, written as e^(R/M) s (expm1(y) / y) with y = s/M, so that
  // a rare interruption (M near the largest double) neither overflows nor cancels to nothing.
  const auto segment = [&](double s) {
    const double y = s / mtbf;
    if (!std::isfinite(y)) return kInfinity;  // interruptions so frequent that s / M overflows
    return std::exp(restart / mtbf) * s * (y > 0 ? std::expm1(y) / y : 1.0);
  };
  // An interval of the whole run or more: one segment, which ends in the finish, not a checkpoint
  // (Daly's form would charge a fraction of an interval that never comes).
  if (tau >= solve) return segment(solve);
  // An async checkpoint counts once its write ends, `write` after the snapshot: an interruption
  // before then goes back to the checkpoint before. By renewal over durable checkpoints: from one
  // reached in the run's flow the next is tau + delta later (a = tau + delta); an interruption in
  // between costs the restart and then b = tau + delta + write uninterrupted from the checkpoint
  // (retried after each restart): E = (1 - e^(-a/M)) M e^(R/M) e^(b/M) = e^(write/M) M e^(R/M)
  // (e^((tau + delta)/M) - 1), Daly's segment times e^(write/M). (Without it the async form was 31%
  // under its trials at one failure per node-day and a 1 GB/s write.)
  const double durable = write > 0 ? std::exp(write / mtbf) : 1.0;
  return segment(tau + delta) * durable * solve / tau;
}

// Two seconds short of the engine's limit: a trial's events go to at most a second past its cap,
// and 2^62 ns itself, as a double, is one past the limit.
double simulated_time_limit_s() { return static_cast<double>(sim::Time::kLimit) / 1e9 - 2.0; }

std::vector<CostEstimate> estimate_costs(const RunSpec& run, const std::vector<Offering>& offerings, const CostOptions& options) {
  using Input = CostInputError::Input;
  if (!(run.work_s > 0)) throw std::invalid_argument("the run has no work to cost (work_s must be positive)");
  if (run.nodes < 1 || run.gpus < 1) throw std::invalid_argument("the run needs at least one node and one GPU");
  if (!(run.checkpoint.write_bandwidth > 0) || !(run.checkpoint.bytes > 0)) {
    throw std::invalid_argument("checkpointing needs a size and a positive write bandwidth");
  }
  if (options.trials < 1) throw std::invalid_argument("the Monte Carlo needs at least one trial");
  // Every simulated duration must fit the trial's clock (a trial clamps its events one second past
  // its cap, which is at most this).
  const double limit = simulated_time_limit_s();
  const std::string clock = fmt::format("the {} the Monte Carlo's clock spans", duration(limit));
  if (run.work_s > limit) {
    throw CostInputError(Input::train_tokens, "", fmt::format("the run takes {} failure-free, longer than {}", duration(run.work_s), clock));
  }
  const double delta = run.checkpoint.bytes / run.checkpoint.write_bandwidth;
  if (!(delta <= limit)) {
    throw CostInputError(Input::write_bandwidth, "", fmt::format("writing the {:.3g} GB checkpoint at {:.3g} B/s takes {}, longer than {}",
                                                                 run.checkpoint.bytes / 1e9, run.checkpoint.write_bandwidth, duration(delta), clock));
  }
  // Restart: detect the failure, restart the job, read the last checkpoint back.
  const double restart = run.reliability.detect_s + run.reliability.restart_s + delta;
  if (!(restart <= limit)) {
    throw CostInputError(Input::reliability, "", fmt::format("a restart (detection {}, restart {}, reading the checkpoint back {}) takes {}, longer than {}",
                                                             duration(run.reliability.detect_s), duration(run.reliability.restart_s), duration(delta),
                                                             duration(restart), clock));
  }
  if (run.checkpoint.interval_s > 0 && run.checkpoint.interval_s < delta) {
    // Shorter, the job would write checkpoints more than it trains, and async writes would overlap.
    throw CostInputError(Input::interval, "", fmt::format("a checkpoint every {} of work is shorter than the {} one takes to write ({:.3g} GB at {:.3g} B/s)",
                                                          duration(run.checkpoint.interval_s), duration(delta), run.checkpoint.bytes / 1e9,
                                                          run.checkpoint.write_bandwidth));
  }
  const double failure_rate = run.reliability.failures_per_1000_node_days / 1000.0 * run.nodes / 86400.0;
  // A trial that has not finished by then does not finish.
  const double cap = std::min(options.cap_factor * run.work_s, limit);

  std::vector<CostEstimate> out;
  const double ck = run.checkpoint.async ? std::max(run.checkpoint.snapshot_s, 1e-9) : delta;
  // How long after its snapshot an async checkpoint becomes durable (a blocking one is when it ends).
  const double write = run.checkpoint.async ? delta : 0.0;
  // The closed form for a plan whose spot capacity is preempted at `preempt_rate` per second while
  // held: Daly for the work-losing interruptions (failures, and preemptions whose notice cannot cover
  // a checkpoint), then the noticed preemptions. A hold of the capacity lasts L ~ Exp(rate); the job
  // works in it from the end of its restart R to its save a write's time delta before L, so
  // E[max(0, L - R - delta)] = e^(-rate (R + delta)) / rate of work per E[L] = 1 / rate held: the held
  // time H = D e^(rate (R + delta)) (a preemption during a restart ends the restart early, which the
  // first-order D / (1 - rate (delta + R)) missed: it diverged where the Monte Carlo finished).
  // Each hold ends in a wait for capacity, which is not billed: wall = H (1 + rate wait). A
  // preemption whose notice is too short loses work (one of Daly's interruptions) and waits too; the
  // wait stays out of Daly's restart, during which his model interrupts, as capacity not held cannot
  // be: Daly's time with the restart R alone is the held time, and the waits come on top.
  struct ClosedForm {
    double mtbi = kInfinity, interval = 0, wall = kInfinity, held = kInfinity;
    double noticed_rate = 0;  // noticed preemptions per held second
    bool finite = false;
  };
  // Weibull holds are not memoryless: with a shape below 1 most holds are short and a few long, and
  // a hold that outlives the restart goes on longer than an exponential one of the same mean (the
  // exponential forms below were 2x pessimistic at shape 0.5, and a hold shorter on average than the
  // restart said "cannot finish" where every trial did). So by renewal-reward over holds: a hold
  // lasts L, the first of n Weibull(k, eta) lifetimes, P(L > t) = S(t) = e^(-(t/eta')^k) with
  // eta' = eta n^(-1/k), cut at the maximum lifetime T (the trials draw it so, at each acquire).
  //  - Noticed preemptions (the notice covers a checkpoint): the job works from its restart R to its
  //    save delta before L, E[(L - R - delta)+] = integral of S from R + delta out of E[L] = integral
  //    of S held: Daly's time D with failures alone, stretched by their ratio (for an exponential S
  //    the e^(r (R + delta)) above).
  //  - Lossy ones: a failure (Poisson, lambda) or the hold's end ends an attempt; taking each as the
  //    start of a new hold (pessimistic for k < 1: a hold that survived a failure is older, and the
  //    older the safer), an interval begins with R and checkpoints every s = tau + delta, and segment
  //    j is saved if neither comes by R + j s (+ W, the async write, for it to be durable): E[work] =
  //    tau sum_j S(R + W + j s) e^(-lambda (R + W + j s)) per E[L_eff] = integral of S(t) e^(-lambda t)
  //    held (with an exponential S, Daly's form again; the last segment, which ends in the finish, is
  //    charged its W too).
  // Both cut each hold where the job would end in it (after D, or after its last segment): a hold
  // that outlives the job is released then, so a heavy tail's long holds count only the work there is
  // (uncut, a shape of 0.1 whose mean hold exceeds the job came out 6 times under its trials; cut,
  // 16-20% under: the cut takes the whole job where later holds have only its rest to do). Holds
  // end in preemptions, each followed by a wait for capacity. (Taking the first hold as needing no
  // restart and the last as ending in none moved an exponential S 0.6% from its 20,000 trials, where
  // the form without them is within 0.02%.)
  const auto weibull_closed_form = [&](ClosedForm& c, const Plan& plan, bool noticed, double wait) {
    const WeibullHold L(plan.preemption, plan.preemption.zone ? 1.0 : double(run.nodes), plan.max_lifetime);
    const double lambda = failure_rate;
    // Beyond this S(t) e^(-lambda t) is under 1e-16 (or the lifetime has ended every hold).
    double horizon = std::min(L.lifetime, L.eta * std::pow(36.8, 1.0 / L.k));
    if (lambda > 0) horizon = std::min(horizon, 36.8 / lambda);
    // The integral of f from a to b one decade at a time: a small shape's S falls over 10 to 16
    // decades, and Gauss-Kronrod over the whole range missed where its mass is while reporting a tiny
    // error (90% low at shape 0.1). Below 1e-18 of b, f (at most 1) is taken as f(0).
    using Quadrature = boost::math::quadrature::gauss_kronrod<double, 61>;
    const auto integral = [&](auto f, double a, double b) {
      // Every integrand holds S, which drops to 0 at the lifetime: a jump the adaptive rule would
      // chase to its full depth (seconds an integral).
      b = std::min(b, L.lifetime);
      if (!(a < b)) return 0.0;
      double sum = 0, lo = a;
      if (lo < b * 1e-18) {
        sum += f(lo) * (b * 1e-18 - lo);
        lo = b * 1e-18;
      }
      while (lo < b) {
        const double hi = std::min(b, lo * 10);
        sum += Quadrature::integrate(f, lo, hi, 8, 1e-9);
        lo = hi;
      }
      return sum;
    };
    double held = kInfinity, hold = 0, preemptions = 0;
    if (noticed) {
      const double d = daly_wall_time(run.work_s, c.interval, ck, restart, c.mtbi, write);
      // The job works from its restart to the save it makes a write's time before the hold ends.
      const double start = restart + delta, end = start + d;
      hold = L.held_between(0, end);
      const double useful = L.held_between(start, end);
      // The share of holds the cut ends (holds that would outlive the job): the renewal counts a
      // restart and a preemption for each hold, where the first needs no restart and the one the
      // job ends in no preemption.
      const double last = L.survival(end);
      if (useful > 0 && std::isfinite(d)) held = std::max(d, d * hold / useful - last * start);
      if (hold > 0) preemptions = held / hold * (1.0 - last);
    } else {
      const bool one_segment = c.interval >= run.work_s;
      const double tau = one_segment ? run.work_s : c.interval;
      const double step = one_segment ? run.work_s : c.interval + ck;
      const double needed = one_segment ? 1.0 : std::ceil(run.work_s / tau - 1e-9);  // the job's segments
      const double end = std::min(horizon, restart + needed * step);
      const auto attempt = [&](double t) { return L.survival(t) * std::exp(-lambda * t); };
      // The integral of S(t) e^(-lambda t): in closed form for shape 1 (Poisson holds a lifetime cuts:
      // e^(-mu t), mu = 1/eta' + lambda), where the quadrature took 4 ms a call and a break-even
      // that searches the interval at each rate it tries took seconds.
      const auto attempts_between = [&](double a, double b) {
        if (L.k != 1.0) return integral(attempt, a, b);
        b = std::min(b, L.lifetime);
        if (!(a < b)) return 0.0;
        const double mu = 1.0 / L.eta + lambda;
        return mu > 0 ? std::exp(-mu * a) * -std::expm1(-mu * (b - a)) / mu : b - a;
      };
      hold = lambda > 0 ? attempts_between(0.0, end) : L.held_between(0, end);
      // (A notice too short to save in is no use: the job works on until the capacity goes.)
      // Segment j is saved once its checkpoint is durable: at R + j s, or an async write later.
      const double first = restart + (one_segment ? 0.0 : write);
      double segments = 0;  // expected segments saved per hold
      const double count = std::min(needed, std::floor((horizon - first) / step));
      if (count <= 1e6) {
        for (double j = 1; j <= count; ++j) segments += attempt(first + j * step);  // t: from the hold's start
      } else if (lambda == 0) {
        // Too many to add one by one: the sum as an integral over its midpoints, exactly.
        segments = L.held_between(first + step / 2, first + (count + 0.5) * step) / step;
      } else {
        segments = attempts_between(first + step / 2, first + (count + 0.5) * step) / step;
      }
      if (segments > 0) held = std::max(run.work_s, run.work_s / tau * hold / segments - attempt(end) * restart);
      // A hold ends in a preemption unless a failure or the job's end comes first.
      const double by_preemption = 1.0 - attempt(end) - lambda * hold;
      if (hold > 0) preemptions = held / hold * by_preemption;
    }
    c.finite = std::isfinite(held);
    if (c.finite) {
      c.held = held;
      c.wall = held + preemptions * wait;
      c.finite = std::isfinite(c.wall);
    }
  };
  // At the given interval, else Daly's, or for holds that are not memoryless the one that minimises
  // the form (the break-even's bisection searches it at every rate it tries: a shape-1 form is closed,
  // so that costs little).
  const auto closed_form = [&](const Plan& plan, double preempt_rate) {
    ClosedForm c;
    const bool noticed = plan.notice >= delta;
    const double lossy_rate = failure_rate + (noticed ? 0.0 : preempt_rate);
    c.mtbi = lossy_rate > 0 ? 1.0 / lossy_rate : kInfinity;
    c.interval = run.checkpoint.interval_s > 0 ? run.checkpoint.interval_s
                 : std::isfinite(c.mtbi)         ? daly_interval(ck, c.mtbi)
                                                 : run.work_s;
    // Daly's optimum for an async checkpoint comes from its snapshot, but the next snapshot may not
    // come before the write in flight is durable: it would replace it, and none would ever be (the
    // trials ran 90 times longer than the closed form said). So never under the write's time, as a
    // given interval must not be.
    // (A millionth over it: at exactly the write's time the next snapshot and the write's end fall on
    // one nanosecond, and a rounding could put the snapshot first and lose the checkpoint.)
    if (run.checkpoint.interval_s <= 0 && run.checkpoint.async) c.interval = std::max(c.interval, delta * (1 + 1e-6));
    const double wait = plan.mean_wait();
    c.noticed_rate = noticed ? preempt_rate : 0.0;
    const bool weibull = plan.spot && plan.preemption.kind == PreemptionProcess::Kind::weibull && plan.preemption.scale_hours > 0;
    // (A trace that never has capacity has no holds to cut: the exponential form's infinite rate says so.)
    const bool cut = plan.spot && !weibull && plan.max_lifetime > 0 &&
                     !(plan.preemption.kind == PreemptionProcess::Kind::trace && !std::isfinite(plan.preemption.trace_losses_per_available_hour()));
    if (weibull || cut) {
      Plan holds = plan;
      if (cut) {
        // A lifetime cuts the exponential holds: they are no longer memoryless, and taking them as
        // exponential at one over the mean hold was up to 35% under the trials (3 h lifetimes, holds
        // of 31 h on average: nearly every hold ends at its lifetime). The renewal form follows the
        // cut holds, as a Weibull of shape 1 (the same holds, draw for draw; at rate 0 every hold
        // lasts the lifetime). `preempt_rate` is then the plan's own. Poisson preemptions per node,
        // a trace's losses as Poisson at its rate for the whole job (as preemption_rate takes them),
        // none at all: each hold lasts its lifetime (until 2026-12-07 these last two took the
        // exponential form at one over the lifetime: 18% slow beside the same market as a Poisson
        // rate of 1e-9, and a 17-minute lifetime's interval saved nothing).
        holds.preemption.kind = PreemptionProcess::Kind::weibull;
        holds.preemption.shape = 1.0;
        double per_hour = 0;
        if (plan.preemption.kind == PreemptionProcess::Kind::poisson) per_hour = plan.preemption.rate_per_node_hour;
        if (plan.preemption.kind == PreemptionProcess::Kind::trace) {
          per_hour = plan.preemption.trace_losses_per_available_hour();
          holds.preemption.zone = true;  // the trace's rate is the whole job's, not a node's
        }
        holds.preemption.scale_hours = per_hour > 0 ? 1.0 / per_hour : kInfinity;
      }
      weibull_closed_form(c, holds, noticed, wait);
      if (run.checkpoint.interval_s > 0 || !std::isfinite(c.mtbi) || noticed) return c;
      // Daly's optimum assumes memoryless interruptions; holds that are not (a lifetime, a Weibull
      // shape) can lose the last segment of nearly every hold at it (3 h lifetimes: the third segment
      // of each hold 5 s short, 31% slower than a slightly shorter interval). So the interval that
      // minimises this form's wall time: a scan over a factor of 16 either side of Daly's, then a
      // golden-section refinement around the best.
      const double lo = std::max(c.interval / 16, run.checkpoint.async ? delta * (1 + 1e-6) : 1e-3);
      const double hi = std::max(lo, std::min(c.interval * 16, run.work_s));
      const auto wall_at = [&](double tau) {
        ClosedForm t = c;
        t.interval = tau;
        weibull_closed_form(t, holds, noticed, wait);
        return t.finite ? t.wall : kInfinity;
      };
      constexpr int kScan = 48;
      double best = c.finite ? c.wall : kInfinity, best_tau = c.interval;
      std::vector<double> taus(kScan + 1);
      for (int i = 0; i <= kScan; ++i) {
        taus[static_cast<std::size_t>(i)] = lo * std::pow(hi / lo, double(i) / kScan);
        const double w = wall_at(taus[static_cast<std::size_t>(i)]);
        if (w < best) best = w, best_tau = taus[static_cast<std::size_t>(i)];
      }
      // Holds cut at a lifetime T make the form saw-toothed: a hold saves the segments that end by
      // T, each at R + W + j (tau + delta), and each count j of them is best at the longest
      // interval that still fits it, (T - R - W) / j - delta (taken 1 ms short), between scan points
      // (a 2 h lifetime: the scan took 8 min where 52 min was 3.5% faster, and 5,000 times the
      // preemptions came out faster and cheaper). So those too: every count for holds of shape 1
      // (Poisson, or none, cut at the lifetime: a closed form each), the 64 counts from half the
      // scan's best for other shapes (a quadrature each; the scan's points are 12% apart).
      if (plan.max_lifetime > 0) {
        const double room = plan.max_lifetime - restart - write;
        const bool cheap = holds.preemption.shape == 1.0;
        const double first_j = cheap ? 1.0 : std::max(1.0, std::floor(room / (best_tau + ck) / 2));
        const double last_j = std::min(std::floor(room / (lo + ck)), first_j + (cheap ? 4096 : 64));
        for (double j = first_j; room > 0 && j <= last_j; ++j) {
          const double tau = room / j - ck - 1e-3;
          if (tau < lo || tau > hi) continue;
          const double w = wall_at(tau);
          if (w < best) best = w, best_tau = tau;
        }
      }
      const auto at = std::lower_bound(taus.begin(), taus.end(), best_tau);
      double a = at == taus.begin() ? lo : *std::prev(at), b = at == taus.end() || std::next(at) == taus.end() ? hi : *std::next(at);
      const double phi = (std::sqrt(5.0) - 1) / 2;
      for (int i = 0; i < 24 && b > a * (1 + 1e-9); ++i) {
        const double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
        const double w1 = wall_at(x1), w2 = wall_at(x2);
        if (w1 < best) best = w1, best_tau = x1;
        if (w2 < best) best = w2, best_tau = x2;
        (w1 < w2 ? b : a) = w1 < w2 ? x2 : x1;
      }
      if (best_tau != c.interval) {
        c.interval = best_tau;
        weibull_closed_form(c, holds, noticed, wait);
      }
      return c;
    }
    const double d = daly_wall_time(run.work_s, c.interval, ck, restart, c.mtbi, write);
    const double stretch = std::exp(c.noticed_rate * (restart + delta));
    c.finite = std::isfinite(d) && std::isfinite(stretch);
    if (c.finite) {
      c.held = d * stretch;
      c.wall = c.held * (1.0 + (plan.spot ? preempt_rate : 0.0) * wait);
      c.finite = std::isfinite(c.wall);
    }
    return c;
  };
  // Spot preemptions per second while the capacity is held (all of them, noticed or not): one over
  // the mean hold. With a maximum lifetime L a hold ends at the first preemption X or at L, whichever
  // comes first, and lasts E[min(X, L)] = integral of P(X > t) from 0 to L on average (the trials end
  // it so): for a Poisson process of rate r, (1 - e^(-rL)) / r; for the first of n Weibull lifetimes,
  // Weibull(k, eta' = eta n^(-1/k)), eta' Gamma(1 + 1/k) P(1/k, (L/eta')^k), P the regularized lower
  // incomplete gamma. (max(r, 1/L), taken until 2026-12-06, counted too few: 1.0 an hour where a
  // 1 h lifetime and 0.01 preemptions per node-hour over 32 nodes give 1.17.) A trace's losses are
  // taken as a Poisson process of the trace's own rate here; its trials follow the trace itself.
  const auto with_lifetime = [](double rate, double lifetime) {
    if (!(lifetime > 0)) return rate;
    return rate > 0 ? rate / -std::expm1(-rate * lifetime) : 1.0 / lifetime;
  };
  const auto preemption_rate = [&](const Plan& plan) {
    double rate = 0;
    if (!plan.spot) return rate;
    const PreemptionProcess& p = plan.preemption;
    const double n = p.zone ? 1.0 : run.nodes;
    if (p.kind == PreemptionProcess::Kind::weibull && p.scale_hours > 0) return 1.0 / WeibullHold(p, n, plan.max_lifetime).held_between(0.0, kInfinity);
    if (p.kind == PreemptionProcess::Kind::poisson) rate = p.rate_per_node_hour * n / kHour;
    if (p.kind == PreemptionProcess::Kind::trace) rate = p.trace_losses_per_available_hour() / kHour;
    return with_lifetime(rate, plan.max_lifetime);
  };
  // Before any trial: the interruptions and checkpoints one trial of the plan is expected to simulate
  // over the closed form's expected wall time (or the cap, when it cannot finish sooner). In Daly's
  // model a segment of tau is attempted until an attempt survives its tau + delta, each attempt after
  // a restart R; an attempt reaches its checkpoint with probability e^(-tau/M). Checkpoints so start
  // at e^(delta/M) per segment over Daly's M e^(R/M) (e^((tau + delta)/M) - 1) per segment: a rate of
  // 1 / (M e^(R/M) (e^(tau/M) - e^(-delta/M))), or 1 / (tau + delta) without interruptions.
  const auto check_load = [&](const Plan& plan, const std::string& name) {
    const double preempt_rate = preemption_rate(plan);
    if (!std::isfinite(preempt_rate)) return;  // a trace never available: the trials only wait
    const ClosedForm c = closed_form(plan, preempt_rate);
    const bool capped = !(c.finite && c.wall < cap);
    const double span = capped ? cap : c.wall;
    // Interruptions and checkpoints come while the capacity is held, not during the waits for it
    // (counting those had refused a run of 2-ms holds and 1-h waits as 2e9 interruptions, where its
    // trials see about 1,200 on the way to the cap): the held share of the span.
    const double wait = plan.mean_wait();
    const double held_share = !capped && c.wall > 0 ? c.held / c.wall : plan.spot ? 1.0 / (1.0 + preempt_rate * wait) : 1.0;
    const double interruptions = (failure_rate + preempt_rate) * span * held_share;
    // (In logarithms: M e^((R - delta)/M) (e^((tau + delta)/M) - 1) overflows, or loses the
    // difference, at either end of M.)
    const double m = c.mtbi, x = (c.interval + ck) / m;
    const double per_second =
        std::isfinite(m) ? std::exp(-(std::log(m) + (restart - ck) / m + (x > 30 ? x : std::log(std::expm1(x))))) : 1.0 / (c.interval + ck);
    const double checkpoints = span * held_share * per_second;
    if (interruptions + checkpoints <= kMaxTrialEvents) return;
    std::string would;
    if (interruptions >= 0.5) would = fmt::format("be interrupted about {} times", about(interruptions));
    if (checkpoints >= 0.5) would += fmt::format("{}checkpoint about {} times", would.empty() ? "" : " and ", about(checkpoints));
    const std::string load =
        fmt::format("a trial on {} would {} in {}{}; the Monte Carlo simulates at most {} interruptions and checkpoints per trial", name, would,
                    duration(span), capped ? " (the trial's cap: the run cannot finish sooner)" : "", kMaxTrialEventsText);
    if (interruptions >= checkpoints && failure_rate >= preempt_rate) {
      throw CostInputError(Input::failures, "", fmt::format("a failure comes every {} on average on the job's {} node{}: {}", duration(1.0 / failure_rate),
                                                                 run.nodes, run.nodes == 1 ? "" : "s", load));
    }
    if (interruptions >= checkpoints) {
      throw CostInputError(Input::preemption, name, fmt::format("its spot capacity is preempted every {} on average: {}", duration(1.0 / preempt_rate), load));
    }
    if (run.checkpoint.interval_s > 0) {
      throw CostInputError(Input::interval, "", fmt::format("a checkpoint every {} of a {} failure-free run: {}", duration(c.interval), duration(run.work_s), load));
    }
    throw CostInputError(run.checkpoint.async ? Input::interval : Input::write_bandwidth, "",
                         fmt::format("Daly's optimal interval for a {} checkpoint {} is {}, over a {} failure-free run: {}", duration(ck),
                                     run.checkpoint.async ? "snapshot" : "write", duration(c.interval), duration(run.work_s), load));
  };
  const auto estimate = [&](const Plan& plan, Pricing pricing, const std::string& name) {
    CostEstimate e;
    e.offering = name;
    e.pricing = pricing;
    e.price_per_gpu_hour = plan.price;
    if (pricing == Pricing::mixed) e.fallback_price_per_gpu_hour = plan.fallback_price;
    e.checkpoint_s = run.checkpoint.async ? run.checkpoint.snapshot_s : delta;
    e.restart_s = restart;
    // Work-losing interruptions: failures, and preemptions whose notice cannot cover a checkpoint.
    const double preempt_rate = preemption_rate(plan);
    const ClosedForm c = closed_form(plan, preempt_rate);
    e.mtbi_s = c.mtbi;
    e.interval_s = c.interval;
    // Whether the expected wall time stays under the trials' cap. Interruptions that come sooner on
    // average than a checkpoint and a restart do not decide it alone: each attempt still survives
    // with probability e^(-(tau + delta)/M), and Daly's expectation stays finite (and the Monte
    // Carlo's trials finish) while it is under the cap.
    // (An elastic row's trials decide: the closed form stops the whole job at each preemption,
    // where an elastic job shrinks and goes on.)
    e.can_finish = plan.elastic || (c.finite && c.wall < cap);
    const std::string within = cap < options.cap_factor * run.work_s ? fmt::format("{} (the Monte Carlo's clock)", duration(cap))
                                                                     : fmt::format("{:g} x the failure-free time", options.cap_factor);
    if (e.can_finish) {
      e.expected_wall_s = c.wall;
      e.expected_cost = expected_billed_s(c.held, plan.spot ? preempt_rate : 0.0, plan.granularity) / kHour * run.gpus * plan.price;
    } else {
      // On spot alone; a mixed row's fallback can still finish it (its Monte Carlo says whether).
      const char* what = pricing == Pricing::mixed ? "cannot finish on spot alone" : "cannot finish";
      const std::string expected =
          c.finite ? fmt::format("the expected wall time is {:.3g} x the failure-free time", c.wall / run.work_s) : std::string("the expected wall time overflows");
      if (!std::isfinite(preempt_rate)) {
        e.verdict = plan.preemption.kind == PreemptionProcess::Kind::trace ? fmt::format("{}: its availability trace never has capacity", what)
                                                                           : fmt::format("{}: its capacity is preempted as soon as it is held", what);
      } else if (c.noticed_rate > 0 && 1.0 / c.noticed_rate < e.mtbi_s) {
        e.verdict = fmt::format("{} within {}: {}, with noticed preemptions every {:.3g} h on average and a restart and the save taking {:.3g} h",
                                what, within, expected, 1.0 / c.noticed_rate / kHour, (restart + delta) / kHour);
      } else {
        e.verdict = fmt::format("{} within {}: {}, with interruptions every {:.3g} h on average and a checkpoint and restart taking {:.3g} h",
                                what, within, expected, e.mtbi_s / kHour, (ck + restart) / kHour);
      }
      e.expected_wall_s = kInfinity;
      e.expected_cost = kInfinity;
    }
    // Monte Carlo.
    std::vector<double> walls, costs;
    std::vector<int> numbers;
    double interruptions = 0, lost = 0, on_demand = 0, gpu_hours = 0;
    const int report_every = std::max(1, options.trials / 100);
    for (int t = 0; t < options.trials; ++t) {
      if (options.progress && t % report_every == 0) options.progress(name, t, options.trials);
      std::uint64_t s = options.seed ^ (0x632be59bd9b4e019ull * static_cast<std::uint64_t>(t + 1));
      const std::uint64_t seed = splitmix64(s);
      RunTrial trial(run, plan, e.interval_s, delta, ck, restart, cap, seed);
      const Trial r = trial.run();
      e.started_on_demand += r.started_on_demand ? 1 : 0;
      interruptions += r.interruptions;
      lost += r.lost;
      if (!r.finished) continue;
      ++e.finished;
      walls.push_back(r.wall);
      costs.push_back(r.cost);
      numbers.push_back(t);
      on_demand += r.on_demand_gpu_hours;
      gpu_hours += r.gpu_hours;
    }
    if (options.progress) options.progress(name, options.trials, options.trials);
    e.trials = options.trials;
    e.wall_s = distribution_of(walls, e.trials - e.finished);
    e.cost = distribution_of(costs, e.trials - e.finished);
    e.mean_interruptions = interruptions / options.trials;
    e.gpu_hours_lost_per_event = interruptions > 0 ? lost / interruptions * run.gpus / kHour : 0.0;
    e.on_demand_fraction = gpu_hours > 0 ? on_demand / gpu_hours : 0.0;
    if (run.tokens > 0 && e.finished == e.trials) e.cost_per_million_tokens = e.cost.mean / run.tokens * 1e6;
    // The closed form knows no fallback and no shrinking: a mixed or elastic row finishes when its
    // trials do.
    if (pricing == Pricing::mixed || plan.elastic) e.can_finish = e.finished > 0;
    if (e.finished < e.trials) {
      e.can_finish = e.finished > 0 && e.can_finish;
      const std::string note = fmt::format("{} of {} trials did not finish within {}", e.trials - e.finished, e.trials, within);
      add_note(e, note);
    }
    e.walls = std::move(walls);
    e.costs = std::move(costs);
    e.finished_trials = std::move(numbers);
    return e;
  };

  const auto plan_of = [&](const Offering& o) {
    Plan plan;
    plan.failure_rate = failure_rate;
    plan.spot = o.pricing == Pricing::spot;
    plan.preemption = o.preemption;
    plan.notice = o.notice_s;
    plan.capacity_wait = o.capacity_wait_s;
    plan.max_lifetime = o.max_lifetime_s;
    plan.price = o.effective_price_per_gpu_hour();
    plan.granularity = o.billing_granularity_s;
    plan.index_trace();
    return plan;
  };
  // Rows whose closed form leaves their policy out: the Monte Carlo means stand as the expectation.
  const auto monte_carlo_only = [&](CostEstimate e) {
    e.expected_wall_s = e.wall_s.mean;
    e.expected_cost = e.cost.mean;
    out.push_back(std::move(e));
  };
  for (const Offering& o : offerings) check_load(plan_of(o), o.name);  // (elastic and mixed rows see the same interruptions)
  // The on-demand offering that runs this job for least, by its expected bill: the hours held rounded
  // to its billing granularity, not its list price alone (a day-billed offering a little cheaper per
  // hour had been taken over a second-billed one that cost a quarter less for a 37-hour job).
  const Offering* cheapest_on_demand = nullptr;
  double cheapest_bill = kInfinity;
  for (const Offering& o : offerings) {
    if (o.pricing != Pricing::on_demand) continue;
    const ClosedForm f = closed_form(plan_of(o), 0.0);
    const double bill = f.finite ? expected_billed_s(f.held, 0.0, o.billing_granularity_s) / kHour * run.gpus * o.effective_price_per_gpu_hour() : kInfinity;
    if (!cheapest_on_demand || bill < cheapest_bill) {
      cheapest_on_demand = &o;
      cheapest_bill = bill;
    }
  }
  // A spot offering dearer per GPU-hour than the fallback gets no mixed row: falling back would only
  // make it cheaper and never slower, so the row would cost less the more it failed.
  const auto cheaper_than_fallback = [&](const Offering& o) {
    return o.pricing == Pricing::spot && cheapest_on_demand && o.effective_price_per_gpu_hour() < cheapest_on_demand->price_per_gpu_hour;
  };
  // On-demand alone (the break-evens' reference; after a mixed row's switch, its checkpoint interval
  // and how long it is expected to take), where there is an on-demand offering.
  const ClosedForm on_demand = cheapest_on_demand ? closed_form(plan_of(*cheapest_on_demand), 0.0) : ClosedForm{};
  if (options.deadline_s > 0) {
    // The deadline drives the mixed rows only: one that no row can use, or that not even a
    // failure-free run meets, would be dropped without a word.
    const bool spot = std::any_of(offerings.begin(), offerings.end(), [](const Offering& o) { return o.pricing == Pricing::spot; });
    if (!spot || !cheapest_on_demand) {
      throw CostInputError(Input::deadline, "", fmt::format("a deadline sets when a spot run falls back to on-demand, but the offerings priced have no {} one",
                                                            spot ? "on-demand" : "spot"));
    }
    if (options.deadline_s < run.work_s) {
      const auto [deadline, work] = compared_durations(options.deadline_s, run.work_s);
      throw CostInputError(Input::deadline, "", fmt::format("a deadline of {} is shorter than the run's {} failure-free: no offering can meet it", deadline, work));
    }
    if (std::none_of(offerings.begin(), offerings.end(), cheaper_than_fallback)) {
      throw CostInputError(Input::deadline, "",
                           fmt::format("a deadline sets when a spot run falls back to on-demand, but no spot offering costs less per GPU-hour than {} at {:.3f}",
                                       cheapest_on_demand->name, cheapest_on_demand->price_per_gpu_hour));
    }
  }
  for (const Offering& o : offerings) {
    const Plan plan = plan_of(o);
    CostEstimate e = estimate(plan, o.pricing, o.name);
    if (o.pricing == Pricing::reserved && o.term_hours > 0 && e.finished > 0 && e.wall_s.p50 < o.term_hours * kHour) {
      // The row bills the job's share of the term; renting it commits the whole term.
      const double commitment = run.gpus * (o.price_per_gpu_hour * o.term_hours + o.upfront_per_gpu);
      const std::string money = commitment >= 1e9   ? fmt::format("${:.2f}B", commitment / 1e9)
                                : commitment >= 1e6 ? fmt::format("${:.1f}M", commitment / 1e6)
                                                    : fmt::format("${:.0f}", commitment);
      add_note(e, fmt::format("the job takes {} of a term of {}, which commits {} GPUs to {} (upfront included); the row bills the job's share, "
                              "taking the rest of the term as used by other work",
                              duration(e.wall_s.p50), duration(o.term_hours * kHour), run.gpus, money));
    }
    if (cheapest_on_demand && o.pricing == Pricing::owned) {
      // Where owning costs as much per GPU-hour as the cheapest on-demand offering.
      Offering at = o;
      at.utilisation = 1.0;
      const double full = at.effective_price_per_gpu_hour();
      e.break_even_utilisation = full / cheapest_on_demand->price_per_gpu_hour;
    }
    if (cheapest_on_demand && plan.spot && o.preemption.kind == PreemptionProcess::Kind::poisson) {
      // The preemption rate at which spot's expected cost (closed form) reaches on-demand's, bisected.
      const double nodes = o.preemption.zone ? 1.0 : run.nodes;
      e.break_even_per_zone = o.preemption.zone;  // a zone's rate is per zone-hour (it had been labelled per node-hour)
      const auto cost_at = [&](double per_node_hour) {
        const double rate = with_lifetime(per_node_hour * nodes / kHour, plan.max_lifetime);
        Plan at = plan;
        at.preemption.rate_per_node_hour = per_node_hour;
        // At the interval that rate would take: Daly's for memoryless holds, the searched one for holds
        // a lifetime cuts (until 2026-12-07 these kept the row's own interval, so two rows of one
        // market and lifetime had break-evens from 0.37 to 1.03 by their own rates).
        const ClosedForm c = closed_form(at, rate);
        return c.finite ? expected_billed_s(c.held, rate, plan.granularity) / kHour * run.gpus * plan.price : kInfinity;
      };
      const double od_cost =
          expected_billed_s(on_demand.held, 0.0, cheapest_on_demand->billing_granularity_s) / kHour * run.gpus * cheapest_on_demand->price_per_gpu_hour;
      if (cost_at(0) < od_cost) {
        double lo = 0, hi = std::max(1e-6, o.preemption.rate_per_node_hour);
        while (cost_at(hi) < od_cost && hi < 1e3) lo = hi, hi *= 4;
        if (hi < 1e3) {
          // To 1e-5 of the rate (the table prints two digits; each point searches its interval).
          for (int i = 0; i < 100 && hi - lo > 1e-5 * hi; ++i) {
            const double mid = 0.5 * (lo + hi);
            (cost_at(mid) < od_cost ? lo : hi) = mid;
          }
          e.break_even_preemptions_per_node_hour = 0.5 * (lo + hi);
        }
      } else {
        // Dearer than on-demand even without preemptions: for its price alone, or for the
        // preemptions its maximum lifetime forces.
        e.break_even_preemptions_per_node_hour = 0.0;
        Plan unpreempted = plan;
        unpreempted.preemption.rate_per_node_hour = 0;
        unpreempted.max_lifetime = 0;
        const ClosedForm calm = closed_form(unpreempted, 0.0);
        const bool lifetime_to_blame = plan.max_lifetime > 0 && calm.finite &&
                                       expected_billed_s(calm.held, 0.0, plan.granularity) / kHour * run.gpus * plan.price < od_cost;
        e.break_even_none = lifetime_to_blame ? "dearer than on-demand at its lifetime's preemptions alone" : "no cheaper than on-demand unpreempted";
      }
    }
    out.push_back(std::move(e));
  }
  // Elastic: each spot offering whose nodes are preempted one at a time, with the job shrinking to
  // the data-parallel replicas still up instead of stopping (the nodes divide evenly among them).
  if (options.elastic && run.dp_replicas > 1 && run.nodes % run.dp_replicas == 0) {
    for (const Offering& o : offerings) {
      if (o.pricing != Pricing::spot || o.preemption.zone || o.preemption.kind != PreemptionProcess::Kind::poisson) continue;
      Plan plan = plan_of(o);
      plan.elastic = true;
      monte_carlo_only(estimate(plan, Pricing::spot, o.name + " (elastic)"));  // the closed form does not shrink
    }
  }
  // Mixed: each spot offering with the cheapest on-demand one as the fallback that meets the deadline.
  if (options.deadline_s > 0 && cheapest_on_demand) {
    const auto row_of = [&](const std::string& name, Pricing pricing) -> CostEstimate* {
      const auto it = std::find_if(out.begin(), out.end(), [&](const CostEstimate& e) { return e.offering == name && e.pricing == pricing; });
      return it == out.end() ? nullptr : &*it;
    };
    for (const Offering& o : offerings) {
      if (!cheaper_than_fallback(o)) continue;
      CostEstimate* spot_row = row_of(o.name, Pricing::spot);
      const CostEstimate* od_row = row_of(cheapest_on_demand->name, cheapest_on_demand->pricing);
      // Capacity that is never taken away: on-demand has the same failures, so falling back never
      // helps, and the row had fallen back anyway on a reserve that counted a wait for capacity that
      // cannot come (a probe's row went 100% on-demand at twice the spot row's cost).
      if (o.preemption.kind == PreemptionProcess::Kind::none && o.max_lifetime_s <= 0) {
        if (spot_row) add_note(*spot_row, fmt::format("no mixed row with {}: this capacity is never preempted, so falling back would never help", cheapest_on_demand->name));
        continue;
      }
      // Past its break-even (expected to cost as much as on-demand or more): a row that stays on spot
      // until the deadline forces the switch then costs less the more often spot fails, and more than
      // on-demand alone (a probe's rows at 6 to 60 preemptions per node-hour), as a dearer spot
      // offering's would. The closed forms decide: seed-independent.
      if (spot_row && od_row && (!spot_row->can_finish || !(spot_row->expected_cost < od_row->expected_cost))) {
        add_note(*spot_row, spot_row->can_finish && std::isfinite(spot_row->expected_cost)
                                ? fmt::format("no mixed row with {}: expected to cost ${:.0f} on spot alone against ${:.0f} on {}, past its break-even, "
                                              "so falling back would only make it cheaper the more it failed",
                                              cheapest_on_demand->name, spot_row->expected_cost, od_row->expected_cost, cheapest_on_demand->name)
                                : fmt::format("no mixed row with {}: spot alone cannot finish (past its break-even), so {} alone is the answer",
                                              cheapest_on_demand->name, cheapest_on_demand->name));
        continue;
      }
      Plan plan = plan_of(o);
      plan.fallback_price = cheapest_on_demand->price_per_gpu_hour;
      plan.fallback_granularity = cheapest_on_demand->billing_granularity_s;
      plan.deadline = options.deadline_s;
      plan.fallback_interval = on_demand.interval;
      CostEstimate e = estimate(plan, Pricing::mixed, o.name + " + " + cheapest_on_demand->name);  // the closed form does not switch
      const auto late = std::count_if(e.walls.begin(), e.walls.end(), [&](double w) { return w > options.deadline_s; });
      if (late > 0) {
        std::string note = fmt::format("{} of {} trials finished after the {} deadline", late, e.trials, duration(options.deadline_s));
        // A deadline close to on-demand's own time starts the run on on-demand (RunTrial::run), which
        // is then as late as on-demand alone; one under it is missed in most trials either way.
        if (options.deadline_s < on_demand.wall) {
          note += fmt::format(" (on-demand alone is expected to take {:.4g} h, more than the deadline: it is missed in most trials)", on_demand.wall / 3600.0);
        } else if (e.started_on_demand == e.trials) {
          note += fmt::format(" (on-demand alone is expected to take {:.4g} h, and the deadline leaves less than one interruption on spot is expected "
                              "to cost beyond it: every trial started on on-demand, late as often as on-demand alone)",
                              on_demand.wall / 3600.0);
        }
        add_note(e, note);
      }
      monte_carlo_only(std::move(e));
    }
  }
  return out;
}

}  // namespace cs::models
