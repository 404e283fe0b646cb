// Calibration: the measurement format, the fits (recovering known parameters from synthetic data),
// the CPU probe end to end, and the profile a calibration writes.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <tuple>

#include "catch.hpp"

#include "clustersim/calibrate/calibration.hpp"
#include "clustersim/calibrate/cpu_probe.hpp"
#include "clustersim/calibrate/gemm_fit.hpp"
#include "clustersim/calibrate/link_fit.hpp"
#include "clustersim/calibrate/measurements.hpp"
#include "clustersim/calibrate/nccl_tests.hpp"
#include "clustersim/common/input_error.hpp"
#include "clustersim/common/parts.hpp"
#include "clustersim/hardware/attention_model.hpp"
#include "clustersim/hardware/gemm_model.hpp"
#include "clustersim/models/collective_model.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::calibrate;
using hardware::Dtype;
using hardware::HardwareProfile;

namespace {

using test::shipped;

// The probe's GEMM sweep shape: powers of two from 256 to 16384 on each axis, plus uneven shapes.
std::vector<GemmSample> synthetic_gemms(const HardwareProfile& truth, const std::vector<Dtype>& dtypes) {
  std::vector<GemmSample> out;
  for (Dtype d : dtypes) {
    for (std::int64_t m = 64; m <= 16384; m *= 4) {
      for (std::int64_t n = 64; n <= 16384; n *= 4) {
        for (std::int64_t k = 64; k <= 16384; k *= 4) {
          GemmSample s{d, m, n, k, 0};
          s.seconds = model_seconds(truth, s);
          out.push_back(s);
        }
      }
    }
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{8192, 3072, 4096}, {8192, 4096, 14336}, {4096, 1280, 5120}, {1000, 3000, 700}}) {
      GemmSample s{d, m, n, k, 0};
      s.seconds = model_seconds(truth, s);
      out.push_back(s);
    }
  }
  return out;
}

// A fitted collective as calibration would write it.
hardware::CalibratedCollective fitted(const std::string& op, const std::string& link, int ranks, int nodes, double busbw) {
  hardware::CalibratedCollective c;
  c.op = op;
  c.link = link;
  c.ranks = ranks;
  c.nodes = nodes;
  c.latency = Seconds(10e-6);
  c.busbw = BytesPerSec(busbw);
  return c;
}

// The bus bandwidth of a collective over every GPU of the topology whose GPU profile carries `fit`.
double busbw_with_fit(const std::string& topology, const hardware::CalibratedCollective& fit, models::CollectiveOp op, double bytes,
                      std::optional<models::Algorithm> algorithm) {
  auto topo = test::topology_from_text(topology);
  HardwareProfile hw = *topo.gpu;
  hw.collectives.push_back(fit);
  topo.gpu = std::make_shared<const HardwareProfile>(hw);
  const models::CollectiveModel model(topo);
  models::Collective c;
  c.op = op;
  c.ranks = topo.gpus();
  c.bytes = Bytes(bytes);
  c.algorithm = algorithm;
  return model.simulate(c).busbw.value();
}

}  // namespace

TEST_CASE("calibrate: the GEMM fit recovers known parameters from synthetic data within 1%") {
  // Data made by the model itself with parameters unlike the shipped ones; the fit starts from the
  // shipped H100 profile and must land on the truth (the model is exact for this data).
  const HardwareProfile start = shipped("h100-sxm5-80gb");
  HardwareProfile truth = start;
  truth.gemm.max_efficiency[Dtype::bf16] = 0.78;
  truth.gemm.max_efficiency[Dtype::fp8] = 0.66;
  truth.gemm.tile_ridge_intensity = 75;
  truth.gemm.k_half = 300;
  truth.gemm.k_half_by_dtype.clear();  // the shipped profile's per-dtype k_half would override the shared one
  truth.gemm.memory_efficiency = 0.8;
  truth.kernel_launch_overhead = Seconds(6e-6);
  const auto samples = synthetic_gemms(truth, {Dtype::bf16, Dtype::fp8});
  GemmFitOptions opt;
  opt.residual_table = false;
  const GemmFit fit = fit_gemm(start, samples, opt);
  CHECK(fit.params.max_efficiency.at(Dtype::bf16) == Approx(0.78).epsilon(0.01));
  CHECK(fit.params.max_efficiency.at(Dtype::fp8) == Approx(0.66).epsilon(0.01));
  for (Dtype d : {Dtype::bf16, Dtype::fp8}) {
    CHECK(fit.params.ridge_for(d) == Approx(75).epsilon(0.01));
    CHECK(fit.params.k_half_for(d) == Approx(300).epsilon(0.01));
  }
  // A dtype without samples keeps the shared shape terms of the start.
  CHECK(fit.params.ridge_for(Dtype::fp16) == start.gemm.ridge_for(Dtype::fp16));
  CHECK(fit.params.k_half_for(Dtype::fp16) == start.gemm.k_half_for(Dtype::fp16));
  CHECK(fit.params.memory_efficiency == Approx(0.8).epsilon(0.01));
  CHECK(fit.kernel_launch_overhead.value() == Approx(6e-6).epsilon(0.01));
  // Dtypes without samples keep the start's efficiency.
  CHECK(fit.params.max_efficiency.at(Dtype::fp16) == start.gemm.max_efficiency.at(Dtype::fp16));
  CHECK(fit.model_overall.worst_relative < 1e-4);
  CHECK(fit.model_overall.r2 > 0.9999);
}

TEST_CASE("calibrate: the residual table takes up what the model cannot express") {
  // Truth: the model times a bump of 1.3 on every shape with K = 1024 (a kernel choice the model
  // does not know). After the parametric fit the table holds that factor at K = 2^10, so the
  // fitted profile reproduces every sample.
  const HardwareProfile start = shipped("h100-sxm5-80gb");
  auto samples = synthetic_gemms(start, {Dtype::bf16});
  // Grid shapes only: an uneven shape between grid nodes would share them with its neighbours.
  std::erase_if(samples, [](const GemmSample& s) { return (s.m & (s.m - 1)) || (s.n & (s.n - 1)) || (s.k & (s.k - 1)); });
  for (auto& s : samples) {
    if (s.k == 1024) s.seconds *= 1.3;
  }
  const GemmFit fit = fit_gemm(start, samples);
  CHECK(fit.model_overall.worst_relative > 0.05);   // the parametric model alone misses the bump
  const auto& t = fit.params.residuals.at(Dtype::bf16);
  HardwareProfile fitted = start;
  fitted.gemm = fit.params;
  fitted.kernel_launch_overhead = fit.kernel_launch_overhead;
  double worst_power_of_two = 0;
  for (const auto& s : samples) {
    worst_power_of_two = std::max(worst_power_of_two, std::abs(model_seconds(fitted, s) / s.seconds - 1));
  }
  CHECK(worst_power_of_two < 0.01);  // grid nodes are reproduced (ridge pull aside)
  CHECK(t.factor(4096, 4096, 1024) > 1.2);
  CHECK(fit.table_overall.worst_relative < fit.model_overall.worst_relative);
}

TEST_CASE("calibrate: a residual table interpolates in log2 and holds its edge values") {
  hardware::GemmResidualTable t;
  t.m_first = t.n_first = t.k_first = 10;
  t.m_last = t.n_last = 10;
  t.k_last = 11;
  t.factors = {1.0, 4.0};                         // K = 1024 -> 1, K = 2048 -> 4
  CHECK(t.factor(1024, 1024, 1024) == Approx(1.0));
  CHECK(t.factor(1024, 1024, 2048) == Approx(4.0));
  CHECK(t.factor(1024, 1024, 1448.15) == Approx(2.0).epsilon(1e-4));  // halfway in log2: sqrt(1 x 4)
  CHECK(t.factor(1024, 1024, 1 << 20) == Approx(4.0));                 // beyond the grid: the edge
  CHECK(t.factor(64, 64, 16) == Approx(1.0));
}

TEST_CASE("calibrate: the link fit recovers latency and bus bandwidth within 1%") {
  // t = 12 us + S x 2(n-1)/n / 180 GB/s for an 8-rank all-reduce, 8 B to 8 GiB.
  std::vector<CollectiveSample> samples;
  for (double bytes = 8; bytes <= 8.0 * (1ull << 30); bytes *= 2) {
    const double t = 12e-6 + bytes * 2.0 * 7 / 8 / 180e9;
    samples.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, bytes, t});
  }
  const auto fits = fit_collectives(samples);
  REQUIRE(fits.size() == 1);
  CHECK(fits[0].result.latency.value() == Approx(12e-6).epsilon(0.01));
  CHECK(fits[0].result.busbw.value() == Approx(180e9).epsilon(0.01));
  // The line is exact: no size needs a correction, and the table keeps only the largest size (the
  // link's measured bandwidth is read there), at 1.
  REQUIRE(fits[0].result.efficiency.size() == 1);
  CHECK(fits[0].result.efficiency[0].first == 8.0 * (1ull << 30));
  CHECK(fits[0].result.efficiency[0].second == Approx(1.0).epsilon(1e-6));
  CHECK(fits[0].samples == 31);
}

