#pragma once

#include <CLI/CLI.hpp>

namespace cs::app {

// `clustersim plan SCENARIO.yaml`: size the cheapest fleet for an inference scenario's SLOs.
void add_plan_command(CLI::App& app);

}  // namespace cs::app
