// libFuzzer target: a validation file of published measurements (shared/validation/*.yaml).
#include "clustersim/validate/cases.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "validation.yaml");
  return cs::fuzz::run([&] { (void)cs::validate::read_cases(file); });
}
