// clustersim-probe-cuda: measures the local NVIDIA GPUs and writes the results in the measurement
// format "clustersim-measurements/1" (calibrate/clustersim/calibrate/measurements.hpp), the input of
// `clustersim calibrate --from`.
//
//   gemm         cuBLASLt matmuls on GPU 0: a power-of-two grid of (M, N, K) and the GEMMs of
//                transformer layers (kLayerGemms), in fp32, tf32, fp16, bf16 and, from compute
//                capability 8.9, fp8 (e4m3).
//   memory       GPU 0: device-to-device copies, and host-to-device and device-to-host copies between
//                the GPU and pinned host memory, 1 MiB to 1 GiB.
//   collectives  NCCL all-reduce, all-gather, reduce-scatter, all-to-all, broadcast and send/recv over
//                all local GPUs from one process (ncclCommInitAll), 8 B to 8 GiB.
//
// Timing (median_seconds_per_call): the first call is discarded (it pays plan selection, lazy module
// loading, NCCL connection setup), warm-up calls follow for a few milliseconds, then a number of
// timings of a batch of back-to-back calls; a record holds the median over the timings of
// (timing / batch). The batch makes one timing long enough (0.5 ms for GEMMs and copies, 2 ms for
// collectives) that timer resolution and launch gaps stay small against it; the number of timings
// follows from a time budget per point, between a floor and a cap, so that the largest problems run
// only a few times. GEMMs and copies are timed with CUDA events on their stream, each timing one
// replay of a CUDA graph that holds the batch (so small problems are not bound by the host's launch
// rate; plain launches if capture fails); collectives with the host's steady clock from the launch of
// the first group to the moment every GPU's stream has drained (one thread launches all GPUs, as
// nccl-tests does in its one-process mode).
//
// Exit status: 0 all requested sections ran; 1 a section failed or was cut short by SIGTERM or SIGINT
// (the reason is on stderr and in meta["<section>_error"]; what was measured is still written);
// 2 bad usage; 3 no GPU.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <fmt/format.h>

#include "clustersim/calibrate/measurements.hpp"
#include "clustersim/hardware/dtype.hpp"
#include "clustersim/models/collective.hpp"
#include "clustersim/reports/atomic_file.hpp"

namespace {

namespace fs = std::filesystem;
using cs::calibrate::CollectiveSample;
using cs::calibrate::GemmSample;
using cs::calibrate::LinkClass;
using cs::calibrate::Measurements;
using cs::calibrate::MemoryKind;
using cs::calibrate::MemorySample;
using cs::hardware::Dtype;
using cs::models::CollectiveOp;

constexpr std::uint64_t KiB = 1024, MiB = KiB * KiB, GiB = MiB * KiB;

// ---------------------------------------------------------------------------------------------
// Errors and progress

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ProbeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// cuBLASLt declined one problem (no algorithm, unsupported combination): that point is skipped and
// the sweep goes on.
struct GemmDeclined : ProbeError {
  using ProbeError::ProbeError;
};

// SIGTERM or SIGINT (`timeout`, Ctrl-C) ends the sweep at the next point: what was measured is still
// written. A second signal takes the default action.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  std::signal(sig, SIG_DFL);
}
void stop_point() {
  if (g_stop_signal != 0) throw ProbeError(g_stop_signal == SIGINT ? "stopped by SIGINT" : "stopped by SIGTERM");
}

void check(cudaError_t e, std::string_view what) {
  if (e != cudaSuccess) throw ProbeError(fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}
void check(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string msg = fmt::format("{}: {} ({})", what, cublasLtGetStatusString(s), cublasLtGetStatusName(s));
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH || s == CUBLAS_STATUS_INVALID_VALUE) {
    throw GemmDeclined(msg);
  }
  throw ProbeError(msg);
}
void check(ncclResult_t r, std::string_view what) {
  if (r != ncclSuccess) {
    const char* last = ncclGetLastError(nullptr);
    throw ProbeError(fmt::format("{}: {}{}{}", what, ncclGetErrorString(r), last && *last ? ": " : "", last ? last : ""));
  }
}

template <class... Args>
void progress(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "clustersim-probe-cuda: {}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stderr);
}

std::string human_bytes(double b) {
  if (b >= static_cast<double>(GiB)) return fmt::format("{:g} GiB", b / static_cast<double>(GiB));
  if (b >= static_cast<double>(MiB)) return fmt::format("{:g} MiB", b / static_cast<double>(MiB));
  if (b >= static_cast<double>(KiB)) return fmt::format("{:g} KiB", b / static_cast<double>(KiB));
  return fmt::format("{:g} B", b);
}
std::string human_seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.2f} us", s * 1e6);
}
std::string version_string(long v, long major_div, long minor_div) {  // 13000 -> "13.0"; 130100 -> "13.1.0"
  if (minor_div == 0) return fmt::format("{}.{}", v / major_div, (v % major_div) / 10);
  return fmt::format("{}.{}.{}", v / major_div, (v % major_div) / minor_div, v % minor_div);
}

// ---------------------------------------------------------------------------------------------
// Owners of CUDA objects. Each remembers its device and frees on it.

class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(std::size_t bytes, std::string_view what) : bytes_(bytes) {
    check(cudaGetDevice(&device_), "cudaGetDevice");
    if (bytes > 0) check(cudaMalloc(&ptr_, bytes), fmt::format("cudaMalloc of {} for {}", human_bytes(static_cast<double>(bytes)), what));
  }
  DeviceMemory(DeviceMemory&& o) noexcept { swap(o); }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    DeviceMemory tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (!ptr_) return;
    int current = 0;
    if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(device_) == cudaSuccess) {
      (void)cudaFree(ptr_);
      (void)cudaSetDevice(current);
    }
  }
  [[nodiscard]] std::byte* get() const { return static_cast<std::byte*>(ptr_); }
  [[nodiscard]] std::size_t size() const { return bytes_; }

 private:
  void swap(DeviceMemory& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
};

