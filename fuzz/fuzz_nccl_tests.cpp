// libFuzzer target: the nccl-tests log reader (calibrate --from-nccl-tests).
#include "clustersim/calibrate/nccl_tests.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = cs::fuzz::write_input(data, size, "all_reduce_perf.txt");
  return cs::fuzz::run([&] { (void)cs::calibrate::read_nccl_tests(file); });
}
