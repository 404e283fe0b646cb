#include "clustersim/sim/fluid_network.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace cs::sim {

namespace {
// Relative tolerance for "this link is a bottleneck at this share" and "this flow is finished".
constexpr double kEps = 1e-9;
}  // namespace

FluidNetwork::FluidNetwork(Simulator& sim, std::vector<double> capacities) : sim_(sim) {
  links_.resize(capacities.size());
  link_mark_.assign(capacities.size(), 0);
  for (std::size_t i = 0; i < capacities.size(); ++i) {
    assert(capacities[i] > 0 && "link capacities are positive");
    links_[i].capacity = capacities[i];
  }
}

FluidNetwork::FlowId FluidNetwork::start(std::vector<LinkId> path, double bytes, Time latency, Listener* listener,
                                         std::uint64_t tag, double rate_cap) {
  assert(bytes >= 0 && rate_cap > 0);
  // A finished flow's slot is taken again: the table holds the flows in flight, not every flow of
  // the run (a ZeRO-3 step starts millions). The slot keeps its version, so the old flow's stale
  // completion events do not match the new one.
  FlowId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
  }
  Flow& f = flows_[id];
  f.path = std::move(path);
  f.slot.clear();
  f.remaining = bytes;
  f.rate = 0;
  f.cap = rate_cap;
  f.updated = sim_.now();
  f.state = State::pending;
  f.listener = listener;
  f.tag = tag;
  ++sim_.stats().flows;
  if (latency > Time::zero()) {
    sim_.schedule_in(latency, this, encode(kActivate, id, 0));
  } else {
    activate(id);
  }
  return id;
}

void FluidNetwork::activate(FlowId id) {
  Flow& f = flows_[id];
  f.updated = sim_.now();
  if (f.remaining <= 0 || f.path.empty()) {
    // Nothing to move (or a flow to itself): done once its latency has passed.
    f.remaining = 0;
    f.state = State::done;
    release(id);
    return;
  }
  f.state = State::active;
  ++active_;
  f.slot.resize(f.path.size());
  for (std::size_t k = 0; k < f.path.size(); ++k) {
    Link& l = links_[f.path[k]];
    f.slot[k] = static_cast<std::uint32_t>(l.flows.size());
    l.flows.push_back(id);
  }
  mark_dirty(id);
}

void FluidNetwork::mark_dirty(FlowId id) {
  for (LinkId l : flows_[id].path) dirty_.push_back(l);
  if (!solve_pending_) {
    solve_pending_ = true;
    sim_.schedule_at(sim_.now(), this, encode(kSolve, 0, 0));
  }
}

void FluidNetwork::complete(FlowId id) {
  Flow& f = flows_[id];
  f.remaining = 0;
  f.rate = 0;
  f.state = State::done;
  --active_;
  for (std::size_t k = 0; k < f.path.size(); ++k) {
    Link& l = links_[f.path[k]];
    const std::uint32_t pos = f.slot[k];
    const FlowId moved = l.flows.back();
    l.flows[pos] = moved;
    l.flows.pop_back();
    if (moved != id) {
      Flow& m = flows_[moved];
      for (std::size_t j = 0; j < m.path.size(); ++j) {
        if (m.path[j] == f.path[k] && m.slot[j] == l.flows.size()) {
          m.slot[j] = pos;
          break;
        }
      }
    }
  }
  mark_dirty(id);
  // A finished flow needs its path no more: its memory goes to the flows that start later.
  std::vector<LinkId>().swap(f.path);
  std::vector<std::uint32_t>().swap(f.slot);
  release(id);
}

void FluidNetwork::release(FlowId id) {
  Listener* const listener = flows_[id].listener;
  const std::uint64_t tag = flows_[id].tag;
  // The listener may start flows (the table may grow under a reference); the slot is free after.
  if (listener) listener->flow_done(id, tag);
  free_.push_back(id);
}

void FluidNetwork::handle(std::uint64_t payload) {
  const Kind kind = static_cast<Kind>(payload >> 62);
  const FlowId id = static_cast<FlowId>(payload & 0xffffffffu);
  const std::uint32_t version = static_cast<std::uint32_t>((payload >> 32) & 0x3fffffffu);
  switch (kind) {
    case kActivate:
      activate(id);
      break;
    case kComplete:
      --scheduled_completions_;
      if (flows_[id].state == State::active && (flows_[id].version & 0x3fffffffu) == version) complete(id);
      break;
    case kSolve:
      solve();
      break;
  }
}

