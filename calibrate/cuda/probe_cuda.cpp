// clustersim-probe-cuda: the first calibration probe on real GPUs. It measures, on the local
// machine, a cuBLAS GEMM sweep (bf16 and fp16, tensor cores, fp32 accumulate), device-to-device
// copy bandwidth, and NCCL all-reduce across all local GPUs, and prints one JSON document.
// `clustersim calibrate` (issue 5) grows this into the full probe set and fits profiles from it.
//
// Timing: CUDA events around `repeats` back-to-back launches after `warmup` launches; the median
// of the per-launch times is reported. nccl-tests' definitions: algbw = bytes / time,
// busbw = algbw * 2(n-1)/n for all-reduce (NVIDIA/nccl-tests doc/PERFORMANCE.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <nlohmann/json.hpp>

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "clustersim-probe-cuda: %s\n", what.c_str());
  std::exit(2);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) die(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) die(std::string(what) + ": " + ncclGetErrorString(r));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Times `fn` (which enqueues work on `stream`) and returns the median seconds per call.
template <class Fn>
double time_it(cudaStream_t stream, int warmup, int repeats, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  check(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    fn();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(times);
}

nlohmann::json gemm_sweep(int device, int warmup, int repeats) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublasCreate");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  check(cublasSetStream(handle, stream), "cublasSetStream");
  struct Shape { long m, n, k; };
  const std::vector<Shape> shapes{{1024, 1024, 1024}, {4096, 4096, 4096}, {8192, 8192, 8192},
                                  {2048, 2048, 13312}, {16384, 8192, 1024}, {8192, 28672, 8192}};
  long max_elems = 0;
  for (const auto& s : shapes) max_elems = std::max({max_elems, s.m * s.k, s.k * s.n, s.m * s.n});
  void *a = nullptr, *b = nullptr, *c = nullptr;
  check(cudaMalloc(&a, static_cast<size_t>(max_elems) * 2), "cudaMalloc A");
  check(cudaMalloc(&b, static_cast<size_t>(max_elems) * 2), "cudaMalloc B");
  check(cudaMalloc(&c, static_cast<size_t>(max_elems) * 2), "cudaMalloc C");
  check(cudaMemset(a, 0, static_cast<size_t>(max_elems) * 2), "cudaMemset");
  check(cudaMemset(b, 0, static_cast<size_t>(max_elems) * 2), "cudaMemset");
  nlohmann::json out = nlohmann::json::array();
  const float alpha = 1.0f, beta = 0.0f;
  for (const char* dtype : {"bf16", "fp16"}) {
    const cudaDataType_t t = std::string(dtype) == "bf16" ? CUDA_R_16BF : CUDA_R_16F;
    for (const auto& s : shapes) {
      auto launch = [&] {
        check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(s.m), static_cast<int>(s.n),
                           static_cast<int>(s.k), &alpha, a, t, static_cast<int>(s.m), b, t, static_cast<int>(s.k), &beta,
                           c, t, static_cast<int>(s.m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
      };
      const double sec = time_it(stream, warmup, repeats, launch);
      const double flops = 2.0 * s.m * s.n * s.k;
      out.push_back({{"dtype", dtype}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"seconds", sec}, {"tflops", flops / sec / 1e12}});
    }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  return out;
}

nlohmann::json copy_bandwidth(int device, int warmup, int repeats) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  nlohmann::json out = nlohmann::json::array();
  for (size_t bytes : {size_t(1) << 24, size_t(1) << 28, size_t(1) << 30}) {
    void *src = nullptr, *dst = nullptr;
    check(cudaMalloc(&src, bytes), "cudaMalloc");
    check(cudaMalloc(&dst, bytes), "cudaMalloc");
    const double sec = time_it(stream, warmup, repeats, [&] {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    });
    // A device-to-device copy reads and writes every byte: HBM traffic is twice the size.
    out.push_back({{"bytes", bytes}, {"seconds", sec}, {"copy_GBps", bytes / sec / 1e9}, {"hbm_traffic_GBps", 2.0 * bytes / sec / 1e9}});
    cudaFree(src);
    cudaFree(dst);
  }
  cudaStreamDestroy(stream);
  return out;
}

