// The fitted profile as YAML and as readable text. Numbers are written with 9 significant digits in
// fixed units, so the file reads back into the same model (to that precision) and diffs cleanly.
#include <fmt/format.h>

#include "clustersim/calibrate/calibration.hpp"
#include "clustersim/hardware/attention_model.hpp"
#include "clustersim/reports/text_table.hpp"

namespace cs::calibrate {

namespace {

using hardware::Dtype;
using hardware::HardwareProfile;

// YAML double-quoted scalar: quotes and backslashes escaped, control characters as \xNN.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string g9(double v) { return fmt::format("{:.9g}", v); }

std::string table_yaml(const hardware::GemmResidualTable& t, const std::string& indent) {
  std::string out;
  out += fmt::format("{}log2_m: [{}, {}]\n{}log2_n: [{}, {}]\n{}log2_k: [{}, {}]\n", indent, t.m_first, t.m_last, indent, t.n_first, t.n_last,
                     indent, t.k_first, t.k_last);
  out += indent + "factors: [";
  for (std::size_t i = 0; i < t.factors.size(); ++i) {
    if (i) out += (i % 8 == 0) ? ",\n" + indent + "  " : ", ";
    out += fmt::format("{:.5g}", t.factors[i]);
  }
  return out + "]\n";
}

std::string pct(double v) { return fmt::format("{:.1f}%", 100 * v); }

}  // namespace

std::string profile_yaml(const CalibrationResult& r) {
  const HardwareProfile& hw = r.profile;
  std::string y;
  y += fmt::format("# Hardware profile written by `clustersim calibrate` from measurements; base profile: {}.\n",
                   quoted(hw.calibration.count("base_profile") ? hw.calibration.at("base_profile") : r.base.name));
  y += "# Peaks, capacity and interconnect come from the base profile (datasheets); the GEMM model, memory\n"
       "# efficiency, launch overhead, host transfers and collectives are fitted (docs/calibration.md).\n";
  y += "hardware:\n";
  y += fmt::format("  name: {}\n", quoted(hw.name));
  if (!hw.vendor.empty()) y += fmt::format("  vendor: {}\n", quoted(hw.vendor));
  y += fmt::format("  architecture: {}\n", hw.architecture);
  if (!hw.compute_capability.empty()) y += fmt::format("  compute_capability: {}\n", quoted(hw.compute_capability));
  y += fmt::format("  sm_count: {}\n", hw.sm_count);
  y += fmt::format("  boost_clock: {}MHz\n", g9(hw.boost_clock.value() / 1e6));
  y += "  peak_flops:\n";
  for (const auto& [d, p] : hw.peak_flops) y += fmt::format("    {}: {}TFLOPS\n", hardware::to_string(d), g9(p.value() / 1e12));
  y += "  memory:\n";
  y += fmt::format("    capacity: {}GB\n", g9(hw.memory_capacity.value() / 1e9));
  y += fmt::format("    bandwidth: {}GB/s\n", g9(hw.memory_bandwidth.value() / 1e9));
  if (hw.nvlink) {
    y += fmt::format("  nvlink:\n    generation: {}\n    links: {}\n    bandwidth: {}GB/s\n", hw.nvlink->generation, hw.nvlink->links,
                     g9(hw.nvlink->bandwidth.value() / 1e9));
  }
  if (hw.pcie) y += fmt::format("  pcie:\n    generation: {}\n    lanes: {}\n", hw.pcie->generation, hw.pcie->lanes);
  if (hw.tdp.value() > 0) y += fmt::format("  tdp: {}W\n", g9(hw.tdp.value()));
  y += fmt::format("  kernel_launch_overhead: {}us\n", g9(hw.kernel_launch_overhead.value() * 1e6));
  y += "  gemm:\n    max_efficiency:\n";
  for (const auto& [d, e] : hw.gemm.max_efficiency) y += fmt::format("      {}: {}\n", hardware::to_string(d), g9(e));
  y += fmt::format("    tile_ridge_intensity: {}\n    k_half: {}\n    memory_efficiency: {}\n", g9(hw.gemm.tile_ridge_intensity),
                   g9(hw.gemm.k_half), g9(hw.gemm.memory_efficiency));
  if (hw.gemm.sustained_fraction < 1.0) y += fmt::format("    sustained_fraction: {}\n", g9(hw.gemm.sustained_fraction));
  if (!hw.gemm.tile_ridge_by_dtype.empty()) {
    y += "    tile_ridge_intensity_by_dtype:\n";
    for (const auto& [d, v] : hw.gemm.tile_ridge_by_dtype) y += fmt::format("      {}: {}\n", hardware::to_string(d), g9(v));
  }
  if (!hw.gemm.k_half_by_dtype.empty()) {
    y += "    k_half_by_dtype:\n";
    for (const auto& [d, v] : hw.gemm.k_half_by_dtype) y += fmt::format("      {}: {}\n", hardware::to_string(d), g9(v));
  }
  if (!hw.gemm.residuals.empty()) {
    y += "    # measured time / model time on a log2 grid of (M, N, K), K fastest; trilinear in log2\n    residuals:\n";
    for (const auto& [d, t] : hw.gemm.residuals) y += fmt::format("      {}:\n", hardware::to_string(d)) + table_yaml(t, "        ");
  }
  if (hw.attention.measured()) {
    y += fmt::format("  attention:\n    forward_efficiency: {}\n    backward_efficiency: {}\n", g9(hw.attention.forward_efficiency),
                     g9(hw.attention.backward_efficiency));
    if (hw.attention.tail_blocks > 0) y += fmt::format("    tail_blocks: {}\n", g9(hw.attention.tail_blocks));
  }
  if (hw.host_to_device || hw.device_to_host) {
    y += "  host_transfers:\n";
    if (hw.host_to_device) {
      y += fmt::format("    h2d: {{latency: {}us, bandwidth: {}GB/s}}\n", g9(hw.host_to_device->latency.value() * 1e6),
                       g9(hw.host_to_device->bandwidth.value() / 1e9));
    }
    if (hw.device_to_host) {
      y += fmt::format("    d2h: {{latency: {}us, bandwidth: {}GB/s}}\n", g9(hw.device_to_host->latency.value() * 1e6),
                       g9(hw.device_to_host->bandwidth.value() / 1e9));
    }
  }
  if (!hw.collectives.empty()) {
    y += "  # t = latency + bytes x f(n) / busbw, divided by the efficiency at that size (log-size interpolation)\n  collectives:\n";
    for (const auto& c : hw.collectives) {
      y += fmt::format("    - op: {}\n      link: {}\n      ranks: {}\n      nodes: {}\n      latency: {}us\n      busbw: {}GB/s\n", c.op, c.link,
                       c.ranks, c.nodes, g9(c.latency.value() * 1e6), g9(c.busbw.value() / 1e9));
      if (!c.algorithm.empty()) y += fmt::format("      algorithm: {}\n", c.algorithm);
      if (!c.efficiency.empty()) {
        y += "      efficiency: [";
        for (std::size_t i = 0; i < c.efficiency.size(); ++i) {
          y += fmt::format("{}[{}, {:.5g}]", i ? ", " : "", g9(c.efficiency[i].first), c.efficiency[i].second);
        }
        y += "]\n";
      }
    }
  }
  if (!hw.calibration.empty()) {
    y += "  calibration:\n";
    for (const auto& [k, v] : hw.calibration) y += fmt::format("    {}: {}\n", quoted(k), quoted(v));
  }
  return y;
}

std::string summary_text(const CalibrationResult& r) {
  using reports::TextTable;
  const HardwareProfile& hw = r.profile;
  std::string out = fmt::format("calibrated profile: {} (base: {})\n", hw.name, hw.calibration.count("base_profile") ? hw.calibration.at("base_profile") : r.base.name);
  if (r.gemm) {
    const GemmFit& g = *r.gemm;
    out += fmt::format("\nGEMM model fit ({} samples, {} Levenberg-Marquardt iterations)\n", g.model_overall.samples, g.iterations);
    TextTable t({"parameter", "base", "fitted"}, {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right});
    for (const auto& [d, e] : hw.gemm.max_efficiency) {
      if (!g.model_quality.count(d)) continue;
      const std::string n(hardware::to_string(d));
      t.add_row({"max_efficiency " + n, fmt::format("{:.4f}", r.base.gemm.max_efficiency.at(d)), fmt::format("{:.4f}", e)});
      t.add_row({"tile_ridge_intensity " + n, fmt::format("{:.4g}", r.base.gemm.ridge_for(d)), fmt::format("{:.4g}", hw.gemm.ridge_for(d))});
      t.add_row({"k_half " + n, fmt::format("{:.4g}", r.base.gemm.k_half_for(d)), fmt::format("{:.4g}", hw.gemm.k_half_for(d))});
    }
    t.add_row({"memory_efficiency", fmt::format("{:.4f}", r.base.gemm.memory_efficiency), fmt::format("{:.4f}", hw.gemm.memory_efficiency)});
    t.add_row({"kernel_launch_overhead", to_string(r.base.kernel_launch_overhead), to_string(hw.kernel_launch_overhead)});
    out += t.render("  ");
    TextTable q({"dtype", "samples", "base worst", "base mean", "model R2", "model worst", "model mean", "with table R2", "with table worst"},
                {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right,
                 TextTable::Align::right, TextTable::Align::right});
    for (const auto& [d, mq] : g.model_quality) {
      const FitQuality& tq = g.table_quality.at(d);
      const FitQuality& bq = g.base_quality.at(d);
      q.add_row({std::string(hardware::to_string(d)), std::to_string(mq.samples), pct(bq.worst_relative), pct(bq.mean_relative), mq.r2_text(), pct(mq.worst_relative),
                 pct(mq.mean_relative), tq.r2_text(), pct(tq.worst_relative)});
    }
    q.add_row({"all", std::to_string(g.model_overall.samples), pct(g.base_overall.worst_relative), pct(g.base_overall.mean_relative),
               g.model_overall.r2_text(), pct(g.model_overall.worst_relative), pct(g.model_overall.mean_relative),
               g.table_overall.r2_text(), pct(g.table_overall.worst_relative)});
    out += '\n';
    out += q.render("  ");
  }
  if (!r.copies.empty()) {
    out += "\ncopies (t = latency + bytes / bandwidth)\n";
    TextTable t({"kind", "samples", "latency", "bandwidth", "worst"}, {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right,
                                                                       TextTable::Align::right, TextTable::Align::right});
    for (const auto& c : r.copies) {
      t.add_row({std::string(to_string(c.kind)), std::to_string(c.samples), to_string(c.transfer.latency), to_string(c.transfer.bandwidth), pct(c.worst_relative)});
    }
    out += t.render("  ");
    out += fmt::format("  memory bandwidth {} x efficiency {:.4f}\n", to_string(hw.memory_bandwidth), hw.gemm.memory_efficiency);
  }
  if (r.attention) {
    const AttentionFit& a = *r.attention;
    out += fmt::format("\nfused attention fit ({} {} kernels of head dim {}; t = (FLOPs + tail_blocks x one {}-query block's walk x {} SMs) / "
                       "(bf16 peak x efficiency) + launch)\n",
                       a.samples, a.backend, a.head_dim, hardware::kAttentionBlockRows, hw.sm_count);
    TextTable t({"parameter", "base", "fitted"}, {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right});
    const auto base_value = [&](double v) { return r.base.attention.measured() ? fmt::format("{:.4f}", v) : std::string("-"); };
    t.add_row({"forward_efficiency", base_value(r.base.attention.forward_efficiency), fmt::format("{:.4f}", a.params.forward_efficiency)});
    t.add_row({"backward_efficiency", base_value(r.base.attention.backward_efficiency), fmt::format("{:.4f}", a.params.backward_efficiency)});
    t.add_row({"tail_blocks", base_value(r.base.attention.tail_blocks), fmt::format("{:.4f}", a.params.tail_blocks)});
    t.add_row({"mean error", r.base.attention.measured() ? pct(a.base_mean) : "-", pct(a.mean)});
    t.add_row({"worst error", r.base.attention.measured() ? pct(a.base_worst) : "-", pct(a.worst)});
    out += t.render("  ");
  }
  if (!r.links.empty()) {
    out += "\ncollectives (t = latency + bytes x f(n) / busbw; 'worst' is the line alone; with the size table every measured size is within 1%)\n";
    TextTable t({"op", "algorithm", "link", "nodes x ranks/node", "sizes", "latency", "busbw", "worst", "mean", "table rows"},
                {TextTable::Align::left, TextTable::Align::left, TextTable::Align::left, TextTable::Align::right, TextTable::Align::right,
                 TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right});
    for (const auto& l : r.links) {
      t.add_row({l.result.op, l.result.algorithm.empty() ? "-" : l.result.algorithm, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks), std::to_string(l.samples), to_string(l.result.latency),
                 // A group left out (latency-bound, or flat) has no bandwidth to show: its slope is noise.
                 !l.left_out ? to_string(l.result.busbw) : std::string("- (left out)"), pct(l.line_worst_relative), pct(l.line_mean_relative), std::to_string(l.result.efficiency.size())});
    }
    out += t.render("  ");
  }
  for (const auto& n : r.notes) out += "note: " + n + "\n";
  return out;
}

