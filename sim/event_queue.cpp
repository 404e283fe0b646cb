#include "clustersim/sim/event_queue.hpp"

#include <cassert>
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

}  // namespace cs::sim
