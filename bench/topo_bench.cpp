// Benchmark: how long topologies take to load, build, analyse and route. Prints figures; asserts
// nothing (speed is measured here, never in tests). Run through scripts/bench.sh.
//
//   clustersim-bench-topo [PRESET...]     (default: the shipped SuperPOD and 16k presets)
// Peak RSS is the process high-water mark so far, so it only grows down the table.
#include <chrono>
#include <cstdio>
#include <string>
#include <sys/resource.h>
#include <vector>

#include <fmt/format.h>

#include "bench_util.hpp"

#include "clustersim/topology/analysis.hpp"
#include "clustersim/topology/routing.hpp"
#include "clustersim/topology/topology_loader.hpp"

using cs::bench::peak_rss_mib;
using cs::bench::seconds_since;

int main(int argc, char** argv) {
  std::vector<std::string> presets(argv + 1, argv + argc);
  if (presets.empty()) presets = {"dgx-a100-superpod", "dgx-h100-superpod", "h100-clos-16k", "gb200-nvl72-x8"};
  fmt::print("{:<22} {:>8} {:>9} {:>11} {:>10} {:>10} {:>12} {:>10}\n", "preset", "GPUs", "devices", "links", "build s",
             "summary s", "route/s", "peak RSS MiB");
  for (const std::string& name : presets) {
    try {
      auto t0 = std::chrono::steady_clock::now();
      const cs::topology::Topology topo = cs::topology::load_topology(name);
      const double build = seconds_since(t0);
      cs::topology::Router router(topo);
      t0 = std::chrono::steady_clock::now();
      const auto summary = cs::topology::summarize(topo, router);
      const double analyse = seconds_since(t0);
      // Routes between GPU pairs that stride across the cluster, to a few destinations.
      const auto& gpus = topo.gpus();
      const std::size_t n = gpus.size();
      const int routes = 20000;
      t0 = std::chrono::steady_clock::now();
      std::size_t hops = 0;
      for (int i = 0; i < routes; ++i) {
        const auto src = gpus[(static_cast<std::size_t>(i) * 7919) % n];
        const auto dst = gpus[(static_cast<std::size_t>(i % 16) * 104729 + n / 2) % n];
        if (auto p = router.route(src, dst, static_cast<std::uint64_t>(i))) hops += p->links.size();
      }
      const double route_s = seconds_since(t0);
      fmt::print("{:<22} {:>8} {:>9} {:>11} {:>10.3f} {:>10.3f} {:>12.0f} {:>10}\n", name, summary.gpus, topo.device_count(),
                 topo.directed_link_count(), build, analyse, routes / route_s, peak_rss_mib());
      if (hops == 0) fmt::print("  (no routes found)\n");
    } catch (const std::exception& e) {
      fmt::print("{:<22} error: {}\n", name, e.what());
      return 1;
    }
  }
  return 0;
}