TEST_CASE("calibrate: a link's calibrated bandwidth is what its largest size measured, not the line's slope beside a large latency") {
  // A send/recv sweep with a 500 us latency and 240 GB/s beyond it: the 1 GiB row measures
  // 1 GiB / (500 us + 1 GiB / 240 GB/s) = 215 GB/s, which the link gets (a probe's A100 sweep had
  // given its link 217 GB/s against the 195 its 1 GiB row measured: the latency counted as bandwidth).
  std::vector<CollectiveSample> samples;
  for (double bytes = 1024; bytes <= double(1 << 30); bytes *= 2) {
    samples.push_back({models::CollectiveOp::send_recv, LinkClass::nvlink, 2, 1, bytes, 500e-6 + bytes / 240e9});
  }
  hardware::HardwareProfile hw;
  hw.collectives.push_back(fit_collectives(samples).at(0).result);
  const double largest = double(1 << 30);
  CHECK(models::calibrated_busbw(hw, "nvlink")->value() == Approx(largest / (500e-6 + largest / 240e9)).epsilon(1e-3));
}

TEST_CASE("calibrate: the size table corrects where the curve bends") {
  // Between 64 KiB and 4 MiB the measured time is 1.5 x the line (a protocol switch); the fitted
  // collective reproduces every measured size through its efficiency table.
  std::vector<CollectiveSample> samples;
  for (double bytes = 1024; bytes <= double(1 << 30); bytes *= 2) {
    double t = 20e-6 + bytes / 50e9;
    if (bytes >= 65536 && bytes <= 4194304) t *= 1.5;
    samples.push_back({models::CollectiveOp::send_recv, LinkClass::network, 2, 2, bytes, t});
  }
  const auto fits = fit_collectives(samples);
  REQUIRE(fits.size() == 1);
  CHECK_FALSE(fits[0].result.efficiency.empty());
  CHECK(fits[0].line_worst_relative > 0.1);
  for (const auto& s : samples) CHECK(predict_seconds(fits[0].result, s.bytes) == Approx(s.seconds).epsilon(1e-6));
}

TEST_CASE("calibrate: the weighted fit needs no negative latency") {
  // Pure bandwidth data: alpha = 0 exactly (the fit never goes negative).
  const Affine f = fit_affine({1, 2, 4, 8}, {1e-9, 2e-9, 4e-9, 8e-9});
  CHECK(f.alpha >= 0);
  CHECK(f.beta == Approx(1e-9));
  const Affine one = fit_affine({100}, {2e-6});  // a single sample: through the origin
  CHECK(one.alpha == 0);
  CHECK(one.beta == Approx(2e-8));
}

TEST_CASE("calibrate: measurements round-trip through JSON, and bad records name file and field") {
  Measurements m;
  m.meta["device"] = "test";
  m.gemm.push_back({Dtype::bf16, 4096, 2048, 1024, 1.25e-4});
  m.memory.push_back({MemoryKind::d2d, 1 << 30, 4.1e-4});
  m.collectives.push_back({models::CollectiveOp::all_gather, LinkClass::nvlink, 8, 1, 1 << 20, 2.5e-5});
  const Measurements back = from_json(to_json(m), "m.json");
  REQUIRE(back.gemm.size() == 1);
  CHECK(back.gemm[0].m == 4096);
  CHECK(back.gemm[0].seconds == 1.25e-4);
  CHECK(back.memory[0].kind == MemoryKind::d2d);
  CHECK(back.collectives[0].op == models::CollectiveOp::all_gather);
  CHECK(back.collectives[0].busbw() == Approx((1 << 20) / 2.5e-5 * 7 / 8));
  CHECK(back.meta.at("device") == "test");

  const auto error = [](const std::string& text) { return test::input_error([&] { (void)from_json(text, "bad.json"); }); };
  CHECK_THAT(error("{\"format\": \"clustersim-measurements/1\", \"gemm\": [{\"dtype\": \"bf17\", \"m\": 1, \"n\": 1, \"k\": 1, \"seconds\": 1}]}"),
             Catch::Contains("bad.json") && Catch::Contains("gemm[0].dtype") && Catch::Contains("'bf17'"));
  CHECK_THAT(error("{\"format\": \"clustersim-measurements/1\", \"memory\": [{\"kind\": \"d2d\", \"bytes\": 0, \"seconds\": 1}]}"),
             Catch::Contains("memory[0].bytes") && Catch::Contains("a positive number"));
  CHECK_THAT(error("{\"format\": \"clustersim-measurements/1\", \"gemm\": [{\"dtype\": \"bf16\", \"m\": 1, \"n\": 1, \"k\": 1, \"secs\": 1}]}"),
             Catch::Contains("gemm[0].secs") && Catch::Contains("unknown field"));
  // Ranks that do not divide over the nodes, and NVLink across nodes, as nccl-tests output is refused.
  const auto collective = [](const std::string& link, int ranks, int nodes) {
    return fmt::format("{{\"format\": \"clustersim-measurements/1\", \"collectives\": [{{\"op\": \"all_reduce\", \"link\": \"{}\", "
                       "\"ranks\": {}, \"nodes\": {}, \"bytes\": 1048576, \"seconds\": 2.2e-5}}]}}",
                       link, ranks, nodes);
  };
  CHECK_THAT(error(collective("network", 8, 3)), Catch::Contains("collectives[0].nodes") && Catch::Contains("divides the 8 ranks evenly") && Catch::Contains("found 3"));
  CHECK_THAT(error(collective("nvlink", 8, 2)), Catch::Contains("collectives[0].nodes") && Catch::Contains("1 for link nvlink") && Catch::Contains("found 2"));
  CHECK(from_json(collective("network", 8, 2), "ok.json").collectives[0].nodes == 2);
  CHECK_THAT(error("{\"format\": \"other/2\"}"), Catch::Contains("format") && Catch::Contains("clustersim-measurements/1"));
  CHECK_THAT(error("{\"format\": "), Catch::Contains("bad.json") && Catch::Contains("not valid JSON"));
}

TEST_CASE("calibrate: the CPU probe measures this machine and its fit makes a profile that loads back") {
  // End to end on the CI machine: real measurements, a real fit, a profile file that the hardware
  // loader reads back with the same parameters and that reproduces the fitted times.
  const Measurements m = probe_cpu({.quick = true});
  REQUIRE(m.gemm.size() > 50);
  REQUIRE_FALSE(m.memory.empty());
  REQUIRE_FALSE(m.collectives.empty());
  for (const auto& g : m.gemm) CHECK(g.seconds > 0);
  const HardwareProfile base = cpu_base_profile(m);
  CHECK(base.peak(Dtype::fp32).value() >= cpu_base_profile().peak(Dtype::fp32).value());
  // The peak rises to the fastest GEMM measured and no further (a probe's had risen 6x past it,
  // measured against the GPU-shaped model's rate at a ceiling of 1).
  double fastest = 0;
  for (const auto& g : m.gemm) fastest = std::max(fastest, g.flops() / g.seconds);
  CHECK(base.peak(Dtype::fp32).value() == Approx(std::max(fastest, cpu_base_profile().peak(Dtype::fp32).value())).epsilon(1e-9));
  const CalibrationResult r = calibrate::calibrate(base, m, {});
  REQUIRE(r.gemm);
  // A GEMM can never beat the vector peak the profile starts from.
  for (const auto& g : m.gemm) CHECK(g.flops() / g.seconds <= base.peak(Dtype::fp32).value() * 1.0001);
  CHECK(r.profile.memory_bandwidth.value() > 1e8);  // a real machine copies more than 100 MB/s
  REQUIRE(r.profile.collectives.size() == 1);
  CHECK(r.profile.collectives[0].op == "send_recv");
  CHECK(r.profile.collectives[0].link == "process");

  test::TempDir dir;
  const auto file = dir.path() / "profile.yaml";
  { std::ofstream(file) << profile_yaml(r); }
  IncludeStack includes;
  const HardwareProfile back = hardware::load_hardware_profile(file, includes);
  CHECK(back.name == r.profile.name);
  CHECK(back.gemm.max_efficiency.at(Dtype::fp32) == Approx(r.profile.gemm.max_efficiency.at(Dtype::fp32)).epsilon(1e-8));
  CHECK(back.gemm.k_half_for(Dtype::fp32) == Approx(r.profile.gemm.k_half_for(Dtype::fp32)).epsilon(1e-8));
  CHECK(back.gemm.ridge_for(Dtype::fp32) == Approx(r.profile.gemm.ridge_for(Dtype::fp32)).epsilon(1e-8));
  CHECK(back.memory_bandwidth.value() == Approx(r.profile.memory_bandwidth.value()).epsilon(1e-8));
  REQUIRE(back.gemm.residuals.count(Dtype::fp32));
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].busbw.value() == Approx(r.profile.collectives[0].busbw.value()).epsilon(1e-8));
  CHECK(back.calibration.count("sources") == 0);  // none were named
  CHECK(back.calibration.at("samples").find("GEMM") != std::string::npos);
  // The profile read back gives the fitted model's times (to the 5 digits the table keeps).
  for (const auto& g : m.gemm) CHECK(model_seconds(back, g) == Approx(model_seconds(r.profile, g)).epsilon(1e-4));
}

