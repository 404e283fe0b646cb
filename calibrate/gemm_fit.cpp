#include "clustersim/calibrate/gemm_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/hardware/gemm_model.hpp"

namespace cs::calibrate {

std::string FitQuality::r2_text() const { return std::isfinite(r2) ? fmt::format("{:.4f}", r2) : "-"; }

namespace {

using hardware::Dtype;
using hardware::HardwareProfile;

// Bounds of the fitted parameters (in their own units): below the lower bound a parameter has no
// effect any more, and efficiencies cannot exceed 1.
constexpr double kMinOverhead = 1e-9;    // s
constexpr double kMinRidge = 1.0;        // tile intensity
constexpr double kMinKHalf = 1e-3;       // elements
constexpr double kMinEfficiency = 1e-4;
// The launch overhead is fitted only when the shortest sample lasts at most this many overheads.
constexpr double kOverheadWindow = 5.0;
// A GEMM time this many times what the base profile predicts is refused as not a measurement (a time
// in ms or us written as seconds, a stalled run); the base's shape terms miss real GEMMs by far less.
constexpr double kImplausibleFactor = 100.0;

// The unknowns of the fit, as logarithms, and how they map onto a profile: per measured dtype its
// ceiling, tile ridge and k_half (each dtype runs its own kernels); shared, the launch overhead and
// (unless a copy probe measured it) the memory efficiency.
struct Layout {
  std::vector<Dtype> dtypes;
  // Per dtype: its tile ridge and k_half held at the base's when its samples are too few to tell
  // them apart from its ceiling (their Jacobian columns stay zero, so no step moves them).
  std::vector<bool> shape_fixed;
  // Per dtype: its ceiling held at the base's too, when none of its GEMMs computes long enough
  // beside a launch to show it.
  std::vector<bool> ceiling_fixed;
  bool memory = true;
  bool fit_overhead = true;
  [[nodiscard]] int per_dtype() const { return 3 * static_cast<int>(dtypes.size()); }
  [[nodiscard]] int size() const { return per_dtype() + (fit_overhead ? 1 : 0) + (memory ? 1 : 0); }
  [[nodiscard]] static int efficiency(int i) { return 3 * i; }
  [[nodiscard]] static int ridge(int i) { return 3 * i + 1; }
  [[nodiscard]] static int k_half(int i) { return 3 * i + 2; }
  [[nodiscard]] int overhead() const { return per_dtype(); }
  [[nodiscard]] int memory_index() const { return per_dtype() + (fit_overhead ? 1 : 0); }
  [[nodiscard]] bool fixed(int j) const {
    if (j >= per_dtype()) return false;
    const auto i = static_cast<std::size_t>(j / 3);
    return j % 3 == 0 ? ceiling_fixed[i] : shape_fixed[i];
  }
};

Eigen::VectorXd pack(const Layout& l, const HardwareProfile& hw) {
  Eigen::VectorXd u(l.size());
  for (std::size_t i = 0; i < l.dtypes.size(); ++i) {
    const int k = static_cast<int>(i);
    const Dtype d = l.dtypes[i];
    u[Layout::efficiency(k)] = std::log(hw.gemm.max_efficiency.at(d));
    u[Layout::ridge(k)] = std::log(std::max(hw.gemm.ridge_for(d), kMinRidge));
    u[Layout::k_half(k)] = std::log(std::max(hw.gemm.k_half_for(d), kMinKHalf));
  }
  if (l.fit_overhead) u[l.overhead()] = std::log(std::max(hw.kernel_launch_overhead.value(), kMinOverhead));
  if (l.memory) u[l.memory_index()] = std::log(hw.gemm.memory_efficiency);
  return u;
}

// Keeps every unknown inside its bounds.
void clamp(const Layout& l, Eigen::VectorXd& u) {
  for (std::size_t i = 0; i < l.dtypes.size(); ++i) {
    const int k = static_cast<int>(i);
    u[Layout::efficiency(k)] = std::clamp(u[Layout::efficiency(k)], std::log(kMinEfficiency), 0.0);
    u[Layout::ridge(k)] = std::clamp(u[Layout::ridge(k)], std::log(kMinRidge), std::log(1e4));
    u[Layout::k_half(k)] = std::clamp(u[Layout::k_half(k)], std::log(kMinKHalf), std::log(1e7));
  }
  if (l.fit_overhead) u[l.overhead()] = std::clamp(u[l.overhead()], std::log(kMinOverhead), std::log(1.0));
  if (l.memory) u[l.memory_index()] = std::clamp(u[l.memory_index()], std::log(kMinEfficiency), 0.0);
}

void unpack(const Layout& l, const Eigen::VectorXd& u, HardwareProfile& hw) {
  for (std::size_t i = 0; i < l.dtypes.size(); ++i) {
    const int k = static_cast<int>(i);
    const Dtype d = l.dtypes[i];
    hw.gemm.max_efficiency[d] = std::exp(u[Layout::efficiency(k)]);
    hw.gemm.tile_ridge_by_dtype[d] = std::exp(u[Layout::ridge(k)]);
    hw.gemm.k_half_by_dtype[d] = std::exp(u[Layout::k_half(k)]);
  }
  if (l.fit_overhead) hw.kernel_launch_overhead = Seconds(std::exp(u[l.overhead()]));
  if (l.memory) hw.gemm.memory_efficiency = std::exp(u[l.memory_index()]);
}

Eigen::VectorXd residuals(const HardwareProfile& hw, const std::vector<GemmSample>& samples) {
  Eigen::VectorXd r(static_cast<int>(samples.size()));
  for (std::size_t i = 0; i < samples.size(); ++i) r[static_cast<int>(i)] = std::log(model_seconds(hw, samples[i]) / samples[i].seconds);
  return r;
}

struct LmOutcome {
  int iterations = 0;
  bool converged = false;  // false: stopped by the iteration limit
};

// Levenberg-Marquardt on the log-time residuals.
LmOutcome levenberg_marquardt(const Layout& l, HardwareProfile& hw, const std::vector<GemmSample>& samples, int max_iterations) {
  Eigen::VectorXd u = pack(l, hw);
  clamp(l, u);
  unpack(l, u, hw);
  Eigen::VectorXd r = residuals(hw, samples);
  double cost = r.squaredNorm();
  double lambda = 1e-3;
  const int n = l.size();
  int iteration = 0;
  for (; iteration < max_iterations && cost > 1e-28; ++iteration) {
    // Forward-difference Jacobian in the log parameters (held ones: zero).
    Eigen::MatrixXd J = Eigen::MatrixXd::Zero(r.size(), n);
    for (int j = 0; j < n; ++j) {
      if (l.fixed(j)) continue;
      Eigen::VectorXd v = u;
      const double h = 1e-6;
      v[j] += h;
      HardwareProfile probe = hw;
      unpack(l, v, probe);
      J.col(j) = (residuals(probe, samples) - r) / h;
    }
    const Eigen::MatrixXd JtJ = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * r;
    bool improved = false;
    for (int attempt = 0; attempt < 30 && !improved; ++attempt) {
      Eigen::MatrixXd A = JtJ;
      // Marquardt's scaling, with a floor so that a parameter without effect stays put.
      for (int j = 0; j < n; ++j) A(j, j) += lambda * std::max(JtJ(j, j), 1e-12);
      Eigen::VectorXd step = A.ldlt().solve(-g);
      Eigen::VectorXd candidate = u + step;
      clamp(l, candidate);
      HardwareProfile trial = hw;
      unpack(l, candidate, trial);
      const Eigen::VectorXd rc = residuals(trial, samples);
      const double c = rc.squaredNorm();
      if (c < cost) {
        const double gain = cost - c;
        const double moved = (candidate - u).norm();
        u = candidate;
        hw = trial;
        r = rc;
        cost = c;
        lambda = std::max(lambda / 3, 1e-12);
        improved = true;
        // Converged when a step no longer buys a billionth of the cost.
        if (gain <= 1e-9 * cost || moved < 1e-12) return {iteration + 1, true};
      } else {
        lambda *= 4;
      }
    }
    if (!improved) return {iteration + 1, true};  // no step lowers the cost: a minimum
  }
  return {iteration, iteration < max_iterations};
}

int floor_log2(double x) { return static_cast<int>(std::floor(std::log2(x) + 1e-9)); }
int ceil_log2(double x) { return static_cast<int>(std::ceil(std::log2(x) - 1e-9)); }

// The residual table of one dtype: ridge least squares for the grid nodes' log factors.
hardware::GemmResidualTable fit_table(const HardwareProfile& hw, const std::vector<GemmSample>& samples, double ridge) {
  hardware::GemmResidualTable t;
  double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {0, 0, 0};
  for (const auto& s : samples) {
    const double d[3] = {double(s.m), double(s.n), double(s.k)};
    for (int a = 0; a < 3; ++a) {
      lo[a] = std::min(lo[a], d[a]);
      hi[a] = std::max(hi[a], d[a]);
    }
  }
  t.m_first = floor_log2(lo[0]), t.m_last = std::max(t.m_first, ceil_log2(hi[0]));
  t.n_first = floor_log2(lo[1]), t.n_last = std::max(t.n_first, ceil_log2(hi[1]));
  t.k_first = floor_log2(lo[2]), t.k_last = std::max(t.k_first, ceil_log2(hi[2]));
  const int nodes = t.size_m() * t.size_n() * t.size_k();
  const auto index = [&](int i, int j, int l) { return (i * t.size_n() + j) * t.size_k() + l; };
  // Normal equations, sparse: a sample touches at most 8 nodes.
  std::vector<Eigen::Triplet<double>> entries;
  Eigen::VectorXd Atr = Eigen::VectorXd::Zero(nodes);
  for (const auto& s : samples) {
    const double r = std::log(s.seconds / model_seconds(hw, s));
    const auto axis = [](double x, int first, int size, int& i0, int& i1, double& f) {
      const double p = std::clamp(std::log2(x), double(first), double(first + size - 1)) - first;
      i0 = std::min(static_cast<int>(p), size - 1);
      i1 = std::min(i0 + 1, size - 1);
      f = p - i0;
    };
    int m0, m1, n0, n1, k0, k1;
    double fm, fn, fk;
    axis(double(s.m), t.m_first, t.size_m(), m0, m1, fm);
    axis(double(s.n), t.n_first, t.size_n(), n0, n1, fn);
    axis(double(s.k), t.k_first, t.size_k(), k0, k1, fk);
    std::vector<std::pair<int, double>> w;
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 2; ++b) {
        for (int c = 0; c < 2; ++c) {
          const double weight = (a ? fm : 1 - fm) * (b ? fn : 1 - fn) * (c ? fk : 1 - fk);
          if (weight > 0) w.emplace_back(index(a ? m1 : m0, b ? n1 : n0, c ? k1 : k0), weight);
        }
      }
    }
    for (auto [p, wp] : w) {
      Atr[p] += wp * r;
      for (auto [q, wq] : w) entries.emplace_back(p, q, wp * wq);
    }
  }
  for (int p = 0; p < nodes; ++p) entries.emplace_back(p, p, ridge);
  Eigen::SparseMatrix<double> AtA(nodes, nodes);
  AtA.setFromTriplets(entries.begin(), entries.end());  // duplicates are summed
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> solver(AtA);
  const Eigen::VectorXd x = solver.solve(Atr);
  t.factors.resize(static_cast<std::size_t>(nodes));
  for (int p = 0; p < nodes; ++p) t.factors[static_cast<std::size_t>(p)] = std::clamp(std::exp(x[p]), 0.05, 20.0);
  return t;
}

}  // namespace

