// Benchmark of the engine and the collectives: event-queue throughput, max-min re-solve time with
// many concurrent flows on the 16,384-GPU Clos, and whole collectives (a 1,024-GPU all-to-all and a
// 16,384-GPU ring all-reduce). Prints figures; asserts nothing. Run through scripts/bench.sh.
#include <chrono>
#include <cstdio>
#include <random>
#include <sys/resource.h>

#include <fmt/format.h>

#include "clustersim/models/collective_model.hpp"
#include "clustersim/sim/fluid_network.hpp"
#include "clustersim/sim/simulator.hpp"
#include "clustersim/topology/topology_loader.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

// Each event schedules the next one a pseudo-random delay ahead, keeping `live` events pending.
struct Chain : cs::sim::EventHandler {
  cs::sim::Simulator* sim = nullptr;
  std::uint64_t left = 0;
  std::uint64_t state = 7;
  void handle(std::uint64_t) override {
    if (left == 0) return;
    --left;
    // A cheap LCG step for the delay, so the figure is the queue's, not a random generator's.
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    sim->schedule_in(cs::sim::Time::ns(static_cast<cs::sim::Time::Rep>(1 + (state >> 33) % 1000)), this);
  }
};

template <class Queue>
void bench_event_queue(const char* name, std::uint64_t events, int live) {
  cs::sim::Simulator sim(std::make_unique<Queue>());
  Chain chain;
  chain.sim = &sim;
  chain.left = events - static_cast<std::uint64_t>(live);
  for (int i = 0; i < live; ++i) sim.schedule_in(cs::sim::Time::ns(i), &chain);
  const auto t0 = Clock::now();
  sim.run();
  const double s = since(t0);
  fmt::print("event queue ({}): {} events with {} pending: {:.3f} s, {:.1f} M events/s\n", name, sim.stats().events, live, s,
             sim.stats().events / s / 1e6);
}

struct Ignore : cs::sim::FluidNetwork::Listener {
  void flow_done(cs::sim::FluidNetwork::FlowId, std::uint64_t) override {}
};

// `flows` concurrent GPU-to-GPU flows between random pairs of the 16k Clos, started at once: the
// time of the one max-min solve that rates them all, then of a re-solve after one more flow starts.
void bench_maxmin(const cs::topology::Topology& topo, const cs::models::CollectiveModel& model, std::size_t flows) {
  cs::sim::Simulator sim;
  cs::sim::FluidNetwork net(sim, model.capacities());
  Ignore ignore;
  std::mt19937_64 rng(11);
  const auto& gpus = topo.gpus();
  std::vector<std::vector<std::uint32_t>> paths;
  for (std::size_t i = 0; i < flows + 1; ++i) {
    const auto a = gpus[rng() % gpus.size()];
    auto b = gpus[rng() % gpus.size()];
    if (b == a) b = gpus[(a + 1) % gpus.size()];
    const auto p = model.router().route(a, b, i);
    std::vector<std::uint32_t> ids;
    for (auto e : p->links) ids.push_back(topo.link(e).id);
    paths.push_back(std::move(ids));
  }
  for (std::size_t i = 0; i < flows; ++i) net.start(paths[i], 1e9 * (1 + i % 7), cs::sim::Time::zero(), &ignore, 0);
  auto t0 = Clock::now();
  sim.run(cs::sim::Time::zero());
  const double first = since(t0);
  net.start(paths[flows], 1e9, cs::sim::Time::zero(), &ignore, 0);
  t0 = Clock::now();
  sim.run(cs::sim::Time::zero());
  const double again = since(t0);
  fmt::print("max-min on h100-clos-16k: {} flows: first solve {:.3f} s, re-solve after one more flow {:.3f} s\n", flows, first, again);
}

void bench_collective(const char* label, const cs::topology::Topology& topo, cs::models::Collective c) {
  const cs::models::CollectiveModel model(topo);
  const auto t0 = Clock::now();
  const auto r = model.simulate(c);
  const double s = since(t0);
  fmt::print("{}: {} flows, {} events, {} solves, simulated {:.3f} ms (busbw {:.1f} GB/s), wall {:.3f} s, peak RSS {} MiB\n", label,
             r.stats.flows, r.stats.events, r.stats.solver_calls, r.time.value() * 1e3, r.busbw.value() / 1e9, s, peak_rss_mib());
}

}  // namespace

int main() {
  bench_event_queue<cs::sim::RadixHeapQueue>("radix heap, the default", 10'000'000, 1'000);
  bench_event_queue<cs::sim::RadixHeapQueue>("radix heap, the default", 10'000'000, 100'000);
  bench_event_queue<cs::sim::BinaryHeapQueue>("4-ary heap", 10'000'000, 1'000);
  bench_event_queue<cs::sim::BinaryHeapQueue>("4-ary heap", 10'000'000, 100'000);

  const auto clos = cs::topology::load_topology("h100-clos-16k");
  const cs::models::CollectiveModel model(clos);
  bench_maxmin(clos, model, 10'000);
  bench_maxmin(clos, model, 100'000);

  {
    cs::models::Collective c;
    c.op = cs::models::CollectiveOp::all_reduce;
    c.ranks = clos.gpus();
    c.bytes = cs::Bytes(1 << 30);
    c.algorithm = cs::models::Algorithm::ring;
    bench_collective("ring all-reduce, 1 GiB, 16,384 GPUs (h100-clos-16k)", clos, c);
  }
  {
    cs::topology::TopologySpec spec;
    cs::IncludeStack includes;
    spec = cs::topology::load_topology_spec(cs::resolve_part("dgx-h100-superpod", "topologies"), includes);
    spec.nodes = 128;
    const auto pod = cs::topology::build_topology(spec);
    cs::models::Collective c;
    c.op = cs::models::CollectiveOp::all_to_all;
    c.ranks = pod.gpus();
    c.bytes = cs::Bytes(1 << 30);
    bench_collective("all-to-all, 1 GiB per GPU, 1,024 GPUs (DGX H100 SuperPOD, 128 nodes)", pod, c);
  }
  return 0;
}
