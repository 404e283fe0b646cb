// Physical quantities with their unit in the type name: Bytes, BytesPerSec, FlopsPerSec, Seconds...
// Each is a double in SI base units (bytes, bytes per second, FLOP per second, seconds, watts, hertz).
// Arithmetic that changes the unit is spelled out below (Bytes / BytesPerSec -> Seconds), so a
// bandwidth can never be added to a size by mistake.
#pragma once

#include <compare>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace cs {

template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double value) : value_(value) {}
  [[nodiscard]] constexpr double value() const { return value_; }

  constexpr Quantity& operator+=(Quantity other) { value_ += other.value_; return *this; }
  constexpr Quantity& operator-=(Quantity other) { value_ -= other.value_; return *this; }
  constexpr Quantity& operator*=(double k) { value_ *= k; return *this; }
  constexpr Quantity& operator/=(double k) { value_ /= k; return *this; }
  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.value_ + b.value_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.value_ - b.value_); }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.value_ / k); }
  friend constexpr double operator/(Quantity a, Quantity b) { return a.value_ / b.value_; }
  friend constexpr auto operator<=>(Quantity, Quantity) = default;

 private:
  double value_ = 0.0;
};

struct BytesTag {};
struct BytesPerSecTag {};
struct FlopsTag {};
struct FlopsPerSecTag {};
struct SecondsTag {};
struct WattsTag {};
struct HertzTag {};

using Bytes = Quantity<BytesTag>;              // bytes
using BytesPerSec = Quantity<BytesPerSecTag>;  // bytes per second (one direction of a link)
using Flops = Quantity<FlopsTag>;              // floating-point operations
using FlopsPerSec = Quantity<FlopsPerSecTag>;  // floating-point operations per second
using Seconds = Quantity<SecondsTag>;          // a duration in seconds (analysis; the engine has sim::Time)
using Watts = Quantity<WattsTag>;
using Hertz = Quantity<HertzTag>;

constexpr Seconds operator/(Bytes b, BytesPerSec r) { return Seconds(b.value() / r.value()); }
constexpr Bytes operator*(BytesPerSec r, Seconds t) { return Bytes(r.value() * t.value()); }
constexpr Bytes operator*(Seconds t, BytesPerSec r) { return r * t; }
constexpr Seconds operator/(Flops f, FlopsPerSec r) { return Seconds(f.value() / r.value()); }
constexpr Flops operator*(FlopsPerSec r, Seconds t) { return Flops(r.value() * t.value()); }

namespace literals {
constexpr Bytes operator""_GB(long double v) { return Bytes(static_cast<double>(v) * 1e9); }
constexpr Bytes operator""_GiB(long double v) { return Bytes(static_cast<double>(v) * 1073741824.0); }
constexpr BytesPerSec operator""_GBps(long double v) { return BytesPerSec(static_cast<double>(v) * 1e9); }
constexpr BytesPerSec operator""_Gbps(long double v) { return BytesPerSec(static_cast<double>(v) * 1e9 / 8); }
constexpr Seconds operator""_us(long double v) { return Seconds(static_cast<double>(v) * 1e-6); }
constexpr FlopsPerSec operator""_TFLOPS(long double v) { return FlopsPerSec(static_cast<double>(v) * 1e12); }
}  // namespace literals

// One accepted spelling of a unit and its factor to the base unit.
struct UnitSpelling {
  std::string_view suffix;
  double factor;
};

// The table of spellings accepted for a quantity, and a phrase for messages ("a size").
template <class Q>
struct UnitTable;

// Parses "400Gbps", "50 GB/s", "1.5us" into the quantity. Returns false when the text is not a
// finite number followed by one of the accepted units; a bare number is rejected (units are required).
// A value past a double's range (the number itself, or the number times its unit) leaves `out` infinite.
bool parse_quantity_text(std::string_view text, const UnitSpelling* units, std::size_t count, double& out);

// "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB" for messages.
std::string list_units(const UnitSpelling* units, std::size_t count);

#define CS_DECLARE_UNIT_TABLE(Q)                              \
  template <>                                                 \
  struct UnitTable<Q> {                                       \
    static const UnitSpelling* begin();                       \
    static std::size_t size();                                \
    static const char* what();                                \
  };
CS_DECLARE_UNIT_TABLE(Bytes)
CS_DECLARE_UNIT_TABLE(BytesPerSec)
CS_DECLARE_UNIT_TABLE(Flops)
CS_DECLARE_UNIT_TABLE(FlopsPerSec)
CS_DECLARE_UNIT_TABLE(Seconds)
CS_DECLARE_UNIT_TABLE(Watts)
CS_DECLARE_UNIT_TABLE(Hertz)
#undef CS_DECLARE_UNIT_TABLE

// Human-readable text with a fitting prefix: "80 GB", "450 GB/s", "1.5 us", "989 TFLOP/s".
std::string to_string(Bytes v);
std::string to_string(BytesPerSec v);
std::string to_string(Flops v);
std::string to_string(FlopsPerSec v);
std::string to_string(Seconds v);
// A long run's length: "20.4 days", or under a day "0.935 hours" (a fixed "0.0 days" said nothing).
std::string days_text(Seconds v);
// GPU-hours: whole ones from 100 on ("2880672 GPU-hours"), three significant digits below ("0.0305
// GPU-hours": a fixed "0" said nothing of a short budget), "1 GPU-hour".
std::string gpu_hours_text(double hours);
// Days in a table cell: one decimal from 10 on, three significant digits below ("0.0392").
std::string days_figure(double days);
std::string to_string(Watts v);
std::string to_string(Hertz v);

}  // namespace cs

template <class Tag>
struct fmt::formatter<cs::Quantity<Tag>> : fmt::formatter<std::string> {
  template <class Ctx>
  auto format(cs::Quantity<Tag> q, Ctx& ctx) const {
    return fmt::formatter<std::string>::format(cs::to_string(q), ctx);
  }
};
