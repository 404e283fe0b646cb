// Fleet sizing for an inference scenario (`clustersim plan`, docs/serving.md#sizing): the cheapest
// configuration, among the offered GPUs, TP degrees and aggregated or disaggregated layouts, whose
// simulated run meets the scenario's SLOs for the required fraction of requests at the target rate.
//
// Search: for each (GPU offer, TP) the smallest replica count that meets the SLOs, found by doubling
// then bisecting (more replicas never lower attainment for the same arrivals, up to simulation
// noise); for disaggregation, the smallest total that meets them with one of the prefill:decode
// splits 1:(n-1), 1:3, 1:2, 1:1, 2:1, 3:1, (n-1):1 of it, the best split kept. Nodes are rented
// whole, so a fleet that meets the SLOs is then grown to the replicas its billed nodes hold (within
// max_gpus), at the same price, and reported so with the fewest that met them. Every configuration is
// a full simulation of the workload on a topology of whole nodes of that offer (a non-blocking
// two-tier fat tree of 64-port InfiniBand switches between nodes).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "clustersim/models/serving_scenario.hpp"

namespace cs::models {

struct SizingCandidate {
  std::string gpu;                 // hardware profile name
  std::string node;                // node template name
  int tp = 1;
  int pp = 1;                      // the scenario's pipeline stages per replica (not searched)
  int replicas = 0;                // aggregated: replicas; disaggregated: prefill + decode
  int prefill = 0, decode = 0;     // disaggregated pools (0 when aggregated)
  int gpus = 0;
  int gpus_billed = 0;             // every GPU of the nodes the fleet holds: nodes are rented whole
  double price_per_gpu_hour = 0;
  double cost_per_hour = 0;        // USD
  double cost_per_million_output_tokens = 0;
  double attainment = 0;           // fraction of requests meeting every SLO
  bool feasible = false;
  std::string reason;              // why not, when not feasible
  ServingMetrics metrics;          // of the configuration reported
  // A fleet that meets the SLO fills the whole nodes billed for it: these are then the fewest
  // replicas (and prefill replicas) that met it, the row's own being what those nodes hold. 0: the
  // row is the fewest (its nodes hold no more, or max_gpus allows no more).
  int fewest_replicas = 0, fewest_prefill = 0;
  // Grown, but stopped by max_gpus short of what the billed nodes hold.
  bool capped_by_max_gpus = false;
};

// A candidate's layout: "4 replicas", or "3P + 2D" when disaggregated; "-" when it has none.
std::string layout_text(const SizingCandidate& c);
// The fewest that met the SLO, in the candidate's layout ("5 replicas", "3P + 2D"); empty where the
// candidate is the fewest.
std::string fewest_text(const SizingCandidate& c);

struct SizingResult {
  double rate = 0;                 // req/s the sizing used
  int requests = 0;                // requests each configuration serves (the workload's span at `rate`)
  double span_s = 0;               // s over which they arrive
  double attainment = 0;           // required
  std::vector<SizingCandidate> candidates;  // one per (offer, TP, layout), cheapest feasible first
  int simulations = 0;
};

// Called before each configuration's simulation with what it is ("H100-SXM5-80GB TP 4, 6 replicas")
// and how many were simulated before it: a terminal's progress line.
using SizingProgress = std::function<void(const std::string& configuration, int simulated)>;

// Throws std::invalid_argument when the scenario has no sizing section.
SizingResult size_fleet(const InferenceScenario& sc, const SizingProgress& progress = {});

}  // namespace cs::models
