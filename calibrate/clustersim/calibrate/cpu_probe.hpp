// The CPU probe: the calibration pipeline's probes run on the machine's own CPU, so that probe,
// fit and profile are exercised end to end where there is no GPU (CI). Every number is a real
// measurement of this machine:
//   - GEMM: Eigen single-precision products C = A B (one thread, as Eigen runs without OpenMP) over
//     powers of two and a few uneven shapes; warm-up, then the median of repeats.
//   - Memory: std::memcpy between two buffers larger than the caches (kind "host").
//   - Transfers between processes: a child process and its parent exchange messages over a Unix
//     socket pair; one send/recv is the time for S bytes one way plus a 1-byte reply (link
//     "process", 2 ranks on 1 node).
// `cpu_base_profile` describes the CPU as a hardware profile the fit starts from: one compute unit
// (single-threaded Eigen), the fp32 peak = clock x FLOP per cycle of the vector instructions this
// binary was compiled for, and the clock from the kernel (cpufreq's maximum, else /proc/cpuinfo).
#pragma once

#include "clustersim/calibrate/measurements.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::calibrate {

struct CpuProbeOptions {
  bool quick = false;  // smaller sweeps and fewer repeats (seconds instead of tens of seconds)
};

// Throws std::runtime_error when the operating system refuses a resource (fork, socketpair).
Measurements probe_cpu(const CpuProbeOptions& options = {});

hardware::HardwareProfile cpu_base_profile();
// The same, with its fp32 peak raised when a measured GEMM runs faster than the GEMM model allows at
// an efficiency ceiling of 1 (the clock the kernel reports is below the one the cores ran at: a
// virtual machine without cpufreq reports the base clock while the cores boost), so that the fit
// has a ceiling of at most 1 that reproduces every sample.
hardware::HardwareProfile cpu_base_profile(const Measurements& measured);

}  // namespace cs::calibrate