TEST_CASE("calibrate: a calibrated NVLink bandwidth becomes the capacity collectives see") {
  // A DGX H100 node with the shipped profile runs an 8-GPU all-gather at NCCL's NVLink figure; with
  // a fitted all_gather of 300 GB/s bus bandwidth in the profile, the same collective runs at that.
  const auto uncalibrated = test::topology_from_text("topology: {name: one, node: dgx-h100, nodes: 1}\n");
  auto calibrated = uncalibrated;
  HardwareProfile hw = *uncalibrated.gpu;
  hw.collectives.push_back(fitted("all_gather", "nvlink", 8, 1, 300e9));
  calibrated.gpu = std::make_shared<const HardwareProfile>(hw);
  const auto gpus = uncalibrated.gpus();
  models::Collective ag;
  ag.op = models::CollectiveOp::all_gather;
  ag.ranks = {gpus.begin(), gpus.begin() + 8};
  ag.bytes = Bytes(4.0 * (1ull << 30));
  ag.algorithm = models::Algorithm::ring;
  const double shipped_bw = models::CollectiveModel(uncalibrated).simulate(ag).busbw.value();
  const double fitted_bw = models::CollectiveModel(calibrated).simulate(ag).busbw.value();
  CHECK(shipped_bw > 350e9);                           // 18 links x 20.6 GB/s (NCCL's SM90 figure)
  CHECK(fitted_bw == Approx(300e9).epsilon(0.02));     // large message: latency is negligible
}

TEST_CASE("calibrate: fitting refuses what it cannot use") {
  const HardwareProfile cpu = cpu_base_profile();
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(cpu, Measurements{}, {}); }), Catch::Contains("empty"));
  Measurements m;
  m.gemm.push_back({Dtype::bf16, 256, 256, 256, 1e-5});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(cpu, m, {}); }), Catch::Contains("bf16") && Catch::Contains("no bf16 peak"));
}

TEST_CASE("calibrate: small GEMMs, none memory-bound for long, leave memory_efficiency as the base has it, and say so") {
  // A probe's eight bf16 GEMMs of at most 512 (each compute-bound or over within a few launches)
  // had moved memory_efficiency from 0.81 to 0.40 with no note.
  const HardwareProfile h200 = shipped("h200-sxm-141gb");
  Measurements m;
  for (int n : {256, 384, 512}) {
    for (int k : {256, 512}) {
      const double t = hardware::estimate_gemm(h200, {n, n, k}, Dtype::bf16).time.value();
      m.gemm.push_back({Dtype::bf16, n, n, k, 1.6 * t});
    }
  }
  const CalibrationResult r = calibrate::calibrate(h200, m, {});
  CHECK(r.profile.gemm.memory_efficiency == h200.gemm.memory_efficiency);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("memory_efficiency kept from") != std::string::npos; }));
}

TEST_CASE("calibrate: measurements of one kind of device are not fitted onto another") {
  // Expectation: the CPU probe's measurements onto a GPU profile, a GPU's onto a CPU profile, and a
  // 132-SM GPU's onto a 108-SM profile are each refused, naming both; the same GPU's profile fits.
  Measurements cpu;
  cpu.meta = {{"source", "clustersim calibrate --device cpu"}, {"device", "Some CPU"}};
  cpu.gemm.push_back({Dtype::fp32, 256, 256, 256, 1e-3});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(shipped("h200-sxm-141gb"), cpu, {}); }),
             Catch::Contains("the measurements are of a CPU (Some CPU, from calibrate --device cpu), but --base H200-SXM-141GB is a hopper GPU profile"));
  Measurements gpu;
  gpu.meta = {{"source", "clustersim-probe-cuda"}, {"device", "NVIDIA H200"}, {"sm_count", "132"}};
  gpu.gemm.push_back({Dtype::bf16, 4096, 4096, 4096, 2e-4});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(cpu_base_profile(), gpu, {}); }), Catch::Contains("is a CPU profile"));
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(shipped("a100-sxm4-80gb"), gpu, {}); }),
             Catch::Contains("the measurements are of an H200 ('NVIDIA H200'), but --base A100-SXM4-80GB is an A100 profile"));
  // The same SM count, another GPU model (H100 and H200 are both 132-SM GH100s): refused by name.
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(shipped("h100-sxm5-80gb"), gpu, {}); }),
             Catch::Contains("are of an H200 ('NVIDIA H200'), but --base H100-SXM5-80GB is an H100 profile"));
  // A device whose name gives no model is held to its SM count.
  Measurements unnamed = gpu;
  unnamed.meta["device"] = "GPU 0";
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(shipped("a100-sxm4-80gb"), unnamed, {}); }),
             Catch::Contains("a GPU with 132 SMs (GPU 0), but --base A100-SXM4-80GB has 108"));
  CHECK_NOTHROW(calibrate::calibrate(shipped("h200-sxm-141gb"), gpu, {}));
  // Two devices' measurements are not merged into one fit.
  Measurements other = gpu;
  other.meta["device"] = "NVIDIA H100 80GB HBM3";
  Measurements both = gpu;
  CHECK_THAT(test::input_error([&] { both.append(other); }), Catch::Contains("of two devices (meta.device 'NVIDIA H200' and 'NVIDIA H100 80GB HBM3')"));
  // One GPU worded two ways (a CUDA probe's name, another tool's with its SM count and power added)
  // is one device: by the model it names.
  Measurements cuda;
  cuda.meta["device"] = "NVIDIA H200";
  Measurements annotated;
  annotated.meta["device"] = "NVIDIA H200 (sm 90; 700 W SXM)";
  CHECK_NOTHROW(cuda.append(annotated));
  CHECK(calibrate::gpu_model_of("NVIDIA H100 80GB HBM3") == "H100");
  CHECK(calibrate::gpu_model_of("a CPU") == "");
}

TEST_CASE("calibrate: a GEMM time far beyond the model is refused, and a dtype of too few shapes fits its ceiling alone") {
  // Expectations: a time 100 times what the base profile predicts (1e300 s, or ms written as s) is
  // refused naming the sample; one or two shapes of a dtype cannot separate its three terms, so its
  // tile ridge and k_half stay the base's and a note says so.
  const HardwareProfile h200 = shipped("h200-sxm-141gb");
  Measurements m;
  m.meta = {{"device", "NVIDIA H200"}, {"sm_count", "132"}};
  m.gemm.push_back({Dtype::bf16, 4096, 4096, 4096, 2e-4});
  m.gemm.push_back({Dtype::bf16, 256, 256, 2048, 1e300});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h200, m, {}); }), Catch::Contains("GEMM sample 1 (bf16 256x256x2048) took 1e+300 s"));
  // The line is at 100 times the prediction: 150 times is refused, 50 times (a slow run) is fitted.
  const double predicted = hardware::estimate_gemm(h200, {256, 256, 2048}, Dtype::bf16).time.value();
  m.gemm.back().seconds = 150 * predicted;
  CHECK_THROWS_AS(calibrate::calibrate(h200, m, {}), InputError);
  m.gemm.back().seconds = 50 * predicted;
  CHECK_NOTHROW(calibrate::calibrate(h200, m, {}));
  m.gemm.pop_back();
  m.gemm.push_back({Dtype::bf16, 8192, 8192, 8192, 1.5e-3});
  const CalibrationResult r = calibrate::calibrate(h200, m, {});
  CHECK(r.profile.gemm.k_half_for(Dtype::bf16) == Approx(h200.gemm.k_half_for(Dtype::bf16)));
  CHECK(r.profile.gemm.ridge_for(Dtype::bf16) == Approx(h200.gemm.ridge_for(Dtype::bf16)));
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("bf16: 2 shapes measured, fewer than the 3") != std::string::npos; }));
}

