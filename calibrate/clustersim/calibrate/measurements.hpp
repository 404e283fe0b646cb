// Raw calibration measurements: what a probe measured, before any fit.
//
// One format for every source (the CUDA probe, the CPU probe, nccl-tests output), so the fits never
// care where numbers came from. On disk it is JSON, format "clustersim-measurements/1":
//
//   {"format": "clustersim-measurements/1",
//    "meta": {"source": "...", "device": "...", "driver": "...", ...},    free-form provenance strings
//    "gemm": [{"dtype": "bf16", "m": 4096, "n": 4096, "k": 4096, "seconds": 1.8e-4}, ...],
//    "memory": [{"kind": "d2d", "bytes": 1073741824, "seconds": 5.1e-4}, ...],
//    "collectives": [{"op": "all_reduce", "link": "nvlink", "ranks": 8, "nodes": 1,
//                     "bytes": 1048576, "seconds": 2.2e-5, "algorithm": "ring"}, ...],
//    "attention": [{"backend": "cudnn", "pass": "forward", "batch": 1, "heads": 16, "kv_heads": 16,
//                   "seq": 4096, "head_dim": 128, "seconds": 1.5e-4, "sm_count": 132}, ...]}
//
// "attention" (optional) holds fused causal attention kernels, 16-bit, as scripts/torch-probe.py
// measures them (read_torch_probe turns its file into these records); "kv_heads" is optional (the
// same as heads when absent; fewer for grouped-query attention), and so is "sm_count", the SMs of
// the GPU that ran the kernel (the fit counts the causal tail in SMs).
//
// A collective's "algorithm" is optional: the algorithm the run forced (NCCL_ALGO), absent when NCCL
// chose.
//
// Times are the median seconds of one call. Collective sizes follow nccl-tests (see
// models/collective.hpp); algbw and busbw are derived, never stored. `write_csv` writes the same
// records as CSV files for spreadsheets.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "clustersim/hardware/dtype.hpp"
#include "clustersim/models/collective.hpp"
#include "clustersim/reports/atomic_file.hpp"

namespace cs::calibrate {

struct GemmSample {
  hardware::Dtype dtype = hardware::Dtype::bf16;
  std::int64_t m = 0, n = 0, k = 0;
  double seconds = 0;
  std::string origin{};  // the file and record it was read from ("m.json gemm[3]"), for messages; empty if built in code
  [[nodiscard]] double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

// d2d: device-to-device copy (HBM read + write); h2d / d2h: pinned host transfers over PCIe;
// host: a host memory copy (the CPU probe).
enum class MemoryKind { d2d, h2d, d2h, host };
std::string_view to_string(MemoryKind k);

struct MemorySample {
  MemoryKind kind = MemoryKind::d2d;
  double bytes = 0;  // bytes copied (a copy reads and writes each once)
  double seconds = 0;
};

// Link classes a collective measurement characterises: nvlink (GPUs of one node over NVLink or
// NVSwitch), pcie (GPUs of one node over PCIe), network (GPUs of several nodes), process (the CPU
// probe: processes of one machine through the kernel).
enum class LinkClass { nvlink, pcie, network, process };
std::string_view to_string(LinkClass c);

struct CollectiveSample {
  models::CollectiveOp op = models::CollectiveOp::all_reduce;
  LinkClass link = LinkClass::nvlink;
  int ranks = 2;
  int nodes = 1;
  double bytes = 0;
  double seconds = 0;
  std::string algorithm = "";  // forced NCCL algorithm (ring, tree, nvls, ...); empty: NCCL's own choice
  [[nodiscard]] double algbw() const { return bytes / seconds; }
  [[nodiscard]] double busbw() const { return algbw() * models::bus_factor(op, ranks); }
};

// One fused causal attention kernel (FlashAttention-style), forward or backward: `batch` sequences
// of `seq` tokens, `heads` query heads of `head_dim` sharing `kv_heads` key/value heads, in 16 bits,
// by `backend` (cudnn, flash, ...: a name, kept as measured). The FLOPs do not depend on kv_heads.
struct AttentionSample {
  std::string backend = "cudnn";
  bool backward = false;
  int batch = 1, heads = 1, seq = 1, head_dim = 128;
  double seconds = 0;
  int kv_heads = 0;  // 0: heads (multi-head attention)
  int sm_count = 0;  // the GPU's SMs; 0: not recorded
  // The pass's FLOPs: forward 2 x batch x heads x seq^2 x head_dim (QK^T and PV over the causal
  // half), backward 2.5 x that (hardware::kAttentionBackwardFlops).
  [[nodiscard]] double flops() const;
  // One block of hardware::kAttentionBlockRows queries walking the whole sequence, in the same pass.
  [[nodiscard]] double row_flops() const;
};

struct Measurements {
  std::map<std::string, std::string> meta;
  std::vector<GemmSample> gemm;
  std::vector<MemorySample> memory;
  std::vector<CollectiveSample> collectives;
  std::vector<AttentionSample> attention;

  // Appends another set (meta keys of `other` are kept under "<key>" unless already present).
  // Throws InputError if the two name different devices.
  void append(const Measurements& other);
  [[nodiscard]] bool empty() const { return gemm.empty() && memory.empty() && collectives.empty() && attention.empty(); }
};

// The GPU model named in a device or profile name ("H100" in "NVIDIA H100 80GB HBM3", "A100" in
// "a100-sxm4-80gb"): a token of one or two capitals and two or three digits; empty when none.
std::string gpu_model_of(const std::string& name);

// JSON in the format above. `from_json` throws InputError naming `file` and the record at fault
// (a missing or mistyped field, an unknown dtype, op or kind, a non-positive size or time).
std::string to_json(const Measurements& m);
Measurements from_json(const std::string& text, const std::filesystem::path& file);
Measurements load_measurements(const std::filesystem::path& file);
// The current time as ISO 8601 UTC ("2026-12-02T20:27:25Z"), for the `time` of a probe's meta.
std::string utc_timestamp();

// Writes gemm.csv, memory.csv and collectives.csv into `dir` (atomically, each), and attention.csv
// when there are attention samples. Returns the names written.
std::vector<std::string> write_csv(const Measurements& m, const std::filesystem::path& dir);
// The same files' names and contents, to be written with others (reports::write_files_atomically).
std::vector<reports::OutputFile> csv_files(const Measurements& m);
// attention.csv's first line (written only when there are attention kernels).
inline constexpr const char* kAttentionCsvHeader = "backend,pass,batch,heads,kv_heads,seq,head_dim,seconds,tflops";

// Reads scripts/torch-probe.py's output ("clustersim-torch-probe/1"): its attention samples, and
// the GPU and library versions as meta. The other sections (ops, layer, step) are not fitted and
// are skipped. Throws InputError naming the file and the field at fault.
Measurements read_torch_probe(const std::filesystem::path& file);

}  // namespace cs::calibrate
