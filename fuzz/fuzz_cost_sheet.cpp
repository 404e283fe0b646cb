// libFuzzer target: a cost sheet file (cost_sheet: ...).
#include "clustersim/common/parts.hpp"
#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/models/cost_scenario.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "sheet.yaml");
  return cs::fuzz::run([&] {
    auto doc = cs::yaml::Document::load_file(file);
    (void)cs::models::read_cost_sheet(cs::part_body(doc->root(), "cost_sheet"));
  });
}
