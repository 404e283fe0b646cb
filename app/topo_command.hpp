// `clustersim topo`: inspect a topology.
#pragma once

#include <CLI/CLI.hpp>

namespace cs::app {

void add_topo_command(CLI::App& app);

}  // namespace cs::app
