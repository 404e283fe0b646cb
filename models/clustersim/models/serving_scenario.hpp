// Inference scenario files (docs/serving.md):
//
//   scenario:
//     name: llama3-8b-chat-h100
//     kind: inference
//     model: llama3-8b                      # shipped preset, path, or inline map
//     topology: hgx-h200-node ...           # gives the GPU profile and the TP group's links
//     serving: {tp: 1, pp: 1, expert_parallel: false, replicas: 2, weights: bf16, kv_cache: bf16, max_num_seqs: 256,
//               max_num_batched_tokens: 8192, chunked_prefill: true, block_size: 16,
//               gpu_memory_utilization: 0.9, iteration_overhead: 0us,
//               router: round-robin,             # least-outstanding, kv-aware
//               batching: continuous,            # static (for comparison)
//               preemption: recompute,           # swap (with swap_space: 4GiB per GPU)
//               disaggregation: {prefill: 1, decode: 3}}   # instead of replicas
//     workload:
//       requests: 1000                       # or duration: 1h (with a rate)
//       arrival: {kind: poisson, rate: 20}   # gamma {rate, burstiness}, closed-loop {concurrency},
//                                            # offline, trace {file: requests.csv}
//       prompt_tokens: 512                   # or {kind: uniform, min, max}, {kind: lognormal, median,
//       output_tokens: {kind: lognormal, median: 200, sigma: 0.8}   #  sigma}, {kind: empirical, values}
//       shared_prefix: {tokens: 1000, groups: 4}   # optional: system prompts shared by the requests
//       seed: 1
//     slo: {ttft: 2s, tpot: 100ms}          # optional: goodput counts requests meeting all given
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "clustersim/models/cost_scenario.hpp"
#include "clustersim/models/serving.hpp"
#include "clustersim/topology/graph.hpp"
#include "clustersim/topology/node_template.hpp"

namespace cs::models {

// A generated workload's recipe, kept so that sizing can replay it at another rate.
struct WorkloadRecipe {
  ArrivalProcess arrivals;
  LengthDistribution prompt, output;
  int requests = 0;       // when given as a count
  double duration = 0;    // s, when given as a duration (requests = duration x rate)
  std::uint64_t seed = 1;
  SharedPrefix prefix;
  int context = 0;        // tokens a request may hold (max_model_len): lengths are drawn to fit it

