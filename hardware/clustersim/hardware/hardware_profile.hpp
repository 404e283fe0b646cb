// A GPU's hardware profile: peaks, memory, interconnect and the parameters of its GEMM efficiency
// model. Shipped profiles live in scenarios/hardware/ with the source of every number beside it;
// `clustersim calibrate` writes new ones in the same format. See docs/hardware-profiles.md.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "clustersim/common/parts.hpp"
#include "clustersim/common/units.hpp"
#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/hardware/dtype.hpp"

namespace cs::hardware {

// Parameters of the GEMM efficiency model (gemm_model.hpp).
struct GemmModelParams {
  std::map<Dtype, double> max_efficiency;  // best achieved / dense peak, per dtype
  double tile_ridge_intensity = 64.0;      // tile intensity tm*tn/(tm+tn) that reaches full efficiency
  double k_half = 128.0;                   // K at which the K-loop efficiency K/(K+k_half) is one half
  double memory_efficiency = 0.85;         // achievable fraction of HBM bandwidth
};

// Fused (FlashAttention-style) attention: achieved FLOP/s over the dense 16-bit peak, forward and
// backward (backward FLOPs counted as 2.5 x forward, as the FlashAttention papers count them).
// 0 when no measurement is known: the training model then times attention with the GEMM model.
struct AttentionParams {
  double forward_efficiency = 0;
  double backward_efficiency = 0;
};

struct NvlinkSpec {
  int generation = 0;
  int links = 0;
  BytesPerSec bandwidth;  // per direction, all links of one GPU together
};

struct PcieSpec {
  int generation = 0;
  int lanes = 0;
};

struct HardwareProfile {
  std::string name;
  std::string vendor;
  std::string architecture;
  std::string compute_capability;
  int sm_count = 0;
  Hertz boost_clock;
  std::map<Dtype, FlopsPerSec> peak_flops;  // dense; a dtype absent is unsupported
  Bytes memory_capacity;
  BytesPerSec memory_bandwidth;
  std::optional<NvlinkSpec> nvlink;
  PcieSpec pcie;
  Watts tdp;
  Seconds kernel_launch_overhead;
  GemmModelParams gemm;
  AttentionParams attention;
  std::filesystem::path file;  // where it was loaded from (empty when inline)

  [[nodiscard]] bool supports(Dtype d) const { return peak_flops.count(d) != 0; }
  // The dense peak; throws std::out_of_range for an unsupported dtype (check supports() first).
  [[nodiscard]] FlopsPerSec peak(Dtype d) const { return peak_flops.at(d); }
};

// Reads the mapping under `hardware:`.
HardwareProfile read_hardware_profile(const yaml::Node& node);
// Loads a profile file (its root is `hardware: {...}`).
HardwareProfile load_hardware_profile(const std::filesystem::path& file, IncludeStack& includes,
                                      const SourceLocation& from = {});
// A profile given by reference (path or shipped name) or inline as a map.
HardwareProfile load_hardware_reference(const yaml::Node& node, IncludeStack& includes);

}  // namespace cs::hardware
