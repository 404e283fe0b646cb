// Properties that must hold for any input, checked on random and swept ones:
// - every flow's bytes are carried: on each link, the time integral of its load equals the bytes of
//   the flows that cross it, and every flow ends;
// - more fabric bandwidth never makes a training step slower;
// - with a fixed batch per GPU on a non-blocking fabric, more GPUs never lower total throughput.
#include <map>
#include <random>
#include <vector>

#include "catch.hpp"

#include "clustersim/common/parts.hpp"
#include "clustersim/models/training.hpp"
#include "clustersim/models/transformer.hpp"
#include "clustersim/sim/fluid_network.hpp"
#include "clustersim/sim/simulator.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "support.hpp"

using namespace cs;

namespace {

struct Done : sim::FluidNetwork::Listener {
  std::vector<bool> done;
  void flow_done(sim::FluidNetwork::FlowId f, std::uint64_t) override {
    if (done.size() <= f) done.resize(f + 1, false);
    done[f] = true;
  }
};

// A 2-tier fat tree of `nodes` DGX H100 whose switch-to-switch links run at `gbps` GB/s: leaves of
// radix 16 (8 NIC ports each), so traffic between nodes crosses the spines.
topology::Topology cluster(int nodes, double gbps) {
  return test::topology_from_text(fmt::format(R"(topology:
  name: prop
  node: dgx-h100
  nodes: {}
  fabric: {{kind: fat-tree, link_bandwidth: {}GB/s, tiers: [{{radix: 16}}, {{radix: 16}}]}}
)",
                                               nodes, gbps));
}

models::TrainingJob job(const char* preset, int tp, int pp, int dp, int micro, int global, int zero) {
  models::TrainingJob j;
  IncludeStack includes;
  j.model = models::load_transformer_file(resolve_part(preset, "models"), includes);
  j.plan.tp = tp;
  j.plan.pp = pp;
  j.plan.dp = dp;
  j.plan.sequence_parallel = tp > 1;
  j.plan.zero_stage = zero;
  j.plan.schedule = models::PipelineSchedule::one_f_one_b;
  j.micro_batch = micro;
  j.global_batch = global;
  return j;
}

}  // namespace

TEST_CASE("property: on every link the integral of the load equals the bytes of the flows crossing it, and every flow ends", "[property][sim]") {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const int links = 2 + static_cast<int>(rng() % 7);
    std::vector<double> caps;
    for (int l = 0; l < links; ++l) caps.push_back(1e9 * static_cast<double>(1 + rng() % 400));
    sim::Simulator s;
    sim::FluidNetwork net(s, caps);
    Done listener;
    // Load integrated per link from the observer's piecewise-constant samples.
    std::vector<double> last_load(static_cast<std::size_t>(links), 0), carried(static_cast<std::size_t>(links), 0);
    std::vector<sim::Time> last_time(static_cast<std::size_t>(links), sim::Time::zero());
    net.set_link_observer([&](sim::Time t, sim::FluidNetwork::LinkId l, double load) {
      carried[l] += last_load[l] * (t - last_time[l]).to_seconds();
      last_load[l] = load;
      last_time[l] = t;
    });
    std::vector<double> expected(static_cast<std::size_t>(links), 0);
    const int flows = 5 + static_cast<int>(rng() % 60);
    for (int f = 0; f < flows; ++f) {
      std::vector<sim::FluidNetwork::LinkId> path;
      const int hops = 1 + static_cast<int>(rng() % 3);
      for (int h = 0; h < hops; ++h) {
        const auto l = static_cast<sim::FluidNetwork::LinkId>(rng() % static_cast<std::uint64_t>(links));
        if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
      }
      const double bytes = static_cast<double>(rng() % 2'000'000'000ull);
      const sim::Time latency = sim::Time::us(static_cast<double>(rng() % 5000));
      const double cap = rng() % 4 == 0 ? 1e9 * static_cast<double>(1 + rng() % 100) : std::numeric_limits<double>::infinity();
      for (auto l : path) expected[l] += bytes;
      net.start(path, bytes, latency, &listener, 0, cap);
    }
    s.run();
    INFO("seed " << seed << ", " << flows << " flows on " << links << " links");
    CHECK(net.active_flows() == 0);
    REQUIRE(listener.done.size() == static_cast<std::size_t>(flows));
    for (bool d : listener.done) CHECK(d);
    for (int l = 0; l < links; ++l) {
      CHECK(last_load[static_cast<std::size_t>(l)] == Approx(0).margin(1e-6));
      // Completion times are whole nanoseconds, so a flow may be carried for up to 1 ns longer.
      CHECK(carried[static_cast<std::size_t>(l)] == Approx(expected[static_cast<std::size_t>(l)]).epsilon(1e-6).margin(caps[static_cast<std::size_t>(l)] * 1e-9 * flows));
    }
  }
}

TEST_CASE("property: more fabric bandwidth never makes a training step slower", "[property][training]") {
  struct Plan {
    const char* name;
    models::TrainingJob job;
  };
  const std::vector<Plan> plans = {
      {"TP8 DP4 ZeRO-1", job("llama3-8b", 8, 1, 4, 1, 32, 1)},
      {"TP2 PP2 DP8 ZeRO-1", job("llama3-8b", 2, 2, 8, 1, 64, 1)},
      {"TP4 DP8 ZeRO-3", job("llama3-8b", 4, 1, 8, 1, 32, 3)},
      {"TP8 PP4 1F1B", job("llama3-8b", 8, 4, 1, 1, 16, 1)},
  };
  for (const auto& p : plans) {
    double previous = std::numeric_limits<double>::infinity(), slowest = 0;
    for (double gbps : {6.25, 12.5, 25.0, 50.0, 100.0, 200.0}) {
      const topology::Topology topo = cluster(4, gbps);
      const double step = models::simulate_training(p.job, topo).step_time.value();
      INFO(p.name << " at " << gbps << " GB/s per fabric link: " << step << " s after " << previous << " s");
      CHECK(step <= previous * (1 + 1e-9));
      if (gbps == 6.25) slowest = step;
      previous = step;
    }
    // The sweep matters: every plan here sends over the fabric.
    CHECK(previous < slowest);
  }
}

TEST_CASE("property: with a fixed batch per GPU on a non-blocking fabric, more GPUs never lower total throughput", "[property][training]") {
  for (const int tp : {1, 8}) {
    double previous = 0;
    for (const int dp : {1, 2, 4, 8, 16}) {
      const int gpus = tp * dp;
      if (gpus > 32) continue;
      const topology::Topology topo = cluster(4, 50);
      const models::TrainingJob j = job("llama3-8b", tp, 1, dp, 1, 4 * dp, 1);  // 4 sequences per replica
      const double tokens_per_s = models::simulate_training(j, topo).tokens_per_s;
      INFO("TP" << tp << " DP" << dp << ": " << tokens_per_s << " tokens/s after " << previous);
      CHECK(tokens_per_s >= previous * (1 - 1e-9));
      previous = tokens_per_s;
    }
  }
}
