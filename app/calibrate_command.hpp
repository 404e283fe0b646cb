#pragma once

#include <CLI/CLI.hpp>

namespace cs::app {

// `clustersim calibrate`: run probes (or read recorded measurements and nccl-tests output), fit
// them into a hardware profile, and compare it with a shipped one.
void add_calibrate_command(CLI::App& app);

}  // namespace cs::app
