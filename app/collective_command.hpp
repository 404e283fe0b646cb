// `clustersim collective`: simulate one NCCL collective (or a size sweep) on a topology.
#pragma once

#include <CLI/CLI.hpp>

namespace cs::app {

void add_collective_command(CLI::App& app);

}  // namespace cs::app
