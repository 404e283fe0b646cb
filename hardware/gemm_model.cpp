#include "clustersim/hardware/gemm_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace cs::hardware {

namespace {

struct Tile {
  int m;
  int n;
};
// NVIDIA "Matrix Multiplication Background User's Guide", tile quantization section.
constexpr std::array kTiles{Tile{256, 128}, Tile{128, 256}, Tile{128, 128}, Tile{128, 64}, Tile{64, 128}, Tile{64, 64}};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

namespace {

// A way to run a GEMM: a tile shape and a split of the K loop.
struct Candidate {
  double factor = 0.0;     // q_tile * q_wave * tile_eff * k_eff
  int tile_m = 0;
  int tile_n = 0;
  int split_k = 1;         // K slices computed by separate thread blocks and summed afterwards
  double reduction = 0.0;  // seconds of the pass that adds the slices' fp32 partial sums (split_k > 1)
};

// Split-K slices hold at least this many K elements (four 64-deep mainloop stages); at most 16 slices.
constexpr std::int64_t kMinSliceK = 256;
constexpr int kMaxSplitK = 16;

double flops_of(GemmShape s) { return 2.0 * static_cast<double>(s.batch) * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k); }
double memory_time(const HardwareProfile& hw, GemmShape s, Dtype dtype) {
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  return static_cast<double>(s.batch) * (m * k + k * n + m * n) * bytes_per_element(dtype) / (hw.memory_bandwidth.value() * hw.gemm.memory_efficiency);
}

// Every tile of the guide's list, unsplit and split. A GEMM with fewer output tiles than SMs leaves
// SMs idle unless its K loop is split over more thread blocks whose partial sums are then added
// (cuBLASLt's split-K reduction schemes, CUTLASS's split-K and stream-K decompositions: Osama et al.,
// "Stream-K", PPoPP 2023). The split tried is the one whose blocks fill one wave; each slice's
// shorter K loop pays its own k_eff (its epilogue writes the partial tile), and a reduction pass
// reads the slices' fp32 partials and writes the result.
template <class Visit>
void for_each_candidate(const HardwareProfile& hw, GemmShape s, Dtype dtype, Visit&& visit) {
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n);
  const double elements = static_cast<double>(s.batch) * m * n;
  const double bandwidth = hw.memory_bandwidth.value() * hw.gemm.memory_efficiency;
  const double ridge = hw.gemm.ridge_for(dtype);
  const double k_half = hw.gemm.k_half_for(dtype);
  const double out_bytes = bytes_per_element(dtype);
  for (const Tile& t : kTiles) {
    const std::int64_t tiles_m = ceil_div(s.m, t.m), tiles_n = ceil_div(s.n, t.n);
    const double q_tile = (m * n) / (static_cast<double>(tiles_m * t.m) * static_cast<double>(tiles_n * t.n));
    const std::int64_t tiles = tiles_m * tiles_n * s.batch;
    const double intensity = static_cast<double>(t.m) * t.n / (t.m + t.n);
    const double tile_eff = std::min(1.0, intensity / ridge);
    // Unsplit, and split into as many slices as one wave holds (the split that fills the SMs).
    const std::int64_t fill = std::min<std::int64_t>({kMaxSplitK, hw.sm_count / tiles, s.k / kMinSliceK});
    for (int option = 0; option < (fill >= 2 ? 2 : 1); ++option) {
      const std::int64_t split = option == 0 ? 1 : fill;
      const std::int64_t blocks = tiles * split;
      const std::int64_t waves = ceil_div(blocks, hw.sm_count);
      const double q_wave = static_cast<double>(blocks) / static_cast<double>(waves * hw.sm_count);
      const double slice = static_cast<double>(ceil_div(s.k, split));
      // The whole K loop's work against that of `split` slices as long as the longest.
      const double factor = q_tile * q_wave * tile_eff * (slice / (slice + k_half)) * (static_cast<double>(s.k) / (slice * split));
      const double reduction = split > 1 ? elements * (4.0 * split + out_bytes) / bandwidth : 0.0;
      visit(Candidate{factor, t.m, t.n, static_cast<int>(split), reduction});
    }
  }
}

// The candidate chosen and its times.
struct Choice {
  Candidate candidate;
  double t_compute = 0;
  double t_memory = 0;
};

// The candidate with the shortest time at this compute ceiling (FLOP/s), as cuBLAS's heuristics aim
// for; on a tie (memory-bound shapes) the one that loses least to the shape.
Choice best_candidate(const HardwareProfile& hw, GemmShape s, Dtype dtype, double ceiling) {
  Choice best;
  best.t_memory = memory_time(hw, s, dtype);
  const double flops = flops_of(s);
  double best_time = 0;
  for_each_candidate(hw, s, dtype, [&](const Candidate& c) {
    const double t_compute = flops / (ceiling * c.factor);
    const double t = std::max(t_compute, best.t_memory) + c.reduction;
    if (best.candidate.factor == 0.0 || t < best_time || (t == best_time && c.factor > best.candidate.factor)) {
      best.candidate = c;
      best.t_compute = t_compute;
      best_time = t;
    }
  });
  return best;
}

void check_arguments(const HardwareProfile& hw, GemmShape s, Dtype dtype) {
  if (const std::string problem = gemm_shape_problem(s); !problem.empty()) throw std::invalid_argument(problem);
  if (!hw.supports(dtype)) {
    throw std::invalid_argument(fmt::format("{} has no {} peak in its profile", hw.name, to_string(dtype)));
  }
}

}  // namespace