TEST_CASE("calibrate: a fit of recorded H100 cuBLAS measurements beats the shipped profile on them") {
  // Nine real cuBLAS GEMMs on an H100 SXM5 (tests/data/calibrate/README.md): fp32 SGEMM, TF32 and
  // fp16 at 2048^3, 4096^3 and 8192^3. Least squares must do at least as well as the datasheet
  // profile on the points it was fitted to, and the residual table must reproduce them.
  const Measurements m = load_measurements(std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/h100-cublas-waynehacking8.json");
  REQUIRE(m.gemm.size() == 9);
  const HardwareProfile shipped_h100 = shipped("h100-sxm5-80gb");
  const CalibrationResult r = calibrate::calibrate(shipped_h100, m, {});
  REQUIRE(r.gemm);
  const FitQuality before = quality_of(shipped_h100, m.gemm);
  CHECK(r.gemm->model_overall.mean_relative < before.mean_relative);
  CHECK(r.gemm->table_overall.worst_relative < 1e-3);
  // fp16 at 8192^3 ran at 749.9 TFLOP/s = 75.8% of the 989.4 dense peak: the fitted ceiling lies
  // above that (quantisation and the K factor take their share) and at most 1.
  const double fp16 = r.profile.gemm.max_efficiency.at(Dtype::fp16);
  CHECK(fp16 > 0.758);
  CHECK(fp16 <= 1.0);
  // Peaks and dtypes without samples come from the base profile.
  CHECK(r.profile.peak(Dtype::bf16) == shipped_h100.peak(Dtype::bf16));
  CHECK(r.profile.gemm.max_efficiency.at(Dtype::fp8) == shipped_h100.gemm.max_efficiency.at(Dtype::fp8));
  // Shape terms are fitted per dtype: a sweep of fp32, tf32 and fp16 leaves bf16 GEMMs as they were.
  for (std::int64_t n : {1024, 4096, 16384}) {
    const GemmSample bf16{Dtype::bf16, 8192, n, 4096, 1};
    CHECK(hardware::estimate_gemm(r.profile, {bf16.m, bf16.n, bf16.k}, Dtype::bf16).time.value() ==
          Approx(hardware::estimate_gemm(shipped_h100, {bf16.m, bf16.n, bf16.k}, Dtype::bf16).time.value()).epsilon(0.01));
  }
}

TEST_CASE("calibrate: fits of real nccl-tests runs reproduce every measured size") {
  // tests/data/nccl-tests/alltoall-sendrecv-2x4-h100.log: alltoall and sendrecv across 2 nodes of
  // 4 H100 (tests/data/nccl-tests/README.md). The line plus the size table gives back each measured
  // time within 1% (rows are kept only where the line misses by more), and the fitted bus bandwidth is that of the largest messages, where latency is negligible.
  const Measurements m = read_nccl_tests(std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/nccl-tests/alltoall-sendrecv-2x4-h100.log");
  const auto fits = fit_collectives(m.collectives);
  REQUIRE(fits.size() == 2);
  for (const auto& f : fits) {
    CHECK(f.result.link == "network");
    CHECK(f.result.nodes == 2);
    double largest = 0, largest_busbw = 0;
    for (const auto& s : m.collectives) {
      if (std::string(models::to_string(s.op)) != f.result.op) continue;
      CHECK(predict_seconds(f.result, s.bytes) == Approx(s.seconds).epsilon(0.0101));
      if (s.bytes > largest) {
        largest = s.bytes;
        largest_busbw = s.busbw();
      }
    }
    CHECK(f.result.busbw.value() == Approx(largest_busbw).epsilon(0.1));
    CHECK(f.result.latency.value() > 0);
  }
}

TEST_CASE("calibrate: an NVLS fit is kept apart and never taken as the link's bandwidth") {
  // The same all-reduce measured twice: NCCL's ring (busbw 360 GB/s) and forced NVLS (480 GB/s,
  // above the wire because the switch reduces). They fit separately; the link capacity comes from
  // the ring one, and the algorithm survives the JSON round trip.
  Measurements m;
  for (double bytes = 1 << 20; bytes <= double(1ull << 32); bytes *= 4) {
    m.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, bytes, 15e-6 + bytes * 1.75 / 360e9});
    m.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, bytes, 15e-6 + bytes * 1.75 / 480e9, "nvls"});
  }
  const Measurements back = from_json(to_json(m), "m.json");
  CHECK(back.collectives[1].algorithm == "nvls");
  const CalibrationResult r = calibrate::calibrate(shipped("h200-sxm-141gb"), back, {});
  REQUIRE(r.profile.collectives.size() == 2);
  const auto bw = models::calibrated_busbw(r.profile, "nvlink");
  REQUIRE(bw);
  CHECK(bw->value() == Approx(360e9).epsilon(0.01));
  CHECK_FALSE(models::calibrated_busbw(r.profile, "network"));
}

TEST_CASE("calibrate: a GEMM shape measured twice is fitted once at its fastest and a stalled sample is named by file and record") {
  // Synthetic bf16 data of known constants, then one shape given again 10% slower: the fit must be
  // the one without it (a probe's duplicate moved fp32's k_half from 3040 to 3367), with a note.
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  Measurements once;
  once.gemm = synthetic_gemms(h100, {Dtype::bf16});
  Measurements twice = once;
  GemmSample again = twice.gemm[3];
  again.seconds *= 1.1;
  twice.gemm.push_back(again);
  const auto a = calibrate::calibrate(h100, once, {});
  const auto b = calibrate::calibrate(h100, twice, {});
  CHECK(b.profile.gemm.max_efficiency.at(Dtype::bf16) == a.profile.gemm.max_efficiency.at(Dtype::bf16));
  CHECK(b.profile.gemm.k_half_for(Dtype::bf16) == a.profile.gemm.k_half_for(Dtype::bf16));
  CHECK(std::any_of(b.notes.begin(), b.notes.end(), [](const std::string& n) { return n.find("1 GEMM sample repeated a dtype and shape") != std::string::npos; }));
  // A stalled sample read from a file is named by the file and its record, not an index over all files.
  const test::TempDir dir;
  std::ofstream(dir.path() / "b.json") << R"({"format": "clustersim-measurements/1", "gemm": [
    {"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "seconds": 0.0002},
    {"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192, "seconds": 5.0}]})";
  const Measurements file = load_measurements(dir.path() / "b.json");
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h100, file, {}); }), Catch::Contains("calibrate: b.json gemm[1] (bf16 8192x8192x8192) took 5 s"));
}

TEST_CASE("calibrate: a fit faster than the GPU's links can carry is refused") {
  // Expectation: an H100's NVLink carries 450 GB/s per direction, so an NVLink all-reduce may fit up
  // to twice that (NVLS reduces in the switch: 480 GB/s is a real H100 figure) but not 1 TB/s; its
  // PCIe Gen5 x16 link carries 64 GB/s raw, so host copies may reach NVLink-C2C rates at most.
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  const auto sweep = [](double busbw, double latency = 10e-6) {
    Measurements m;
    for (double bytes = 1 << 20; bytes <= 1 << 30; bytes *= 4) m.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, bytes, latency + bytes * 1.75 / busbw});
    return m;
  };
  CHECK(calibrate::calibrate(h100, sweep(480e9), {}).links.at(0).result.busbw.value() == Approx(480e9).epsilon(1e-3));
  // A sample past the links' bound is refused by itself; a sweep whose latency keeps every sample
  // under it is refused by its fitted line.
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h100, sweep(1e12), {}); }),
             Catch::Contains("all_reduce of 67.11 MB over nvlink (1 x 8 ranks) in 127.4 us is a bus bandwidth of 921.5 GB/s, more than 900 GB/s"));
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h100, sweep(1e12, 300e-6), {}); }),
             Catch::Contains("all_reduce over nvlink (1 x 8 ranks) fits a bus bandwidth of 1 TB/s, more than 900 GB/s"));
  Measurements copies;
  for (double bytes = 1 << 20; bytes <= 1 << 30; bytes *= 4) copies.memory.push_back({MemoryKind::h2d, bytes, 1e-7 + bytes / 1e15});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h100, copies, {}); }),
             Catch::Contains("host-to-device copies fit") && Catch::Contains("more than H100-SXM5-80GB's host link can carry (450 GB/s"));
  // Device copies past 1.5 x the HBM peak are refused as GEMMs past it are (a probe's 1,074 TB/s d2d
  // sweep had only capped memory_efficiency with a note).
  Measurements fast;
  for (double bytes = 1 << 20; bytes <= 1 << 30; bytes *= 4) fast.memory.push_back({MemoryKind::d2d, bytes, 1e-6 + bytes / 10e12});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h100, fast, {}); }),
             Catch::Contains("the device-to-device copies move 20000 GB/s of HBM traffic, 6.0 x the H100-SXM5-80GB's 3.35 TB/s peak"));
}

TEST_CASE("calibrate: a copy sweep that stays latency-bound gives no bandwidth, not a slope of rounding noise") {
  // Two h2d copies, 1 and 2 GiB, both 0.51 ms: a slope of rounding noise had fitted 1.98e19 GB/s,
  // written into a profile that run and validate then refused (above 1 PB/s).
  Measurements flat;
  flat.memory.push_back({MemoryKind::h2d, double(1ull << 30), 5.1e-4});
  flat.memory.push_back({MemoryKind::h2d, double(2ull << 30), 5.1e-4 * (1 + 1e-15)});
  flat.memory.push_back({MemoryKind::h2d, double(3ull << 30), 5.1e-4 * (1 + 2e-15)});
  const auto r = calibrate::calibrate(shipped("h100-sxm5-80gb"), flat, {});
  CHECK(r.copies.empty());
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("h2d copies (3 samples) left out of the profile") != std::string::npos; }));
  CHECK_FALSE(r.profile.host_to_device.has_value());
}

