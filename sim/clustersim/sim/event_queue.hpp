// The event queue: events ordered by (time, insertion sequence), so that events at the same
// instant run in the order they were scheduled and two runs of one input are identical.
//
// EventQueue is the interface, with two implementations: BinaryHeapQueue (a 4-ary heap: shallower
// than a binary heap, its four children share a cache line or two; any push order) and
// RadixHeapQueue (for a monotone clock, the simulator's default). One test suite runs against both
// (tests/sim_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
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
  // Removes every event `drop` selects (events a handler knows to be superseded), keeping the others'
  // order; returns how many went. O(size).
  virtual std::size_t discard(const std::function<bool(const Event&)>& drop) = 0;
};

class BinaryHeapQueue final : public EventQueue {
 public:
  std::uint64_t push(Time time, EventHandler* handler, std::uint64_t payload) override;
  Event pop() override;
  [[nodiscard]] const Event& top() const override { return heap_.front(); }
  [[nodiscard]] bool empty() const override { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const override { return heap_.size(); }
  std::size_t discard(const std::function<bool(const Event&)>& drop) override;

 private:
  static constexpr std::size_t kArity = 4;
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace cs::sim

namespace cs::sim {

// A radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990), for a simulation's monotone clock: no event
// is ever pushed earlier than the last one popped. Bucket b holds the events whose time differs from
// the last popped time first in bit b - 1; a pop empties the lowest bucket into the ones below it.
// Events of equal time leave in insertion order: bucket 0 (the current time) is kept sorted by
// sequence. Push is O(1); pop is O(1) amortised plus the redistribution of a bucket.
// Precondition (asserted in debug builds): push(time) with time >= the last popped time. A peek
// (top) may move the buckets' base past that time; a later push below the base re-buckets the
// pending events once (O(n)), which happens only when a run stops early and then resumes.
class RadixHeapQueue final : public EventQueue {
 public:
  std::uint64_t push(Time time, EventHandler* handler, std::uint64_t payload) override;
  Event pop() override;
  [[nodiscard]] const Event& top() const override;
  [[nodiscard]] bool empty() const override { return size_ == 0; }
  [[nodiscard]] std::size_t size() const override { return size_; }
  std::size_t discard(const std::function<bool(const Event&)>& drop) override;

 private:
  static constexpr int kBuckets = 65;
  std::size_t bucket_of(Time t) const;
  void refill() const;  // makes bucket 0 non-empty (when the queue is not empty)
  void rebase(Time t);  // moves the base down to t, re-bucketing every pending event

  mutable std::vector<Event> buckets_[kBuckets];
  mutable std::size_t head_ = 0;  // next event of bucket 0
  mutable Time last_;             // the time bucket 0 holds: the base of the buckets
  Time popped_;                   // the time of the last event popped
  std::size_t size_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace cs::sim
