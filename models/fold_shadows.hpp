// Folded training steps: which of the representative's shadows to simulate.
//
// A folded step simulates one rank per pipeline stage (replica 0). Its shadows move the same bytes
// at the same times over other GPUs: the data-parallel groups of the other TP ranks, the expert
// groups without replica 0's rank, and the pipeline sends of replica 0's other TP and CP ranks.
// Folding assumes a shadow's traffic runs as the representative's does; that fails where routing
// puts different flows on one link (ECMP hashing on RoCE, an oversubscribed tier, rails meeting at
// a core tier).
//
// So the step's collectives are planned first and recorded here: the data-parallel groups', the
// pipeline pairs and tied-embedding pairs of replica 0's TP and CP ranks. Each link's
// load is then bounded with every source at once, each flow at its path's bottleneck. A source is
// a group's data-parallel collectives (they take turns on its GPUs' stream), a pipeline pair (both
// directions at once) or a tied-embedding pair, tagged with the TP rank of its GPUs (or as spanning
// ranks). A shadow is simulated when
// - one of its links may be filled by its sources, two or more, one of them of another TP rank
//   than the shadow's (any source counts for a shadow of TP rank 0, such as another CP rank's
//   sends, or of several ranks, such as an expert group across TP ranks); a data-parallel group
//   also when two sources other than the other TP and CP ranks' pipeline pairs may fill one by
//   themselves (the rule from before those pairs were sources, kept);
// - one of its collectives alone loads its busiest link of a phase differently from the
//   representative's same collective (hashing put two of its own flows together); or
// - it is a data-parallel group that shares a GPU, so a stream, with one simulated (a rank's
//   pipeline sends are one shadow, on streams of their own).
// The traffic of a TP rank other than 0 that meets only its own rank's other traffic is taken to
// meet it as TP rank 0's meets its own: on rails, each TP rank's sends and rings share its rail
// alone.
// The others cannot slow anything simulated and run as the representative's do.
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
  // group's lowest rank); or part 2, the pipeline sends of one of replica 0's TP and CP ranks (id its
  // place in the group, stage 0).
  using GroupKey = std::tuple<int, int, int>;  // part, id, stage
  static constexpr int kPipeline = 2;
  // Part 3: the tied-embedding pair of one of replica 0's TP and CP ranks (id its place, stage 0). A
  // source of its own, as a pipeline pair is.
  static constexpr int kTied = 3;
  // Pipeline and tied-embedding pairs: each pair is a source of its own, not a data-parallel group.
  static bool is_pair(const GroupKey& key) { return std::get<0>(key) == kPipeline || std::get<0>(key) == kTied; }
  // What a plan does, to match it with the representative's plan of the same label: a data-parallel
  // collective's operation and bytes; a pipeline pair's stages, sending x pp + receiving.
  using Label = std::pair<int, double>;

  static constexpr int kSpansRanks = -1;  // the tag of a source on GPUs of several TP ranks

  // `capacity`: the links' (bytes/s, by link id); `gpus`: how many GPUs the topology has.
  FoldShadows(const std::vector<double>& capacity, std::size_t gpus);

  // Traffic outside the data-parallel groups: plans run one at a time, `copies` of them at once, on
  // GPUs of TP rank `tp_rank` (or kSpansRanks). `other_rank_pipeline`: the pipeline pair of another
  // TP or CP rank than the representative's.
  void add_source(const std::vector<const CollectivePlan*>& plans, double copies, int tp_rank, bool other_rank_pipeline = false);
  // A plan of a shadow or of the representative, on GPUs of TP rank `tp_rank` (or kSpansRanks). A
  // pipeline pair's plan must also be a source of its own (add_source): a rank's pairs send at once.
  void add_group_plan(const GroupKey& key, const Label& label, const CollectivePlan* plan, bool representative, int tp_rank);
  // After the first pass: the groups become sources, and the shadows to simulate are chosen.
  void choose();
  // Whether the group is simulated: representative groups always are.
  [[nodiscard]] bool simulated(const GroupKey& key) const;

 private:
  struct Group {
    std::map<Label, const CollectivePlan*> plans;
    int tp_rank = kSpansRanks;
    bool representative = false;
    bool simulated = false;
  };
  // The most each phase of a plan puts on each link.
  [[nodiscard]] std::vector<std::map<std::size_t, double>> phase_loads(const CollectivePlan& plan) const;
  // Each phase's busiest link, its load over its capacity: how the collective runs alone.
  const std::vector<double>& busiest(const CollectivePlan& plan);
  // Whether a link of the plan may be filled by two sources (above), for a shadow of `tp_rank`.
  [[nodiscard]] bool contended(const CollectivePlan& plan, int tp_rank, bool data_parallel) const;
  // Whether a shadow group's collectives alone run otherwise than the representative's.
  bool differs(const Group& group, const Group* representative);

  const std::vector<double>& capacity_;
  std::vector<double> load_bound_;
  // Per link: the sources that may load it; those that are not the other TP and CP ranks' pipeline
  // pairs, and their load; the TP rank of all sources, or kSpansRanks when they are of several.
  std::vector<int> sources_;
  std::vector<int> sources_but_shadow_sends_;
  std::vector<double> load_but_shadow_sends_;
  std::vector<int> rank_;
  std::size_t gpus_;
  std::map<GroupKey, Group> groups_;
  std::map<const CollectivePlan*, std::vector<double>> busiest_;
};

}  // namespace cs::models
