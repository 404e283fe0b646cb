// Training scenario files: a model, a topology and a plan (docs/scenario-format.md, "training").
//
//   scenario:
//     name: gpt3-175b-1024-a100
//     kind: training
//     model: gpt3-175b                 # shipped preset, path, or inline map
//     topology: dgx-a100-superpod      # shipped preset, path, or inline map
//     parallelism: {tp: 8, pp: 8, dp: 16, vpp: 2, sequence_parallel: true, zero_stage: 1}
//     batch: {micro: 1, global: 1536}
//     recompute: selective
//     precision: bf16
//     train_tokens: 300e9
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "clustersim/common/input_error.hpp"
#include "clustersim/models/cost_scenario.hpp"
#include "clustersim/models/plan_search.hpp"
#include "clustersim/models/training.hpp"
#include "clustersim/topology/graph.hpp"

namespace cs::models {

struct TrainingScenario {
  std::string name;
  std::string description;
  TrainingJob job;
  std::shared_ptr<const topology::Topology> topology;
  std::filesystem::path file;
  SourceLocation batch_where;       // the `batch:` map, for errors the step's size causes
  std::optional<CostSection> cost;  // the `cost:` section, for `clustersim cost`
  SearchSpace search;               // the `search:` section over default_space, for `clustersim plan`
  std::vector<std::shared_ptr<const topology::Topology>> search_topologies;  // own search.systems' topologies
  // The plan search's price for the scenario's GPUs: the cheapest on-demand offering of the cost
  // section, or of search.cost_sheet (0 and empty: none, cost in GPU-hours).
  double price_per_gpu_hour = 0;
  std::string price_offering;
};

// Reads and checks a scenario; throws InputError with file, line and field for anything wrong,
// the plan's clashes with the model or the cluster included.
TrainingScenario load_training_scenario(const std::filesystem::path& file);
// Reads the `parallelism:` map over `plan` (defaults as documented).
void read_parallelism(const yaml::Node& node, ParallelismPlan& plan);

}  // namespace cs::models
