#include "clustersim/hardware/hardware_profile.hpp"

#include <algorithm>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "clustersim/common/suggest.hpp"
#include "clustersim/hardware/attention_model.hpp"

namespace cs::hardware {

namespace {

const std::vector<std::string>& dtype_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (Dtype d : kAllDtypes) v.emplace_back(to_string(d));
    return v;
  }();
  return names;
}

// The dtype a key of `value`'s parent map names; fails at the key's value.
Dtype dtype_key(const yaml::Node& value, const std::string& key) {
  if (auto d = parse_dtype(key)) return *d;
  value.fail("a dtype key (" + join_alternatives(dtype_names()) + ")", "'" + key + "'" + did_you_mean(key, dtype_names()));
}

// `log2_x: [first, last]`: the grid's range on one axis.
void read_axis(yaml::Map& t, const char* key, int& first, int& last) {
  yaml::Node axis = t.at(key, "[first, last] log2 of the grid");
  const auto items = axis.items();
  if (items.size() != 2) axis.fail("a list of 2 integers [first, last]", axis.describe());
  first = items[0].as<int>(yaml::in_range(0, 40, "a log2 size from 0 to 40"));
  last = items[1].as<int>(yaml::in_range(first, 40, fmt::format("a log2 size from {} to 40", first)));
}

GemmResidualTable read_residuals(const yaml::Node& node) {
  yaml::Map t(node);
  GemmResidualTable r;
  read_axis(t, "log2_m", r.m_first, r.m_last);
  read_axis(t, "log2_n", r.n_first, r.n_last);
  read_axis(t, "log2_k", r.k_first, r.k_last);
  yaml::Node factors = t.at("factors", "a list of time factors");
  const std::size_t want = static_cast<std::size_t>(r.size_m()) * r.size_n() * r.size_k();
  const auto items = factors.items();
  if (items.size() != want) factors.fail(fmt::format("a list of {} factors ({} x {} x {})", want, r.size_m(), r.size_n(), r.size_k()), factors.describe());
  for (const auto& f : items) r.factors.push_back(f.as<double>(yaml::Check<double>{"a factor in [0.05, 20]", [](double v) { return v >= 0.05 && v <= 20; }}));
  t.finish();
  return r;
}

CalibratedTransfer read_transfer(const yaml::Node& node) {
  yaml::Map t(node);
  CalibratedTransfer c;
  c.latency = t.get<Seconds>("latency", yaml::latency());
  c.bandwidth = t.get<BytesPerSec>("bandwidth", yaml::bandwidth());
  t.finish();
  return c;
}

CalibratedCollective read_collective(const yaml::Node& node) {
  yaml::Map c(node);
  CalibratedCollective out;
  out.op = c.choice("op", {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"});
  out.link = c.choice("link", {"nvlink", "pcie", "network", "process"});
  out.ranks = c.get<int>("ranks", yaml::at_least(2, "at least 2 ranks"));
  out.nodes = c.get<int>("nodes", yaml::in_range(1, out.ranks, fmt::format("from 1 to ranks ({})", out.ranks)));
  // A fit describes nodes x ranks per node (calibrate reads its runs so and refuses uneven ones).
  if (out.ranks % out.nodes != 0) {
    c.at("nodes", "").fail(fmt::format("a divisor of ranks ({}): the same number of ranks on every node", out.ranks), std::to_string(out.nodes));
  }
  out.algorithm = c.get_or<std::string>("algorithm", "");
  if (!out.algorithm.empty()) {
    static const std::vector<std::string> algorithms{"ring", "tree", "hierarchical", "nvls", "collnet", "pairwise", "direct"};
    if (std::find(algorithms.begin(), algorithms.end(), out.algorithm) == algorithms.end()) {
      c.at("algorithm", "an algorithm").fail(join_alternatives(algorithms), "'" + out.algorithm + "'");
    }
  }
  out.latency = c.get<Seconds>("latency", yaml::latency());
  out.busbw = c.get<BytesPerSec>("busbw", yaml::bandwidth());
  if (auto eff = c.find("efficiency")) {
    double last = 0;
    for (const auto& row : eff->items()) {
      const auto pair = row.items();
      if (pair.size() != 2) row.fail("a pair [bytes, efficiency]", row.describe());
      const double bytes = pair[0].as<double>(yaml::Check<double>{fmt::format("a size above the previous one ({})", last), [last](double v) { return v > last; }});
      const double e = pair[1].as<double>(yaml::Check<double>{"an efficiency in [0.01, 100]", [](double v) { return v >= 0.01 && v <= 100; }});
      out.efficiency.emplace_back(bytes, e);
      last = bytes;
    }
  }
  c.finish();
  return out;
}

// A CUDA compute capability, major.minor in digits ("9.0"), or none.
yaml::Check<std::string> compute_capability() {
  return {"a CUDA compute capability such as 9.0 (major.minor)", [](const std::string& v) {
            const auto digits = [](std::string_view part) { return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }); };
            const auto dot = v.find('.');
            return v.empty() || (dot != std::string::npos && digits(std::string_view(v).substr(0, dot)) && digits(std::string_view(v).substr(dot + 1)));
          }};
}

}  // namespace