TEST_CASE("calibrate: copies at one size give no memory efficiency, and a size measured twice is fitted once, at its fastest") {
  // A probe's lone 1 MiB d2d copy (latency-bound) had set memory_efficiency to 0.23, the same size
  // twice to 0.04, and a training step +152%.
  const HardwareProfile h200 = shipped("h200-sxm-141gb");
  Measurements one;
  one.memory.push_back({MemoryKind::d2d, double(1 << 20), 1.0e-5});
  one.memory.push_back({MemoryKind::d2d, double(1 << 20), 1.1e-5});
  const auto r = calibrate::calibrate(h200, one, {});
  CHECK(r.copies.empty());
  CHECK(r.profile.gemm.memory_efficiency == h200.gemm.memory_efficiency);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("d2d copies (2 samples) left out of the profile: measured at one size only") != std::string::npos; }));
  // A sweep fits; a size repeated slower does not move it.
  Measurements sweep;
  for (double mib : {64.0, 256.0, 1024.0}) sweep.memory.push_back({MemoryKind::d2d, mib * (1 << 20), 5e-6 + 2 * mib * (1 << 20) / 3.9e12});
  const auto fitted = calibrate::calibrate(h200, sweep, {});
  sweep.memory.push_back({MemoryKind::d2d, 64.0 * (1 << 20), 1e-3});
  const auto repeated = calibrate::calibrate(h200, sweep, {});
  REQUIRE(fitted.copies.size() == 1);
  CHECK(fitted.profile.gemm.memory_efficiency == Approx(3.9e12 / h200.memory_bandwidth.value()).epsilon(1e-6));
  CHECK(repeated.profile.gemm.memory_efficiency == fitted.profile.gemm.memory_efficiency);
}

TEST_CASE("calibrate: a dtype whose GEMMs are all launch-bound keeps its ceiling") {
  // A probe's lone 256^3 bf16 GEMM (3.3 us, 42 ns of arithmetic) had set bf16's ceiling to 1 and
  // made a training step 12% faster; cut to its 256^3 sample inside the full sweep, fp8 had too.
  const HardwareProfile h200 = shipped("h200-sxm-141gb");
  Measurements m;
  m.meta = {{"device", "NVIDIA H200"}, {"sm_count", "132"}};
  m.gemm.push_back({Dtype::bf16, 256, 256, 256, 3.34e-6});
  m.gemm.push_back({Dtype::fp8, 256, 256, 256, 3.40e-6});
  const auto r = calibrate::calibrate(h200, m, {});
  for (Dtype d : {Dtype::bf16, Dtype::fp8}) {
    CHECK(r.profile.gemm.max_efficiency.at(d) == Approx(h200.gemm.max_efficiency.at(d)).epsilon(1e-9));
    CHECK(r.profile.gemm.k_half_for(d) == Approx(h200.gemm.k_half_for(d)).epsilon(1e-9));
  }
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("bf16: no GEMM measured computes long enough to show its ceiling") != std::string::npos; }));
  // With one GEMM long enough (4096^3: 0.17 ms of arithmetic), bf16's ceiling is fitted again.
  m.gemm.push_back({Dtype::bf16, 4096, 4096, 4096, 2.0e-4});
  const auto long_enough = calibrate::calibrate(h200, m, {});
  CHECK(long_enough.profile.gemm.max_efficiency.at(Dtype::bf16) != Approx(h200.gemm.max_efficiency.at(Dtype::bf16)).epsilon(1e-3));
  CHECK(long_enough.profile.gemm.max_efficiency.at(Dtype::fp8) == Approx(h200.gemm.max_efficiency.at(Dtype::fp8)).epsilon(1e-9));
}

TEST_CASE("calibrate: a collective measured at one size only, 1 GiB or more, is fitted through the origin and says so, and a smaller one is left out") {
  // Expectation: one 1 GiB all-reduce in 5 ms; latency 0 and the bus bandwidth of that one size,
  // with a note that a sweep is needed to fit both.
  Measurements m;
  m.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, 1073741824.0, 5e-3});
  const CalibrationResult r = calibrate::calibrate(shipped("h100-sxm5-80gb"), m, {});
  REQUIRE(r.links.size() == 1);
  CHECK(r.links[0].result.latency.value() == 0);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("measured at one size only") != std::string::npos; }));
  CHECK(r.profile.collectives.size() == 1);
  // A probe: one latency-bound 1 MiB all-reduce had become the link's capacity (92 GB/s for NVLink)
  // and slowed a TP 8 step by 20%. Under 1 GiB one size is left out of the profile.
  Measurements small;
  small.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, 1048576.0, 2e-5});
  const CalibrationResult s = calibrate::calibrate(shipped("h100-sxm5-80gb"), small, {});
  CHECK(s.profile.collectives.empty());
  CHECK(std::any_of(s.notes.begin(), s.notes.end(), [](const std::string& n) { return n.find("left out of the profile: measured at one size only (1.049 MB, under 1 GiB)") != std::string::npos; }));
}

TEST_CASE("calibrate: a latency-only sweep gives no bandwidth, and the profile keeps the base's other fits") {
  // An all-gather measured only from 8 B to 4 KiB takes ~20 us at every size: no bandwidth can be
  // read from it, so it stays out of the profile (with a note) and sets no link capacity. A base
  // profile's existing fit of another group survives the new calibration.
  HardwareProfile base = shipped("h100-sxm5-80gb");
  base.collectives.push_back(fitted("all_reduce", "nvlink", 8, 1, 350e9));
  Measurements m;
  for (double bytes = 8; bytes <= 4096; bytes *= 2) m.collectives.push_back({models::CollectiveOp::all_gather, LinkClass::nvlink, 8, 1, bytes, 20e-6});
  const CalibrationResult r = calibrate::calibrate(base, m, {});
  REQUIRE(r.links.size() == 1);
  CHECK_FALSE(r.links[0].bandwidth_bound);
  REQUIRE(r.profile.collectives.size() == 1);
  CHECK(r.profile.collectives[0].op == "all_reduce");
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) { return n.find("latency-bound") != std::string::npos; }));
  CHECK(models::calibrated_busbw(r.profile, "nvlink")->value() == 350e9);
}

TEST_CASE("calibrate: a fabric fit sets each NIC's share of the measured bus bandwidth") {
  // Two DGX H100 nodes (8 NICs each at 400 Gb/s = 50 GB/s). An all_gather across them measured at
  // 160 GB/s bus bandwidth is 8 rings of 20 GB/s: every NIC-to-leaf link gets 20 GB/s.
  auto topo = test::topology_from_text(
      "topology:\n  name: t\n  node: dgx-h100\n  nodes: 2\n  fabric: {kind: rail-optimized, scalable_unit: 32, tiers: [{radix: 64}, {radix: 64}]}\n");
  HardwareProfile hw = *topo.gpu;
  hw.collectives.push_back(fitted("all_gather", "network", 16, 2, 160e9));
  topo.gpu = std::make_shared<const HardwareProfile>(hw);
  const models::CollectiveModel model(topo);
  int nic_links = 0;
  for (auto [e, end] = boost::edges(topo.graph()); e != end; ++e) {
    const auto& l = topo.link(*e);
    if (l.tier != 0) continue;
    ++nic_links;
    CHECK(model.capacities()[l.id] == Approx(20e9));
  }
  CHECK(nic_links > 0);
}

TEST_CASE("calibrate: a fabric fit makes the simulated collective run at the bus bandwidth it was fitted to") {
  // Expectation (docs/calibration.md): the fitted figure is what collectives across nodes measured,
  // protocol losses included. A large all-reduce over the two nodes must then come out at it
  // (within 3%, the latency's share), not below: NCCL's search keeps seeing the NICs' line rate,
  // and only the flows are held to the measured share (searched on 21 GB/s NICs, the speed ladder
  // and the protocol's losses were charged again: 12% below on 2 x 8 A100 at 181 GB/s).
  for (const double measured : {181e9, 140e9}) {
    INFO("fitted at " << measured / 1e9 << " GB/s");
    const double busbw = busbw_with_fit("topology:\n  name: t\n  node: dgx-a100\n  nodes: 2\n  fabric: {kind: fat-tree, tiers: [{radix: 64}, {radix: 64}]}\n",
                                        fitted("all_reduce", "network", 16, 2, measured), models::CollectiveOp::all_reduce, 10e9, std::nullopt);
    CHECK(busbw == Approx(measured).epsilon(0.03));
  }
}

TEST_CASE("calibrate: an NVLink fit makes the simulated collective run at the bus bandwidth it was fitted to") {
  // As across nodes: NCCL's search keeps seeing its own NVLink figure, and only the flows are held
  // to the measured one. Searched on the measured figure, a probe's 8 x H200 all-gather fitted at
  // 360 GB/s came out at 300 (the speed ladder and the protocol's losses charged again), and each
  // step down the ladder cost 60 GB/s.
  for (const double measured : {360e9, 300e9, 200e9}) {
    INFO("fitted at " << measured / 1e9 << " GB/s");
    const double busbw = busbw_with_fit("topology:\n  name: t\n  node: hgx-h200\n  nodes: 1\n  fabric: {kind: none}\n",
                                        fitted("all_gather", "nvlink", 8, 1, measured), models::CollectiveOp::all_gather, 16e9, models::Algorithm::ring);
    CHECK(busbw == Approx(measured).epsilon(0.03));
  }
}

