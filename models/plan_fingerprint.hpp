// What a plan search's results depend on besides each plan: the fingerprint that ties a resumable
// results file (`clustersim plan --results`) to the inputs it was simulated for, so that a rerun
// on a changed scenario never reads back another scenario's step times. Internal to models.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "clustersim/models/plan_search.hpp"

namespace cs::models {

// 16 hex digits (FNV-1a, 64 bits) of a system as the simulation sees it: every device and link of
// its graph with their attributes, its fabric settings, and its GPU's hardware profile (all but
// where the profile was read from and its calibration notes). Two topologies with the same digest
// give every plan the same numbers.
std::string system_digest(const topology::Topology& topo);

// The inputs of every plan's simulated numbers besides the plan itself, as a JSON object whose
// fields a person can compare: clustersim's version and the digest of its simulator's sources; the
// model; precision, global batch, gradient bytes and tokens to train; the plan settings the search
// keeps from the scenario (the schedule without interleaving, pipeline-send overlap, bucket size, gradient-accumulation fusion,
// whole-gradient all-reduce, micro-batch group); and each system in order (topology name, GPU, GPU count, digest).
// Left out because they change no plan's numbers: the space's lists, prices, the scenario's own
// plan (beyond the settings above), names and descriptions.
nlohmann::json results_inputs(const TrainingJob& base, const std::vector<SearchSystem>& systems);

// 16 hex digits of results_inputs' canonical text.
std::string fingerprint(const nlohmann::json& inputs);

// Up to `most` of the fields in which two results_inputs differ, for a message:
// "precision: \"bf16\" in the file, \"fp8\" now; ...".
std::string inputs_difference(const nlohmann::json& file, const nlohmann::json& now, std::size_t most = 3);

}  // namespace cs::models
