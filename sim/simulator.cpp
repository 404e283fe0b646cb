#include "clustersim/sim/simulator.hpp"

#include <cassert>
#include <chrono>

namespace cs::sim {

Simulator::Simulator(std::unique_ptr<EventQueue> queue) : queue_(std::move(queue)) {}

void Simulator::schedule_at(Time at, EventHandler* handler, std::uint64_t payload) {
  assert(at >= now_ && "events are never scheduled in the past");
  if (at.count_ns() > Time::kLimit) {
    throw_out_of_range(fmt::format("an event at {:.4g} s", at.to_seconds()));
  }
  queue_->push(at < now_ ? now_ : at, handler, payload);
}

Time Simulator::run(Time until) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!queue_->empty() && queue_->top().time <= until) {
    const Event e = queue_->pop();
    now_ = e.time;
    ++stats_.events;
    e.handler->handle(e.payload);
    if (progress_ && stats_.events % progress_every_ == 0) progress_(now_, stats_);
  }
  stats_.wall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return now_;
}

}  // namespace cs::sim
