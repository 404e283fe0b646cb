#include "clustersim/calibrate/cpu_probe.hpp"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Core>
#include <fmt/format.h>

#include "clustersim/hardware/gemm_model.hpp"

namespace cs::calibrate {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The seconds of each of `repeats` runs of fn, after `warmup` untimed ones.
template <class Fn>
std::vector<double> run_times(int warmup, int repeats, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return t;
}

template <class Fn>
double time_median(int warmup, int repeats, Fn&& fn) {
  return median(run_times(warmup, repeats, fn));
}

// The fastest of `repeats` runs: for a round trip between two processes, which a loaded machine
// delays by whole scheduler slices (the median of 5 had come out at 4 ms for 8 bytes beside 30 us
// at 128 B, and the sweep was refused as impossible); delays only add, so the fastest is the cost.
template <class Fn>
double time_fastest(int warmup, int repeats, Fn&& fn) {
  const std::vector<double> t = run_times(warmup, repeats, fn);
  return *std::min_element(t.begin(), t.end());
}

// FLOP per cycle of one core with the vector instructions this translation unit was compiled for, as an
// upper bound over current cores: two FMA pipes of 16 (AVX-512) or 8 (AVX2) floats, two FLOP each
// (Intel Optimization Reference Manual, Skylake-SP and Haswell port tables); without FMA, two multiply
// and two add pipes (AMD Zen's four FP pipes, Software Optimization Guide for AMD Family 17h) of 8
// (AVX) or 4 (SSE2) floats. The fit only needs the peak not to be exceeded.
double flops_per_cycle() {
#if defined(__AVX512F__) && defined(__FMA__)
  return 64;
#elif defined(__AVX2__) && defined(__FMA__)
  return 32;
#elif defined(__AVX__)
  return 32;
#else
  return 16;
#endif
}

const char* vector_isa() {
#if defined(__AVX512F__) && defined(__FMA__)
  return "AVX-512 + FMA";
#elif defined(__AVX2__) && defined(__FMA__)
  return "AVX2 + FMA";
#elif defined(__AVX__)
  return "AVX";
#else
  return "SSE2";
#endif
}

std::string first_cpuinfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "";
}

// The core clock in Hz: cpufreq's maximum when the kernel exposes it, else /proc/cpuinfo's MHz.
double cpu_clock_hz() {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (f >> khz && khz > 0) return khz * 1e3;
  try {
    const double mhz = std::stod(first_cpuinfo("cpu MHz"));
    if (mhz > 0) return mhz * 1e6;
  } catch (const std::exception&) {
  }
  return 2e9;  // fallback when the kernel says nothing: the peak is then only a starting point
}

void gemm_sweep(Measurements& out, bool quick) {
  const std::vector<int> sizes = quick ? std::vector<int>{32, 64, 128, 256} : std::vector<int>{32, 64, 128, 256, 512};
  struct Shape {
    int m, n, k;
  };
  std::vector<Shape> shapes;
  for (int m : sizes) {
    for (int n : sizes) {
      for (int k : sizes) shapes.push_back({m, n, k});
    }
  }
  // Uneven shapes, as a transformer layer sharded by TP produces (not multiples of the tiles).
  for (Shape s : {Shape{96, 160, 200}, Shape{320, 48, 128}, Shape{200, 200, 72}}) shapes.push_back(s);
  const int repeats = quick ? 3 : 7;
  for (const Shape& s : shapes) {
    Eigen::MatrixXf a = Eigen::MatrixXf::Constant(s.m, s.k, 0.5f), b = Eigen::MatrixXf::Constant(s.k, s.n, 0.25f), c(s.m, s.n);
    const double flops = 2.0 * s.m * s.n * s.k;
    // Enough calls per timed sample that a sample lasts about a millisecond.
    const int calls = std::max(1, static_cast<int>(2e7 / flops));
    const double t = time_median(1, repeats, [&] {
      for (int i = 0; i < calls; ++i) c.noalias() = a * b;
    });
    out.gemm.push_back({hardware::Dtype::fp32, s.m, s.n, s.k, t / calls});
  }
}

void copy_sweep(Measurements& out, bool quick) {
  const std::size_t max_bytes = quick ? (std::size_t(1) << 26) : (std::size_t(1) << 28);
  std::vector<char> src(max_bytes, 1), dst(max_bytes, 0);
  // From 16 MiB up: larger than the last-level caches of most machines, so the copy reaches memory.
  for (std::size_t bytes = std::size_t(1) << 24; bytes <= max_bytes; bytes <<= 1) {
    const double t = time_median(1, quick ? 3 : 5, [&] {
      std::memcpy(dst.data(), src.data(), bytes);
      src[bytes / 2] ^= dst[bytes / 3];  // keeps the copy from being optimised away
    });
    out.memory.push_back({MemoryKind::host, static_cast<double>(bytes), t});
  }
}

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that died gives EPIPE here instead of killing this process with SIGPIPE.
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(std::string("cpu probe: write to the peer process failed: ") + std::strerror(errno));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}
void read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw std::runtime_error(std::string("cpu probe: read from the peer process failed: ") + (r == 0 ? "closed" : std::strerror(errno)));
    p += r;
    n -= static_cast<std::size_t>(r);
  }
}

