// The clustersim-validation/1 format (../shared/validation/README.md): published, measured cases
// the simulator is compared against. The reader checks every documented field's type and rejects
// unknown fields; only what a supported kind needs is kept in typed form.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/models/transformer.hpp"

namespace cs::validate {

struct ClusterSpec {
  std::string gpu;
  int gpus = 0;
  int gpus_per_node = 0;
  std::string scale_up_kind;
  int domain_gpus = 0;
  std::string fabric;         // infiniband | roce | omnipath | efa (empty: none given)
  double gbps_per_gpu = 0;
  std::string fabric_topology;
  bool fabric_assumed = false;
};

struct GemmSpec {
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype;
};

struct CollectiveSpec {
  std::string op;
  double bytes = 0;
  std::string algorithm;  // empty: NCCL's choice
};

// A training case's model and plan as published; std::nullopt / "unknown" where the source is silent.
struct TrainingSpec {
  models::TransformerSpec model;
  int tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
  std::optional<int> vpp;
  std::optional<int> zero_stage;
  std::string sequence_parallel = "unknown";  // true | false | implied | unknown
  std::optional<int> micro_batch;
  int global_batch = 0;
  std::string recompute = "unknown";
  std::string precision = "bf16";
  // Plan and batch keys the case leaves out, read as 1 (a parallel degree) or as unknown (the rest);
  // listed among the defaults applied, as the format does not make them optional.
  std::vector<std::string> not_given;
};

// An inference case's serving setup and workload as published.
struct InferenceSpec {
  int tp = 1, pp = 1, replicas = 1;
  std::string weights = "bf16";
  std::string kv_cache = "unknown";
  std::string engine;
  int input_tokens = 0, output_tokens = 0;
  std::string arrival = "offline";  // offline | closed-loop | poisson
  int concurrency = 0;
  double rate_rps = 0;
};

struct Case {
  std::string id;
  std::string kind;  // training | inference | gemm | collective
  std::string source;
  std::string confidence;
  ClusterSpec cluster;
  std::optional<GemmSpec> gemm;
  std::optional<CollectiveSpec> collective;
  std::optional<TrainingSpec> training;
  std::optional<InferenceSpec> inference;  // the model is in `training->model`
  std::map<std::string, double> measured;
  std::string file;
  int line = 0;
};

// Reads every case of a file; throws InputError (file, line, field) on anything malformed.
std::vector<Case> read_cases(const std::filesystem::path& file);

}  // namespace cs::validate
