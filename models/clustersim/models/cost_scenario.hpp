// Cost sheets (`cost_sheet:` files in scenarios/costs/, docs/cost.md) and the `cost:` section of a
// training or inference scenario, which `clustersim cost` reads.
//
//   cost_sheet:
//     name: public-clouds-2026-11
//     offerings:
//       - name: aws-p5-on-demand
//         provider: aws
//         region: us-east-1
//         gpu: H100-SXM5-80GB            # a hardware profile name
//         gpus_per_node: 8
//         pricing: on-demand             # on-demand | spot | reserved | owned
//         price_per_gpu_hour: 6.88       # or price_per_node_hour (owned: from its owned map)
//         billing: 1s                    # billing granularity
//         as_of: "2026-11"
//         source: "..."
//         spot: {preemption: {kind: poisson, per_node_hour: 0.0003}, zone: false, notice: 120s,
//                capacity_wait: 1h, max_lifetime: 24h}          # spot only; weibull {shape, scale: 40h}
//         reserved: {term: 365d, upfront_per_gpu: 0}            # reserved only
//         owned: {capex_per_gpu: 40000, lifetime_years: 4, wacc: 0.08, power_per_gpu: 1100W, pue: 1.3,
//                 price_per_kwh: 0.08, utilisation: 0.8}         # owned only
//
//   scenario:
//     ...
//     cost:
//       sheet: public-clouds-2026-11     # shipped name, path, or an inline cost_sheet map
//       offerings: [aws-p5-on-demand, aws-p5-spot]   # default: every offering of the scenario's GPU
//       reliability: {failures_per_1000_node_days: 3.79, detect: 5min, restart: 10min}
//       checkpoint: {write_bandwidth: 50GB/s, async: false, interval: 2h}   # interval default: Daly's
//       deadline: 40d                    # adds spot + on-demand fallback rows
//       elastic: true                    # adds rows that shrink to the data-parallel replicas up
//       trials: 1000
//       seed: 1
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clustersim/common/parts.hpp"
#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/models/cost.hpp"

namespace cs::models {

struct CostSheet {
  std::string name, description;
  std::vector<Offering> offerings;
};

CostSheet read_cost_sheet(const yaml::Node& body);
CostSheet load_cost_sheet_reference(const yaml::Node& node, IncludeStack& includes);

struct CostSection {
  CostSheet sheet;
  std::vector<Offering> offerings;  // those chosen
  Reliability reliability;
  std::optional<double> checkpoint_bandwidth;  // bytes/s the job writes at
  bool async = false;
  double interval_s = 0;
  CostOptions options;
  std::vector<std::string> notes;  // what the reader noticed but let pass (an offering left out that may be a typo)
  // Where the inputs that estimate_costs may refuse were given (empty: left to their defaults, where
  // the section stands in), so that a refusal points at the line to change.
  struct Origin {
    std::optional<yaml::Node> section, train_tokens, reliability, failures, detect, restart, checkpoint, write_bandwidth, interval, deadline, elastic;
  } origin;

  // Throws e as an InputError at the place of the input it blames.
  [[noreturn]] void refuse(const CostInputError& e) const;
};

// Reads a scenario's `cost:` section; `gpu` is the scenario's GPU profile name (offerings for another
// GPU are refused when named, left out when not). A training run's section describes its
// checkpoints, failures and trials; an inference scenario's holds the sheet and offerings only
// (`training` false: the training keys are refused, naming the key).
// `node_gpus`: the GPUs of one of the scenario's nodes, which a training offering's instances must
// match (0: not checked).
CostSection read_cost_section(const yaml::Node& node, const std::string& gpu, IncludeStack& includes, bool training = true, int node_gpus = 0);

}  // namespace cs::models
