#include "clustersim/common/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <cstdlib>

namespace cs {

namespace {

constexpr std::array kBytes{
    UnitSpelling{"B", 1.0},         UnitSpelling{"KB", 1e3},           UnitSpelling{"MB", 1e6},
    UnitSpelling{"GB", 1e9},        UnitSpelling{"TB", 1e12},          UnitSpelling{"PB", 1e15},
    UnitSpelling{"KiB", 1024.0},    UnitSpelling{"MiB", 1048576.0},    UnitSpelling{"GiB", 1073741824.0},
    UnitSpelling{"TiB", 1099511627776.0}, UnitSpelling{"PiB", 1125899906842624.0}};

// Byte rates, and bit rates as networking gear is sold (400Gbps = 50 GB/s).
constexpr std::array kBytesPerSec{
    UnitSpelling{"B/s", 1.0},        UnitSpelling{"KB/s", 1e3},         UnitSpelling{"MB/s", 1e6},
    UnitSpelling{"GB/s", 1e9},       UnitSpelling{"TB/s", 1e12},        UnitSpelling{"PB/s", 1e15},  UnitSpelling{"KiB/s", 1024.0},
    UnitSpelling{"MiB/s", 1048576.0}, UnitSpelling{"GiB/s", 1073741824.0}, UnitSpelling{"TiB/s", 1099511627776.0},
    UnitSpelling{"bps", 1.0 / 8},    UnitSpelling{"Kbps", 1e3 / 8},     UnitSpelling{"Mbps", 1e6 / 8},
    UnitSpelling{"Gbps", 1e9 / 8},   UnitSpelling{"Tbps", 1e12 / 8},    UnitSpelling{"Gb/s", 1e9 / 8},
    UnitSpelling{"Tb/s", 1e12 / 8}};

constexpr std::array kFlops{
    UnitSpelling{"FLOP", 1.0},   UnitSpelling{"KFLOP", 1e3},  UnitSpelling{"MFLOP", 1e6},
    UnitSpelling{"GFLOP", 1e9},  UnitSpelling{"TFLOP", 1e12}, UnitSpelling{"PFLOP", 1e15},
    UnitSpelling{"EFLOP", 1e18}};

constexpr std::array kFlopsPerSec{
    UnitSpelling{"FLOPS", 1.0},   UnitSpelling{"GFLOPS", 1e9},    UnitSpelling{"TFLOPS", 1e12},
    UnitSpelling{"PFLOPS", 1e15}, UnitSpelling{"FLOP/s", 1.0},    UnitSpelling{"GFLOP/s", 1e9},
    UnitSpelling{"TFLOP/s", 1e12}, UnitSpelling{"PFLOP/s", 1e15}};

constexpr std::array kSeconds{
    UnitSpelling{"ns", 1e-9}, UnitSpelling{"us", 1e-6}, UnitSpelling{"ms", 1e-3}, UnitSpelling{"s", 1.0},
    UnitSpelling{"min", 60.0}, UnitSpelling{"h", 3600.0}, UnitSpelling{"d", 86400.0}};

constexpr std::array kWatts{UnitSpelling{"W", 1.0}, UnitSpelling{"kW", 1e3}, UnitSpelling{"MW", 1e6}};

constexpr std::array kHertz{UnitSpelling{"Hz", 1.0}, UnitSpelling{"kHz", 1e3}, UnitSpelling{"MHz", 1e6},
                            UnitSpelling{"GHz", 1e9}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Prints v / scale with three significant figures and no trailing zeros: 450, 1.5, 0.123.
std::string scaled(double v, double scale, std::string_view unit) {
  return fmt::format("{:.4g} {}", v / scale, unit);
}

struct Prefix {
  double scale;
  std::string_view unit;
};

template <std::size_t N>
std::string pick(double v, const std::array<Prefix, N>& prefixes) {
  const double mag = std::fabs(v);
  for (auto it = prefixes.rbegin(); it != prefixes.rend(); ++it) {
    if (mag >= it->scale) return scaled(v, it->scale, it->unit);
  }
  return scaled(v, prefixes.front().scale, prefixes.front().unit);
}

}  // namespace

bool parse_quantity_text(std::string_view text, const UnitSpelling* units, std::size_t count, double& out) {
  text = trim(text);
  // The number: everything up to the first character that cannot continue a decimal literal.
  std::size_t end = 0;
  while (end < text.size()) {
    const char c = text[end];
    const bool digit = c >= '0' && c <= '9';
    const bool sign = (c == '+' || c == '-') && (end == 0 || text[end - 1] == 'e' || text[end - 1] == 'E');
    const bool exponent = (c == 'e' || c == 'E') && end > 0 && end + 1 < text.size() &&
                          ((text[end + 1] >= '0' && text[end + 1] <= '9') || text[end + 1] == '-' || text[end + 1] == '+');
    if (!(digit || c == '.' || sign || exponent)) break;
    ++end;
  }
  if (end == 0) return false;
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, value);
  if (ec == std::errc::result_out_of_range && ptr == text.data() + end) {
    out = std::numeric_limits<double>::infinity();  // a number past a double's range: tell the caller
    return false;
  }
  if (ec != std::errc() || ptr != text.data() + end || !std::isfinite(value)) return false;
  const std::string_view suffix = trim(text.substr(end));
  if (suffix.empty()) return false;  // units are required
  for (std::size_t i = 0; i < count; ++i) {
    if (units[i].suffix == suffix) {
      out = value * units[i].factor;
      return std::isfinite(out);
    }
  }
  return false;
}

std::string list_units(const UnitSpelling* units, std::size_t count) {
  std::string s;
  for (std::size_t i = 0; i < count; ++i) {
    if (i) s += ", ";
    s += units[i].suffix;
  }
  return s;
}

#define CS_DEFINE_UNIT_TABLE(Q, table, phrase)                                  \
  const UnitSpelling* UnitTable<Q>::begin() { return table.data(); }           \
  std::size_t UnitTable<Q>::size() { return table.size(); }                    \
  const char* UnitTable<Q>::what() { return phrase; }
CS_DEFINE_UNIT_TABLE(Bytes, kBytes, "a size")
CS_DEFINE_UNIT_TABLE(BytesPerSec, kBytesPerSec, "a bandwidth")
CS_DEFINE_UNIT_TABLE(Flops, kFlops, "an amount of work")
CS_DEFINE_UNIT_TABLE(FlopsPerSec, kFlopsPerSec, "a compute rate")
CS_DEFINE_UNIT_TABLE(Seconds, kSeconds, "a duration")
CS_DEFINE_UNIT_TABLE(Watts, kWatts, "a power")
CS_DEFINE_UNIT_TABLE(Hertz, kHertz, "a frequency")
#undef CS_DEFINE_UNIT_TABLE

std::string to_string(Bytes v) {
  static constexpr std::array<Prefix, 6> p{{{1, "B"}, {1e3, "KB"}, {1e6, "MB"}, {1e9, "GB"}, {1e12, "TB"}, {1e15, "PB"}}};
  return pick(v.value(), p);
}
std::string to_string(BytesPerSec v) {
  static constexpr std::array<Prefix, 5> p{{{1, "B/s"}, {1e3, "KB/s"}, {1e6, "MB/s"}, {1e9, "GB/s"}, {1e12, "TB/s"}}};
  return pick(v.value(), p);
}
std::string to_string(Flops v) {
  static constexpr std::array<Prefix, 6> p{{{1, "FLOP"}, {1e9, "GFLOP"}, {1e12, "TFLOP"}, {1e15, "PFLOP"}, {1e18, "EFLOP"}, {1e21, "ZFLOP"}}};
  return pick(v.value(), p);
}
std::string to_string(FlopsPerSec v) {
  static constexpr std::array<Prefix, 5> p{{{1, "FLOP/s"}, {1e9, "GFLOP/s"}, {1e12, "TFLOP/s"}, {1e15, "PFLOP/s"}, {1e18, "EFLOP/s"}}};
  return pick(v.value(), p);
}
std::string to_string(Seconds v) {
  static constexpr std::array<Prefix, 6> p{{{1e-9, "ns"}, {1e-6, "us"}, {1e-3, "ms"}, {1, "s"}, {3600, "h"}, {86400, "d"}}};
  if (v.value() == 0.0) return "0 s";
  return pick(v.value(), p);
}
std::string days_text(Seconds v) {
  const double days = v.value() / 86400.0;
  return days >= 1.0 || !std::isfinite(days) ? fmt::format("{:.1f} days", days) : fmt::format("{:.3g} hours", v.value() / 3600.0);
}
std::string gpu_hours_text(double hours) {
  const std::string figure = hours >= 100 || !std::isfinite(hours) ? fmt::format("{:.0f}", hours) : fmt::format("{:.3g}", hours);
  return figure + (figure == "1" ? " GPU-hour" : " GPU-hours");
}
std::string days_figure(double days) {
  if (!std::isfinite(days)) return "-";
  return days >= 10 ? fmt::format("{:.1f}", days) : fmt::format("{:.3g}", days);
}
std::string to_string(Watts v) {
  static constexpr std::array<Prefix, 3> p{{{1, "W"}, {1e3, "kW"}, {1e6, "MW"}}};
  return pick(v.value(), p);
}
std::string to_string(Hertz v) {
  static constexpr std::array<Prefix, 4> p{{{1, "Hz"}, {1e3, "kHz"}, {1e6, "MHz"}, {1e9, "GHz"}}};
  return pick(v.value(), p);
}

}  // namespace cs
