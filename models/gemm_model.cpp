#include "clustersim/models/gemm_model.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include <fmt/format.h>

namespace cs::models {

namespace {

struct Tile {
  int m;
  int n;
};
// NVIDIA "Matrix Multiplication Background User's Guide", tile quantization section.
constexpr std::array kTiles{Tile{256, 128}, Tile{128, 256}, Tile{128, 128}, Tile{128, 64}, Tile{64, 128}, Tile{64, 64}};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

GemmEstimate estimate_gemm(const HardwareProfile& hw, GemmShape s, Dtype dtype) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) {
    throw std::invalid_argument(fmt::format("GEMM dimensions must be positive, got {}x{}x{}", s.m, s.n, s.k));
  }
  if (!hw.supports(dtype)) {
    throw std::invalid_argument(fmt::format("{} has no {} peak in its profile", hw.name, to_string(dtype)));
  }
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  const double flops = 2.0 * m * n * k;
  const double peak = hw.peak(dtype).value() * hw.gemm.max_efficiency.at(dtype);
  const double k_eff = k / (k + hw.gemm.k_half);
  const double bytes = (m * k + k * n + m * n) * bytes_per_element(dtype);
  const double t_memory = bytes / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);

  GemmEstimate best;
  double best_compute = 0.0;
  for (const Tile& t : kTiles) {
    const std::int64_t tiles_m = ceil_div(s.m, t.m), tiles_n = ceil_div(s.n, t.n);
    const double q_tile = (m * n) / (static_cast<double>(tiles_m * t.m) * static_cast<double>(tiles_n * t.n));
    const std::int64_t tiles = tiles_m * tiles_n;
    const std::int64_t waves = ceil_div(tiles, hw.sm_count);
    const double q_wave = static_cast<double>(tiles) / static_cast<double>(waves * hw.sm_count);
    const double intensity = static_cast<double>(t.m) * t.n / (t.m + t.n);
    const double tile_eff = std::min(1.0, intensity / hw.gemm.tile_ridge_intensity);
    const double t_compute = flops / (peak * q_tile * q_wave * tile_eff * k_eff);
    if (best.tile_m == 0 || t_compute < best_compute) {
      best_compute = t_compute;
      best.tile_m = t.m;
      best.tile_n = t.n;
    }
  }
  best.memory_bound = t_memory > best_compute;
  best.time = Seconds(std::max(best_compute, t_memory) + hw.kernel_launch_overhead.value());
  best.achieved = FlopsPerSec(flops / best.time.value());
  best.efficiency = best.achieved / hw.peak(dtype);
  return best;
}

}  // namespace cs::models
