// Folded training steps: which of the representative's shadow data-parallel groups to simulate.
//
// A folded step simulates one rank per pipeline stage (replica 0). The data-parallel groups of the
// other TP ranks, and the expert groups without replica 0's rank, are its shadows: they move the
// same bytes at the same times over other GPUs. Folding assumes a shadow's traffic runs as the
// representative's does; that fails where routing puts different groups' flows on one link (ECMP
// hashing on RoCE, an oversubscribed tier, rails meeting at a core tier).
//
// So the step is built twice over its data-parallel collectives: a first pass plans them all and
// records them here, with the other traffic (pipeline pairs, tied-embedding pairs) as sources of
// load. Each link's load is then bounded with every source at once, each flow at its path's
// bottleneck. A source is a group's collectives (they take turns on its GPUs' stream), a pipeline
// pair or a tied-embedding pair. A shadow group is simulated when
// - one of its links may be filled by two sources;
// - one of its collectives alone loads its busiest link of a phase differently from the
//   representative's same collective (hashing put two of its own flows together); or
// - it shares a GPU, so a stream, with a shadow group simulated.
// The others cannot slow anything simulated and run as the representative's groups do.
#pragma once

#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "clustersim/models/collective_model.hpp"

namespace cs::models {

class FoldShadows {
 public:
  // A data-parallel group of one stage: part 0 (dense weights, id the TP rank) or 1 (experts, id the
  // group's lowest rank).
  using GroupKey = std::tuple<int, int, int>;  // part, id, stage

  // `capacity`: the links' (bytes/s, by link id); `gpus`: how many GPUs the topology has.
  FoldShadows(const std::vector<double>& capacity, std::size_t gpus);

  // Traffic outside the data-parallel groups: plans run one at a time, `copies` of them at once.
  void add_source(const std::vector<const CollectivePlan*>& plans, double copies);
  // A data-parallel group's collective of operation `op` and `bytes`, from the first pass.
  void add_group_plan(const GroupKey& key, int op, double bytes, const CollectivePlan* plan, bool representative);
  // After the first pass: the groups become sources, and the shadows to simulate are chosen.
  void choose();
  // Whether the group is simulated: representative groups always are.
  [[nodiscard]] bool simulated(const GroupKey& key) const;

 private:
  struct Group {
    std::map<std::pair<int, double>, const CollectivePlan*> plans;  // by operation and bytes
    bool representative = false;
    bool simulated = false;
  };
  // The most each phase of a plan puts on each link.
  [[nodiscard]] std::vector<std::map<std::size_t, double>> phase_loads(const CollectivePlan& plan) const;
  // Each phase's busiest link, its load over its capacity: how the collective runs alone.
  const std::vector<double>& busiest(const CollectivePlan& plan);
  [[nodiscard]] bool contended(const CollectivePlan& plan) const;
  // Whether a shadow group's collectives alone run otherwise than the representative's.
  bool differs(const Group& group, const Group* representative);

  const std::vector<double>& capacity_;
  std::vector<double> load_bound_;
  std::vector<int> sources_;  // sources that may load each link
  std::size_t gpus_;
  std::map<GroupKey, Group> groups_;
  std::map<const CollectivePlan*, std::vector<double>> busiest_;
};

}  // namespace cs::models