nlohmann::json nccl_all_reduce(int ndev, int warmup, int repeats) {
  std::vector<ncclComm_t> comms(static_cast<size_t>(ndev));
  std::vector<int> devs(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) devs[static_cast<size_t>(i)] = i;
  check(ncclCommInitAll(comms.data(), ndev, devs.data()), "ncclCommInitAll");
  std::vector<cudaStream_t> streams(static_cast<size_t>(ndev));
  std::vector<void*> bufs(static_cast<size_t>(ndev));
  const size_t max_bytes = size_t(1) << 30;
  for (int i = 0; i < ndev; ++i) {
    check(cudaSetDevice(i), "cudaSetDevice");
    check(cudaStreamCreate(&streams[static_cast<size_t>(i)]), "cudaStreamCreate");
    check(cudaMalloc(&bufs[static_cast<size_t>(i)], max_bytes), "cudaMalloc");
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t bytes = size_t(1) << 20; bytes <= max_bytes; bytes <<= 2) {
    auto launch = [&] {
      check(ncclGroupStart(), "ncclGroupStart");
      for (int i = 0; i < ndev; ++i) {
        check(ncclAllReduce(bufs[static_cast<size_t>(i)], bufs[static_cast<size_t>(i)], bytes / 4, ncclFloat, ncclSum,
                            comms[static_cast<size_t>(i)], streams[static_cast<size_t>(i)]),
              "ncclAllReduce");
      }
      check(ncclGroupEnd(), "ncclGroupEnd");
    };
    for (int i = 0; i < warmup; ++i) launch();
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
      for (int i = 0; i < ndev; ++i) check(cudaStreamSynchronize(streams[static_cast<size_t>(i)]), "sync");
      const auto t0 = std::chrono::steady_clock::now();
      launch();
      for (int i = 0; i < ndev; ++i) check(cudaStreamSynchronize(streams[static_cast<size_t>(i)]), "sync");
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double sec = median(times);
    const double algbw = bytes / sec / 1e9;
    out.push_back({{"op", "all_reduce"}, {"bytes", bytes}, {"ranks", ndev}, {"seconds", sec}, {"algbw_GBps", algbw},
                   {"busbw_GBps", algbw * 2.0 * (ndev - 1) / ndev}});
  }
  for (int i = 0; i < ndev; ++i) {
    cudaSetDevice(i);
    cudaFree(bufs[static_cast<size_t>(i)]);
    cudaStreamDestroy(streams[static_cast<size_t>(i)]);
    ncclCommDestroy(comms[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int warmup = 5, repeats = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      warmup = 2;
      repeats = 5;
    } else if (arg == "--help" || arg == "-h") {
      std::printf("usage: clustersim-probe-cuda [--quick]\nMeasures GEMM, copy bandwidth and NCCL all-reduce on local GPUs; prints JSON.\n");
      return 0;
    } else {
      std::fprintf(stderr, "clustersim-probe-cuda: unknown argument '%s' (try --help)\n", arg.c_str());
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "clustersim-probe-cuda: no CUDA device is visible on this machine\n");
    return 3;
  }
  int driver = 0, runtime = 0, nccl = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  nlohmann::json doc;
  doc["format"] = "clustersim-probe/1";
  doc["driver_version"] = driver;
  doc["runtime_version"] = runtime;
  doc["nccl_version"] = nccl;
  for (int d = 0; d < ndev; ++d) {
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    doc["devices"].push_back({{"index", d}, {"name", p.name}, {"sm_count", p.multiProcessorCount},
                              {"memory_bytes", p.totalGlobalMem}, {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)}});
  }
  doc["gemm"] = gemm_sweep(0, warmup, repeats);
  doc["copy"] = copy_bandwidth(0, warmup, repeats);
  if (ndev >= 2) {
    doc["nccl"] = nccl_all_reduce(ndev, warmup, repeats);
  } else {
    doc["nccl_skipped"] = "one GPU: collectives need at least two";
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