TEST_CASE("calibrate: the shipped Hopper 16-bit GEMM constants are the fit of the published measurements") {
  // tests/data/calibrate/hopper-16bit-gemm-published.json: cuBLAS squares on H100 SXM5, a TileLang K
  // sweep on H800 SXM, cuBLAS bf16 at 8192^3. Hopper's dense fp16 and bf16 tensor peaks are equal, so
  // the fp16 samples count as bf16 and the profiles take one fit for both. Started from the model's
  // old defaults (0.847, k_half 128), least squares must land on the shipped constants.
  const Measurements m = load_measurements(std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/hopper-16bit-gemm-published.json");
  REQUIRE(m.gemm.size() == 11);
  std::vector<GemmSample> samples = m.gemm;
  for (GemmSample& s : samples) {
    REQUIRE((s.dtype == Dtype::fp16 || s.dtype == Dtype::bf16));
    s.dtype = Dtype::bf16;
  }
  HardwareProfile start = shipped("h100-sxm5-80gb");
  start.gemm.max_efficiency[Dtype::bf16] = 0.847;
  start.gemm.k_half_by_dtype[Dtype::bf16] = 128;
  GemmFitOptions opt;
  opt.residual_table = false;
  const GemmFit fit = fit_gemm(start, samples, opt);
  CHECK(fit.model_overall.mean_relative < 0.03);
  CHECK(fit.model_overall.mean_relative < fit.base_overall.mean_relative);
  for (const char* name : {"h100-sxm5-80gb", "h800-sxm5-80gb", "h200-sxm-141gb"}) {
    INFO(name);
    const HardwareProfile hw = shipped(name);
    for (Dtype d : {Dtype::bf16, Dtype::fp16}) {
      CHECK(hw.gemm.max_efficiency.at(d) == Approx(fit.params.max_efficiency.at(Dtype::bf16)).margin(0.001));
      CHECK(hw.gemm.k_half_for(d) == Approx(fit.params.k_half_for(Dtype::bf16)).epsilon(0.01));
      CHECK(hw.gemm.ridge_for(d) == Approx(fit.params.ridge_for(Dtype::bf16)).epsilon(0.01));
    }
  }
}

TEST_CASE("calibrate: the full probe sweep of an H200 fits within a few percent") {
  // tests/data/calibrate/h200-device-2026-12-04/README.md: clustersim-probe-cuda's full sweep on one
  // H200 SXM, 511 shapes in each of five dtypes and 33 copies. The fitted model must beat the shipped
  // profile on them and its residual table must take the worst case far lower.
  const Measurements m = load_measurements(std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/h200-device-2026-12-04/measurements.json");
  REQUIRE(m.gemm.size() == 2555);
  REQUIRE(m.memory.size() == 33);
  const HardwareProfile base = shipped("h200-sxm-141gb");
  const CalibrationResult r = calibrate::calibrate(base, m, {});
  REQUIRE(r.gemm);
  CHECK(r.gemm->model_overall.mean_relative < 0.08);
  CHECK(r.gemm->model_overall.mean_relative < r.gemm->base_overall.mean_relative);
  CHECK(r.gemm->model_quality.at(Dtype::bf16).r2 > 0.9);
  CHECK(r.gemm->table_overall.worst_relative < 0.5 * r.gemm->model_overall.worst_relative);
  // bf16 ran at 814 TFLOP/s at best, 82% of the dense peak: the fitted ceiling lies near it.
  const double bf16 = r.profile.gemm.max_efficiency.at(Dtype::bf16);
  CHECK(bf16 > 0.65);
  CHECK(bf16 < 0.9);
  // Host copies over PCIe Gen5 x16: about 55 GB/s each way.
  int host = 0;
  for (const auto& c : r.copies) {
    if (c.kind == MemoryKind::d2d) continue;
    CHECK(c.transfer.bandwidth.value() == Approx(55.4e9).epsilon(0.03));
    CHECK(c.worst_relative < 0.02);
    ++host;
  }
  CHECK(host == 2);
}

TEST_CASE("calibrate: the shipped Hopper fp8 constants: k_half from the H200 sweep, the ceiling from a published H100 timing") {
  // tests/data/calibrate/h200-device-2026-12-04/measurements.json: 511 cuBLASLt GEMMs each in fp8 and
  // bf16 in one run. fp8 needs about three times the K of bf16 to reach its ceiling; the profiles take
  // that ratio onto their 16-bit k_half, then fit the fp8 ceiling to DeepGEMM's 1504 TFLOP/s at
  // 7168 x 4096 x 16384 on H100 SXM (docs/hardware-profiles.md, "Hopper's fp8 constants").
  const Measurements m = load_measurements(std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/h200-device-2026-12-04/measurements.json");
  const HardwareProfile h200 = shipped("h200-sxm-141gb");
  const CalibrationResult r = calibrate::calibrate(h200, m, {});
  const double ratio = r.profile.gemm.k_half_for(Dtype::fp8) / r.profile.gemm.k_half_for(Dtype::bf16);
  CHECK(ratio > 2.0);
  for (const char* name : {"h100-sxm5-80gb", "h800-sxm5-80gb", "h200-sxm-141gb"}) {
    INFO(name);
    const HardwareProfile hw = shipped(name);
    CHECK(hw.gemm.k_half_for(Dtype::fp8) == Approx(hw.gemm.k_half_for(Dtype::bf16) * ratio).epsilon(0.01));
    CHECK(hardware::fit_max_efficiency(hw, {7168, 4096, 16384}, Dtype::fp8, FlopsPerSec(1504e12)) ==
          Approx(hw.gemm.max_efficiency.at(Dtype::fp8)).margin(0.001));
  }
  // The shipped profile describes the H200's own fp8 GEMMs about as well as its bf16 ones (with the
  // default k_half of 128 its fp8 mean error was 19%).
  std::vector<GemmSample> fp8, bf16;
  for (const GemmSample& g : m.gemm) {
    if (g.dtype == Dtype::fp8) fp8.push_back(g);
    if (g.dtype == Dtype::bf16) bf16.push_back(g);
  }
  REQUIRE(fp8.size() == 511);
  CHECK(quality_of(h200, fp8).mean_relative < 0.12);
  CHECK(quality_of(h200, fp8).mean_relative < 1.25 * quality_of(h200, bf16).mean_relative);
}

TEST_CASE("calibrate: the attention fit of the H200's cuDNN kernels gives the shipped Hopper constants") {
  // tests/data/calibrate/h200-device-2026-12-04/torch-probe.json and torch-probe-gqa.json
  // (scripts/torch-probe.py, two runs): 36 + 68 attention kernels, of which 14 + 30 are cuDNN at
  // head dim 128. The shipped H100, H800 and H200 profiles carry this fit, rounded to four places.
  const std::string dir = std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/h200-device-2026-12-04/";
  Measurements m = read_torch_probe(dir + "torch-probe.json");
  REQUIRE(m.attention.size() == 36);
  CHECK(m.gemm.empty());
  CHECK(m.meta.at("torch_probe_gpu") == "NVIDIA H200");
  CHECK(m.meta.at("torch_probe_cudnn") == "91900");
  const Measurements gqa = read_torch_probe(dir + "torch-probe-gqa.json");
  REQUIRE(gqa.attention.size() == 68);
  CHECK(std::count_if(gqa.attention.begin(), gqa.attention.end(), [](const AttentionSample& a) { return a.kv_heads > 0; }) == 20);
  m.append(gqa);
  const HardwareProfile h200 = shipped("h200-sxm-141gb");
  const CalibrationResult r = calibrate::calibrate(h200, m, {});
  REQUIRE(r.attention);
  CHECK(r.attention->samples == 44);
  CHECK(r.attention->skipped == 60);
  for (const char* name : {"h100-sxm5-80gb", "h800-sxm5-80gb", "h200-sxm-141gb"}) {
    INFO(name);
    const HardwareProfile hw = shipped(name);
    CHECK(hw.attention.forward_efficiency == Approx(r.profile.attention.forward_efficiency).margin(5e-5));
    CHECK(hw.attention.backward_efficiency == Approx(r.profile.attention.backward_efficiency).margin(5e-5));
    CHECK(hw.attention.tail_blocks == Approx(r.profile.attention.tail_blocks).margin(5e-4));
  }
  // (How well these constants reproduce the 44 kernels: the test of the shipped H200 profile below.)
  // The data ask for a tail of most of a block (hardware_test.cpp shows a constant rate doing far worse).
  CHECK(r.profile.attention.tail_blocks > 0.5);
  // The fitted profile writes and reads back.
  const std::string yaml = profile_yaml(r);
  CHECK_THAT(yaml, Catch::Contains("tail_blocks: 0.805"));
  // FlashAttention-2's kernels are another fit, slower at every shape.
  CalibrationOptions flash;
  flash.attention.backend = "flash";
  const CalibrationResult f = calibrate::calibrate(h200, m, flash);
  REQUIRE(f.attention);
  CHECK(f.attention->samples == 44);
  CHECK(f.profile.attention.forward_efficiency < r.profile.attention.forward_efficiency);
  // A head dim with one shape cannot separate the rate from the tail.
  CalibrationOptions d64;
  d64.attention.head_dim = 64;
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h200, m, d64); }),
             Catch::Contains("at least 3 forward and 3 backward cudnn kernels of head dim 64") && Catch::Contains("found 2 and 2"));
}

