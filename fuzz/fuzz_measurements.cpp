// libFuzzer target: the JSON measurement readers (calibrate --from and --from-torch-probe). Each
// input is read as both formats: either reader must take it or name what is wrong.
#include "clustersim/calibrate/measurements.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "measurements.json");
  const int a = cs::fuzz::run([&] { (void)cs::calibrate::load_measurements(file); });
  const int b = cs::fuzz::run([&] { (void)cs::calibrate::read_torch_probe(file); });
  return a | b;
}
