// The event queue: events ordered by (time, insertion sequence), so that events at the same
// instant run in the order they were scheduled and two runs of one input are identical.
//
// EventQueue is the interface; BinaryHeapQueue is the implementation (a 4-ary heap: shallower
// than a binary heap, and its four children share a cache line or two). One test suite runs
// against the interface (tests/sim_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "clustersim/sim/time.hpp"

namespace cs::sim {

class EventHandler;

struct Event {
  Time time;
  std::uint64_t seq = 0;          // insertion order, assigned by the queue
  EventHandler* handler = nullptr;
  std::uint64_t payload = 0;      // interpreted by the handler
};

inline bool earlier(const Event& a, const Event& b) {
  return a.time < b.time || (a.time == b.time && a.seq < b.seq);
}

class EventQueue {
 public:
  virtual ~EventQueue() = default;
  // Adds an event; returns its sequence number.
  virtual std::uint64_t push(Time time, EventHandler* handler, std::uint64_t payload) = 0;
  // Removes and returns the earliest event. Precondition: !empty().
  virtual Event pop() = 0;
  [[nodiscard]] virtual const Event& top() const = 0;
  [[nodiscard]] virtual bool empty() const = 0;
  [[nodiscard]] virtual std::size_t size() const = 0;
};

class BinaryHeapQueue final : public EventQueue {
 public:
  std::uint64_t push(Time time, EventHandler* handler, std::uint64_t payload) override;
  Event pop() override;
  [[nodiscard]] const Event& top() const override { return heap_.front(); }
  [[nodiscard]] bool empty() const override { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const override { return heap_.size(); }

 private:
  static constexpr std::size_t kArity = 4;
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace cs::sim