  // The seconds its arrivals span: the duration, or a count's at the workload's own rate (0 for
  // offline and closed-loop load).
  [[nodiscard]] double span() const;
  // Requests at `rate` requests/s over the same span (the count itself without a rate): a fleet
  // sized or swept at a higher rate must keep up for as long, not absorb a shorter burst.
  [[nodiscard]] double count_at(double rate) const;
  // The workload replayed at `rate` requests/s over the same span, with the same lengths and seed;
  // InputError naming `file` when its lengths cannot fit the context.
  [[nodiscard]] std::vector<ServingRequest> generate_at(double rate, const std::filesystem::path& file) const;
};

// What `clustersim plan` may buy for an inference scenario (the `sizing` section).
struct SizingOffer {
  topology::NodeTemplate node;       // its GPU and node layout
  double price_per_gpu_hour = 0;     // USD
  std::string as_of, source;         // the price's date and where it was read
};
struct SizingSpec {
  std::vector<SizingOffer> offers;
  std::vector<int> tp;               // TP degrees to try; empty: powers of two up to a node's GPUs
  bool disaggregation = false;       // also try prefill/decode pools
  double attainment = 0.9;           // the fraction of requests that must meet every SLO
  int max_gpus = 64;                 // per configuration
  double rate = 0;                   // target req/s; 0: the workload's own
};

struct InferenceScenario {
  std::string name;
  std::string description;
  ReplicaConfig replica;
  int replicas = 1;  // every replica, prefill and decode ones included
  Router router = Router::round_robin;
  std::optional<Disaggregation> disaggregation;
  std::vector<ServingRequest> requests;
  std::optional<ClosedLoop> closed_loop;
  Slo slo;
  std::string workload_text;  // a one-line description of the workload
  std::optional<WorkloadRecipe> recipe;  // absent for traces and closed loops
  std::optional<SizingSpec> sizing;
  std::optional<CostSection> cost;  // the `cost:` section, for `clustersim cost`
  std::shared_ptr<const topology::Topology> topology;
  std::filesystem::path file;
};

// The `kind` of a scenario file (training or inference), read without loading the rest.
std::string scenario_kind(const std::filesystem::path& file);

// Reads and checks an inference scenario; throws InputError naming file, line and field.
InferenceScenario load_inference_scenario(const std::filesystem::path& file);

struct InferenceResult {
  std::vector<ReplicaRun> replicas;      // aggregated; or the prefill replicas, then the decode ones
  std::vector<RequestResult> requests;   // in id order
  ServingMetrics metrics;
  std::int64_t kv_blocks_per_replica = 0;
  std::uint64_t events = 0;
};
// The time of a TP all-reduce of `bytes` over the first `tp` GPUs of the topology's first node, from
// the collective model, simulated at powers of two and interpolated linearly in bytes between the two
// around the size. Throws std::invalid_argument when a node has fewer than `tp` GPUs.
std::function<double(double bytes)> tp_all_reduce_seconds(const std::shared_ptr<const topology::Topology>& topo, int tp);

// The time of a replica's pipeline send across one stage boundary: each of the stage's tp GPUs sends
// `bytes` to its counterpart in the next stage, all at once on the topology (stages placed as
// ServingLayout places them), from the collective model, cached by
// replica, boundary and power-of-two size and interpolated between the two around the size. Until
// 2026-12-06 every boundary was timed
// as the first replica's first, so a later boundary that crossed nodes cost an NVLink send.
std::function<double(int replica, int boundary, double bytes)> pp_send_seconds(const std::shared_ptr<const topology::Topology>& topo, int tp, int pp);

// The bottleneck bandwidth (bytes/s) between the first GPU and the nearest CPU of its node, which
// swap traffic takes; 0 when no CPU is reachable.
double host_link_bandwidth(const topology::Topology& topo);

// Where a fleet's TP groups sit: stage s of replica k (prefill replicas first when disaggregated) is
// TP group k x pp + s; groups fill each node in topology order with as many whole groups as it
// holds, a group never spanning two nodes, and a node's GPUs past its last whole group stay idle (TP
// 16 on a 72-GPU NVL72 rack: 4 groups, 8 idle; where tp divides the node, replica k holds GPUs
// [k tp pp, (k+1) tp pp) as before). Until 2026-12-07 groups were packed GPU after GPU, so a TP that
// did not divide the node was refused once a group reached a node's edge.
class ServingLayout {
 public:
  ServingLayout(const topology::Topology& topo, int tp);
  // The index (in the topology's GPU order) of group g's first GPU; its GPUs are the tp from it.
  // Throws std::invalid_argument past the groups the topology holds.
  [[nodiscard]] std::size_t first_gpu(int group) const;
  [[nodiscard]] int groups() const { return static_cast<int>(first_.size()); }
  // The GPUs of the nodes that groups [0, n) sit on: whole nodes, as they are rented.
  [[nodiscard]] int gpus_billed(int n) const;

 private:
  int tp_ = 1;
  std::vector<std::size_t> first_;   // per group
  std::vector<int> node_gpus_;       // per group: the GPUs of its node
  std::vector<int> node_;            // per group: its node
};

// Throws std::invalid_argument when the topology's nodes do not hold replicas x pp TP groups.
void check_placement(const topology::Topology& topo, int tp, int pp, int replicas);
// Fills the disaggregation's network and KV-copy flows from the topology, for replicas of tp x pp
// GPUs placed as ServingLayout places them: GPU j of the prefill replica sends its share to GPU j of
// the decode replica, routed as NCCL's send/receive is.
void kv_transfer_network(const std::shared_ptr<const topology::Topology>& topo, int tp, int pp, Disaggregation& d);

// Runs the workload on the scenario's replicas behind its router, on one event engine.
InferenceResult simulate_inference(const InferenceScenario& sc);

}  // namespace cs::models
