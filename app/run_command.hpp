#pragma once

#include <CLI/CLI.hpp>

namespace cs::app {

// `clustersim run SCENARIO.yaml`: simulate a training step and print the summary.
void add_run_command(CLI::App& app);

}  // namespace cs::app