double model_seconds(const HardwareProfile& hw, const GemmSample& s) {
  return hardware::estimate_gemm(hw, {s.m, s.n, s.k}, s.dtype).time.value();
}

FitQuality quality_of(const HardwareProfile& hw, const std::vector<GemmSample>& samples) {
  FitQuality q;
  q.samples = static_cast<int>(samples.size());
  if (samples.empty()) return q;
  double mean = 0;
  for (const auto& s : samples) mean += s.flops() / s.seconds;
  mean /= static_cast<double>(samples.size());
  double ss_res = 0, ss_tot = 0, sum_rel = 0;
  for (const auto& s : samples) {
    const double t = model_seconds(hw, s);
    const double measured = s.flops() / s.seconds, predicted = s.flops() / t;
    ss_res += (predicted - measured) * (predicted - measured);
    ss_tot += (measured - mean) * (measured - mean);
    const double rel = std::abs(t / s.seconds - 1);
    sum_rel += rel;
    q.worst_relative = std::max(q.worst_relative, rel);
  }
  // Samples of one rate leave R2 undefined (it had printed 0, a failed fit, beside a worst error of 0%).
  q.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : std::numeric_limits<double>::quiet_NaN();
  q.mean_relative = sum_rel / static_cast<double>(samples.size());
  return q;
}

