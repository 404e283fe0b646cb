// libFuzzer target: a GPU hardware profile file (hardware: ...).
#include "clustersim/common/parts.hpp"
#include "clustersim/hardware/hardware_profile.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "hardware.yaml");
  return cs::fuzz::run([&] {
    cs::IncludeStack includes;
    (void)cs::hardware::load_hardware_profile(file, includes);
  });
}
