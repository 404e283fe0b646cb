#include "clustersim/sim/time.hpp"


namespace cs::sim {

Time Time::from_real(double n) {
  if (!std::isfinite(n) || std::fabs(n) > static_cast<double>(kLimit)) {
    throw_out_of_range(fmt::format("a simulated duration of {:.4g} s", n / 1e9));
  }
  return Time(static_cast<Rep>(std::llround(n)));
}

void throw_out_of_range(const std::string& what) {
  const double limit_s = static_cast<double>(Time::kLimit) / 1e9;
  throw TimeRangeError(fmt::format("{} is beyond the simulator's range of {:.3g} s (about {:.0f} years): a bandwidth, peak, rate or size in the "
                                   "input is likely many orders of magnitude off",
                                   what, limit_s, limit_s / (365.25 * 86400.0)));
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