class PinnedMemory {
 public:
  explicit PinnedMemory(std::size_t bytes) {
    check(cudaMallocHost(&ptr_, bytes), fmt::format("cudaMallocHost of {}", human_bytes(static_cast<double>(bytes))));
    std::memset(ptr_, 0, bytes);  // touch every page once
  }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory() { (void)cudaFreeHost(ptr_); }
  [[nodiscard]] void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() {
    check(cudaGetDevice(&device_), "cudaGetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)), device_(o.device_) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (!stream_) return;
    int current = 0;
    if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(device_) == cudaSuccess) {
      (void)cudaStreamDestroy(stream_);
      (void)cudaSetDevice(current);
    }
  }
  [[nodiscard]] cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// Times `count` back-to-back enqueues on one stream with a pair of CUDA events.
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  template <class Enqueue>
  double seconds(int count, Enqueue&& enqueue) {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < count; ++i) enqueue();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// An owned cuBLASLt descriptor: `Destroy` runs once, also when a constructor throws half-way.
template <class T, cublasStatus_t (*Destroy)(T)>
class LtHandle {
 public:
  LtHandle() = default;
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  ~LtHandle() {
    if (h) (void)Destroy(h);
  }
  T h = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Sampling

struct Sampling {
  double warm_seconds;    // warm-up after the discarded first call
  double sample_seconds;  // what one timing should span: sets the batch of back-to-back calls
  int max_batch;
  double budget_seconds;  // what all timings of one point should span: sets their number
  int min_samples, max_samples;
};

Sampling gemm_sampling(bool quick) { return quick ? Sampling{2e-3, 0.5e-3, 100, 0.02, 3, 5} : Sampling{5e-3, 0.5e-3, 100, 0.1, 3, 15}; }
Sampling copy_sampling(bool quick) { return quick ? Sampling{2e-3, 0.5e-3, 100, 0.02, 3, 5} : Sampling{5e-3, 0.5e-3, 100, 0.1, 5, 15}; }
Sampling collective_sampling(bool quick) { return quick ? Sampling{2e-3, 2e-3, 50, 0.05, 3, 7} : Sampling{5e-3, 2e-3, 50, 0.2, 5, 20}; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int clamp_count(double x, int lo, int hi) { return static_cast<int>(std::clamp(std::round(x), static_cast<double>(lo), static_cast<double>(hi))); }

// `warm(count)` and `sample(count)` each run `count` back-to-back calls, wait for them, and return
// their seconds; `sample` is called with one count only (the batch), so it may prepare for it once.
template <class Warm, class Sample>
double median_seconds_per_call(const Sampling& s, Warm&& warm, Sample&& sample) {
  constexpr double kFloor = 1e-7;  // a timer that read zero must not turn into an infinite batch
  (void)warm(1);                   // one-off costs: plan selection, lazy loading, connection setup
  double per_call = std::max(warm(1), kFloor);
  const int warm_calls = clamp_count(std::ceil(s.warm_seconds / per_call), 1, 10000);
  per_call = std::max(warm(warm_calls) / warm_calls, kFloor);
  const int batch = clamp_count(s.sample_seconds / per_call, 1, s.max_batch);
  const int samples = clamp_count(s.budget_seconds / (per_call * batch), s.min_samples, s.max_samples);
  std::vector<double> t;
  t.reserve(static_cast<std::size_t>(samples));
  for (int i = 0; i < samples; ++i) t.push_back(sample(batch) / batch);
  return median(std::move(t));
}

// `count` calls captured once into a CUDA graph; a replay runs them back to back on the GPU, free of
// the host's launch rate, which bounds batches of small GEMMs and copies otherwise.
class CapturedBatch {
 public:
  template <class Enqueue>
  CapturedBatch(cudaStream_t stream, int count, Enqueue&& enqueue) {
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      for (int i = 0; i < count; ++i) enqueue();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(stream, &partial);  // leave capture mode whatever happened
      if (partial) (void)cudaGraphDestroy(partial);
      (void)cudaGetLastError();
      throw;
    }
    check(cudaStreamEndCapture(stream, &graph_), "cudaStreamEndCapture");
    if (const cudaError_t e = cudaGraphInstantiate(&exec_, graph_, 0); e != cudaSuccess) {
      (void)cudaGraphDestroy(graph_);
      (void)cudaGetLastError();
      check(e, "cudaGraphInstantiate");
    }
  }
  CapturedBatch(const CapturedBatch&) = delete;
  CapturedBatch& operator=(const CapturedBatch&) = delete;
  ~CapturedBatch() {
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGraphDestroy(graph_);
  }
  void launch(cudaStream_t stream) const { check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch"); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Whether samples replay graphs; the first capture that fails turns them off for the rest of the run.
struct GraphMode {
  bool enabled = true;
  std::string why_not;
};

// Times one point on one stream: warm-up with plain launches, samples as replays of a graph of one
// batch (plain launches where graphs are off).
template <class Enqueue>
double time_on_stream(const Sampling& s, EventTimer& timer, cudaStream_t stream, GraphMode& graphs, Enqueue&& enqueue) {
  auto plain = [&](int count) { return timer.seconds(count, enqueue); };
  std::optional<CapturedBatch> graph;
  auto replay = [&](int count) {
    if (graphs.enabled && !graph) {
      try {
        graph.emplace(stream, count, enqueue);
      } catch (const ProbeError& e) {
        graphs = {false, e.what()};
        progress("CUDA graph capture failed, timing plain launches from here on: {}", e.what());
      }
    }
    if (!graph) return plain(count);
    return timer.seconds(1, [&] { graph->launch(stream); });
  };
  return median_seconds_per_call(s, plain, replay);
}

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  enum class Link { automatic, nvlink, pcie };
  bool quick = false;
  std::optional<fs::path> out, csv;
  bool gemm = true, memory = true, collectives = true;
  std::optional<std::uint64_t> max_bytes;
  Link link = Link::automatic;
};

constexpr const char* kUsage = R"(usage: clustersim-probe-cuda [--quick] [--out FILE.json] [--csv DIR]
                             [--only gemm,memory,collectives] [--max-bytes N] [--link auto|nvlink|pcie]

Measures the local NVIDIA GPUs (cuBLASLt GEMMs, copy bandwidths, NCCL collectives across all local
GPUs) and writes the measurements as JSON ("clustersim-measurements/1") to FILE or standard output;
progress goes to standard error.

  --quick           a much smaller sweep (seconds instead of minutes)
  --out FILE        write the JSON to FILE (atomically) instead of standard output
  --csv DIR         also write gemm.csv, memory.csv and collectives.csv into DIR
  --only LIST       run only these sections (comma-separated: gemm, memory, collectives)
  --max-bytes N     cap the memory and collective sizes at N bytes (suffixes K, M, G: binary units)
  --link KIND       the link class recorded with the collectives; auto (default): nvlink when every
                    pair of GPUs is peer-accessible with native atomics, else pcie
  -h, --help        this text

SIGTERM or SIGINT stops the sweep at the next point; what was measured is still written.
Exit status: 0 done; 1 a section failed or was stopped (what was measured is still written);
2 bad usage; 3 no GPU.
)";

std::uint64_t parse_bytes(std::string_view s) {
  std::uint64_t v = 0;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p == s.data()) throw UsageError(fmt::format("--max-bytes: '{}' is not a byte count", s));
  const std::string_view unit(p, static_cast<std::size_t>(end - p));
  std::uint64_t scale = 1;
  if (unit == "K" || unit == "KiB") scale = KiB;
  else if (unit == "M" || unit == "MiB") scale = MiB;
  else if (unit == "G" || unit == "GiB") scale = GiB;
  else if (!unit.empty() && unit != "B") throw UsageError(fmt::format("--max-bytes: unknown unit '{}' (use K, M or G)", unit));
  if (v == 0 || v > std::numeric_limits<std::uint64_t>::max() / scale) throw UsageError(fmt::format("--max-bytes: '{}' is out of range", s));
  return v * scale;
}

// Returns nullopt for --help (the usage is printed).
std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) throw UsageError(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    } else if (arg == "--quick" && !inline_value) {
      o.quick = true;
    } else if (arg == "--out") {
      o.out = value();
    } else if (arg == "--csv") {
      o.csv = value();
    } else if (arg == "--max-bytes") {
      o.max_bytes = parse_bytes(value());
    } else if (arg == "--link") {
      const std::string v = value();
      if (v == "auto") o.link = Options::Link::automatic;
      else if (v == "nvlink") o.link = Options::Link::nvlink;
      else if (v == "pcie") o.link = Options::Link::pcie;
      else throw UsageError(fmt::format("--link: expected auto, nvlink or pcie, not '{}'", v));
    } else if (arg == "--only") {
      o.gemm = o.memory = o.collectives = false;
      const std::string list = value();
      std::size_t start = 0;
      while (start <= list.size()) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        const std::string_view part(list.data() + start, comma - start);
        if (part == "gemm") o.gemm = true;
        else if (part == "memory") o.memory = true;
        else if (part == "collectives") o.collectives = true;
        else throw UsageError(fmt::format("--only: unknown section '{}' (expected gemm, memory or collectives)", part));
        start = comma + 1;
      }
    } else {
      throw UsageError(fmt::format("unknown argument '{}'", argv[i]));
    }
  }
  return o;
}