TEST_CASE("calibrate: attention records round-trip through the measurement format, and bad torch-probe files are named") {
  Measurements m;
  m.attention.push_back({"cudnn", true, 2, 16, 2048, 128, 2.5e-4, 0});
  m.attention.push_back({"cudnn", false, 1, 32, 8192, 128, 9e-4, 8, 132});
  const Measurements back = from_json(to_json(m), "m.json");
  REQUIRE(back.attention.size() == 2);
  CHECK(back.attention[0].backward);
  CHECK(back.attention[0].heads == 16);
  CHECK(back.attention[0].kv_heads == 0);
  CHECK(back.attention[1].kv_heads == 8);
  CHECK(back.attention[0].sm_count == 0);
  CHECK(back.attention[1].sm_count == 132);
  CHECK_THAT(test::input_error([] { (void)from_json(R"({"format": "clustersim-measurements/1", "attention": [{"backend": "cudnn", "pass": "forward",
     "batch": 1, "heads": 8, "kv_heads": 3, "seq": 64, "head_dim": 64, "seconds": 1e-6}]})", "k.json"); }),
             Catch::Contains("attention[0].kv_heads") && Catch::Contains("a divisor of heads (8)"));
  CHECK(back.attention[0].flops() == Approx(2.5 * 2.0 * 2 * 16 * 2048.0 * 2048 * 128));
  CHECK_THAT(test::input_error([] { (void)from_json(R"({"format": "clustersim-measurements/1", "attention": [{"backend": "cudnn", "pass": "sideways",
     "batch": 1, "heads": 1, "seq": 64, "head_dim": 64, "seconds": 1e-6}]})", "a.json"); }),
             Catch::Contains("a.json") && Catch::Contains("attention[0].pass") && Catch::Contains("forward or backward"));
  const test::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path() / name) << text;
    return (dir.path() / name).string();
  };
  CHECK_THAT(test::input_error([&] { (void)read_torch_probe(write("f.json", R"({"format": "clustersim-measurements/1", "samples": []})")); }),
             Catch::Contains("f.json") && Catch::Contains("'clustersim-torch-probe/1'"));
  CHECK_THAT(test::input_error([&] { (void)read_torch_probe(write("e.json", R"({"format": "clustersim-torch-probe/1", "samples": [
     {"section": "ops", "name": "gelu_forward", "seconds": 1e-5}]})")); }),
             Catch::Contains("attention samples") && Catch::Contains("none"));
  CHECK_THAT(test::input_error([&] { (void)read_torch_probe(write("s.json", R"({"format": "clustersim-torch-probe/1", "samples": [
     {"section": "attention", "name": "forward", "backend": "cudnn", "batch": 1, "heads": 8, "seq": 4096, "head_dim": 128, "seconds": -1}]})")); }),
             Catch::Contains("samples[0].seconds") && Catch::Contains("a positive number"));
  // A field torch-probe.py does not write is a typo or another file's, not taken in silence.
  CHECK_THAT(test::input_error([&] { (void)read_torch_probe(write("u.json", R"({"format": "clustersim-torch-probe/1", "samples": [
     {"section": "attention", "name": "forward", "backend": "cudnn", "batch": 1, "heads": 8, "seq": 4096, "head_dim": 128, "seconds": 1e-4, "bogus": 1}]})")); }),
             Catch::Contains("samples[0].bogus") && Catch::Contains("an unknown field"));
  CHECK_THAT(test::input_error([&] { (void)read_torch_probe(write("j.json", "{not json")); }), Catch::Contains("not valid JSON"));
  // A number too large for a double is bad JSON too, not a crash (found by fuzz_measurements).
  CHECK_THAT(test::input_error([&] { (void)load_measurements(write("o.json", R"({"format": "clustersim-measurements/1", "gemm": [{"seconds": 1e99999}]})")); }),
             Catch::Contains("o.json") && Catch::Contains("not valid JSON"));
}

TEST_CASE("calibrate: the attention fit recovers known constants and refuses data that cannot pin the tail") {
  // Kernels made with the model itself at forward 0.6, backward 0.5, tail 1.2 on the shipped H200
  // (132 SMs, 989.4 TFLOP/s bf16, 3.3 us launch): t = (F + 1.2 x R x 132) / (989.4e12 x eff) + 3.3e-6.
  HardwareProfile truth = shipped("h200-sxm-141gb");
  truth.attention = {0.6, 0.5, 1.2};
  std::vector<AttentionSample> s;
  for (auto [b, h, seq] : {std::tuple{1, 8, 4096}, std::tuple{1, 32, 4096}, std::tuple{4, 16, 4096}, std::tuple{1, 16, 8192}, std::tuple{2, 12, 2048}}) {
    for (bool backward : {false, true}) {
      AttentionSample a{"cudnn", backward, b, h, seq, 128, 0, 0};
      a.seconds = hardware::fused_attention_time(truth, Flops(a.flops()), Flops(a.row_flops()), Dtype::bf16, backward).value();
      s.push_back(a);
    }
  }
  HardwareProfile base = shipped("h200-sxm-141gb");
  const AttentionFit fit = fit_attention(base, s);
  CHECK(fit.params.forward_efficiency == Approx(0.6).epsilon(1e-6));
  CHECK(fit.params.backward_efficiency == Approx(0.5).epsilon(1e-6));
  CHECK(fit.params.tail_blocks == Approx(1.2).margin(1e-9));
  CHECK(fit.worst < 1e-9);
  CHECK(fit.notes.empty());
  // One batch x heads x seq (1 x 16 x 8192 = 1 x 32 x 4096 = 131072 tokens x heads): the tail's share
  // of the time is the same for every kernel, so the rate and the tail cannot be told apart.
  std::vector<AttentionSample> same;
  for (auto [h, seq] : {std::pair{16, 8192}, std::pair{32, 4096}, std::pair{16, 8192}}) {
    for (bool backward : {false, true}) same.push_back({"cudnn", backward, 1, h, seq, 128, 1e-3, 0});
  }
  CHECK_THAT(test::input_error([&] { (void)fit_attention(base, same); }),
             Catch::Contains("at least two different batch x heads x seq") && Catch::Contains("all have 131072"));
  // Kernels no longer than twice the launch overhead are left out, with a note.
  std::vector<AttentionSample> with_short = s;
  with_short.push_back({"cudnn", false, 1, 1, 128, 128, 5e-6, 0});
  const AttentionFit f2 = fit_attention(base, with_short);
  CHECK(f2.samples == 10);
  REQUIRE(f2.notes.size() == 1);
  CHECK_THAT(f2.notes[0], Catch::Contains("1 attention kernels no longer than twice the launch overhead"));
  // Times too short for any rate under the peak: the efficiency is capped at 1, with a note (the
  // forward at 1.2 x the peak); past 1.5 x it, or under a hundredth, the times are in another unit
  // and refused, as GEMMs' are (a sweep in ms written as seconds had fitted 0.0007, exit 0).
  std::vector<AttentionSample> fast = s;
  for (auto& a : fast) a.seconds = 3.3e-6 + (a.seconds - 3.3e-6) / 2;
  const AttentionFit f3 = fit_attention(base, fast);
  CHECK(f3.params.forward_efficiency == 1.0);
  CHECK_THAT(f3.notes.back(), Catch::Contains("capped at 1"));
  for (auto& a : fast) a.seconds = 3.3e-6 + (a.seconds - 3.3e-6) * 2 / 3;  // 1.8 x the peak forward
  CHECK_THAT(test::input_error([&] { (void)fit_attention(base, fast); }), Catch::Contains("1.8 x the H200-SXM-141GB's bf16 peak") &&
                                                                               Catch::Contains("no kernel runs past 1.5 x its peak"));
  std::vector<AttentionSample> in_ms = s;
  for (auto& a : in_ms) a.seconds *= 1000;
  CHECK_THAT(test::input_error([&] { (void)fit_attention(base, in_ms); }), Catch::Contains("no fused kernel runs 100 times slower than its peak"));
  // Kernels measured on a GPU of another SM count are refused against this base, even among
  // kernels of the right one (two torch-probe files from two GPUs).
  Measurements m;
  m.attention = s;
  for (auto& a : m.attention) a.sm_count = 132;
  CHECK(calibrate::calibrate(base, m, {}).attention);
  m.attention.back().sm_count = 114;
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(base, m, {}); }), Catch::Contains("114 SMs") && Catch::Contains("has 132"));
  // Too few kernels left: the error says which were left out and why.
  std::vector<AttentionSample> left = s;
  for (auto& a : left) a.seconds = a.backward ? 1e-6 : a.seconds;
  left.front().backend = "flash";
  CHECK_THAT(test::input_error([&] { (void)fit_attention(base, left); }),
             Catch::Contains("5 attention kernels no longer than twice the launch overhead") && Catch::Contains("another backend / head dim") &&
                 Catch::Contains("flash / 128"));
}

