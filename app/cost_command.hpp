#pragma once

#include <CLI/CLI.hpp>

namespace cs::app {

// `clustersim cost SCENARIO.yaml`: what the scenario's run costs on each way of buying capacity.
void add_cost_command(CLI::App& app);

}  // namespace cs::app
