// Collectives as flows on the topology.
//
// A collective becomes phases of concurrent flows between GPUs, routed on the topology's real paths
// (ECMP, PXN), so that collectives running at the same time contend exactly where they share links.
// Each flow of a phase carries the bytes that algorithm moves over that hop in total (a ring edge
// carries 2(n-1)/n x S / rings for an all-reduce, as NCCL's pipelined chunks add up to), and starts
// after the latency NCCL's model gives the algorithm, so an uncontended ring takes exactly
//   2(n-1) alpha + 2(n-1)/n x S / B.
// Links run at the bandwidth NCCL's model gives them (NVLink per link by architecture, PCIe per
// lane), not the datasheet's raw rate. Algorithms and the choice between them: docs/collectives.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "clustersim/models/collective.hpp"
#include "clustersim/models/nccl_tuning.hpp"
#include "clustersim/sim/task_graph.hpp"
#include "clustersim/topology/routing.hpp"

namespace cs::models {

struct CollectivePhase {
  CollectivePhase(std::string name, std::vector<sim::FlowSpec> flows)
      : name(std::move(name)), flows(std::make_shared<const std::vector<sim::FlowSpec>>(std::move(flows))) {}
  std::string name;
  sim::SharedFlows flows;  // shared with the transfers add_to makes of it
};

struct CollectivePlan {
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  int channels = 1;
  CommShape shape;
  AlgoCost model;                    // NCCL's prediction for the chosen algorithm
  std::vector<AlgoCost> candidates;  // everything NCCL's model considered
  std::vector<CollectivePhase> phases;  // run one after another
  std::vector<int> gpus;             // GPU ranks (topology order) taking part
};

struct CollectiveResult {
  CollectivePlan plan;
  Seconds time;
  BytesPerSec algbw;
  BytesPerSec busbw;
  sim::RunStats stats;
};

struct CollectiveOptions {
  bool pxn = true;  // NCCL 2.12+ default on rail-optimized systems
};

class CollectiveModel {
 public:
  // Keeps a reference to the topology, which must outlive the model.
  explicit CollectiveModel(const topology::Topology& topo, CollectiveOptions options = {});
  CollectiveModel(topology::Topology&&, CollectiveOptions = {}) = delete;

  // Validates the request and builds its flows. Throws std::invalid_argument with a clear
  // message for an impossible request (unknown op for the algorithm, a group of one, ...).
  [[nodiscard]] CollectivePlan plan(const Collective& c) const;
  // Simulates one collective alone on the topology; `progress`, when given, is called every 20,000
  // events with the simulated time and the counts so far (the 16K-GPU tree all-reduce runs minutes).
  [[nodiscard]] CollectiveResult simulate(const Collective& c, const std::function<void(sim::Time, const sim::RunStats&)>& progress = {}) const;
  // Simulates collectives started together, with nothing else on the topology: when the last ends.
  [[nodiscard]] Seconds simulate_together(const std::vector<Collective>& collectives) const;
  // Adds a planned collective to a task graph on stream `stream`; returns its first and last task.
  std::pair<sim::TaskGraph::TaskId, sim::TaskGraph::TaskId> add_to(sim::TaskGraph& graph, const CollectivePlan& plan,
                                                                   int stream = 1) const;

  // Directed link capacities (bytes/s) the flows see, indexed by link id.
  [[nodiscard]] const std::vector<double>& capacities() const { return capacities_; }
  [[nodiscard]] const topology::Topology& topology() const { return topo_; }
  [[nodiscard]] const topology::Router& router() const { return router_; }
  [[nodiscard]] const topology::Router& direct_router() const { return direct_; }

 private:
  const topology::Topology& topo_;
  CollectiveOptions options_;
  topology::Router router_;  // with PXN when enabled
  topology::Router direct_;  // without
  std::vector<double> capacities_;
  std::vector<double> search_capacities_;  // as NCCL's graph search sees the links (no measured network share)
  std::map<int, int> nics_per_node_;       // node -> its NICs
};

}  // namespace cs::models