GemmFit fit_gemm(const HardwareProfile& base, const std::vector<GemmSample>& samples, const GemmFitOptions& options) {
  if (samples.empty()) throw InputError("calibrate: no GEMM measurements to fit");
  Layout layout;
  layout.memory = options.fit_memory_efficiency;
  // The launch overhead is separable from the shape terms only when some GEMM lasts no more than a
  // few overheads; otherwise it stays as the base profile has it.
  double shortest = samples.front().seconds;
  for (const auto& s : samples) shortest = std::min(shortest, s.seconds);
  layout.fit_overhead = shortest <= kOverheadWindow * std::max(base.kernel_launch_overhead.value(), 1e-6);
  {
    std::set<Dtype> seen;
    for (const auto& s : samples) {
      if (!base.supports(s.dtype)) {
        throw InputError(fmt::format("calibrate: the GEMM measurements include {} but the base profile {} has no {} peak",
                                     hardware::to_string(s.dtype), base.name, hardware::to_string(s.dtype)));
      }
      seen.insert(s.dtype);
    }
    layout.dtypes.assign(seen.begin(), seen.end());
  }
  GemmFit fit;
  // Three unknowns per dtype (ceiling, tile ridge, k_half): with fewer than three shapes of it the
  // data cannot tell them apart, and the fit would move the shape terms anywhere (one 256^3 sample
  // set k_half to 1,111). Such a dtype fits its ceiling alone, its shape terms kept from the base.
  // A ceiling shows only in a GEMM whose arithmetic, at the base's rate, lasts several launch
  // overheads; in shorter ones the fit trades it against the launch (one 256^3 bf16 GEMM of 3.3 us
  // had set bf16's ceiling to 1 and made a training step 12% faster). Such a dtype keeps its ceiling
  // and shape terms from the base.
  const double launch = std::max(base.kernel_launch_overhead.value(), 1e-6);
  for (Dtype d : layout.dtypes) {
    const GemmSample* longest = nullptr;
    double compute = 0;
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes;
    for (const auto& s : samples) {
      if (s.dtype != d) continue;
      shapes.insert({s.m, s.n, s.k});
      const double c = s.flops() / (base.peak(d).value() * base.gemm.max_efficiency.at(d));
      if (c > compute) compute = c, longest = &s;
    }
    const bool ceiling_fixed = compute < kOverheadWindow * launch;
    layout.ceiling_fixed.push_back(ceiling_fixed);
    layout.shape_fixed.push_back(ceiling_fixed || shapes.size() < 3);
    if (ceiling_fixed) {
      fit.notes.push_back(fmt::format("{}: no GEMM measured computes long enough to show its ceiling (the longest, {}x{}x{}, {} of arithmetic at "
                                      "{}'s rate beside a {} launch): max_efficiency and the shape terms kept from it (measure larger GEMMs)",
                                      hardware::to_string(d), longest->m, longest->n, longest->k, to_string(Seconds(compute)), base.name,
                                      to_string(Seconds(launch))));
      continue;
    }
    if (shapes.size() >= 3) continue;
    fit.notes.push_back(fmt::format("{}: {} shape{} measured, fewer than the 3 that separate its ceiling from its tile ridge and k_half: only "
                                    "max_efficiency is fitted, the shape terms kept from {}",
                                    hardware::to_string(d), shapes.size(), shapes.size() == 1 ? "" : "s", base.name));
  }
  // memory_efficiency shows only in a GEMM whose operands take longer to move than its arithmetic
  // at the ceiling, and longer than a few launches; where none does, the fit would move it anywhere
  // with no note (eight bf16 GEMMs of at most 512 had halved it, and a training step ran 7.6% slower
  // on its memory-bound ops). It is kept from the base then, and said.
  if (layout.memory) {
    bool shows = false;
    for (const auto& s : samples) {
      const double bytes = static_cast<double>(s.m * s.k + s.k * s.n + s.m * s.n) * hardware::bytes_per_element(s.dtype);
      const double moving = bytes / (base.memory_bandwidth.value() * base.gemm.memory_efficiency);
      const double computing = s.flops() / (base.peak(s.dtype).value() * base.gemm.max_efficiency.at(s.dtype));
      shows = shows || (moving >= computing && moving >= kOverheadWindow * launch);
    }
    if (!shows) {
      layout.memory = false;
      fit.notes.push_back(fmt::format("no GEMM measured is memory-bound for longer than a few launches: memory_efficiency kept from {} (measure "
                                      "device copies, or thin GEMMs such as 8192x8192x64)",
                                      base.name));
    }
  }
  // A time kImplausibleFactor times what the base predicts for the shape (launch overhead included)
  // is refused, not fitted.
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const GemmSample& s = samples[i];
    const double predicted = model_seconds(base, s);
    if (s.seconds > kImplausibleFactor * predicted) {
      throw InputError(fmt::format("calibrate: {} ({} {}x{}x{}) took {:.3g} s, {:.3g} times the {:.3g} s that {} predicts: a time in "
                                   "another unit, or a stalled run? Remove or correct it",
                                   s.origin.empty() ? fmt::format("GEMM sample {}", i) : s.origin, hardware::to_string(s.dtype), s.m, s.n, s.k,
                                   s.seconds, s.seconds / predicted, predicted, base.name));
    }
  }
  HardwareProfile hw = base;
  // The measured dtypes are fitted afresh; residual tables of the others stay as the base has them.
  for (Dtype d : layout.dtypes) hw.gemm.residuals.erase(d);
  const LmOutcome lm = levenberg_marquardt(layout, hw, samples, options.max_iterations);
  fit.iterations = lm.iterations;
  if (!lm.converged) {
    fit.notes.push_back(fmt::format("the GEMM fit stopped at its limit of {} iterations, still creeping along a direction the data hardly "
                                    "constrains (a shape term that the measured shapes do not exercise, e.g. k_half from squares only)",
                                    options.max_iterations));
  }

  for (Dtype d : layout.dtypes) {
    if (hw.gemm.max_efficiency.at(d) >= 0.999) {
      // Either the samples run at the peak, or the fit traded a ceiling of 1 against a long K-loop
      // ramp (a large k_half) that their shapes cannot tell apart: say which.
      double fastest = 0;
      for (const GemmSample& g : samples) {
        if (g.dtype == d) fastest = std::max(fastest, g.flops() / g.seconds / base.peak(d).value());
      }
      if (fastest >= 0.9) {
        fit.notes.push_back(fmt::format("{} max_efficiency reached its bound of 1: the fastest measurement runs at {:.0f}% of the profile's {} peak; "
                                        "check the peak",
                                        hardware::to_string(d), 100 * fastest, to_string(base.peak(d))));
      } else {
        fit.notes.push_back(fmt::format("{} max_efficiency reached its bound of 1 with k_half {:.0f}: the fastest measurement runs at {:.0f}% of the "
                                        "{} peak, and the shapes measured cannot tell a lower ceiling from a slower K-loop ramp (measure larger K)",
                                        hardware::to_string(d), hw.gemm.k_half_for(d), 100 * fastest, to_string(base.peak(d))));
      }
    }
  }
  if (!layout.fit_overhead) {
    fit.notes.push_back(fmt::format("kernel_launch_overhead kept at {}: the shortest GEMM measured ({}) is too long to separate it from the "
                                    "shape terms (measure GEMMs of a few microseconds to fit it)",
                                    to_string(base.kernel_launch_overhead), to_string(Seconds(shortest))));
  } else if (hw.kernel_launch_overhead.value() <= kMinOverhead * 1.001) fit.notes.push_back("kernel_launch_overhead fell to its lower bound (1 ns): the measurements show no fixed cost");

  std::map<Dtype, std::vector<GemmSample>> by_dtype;
  for (const auto& s : samples) by_dtype[s.dtype].push_back(s);
  for (const auto& [d, list] : by_dtype) fit.base_quality[d] = quality_of(base, list);
  fit.base_overall = quality_of(base, samples);
  for (const auto& [d, list] : by_dtype) fit.model_quality[d] = quality_of(hw, list);
  fit.model_overall = quality_of(hw, samples);
  if (options.residual_table) {
    HardwareProfile parametric = hw;
    for (const auto& [d, list] : by_dtype) hw.gemm.residuals[d] = fit_table(parametric, list, options.ridge);
  }
  for (const auto& [d, list] : by_dtype) fit.table_quality[d] = quality_of(hw, list);
  fit.table_overall = quality_of(hw, samples);
  // Efficiencies of dtypes without samples stay as the base profile has them.
  fit.params = hw.gemm;
  fit.kernel_launch_overhead = hw.kernel_launch_overhead;
  return fit;
}

}  // namespace cs::calibrate
