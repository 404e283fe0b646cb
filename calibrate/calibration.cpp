#include "clustersim/calibrate/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/yaml_reader.hpp"

namespace cs::calibrate {

int ranks_per_node(int nodes, int ranks) { return ranks / std::max(1, nodes); }
std::string nodes_by_ranks(int nodes, int ranks) { return fmt::format("{} x {}", nodes, ranks_per_node(nodes, ranks)); }

// The smallest single size a collective's fit through the origin is kept for (calibrate, below).
constexpr double kOneSizeBytes = 1024.0 * 1024.0 * 1024.0;

namespace {

// A PCIe link's raw rate per direction: lanes x the generation's transfer rate (PCI-SIG base
// specifications: 2.5, 5, 8, 16, 32, 64, 128 GT/s per lane for generations 1-7) / 8 bits. Encoding and
// packet overheads only lower it, so a measurement above it is not a measurement.
double pcie_raw_bytes_per_second(const hardware::HardwareProfile& hw) {
  if (!hw.pcie || hw.pcie->generation < 1 || hw.pcie->lanes < 1) return 0;
  constexpr double kGtPerLane[] = {2.5, 5, 8, 16, 32, 64, 128};
  const double gt_per_lane = kGtPerLane[std::min(hw.pcie->generation, 7) - 1];
  return hw.pcie->lanes * gt_per_lane * 1e9 / 8.0;
}

// The most a collective's bus bandwidth over a link class can be on this GPU: twice (a reduction in
// the switches, NVLS or SHARP, halves what a GPU sends) what the links a GPU reaches it through carry.
// 0 where the profile does not say.
double busbw_ceiling(const hardware::HardwareProfile& hw, LinkClass link) {
  const double nvlink = hw.nvlink ? hw.nvlink->bandwidth.value() : 0.0;
  const double pcie = pcie_raw_bytes_per_second(hw);
  switch (link) {
    case LinkClass::nvlink: return 2.0 * nvlink;
    case LinkClass::pcie: return 2.0 * pcie;
    // Between nodes a GPU's bytes leave through its PCIe link to a NIC, or over NVLink to a peer's
    // NIC (PXN), and what stays inside the node rides NVLink.
    case LinkClass::network: return pcie > 0 ? 2.0 * (nvlink + pcie) : 0.0;
    case LinkClass::process: return 0.0;
  }
  return 0.0;
}

// Samples no collective could produce, refused before the fit (whose line they would make NaN, or
// bend to nothing): one faster than twice what the GPU's links carry, and one more than 100 times
// slower than a larger size of its own sweep.
void check_collective_samples(const hardware::HardwareProfile& base, const std::vector<CollectiveSample>& samples, const std::string& from) {
  const auto what = [](const CollectiveSample& s) {
    return fmt::format("{} of {} over {} ({} ranks{})", models::to_string(s.op), to_string(Bytes(s.bytes)), to_string(s.link), nodes_by_ranks(s.nodes, s.ranks),
                       s.algorithm.empty() ? "" : ", " + s.algorithm);
  };
  using Group = std::tuple<int, int, int, int, std::string>;
  std::map<Group, std::vector<const CollectiveSample*>> groups;
  for (const CollectiveSample& s : samples) {
    const double ceiling = busbw_ceiling(base, s.link);
    if (ceiling > 0 && !(s.busbw() <= ceiling)) {
      const std::string busbw = std::isfinite(s.busbw()) ? to_string(BytesPerSec(s.busbw())) : std::string("beyond any number");
      throw InputError(fmt::format("calibrate{}: {} in {} is a bus bandwidth of {}, more than {}, twice what {}'s links carry: the sample's size or "
                                   "time is wrong",
                                   from, what(s), to_string(Seconds(s.seconds)), busbw, to_string(BytesPerSec(ceiling)), base.name));
    }
    groups[{static_cast<int>(s.op), static_cast<int>(s.link), s.ranks, s.nodes, s.algorithm}].push_back(&s);
  }
  for (auto& [key, list] : groups) {
    // The fit keeps the fastest sample of each size: so does the check, size by size from the largest.
    std::map<double, const CollectiveSample*, std::greater<>> fastest;
    for (const CollectiveSample* s : list) {
      auto [it, fresh] = fastest.emplace(s->bytes, s);
      if (!fresh && s->seconds < it->second->seconds) it->second = s;
    }
    const CollectiveSample* fastest_larger = nullptr;  // the quickest of the sizes above
    for (const auto& [bytes, s] : fastest) {
      if (fastest_larger && s->seconds > 100.0 * fastest_larger->seconds) {
        throw InputError(fmt::format("calibrate{}: {} took {}, more than 100 times the {} the same sweep took at {}: the sample's size or time is wrong",
                                     from, what(*s), to_string(Seconds(s->seconds)), to_string(Seconds(fastest_larger->seconds)),
                                     to_string(Bytes(fastest_larger->bytes))));
      }
      if (!fastest_larger || s->seconds < fastest_larger->seconds) fastest_larger = s;
    }
  }
}

// GEMM samples no GPU could produce: faster than half again the profile's dense peak for their
// dtype (a unit slip, seconds for milliseconds, gave a fit of 19 PFLOP/s on an H100 and a 1 ns
// launch overhead). Boost clocks do not take a GPU past its datasheet peak, which is quoted at them.
constexpr double kGemmPeakMargin = 1.5;
// Copies and collectives fitted more than this many times below what the hardware carries are in
// another unit (ms or us written as seconds), as GEMMs past 100 x their prediction are (gemm_fit.cpp).
constexpr double kImplausibleSlowdown = 100.0;

void check_gemm_samples(const hardware::HardwareProfile& base, const std::vector<GemmSample>& samples, const std::string& from) {
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const GemmSample& s = samples[i];
    if (!base.supports(s.dtype)) continue;  // the fit says which dtypes it cannot take
    const double rate = s.flops() / s.seconds, peak = base.peak(s.dtype).value();
    if (!(rate <= kGemmPeakMargin * peak)) {
      throw InputError(fmt::format("calibrate{}: {}, {} {}x{}x{} in {}, runs at {}, more than {:g} times {}'s {} peak of {}: the sample's size or time is "
                                   "wrong (seconds, not milliseconds?){}",
                                   s.origin.empty() ? from : std::string(), s.origin.empty() ? fmt::format("gemm[{}]", i) : s.origin, hardware::to_string(s.dtype), s.m, s.n, s.k, to_string(Seconds(s.seconds)),
                                   std::isfinite(rate) ? to_string(FlopsPerSec(rate)) : std::string("a rate past any number"), kGemmPeakMargin, base.name,
                                   hardware::to_string(s.dtype), to_string(FlopsPerSec(peak)),
                                   s.dtype == hardware::Dtype::fp32 ? ", or it ran on TF32 tensor cores (record it as tf32)" : ""));
    }
  }
}

}  // namespace