std::string compare_text(const HardwareProfile& fitted, const HardwareProfile& shipped) {
  using reports::TextTable;
  TextTable t({"parameter", "shipped", "fitted", "fitted / shipped"},
              {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right});
  const auto row = [&](const std::string& name, double a, double b, const std::string& as, const std::string& bs) {
    t.add_row({name, as, bs, a > 0 ? fmt::format("{:.3f}", b / a) : "-"});
  };
  for (const auto& [d, e] : fitted.gemm.max_efficiency) {
    if (!shipped.gemm.max_efficiency.count(d)) continue;
    const double a = shipped.gemm.max_efficiency.at(d);
    row(fmt::format("gemm max_efficiency {}", hardware::to_string(d)), a, e, fmt::format("{:.4f}", a), fmt::format("{:.4f}", e));
  }
  for (const auto& [d, e] : fitted.gemm.max_efficiency) {
    if (!shipped.gemm.max_efficiency.count(d)) continue;
    const std::string n(hardware::to_string(d));
    const double ra = shipped.gemm.ridge_for(d), rb = fitted.gemm.ridge_for(d), ka = shipped.gemm.k_half_for(d), kb = fitted.gemm.k_half_for(d);
    row("gemm tile_ridge_intensity " + n, ra, rb, fmt::format("{:.4g}", ra), fmt::format("{:.4g}", rb));
    row("gemm k_half " + n, ka, kb, fmt::format("{:.4g}", ka), fmt::format("{:.4g}", kb));
  }
  row("memory bandwidth x efficiency", shipped.memory_bandwidth.value() * shipped.gemm.memory_efficiency, fitted.memory_bandwidth.value() * fitted.gemm.memory_efficiency,
      to_string(shipped.memory_bandwidth * shipped.gemm.memory_efficiency), to_string(fitted.memory_bandwidth * fitted.gemm.memory_efficiency));
  row("kernel_launch_overhead", shipped.kernel_launch_overhead.value(), fitted.kernel_launch_overhead.value(), to_string(shipped.kernel_launch_overhead),
      to_string(fitted.kernel_launch_overhead));
  if (fitted.attention.measured() && shipped.attention.measured()) {
    const auto& a = shipped.attention;
    const auto& b = fitted.attention;
    row("attention forward_efficiency", a.forward_efficiency, b.forward_efficiency, fmt::format("{:.4f}", a.forward_efficiency), fmt::format("{:.4f}", b.forward_efficiency));
    row("attention backward_efficiency", a.backward_efficiency, b.backward_efficiency, fmt::format("{:.4f}", a.backward_efficiency),
        fmt::format("{:.4f}", b.backward_efficiency));
    row("attention tail_blocks", a.tail_blocks, b.tail_blocks, fmt::format("{:.4g}", a.tail_blocks), fmt::format("{:.4g}", b.tail_blocks));
  }
  t.add_row({"residual tables", std::to_string(shipped.gemm.residuals.size()), std::to_string(fitted.gemm.residuals.size()), "-"});
  t.add_row({"fitted collectives", std::to_string(shipped.collectives.size()), std::to_string(fitted.collectives.size()), "-"});
  return t.render("  ");
}

}  // namespace cs::calibrate
