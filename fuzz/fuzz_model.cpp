// libFuzzer target: a transformer model file (model: ...).
#include "clustersim/common/parts.hpp"
#include "clustersim/models/transformer.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "model.yaml");
  return cs::fuzz::run([&] {
    cs::IncludeStack includes;
    (void)cs::models::load_transformer_file(file, includes);
  });
}
