// A portable seeded generator and sample summaries shared by the Monte Carlo parts (serving
// workloads, the cost model).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace cs {

// splitmix64 (Steele, Lea and Flood 2014): a fixed, portable generator, so a seed gives the same
// numbers on every platform (std's distributions are implementation-defined).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Uniform in (0, 1).
inline double uniform01(std::uint64_t& state) { return (static_cast<double>(splitmix64(state) >> 11) + 0.5) / 9007199254740992.0; }

struct SampleSummary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};
// The q-quantile (0..1) of a sorted, non-empty sample by linear interpolation between closest
// ranks (numpy's default, which vLLM's benchmark uses).
inline double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}
// The q-quantile of `total` trials of which `sorted` (ascending) are those that finished, the others
// counting after every one of them: infinite where it reaches into the unfinished ones.
inline double quantile_with_unfinished(const std::vector<double>& sorted, std::size_t total, double q) {
  const double pos = q * static_cast<double>(total - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const double frac = pos - static_cast<double>(lo);
  if (lo >= sorted.size() || (frac > 0 && lo + 1 >= sorted.size())) return std::numeric_limits<double>::infinity();
  return frac > 0 ? sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]) : sorted[lo];
}
// Mean and quantiles as quantile_sorted computes them; zeros for an empty sample.
inline SampleSummary summarize(std::vector<double> v) {
  SampleSummary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.p50 = quantile_sorted(v, 0.5);
  s.p90 = quantile_sorted(v, 0.9);
  s.p99 = quantile_sorted(v, 0.99);
  return s;
}

}  // namespace cs