double GemmResidualTable::factor(double m, double n, double k) const {
  if (empty()) return 1.0;
  // Position on each axis in grid steps, clamped to the grid: [0, size - 1].
  const auto position = [](double x, int first, int last) { return std::clamp(std::log2(x), double(first), double(last)) - first; };
  const double pm = position(m, m_first, m_last), pn = position(n, n_first, n_last), pk = position(k, k_first, k_last);
  const int i0 = std::min(static_cast<int>(pm), size_m() - 1), j0 = std::min(static_cast<int>(pn), size_n() - 1),
            l0 = std::min(static_cast<int>(pk), size_k() - 1);
  const int i1 = std::min(i0 + 1, size_m() - 1), j1 = std::min(j0 + 1, size_n() - 1), l1 = std::min(l0 + 1, size_k() - 1);
  const double fm = pm - i0, fn = pn - j0, fk = pk - l0;
  // Trilinear interpolation of the log factor.
  double log_factor = 0;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 2; ++c) {
        const double w = (a ? fm : 1 - fm) * (b ? fn : 1 - fn) * (c ? fk : 1 - fk);
        if (w > 0) log_factor += w * std::log(at(a ? i1 : i0, b ? j1 : j0, c ? l1 : l0));
      }
    }
  }
  return std::exp(log_factor);
}

double load_factor(const HardwareProfile& hw, Load load) { return load == Load::sustained ? hw.gemm.sustained_fraction : 1.0; }

std::string gemm_shape_problem(GemmShape s) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) return fmt::format("GEMM dimensions must be positive, got {}x{}x{} (batch {})", s.m, s.n, s.k, s.batch);
  // Past these the tile counts overflow 64 bits (2^44 x 2^44 had wrapped to 0 tiles and divided by
  // it); no GEMM a model runs comes near them.
  constexpr std::int64_t kMaxDimension = std::int64_t{1} << 31;
  const double outputs = static_cast<double>(s.batch) * static_cast<double>(s.m) * static_cast<double>(s.n);
  if (s.m > kMaxDimension || s.n > kMaxDimension || s.k > kMaxDimension || s.batch > kMaxDimension || outputs > 0x1p62) {
    return fmt::format("GEMM of {}x{}x{} (batch {}): at most 2^31 a dimension and 2^62 outputs are modelled", s.m, s.n, s.k, s.batch);
  }
  return {};
}

GemmEstimate estimate_gemm(const HardwareProfile& hw, GemmShape s, Dtype dtype, Load load) {
  check_arguments(hw, s, dtype);
  const double ceiling = hw.peak(dtype).value() * hw.gemm.max_efficiency.at(dtype) * load_factor(hw, load);
  const Choice choice = best_candidate(hw, s, dtype, ceiling);
  const Candidate& tile = choice.candidate;
  const double t_compute = choice.t_compute, t_memory = choice.t_memory;
  GemmEstimate e;
  e.tile_m = tile.tile_m;
  e.tile_n = tile.tile_n;
  e.memory_bound = t_memory > t_compute;
  double correction = 1.0;
  if (auto r = hw.gemm.residuals.find(dtype); r != hw.gemm.residuals.end()) {
    correction = r->second.factor(static_cast<double>(s.m), static_cast<double>(s.n), static_cast<double>(s.k));
  }
  e.split_k = tile.split_k;
  e.time = Seconds((std::max(t_compute, t_memory) + tile.reduction + hw.kernel_launch_overhead.value()) * correction);
  e.achieved = FlopsPerSec(flops_of(s) / e.time.value());
  e.efficiency = e.achieved / hw.peak(dtype);
  return e;
}

double fit_max_efficiency(const HardwareProfile& hw, GemmShape s, Dtype dtype, FlopsPerSec measured) {
  check_arguments(hw, s, dtype);
  const double t_kernel = flops_of(s) / measured.value() - hw.kernel_launch_overhead.value();
  // The candidate the model would pick depends on the ceiling: iterate from the profile's own until
  // the pick settles (a split's reduction pass is not compute).
  double ceiling = hw.peak(dtype).value() * hw.gemm.max_efficiency.at(dtype);
  for (int i = 0; i < 20; ++i) {
    const Choice choice = best_candidate(hw, s, dtype, ceiling);
    const Candidate& c = choice.candidate;
    const double t_compute = t_kernel - c.reduction;
    if (t_compute <= choice.t_memory) {
      throw std::invalid_argument(fmt::format("{}x{}x{} {} at {} is memory-bound or faster than launch overhead allows: it cannot fit a compute ceiling",
                                              s.m, s.n, s.k, to_string(dtype), to_string(measured)));
    }
    const double next = flops_of(s) / (t_compute * c.factor);
    const bool settled = std::abs(next - ceiling) <= 1e-12 * next;
    ceiling = next;
    if (settled) break;
  }
  ceiling /= hw.peak(dtype).value();
  if (ceiling > 1.0) {
    throw std::invalid_argument(fmt::format("{}x{}x{} {} at {} needs an efficiency ceiling of {:.3f} > 1 in this model",
                                            s.m, s.n, s.k, to_string(dtype), to_string(measured), ceiling));
  }
  return ceiling;
}

}  // namespace cs::hardware
