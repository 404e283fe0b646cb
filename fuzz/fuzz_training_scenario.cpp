// libFuzzer target: a training scenario (scenario: kind: training), with its search and cost
// sections; the shipped presets it names are read as for users.
#include "clustersim/models/training_scenario.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "training.yaml");
  return cs::fuzz::run([&] { (void)cs::models::load_training_scenario(file); });
}
