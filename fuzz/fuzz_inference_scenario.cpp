// libFuzzer target: an inference scenario (scenario: kind: inference), its workload (request
// generation included), sizing and cost sections.
#include "clustersim/models/serving_scenario.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "inference.yaml");
  return cs::fuzz::run([&] { (void)cs::models::load_inference_scenario(file); });
}
