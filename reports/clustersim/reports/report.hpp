// Capacity-planning reports (`clustersim report`, and `--report` on run, plan and cost;
// docs/reports.md): the JSON results the commands write become one page an engineer can send on.
// The page is self-contained HTML, with charts drawn by Apache ECharts (inlined, so it works offline
// from disk), and the same content as Markdown and as CSV.
//
// A report shows what its results hold and says which parts they lack: nothing is estimated.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cs::reports {

// The hex SHA-256 of a file's bytes (OpenSSL). Throws std::runtime_error when it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

// One result file read for a report.
struct ReportSource {
  enum class Kind { training_run, inference_run, plans, cost, serving_cost, sizing, validation };
  Kind kind = Kind::training_run;
  std::filesystem::path path;
  nlohmann::json data;       // plans: only the simulated plans are kept in data["plans"]
  std::vector<std::size_t> plan_positions;  // plans: where each kept plan stands in the file's list
  std::string sha256;
  std::uintmax_t bytes = 0;
};

// Reads a result: a summary.json of run, plans.json of plan, cost.json of cost, sizing.json of plan,
// or a `validate --json` output; a directory stands for each of those it holds. Throws InputError
// naming the file for what is not JSON or not a clustersim result.
std::vector<ReportSource> read_results(const std::filesystem::path& path);

struct ReportOptions {
  std::string version;  // clustersim's
  std::string title;    // empty: from the results' scenario names
};

// Whether this build can write the HTML page (the charting library was found when it was built).
bool html_reports_available();

// Writes report.html, report.md and report.csv into `dir` (created if needed), each atomically.
// Deterministic: the same results give byte-identical files. Throws InputError for no results, and
// std::runtime_error when this build has no charting library (see html_reports_available).
void write_report(const std::filesystem::path& dir, const std::vector<ReportSource>& sources, const ReportOptions& options);
// The files write_report writes.
const std::vector<std::string>& report_file_names();
// Throws std::runtime_error as write_report would for what stops it before it reads a result: no
// charting library in this build, or a directory in the way of one of its files.
void check_report_possible(const std::filesystem::path& dir);

}  // namespace cs::reports
