// Fluid network: flows move bytes over paths of links; concurrent flows share each link's capacity
// by max-min fairness.
//
// The maths (SimGrid's LMM with unit weights): each active flow f has a rate r_f; each link l a
// capacity C_l; the rates satisfy  sum_{f crosses l} r_f <= C_l  and r_f <= cap_f (a per-flow limit,
// for example a protocol's bandwidth cap). Max-min fairness by progressive filling: raise every
// rate together; when a link saturates (its share C_l' / n_l' of what is left is the smallest) or a
// flow reaches its cap, fix those flows' rates and remove them and their bandwidth; repeat with the
// rest. Links are directed, so the two directions of a full-duplex cable are independent.
//
// Only the part of the flow/link graph that an event touches is re-solved: starts and ends mark
// their links dirty, and one solve per instant (an event after the others at that time) re-rates
// the connected component of flows and links reachable from the dirty links. A flow first waits its
// latency (the sum of per-hop latencies), then transfers; its completion is an event at the
// nanosecond its remaining bytes run out at its current rate, re-scheduled when the rate changes.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "clustersim/sim/simulator.hpp"

namespace cs::sim {

class FluidNetwork final : public EventHandler {
 public:
  using LinkId = std::uint32_t;
  using FlowId = std::uint32_t;

  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void flow_done(FlowId flow, std::uint64_t tag) = 0;
  };

  // capacities[l]: bytes per second of directed link l; all must be positive.
  FluidNetwork(Simulator& sim, std::vector<double> capacities);

  // Starts a flow of `bytes` over `path` (link ids, in order) after `latency`. The listener is told
  // when the last byte arrives. rate_cap limits the flow's rate (bytes/s). The id names the flow
  // until its listener has been told; a flow started after that may get the same id.
  FlowId start(std::vector<LinkId> path, double bytes, Time latency, Listener* listener, std::uint64_t tag,
               double rate_cap = std::numeric_limits<double>::infinity());

  [[nodiscard]] double rate(FlowId f) const { return flows_[f].rate; }
  [[nodiscard]] double remaining(FlowId f) const { return flows_[f].remaining; }
  [[nodiscard]] std::size_t link_count() const { return links_.size(); }
  [[nodiscard]] double capacity(LinkId l) const { return links_[l].capacity; }
  [[nodiscard]] std::size_t active_flows() const { return active_; }

  // Called with (time, link, total rate in bytes/s) whenever a link's load changes: for traces.
  void set_link_observer(std::function<void(Time, LinkId, double)> observer) { observer_ = std::move(observer); }

  void handle(std::uint64_t payload) override;

 private:
  enum class State : std::uint8_t { pending, active, done };
  struct Flow {
    std::vector<LinkId> path;
    std::vector<std::uint32_t> slot;  // position of this flow in links_[path[k]].flows
    double remaining = 0;
    double rate = 0;
    double cap = 0;
    Time updated;
    std::uint32_t version = 0;
    State state = State::pending;
    Listener* listener = nullptr;
    std::uint64_t tag = 0;
  };
  struct Link {
    double capacity = 0;
    double load = 0;  // sum of its flows' rates after the last solve
    std::vector<FlowId> flows;
    // Scratch for progressive filling.
    double left = 0;
    std::uint32_t unfixed = 0;
  };
  enum Kind : std::uint64_t { kActivate = 0, kComplete = 1, kSolve = 2 };
  static std::uint64_t encode(Kind k, FlowId f, std::uint32_t version) {
    return (static_cast<std::uint64_t>(k) << 62) | (static_cast<std::uint64_t>(version & 0x3fffffffu) << 32) | f;
  }

  void activate(FlowId f);
  void complete(FlowId f);
  void release(FlowId f);  // tells the listener, then frees the slot
  void mark_dirty(FlowId f);
  void solve();

  Simulator& sim_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> flow_mark_, link_mark_;  // the solve's epoch that last reached each
  std::vector<FlowId> free_;  // slots of finished flows, taken again by later starts
  std::vector<LinkId> dirty_;
  bool solve_pending_ = false;
  std::uint32_t epoch_ = 0;
  std::size_t active_ = 0;
  // Completion events in the queue, current and superseded: every solve schedules the flows of its
  // component whose rate it changed again and leaves their old events behind, which grew without bound where many flows end at
  // many different times (a probe's all-to-all of 1,024 GPUs on a hashed Clos: 22.7 GB). Past
  // kCompactAt and 4 x the active flows, the superseded ones are discarded.
  std::size_t scheduled_completions_ = 0;
  static constexpr std::size_t kCompactAt = std::size_t{1} << 20;
  std::function<void(Time, LinkId, double)> observer_;
  // Scratch, kept to avoid allocation per solve.
  std::vector<LinkId> comp_links_;
  std::vector<FlowId> comp_flows_;
  std::vector<char> fixed_;  // per component flow during a solve: whether fixed, and at a new rate
  std::vector<std::uint32_t> scratch_position_;  // component index of each flow during a solve
  std::vector<std::pair<double, LinkId>> scratch_heap_;
  std::vector<std::uint32_t> scratch_capped_;
};

}  // namespace cs::sim