// ---------------------------------------------------------------------------------------------
// GEMM
//
// Convention: a sample's (m, n, k) is the mathematical product C[m x n] = A[m x k] B[k x n], with A
// the activations (m = tokens), B the weights and every matrix row-major, as a framework holds
// them (B is kept as an nn.Linear weight, W[n x k] row-major, C = A W^T). cuBLASLt is column-major,
// where a row-major X[r x c] reads as X^T[c x r]; so the call computes C^T[n x m] = W[n x k] A^T[k x m]
// in "TN" form: cuBLAS m' = n, n' = m, k' = k; its A operand is W, stored k x n column-major (ld k),
// transposed; its B operand is the activations, stored k x m column-major (ld k), not transposed;
// C = D is n x m column-major (ld n). TN is the one layout cuBLASLt's fp8 kernels take on compute
// capability 8.9 and 9.0 (cuBLAS docs, cublasLtMatmul, FP8 requirements), so every dtype uses it.

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  friend auto operator<=>(const GemmShape&, const GemmShape&) = default;
  [[nodiscard]] double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

// The GEMMs of one transformer layer's forward pass under Megatron-style tensor parallelism (QKV and
// FFN-up split by output columns, attention-output and FFN-down by input rows), for T tokens, hidden
// size h and tensor-parallel degree t, in the convention above (m = T always):
//
//   GEMM                      n         k        note
//   QKV projection            3h / t    h        multi-head attention; grouped-query attention is narrower
//   attention output          h         h / t
//   FFN up                    4h / t    h        a 4h MLP; a SwiGLU MLP's up+gate of 8/3 h lies inside the range
//   FFN down                  h         4h / t
//
// The backward pass multiplies the same operands transposed (dgrad: m = T, n and k swapped; wgrad:
// m = k, n = n, k = T, as models/training_ops.cpp times them). The power-of-two grid brackets them.
// For hidden sizes up to 6144 at T = 4096 (one 4k sequence, the usual micro-batch) they are measured
// as well: small layers' short kernels are where the model is least sure (docs/training.md), and
// their non-power-of-two widths (3h/t, 6144) where the interpolated residual is. Larger sizes would
// lengthen the sweep past the device script's budget.
struct LayerGemm {
  std::string_view name;
  int n_per_h;   // n = n_per_h * h, divided by t when `n_split`
  bool n_split;
  int k_per_h;   // k = k_per_h * h, divided by t when `k_split`
  bool k_split;
};
constexpr std::array kLayerGemms{LayerGemm{"qkv", 3, true, 1, false}, LayerGemm{"attn_out", 1, false, 1, true},
                                 LayerGemm{"ffn_up", 4, true, 1, false}, LayerGemm{"ffn_down", 1, false, 4, true}};
// Hidden sizes of common models: 2048 (Megatron-Core's 1.7B, Llama 3.2 1B), 4096 (Llama 2/3 7B-8B),
// 5120 (Llama 2 13B), 6144 (Megatron-Core's 16B), 8192 (Llama 2/3 70B), 12288 (GPT-3 175B), 16384
// (Llama 3 405B).
constexpr std::array<std::int64_t, 7> kHidden{2048, 4096, 5120, 6144, 8192, 12288, 16384};
constexpr std::array<std::int64_t, 4> kTensorParallel{1, 2, 4, 8};
constexpr std::array<std::int64_t, 2> kTokens{4096, 8192};

