#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace cs::app {

// `clustersim report RESULTS... --out DIR`: the capacity-planning report of result files.
void add_report_command(CLI::App& app);

// `--report DIR` on run, plan and cost: the report of the result files the command just wrote.
// Prints where it went, unless `announce` is false (--json output stays JSON).
void write_report_of(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& results, bool announce = true);
// Before a command writes its results: refuses what would stop --report's files afterwards (no
// charting library, a directory in the way), so that such a failure leaves the older results and
// report as they were.
void check_report_targets(const std::string& report_dir);

// What a result records of where it came from: the scenario file, its SHA-256 and clustersim's version.
nlohmann::json source_of(const std::string& scenario_file);

}  // namespace cs::app
