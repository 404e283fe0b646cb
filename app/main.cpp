// clustersim: one binary, one subcommand per capability. A subcommand exists only once it works.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/models/collective.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/sim/time.hpp"
#include "calibrate_command.hpp"
#include "collective_command.hpp"
#include "cost_command.hpp"
#include "plan_command.hpp"
#include "infeasible.hpp"
#include "report_command.hpp"
#include "run_command.hpp"
#include "topo_command.hpp"
#include "validate_command.hpp"

namespace {

// glibc hands large freed blocks straight back to the kernel (mmap'd ones at once, the heap's top once
// 128 KiB are free), and a simulation builds and frees tens of MiB of flows, tasks and events: a plan
// search that simulates hundreds of plans faulted in fresh zeroed pages for each. Freed memory is kept
// for reuse instead: blocks up to 32 MiB (glibc's largest mmap threshold) come from the heap, and its
// top is returned only past 1 GiB free. The Calculon-size search (scripts/bench.sh) on 2 cores:
// 54.2 s wall, 74.6 s user + 11.6 s sys, 1.80 M minor faults, peak RSS 1.86 GB; without these
// settings 63.5 s, 83.5 + 19.4 s, 2.89 M, 1.71 GB.
void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
#endif
}

// The status, once standard output is known to be written: an error writing it (a full disk; a
// closed pipe where SIGPIPE is ignored) is a failure, not exit 0 with the output cut short.
int with_output_written(int status) {
  std::cout.flush();
  if (std::cout && std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
  const int error = errno;
  std::cerr << "clustersim: error: could not write the standard output" << (error ? std::string(": ") + std::strerror(error) : std::string()) << "\n";
  return status == 0 ? 1 : status;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory();
  CLI::App app{"clustersim: discrete-event simulator and capacity planner for LLM training and inference clusters"};
  app.set_version_flag("--version", std::string("clustersim ") + CLUSTERSIM_VERSION);
  bool list_models = false;
  app.add_flag("--list-models", list_models, "List the pluggable models (collective algorithms, routing) and exit");
  app.require_subcommand(0, 1);
  cs::app::add_topo_command(app);
  cs::app::add_collective_command(app);
  cs::app::add_validate_command(app);
  cs::app::add_run_command(app);
  cs::app::add_plan_command(app);
  cs::app::add_cost_command(app);
  cs::app::add_calibrate_command(app);
  cs::app::add_report_command(app);
  const int status = [&]() -> int {
  try {
    app.parse(argc, argv);
    if (list_models) {
      std::cout << "collective algorithms (clustersim collective --algorithm NAME; default: NCCL's cost model chooses)\n";
      for (const auto& a : cs::models::algorithm_registry()) {
        std::cout << fmt::format("  {:<13} {}\n  {:<13} applies to: {}\n", cs::models::to_string(a.algorithm), a.description, "", a.applies);
      }
      std::cout << "protocols: LL, LL128, Simple (NCCL's, chosen with the algorithm)\n"
                   "routing: shortest then widest paths; ECMP by destination (InfiniBand) or flow hash (Ethernet); PXN on by default\n";
      return 0;
    }
    if (app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other command-line mistake is bad input: status 2.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const cs::InputError& e) {
    std::cerr << "clustersim: error: " << e.what() << "\n";
    return 2;
  } catch (const cs::app::Infeasible& e) {
    std::cerr << "clustersim: error: " << e.what() << "\n";
    return cs::app::kExitInfeasible;
  } catch (const cs::sim::TimeRangeError& e) {
    // Durations beyond the engine's range come from the input's values: bad input, status 2.
    std::cerr << "clustersim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "clustersim: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
  }();
  const int written = with_output_written(status);
  cs::reports::release_interrupts();  // an interrupt held while outputs were renamed ends the process now
  return written;
}