void FluidNetwork::solve() {
  solve_pending_ = false;
  ++sim_.stats().solver_calls;
  const Time now = sim_.now();
  ++epoch_;
  comp_links_.clear();
  comp_flows_.clear();
  // The connected component of the dirty links: links -> their active flows -> those flows' links.
  // The marks are dense arrays of their own: a flow is met once per link of its path, and a large
  // component's flows and links do not fit in the cache.
  for (LinkId l : dirty_) {
    if (link_mark_[l] == epoch_) continue;
    link_mark_[l] = epoch_;
    comp_links_.push_back(l);
  }
  dirty_.clear();
  for (std::size_t i = 0; i < comp_links_.size(); ++i) {
    for (FlowId fid : links_[comp_links_[i]].flows) {
      if (flow_mark_[fid] == epoch_) continue;
      flow_mark_[fid] = epoch_;
      comp_flows_.push_back(fid);
      for (LinkId l : flows_[fid].path) {
        if (link_mark_[l] != epoch_) {
          link_mark_[l] = epoch_;
          comp_links_.push_back(l);
        }
      }
    }
  }
  sim_.stats().solved_flows += comp_flows_.size();

  // Bring every flow's remaining bytes up to now at its old rate.
  for (FlowId fid : comp_flows_) {
    Flow& f = flows_[fid];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.updated).to_seconds());
    f.updated = now;
  }

  // Progressive filling with a heap of link shares (left / unfixed), smallest first. Fixing a flow at
  // a rate no larger than a link's share never lowers that share, so a key in the heap is a lower
  // bound of its link's share: a stale entry at the top is re-pushed with its current share, and
  // the top entry that is current is the true minimum. Flows limited by their own cap are taken in
  // increasing cap order. Cost: O(sum of path lengths + re-pushes x log links) per solve.
  for (LinkId l : comp_links_) {
    links_[l].left = links_[l].capacity;
    links_[l].unfixed = static_cast<std::uint32_t>(links_[l].flows.size());
  }
  // 0: not fixed yet; fixed at its old rate (kUnchanged) or at another (kChanged).
  constexpr char kUnchanged = 1, kChanged = 2;
  fixed_.assign(comp_flows_.size(), 0);
  std::vector<std::uint32_t>& position = scratch_position_;  // flow id -> index in comp_flows_
  if (position.size() < flows_.size()) position.resize(flows_.size());
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) position[comp_flows_[i]] = static_cast<std::uint32_t>(i);

  using Entry = std::pair<double, LinkId>;  // (share, link): ties broken by link id
  auto share_of = [&](LinkId l) { return std::max(0.0, links_[l].left) / links_[l].unfixed; };
  std::vector<Entry>& heap = scratch_heap_;
  heap.clear();
  for (LinkId l : comp_links_) {
    if (links_[l].unfixed > 0) heap.emplace_back(share_of(l), l);
  }
  const auto greater = [](const Entry& a, const Entry& b) { return a > b; };
  std::make_heap(heap.begin(), heap.end(), greater);
  std::vector<std::uint32_t>& capped = scratch_capped_;  // component indices of finite-cap flows, by cap
  capped.clear();
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    if (std::isfinite(flows_[comp_flows_[i]].cap)) capped.push_back(static_cast<std::uint32_t>(i));
  }
  std::sort(capped.begin(), capped.end(), [&](std::uint32_t a, std::uint32_t b) {
    const double ca = flows_[comp_flows_[a]].cap, cb = flows_[comp_flows_[b]].cap;
    return ca < cb || (ca == cb && a < b);
  });
  std::size_t next_capped = 0;
  auto fix = [&](std::size_t i, double r) {
    Flow& f = flows_[comp_flows_[i]];
    fixed_[i] = f.rate == r ? kUnchanged : kChanged;
    f.rate = r;
    for (LinkId l : f.path) {
      Link& k = links_[l];
      k.left -= r;
      --k.unfixed;
    }
  };
  std::size_t unfixed = comp_flows_.size();
  while (unfixed > 0) {
    while (next_capped < capped.size() && fixed_[capped[next_capped]]) ++next_capped;
    // The smallest live share.
    while (!heap.empty()) {
      const auto [share, l] = heap.front();
      if (links_[l].unfixed > 0 && share == share_of(l)) break;
      std::pop_heap(heap.begin(), heap.end(), greater);
      heap.pop_back();
      if (links_[l].unfixed > 0) {
        heap.emplace_back(share_of(l), l);
        std::push_heap(heap.begin(), heap.end(), greater);
      }
    }
    const double share = heap.empty() ? std::numeric_limits<double>::infinity() : heap.front().first;
    const double cap = next_capped < capped.size() ? flows_[comp_flows_[capped[next_capped]]].cap : std::numeric_limits<double>::infinity();
    if (cap <= share * (1 + kEps)) {
      fix(capped[next_capped], cap);
      --unfixed;
      continue;
    }
    // Saturate the link: every unfixed flow on it gets the share.
    const LinkId l = heap.front().second;
    std::pop_heap(heap.begin(), heap.end(), greater);
    heap.pop_back();
    for (FlowId fid : links_[l].flows) {
      const std::uint32_t i = position[fid];
      if (!fixed_[i]) {
        fix(i, share);
        --unfixed;
      }
    }
  }

  // New completion times. A flow whose rate is unchanged keeps the completion event it has: the time
  // it names is still its end (re-deriving it from the bytes left could only add rounding), and a
  // re-solve of a large component changes few flows' rates (a tree all-reduce over a hashed fabric
  // re-solves hundreds of thousands of flows at each completion).
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    if (fixed_[i] == kUnchanged) continue;  // at rate 0 it has no event, and needs none
    Flow& f = flows_[comp_flows_[i]];
    ++f.version;
    if (f.rate <= 0) continue;
    const FlowId fid = comp_flows_[i];
    const double ns = std::ceil(f.remaining / f.rate * 1e9 - kEps);
    sim_.schedule_at(now + Time::nanoseconds(std::max(0.0, ns)), this, encode(kComplete, fid, f.version));
    ++scheduled_completions_;
  }
  if (scheduled_completions_ > kCompactAt && scheduled_completions_ > 4 * active_) {
    // The same test as handle(): an event of a flow no longer active, or of an older version.
    scheduled_completions_ -= sim_.discard([this](const Event& e) {
      if (e.handler != this || static_cast<Kind>(e.payload >> 62) != kComplete) return false;
      const Flow& f = flows_[static_cast<FlowId>(e.payload & 0xffffffffu)];
      return !(f.state == State::active && (f.version & 0x3fffffffu) == static_cast<std::uint32_t>((e.payload >> 32) & 0x3fffffffu));
    });
  }
  if (observer_) {
    for (LinkId l : comp_links_) {
      double load = 0;
      for (FlowId fid : links_[l].flows) load += flows_[fid].rate;
      if (load != links_[l].load) {
        links_[l].load = load;
        observer_(now, l, load);
      }
    }
  }
}

}  // namespace cs::sim
