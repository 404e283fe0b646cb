#include "clustersim/sim/event_queue.hpp"

#include <cassert>
#include <algorithm>
#include <utility>

namespace cs::sim {

std::uint64_t BinaryHeapQueue::push(Time time, EventHandler* handler, std::uint64_t payload) {
  const Event e{time, next_seq_++, handler, payload};
  std::size_t i = heap_.size();
  heap_.push_back(e);
  while (i > 0) {
    const std::size_t parent = (i - 1) / kArity;
    if (!earlier(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
  return e.seq;
}

Event BinaryHeapQueue::pop() {
  assert(!heap_.empty());
  const Event out = heap_.front();
  const Event last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n == 0) return out;
  std::size_t i = 0;
  for (;;) {
    const std::size_t first = i * kArity + 1;
    if (first >= n) break;
    std::size_t best = first;
    const std::size_t end = first + kArity < n ? first + kArity : n;
    for (std::size_t c = first + 1; c < end; ++c) {
      if (earlier(heap_[c], heap_[best])) best = c;
    }
    if (!earlier(heap_[best], last)) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = last;
  return out;
}

std::size_t BinaryHeapQueue::discard(const std::function<bool(const Event&)>& drop) {
  const std::size_t before = heap_.size();
  std::erase_if(heap_, drop);
  // Sorted by (time, sequence), the events form a valid heap (each parent before its children).
  std::sort(heap_.begin(), heap_.end(), earlier);
  return before - heap_.size();
}

}  // namespace cs::sim

namespace cs::sim {

std::size_t RadixHeapQueue::discard(const std::function<bool(const Event&)>& drop) {
  std::vector<Event>& zero = buckets_[0];
  zero.erase(zero.begin(), zero.begin() + static_cast<std::ptrdiff_t>(std::min(head_, zero.size())));  // already popped
  head_ = 0;
  std::size_t removed = 0;
  for (auto& bucket : buckets_) removed += std::erase_if(bucket, drop);  // each bucket keeps its order
  size_ -= removed;
  return removed;
}

std::size_t RadixHeapQueue::bucket_of(Time t) const {
  const auto x = static_cast<std::uint64_t>(t.count_ns()) ^ static_cast<std::uint64_t>(last_.count_ns());
  return x == 0 ? 0 : static_cast<std::size_t>(64 - __builtin_clzll(x));
}

void RadixHeapQueue::rebase(Time t) {
  std::vector<Event> pending(buckets_[0].begin() + static_cast<std::ptrdiff_t>(head_), buckets_[0].end());
  for (int b = 1; b < kBuckets; ++b) pending.insert(pending.end(), buckets_[b].begin(), buckets_[b].end());
  for (auto& bucket : buckets_) bucket.clear();
  head_ = 0;
  last_ = t;
  std::sort(pending.begin(), pending.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
  for (const Event& e : pending) buckets_[bucket_of(e.time)].push_back(e);
}

std::uint64_t RadixHeapQueue::push(Time time, EventHandler* handler, std::uint64_t payload) {
  assert(time >= popped_ && "a radix heap needs a monotone clock");
  if (time < last_) rebase(time);
  const Event e{time, next_seq_++, handler, payload};
  buckets_[bucket_of(time)].push_back(e);  // bucket 0 stays sorted: e has the newest sequence
  ++size_;
  return e.seq;
}

void RadixHeapQueue::refill() const {
  std::vector<Event>& zero = buckets_[0];
  if (head_ < zero.size()) return;
  zero.clear();
  head_ = 0;
  std::size_t b = 1;
  while (b < kBuckets && buckets_[b].empty()) ++b;
  if (b == kBuckets) return;
  std::vector<Event>& from = buckets_[b];
  Time lowest = from.front().time;
  for (const Event& e : from) lowest = std::min(lowest, e.time);
  last_ = lowest;
  for (const Event& e : from) buckets_[bucket_of(e.time)].push_back(e);
  from.clear();
  // Events of the new current time came from one bucket in arrival order, not sequence order.
  std::sort(zero.begin(), zero.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
}

const Event& RadixHeapQueue::top() const {
  assert(size_ > 0);
  refill();
  return buckets_[0][head_];
}

Event RadixHeapQueue::pop() {
  const Event e = top();
  popped_ = e.time;
  ++head_;
  --size_;
  return e;
}

}  // namespace cs::sim
