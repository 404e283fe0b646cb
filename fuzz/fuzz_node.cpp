// libFuzzer target: a node template file (node: ...).
#include "clustersim/common/parts.hpp"
#include "clustersim/topology/node_template.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "node.yaml");
  return cs::fuzz::run([&] {
    cs::IncludeStack includes;
    (void)cs::topology::load_node_file(file, includes);
  });
}
