// libFuzzer target: a topology file (topology: ...), with its node templates, fabric and routing.
#include "clustersim/topology/topology_loader.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "topology.yaml");
  return cs::fuzz::run([&] { (void)cs::topology::load_topology(file.string()); });
}
