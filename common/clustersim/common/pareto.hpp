// The Pareto front of points to minimise in two measures (a plan's time and cost), shared by the plan
// search, which writes it, and the report, which checks a plans.json's against its plans.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

namespace cs {

// The indices of the points no other point is both at most as slow and cheaper than, in order of
// time. Ties in time go to the cheaper, then to the earlier index, so the same points give the same
// front in any order of evaluation.
inline std::vector<std::size_t> pareto_front(const std::vector<double>& time, const std::vector<double>& cost) {
  std::vector<std::size_t> order(time.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return time[a] < time[b] || (time[a] == time[b] && (cost[a] < cost[b] || (cost[a] == cost[b] && a < b)));
  });
  std::vector<std::size_t> front;
  double best = std::numeric_limits<double>::infinity();  // a cost of +inf or NaN is never on it
  for (std::size_t i : order) {
    if (cost[i] < best) {
      front.push_back(i);
      best = cost[i];
    }
  }
  return front;
}

}  // namespace cs
