// Benchmark: one simulated training step of the shipped scenarios. Prints wall time, tasks,
// events, flows and peak RSS; asserts nothing. Run through scripts/bench.sh.
//
//   clustersim-bench-training [--unfolded] SCENARIO.yaml...
// --unfolded also simulates every rank (no folding of symmetric ranks) and prints both step times.
#include <chrono>
#include <cstdio>
#include <string>
#include <sys/resource.h>
#include <vector>

#include <fmt/format.h>

#include "bench_util.hpp"

#include "clustersim/models/training_scenario.hpp"

using cs::bench::peak_rss_mib;
using cs::bench::seconds_since;

int main(int argc, char** argv) {
  bool unfolded = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--unfolded") {
      unfolded = true;
    } else {
      files.push_back(a);
    }
  }
  fmt::print("{:<26} {:>6} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "scenario", "GPUs", "load s", "step s", "sim wall s", "tasks",
             "events", "flows", "RSS MiB");
  for (const std::string& f : files) {
    try {
      auto t0 = std::chrono::steady_clock::now();
      const cs::models::TrainingScenario sc = cs::models::load_training_scenario(f);
      const double load = seconds_since(t0);
      for (bool fold : unfolded ? std::vector<bool>{true, false} : std::vector<bool>{true}) {
        t0 = std::chrono::steady_clock::now();
        const auto r = cs::models::simulate_training(sc.job, *sc.topology, {.fold = fold});
        const double wall = seconds_since(t0);
        fmt::print("{:<26} {:>6} {:>8.2f} {:>8.3f} {:>9.3f} {:>9} {:>9} {:>9} {:>8}\n", sc.name + (fold ? "" : " (unfolded)"), r.gpus, load,
                   r.step_time.value(), wall, r.tasks, r.stats.events, r.stats.flows, peak_rss_mib());
      }
    } catch (const std::exception& e) {
      fmt::print("{:<26} error: {}\n", f, e.what());
      return 1;
    }
  }
  return 0;
}
