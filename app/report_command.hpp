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
// Before a command does its work: makes its --out directory (and --report's) and refuses what would
// stop its writes afterwards (a directory that cannot be created, check_report_targets), so that a
// failure to write comes before minutes of simulation and leaves no fresh file behind (a --report
// directory that could not be created had failed after --out's files were written).
// `out_files`: the names the command writes into `out`, none of which may be a file it read.
void prepare_outputs(const std::string& out, const std::string& report, const char* out_what, const std::vector<std::string>& out_files);
// After a command has written `written` in `dir`, replacing one there (`replaced`): removes
// `companion`, a file the same command writes beside `written` for another kind of scenario, when it
// is clustersim's (its first line starts with `header`): the result it belonged to is gone (an
// inference run's requests.csv beside a training run's summary.json). A file of that name that is
// not clustersim's, or beside no earlier result, stays. Returns a note for the "wrote" line, empty
// when nothing was removed.
std::string remove_stale_companion(const std::string& dir, const std::string& companion, const std::string& header, const std::string& written, bool replaced);

// What a result records of where it came from: the scenario file, its SHA-256 and clustersim's version.
nlohmann::json source_of(const std::string& scenario_file);

}  // namespace cs::app
