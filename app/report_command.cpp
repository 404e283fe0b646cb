#include "report_command.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/report.hpp"
#include "output_dir.hpp"

namespace cs::app {

namespace {

struct Options {
  std::vector<std::string> results;
  std::string out;
  std::string title;
};

reports::ReportOptions report_options(const std::string& title) {
  reports::ReportOptions o;
  o.version = CLUSTERSIM_VERSION;
  o.title = title;
  return o;
}

}  // namespace

void write_report_of(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& results, bool announce) {
  std::vector<reports::ReportSource> sources;
  for (const auto& f : results) {
    for (auto& s : reports::read_results(f)) sources.push_back(std::move(s));
  }
  reports::write_report(dir, sources, report_options(""));
  if (announce) std::cout << fmt::format("wrote {0}/report.html, {0}/report.md and {0}/report.csv\n", dir.string());
}

void check_report_targets(const std::string& report_dir) {
  if (!report_dir.empty()) reports::check_report_possible(report_dir);
}

void prepare_outputs(const std::string& out, const std::string& report, const char* out_what, const std::vector<std::string>& out_files) {
  std::vector<std::filesystem::path> outputs;
  if (!out.empty()) {
    for (const auto& name : out_files) outputs.push_back(std::filesystem::path(out) / name);
  }
  if (!report.empty()) {
    for (const auto& name : reports::report_file_names()) outputs.push_back(std::filesystem::path(report) / name);
  }
  refuse_outputs_over_inputs(outputs, out.empty() ? "--report" : out_what);
  if (!out.empty()) {
    reports::make_output_directory(out, out_what);
    reports::check_directory_writable(out, out_what);
  }
  if (!report.empty() && report != out) {
    reports::make_output_directory(report, "--report");
    reports::check_directory_writable(report, "--report");
  }
  check_report_targets(report);
}

std::string remove_stale_companion(const std::string& dir, const std::string& companion, const std::string& header, const std::string& written, bool replaced) {
  const std::filesystem::path stale = std::filesystem::path(dir) / companion;
  std::error_code ec;
  if (!replaced || !std::filesystem::is_regular_file(stale, ec)) return "";
  std::string first;
  {
    std::ifstream in(stale);
    std::getline(in, first);
  }
  if (!first.starts_with(header)) return "";
  if (!std::filesystem::remove(stale, ec) || ec) {
    throw std::runtime_error(fmt::format("cannot remove {}, left from an earlier result than the {} just written: {}", stale.string(), written,
                                         ec ? ec.message() : "not removed"));
  }
  return fmt::format(" (removed {}, an earlier result's, whose {} this one replaced)", stale.string(), written);
}

nlohmann::json source_of(const std::string& scenario_file) {
  nlohmann::json j = {{"scenario_file", scenario_file}, {"scenario_sha256", reports::sha256_file(scenario_file)}, {"clustersim", CLUSTERSIM_VERSION}};
  // The parts the scenario named, as read (a shipped part comes from the install or source tree).
  nlohmann::json parts = nlohmann::json::array();
  const auto scenario = std::filesystem::path(scenario_file).lexically_normal();
  for (const auto& f : InputsRead::all()) {
    if (f == scenario) continue;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec)) continue;
    parts.push_back({{"file", f.string()}, {"sha256", reports::sha256_file(f)}});
  }
  j["parts"] = parts;
  return j;
}

void add_report_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("report",
                                     "Write a capacity-planning report (self-contained HTML with charts, Markdown, CSV) from the results of run, plan, cost and validate");
  cmd->add_option("results", o->results,
                  "Result files or the directories holding them: summary.json (run --out), plans.json or sizing.json (plan --out), cost.json (cost --out), "
                  "validate --json output")
      ->required();
  cmd->add_option("--out", o->out, "Directory to write report.html, report.md and report.csv")->required()->transform(output_directory());
  cmd->add_option("--title", o->title, "The report's title (default: from the scenario names)");
  cmd->callback([o] {
    std::vector<reports::ReportSource> sources;
    std::set<std::filesystem::path> seen;  // a result named twice (a file and its directory, say) counts once
    for (const auto& f : o->results) {
      for (auto& s : reports::read_results(f)) {
        std::error_code ec;
        const std::filesystem::path key = std::filesystem::weakly_canonical(s.path, ec);
        if (seen.insert(ec ? s.path : key).second) sources.push_back(std::move(s));
      }
    }
    // No report file may replace a result it is made from (a result named report.md in --out had
    // been overwritten, exit 0).
    std::vector<std::filesystem::path> outputs;
    for (const auto& name : reports::report_file_names()) outputs.push_back(std::filesystem::path(o->out) / name);
    for (const auto& s : sources) InputsRead::note(s.path);
    refuse_outputs_over_inputs(outputs, "--out");
    reports::write_report(o->out, sources, report_options(o->title));
    std::cout << fmt::format("wrote {0}/report.html, {0}/report.md and {0}/report.csv from {1} result{2}\n", o->out, sources.size(), sources.size() == 1 ? "" : "s");
  });
}

}  // namespace cs::app
