#include "clustersim/hardware/attention_model.hpp"
#include "clustersim/hardware/gemm_model.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

#include <cmath>

#include "catch.hpp"

#include "clustersim/common/parts.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::hardware;
using Catch::Contains;

namespace {

// fused_attention_time in plain seconds, for the arithmetic of the checks below.
double attention_s(const HardwareProfile& hw, double flops, double row_flops, Dtype dtype, bool backward, Load load = Load::burst) {
  return fused_attention_time(hw, Flops(flops), Flops(row_flops), dtype, backward, load).value();
}

using test::shipped;

// A profile from text, with the minimum of fields; `extra` is appended under `hardware:`.
std::string minimal_profile(const std::string& gemm = "    max_efficiency: {bf16: 0.8}\n") {
  return "hardware:\n"
         "  name: T\n"
         "  architecture: hopper\n"
         "  sm_count: 132\n"
         "  boost_clock: 1830MHz\n"
         "  peak_flops: {bf16: 989TFLOPS}\n"
         "  memory: {capacity: 80GB, bandwidth: 3.35TB/s}\n"
         "  pcie: {generation: 5, lanes: 16}\n"
         "  tdp: 700W\n"
         "  kernel_launch_overhead: 4us\n"
         "  gemm:\n" +
         gemm;
}

HardwareProfile from_text(const std::string& text) {
  yaml::Node root = test::parse(text);
  yaml::Map m(root);
  return read_hardware_profile(m.at("hardware", "a profile"));
}

}  // namespace

TEST_CASE("every shipped hardware profile loads", "[hardware]") {
  const auto names = shipped_part_names("hardware");
  CHECK(names == std::vector<std::string>{"a100-sxm4-40gb", "a100-sxm4-80gb", "b200-sxm-180gb", "gb200", "h100-sxm5-80gb",
                                          "h200-sxm-141gb", "h800-sxm5-80gb", "l40s"});
  for (const auto& name : names) {
    INFO(name);
    const HardwareProfile hw = shipped(name);
    CHECK(hw.supports(Dtype::bf16));
    CHECK(hw.memory_capacity.value() > 0);
    for (const auto& [dtype, eff] : hw.gemm.max_efficiency) CHECK((eff > 0 && eff <= 1));
  }
}

TEST_CASE("shipped profiles carry the datasheet figures", "[hardware]") {
  // NVIDIA H100 datasheet (SXM5): 989.4 TFLOP/s dense bf16, 80 GB, 3.35 TB/s, 900 GB/s NVLink both ways.
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  CHECK(h100.peak(Dtype::bf16).value() == Approx(989.4e12));
  CHECK(h100.memory_bandwidth.value() == Approx(3.35e12));
  CHECK(h100.nvlink->bandwidth.value() == Approx(450e9));
  CHECK(h100.sm_count == 132);
  // A100 has no fp8; B200 has fp4; L40S has no NVLink.
  CHECK_FALSE(shipped("a100-sxm4-80gb").supports(Dtype::fp8));
  CHECK(shipped("b200-sxm-180gb").supports(Dtype::fp4));
  CHECK_FALSE(shipped("l40s").nvlink.has_value());
  // H800: H100 compute with NVLink cut to 400 GB/s both ways.
  CHECK(shipped("h800-sxm5-80gb").nvlink->bandwidth.value() == Approx(200e9));
}

