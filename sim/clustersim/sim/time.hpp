// Simulated time: a signed 64-bit count of nanoseconds (a run reaches at most kLimit, about 146
// years, so that two times in range add without overflow), built only through
// named constructors so the unit is never in doubt. Integer time keeps runs reproducible: two
// events at the same instant compare equal and are ordered by their insertion sequence.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace cs::sim {

// A time outside the range a run may reach, or not a number: the input asked for a duration no
// real cluster has (a bandwidth or peak many orders of magnitude off, a size beyond any run).
class TimeRangeError : public std::range_error {
 public:
  using std::range_error::range_error;
};

// Throws TimeRangeError for `what` (e.g. "a simulated duration of 3e+10 s"), with the range and
// what such a time says about the input.
[[noreturn]] void throw_out_of_range(const std::string& what);

class Time {
 public:
  using Rep = std::int64_t;
  static constexpr Rep kPerSecond = 1'000'000'000;  // resolution: 1 ns
  // The latest instant a run may reach: 2^62 - 1 ns (about 146 years), so that the sum of two
  // times in range never overflows. Built past it, a time throws TimeRangeError.
  static constexpr Rep kLimit = (Rep{1} << 62) - 1;

  constexpr Time() = default;
  static constexpr Time ns(Rep n) { return Time(n); }
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<Rep>::max()); }
  // From a real number of units, rounded to the nearest nanosecond; beyond +-kLimit or not a
  // number, TimeRangeError.
  static Time seconds(double s) { return from_real(s * 1e9); }
  static Time nanoseconds(double n) { return from_real(n); }
  static Time ms(double v) { return from_real(v * 1e6); }
  static Time us(double v) { return from_real(v * 1e3); }

  [[nodiscard]] constexpr Rep count_ns() const { return ns_; }
  [[nodiscard]] constexpr double to_seconds() const { return static_cast<double>(ns_) / 1e9; }
  [[nodiscard]] constexpr double to_us() const { return static_cast<double>(ns_) / 1e3; }

  constexpr Time& operator+=(Time t) { ns_ += t.ns_; return *this; }
  constexpr Time& operator-=(Time t) { ns_ -= t.ns_; return *this; }
  friend constexpr Time operator+(Time a, Time b) { return Time(a.ns_ + b.ns_); }
  friend constexpr Time operator-(Time a, Time b) { return Time(a.ns_ - b.ns_); }
  friend constexpr Time operator*(Time a, Rep k) { return Time(a.ns_ * k); }
  friend constexpr auto operator<=>(Time, Time) = default;

 private:
  constexpr explicit Time(Rep n) : ns_(n) {}
  static Time from_real(double n);
  Rep ns_ = 0;
};

// "12.3 ms", "450 ns", "2.5 s".
std::string to_string(Time t);

}  // namespace cs::sim

template <>
struct fmt::formatter<cs::sim::Time> : fmt::formatter<std::string> {
  template <class Ctx>
  auto format(cs::sim::Time t, Ctx& ctx) const {
    return fmt::formatter<std::string>::format(cs::sim::to_string(t), ctx);
  }
};
