// A small wrapper over Boost's push-relabel maximum flow, for bisection and injection bandwidth.
// Capacities are integer bytes per second scaled to kB/s, so the solver's comparisons are exact.
#pragma once

#include <cstdint>
#include <vector>

#include "clustersim/common/units.hpp"

namespace cs::topology {

class FlowNetwork {
 public:
  explicit FlowNetwork(std::size_t vertices);
  std::size_t add_vertex();
  // A directed arc with this capacity (a full-duplex link is two arcs).
  void add_arc(std::size_t from, std::size_t to, BytesPerSec capacity);
  void add_unbounded_arc(std::size_t from, std::size_t to);
  [[nodiscard]] BytesPerSec max_flow(std::size_t source, std::size_t sink) const;

 private:
  struct Arc {
    std::size_t from, to;
    std::int64_t capacity;
  };
  std::size_t vertices_;
  std::vector<Arc> arcs_;
};

}  // namespace cs::topology
