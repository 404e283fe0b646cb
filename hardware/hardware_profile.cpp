#include "clustersim/hardware/hardware_profile.hpp"

#include <fmt/format.h>

#include "clustersim/common/suggest.hpp"

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

}  // namespace

HardwareProfile read_hardware_profile(const yaml::Node& node) {
  HardwareProfile hw;
  yaml::Map m(node);
  hw.name = m.get<std::string>("name");
  hw.vendor = m.get_or<std::string>("vendor", "");
  hw.architecture = m.choice("architecture", {"ampere", "ada", "hopper", "blackwell"});
  hw.compute_capability = m.get_or<std::string>("compute_capability", "");
  hw.sm_count = m.get<int>("sm_count", yaml::positive<int>());
  hw.boost_clock = m.get<Hertz>("boost_clock", yaml::positive<Hertz>());

  {
    yaml::Map peaks(m.at("peak_flops", "a map of dtype to dense peak FLOP/s"));
    for (const std::string& key : peaks.keys()) {
      yaml::Node value = peaks.at(key, "a compute rate");
      hw.peak_flops[dtype_key(value, key)] = value.as<FlopsPerSec>(yaml::positive<FlopsPerSec>());
    }
    peaks.finish();
    if (hw.peak_flops.empty()) peaks.node().fail("at least one dtype with its dense peak");
  }

  {
    yaml::Map mem(m.at("memory", "a map with capacity and bandwidth"));
    hw.memory_capacity = mem.get<Bytes>("capacity", yaml::positive<Bytes>());
    hw.memory_bandwidth = mem.get<BytesPerSec>("bandwidth", yaml::positive<BytesPerSec>());
    mem.finish();
  }

  if (auto nv = m.find("nvlink")) {
    yaml::Map n(*nv);
    NvlinkSpec spec;
    spec.generation = n.get<int>("generation", yaml::in_range(1, 9, "an NVLink generation from 1 to 9"));
    spec.links = n.get<int>("links", yaml::positive<int>());
    spec.bandwidth = n.get<BytesPerSec>("bandwidth", yaml::positive<BytesPerSec>());
    n.finish();
    hw.nvlink = spec;
  }

  {
    yaml::Map p(m.at("pcie", "a map with generation and lanes"));
    hw.pcie.generation = p.get<int>("generation", yaml::in_range(1, 7, "a PCIe generation from 1 to 7"));
    hw.pcie.lanes = p.get<int>("lanes", yaml::Check<int>{"1, 2, 4, 8 or 16 lanes", [](int v) {
                                              return v == 1 || v == 2 || v == 4 || v == 8 || v == 16;
                                            }});
    p.finish();
  }

  hw.tdp = m.get<Watts>("tdp", yaml::positive<Watts>());
  hw.kernel_launch_overhead = m.get<Seconds>("kernel_launch_overhead", yaml::non_negative<Seconds>());

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
    g.read("tile_ridge_intensity", hw.gemm.tile_ridge_intensity, yaml::positive<double>());
    g.read("k_half", hw.gemm.k_half, yaml::non_negative<double>());
    g.read("memory_efficiency", hw.gemm.memory_efficiency, fraction);
    g.finish();
  }
  if (auto an = m.find("attention")) {
    yaml::Map a(*an);
    const auto fraction = yaml::Check<double>{"a fraction in (0, 1]", [](double v) { return v > 0 && v <= 1; }};
    hw.attention.forward_efficiency = a.get<double>("forward_efficiency", fraction);
    hw.attention.backward_efficiency = a.get<double>("backward_efficiency", fraction);
    a.finish();
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
