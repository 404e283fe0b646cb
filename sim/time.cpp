#include "clustersim/sim/time.hpp"

#include <cassert>

namespace cs::sim {

Time Time::from_real(double n) {
  assert(std::isfinite(n));
  constexpr double kLimit = static_cast<double>(std::numeric_limits<Rep>::max());
  if (n >= kLimit) return max();
  if (n <= -kLimit) return Time(std::numeric_limits<Rep>::min());
  return Time(static_cast<Rep>(std::llround(n)));
}

std::string to_string(Time t) {
  const double ns = static_cast<double>(t.count_ns());
  const double mag = std::fabs(ns);
  if (mag < 1e3) return fmt::format("{} ns", t.count_ns());
  if (mag < 1e6) return fmt::format("{:.4g} us", ns / 1e3);
  if (mag < 1e9) return fmt::format("{:.4g} ms", ns / 1e6);
  return fmt::format("{:.4g} s", ns / 1e9);
}

}  // namespace cs::sim