CalibrationResult calibrate(const hardware::HardwareProfile& base, const Measurements& m, const CalibrationOptions& options) {
  if (m.empty()) throw InputError("calibrate: the measurements are empty: nothing to fit");
  // Measurements describe the device they were taken on: fitting them onto another kind of device, or
  // a GPU of another SM count, gives a profile of neither.
  const auto meta = [&](const char* key) { return m.meta.count(key) ? m.meta.at(key) : std::string(); };
  const std::string device = meta("device").empty() ? std::string("unnamed") : meta("device");
  const bool from_cpu = meta("source") == "clustersim calibrate --device cpu";
  if (from_cpu && base.architecture != "cpu") {
    throw InputError(fmt::format("calibrate: the measurements are of a CPU ({}, from calibrate --device cpu), but --base {} is a {} GPU profile: give "
                                 "the profile of the device measured",
                                 device, base.name, base.architecture));
  }
  // The GPU's model in the device's name (A100, H100, H200, GB200, L40S, ...) against the base
  // profile's: an H100's measurements fitted onto the H200 profile have the H200's SM count.
  if (base.architecture != "cpu") {
    const std::string profile = gpu_model_of(base.name);
    for (const char* key : {"device", "torch_probe_gpu"}) {
      const std::string measured = gpu_model_of(meta(key));
      if (!measured.empty() && !profile.empty() && measured != profile) {
        throw InputError(fmt::format("calibrate: the measurements are of an {} ('{}'), but --base {} is an {} profile: give the profile of the GPU "
                                     "measured",
                                     measured, meta(key), base.name, profile));
      }
    }
  }
  if (!meta("sm_count").empty()) {
    if (base.architecture == "cpu") {
      throw InputError(fmt::format("calibrate: the measurements are of a GPU ({}, {} SMs), but --base {} is a CPU profile", device, meta("sm_count"), base.name));
    }
    if (meta("sm_count") != std::to_string(base.sm_count)) {
      throw InputError(fmt::format("calibrate: the measurements are of a GPU with {} SMs ({}), but --base {} has {}: give the profile of the GPU measured",
                                   meta("sm_count"), device, base.name, base.sm_count));
    }
  }
  CalibrationResult r;
  r.base = base;
  r.profile = base;
  hardware::HardwareProfile& hw = r.profile;
  // A base that was itself calibrated keeps its provenance, under previous_.
  std::map<std::string, std::string> previous;
  for (const auto& [k, v] : base.calibration) previous[k.rfind("previous_", 0) == 0 ? k : "previous_" + k] = v;
  hw.calibration = previous;

  // The measurements' sources: named in a refusal of what they fit, and kept in the provenance.
  std::string sources;
  for (const auto& s : options.sources) sources += (sources.empty() ? "" : ", ") + s;
  const std::string from = sources.empty() ? std::string() : " (" + sources + ")";
  r.copies = fit_copies(m.memory);
  // A kind of copy whose time does not grow with its size gives no bandwidth: say that it was left
  // out (it had been dropped without a word).
  for (MemoryKind kind : {MemoryKind::d2d, MemoryKind::h2d, MemoryKind::d2h, MemoryKind::host}) {
    const auto samples = std::count_if(m.memory.begin(), m.memory.end(), [&](const MemorySample& s) { return s.kind == kind; });
    const bool fitted = std::any_of(r.copies.begin(), r.copies.end(), [&](const CopyFit& c) { return c.kind == kind; });
    std::set<double> sizes;
    for (const MemorySample& s : m.memory) {
      if (s.kind == kind) sizes.insert(s.bytes);
    }
    if (samples > 0 && sizes.size() < 2) {
      r.notes.push_back(fmt::format("{} copies ({} sample{}) left out of the profile: measured at one size only ({}), which cannot separate "
                                    "a latency from a bandwidth (measure a sweep of sizes)",
                                    to_string(kind), samples, samples == 1 ? "" : "s", to_string(Bytes(*sizes.begin()))));
    } else if (samples > 0 && !fitted) {
      r.notes.push_back(fmt::format("{} copies ({} sample{}) left out of the profile: their time does not grow with their size (or so little that "
                                    "even the largest is latency-bound), so they give no bandwidth (check the sizes and times)",
                                    to_string(kind), samples, samples == 1 ? "" : "s"));
    }
  }
  bool memory_measured = false;
  for (const CopyFit& c : r.copies) {
    const double traffic = 2.0 * c.transfer.bandwidth.value();  // a copy reads and writes each byte
    if (c.kind == MemoryKind::d2d || (c.kind == MemoryKind::host && base.architecture == "cpu")) {
      if (base.architecture == "cpu") {
        hw.memory_bandwidth = BytesPerSec(traffic);
        hw.gemm.memory_efficiency = 1.0;
      } else {
        double eff = traffic / base.memory_bandwidth.value();
        // As for GEMMs past 1.5 x peak: no GPU copies that much faster than its HBM peak.
        if (eff > 1.5) {
          throw InputError(fmt::format("calibrate{}: the device-to-device copies move {:.0f} GB/s of HBM traffic, {:.1f} x the {}'s {} peak: the "
                                       "measurements' sizes or times are wrong",
                                       from, traffic / 1e9, eff, base.name, to_string(base.memory_bandwidth)));
        }
        // Nor a hundred times slower: a sweep timed in ms written as seconds (a probe's fit of 0.0008,
        // which then broke the GEMM fit, exit 0).
        if (eff < 1.0 / kImplausibleSlowdown) {
          throw InputError(fmt::format("calibrate{}: the device-to-device copies move {:.3g} GB/s of HBM traffic, {:.2g} of the {}'s {} peak, "
                                       "more than {} times slower than any GPU copies: the measurements' sizes or times are wrong",
                                       from, traffic / 1e9, eff, base.name, to_string(base.memory_bandwidth), kImplausibleSlowdown));
        }
        if (eff > 1.0) {
          r.notes.push_back(fmt::format("copies move {:.0f} GB/s of HBM traffic, above the profile's {} peak: memory_efficiency capped at 1",
                                        traffic / 1e9, to_string(base.memory_bandwidth)));
          eff = 1.0;
        }
        hw.gemm.memory_efficiency = eff;
      }
      memory_measured = true;
    } else if (c.kind == MemoryKind::host) {
      // A GPU's profile has no host memory: said, as the copies table shows the fit.
      r.notes.push_back("host copies left out of the profile: a GPU profile holds no host memory bandwidth (they fit a CPU profile, --device cpu)");
    } else if (c.kind == MemoryKind::h2d || c.kind == MemoryKind::d2h) {
      // A host copy crosses the GPU's PCIe link (or, on a Grace superchip, its NVLink-C2C, no faster
      // than its NVLink): nothing carries it faster.
      // Only where the sweep reaches sizes whose time the bandwidth dominates: a sweep of small
      // copies fits a nearly flat line whose slope says little.
      const double ceiling = std::max(pcie_raw_bytes_per_second(base), base.nvlink ? base.nvlink->bandwidth.value() : 0.0);
      double largest = 0;
      for (const MemorySample& s : m.memory) {
        if (s.kind == c.kind) largest = std::max(largest, s.bytes);
      }
      const bool bandwidth_bound = largest / c.transfer.bandwidth.value() >= c.transfer.latency.value();
      if (ceiling > 0 && bandwidth_bound && c.transfer.bandwidth.value() < ceiling / kImplausibleSlowdown) {
        throw InputError(fmt::format("calibrate{}: the {} copies fit {}, more than {} times below {}'s host link ({}): the measurements' sizes "
                                     "or times are wrong",
                                     from, c.kind == MemoryKind::h2d ? "host-to-device" : "device-to-host", to_string(c.transfer.bandwidth),
                                     kImplausibleSlowdown, base.name, to_string(BytesPerSec(ceiling))));
      }
      if (ceiling > 0 && bandwidth_bound && c.transfer.bandwidth.value() > ceiling) {
        throw InputError(fmt::format("calibrate{}: the {} copies fit {}, more than {}'s host link can carry ({}, its PCIe or NVLink rate per "
                                     "direction): the measurements' sizes or times are wrong",
                                     from, c.kind == MemoryKind::h2d ? "host-to-device" : "device-to-host", to_string(c.transfer.bandwidth), base.name,
                                     to_string(BytesPerSec(ceiling))));
      }
      if (!yaml::latency().ok(c.transfer.latency)) {
        throw InputError(fmt::format("calibrate{}: the {} copies fit a latency of {}, past a profile's 1 s (which it could not load back): the "
                                     "measurements' sizes or times are wrong",
                                     from, c.kind == MemoryKind::h2d ? "host-to-device" : "device-to-host", to_string(c.transfer.latency)));
      }
      (c.kind == MemoryKind::h2d ? hw.host_to_device : hw.device_to_host) = c.transfer;
    }
  }

  if (!m.gemm.empty()) {
    check_gemm_samples(base, m.gemm, from);
    // One sample per dtype and shape, the fastest, as for collectives' sizes: a shape measured twice
    // (two files of one run, a repeat) would weigh twice in the fit (a probe's duplicate moved fp32's
    // k_half from 3040 to 3367).
    std::vector<GemmSample> gemm;
    std::map<std::tuple<int, std::int64_t, std::int64_t, std::int64_t>, std::size_t> at;
    std::size_t repeats = 0;
    for (const GemmSample& s : m.gemm) {
      const auto [it, fresh] = at.emplace(std::make_tuple(static_cast<int>(s.dtype), s.m, s.n, s.k), gemm.size());
      if (fresh) {
        gemm.push_back(s);
      } else {
        ++repeats;
        if (s.seconds < gemm[it->second].seconds) gemm[it->second] = s;
      }
    }
    if (repeats > 0) {
      r.notes.push_back(fmt::format("{} GEMM sample{} repeated a dtype and shape measured before: the fastest of each shape is fitted, once", repeats,
                                    repeats == 1 ? "" : "s"));
    }
    GemmFitOptions gopt = options.gemm;
    gopt.fit_memory_efficiency = gopt.fit_memory_efficiency && !memory_measured;
    r.gemm = fit_gemm(hw, gemm, gopt);
    hw.gemm = r.gemm->params;
    hw.kernel_launch_overhead = r.gemm->kernel_launch_overhead;
    for (const auto& n : r.gemm->notes) r.notes.push_back(n);
  }

  if (!m.attention.empty()) {
    // The tail is counted in SMs: kernels measured on a GPU of another SM count belong to another profile.
    for (const AttentionSample& a : m.attention) {
      if (a.sm_count > 0 && a.sm_count != base.sm_count) {
        throw InputError(fmt::format("calibrate: attention kernels were measured on a GPU with {} SMs ({}), but --base {} has {}: give the "
                                     "profile of the GPU measured",
                                     a.sm_count, m.meta.count("torch_probe_gpu") ? m.meta.at("torch_probe_gpu") : "unnamed", base.name, base.sm_count));
      }
    }
    // After the GEMM fit: the attention model adds the (fitted) launch overhead.
    r.attention = fit_attention(hw, m.attention, options.attention);
    hw.attention = r.attention->params;
    for (const auto& n : r.attention->notes) r.notes.push_back(n);
  }

  check_collective_samples(base, m.collectives, from);
  r.links = fit_collectives(m.collectives);
  // New fits replace the base's fits of the same group; the base's other fits stay.
  for (LinkFit& l : r.links) {
    const auto link = std::find_if(m.collectives.begin(), m.collectives.end(), [&](const CollectiveSample& s) { return to_string(s.link) == l.result.link; });
    const double ceiling = link == m.collectives.end() ? 0.0 : busbw_ceiling(base, link->link);
    // Inside a node only: what a fabric carries is not in the GPU's profile (25 GbE gives a
    // thousandth of NVLink's rate).
    const bool in_node = link != m.collectives.end() && (link->link == LinkClass::nvlink || link->link == LinkClass::pcie);
    if (l.bandwidth_bound && in_node && ceiling > 0 && l.result.busbw.value() < ceiling / kImplausibleSlowdown) {
      throw InputError(fmt::format("calibrate{}: {} over {} ({} ranks) fits a bus bandwidth of {}, more than {} times below what {}'s links "
                                   "carry ({}): the measurements' sizes or times are wrong",
                                   from, l.result.op, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks), to_string(l.result.busbw),
                                   kImplausibleSlowdown, base.name, to_string(BytesPerSec(ceiling / 2))));
    }
    // A profile holds bandwidths from 1 KB/s to 1 PB/s (yaml::bandwidth): a link without a ceiling
    // here (between processes, or NVLink on a GPU without it) had written 119,304,646 GB/s into a
    // profile.yaml that no command could load.
    if (l.bandwidth_bound && !yaml::bandwidth().ok(l.result.busbw)) {
      throw InputError(fmt::format("calibrate{}: {} over {} ({} ranks) fits a bus bandwidth of {}, outside a profile's 1 KB/s to 1 PB/s: the "
                                   "measurements' sizes or times are wrong",
                                   from, l.result.op, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks), to_string(l.result.busbw)));
    }
    if (l.bandwidth_bound && ceiling > 0 && l.result.busbw.value() > ceiling) {
      throw InputError(fmt::format("calibrate{}: {} over {} ({} ranks) fits a bus bandwidth of {}, more than {}, twice what {}'s links carry "
                                   "(a reduction in the switches at best halves a GPU's bytes): the measurements' sizes or times are wrong",
                                   from, l.result.op, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks), to_string(l.result.busbw), to_string(BytesPerSec(ceiling)),
                                   base.name));
    }
    // One size cannot separate a latency from a bandwidth. At 1 GiB or more the line through the
    // origin is kept: a latency of tens of microseconds (NCCL's model) is a few percent of such a
    // transfer at a terabyte a second. A smaller one is left out, as copies are (link_fit.cpp): a
    // latency-bound 1 MiB all-reduce's rate had become the link's capacity, and a probe's TP traffic
    // 3.6 times slower.
    const bool one_small_size = l.samples == 1 && l.largest_bytes < kOneSizeBytes;
    l.left_out = one_small_size || !l.bandwidth_bound;
    if (one_small_size) {
      r.notes.push_back(fmt::format("{} over {} ({} ranks) left out of the profile: measured at one size only ({}, under 1 GiB), which cannot "
                                    "separate its latency from its bandwidth (measure a sweep of sizes)",
                                    l.result.op, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks), to_string(Bytes(l.largest_bytes))));
      continue;
    }
    if (l.samples == 1) {
      r.notes.push_back(fmt::format("{} over {} ({} ranks) was measured at one size only ({}): its latency is taken as 0 and its bus bandwidth "
                                    "as that size's (measure a sweep of sizes to fit both)",
                                    l.result.op, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks), to_string(Bytes(l.largest_bytes))));
    }
    if (l.bandwidth_bound && !yaml::latency().ok(l.result.latency)) {
      // A profile holds latencies up to 1 s (yaml::latency): a fit past it wrote a profile.yaml that
      // no command could load.
      throw InputError(fmt::format("calibrate{}: {} over {} ({} ranks) fits a latency of {}, past a profile's 1 s: the measurements' sizes or times "
                                   "are wrong",
                                   from, l.result.op, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks), to_string(l.result.latency)));
    }
    if (l.bandwidth_bound) {
      const auto& n = l.result;
      std::erase_if(hw.collectives, [&](const hardware::CalibratedCollective& c) {
        return c.op == n.op && c.link == n.link && c.ranks == n.ranks && c.nodes == n.nodes && c.algorithm == n.algorithm;
      });
      hw.collectives.push_back(n);
    } else {
      r.notes.push_back(fmt::format("{} over {} ({} ranks) left out of the profile: even its largest size ({}) is latency-bound, so the "
                                    "sweep says nothing of its bandwidth (measure larger messages)",
                                    l.result.op, l.result.link, nodes_by_ranks(l.result.nodes, l.result.ranks),
                                    to_string(Bytes(l.largest_bytes))));
    }
  }

  // Provenance and quality, recorded in the profile itself.
  auto& cal = hw.calibration;
  cal["base_profile"] = base.file.empty() ? base.name : base.file.filename().string();
  if (!sources.empty()) cal["sources"] = sources;
  for (const auto& [k, v] : m.meta) cal["meta_" + k] = v;
  // The GEMMs fitted: one per dtype and shape (a repeated shape had been counted in the total).
  cal["samples"] = fmt::format("{} GEMM, {} copy, {} collective", r.gemm ? r.gemm->model_overall.samples : 0, m.memory.size(), m.collectives.size());
  if (!m.attention.empty()) cal["samples"] += fmt::format(", {} attention", m.attention.size());
  if (r.gemm) {
    cal["gemm_fit"] = fmt::format("model R2 {}, worst {:.1f}%, mean {:.1f}%; with residual tables R2 {}, worst {:.1f}%",
                                  r.gemm->model_overall.r2_text(), 100 * r.gemm->model_overall.worst_relative, 100 * r.gemm->model_overall.mean_relative,
                                  r.gemm->table_overall.r2_text(), 100 * r.gemm->table_overall.worst_relative);
  }
  if (r.attention) {
    cal["attention_fit"] = fmt::format("{} {} kernels of head dim {}, worst {:.1f}%, mean {:.1f}%", r.attention->samples, r.attention->backend,
                                       r.attention->head_dim, 100 * r.attention->worst, 100 * r.attention->mean);
  }
  for (const LinkFit& l : r.links) {
    cal[fmt::format("fit_{}{}_{}_{}x{}", l.result.op, l.result.algorithm.empty() ? "" : "_" + l.result.algorithm, l.result.link, l.result.nodes,
                    ranks_per_node(l.result.nodes, l.result.ranks))] =
        l.left_out ? fmt::format("{} size{}, left out of the profile", l.samples, l.samples == 1 ? "" : "s")
                   : fmt::format("{} sizes, line worst {:.1f}%, mean {:.1f}%", l.samples, 100 * l.line_worst_relative, 100 * l.line_mean_relative);
  }
  return r;
}

}  // namespace cs::calibrate
