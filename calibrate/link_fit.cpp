#include "clustersim/calibrate/link_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <Eigen/Dense>

namespace cs::calibrate {

Affine fit_affine(const std::vector<double>& x, const std::vector<double>& t) {
  // Rows scaled by 1/t_i: [1/t_i, x_i/t_i] (alpha, beta)^T = 1.
  Eigen::Matrix2d A = Eigen::Matrix2d::Zero();
  Eigen::Vector2d b = Eigen::Vector2d::Zero();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    A(0, 0) += w;
    A(0, 1) += w * x[i];
    A(1, 1) += w * x[i] * x[i];
    b[0] += w * t[i];
    b[1] += w * x[i] * t[i];
  }
  A(1, 0) = A(0, 1);
  const auto through_origin = [&] { return Affine{0.0, b[1] / A(1, 1)}; };  // beta = sum(w x t) / sum(w x^2)
  if (x.size() < 2 || !(std::abs(A.determinant()) > 1e-300 * A(0, 0) * A(1, 1))) return through_origin();
  const Eigen::Vector2d s = A.ldlt().solve(b);
  // Time does not grow with size: no bandwidth to fit, alpha is the weighted mean time.
  if (!(s[1] > 0)) return {b[0] / A(0, 0), 0.0};
  if (!(s[0] >= 0)) return through_origin();
  return {s[0], s[1]};
}

namespace {

// The fastest time of each size among the samples `keep` selects: repeats differ only by noise, and
// a size measured twice would weigh twice in a fit.
template <class Sample, class Keep>
std::map<double, double> fastest_per_size(const std::vector<Sample>& samples, Keep keep) {
  std::map<double, double> best;
  for (const auto& s : samples) {
    if (!keep(s)) continue;
    auto [it, fresh] = best.emplace(s.bytes, s.seconds);
    if (!fresh) it->second = std::min(it->second, s.seconds);
  }
  return best;
}

double interpolate_efficiency(const std::vector<std::pair<double, double>>& table, double bytes) {
  if (table.empty()) return 1.0;
  if (bytes <= table.front().first) return table.front().second;
  if (bytes >= table.back().first) return table.back().second;
  auto hi = std::lower_bound(table.begin(), table.end(), bytes, [](const auto& row, double b) { return row.first < b; });
  auto lo = hi - 1;
  const double f = (std::log(bytes) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
  return std::exp((1 - f) * std::log(lo->second) + f * std::log(hi->second));
}

}  // namespace

double predict_seconds(const hardware::CalibratedCollective& c, double bytes) {
  const auto op = models::parse_collective_op(c.op);
  const double x = bytes * models::bus_factor(op.value_or(models::CollectiveOp::send_recv), c.ranks);
  return (c.latency.value() + x / c.busbw.value()) / interpolate_efficiency(c.efficiency, bytes);
}

std::vector<LinkFit> fit_collectives(const std::vector<CollectiveSample>& samples) {
  using Key = std::tuple<int, int, int, int, std::string>;
  std::map<Key, std::vector<CollectiveSample>> groups;
  for (const auto& s : samples) groups[{static_cast<int>(s.op), static_cast<int>(s.link), s.ranks, s.nodes, s.algorithm}].push_back(s);
  std::vector<LinkFit> fits;
  for (auto& [key, list] : groups) {
    // One sample per size: the fastest, as repeated runs of nccl-tests differ only by noise.
    const std::map<double, double> best = fastest_per_size(list, [](const CollectiveSample&) { return true; });
    const auto& first = list.front();
    std::vector<double> x, t;
    for (const auto& [bytes, seconds] : best) {
      x.push_back(bytes * models::bus_factor(first.op, first.ranks));
      t.push_back(seconds);
    }
    const Affine line = fit_affine(x, t);
    LinkFit fit;
    fit.samples = static_cast<int>(best.size());
    fit.bandwidth_bound = line.beta > 0 && line.beta * x.back() >= line.alpha;
    fit.largest_bytes = best.rbegin()->first;
    fit.result.op = std::string(models::to_string(first.op));
    fit.result.link = std::string(to_string(first.link));
    fit.result.ranks = first.ranks;
    fit.result.nodes = first.nodes;
    fit.result.algorithm = first.algorithm;
    fit.result.latency = Seconds(line.alpha);
    // Without a bandwidth term the line is flat; busbw is then meaningless (and is not used: see
    // bandwidth_bound), kept finite for printing.
    fit.result.busbw = BytesPerSec(line.beta > 0 ? 1.0 / line.beta : 0.0);
    std::size_t i = 0;
    double sum = 0;
    for (const auto& [bytes, seconds] : best) {
      const double t_line = line.alpha + line.beta * x[i++];
      const double rel = std::abs(t_line / seconds - 1);
      fit.line_worst_relative = std::max(fit.line_worst_relative, rel);
      sum += rel;
      // Bounded as the profile reader bounds it.
      fit.result.efficiency.emplace_back(bytes, std::clamp(t_line / seconds, 0.01, 100.0));
    }
    fit.line_mean_relative = sum / static_cast<double>(best.size());
    // The table is kept only where the line misses by more than 1%: sizes inside a stretch the line
    // matches need no row (interpolation between the rows that bound it gives ~1 there).
    std::vector<std::pair<double, double>> kept;
    const auto& eff = fit.result.efficiency;
    for (std::size_t j = 0; j < eff.size(); ++j) {
      const auto off = [&](std::size_t k) { return std::abs(eff[k].second - 1) > 0.01; };
      // The largest size always: a link's calibrated bandwidth is what it measured (collective.hpp).
      if (off(j) || (j > 0 && off(j - 1)) || j + 1 == eff.size() || off(j + 1)) kept.push_back(eff[j]);
    }
    fit.result.efficiency = kept;
    fits.push_back(std::move(fit));
  }
  return fits;
}

std::vector<CopyFit> fit_copies(const std::vector<MemorySample>& samples) {
  std::vector<CopyFit> fits;
  for (MemoryKind kind : {MemoryKind::d2d, MemoryKind::h2d, MemoryKind::d2h, MemoryKind::host}) {
    // One sample per size, the fastest, as for collectives; and two sizes at least: one size cannot
    // separate a latency from a bandwidth, and a copy's is the profile's memory efficiency (one 1 MiB
    // copy, latency-bound, had set it to 0.23; the same size twice, to 0.04).
    const std::map<double, double> best = fastest_per_size(samples, [&](const MemorySample& s) { return s.kind == kind; });
    if (best.size() < 2) continue;
    std::vector<double> x, t;
    for (const auto& [bytes, seconds] : best) {
      x.push_back(bytes);
      t.push_back(seconds);
    }
    const Affine line = fit_affine(x, t);
    // Copies whose time does not grow with size, or grows so little that even the largest is
    // latency-bound (a flat sweep fits a slope of rounding noise: 1e19 GB/s), give no bandwidth.
    const double largest = *std::max_element(x.begin(), x.end());
    if (!(line.beta > 0) || largest * line.beta < line.alpha) continue;
    CopyFit f;
    f.kind = kind;
    f.transfer.latency = Seconds(line.alpha);
    f.transfer.bandwidth = BytesPerSec(1.0 / line.beta);
    f.samples = static_cast<int>(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) f.worst_relative = std::max(f.worst_relative, std::abs((line.alpha + line.beta * x[i]) / t[i] - 1));
    fits.push_back(f);
  }
  return fits;
}

}  // namespace cs::calibrate
