#include "clustersim/hardware/attention_model.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace cs::hardware {

Seconds fused_attention_time(const HardwareProfile& hw, Flops flops, Flops row_flops, Dtype dtype, bool backward, Load load) {
  const double eff = backward ? hw.attention.backward_efficiency : hw.attention.forward_efficiency;
  if (eff <= 0) throw std::invalid_argument(fmt::format("the {} profile has no measured attention efficiency", hw.name));
  if (!hw.supports(dtype)) throw std::invalid_argument(fmt::format("the {} profile has no {} peak", hw.name, to_string(dtype)));
  const double rate = hw.peak(dtype).value() * eff * load_factor(hw, load);
  const double tail = hw.attention.tail_blocks * row_flops.value() * std::max(hw.sm_count, 1);
  return Seconds((flops.value() + tail) / rate) + hw.kernel_launch_overhead;
}

}  // namespace cs::hardware