HardwareProfile read_hardware_profile(const yaml::Node& node) {
  HardwareProfile hw;
  yaml::Map m(node);
  hw.name = m.get<std::string>("name", yaml::name());
  hw.vendor = m.get_or<std::string>("vendor", "");
  hw.architecture = m.choice("architecture", {"ampere", "ada", "hopper", "blackwell", "cpu"});
  hw.compute_capability = m.get_or<std::string>("compute_capability", "", compute_capability());
  // SMs (or CPU cores): up to 4,096, past any GPU made (a B200 has 148); a count of 2^31 had tiled
  // every GEMM into one wave of near-empty SMs and made a step last days.
  hw.sm_count = m.get<int>("sm_count", yaml::in_range<int>(1, 4096, "a count from 1 to 4096"));
  hw.boost_clock = m.get<Hertz>("boost_clock", yaml::positive<Hertz>());

  {
    yaml::Map peaks(m.at("peak_flops", "a map of dtype to dense peak FLOP/s"));
    for (const std::string& key : peaks.keys()) {
      yaml::Node value = peaks.at(key, "a compute rate");
      hw.peak_flops[dtype_key(value, key)] = value.as<FlopsPerSec>(yaml::compute_peak());
    }
    peaks.finish();
    if (hw.peak_flops.empty()) peaks.node().fail("at least one dtype with its dense peak");
  }

  {
    yaml::Map mem(m.at("memory", "a map with capacity and bandwidth"));
    // Up to 1 PB, a thousand times the largest GPU's: a datasheet's figure typed many orders off
    // (2e9PB) would otherwise overflow a KV pool's token count.
    hw.memory_capacity = mem.get<Bytes>("capacity", yaml::in_range(Bytes(1), Bytes(1e15), "a capacity from 1B to 1PB"));
    hw.memory_bandwidth = mem.get<BytesPerSec>("bandwidth", yaml::bandwidth());
    mem.finish();
  }

  if (auto nv = m.find("nvlink")) {
    yaml::Map n(*nv);
    NvlinkSpec spec;
    spec.generation = n.get<int>("generation", yaml::in_range(1, 9, "an NVLink generation from 1 to 9"));
    spec.links = n.get<int>("links", yaml::positive<int>());
    spec.bandwidth = n.get<BytesPerSec>("bandwidth", yaml::bandwidth());
    n.finish();
    hw.nvlink = spec;
  }

  if (auto pn = m.find("pcie")) {
    yaml::Map p(*pn);
    PcieSpec spec;
    spec.generation = p.get<int>("generation", yaml::in_range(1, 7, "a PCIe generation from 1 to 7"));
    spec.lanes = p.get<int>("lanes", yaml::Check<int>{"1, 2, 4, 8 or 16 lanes", [](int v) {
                                              return v == 1 || v == 2 || v == 4 || v == 8 || v == 16;
                                            }});
    p.finish();
    hw.pcie = spec;
  }

  hw.tdp = m.get_or<Watts>("tdp", Watts(0), yaml::positive<Watts>());
  // Microseconds on a GPU; up to 1 s, the most calibration fits (calibrate/gemm_fit.cpp). Past it a
  // unit typed many orders off would run a step past the simulated clock, blamed on the scenario.
  hw.kernel_launch_overhead = m.get<Seconds>("kernel_launch_overhead", yaml::in_range(Seconds(0), Seconds(1), "a launch overhead from 0 to 1s"));

  {
    yaml::Node gnode = m.at("gemm", "the GEMM efficiency model parameters");
    yaml::Map g(gnode);
    yaml::Map eff(g.at("max_efficiency", "a map of dtype to efficiency"));
    const auto fraction = yaml::Check<double>{"a fraction in (0, 1]", [](double v) { return v > 0 && v <= 1; }};
    for (const std::string& key : eff.keys()) {
      yaml::Node value = eff.at(key, "a fraction");
      const Dtype d = dtype_key(value, key);
      if (!hw.supports(d)) value.fail(fmt::format("a dtype listed in peak_flops ({} is not)", key), value.describe());
      hw.gemm.max_efficiency[d] = value.as<double>(fraction);
    }
    eff.finish();
    for (const auto& [d, peak] : hw.peak_flops) {
      if (!hw.gemm.max_efficiency.count(d)) {
        eff.node().fail(fmt::format("an efficiency for every dtype in peak_flops ({} is missing)", to_string(d)),
                        eff.node().describe());
      }
    }
    // The ranges calibration fits them in (calibrate/gemm_fit.cpp); far past them every GEMM's time
    // runs to infinity, blamed on the scenario.
    const auto ridge = yaml::Check<double>{"a tile intensity above 0 and at most 1e4", [](double v) { return v > 0 && v <= 1e4; }};
    const auto k_half = yaml::in_range(0.0, 1e7, "a K depth from 0 to 1e7");
    g.read("tile_ridge_intensity", hw.gemm.tile_ridge_intensity, ridge);
    g.read("k_half", hw.gemm.k_half, k_half);
    g.read("memory_efficiency", hw.gemm.memory_efficiency, fraction);
    g.read("sustained_fraction", hw.gemm.sustained_fraction, fraction);
    for (const auto& [key, target, check] : {std::tuple{"tile_ridge_intensity_by_dtype", &hw.gemm.tile_ridge_by_dtype, ridge},
                                             std::tuple{"k_half_by_dtype", &hw.gemm.k_half_by_dtype, k_half}}) {
      if (auto by = g.find(key)) {
        yaml::Map b(*by);
        for (const std::string& name : b.keys()) {
          yaml::Node value = b.at(name, check.expected);
          const Dtype d = dtype_key(value, name);
          if (!hw.supports(d)) value.fail(fmt::format("a dtype listed in peak_flops ({} is not)", name), value.describe());
          (*target)[d] = value.as<double>(check);
        }
        b.finish();
      }
    }
    if (auto res = g.find("residuals")) {
      yaml::Map r(*res);
      for (const std::string& key : r.keys()) {
        yaml::Node value = r.at(key, "a residual table");
        const Dtype d = dtype_key(value, key);
        if (!hw.supports(d)) value.fail(fmt::format("a dtype listed in peak_flops ({} is not)", key), value.describe());
        hw.gemm.residuals[d] = read_residuals(value);
      }
      r.finish();
    }
    g.finish();
  }
  if (auto an = m.find("attention")) {
    yaml::Map a(*an);
    const auto fraction = yaml::Check<double>{"a fraction in (0, 1]", [](double v) { return v > 0 && v <= 1; }};
    hw.attention.forward_efficiency = a.get<double>("forward_efficiency", fraction);
    hw.attention.backward_efficiency = a.get<double>("backward_efficiency", fraction);
    hw.attention.tail_blocks = a.get_or<double>("tail_blocks", 0.0, yaml::Check<double>{"a number of blocks in [0, 8]", [](double v) {
                                                  return v >= 0 && v <= kAttentionMaxTailBlocks;
                                                }});
    a.finish();
  }
  if (auto cn = m.find("collectives")) {
    for (const auto& item : cn->items()) {
      CalibratedCollective c = read_collective(item);
      // Two fits of one measurement would leave the first to win without a word (a probe's 100 and
      // 300 GB/s entries gave 60 or 240 GB/s by their order).
      for (const CalibratedCollective& earlier : hw.collectives) {
        if (earlier.op == c.op && earlier.link == c.link && earlier.ranks == c.ranks && earlier.nodes == c.nodes && earlier.algorithm == c.algorithm) {
          item.fail(fmt::format("one entry per op, link, ranks, nodes and algorithm; {} over {} ({} ranks on {} node{}{}) is given twice", c.op, c.link,
                                c.ranks, c.nodes, c.nodes == 1 ? "" : "s", c.algorithm.empty() ? "" : ", " + c.algorithm),
                    "a second entry");
        }
      }
      hw.collectives.push_back(std::move(c));
    }
  }
  if (auto tn = m.find("host_transfers")) {
    yaml::Map t(*tn);
    if (auto h = t.find("h2d")) hw.host_to_device = read_transfer(*h);
    if (auto d = t.find("d2h")) hw.device_to_host = read_transfer(*d);
    t.finish();
  }
  if (auto cal = m.find("calibration")) {
    yaml::Map c(*cal);
    for (const std::string& key : c.keys()) hw.calibration[key] = c.get<std::string>(key);
    c.finish();
  }
  m.finish();
  return hw;
}

HardwareProfile load_hardware_profile(const std::filesystem::path& file, IncludeStack& includes,
                                      const SourceLocation& from) {
  auto guard = includes.enter(file, from);
  auto doc = yaml::Document::load_file(file);
  HardwareProfile hw = read_hardware_profile(part_body(doc->root(), "hardware"));
  hw.file = file;
  return hw;
}

HardwareProfile load_hardware_reference(const yaml::Node& node, IncludeStack& includes) {
  if (node.is_map()) return read_hardware_profile(node);
  return load_hardware_profile(resolve_part(node, "hardware"), includes, node.where());
}

}  // namespace cs::hardware