std::vector<GemmShape> gemm_shapes(bool quick) {
  std::set<GemmShape> shapes;
  const std::vector<std::int64_t> grid = quick ? std::vector<std::int64_t>{512, 2048, 8192}
                                               : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096, 8192, 16384};
  for (auto m : grid) {
    for (auto n : grid) {
      for (auto k : grid) shapes.insert({m, n, k});
    }
  }
  const std::vector<std::int64_t> hidden = quick ? std::vector<std::int64_t>{4096, 8192} : std::vector<std::int64_t>(kHidden.begin(), kHidden.end());
  const std::vector<std::int64_t> tp = quick ? std::vector<std::int64_t>{1, 8} : std::vector<std::int64_t>(kTensorParallel.begin(), kTensorParallel.end());
  const std::vector<std::int64_t> tokens = quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>(kTokens.begin(), kTokens.end());
  for (auto t_tokens : tokens) {
    for (auto h : hidden) {
      for (auto t : tp) {
        for (const LayerGemm& g : kLayerGemms) {
          const std::int64_t n = g.n_per_h * h / (g.n_split ? t : 1);
          const std::int64_t k = g.k_per_h * h / (g.k_split ? t : 1);
          shapes.insert({t_tokens, n, k});
          if (t_tokens == 4096 && h <= 6144 && !quick) {
            shapes.insert({t_tokens, k, n});  // dgrad
            shapes.insert({k, n, t_tokens});  // wgrad
          }
        }
      }
    }
  }
  return {shapes.begin(), shapes.end()};
}

struct GemmType {
  Dtype dtype;
  cudaDataType_t ab;  // A and B
  cudaDataType_t cd;  // C and D
  cublasComputeType_t compute;
  int min_cc;         // compute capability x 10
  std::size_t ab_bytes, cd_bytes;
};
// Scale type (alpha, beta) is fp32 throughout; fp16, bf16 and fp8 accumulate in fp32. In the order
// training needs them, so that a sweep cut short by its time limit has measured the 16-bit and fp8
// products first; the 4-byte ones, the slowest to sweep, come last.
constexpr std::array kGemmTypes{
    GemmType{Dtype::bf16, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 80, 2, 2},
    GemmType{Dtype::fp8, CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 89, 1, 2},
    GemmType{Dtype::fp16, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 70, 2, 2},
    GemmType{Dtype::tf32, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 80, 4, 4},
    GemmType{Dtype::fp32, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 0, 4, 4},
};
constexpr std::size_t kWorkspaceBytes = 32 * MiB;
constexpr const char* kGemmMeta =
    "cuBLASLt, TN layout (see probe_cuda.cpp), heuristic's top algorithm with a 32 MiB workspace, alpha 1, beta 0; "
    "fp32: CUBLAS_COMPUTE_32F; tf32: fp32 data, CUBLAS_COMPUTE_32F_FAST_TF32; fp16, bf16: fp32 accumulate; "
    "fp8: e4m3 A and B, bf16 C/D, fp32 accumulate, per-tensor scales of 1 (A/B scale pointers), fast accumulation off; "
    "inputs random with magnitudes in [1/16, 1), successive calls on successive slices of the buffers (no operand left in L2)";

// Fills `bytes` of device memory with finite values of `type`: random sign, magnitude in [1/16, 1)
// (random data draws more power than zeros, so it clocks as a real workload would).
void fill_random(std::byte* dst, std::size_t bytes, cudaDataType_t type) {
  constexpr std::size_t kPattern = 4 * MiB;
  std::vector<std::uint8_t> host(kPattern);
  std::mt19937_64 rng(0x5eedc0de);
  auto store = [&](std::size_t at, auto bits) { std::memcpy(host.data() + at, &bits, sizeof bits); };
  for (std::size_t at = 0; at < kPattern;) {
    const std::uint64_t r = rng();
    const unsigned sign = static_cast<unsigned>(r >> 63), exp_pick = static_cast<unsigned>((r >> 60) & 3u);
    switch (type) {
      case CUDA_R_32F:  // exponent 123..126 of bias 127
        store(at, static_cast<std::uint32_t>((sign << 31) | ((123u + exp_pick) << 23) | static_cast<std::uint32_t>(r & 0x7fffffu)));
        at += 4;
        break;
      case CUDA_R_16F:  // exponent 11..14 of bias 15
        store(at, static_cast<std::uint16_t>((sign << 15) | ((11u + exp_pick) << 10) | static_cast<unsigned>(r & 0x3ffu)));
        at += 2;
        break;
      case CUDA_R_16BF:  // exponent 123..126 of bias 127
        store(at, static_cast<std::uint16_t>((sign << 15) | ((123u + exp_pick) << 7) | static_cast<unsigned>(r & 0x7fu)));
        at += 2;
        break;
      case CUDA_R_8F_E4M3:  // exponent 3..6 of bias 7 (never the all-ones NaN code)
        store(at, static_cast<std::uint8_t>((sign << 7) | ((3u + exp_pick) << 3) | static_cast<unsigned>(r & 0x7u)));
        at += 1;
        break;
      default: throw ProbeError("fill_random: unexpected data type");
    }
  }
  const std::size_t first = std::min(kPattern, bytes);
  check(cudaMemcpy(dst, host.data(), first, cudaMemcpyHostToDevice), "cudaMemcpy (fill)");
  for (std::size_t filled = first; filled < bytes;) {  // double the filled prefix: copies start at element boundaries
    const std::size_t n = std::min(filled, bytes - filled);
    check(cudaMemcpy(dst + filled, dst, n, cudaMemcpyDeviceToDevice), "cudaMemcpy (fill)");
    filled += n;
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (fill)");
}

// One matmul problem on cuBLASLt: its descriptors and the heuristic's top algorithm.
class LtMatmul {
 public:
  LtMatmul(cublasLtHandle_t lt, const GemmType& t, const GemmShape& s, const float* device_scale) : lt_(lt) {
    check(cublasLtMatmulDescCreate(&op_.h, t.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const std::int32_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa);
    set(CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb);
    if (t.dtype == Dtype::fp8) {
      const void* scale = device_scale;  // one fp32 1.0 on the device; the scale type is the compute type (fp32)
      set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale);
      set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof scale);
    }
    const auto m = static_cast<std::uint64_t>(s.m), n = static_cast<std::uint64_t>(s.n), k = static_cast<std::uint64_t>(s.k);
    check(cublasLtMatrixLayoutCreate(&a_.h, t.ab, k, n, s.k), "cublasLtMatrixLayoutCreate (A: weights)");
    check(cublasLtMatrixLayoutCreate(&b_.h, t.ab, k, m, s.k), "cublasLtMatrixLayoutCreate (B: activations)");
    check(cublasLtMatrixLayoutCreate(&d_.h, t.cd, n, m, s.n), "cublasLtMatrixLayoutCreate (C/D)");
    check(cublasLtMatmulPreferenceCreate(&pref_.h), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t workspace = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref_.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
          "cublasLtMatmulPreferenceSetAttribute");
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt_, op_.h, a_.h, b_.h, d_.h, d_.h, pref_.h, 1, &algo_, &found), "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1 || algo_.state != CUBLAS_STATUS_SUCCESS) throw GemmDeclined("cublasLtMatmulAlgoGetHeuristic found no algorithm");
  }

  void enqueue(const void* weights, const void* activations, void* out, void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasLtMatmul(lt_, op_.h, &alpha, weights, a_.h, activations, b_.h, &beta, out, d_.h, out, d_.h, &algo_.algo, workspace,
                         kWorkspaceBytes, stream),
          "cublasLtMatmul");
  }

 private:
  void set(cublasLtMatmulDescAttributes_t attr, const void* value, std::size_t size) {
    check(cublasLtMatmulDescSetAttribute(op_.h, attr, value, size), "cublasLtMatmulDescSetAttribute");
  }
  cublasLtHandle_t lt_;
  LtHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> op_;
  LtHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> a_, b_, d_;
  LtHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref_;
  cublasLtMatmulHeuristicResult_t algo_{};
};