TEST_CASE("profile errors name the field", "[hardware]") {
  CHECK_THAT(test::input_error([] { from_text(minimal_profile("    max_efficiency: {bf16: 0.8, fp8: 0.7}\n")); }),
             Contains("field 'hardware.gemm.max_efficiency.fp8': expected a dtype listed in peak_flops (fp8 is not)"));
  CHECK_THAT(test::input_error([] { from_text(minimal_profile("    max_efficiency: {bf16: 1.2}\n")); }),
             Contains("field 'hardware.gemm.max_efficiency.bf16': expected a fraction in (0, 1], found '1.2'"));
  CHECK_THAT(test::input_error([] { from_text(minimal_profile("    max_efficiency: {bf61: 0.8}\n")); }),
             Contains("expected a dtype key (fp32, tf32, fp16, bf16, fp8 or fp4), found 'bf61' (did you mean 'bf16'?)"));
  CHECK_THAT(test::input_error([] { from_text(minimal_profile("    max_efficiency: {}\n")); }),
             Contains("expected an efficiency for every dtype in peak_flops (bf16 is missing)"));
  CHECK_THAT(test::input_error([] { from_text(minimal_profile("    max_efficiency: {bf16: 0.8}\n    k_halve: 1\n")); }),
             Contains("found unknown key 'k_halve' (did you mean 'k_half'?)"));
  // Calibrated fields.
  CHECK_THAT(test::input_error([] {
               from_text(minimal_profile("    max_efficiency: {bf16: 0.8}\n    residuals:\n      bf16: {log2_m: [8, 9], log2_n: [8, 8], log2_k: [8, 8], factors: [1]}\n"));
             }),
             Contains("field 'hardware.gemm.residuals.bf16.factors': expected a list of 2 factors (2 x 1 x 1)"));
  CHECK_THAT(test::input_error([] {
               from_text(minimal_profile("    max_efficiency: {bf16: 0.8}\n    k_half_by_dtype: {fp8: 100}\n"));
             }),
             Contains("expected a dtype listed in peak_flops (fp8 is not)"));
  CHECK_THAT(test::input_error([] {
               from_text(minimal_profile() + "  collectives:\n    - {op: all_reduce, link: nvlink, ranks: 8, nodes: 1, latency: 10us, busbw: 300GB/s, algorithm: rings}\n");
             }),
             Contains("algorithm") && Contains("'rings'"));
  CHECK_THAT(test::input_error([] {
               from_text(minimal_profile() + "  collectives:\n    - {op: all_reduce, link: nvlink, ranks: 8, nodes: 9, latency: 10us, busbw: 300GB/s}\n");
             }),
             Contains("field 'hardware.collectives[0].nodes': expected from 1 to ranks (8)"));
  // A fit is nodes x ranks per node, and one per measurement (a probe's two entries of one all-gather
  // at 100 and 300 GB/s had the first win by its place in the list).
  CHECK_THAT(test::input_error([] {
               from_text(minimal_profile() + "  collectives:\n    - {op: all_reduce, link: network, ranks: 16, nodes: 3, latency: 10us, busbw: 300GB/s}\n");
             }),
             Contains("field 'hardware.collectives[0].nodes': expected a divisor of ranks (16)"));
  CHECK_THAT(test::input_error([] {
               from_text(minimal_profile() + "  collectives:\n    - {op: all_gather, link: nvlink, ranks: 8, nodes: 1, latency: 10us, busbw: 100GB/s}\n"
                                             "    - {op: all_gather, link: nvlink, ranks: 8, nodes: 1, latency: 10us, busbw: 300GB/s}\n");
             }),
             Contains("field 'hardware.collectives[1]': expected one entry per op, link, ranks, nodes and algorithm"));
  // A peak or a bandwidth many orders below any device's: a unit typed wrong, refused where it is read.
  const auto with = [](const std::string& from, const std::string& to) {
    std::string t = minimal_profile();
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  CHECK_THAT(test::input_error([&] { from_text(with("bf16: 989TFLOPS", "bf16: 989FLOPS")); }),
             Contains("field 'hardware.peak_flops.bf16': expected a peak from 1GFLOPS to 1EFLOPS, found '989FLOPS'"));
  // Past any device the other way (a probe's 1e30 PFLOPS, 2^31 SMs), and a compute capability that is
  // no version.
  CHECK_THAT(test::input_error([&] { from_text(with("bf16: 989TFLOPS", "bf16: 1e30PFLOPS")); }),
             Contains("field 'hardware.peak_flops.bf16': expected a peak from 1GFLOPS to 1EFLOPS, found '1e30PFLOPS'"));
  CHECK_THAT(test::input_error([&] { from_text(with("sm_count: 132", "sm_count: 2147483647")); }),
             Contains("field 'hardware.sm_count': expected a count from 1 to 4096, found '2147483647'"));
  CHECK_THAT(test::input_error([&] { from_text(with("sm_count: 132", "sm_count: 132\n  compute_capability: x")); }),
             Contains("field 'hardware.compute_capability': expected a CUDA compute capability such as 9.0 (major.minor), found 'x'"));
  CHECK_THAT(test::input_error([&] { from_text(with("bandwidth: 3.35TB/s", "bandwidth: 3.35B/s")); }),
             Contains("field 'hardware.memory.bandwidth': expected a bandwidth of at least 1KB/s and at most 1PB/s, found '3.35B/s'"));
}

TEST_CASE("GEMM model: a large square GEMM loses only wave quantisation and the K loop", "[hardware][gemm]") {
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  const auto e = estimate_gemm(h100, {8192, 8192, 8192}, Dtype::bf16);
  // Expectations: 256x128 tiles -> 32 x 64 = 2048 tiles, ceil(2048/132) = 16 waves, q_wave = 2048/2112;
  // q_tile = 1; k_eff = 8192 / (8192 + bf16's k_half). time = 2 * 8192^3 / (peak * max_eff * q_wave * k_eff) + launch.
  const double q_wave = 2048.0 / (16 * 132);
  const double k_eff = 8192.0 / (8192.0 + h100.gemm.k_half_for(Dtype::bf16));
  const double t = 2.0 * std::pow(8192.0, 3) / (h100.peak(Dtype::bf16).value() * h100.gemm.max_efficiency.at(Dtype::bf16) * q_wave * k_eff) +
                   h100.kernel_launch_overhead.value();
  CHECK(e.time.value() == Approx(t).epsilon(1e-9));
  CHECK(e.tile_m * e.tile_n == 256 * 128);
  CHECK_FALSE(e.memory_bound);
}

TEST_CASE("GEMM model: quantisation, small K and skinny shapes cost efficiency", "[hardware][gemm]") {
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  const auto eff = [&](std::int64_t m, std::int64_t n, std::int64_t k) { return estimate_gemm(h100, {m, n, k}, Dtype::bf16).efficiency; };
  // 1536 x 1408 is 12 x 11 = 132 tiles of 128x128: exactly one wave on 132 SMs. One more row needs a
  // 13th row of tiles (143 tiles, two waves, q_wave = 143/264) or bigger, emptier tiles: about half
  // the efficiency whichever tile is chosen.
  CHECK(eff(1537, 1408, 4096) < 0.6 * eff(1536, 1408, 4096));
  // Small K amortises each tile's fixed cost over fewer steps.
  CHECK(eff(8192, 8192, 256) < eff(8192, 8192, 8192));
  // Decode-like GEMV (M = 1) is bound by reading the weights.
  CHECK(estimate_gemm(h100, {1, 8192, 8192}, Dtype::bf16).memory_bound);
  // fp8 runs faster than bf16 on the same shape.
  CHECK(estimate_gemm(h100, {8192, 8192, 8192}, Dtype::fp8).time < estimate_gemm(h100, {8192, 8192, 8192}, Dtype::bf16).time);
  // Efficiency never exceeds the ceiling.
  CHECK(eff(16384, 16384, 16384) <= h100.gemm.max_efficiency.at(Dtype::bf16));
}

TEST_CASE("GEMM model: a batched GEMM is one kernel whose tiles share the waves", "[hardware][gemm]") {
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  const double launch = h100.kernel_launch_overhead.value();
  const double ceiling = h100.peak(Dtype::bf16).value() * h100.gemm.max_efficiency.at(Dtype::bf16);
  const double k_eff = 256.0 / (256.0 + h100.gemm.k_half_for(Dtype::bf16));
  const double flops = 2.0 * 1024 * 1024 * 256;
  // One 1024 x 1024 x 256 product is 64 tiles of 128x128 on 132 SMs, half a wave, and too short a K
  // loop to split; its best tile (128x64: 128 tiles, tile efficiency 2/3) still leaves the SMs 3% idle.
  // 33 products in one batched kernel are 2112 tiles of 128x128: 16 full waves, no quantisation, one
  // launch.
  const auto one = estimate_gemm(h100, {1024, 1024, 256}, Dtype::bf16);
  CHECK(one.split_k == 1);
  CHECK(one.time.value() == Approx(flops / (ceiling * (128.0 / 132) * (2.0 / 3) * k_eff) + launch).epsilon(1e-9));
  const auto batch = estimate_gemm(h100, {1024, 1024, 256, 33}, Dtype::bf16);
  CHECK(batch.time.value() == Approx(33 * flops / (ceiling * k_eff) + launch).epsilon(1e-9));
  CHECK(batch.time.value() < 0.75 * 33 * one.time.value());
  // Memory-bound batches move every product's operands (the lone GEMV also sums two K slices: 0.1%).
  const auto gemv = estimate_gemm(h100, {1, 8192, 8192}, Dtype::bf16);
  const auto gemvs = estimate_gemm(h100, {1, 8192, 8192, 4}, Dtype::bf16);
  CHECK(gemvs.memory_bound);
  CHECK(gemvs.time.value() - launch == Approx(4 * (gemv.time.value() - launch)).epsilon(2e-3));
  CHECK_THROWS_WITH(estimate_gemm(h100, {8, 8, 8, 0}, Dtype::bf16), Contains("must be positive"));
  // Past 2^31 a dimension or 2^62 outputs the tile counts would overflow: refused (2^44 x 2^44 had
  // wrapped to 0 tiles and died dividing by it, SIGFPE).
  CHECK_THROWS_WITH(estimate_gemm(h100, {std::int64_t{1} << 44, std::int64_t{1} << 44, 4096}, Dtype::bf16), Contains("at most 2^31 a dimension"));
  CHECK_THROWS_WITH(estimate_gemm(h100, {1 << 30, 1 << 30, 64, 64}, Dtype::bf16), Contains("2^62 outputs"));
  CHECK(estimate_gemm(h100, {std::int64_t{1} << 31, 8192, 8192}, Dtype::bf16).time.value() > 0);
}

TEST_CASE("GEMM model: a GEMM with fewer output tiles than SMs splits its K loop", "[hardware][gemm]") {
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  const double launch = h100.kernel_launch_overhead.value();
  const double ceiling = h100.peak(Dtype::bf16).value() * h100.gemm.max_efficiency.at(Dtype::bf16);
  const double bandwidth = h100.memory_bandwidth.value() * h100.gemm.memory_efficiency;
  const auto k_eff = [&](double k) { return k / (k + h100.gemm.k_half_for(Dtype::bf16)); };
  // 1024 x 1024 x 4096: 64 tiles of 128x128 fill half of the 132 SMs. Two K slices of 2048 make 128
  // blocks (one wave, 97% full) at the shorter loop's k_eff, then a reduction pass reads the two fp32
  // partial sums and writes the bf16 result: shorter than 128x64 tiles at tile efficiency 2/3.
  const auto e = estimate_gemm(h100, {1024, 1024, 4096}, Dtype::bf16);
  CHECK(e.split_k == 2);
  CHECK(e.tile_m * e.tile_n == 128 * 128);
  const double flops = 2.0 * 1024 * 1024 * 4096;
  const double reduction = 1024.0 * 1024 * (2 * 4.0 + 2.0) / bandwidth;
  CHECK(e.time.value() == Approx(flops / (ceiling * (128.0 / 132) * k_eff(2048)) + reduction + launch).epsilon(1e-9));
  const double unsplit = flops / (ceiling * (128.0 / 132) * (2.0 / 3) * k_eff(4096)) + launch;
  CHECK(e.time.value() < unsplit);
  // Enough tiles to fill the SMs: no split. A split's reduction pass is part of the choice, so a
  // shorter K loop never costs more (choosing by compute alone once made 1024 x 1024 x 512 slower
  // than 1024 x 1024 x 1024).
  CHECK(estimate_gemm(h100, {8192, 8192, 4096}, Dtype::bf16).split_k == 1);
  const auto skinny = estimate_gemm(h100, {1024, 1024, 512}, Dtype::bf16);
  CHECK(skinny.time.value() <= estimate_gemm(h100, {1024, 1024, 1024}, Dtype::bf16).time.value());
  // A decode GEMV (one row, 4096 x 4096 weights) stays bound by reading its weights: splitting its K
  // loop fills the SMs that its 64 tiles of 64x64 would leave idle.
  const auto gemv = estimate_gemm(h100, {1, 4096, 4096}, Dtype::bf16);
  CHECK(gemv.memory_bound);
  CHECK(gemv.split_k > 1);
}

TEST_CASE("GEMM model: sustained load runs compute-bound GEMMs at the profile's sustained fraction", "[hardware][gemm]") {
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  // Shipped: H200's sustained over burst matmul rate, 0.88 (stas00/ml-engineering MSMF vs MAMF).
  REQUIRE(h100.gemm.sustained_fraction == Approx(0.88));
  const auto burst = estimate_gemm(h100, {8192, 8192, 8192}, Dtype::bf16);
  const auto sustained = estimate_gemm(h100, {8192, 8192, 8192}, Dtype::bf16, Load::sustained);
  const double launch = h100.kernel_launch_overhead.value();
  // Expectation: compute time / 0.88; the launch overhead is not a rate.
  CHECK(sustained.time.value() - launch == Approx((burst.time.value() - launch) / 0.88).epsilon(1e-9));
  // Reading weights is bound by HBM, whose clock does not throttle: a GEMV is unchanged.
  CHECK(estimate_gemm(h100, {1, 8192, 8192}, Dtype::bf16, Load::sustained).time.value() ==
        Approx(estimate_gemm(h100, {1, 8192, 8192}, Dtype::bf16).time.value()).epsilon(1e-12));
  // The default is the burst a microbenchmark measures, and profiles without a figure do not derate.
  CHECK(estimate_gemm(h100, {8192, 8192, 8192}, Dtype::bf16).time.value() == burst.time.value());
  const HardwareProfile l40s = shipped("l40s");
  CHECK(l40s.gemm.sustained_fraction == 1.0);
  CHECK(estimate_gemm(l40s, {4096, 4096, 4096}, Dtype::bf16, Load::sustained).time.value() ==
        estimate_gemm(l40s, {4096, 4096, 4096}, Dtype::bf16).time.value());
}

TEST_CASE("GEMM model rejects what it cannot estimate", "[hardware][gemm]") {
  const HardwareProfile a100 = shipped("a100-sxm4-80gb");
  CHECK_THROWS_WITH(estimate_gemm(a100, {1024, 1024, 1024}, Dtype::fp8), Contains("has no fp8 peak"));
  CHECK_THROWS_WITH(estimate_gemm(a100, {0, 1024, 1024}, Dtype::bf16), Contains("must be positive"));
}

TEST_CASE("fitting the GEMM ceiling recovers it from a measurement", "[hardware][gemm]") {
  HardwareProfile h100 = shipped("h100-sxm5-80gb");
  h100.gemm.max_efficiency[Dtype::bf16] = 0.8;
  for (GemmShape s : {GemmShape{2048, 2048, 13312}, GemmShape{1536, 1408, 4096}, GemmShape{8192, 1024, 512}}) {
    const auto e = estimate_gemm(h100, s, Dtype::bf16);
    // Expectation: fit(estimate(ceiling)) = ceiling, whatever the shape's quantisation.
    CHECK(fit_max_efficiency(h100, s, Dtype::bf16, e.achieved) == Approx(0.8).epsilon(1e-9));
  }
  // A GEMV (1 x 8192 x 8192, 134 MB of weights) at 5 TFLOP/s takes 27 us, less than reading its
  // weights at 0.9 x 3.35 TB/s (44 us): no compute ceiling explains it. A rate above peak needs one > 1.
  CHECK_THROWS_WITH(fit_max_efficiency(h100, {1, 8192, 8192}, Dtype::bf16, FlopsPerSec(5e12)), Contains("memory-bound"));
  CHECK_THROWS_WITH(fit_max_efficiency(h100, {8192, 8192, 8192}, Dtype::bf16, FlopsPerSec(1.2e15)), Contains("> 1"));
}

TEST_CASE("fused attention: the causal tail makes a kernel with less work slower per FLOP", "[hardware][attention]") {
  HardwareProfile hw = shipped("h100-sxm5-80gb");
  REQUIRE(hw.attention.tail_blocks > 0);
  // One 4k sequence, head dim 128: 8 heads (a TP rank of Llama 2 70B at TP 8) against 32.
  const double row = 2.0 * 128 * 4096 * (128 + 128);
  const auto flops = [](double heads) { return 2.0 * 4096 * 2048 * heads * (128 + 128); };
  const double few = attention_s(hw, flops(8), row, Dtype::bf16, false);
  const double many = attention_s(hw, flops(32), row, Dtype::bf16, false);
  CHECK(many / few < 3.5);  // four times the work, well under four times the time
  CHECK(many / few > 2.0);
  // The backward pass has its own, lower rate.
  CHECK(attention_s(hw, 2.5 * flops(8), 2.5 * row, Dtype::bf16, true) > 2.5 * few);
  // Without a tail the time is the FLOPs at the rate: proportional to the work.
  hw.attention.tail_blocks = 0;
  const double launch = hw.kernel_launch_overhead.value();
  CHECK((attention_s(hw, flops(32), row, Dtype::bf16, false) - launch) /
            (attention_s(hw, flops(8), row, Dtype::bf16, false) - launch) ==
        Approx(4.0));
  // Sustained load runs at the sustained fraction of the burst rate.
  CHECK(attention_s(hw, flops(8), row, Dtype::bf16, false, Load::sustained) - launch ==
        Approx((attention_s(hw, flops(8), row, Dtype::bf16, false) - launch) / hw.gemm.sustained_fraction));
  hw.attention.forward_efficiency = 0;
  CHECK_THROWS_WITH(attention_s(hw, flops(8), row, Dtype::bf16, false), Contains("no measured attention efficiency"));
}
