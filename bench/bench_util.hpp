// Timing and memory figures shared by the benchmark programs.
#pragma once

#include <chrono>
#include <sys/resource.h>

namespace cs::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The process's peak resident set so far, in MiB (it only grows).
inline long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

}  // namespace cs::bench