class LtContext {
 public:
  LtContext() { check(cublasLtCreate(&h_), "cublasLtCreate"); }
  LtContext(const LtContext&) = delete;
  LtContext& operator=(const LtContext&) = delete;
  ~LtContext() { (void)cublasLtDestroy(h_); }
  [[nodiscard]] cublasLtHandle_t get() const { return h_; }

 private:
  cublasLtHandle_t h_ = nullptr;
};

void gemm_sweep(Measurements& out, const Options& o) {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int cc = prop.major * 10 + prop.minor;
  const std::vector<GemmShape> shapes = gemm_shapes(o.quick);

  // One set of buffers for every shape and dtype, sized by the largest operand in 4-byte elements.
  std::size_t a_elems = 0, b_elems = 0, d_elems = 0;
  for (const auto& s : shapes) {
    a_elems = std::max(a_elems, static_cast<std::size_t>(s.n * s.k));
    b_elems = std::max(b_elems, static_cast<std::size_t>(s.m * s.k));
    d_elems = std::max(d_elems, static_cast<std::size_t>(s.m * s.n));
  }
  const std::size_t need = 4 * (a_elems + b_elems + d_elems) + kWorkspaceBytes;
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (need > free_bytes / 10 * 9) {
    throw ProbeError(fmt::format("the GEMM sweep needs {} of GPU memory and {} is free (try --quick)", human_bytes(static_cast<double>(need)),
                                 human_bytes(static_cast<double>(free_bytes))));
  }
  LtContext lt;
  Stream stream;
  EventTimer timer(stream.get());
  DeviceMemory weights(4 * a_elems, "GEMM weights"), activations(4 * b_elems, "GEMM activations"), result(4 * d_elems, "GEMM output"),
      workspace(kWorkspaceBytes, "cuBLASLt workspace"), scale(sizeof(float), "fp8 scale");
  const float one = 1.0f;
  check(cudaMemcpy(scale.get(), &one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy (scale)");
  const auto* device_scale = reinterpret_cast<const float*>(scale.get());
  progress("gemm: {} shapes per dtype on {} (compute capability {}.{})", shapes.size(), prop.name, prop.major, prop.minor);
  GraphMode graphs;

  for (const GemmType& t : kGemmTypes) {
    const std::string name(cs::hardware::to_string(t.dtype));
    if (cc < t.min_cc) {
      progress("gemm {}: skipped, needs compute capability {}.{}", name, t.min_cc / 10, t.min_cc % 10);
      out.meta["gemm_" + name] = fmt::format("skipped: needs compute capability {}.{}", t.min_cc / 10, t.min_cc % 10);
      continue;
    }
    fill_random(weights.get(), weights.size(), t.ab);  // whole buffers: every slice (below) is read
    fill_random(activations.get(), activations.size(), t.ab);
    // Successive calls take their operands from successive slices of the buffers, so that a problem
    // smaller than the L2 cache does not find its inputs there from the call before (as a model's
    // weights would not be).
    auto launcher = [&](const LtMatmul& mm, const GemmShape& s) {
      const auto a_bytes = static_cast<std::size_t>(s.n * s.k) * t.ab_bytes, b_bytes = static_cast<std::size_t>(s.m * s.k) * t.ab_bytes,
                 d_bytes = static_cast<std::size_t>(s.m * s.n) * t.cd_bytes;
      const std::size_t slots = std::min({weights.size() / a_bytes, activations.size() / b_bytes, result.size() / d_bytes});
      return [&, a_bytes, b_bytes, d_bytes, slots, slot = std::size_t{0}]() mutable {
        mm.enqueue(weights.get() + slot * a_bytes, activations.get() + slot * b_bytes, result.get() + slot * d_bytes, workspace.get(),
                   stream.get());
        slot = (slot + 1) % slots;
      };
    };
    try {  // bring the clocks up to a loaded state before the first recorded point
      const GemmShape square{4096, 4096, 4096};
      const LtMatmul spin(lt.get(), t, square, device_scale);
      auto enqueue = launcher(spin, square);
      double spent = 0;
      for (int batch = 1; spent < (o.quick ? 0.05 : 0.2); batch = std::min(2 * batch, 64)) spent += timer.seconds(batch, enqueue);
    } catch (const GemmDeclined&) {
    }
    int declined = 0;
    double best = 0;
    const auto started = std::chrono::steady_clock::now();
    for (const auto& s : shapes) {
      stop_point();
      try {
        const LtMatmul mm(lt.get(), t, s, device_scale);
        const double sec = time_on_stream(gemm_sampling(o.quick), timer, stream.get(), graphs, launcher(mm, s));
        out.gemm.push_back(GemmSample{t.dtype, s.m, s.n, s.k, sec});
        best = std::max(best, s.flops() / sec);
        progress("gemm {} {}x{}x{}: {} ({:.1f} TFLOP/s)", name, s.m, s.n, s.k, human_seconds(sec), s.flops() / sec / 1e12);
      } catch (const GemmDeclined& e) {
        if (++declined <= 3) progress("gemm {} {}x{}x{}: skipped ({})", name, s.m, s.n, s.k, e.what());
      }
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    progress("gemm {}: {} shapes measured, {} declined, best {:.1f} TFLOP/s, {:.0f} s", name, shapes.size() - static_cast<std::size_t>(declined),
             declined, best / 1e12, took);
    out.meta["gemm_" + name] = fmt::format("{} shapes, {} declined by cuBLASLt, best {:.1f} TFLOP/s", shapes.size() - static_cast<std::size_t>(declined),
                                           declined, best / 1e12);
  }
  out.meta["gemm"] = kGemmMeta;
  out.meta["gemm_timing"] = graphs.enabled ? "samples replay a CUDA graph of one batch" : "plain launches (graph capture failed: " + graphs.why_not + ")";
}

// ---------------------------------------------------------------------------------------------
// Memory

std::uint64_t floor_power_of_two(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p <= x / 2) p *= 2;
  return p;
}

void memory_sweep(Measurements& out, const Options& o) {
  check(cudaSetDevice(0), "cudaSetDevice");
  const std::uint64_t top = floor_power_of_two(std::min<std::uint64_t>(GiB, o.max_bytes.value_or(GiB)));
  std::vector<std::size_t> sizes;
  for (std::uint64_t b = MiB; b <= top; b *= (o.quick ? 16 : 2)) sizes.push_back(b);
  if (sizes.empty()) {
    progress("memory: skipped, --max-bytes is below 1 MiB");
    out.meta["memory"] = "skipped: --max-bytes below 1 MiB";
    return;
  }
  if (sizes.back() != top) sizes.push_back(top);
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "cudaDeviceGetAttribute");
  DeviceMemory src(top, "copy source"), dst(top, "copy destination");
  check(cudaMemset(src.get(), 0, top), "cudaMemset");
  PinnedMemory host(top);
  Stream stream;
  EventTimer timer(stream.get());
  GraphMode graphs;
  struct Kind {
    MemoryKind kind;
    std::byte* to;
    const std::byte* from;
    cudaMemcpyKind direction;
  };
  auto* pinned = static_cast<std::byte*>(host.get());
  const std::array kinds{Kind{MemoryKind::d2d, dst.get(), src.get(), cudaMemcpyDeviceToDevice},
                         Kind{MemoryKind::h2d, dst.get(), pinned, cudaMemcpyHostToDevice},
                         Kind{MemoryKind::d2h, pinned, src.get(), cudaMemcpyDeviceToHost}};
  for (const Kind& k : kinds) {
    for (std::size_t bytes : sizes) {
      stop_point();
      // Successive copies walk through the whole buffers, so that a copy smaller than the L2 cache
      // finds neither its source nor its destination there from the copy before.
      const std::size_t slots = top / bytes;
      std::size_t slot = 0;
      const double sec = time_on_stream(copy_sampling(o.quick), timer, stream.get(), graphs, [&] {
        const std::size_t at = slot * bytes;
        slot = (slot + 1) % slots;
        check(cudaMemcpyAsync(k.to + at, k.from + at, bytes, k.direction, stream.get()), "cudaMemcpyAsync");
      });
      out.memory.push_back(MemorySample{k.kind, static_cast<double>(bytes), sec});
      progress("memory {} {}: {} ({:.1f} GB/s)", cs::calibrate::to_string(k.kind), human_bytes(static_cast<double>(bytes)), human_seconds(sec),
               static_cast<double>(bytes) / sec / 1e9);
    }
  }
  out.meta["memory"] = fmt::format(
      "GPU 0, cudaMemcpyAsync; h2d and d2h from and to pinned memory (cudaMallocHost); successive copies walk through {} buffers "
      "(L2 {}); {}",
      human_bytes(static_cast<double>(top)), human_bytes(l2),
      graphs.enabled ? "samples replay a CUDA graph of one batch" : "plain launches (graph capture failed: " + graphs.why_not + ")");
}

// ---------------------------------------------------------------------------------------------
// Collectives

struct LinkGuess {
  LinkClass link;
  std::string why;
};

LinkGuess detect_link(int ndev, Options::Link choice) {
  if (choice == Options::Link::nvlink) return {LinkClass::nvlink, "nvlink (--link nvlink)"};
  if (choice == Options::Link::pcie) return {LinkClass::pcie, "pcie (--link pcie)"};
  bool peer = true, atomics = true;
  for (int i = 0; i < ndev; ++i) {
    for (int j = 0; j < ndev; ++j) {
      if (i == j) continue;
      int can = 0, native = 0;  // a query that fails counts as "no"
      if (cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess) can = 0;
      if (cudaDeviceGetP2PAttribute(&native, cudaDevP2PAttrNativeAtomicSupported, i, j) != cudaSuccess) native = 0;
      (void)cudaGetLastError();
      peer = peer && can != 0;
      atomics = atomics && native != 0;
    }
  }
  // The CUDA runtime does not name the link; native peer atomics are an NVLink (or NVSwitch) feature
  // that PCIe peer-to-peer lacks, which makes them the runtime's best witness. --link overrides.
  if (peer && atomics) return {LinkClass::nvlink, "nvlink (auto: every pair of GPUs is peer-accessible with native atomics)"};
  return {LinkClass::pcie, fmt::format("pcie (auto: {})", peer ? "peer access without native atomics" : "not every pair of GPUs is peer-accessible")};
}

// The communicators of all local GPUs (ncclCommInitAll: rank i on GPU i).
class NcclComms {
 public:
  explicit NcclComms(int n) : comms_(static_cast<std::size_t>(n), nullptr) {
    std::vector<int> devices(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) devices[static_cast<std::size_t>(i)] = i;
    check(ncclCommInitAll(comms_.data(), n, devices.data()), "ncclCommInitAll");
  }
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;
  ~NcclComms() {
    // After a failure a communicator may hold work that never completes: abort instead of waiting.
    const bool failing = std::uncaught_exceptions() > 0;
    for (ncclComm_t c : comms_) {
      if (c) (void)(failing ? ncclCommAbort(c) : ncclCommDestroy(c));
    }
  }
  [[nodiscard]] ncclComm_t operator[](std::size_t i) const { return comms_[i]; }

 private:
  std::vector<ncclComm_t> comms_;
};

// One communicator per local GPU, a stream and a send and a receive buffer on each.
class NcclWorld {
 public:
  explicit NcclWorld(int n) : n_(n), comms_(n) {
    for (int i = 0; i < n; ++i) {
      check(cudaSetDevice(i), "cudaSetDevice");
      streams_.emplace_back();
    }
  }

  void allocate(std::size_t bytes) {
    for (int i = 0; i < n_; ++i) {
      check(cudaSetDevice(i), "cudaSetDevice");
      send_.emplace_back(bytes, fmt::format("NCCL send buffer on GPU {}", i));
      recv_.emplace_back(bytes, fmt::format("NCCL receive buffer on GPU {}", i));
      check(cudaMemset(send_.back().get(), 0, bytes), "cudaMemset");
      check(cudaMemset(recv_.back().get(), 0, bytes), "cudaMemset");
    }
    for (int i = 0; i < n_; ++i) {
      check(cudaSetDevice(i), "cudaSetDevice");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }

  // Enqueues one `op` of `bytes` (nccl-tests' size convention) on every GPU as one group. Float
  // elements, sum for the reductions; `bytes` must be a multiple of 4 (and of 4n where split by rank).
  void enqueue(CollectiveOp op, std::size_t bytes) {
    const std::size_t count = bytes / sizeof(float), per_rank = count / static_cast<std::size_t>(n_);
    ncclResult_t first = ncclSuccess;
    const char* first_what = "";
    auto keep = [&](ncclResult_t r, const char* what) {  // the group must end even when a call in it failed
      if (r != ncclSuccess && first == ncclSuccess) {
        first = r;
        first_what = what;
      }
    };
    check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < n_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      std::byte* s = send_[i].get();
      std::byte* d = recv_[i].get();
      ncclComm_t c = comms_[i];
      cudaStream_t st = streams_[i].get();
      switch (op) {
        case CollectiveOp::all_reduce: keep(ncclAllReduce(s, d, count, ncclFloat, ncclSum, c, st), "ncclAllReduce"); break;
        case CollectiveOp::all_gather: keep(ncclAllGather(s, d, per_rank, ncclFloat, c, st), "ncclAllGather"); break;
        case CollectiveOp::reduce_scatter: keep(ncclReduceScatter(s, d, per_rank, ncclFloat, ncclSum, c, st), "ncclReduceScatter"); break;
        case CollectiveOp::broadcast: keep(ncclBroadcast(s, d, count, ncclFloat, 0, c, st), "ncclBroadcast"); break;
        case CollectiveOp::all_to_all:  // per_rank elements to every rank (itself included), as nccl-tests' alltoall
          for (int p = 0; p < n_; ++p) {
            const std::size_t at = static_cast<std::size_t>(p) * per_rank * sizeof(float);
            keep(ncclSend(s + at, per_rank, ncclFloat, p, c, st), "ncclSend");
            keep(ncclRecv(d + at, per_rank, ncclFloat, p, c, st), "ncclRecv");
          }
          break;
        case CollectiveOp::send_recv:  // rank 0 -> rank 1; the other ranks stay idle
          if (r == 0) keep(ncclSend(s, count, ncclFloat, 1, c, st), "ncclSend");
          if (r == 1) keep(ncclRecv(d, count, ncclFloat, 0, c, st), "ncclRecv");
          break;
        case CollectiveOp::reduce: keep(ncclInvalidUsage, "reduce is not probed"); break;
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    check(first, first_what);
    check(end, "ncclGroupEnd");
  }

  void synchronize() {
    for (const Stream& s : streams_) check(cudaStreamSynchronize(s.get()), "cudaStreamSynchronize");
  }

 private:
  int n_;
  std::vector<DeviceMemory> send_, recv_;
  std::vector<Stream> streams_;
  NcclComms comms_;  // last: destroyed (or aborted) first, before the streams and buffers its work uses
};

void collective_sweep(Measurements& out, const Options& o, int ndev) {
  if (ndev < 2) {
    progress("collectives: skipped, one GPU is visible (collectives need at least two)");
    out.meta["collectives"] = "skipped: one GPU (collectives need at least two)";
    return;
  }
  const LinkGuess link = detect_link(ndev, o.link);
  progress("collectives: {} GPUs, link {}", ndev, link.why);
  NcclWorld world(ndev);

  // Every GPU holds a send and a receive buffer of the largest size: an all-reduce, broadcast or
  // all-to-all needs `bytes` in each, an all-gather `bytes` out, a reduce-scatter `bytes` in. The
  // largest size is the largest power of two, at most 8 GiB and --max-bytes, for which both fit in
  // the smallest free memory of any GPU after NCCL's setup, less a margin for the buffers NCCL
  // allocates at its first collectives (4 GiB or a tenth of the GPU, whichever is more).
  std::size_t free_min = std::numeric_limits<std::size_t>::max(), total_min = free_min;
  for (int i = 0; i < ndev; ++i) {
    std::size_t f = 0, t = 0;
    check(cudaSetDevice(i), "cudaSetDevice");
    check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    free_min = std::min(free_min, f);
    total_min = std::min(total_min, t);
  }
  const std::size_t margin = std::max<std::size_t>(4 * GiB, total_min / 10);
  const std::size_t room = free_min > margin ? (free_min - margin) / 2 : 0;
  std::uint64_t top = o.quick ? GiB : 8 * GiB;
  if (o.max_bytes) top = std::min(top, *o.max_bytes);
  top = floor_power_of_two(std::min<std::uint64_t>(top, room));
  if (top < 8) throw ProbeError(fmt::format("collectives: only {} of GPU memory is free", human_bytes(static_cast<double>(free_min))));
  world.allocate(top);
  out.meta["link"] = link.why;
  out.meta["collectives_max_bytes"] = fmt::format("{} (free GPU memory {}, margin {}, cap {})", top, human_bytes(static_cast<double>(free_min)),
                                                  human_bytes(static_cast<double>(margin)),
                                                  o.max_bytes ? "--max-bytes" : (o.quick ? "1 GiB (--quick)" : "8 GiB"));

  constexpr std::array ops{CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                           CollectiveOp::all_to_all, CollectiveOp::broadcast,  CollectiveOp::send_recv};
  for (CollectiveOp op : ops) {
    const bool split = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter || op == CollectiveOp::all_to_all;
    const int ranks = op == CollectiveOp::send_recv ? 2 : ndev;
    // Split operations need a whole number of floats per rank: a size is rounded down to a multiple
    // of 4n bytes (a no-op for powers of two once the size reaches 4n) and skipped below it.
    const std::size_t unit = sizeof(float) * (split ? static_cast<std::size_t>(ndev) : 1);
    std::vector<std::uint64_t> sizes;
    for (std::uint64_t size = 8; size <= top; size *= (o.quick ? 4 : 2)) sizes.push_back(size);
    if (sizes.back() != top) sizes.push_back(top);
    for (std::uint64_t size : sizes) {
      stop_point();
      const std::size_t bytes = static_cast<std::size_t>(size) / unit * unit;
      if (bytes == 0) continue;
      auto run = [&](int count) {
        world.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < count; ++i) world.enqueue(op, bytes);
        world.synchronize();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      };
      const double sec = median_seconds_per_call(collective_sampling(o.quick), run, run);
      CollectiveSample c{op, link.link, ranks, 1, static_cast<double>(bytes), sec};
      out.collectives.push_back(c);
      progress("{} {} over {} GPUs: {} (algbw {:.1f} GB/s, busbw {:.1f} GB/s)", cs::models::to_string(op), human_bytes(c.bytes), ranks,
               human_seconds(sec), c.algbw() / 1e9, c.busbw() / 1e9);
    }
  }
  out.meta["collectives"] = fmt::format(
      "NCCL, one process, ncclCommInitAll over {} GPUs; float elements, sum; out-of-place; all-to-all as grouped ncclSend/ncclRecv to every "
      "rank; send_recv from rank 0 to rank 1 (ranks = 2); wall clock over back-to-back groups until every stream drained",
      ndev);
}

// ---------------------------------------------------------------------------------------------
// Provenance

void describe(Measurements& m, int ndev, const Options& o) {
  m.meta["source"] = "clustersim-probe-cuda";
  m.meta["time"] = cs::calibrate::utc_timestamp();
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) m.meta["host"] = host;
  m.meta["sweep"] = o.quick ? "quick" : "full";
  m.meta["timing"] =
      "median over timings of back-to-back batches (batch sized to >= 0.5 ms for GEMMs and copies, >= 2 ms for collectives), after a "
      "discarded first call and a few milliseconds of warm-up; GEMMs and copies: CUDA events around the replay of a CUDA graph of one batch; "
      "collectives: steady clock from the first launch until every stream drained";
  m.meta["gpus"] = std::to_string(ndev);
  for (int d = 0; d < ndev; ++d) {
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    auto attr = [&](cudaDeviceAttr a) {
      int v = 0;
      check(cudaDeviceGetAttribute(&v, a, d), "cudaDeviceGetAttribute");
      return v;
    };
    char bus[32] = {};
    const bool have_bus = cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess;
    const std::string summary = fmt::format(
        "{}, compute capability {}.{}, {} SMs, {} memory ({} bytes), SM clock {} MHz, memory clock {} MHz, {}-bit memory bus, {} L2{}{}", p.name,
        p.major, p.minor, p.multiProcessorCount, human_bytes(static_cast<double>(p.totalGlobalMem)), p.totalGlobalMem,
        attr(cudaDevAttrClockRate) / 1000, attr(cudaDevAttrMemoryClockRate) / 1000, attr(cudaDevAttrGlobalMemoryBusWidth),
        human_bytes(attr(cudaDevAttrL2CacheSize)), have_bus ? ", PCI " : "", have_bus ? bus : "");
    m.meta[fmt::format("gpu{}", d)] = summary;
    if (d == 0) {
      m.meta["device"] = p.name;
      m.meta["compute_capability"] = fmt::format("{}.{}", p.major, p.minor);
      m.meta["sm_count"] = std::to_string(p.multiProcessorCount);
      m.meta["memory_bytes"] = std::to_string(p.totalGlobalMem);
      m.meta["sm_clock_mhz"] = std::to_string(attr(cudaDevAttrClockRate) / 1000);          // peak, from the attribute in kHz
      m.meta["memory_clock_mhz"] = std::to_string(attr(cudaDevAttrMemoryClockRate) / 1000);  // likewise
    }
  }
  int driver = 0, runtime = 0, nccl = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  check(ncclGetVersion(&nccl), "ncclGetVersion");
  m.meta["cuda_driver_api"] = version_string(driver, 1000, 0);
  m.meta["cuda_runtime"] = version_string(runtime, 1000, 0);
  m.meta["cublaslt"] = version_string(static_cast<long>(cublasLtGetVersion()), 10000, 100);
  m.meta["nccl"] = version_string(nccl, 10000, 100);
  std::ifstream nv("/proc/driver/nvidia/version");
  std::string line;
  if (nv && std::getline(nv, line)) {
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  <build date>", or for the open
    // modules "NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...": the version
    // is the first word after "Kernel Module" that starts with a digit and has a dot.
    const auto at = line.find("Kernel Module");
    std::istringstream words(at == std::string::npos ? line : line.substr(at));
    for (std::string w; words >> w;) {
      if (std::isdigit(static_cast<unsigned char>(w.front())) && w.find('.') != std::string::npos) {
        m.meta["driver"] = w;
        break;
      }
    }
  }
}

void write_outputs(const Measurements& m, const Options& o) {
  const std::string json = cs::calibrate::to_json(m);
  if (o.out) {
    if (o.out->has_parent_path()) fs::create_directories(o.out->parent_path());
    cs::reports::write_file_atomically(*o.out, json);
    progress("wrote {}", o.out->string());
  } else {
    std::fwrite(json.data(), 1, json.size(), stdout);
    std::fflush(stdout);
  }
  if (o.csv) {
    fs::create_directories(*o.csv);
    cs::calibrate::write_csv(m, *o.csv);
    progress("wrote gemm.csv, memory.csv and collectives.csv in {}", o.csv->string());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    auto parsed = parse_options(argc, argv);
    if (!parsed) return 0;
    o = *parsed;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "clustersim-probe-cuda: %s (try --help)\n", e.what());
    return 2;
  }

  int ndev = 0;
  const cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "clustersim-probe-cuda: no CUDA GPU is visible on this machine (%s)\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the device count is 0");
    return 3;
  }

  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  Measurements m;
  bool ok = true;
  auto section = [&](const char* name, bool wanted, auto&& body) {
    if (!wanted) {
      m.meta[name] = "not run (--only)";
      return;
    }
    const auto started = std::chrono::steady_clock::now();
    try {
      stop_point();
      body();
    } catch (const std::exception& ex) {
      progress("{} failed: {}", name, ex.what());
      m.meta[std::string(name) + "_error"] = ex.what();
      ok = false;
    }
    progress("{}: {:.0f} s", name, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  };
  try {
    describe(m, ndev, o);
  } catch (const std::exception& ex) {
    progress("reading the device properties failed: {}", ex.what());
    return 1;
  }
  // Memory first: it takes seconds, and a GEMM sweep stopped at its time limit would skip it.
  section("memory", o.memory, [&] { memory_sweep(m, o); });
  section("gemm", o.gemm, [&] { gemm_sweep(m, o); });
  section("collectives", o.collectives, [&] { collective_sweep(m, o, ndev); });
  try {
    write_outputs(m, o);
  } catch (const std::exception& ex) {
    progress("writing the measurements failed: {}", ex.what());
    return 1;
  }
  return ok ? 0 : 1;
}