// Waits for a child process, through interruptions by signals; returns its status.
int wait_for(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// send/recv between this process and a child over a Unix socket pair.
void process_sweep(Measurements& out, bool quick) {
  const std::size_t max_bytes = quick ? (std::size_t(1) << 22) : (std::size_t(1) << 26);
  const int repeats = quick ? 21 : 31;  // round trips a size, the fastest kept (the peer knows the count)
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error(std::string("cpu probe: socketpair failed: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("cpu probe: fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // The peer: for each message, read it whole and answer with one byte. It knows the sizes. Nothing
    // may unwind out of the child into the parent's code: every failure ends it with _exit.
    ::close(fds[0]);
    try {
      std::vector<char> buf(max_bytes);
      for (std::size_t bytes = 8; bytes <= max_bytes; bytes <<= 1) {
        for (int i = 0; i < repeats + 1; ++i) {
          read_all(fds[1], buf.data(), bytes);
          write_all(fds[1], buf.data(), 1);
        }
      }
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::vector<char> buf(max_bytes, 7);
  try {
    for (std::size_t bytes = 8; bytes <= max_bytes; bytes <<= 1) {
      const double t = time_fastest(1, repeats, [&] {
        write_all(fds[0], buf.data(), bytes);
        read_all(fds[0], buf.data(), 1);
      });
      out.collectives.push_back({models::CollectiveOp::send_recv, LinkClass::process, 2, 1, static_cast<double>(bytes), t});
    }
  } catch (...) {
    ::close(fds[0]);
    wait_for(child);
    throw;
  }
  ::close(fds[0]);
  const int status = wait_for(child);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("cpu probe: the peer process failed");
}

}  // namespace

Measurements probe_cpu(const CpuProbeOptions& options) {
  Measurements m;
  m.meta["source"] = "clustersim calibrate --device cpu";
  m.meta["device"] = first_cpuinfo("model name").empty() ? "unknown CPU" : first_cpuinfo("model name");
  m.meta["hardware_threads"] = std::to_string(std::thread::hardware_concurrency());
  m.meta["clock"] = fmt::format("{:.0f} MHz", cpu_clock_hz() / 1e6);
  m.meta["vector_isa"] = vector_isa();
  m.meta["eigen"] = fmt::format("{}.{}.{}", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
  m.meta["time"] = utc_timestamp();
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) m.meta["host"] = host;
  m.meta["sweep"] = options.quick ? "quick" : "full";
  gemm_sweep(m, options.quick);
  copy_sweep(m, options.quick);
  process_sweep(m, options.quick);
  return m;
}

hardware::HardwareProfile cpu_base_profile() {
  hardware::HardwareProfile hw;
  const std::string model = first_cpuinfo("model name");
  hw.name = "cpu-" + (model.empty() ? std::string("unknown") : model);
  std::replace(hw.name.begin(), hw.name.end(), ' ', '-');
  hw.vendor = first_cpuinfo("vendor_id");
  hw.architecture = "cpu";
  hw.sm_count = 1;
  hw.boost_clock = Hertz(cpu_clock_hz());
  hw.peak_flops[hardware::Dtype::fp32] = FlopsPerSec(cpu_clock_hz() * flops_per_cycle());
  hw.gemm.max_efficiency[hardware::Dtype::fp32] = 0.5;
  hw.gemm.tile_ridge_intensity = 16;
  hw.gemm.k_half = 16;
  // No datasheet figure: a starting value that the copy probe replaces with the measured rate.
  hw.memory_bandwidth = BytesPerSec(10e9);
  hw.gemm.memory_efficiency = 1.0;
  hw.memory_capacity = Bytes(static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
  hw.kernel_launch_overhead = Seconds(1e-7);
  return hw;
}

hardware::HardwareProfile cpu_base_profile(const Measurements& measured) {
  hardware::HardwareProfile hw = cpu_base_profile();
  // How far above the base peak the fastest GEMM measured runs: the peak (and the clock) rise by that
  // much and no more. Measured against the GEMM model's rate at a ceiling of 1 instead, whose GPU
  // tiles and K-loop ramp put a 32^3 product at a sixth of the peak, it had risen 6x (a 16 GHz clock
  // beside a 2.6 GHz one, and a peak five times any rate measured; a probe). The fit's shape terms
  // take up the rest.
  double need = 1.0;
  for (const auto& g : measured.gemm) {
    if (g.dtype != hardware::Dtype::fp32 || g.seconds <= 0) continue;
    need = std::max(need, g.flops() / g.seconds / hw.peak(hardware::Dtype::fp32).value());
  }
  if (need > 1.0) {
    hw.peak_flops[hardware::Dtype::fp32] = FlopsPerSec(hw.peak(hardware::Dtype::fp32).value() * need);
    hw.boost_clock = Hertz(hw.boost_clock.value() * need);
  }
  return hw;
}

}  // namespace cs::calibrate
