#include "fold_shadows.hpp"

#include <algorithm>
#include <cmath>

namespace cs::models {

namespace {
constexpr double kEps = 1e-9;  // relative: a load at capacity does not fill a link
}  // namespace

FoldShadows::FoldShadows(const std::vector<double>& capacity, std::size_t gpus)
    : capacity_(capacity),
      load_bound_(capacity.size(), 0.0),
      sources_(capacity.size(), 0),
      sources_but_shadow_sends_(capacity.size(), 0),
      load_but_shadow_sends_(capacity.size(), 0.0),
      rank_(capacity.size(), kSpansRanks),
      gpus_(gpus) {}

std::vector<std::map<std::size_t, double>> FoldShadows::phase_loads(const CollectivePlan& plan) const {
  std::vector<std::map<std::size_t, double>> loads;
  for (const CollectivePhase& phase : plan.phases) {
    auto& load = loads.emplace_back();
    for (const sim::FlowSpec& f : *phase.flows) {
      // A flow runs at most at its cap and its path's narrowest link.
      double rate = f.rate_cap;
      for (auto l : f.path) rate = std::min(rate, capacity_[static_cast<std::size_t>(l)]);
      for (auto l : f.path) load[static_cast<std::size_t>(l)] += rate;
    }
  }
  return loads;
}

void FoldShadows::add_source(const std::vector<const CollectivePlan*>& plans, double copies, int tp_rank, bool other_rank_pipeline) {
  // Plans that take turns add the most any of their phases puts on each link.
  std::map<std::size_t, double> most;
  for (const CollectivePlan* plan : plans) {
    for (const auto& load : phase_loads(*plan)) {
      for (const auto& [l, v] : load) most[l] = std::max(most[l], v);
    }
  }
  for (const auto& [l, v] : most) {
    load_bound_[l] += copies * v;
    rank_[l] = (sources_[l] == 0 || rank_[l] == tp_rank) ? tp_rank : kSpansRanks;
    ++sources_[l];
    if (!other_rank_pipeline) {
      ++sources_but_shadow_sends_[l];
      load_but_shadow_sends_[l] += copies * v;
    }
  }
}

void FoldShadows::add_group_plan(const GroupKey& key, const Label& label, const CollectivePlan* plan, bool representative, int tp_rank) {
  Group& group = groups_[key];
  group.plans[label] = plan;
  group.tp_rank = tp_rank;
  group.representative = group.simulated = representative;
}

const std::vector<double>& FoldShadows::busiest(const CollectivePlan& plan) {
  auto [it, fresh] = busiest_.try_emplace(&plan);
  if (fresh) {
    for (const auto& load : phase_loads(plan)) {
      double most = 0;
      for (const auto& [l, v] : load) most = std::max(most, v / capacity_[l]);
      it->second.push_back(most);
    }
  }
  return it->second;
}

bool FoldShadows::contended(const CollectivePlan& plan, int tp_rank, bool data_parallel) const {
  for (const CollectivePhase& phase : plan.phases) {
    for (const sim::FlowSpec& f : *phase.flows) {
      for (auto l : f.path) {
        const auto i = static_cast<std::size_t>(l);
        const double fill = capacity_[i] * (1 + kEps);
        // TP rank 0's own traffic is the representative's: nothing mirrors its meetings.
        const bool other_rank = tp_rank == 0 || tp_rank == kSpansRanks || rank_[i] != tp_rank;
        if (sources_[i] > 1 && other_rank && load_bound_[i] > fill) return true;
        if (data_parallel && sources_but_shadow_sends_[i] > 1 && load_but_shadow_sends_[i] > fill) return true;
      }
    }
  }
  return false;
}

bool FoldShadows::differs(const Group& group, const Group* representative) {
  if (!representative) return true;
  for (const auto& [what, plan] : group.plans) {
    const auto counterpart = representative->plans.find(what);
    if (counterpart == representative->plans.end()) return true;
    const std::vector<double>& mine = busiest(*plan);
    const std::vector<double>& theirs = busiest(*counterpart->second);
    if (mine.size() != theirs.size()) return true;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (std::abs(mine[i] - theirs[i]) > kEps * std::max(mine[i], theirs[i])) return true;
    }
  }
  return false;
}

void FoldShadows::choose() {
  // Each group is a source of its own. Two groups that share a GPU take turns on its stream, but
  // groups joined only through a third (two TP ranks' dense groups, through an expert group that
  // spans both) run at once, so they are not merged: the bound may count a link twice, never too
  // little.
  for (const auto& [key, group] : groups_) {
    if (is_pair(key)) continue;  // its pairs are sources already
    std::vector<const CollectivePlan*> plans;
    for (const auto& [what, plan] : group.plans) plans.push_back(plan);
    add_source(plans, 1.0, group.tp_rank);
  }

  std::vector<char> busy_gpu(gpus_, 0);  // GPUs of the data-parallel shadow groups simulated
  const auto simulate = [&](const GroupKey& key, Group& group) {
    group.simulated = true;
    if (is_pair(key)) return;
    for (const auto& [what, plan] : group.plans) {
      for (int g : plan->gpus) busy_gpu[static_cast<std::size_t>(g)] = 1;
    }
  };
  const auto shares_gpu = [&](const GroupKey& key, const Group& group) {
    if (is_pair(key)) return false;
    for (const auto& [what, plan] : group.plans) {
      if (std::any_of(plan->gpus.begin(), plan->gpus.end(), [&](int g) { return busy_gpu[static_cast<std::size_t>(g)] != 0; })) return true;
    }
    return false;
  };
  std::map<std::pair<int, int>, const Group*> representative;  // by part and stage
  for (const auto& [key, group] : groups_) {
    if (group.representative) representative[{std::get<0>(key), std::get<2>(key)}] = &group;
  }
  for (auto& [key, group] : groups_) {
    if (group.simulated) continue;
    const int tp_rank = group.tp_rank;
    const bool data_parallel = !is_pair(key);
    const bool contends = std::any_of(group.plans.begin(), group.plans.end(),
                                      [&](const auto& entry) { return contended(*entry.second, tp_rank, data_parallel); });
    const auto rep = representative.find({std::get<0>(key), std::get<2>(key)});
    if (contends || differs(group, rep == representative.end() ? nullptr : rep->second)) simulate(key, group);
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (auto& [key, group] : groups_) {
      if (group.simulated || !shares_gpu(key, group)) continue;
      simulate(key, group);
      grew = true;
    }
  }
}

bool FoldShadows::simulated(const GroupKey& key) const {
  const auto it = groups_.find(key);
  return it != groups_.end() && it->second.simulated;
}

}  // namespace cs::models
