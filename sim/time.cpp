#include "clustersim/sim/time.hpp"


namespace cs::sim {

Time Time::from_real(double n) {
  if (!std::isfinite(n) || std::fabs(n) > static_cast<double>(kLimit)) {
    throw TimeRangeError(fmt::format(
        "a simulated duration of {:.4g} s is beyond the simulator's range of {:.3g} s (about 146 years): a bandwidth, peak, rate or size in the "
        "input is likely many orders of magnitude off",
        n / 1e9, static_cast<double>(kLimit) / 1e9));
  }
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