TEST_CASE("calibrate: the shipped H200 profile reproduces the cuDNN kernels measured on an H200, the unfitted run too") {
  // tests/data/calibrate/h200-device-2026-12-04/README.md: scripts/torch-probe.py on one H200 SXM,
  // cuDNN 9.19 through PyTorch 2.11, bf16 causal; short timings, so the burst rate. The second
  // run's file repeats the first's shapes and adds grouped-query and longer ones; the fourth,
  // timed better (batches of back-to-back calls; the backward alone), was not fitted.
  const std::string dir = std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/calibrate/h200-device-2026-12-04/";
  Measurements fitted = read_torch_probe(dir + "torch-probe.json");
  fitted.append(read_torch_probe(dir + "torch-probe-gqa.json"));
  const HardwareProfile hw = shipped("h200-sxm-141gb");
  const AttentionErrors e = attention_errors(hw, fitted.attention);
  REQUIRE(e.samples == 44);  // 7 + 15 shapes, forward and backward
  CHECK(e.mean < 0.07);
  CHECK(e.worst < 0.3);
  // Without the tail the same rates miss far more: the measured rates span a factor of three.
  HardwareProfile flat = hw;
  flat.attention.tail_blocks = 0;
  CHECK(attention_errors(flat, fitted.attention).worst > 2 * e.worst);
  const AttentionErrors b = attention_errors(hw, read_torch_probe(dir + "torch-probe-batched.json").attention);
  REQUIRE(b.samples == 30);
  CHECK(b.mean < 0.07);
  CHECK(b.worst < 0.25);
}

TEST_CASE("calibrate: a sweep from 8 B sets the network's capacity at what its largest sizes measured") {
  // The recorded 2 x 8 H100 all-reduce of 8 B to 8 GiB (GCP A3 Mega): the line, weighing every
  // size's relative error alike, fits 273.5 GB/s; the 8 GiB row measured 338.8. The NICs had taken
  // the line's figure, and the calibrated profile predicted that 8 GiB all-reduce 24% slow, worse
  // than the uncalibrated one (8% fast).
  const auto data = std::filesystem::path(__FILE__).parent_path() / "data" / "nccl-tests" / "all_reduce_perf-2x8-h100-gcp-a3mega.txt";
  const CalibrationResult r = calibrate::calibrate(shipped("h100-sxm5-80gb"), read_nccl_tests(data), {});
  REQUIRE(r.links.size() == 1);
  CHECK(r.links[0].result.busbw.value() < 300e9);
  const auto network = models::calibrated_busbw(r.profile, "network");
  REQUIRE(network);
  CHECK(network->value() == Approx(338.8e9).epsilon(0.02));
  auto topo = test::topology_from_text(
      "topology:\n  name: t\n  node: dgx-h100\n  nodes: 2\n  fabric: {kind: fat-tree, technology: infiniband, tiers: [{radix: 64}]}\n");
  topo.gpu = std::make_shared<const HardwareProfile>(r.profile);
  models::Collective ar;
  ar.op = models::CollectiveOp::all_reduce;
  ar.ranks = topo.gpus();
  ar.bytes = Bytes(8589934592.0);
  CHECK(models::CollectiveModel(topo).simulate(ar).time.value() == Approx(47535e-6).epsilon(0.03));
}

TEST_CASE("calibrate: an all-to-all or send/recv sweep across nodes gives back what it measured") {
  // The recorded 2 x 4 H100 all-to-all and send/recv (tests/data/nccl-tests): their bus bandwidth is
  // a rank's own rate, not the node's NICs together; divided by the NICs as a ring's is, the
  // calibrated profile had run the log's own 16 GiB all-to-all 2.3 times slower than its 221.5 ms,
  // and its send/recv 4 times slower.
  const auto data = std::filesystem::path(__FILE__).parent_path() / "data" / "nccl-tests" / "alltoall-sendrecv-2x4-h100.log";
  const Measurements all = read_nccl_tests(data);
  const auto topology_for = [](const HardwareProfile& hw) {
    auto topo = test::topology_from_text(
        "topology:\n  name: t\n  node:\n    name: four\n    gpu: h100-sxm5-80gb\n    devices:\n      - {name: gpu, kind: gpu, count: 4}\n"
        "      - {name: nvswitch, kind: nvswitch, count: 1}\n      - {name: pcie, kind: pcie_switch, count: 4}\n"
        "      - {name: nic, kind: nic, count: 4, rate: 400Gbps}\n    links:\n      - {from: gpu, to: nvswitch, kind: nvlink, bandwidth: 450GB/s}\n"
        "      - {from: gpu, to: pcie, pattern: zip, kind: pcie, bandwidth: 63GB/s}\n      - {from: nic, to: pcie, pattern: zip, kind: pcie, bandwidth: 63GB/s}\n"
        "  nodes: 2\n  fabric: {kind: fat-tree, technology: infiniband, tiers: [{radix: 64}]}\n");
    topo.gpu = std::make_shared<const HardwareProfile>(hw);
    return topo;
  };
  Measurements a2a, p2p;
  for (const auto& c : all.collectives) (c.op == models::CollectiveOp::all_to_all ? a2a : p2p).collectives.push_back(c);
  REQUIRE(!a2a.collectives.empty());
  REQUIRE(!p2p.collectives.empty());
  {
    const auto topo = topology_for(calibrate::calibrate(shipped("h100-sxm5-80gb"), a2a, {}).profile);
    models::Collective c;
    c.op = models::CollectiveOp::all_to_all;
    c.ranks = topo.gpus();
    c.bytes = Bytes(17179869184.0);
    CHECK(models::CollectiveModel(topo).simulate(c).time.value() == Approx(221479e-6).epsilon(0.03));
  }
  {
    const auto topo = topology_for(calibrate::calibrate(shipped("h100-sxm5-80gb"), p2p, {}).profile);
    models::Collective c;
    c.op = models::CollectiveOp::send_recv;
    c.ranks = {topo.gpus()[0], topo.gpus()[4]};
    c.bytes = Bytes(17179869184.0);
    CHECK(models::CollectiveModel(topo).simulate(c).time.value() == Approx(710935e-6).epsilon(0.05));
  }
}

TEST_CASE("calibrate: a collective whose fit has a latency past a profile's 1 s is refused, not written") {
  // A probe's sweep with a 1.4 s latency was written as `latency: 1431400us` into a profile.yaml
  // that no command could load.
  Measurements slow;
  slow.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::network, 16, 2, 1073741824.0, 2.0});
  slow.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::network, 16, 2, 68719476736.0, 10.0});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(shipped("h100-sxm5-80gb"), slow, {}); }),
             Catch::Contains("fits a latency of") && Catch::Contains("past a profile's 1 s"));
}

TEST_CASE("calibrate: collective samples no link could produce are refused before the fit, not printed as NaN") {
  // Expectation: 1e308 bytes in 1e-300 s had given a 'mean nan%' fit and inf in collectives.csv; a
  // 1 MiB all-reduce taking 1e300 us beside a 2 MiB one of 150 us had been fitted, its row clamped
  // at 1% efficiency while the summary said every size was within 1%.
  const HardwareProfile h100 = shipped("h100-sxm5-80gb");
  Measurements huge;
  huge.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, 1e308, 1e-300});
  huge.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 8, 1, 1e300, 1e-300});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h100, huge, {}); }),
             Catch::Contains("is a bus bandwidth of beyond any number, more than 900 GB/s"));
  Measurements slow;
  slow.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 2, 1, 1048576.0, 1e294});
  slow.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 2, 1, 2097152.0, 150e-6});
  CHECK_THAT(test::input_error([&] { (void)calibrate::calibrate(h100, slow, {}); }),
             Catch::Contains("all_reduce of 1.049 MB over nvlink (1 x 2 ranks) took") && Catch::Contains("more than 100 times the 150 us the same sweep took at 2.097 MB"));
  // Noise is not refused: a small size 20 times slower than a larger one (a cold first run) fits.
  Measurements noisy = slow;
  noisy.collectives[0].seconds = 3e-3;
  noisy.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 2, 1, 1 << 30, 5e-3});
  CHECK(calibrate::calibrate(h100, noisy, {}).links.size() == 1);
  // A stalled repeat of a size the sweep also measured well is what the fit drops (it keeps the
  // fastest of each size), so it passes in either order (it had passed or been refused by order).
  Measurements repeat = noisy;
  repeat.collectives.push_back({models::CollectiveOp::all_reduce, LinkClass::nvlink, 2, 1, 1048576.0, 5.0});
  CHECK_NOTHROW(calibrate::calibrate(h100, repeat, {}));
  std::reverse(repeat.collectives.begin(), repeat.collectives.end());
  CHECK_NOTHROW(calibrate::calibrate(h100, repeat, {}));
}
