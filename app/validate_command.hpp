// `clustersim validate`: predicted against measured on published cases.
#pragma once

#include <CLI/CLI.hpp>

namespace cs::app {

void add_validate_command(CLI::App& app);

}  // namespace cs::app
