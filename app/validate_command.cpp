#include "validate_command.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/parts.hpp"
#include "clustersim/reports/text_table.hpp"
#include "clustersim/validate/runner.hpp"
#include "output_dir.hpp"
#include "progress_line.hpp"

namespace cs::app {

namespace {

using reports::TextTable;
using validate::CaseResult;

struct Options {
  std::vector<std::string> files;
  bool json = false;
  std::string attention;   // empty: by each source's date
  std::string tp_overlap;  // empty: by each source's date
  std::vector<std::string> hardware;
  std::string plans;  // search plans for the training cases whose id starts with this
  bool unknowns = false;  // each training case's step under the other values of its unknown settings
  bool pairs = false;     // with unknowns: two settings together as well
};

std::string number(double v) { return fmt::format("{:.4g}", v); }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole), the
// first after `first`, the rest after as many spaces.
std::string wrap(const std::string& first, const std::string& text, std::size_t width) {
  const std::string indent(first.size(), ' ');
  std::string out = first;
  std::size_t column = first.size();
  bool fresh = true;  // nothing on this line yet
  std::size_t from = 0;
  while (from < text.size()) {
    std::size_t to = text.find(' ', from);
    if (to == std::string::npos) to = text.size();
    const std::string_view word(text.data() + from, to - from);
    from = to + 1;
    if (word.empty()) continue;
    if (!fresh && column + 1 + word.size() > width) {
      out += "\n" + indent;
      column = indent.size();
      fresh = true;
    }
    if (!fresh) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    fresh = false;
  }
  return out + "\n";
}

// Numbered notes under a table: each distinct text once, shared by every row that cites it.
class Notes {
 public:
  std::string cite(const std::string& text) {
    if (text.empty()) return "";
    const auto [it, fresh] = index_.emplace(text, texts_.size() + 1);
    if (fresh) texts_.push_back(text);
    return fmt::format("[{}]", it->second);
  }
  std::string render(const std::string& indent, std::size_t width) const {
    std::string out;
    for (std::size_t i = 0; i < texts_.size(); ++i) out += wrap(fmt::format("{}[{}] ", indent, i + 1), texts_[i], width);
    return out;
  }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<std::string> texts_;
};

nlohmann::json to_json(const CaseResult& r) {
  nlohmann::json j{{"id", r.id}, {"kind", r.kind}, {"status", r.status}};
  if (r.status != "ok") {
    j["reason"] = r.reason;
    return j;
  }
  j["primary_metric"] = r.primary_metric;
  j["predicted"] = r.predicted;
  j["measured"] = r.measured;
  j["error_pct"] = std::round(r.error_pct * 100) / 100;
  nlohmann::json errors = nlohmann::json::object();
  for (const auto& [k, v] : r.errors_pct) errors[k] = std::round(v * 100) / 100;
  j["errors_pct"] = errors;
  j["defaults_applied"] = r.defaults_applied;
  if (!r.breakdown.empty()) {
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& [part, seconds] : r.breakdown) parts[part] = seconds;
    j["breakdown_s"] = parts;
  }
  return j;
}

std::string seconds_and_error(double s, double measured) { return fmt::format("{} ({:+.1f}%)", number(s), 100.0 * (s - measured) / measured); }

// Each training case's step under the other values its unknown settings could have had, one at a
// time (and, with pairs, two together).
void print_unknowns(const std::vector<validate::Case>& cases, const validate::RunOptions& run_options, bool pairs, bool json) {
  nlohmann::json list = nlohmann::json::array();
  TextTable t({"id", "measured", "default", "lowest", "lowest at", "highest", "highest at", "measured inside"},
              {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::left,
               TextTable::Align::right, TextTable::Align::left, TextTable::Align::left});
  int ran = 0, with_settings = 0, with_unknowns = 0, inside = 0, not_run = 0;
  std::vector<std::string> untried_notes;
  std::vector<std::string> outside;
  for (const auto& c : cases) {
    if (c.kind != "training") continue;
    const validate::Sensitivity s = validate::sensitivity(c, run_options, pairs);
    nlohmann::json k{{"id", s.id}, {"status", s.status}};
    if (s.status != "ok") {
      ++not_run;  // counted in the summary (a failed case had been left out of it)
      k["reason"] = s.reason;
      t.add_row({s.id, s.status, "-", "-", "-", "-", "-", s.reason});
      list.push_back(k);
      continue;
    }
    ++ran;
    with_settings += s.has_unknown_settings() ? 1 : 0;
    with_unknowns += s.has_unknowns() ? 1 : 0;
    for (const auto& u : s.untried) untried_notes.push_back(fmt::format("{}: {}", s.id, u));
    inside += s.has_unknowns() && s.measured_inside() ? 1 : 0;
    if (s.has_unknowns() && !s.measured_inside()) outside.push_back(fmt::format("{} ({:+.1f}%)", s.id, 100.0 * ((s.measured_s > s.high_s ? s.high_s : s.low_s) - s.measured_s) / s.measured_s));
    nlohmann::json alternatives = nlohmann::json::array();
    for (const auto& a : s.alternatives) {
      nlohmann::json x{{"setting", a.setting}, {"value", a.value}, {"status", a.status}};
      if (!a.with_setting.empty()) x["with"] = {{"setting", a.with_setting}, {"value", a.with_value}};
      if (a.status == "ok") {
        x["step_time_s"] = a.step_s;
        x["error_pct"] = std::round(a.error_pct * 100) / 100;
      } else {
        x["reason"] = a.reason;
      }
      alternatives.push_back(x);
    }
    k.update({{"measured_step_time_s", s.measured_s}, {"default_step_time_s", s.default_s}, {"default_error_pct", std::round(s.default_error_pct * 100) / 100},
              {"low_step_time_s", s.low_s}, {"low_at", s.low_at}, {"high_step_time_s", s.high_s}, {"high_at", s.high_at},
              {"measured_inside", s.has_unknowns() ? nlohmann::json(s.measured_inside()) : nlohmann::json(nullptr)}, {"alternatives", alternatives},
              {"untried", s.untried}});
    list.push_back(k);
    t.add_row({s.id, number(s.measured_s), seconds_and_error(s.default_s, s.measured_s), seconds_and_error(s.low_s, s.measured_s), s.low_at,
               seconds_and_error(s.high_s, s.measured_s), s.high_at,
               s.has_unknowns()          ? (s.measured_inside() ? "yes" : "no")
               : s.has_unknown_settings() ? (s.alternatives.empty() ? "(not tried)" : "(no alternative fits)")
                                          : "(no unknown setting)"});
  }
  if (json) {
    std::cout << nlohmann::json{{"unknowns", list},           {"pairs", pairs},
                                {"cases", ran},               {"cases_not_run", not_run},
                                {"cases_with_unknown_settings", with_settings}, {"cases_with_unknowns", with_unknowns},
                                {"measured_inside", inside}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << fmt::format("training step time (s) under the other values of the plan settings each case leaves unknown, {}, the others at their defaults\n",
                           pairs ? "one at a time and two together" : "one at a time");
  std::cout << t.render("  ");
  std::cout << fmt::format("  {} case{}{}, {} with unknown plan settings, {} of them with an alternative that runs and fits; the measured step lies "
                           "inside their range in {}",
                           ran, ran == 1 ? "" : "s", not_run > 0 ? fmt::format(" run ({} more failed or unsupported, listed)", not_run) : "", with_settings,
                           with_unknowns, inside);
  if (!outside.empty()) {
    std::string names;
    for (const auto& n : outside) names += (names.empty() ? "" : ", ") + n;
    std::cout << fmt::format("; outside it (nearest end's error): {}", names);
  }
  std::cout << "\n";
  if (!untried_notes.empty()) {
    std::cout << "  not tried:\n";
    for (const auto& n : untried_notes) std::cout << "    " << n << "\n";
  }
}

void run(const Options& o) {
  std::vector<validate::Case> cases;
  std::map<std::string, const validate::Case*> first_of;  // the first case of each id, over every file
  for (const auto& f : o.files) {
    auto more = validate::read_cases(f);
    cases.insert(cases.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  // One id in two files (or one file given twice) would count the run twice in the summary.
  for (const auto& c : cases) {
    const auto [it, fresh] = first_of.emplace(c.id, &c);
    if (!fresh) {
      throw InputError(fmt::format("{}:{}: case '{}' is also at {}:{}: each published run once (a file given twice?)", c.file, c.line, c.id, it->second->file,
                                   it->second->line));
    }
  }
  validate::RunOptions run_options;
  if (!o.attention.empty()) run_options.flash_attention = o.attention == "flash";
  if (!o.tp_overlap.empty()) run_options.tp_overlap = o.tp_overlap == "on";
  for (const auto& h : o.hardware) {
    IncludeStack includes;
    run_options.hardware.push_back(hardware::load_hardware_profile(resolve_part(h, "hardware"), includes));
  }
  // Two profiles for one GPU: only one could be used, and which would depend on the order.
  for (std::size_t i = 0; i < run_options.hardware.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (run_options.hardware[i].name == run_options.hardware[j].name) {
        throw InputError(fmt::format("--hardware {} and --hardware {}: both are profiles of {}; give one per GPU", o.hardware[j], o.hardware[i],
                                     run_options.hardware[i].name));
      }
    }
  }
  // A profile that no case uses would leave the shipped one in place unnoticed.
  for (const auto& hw : run_options.hardware) {
    std::set<std::string> gpus;
    for (const auto& c : cases) gpus.insert(c.cluster.gpu);
    if (!gpus.count(hw.name)) {
      std::string names;
      for (const auto& g : gpus) names += (names.empty() ? "" : ", ") + g;
      throw InputError(fmt::format("--hardware {}: no case runs on a GPU named {} (the cases use {})", hw.file.string(), hw.name, names));
    }
  }
  if (!o.plans.empty()) {
    // The published plan against the best the search finds, case by case.
    nlohmann::json list = nlohmann::json::array();
    TextTable t({"id", "published plan", "step s", "best plan found", "step s", "faster", "simulated", "pruned", "why"},
                {TextTable::Align::left, TextTable::Align::left, TextTable::Align::right, TextTable::Align::left, TextTable::Align::right,
                 TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::left});
    int compared = 0, at_least_as_fast = 0;
    const auto selected = [&](const validate::Case& c) { return c.kind == "training" && c.id.rfind(o.plans, 0) == 0; };
    if (std::none_of(cases.begin(), cases.end(), selected)) {
      std::string ids;
      for (const auto& c : cases) {
        if (c.kind == "training") ids += (ids.empty() ? "" : ", ") + c.id;
      }
      throw InputError(fmt::format("--plans {}: no training case id starts with it (the training cases: {})", o.plans, ids.empty() ? "none" : ids));
    }
    for (const auto& c : cases) {
      if (!selected(c)) continue;
      // A search takes seconds to minutes a case: on a terminal, say how far it is.
      const validate::PlanComparison p = [&] {
        const ProgressLine line(!o.json);
        std::function<void(std::size_t, std::size_t)> progress;
        if (line.on()) progress = [&](std::size_t done, std::size_t total) { line.show(fmt::format("{}: {}/{} plans simulated or pruned", c.id, done, total)); };
        return validate::compare_plans(c, run_options, progress);
      }();
      nlohmann::json k = {{"id", p.id}, {"status", p.status}};
      if (p.status != "ok") {
        k["reason"] = p.reason;
        t.add_row({p.id, p.status, "-", "-", "-", "-", "-", "-", p.reason});
      } else {
        ++compared;
        at_least_as_fast += p.best_step_s <= p.published_step_s ? 1 : 0;
        k.update({{"published_plan", p.published_plan}, {"published_step_s", p.published_step_s}, {"best_plan", p.best_plan}, {"best_step_s", p.best_step_s},
                  {"simulated", p.simulated}, {"pruned", p.pruned}, {"why", p.why}});
        const bool same = p.best_plan == p.published_plan;
        t.add_row({p.id, p.published_plan, number(p.published_step_s), same ? "(the published one)" : p.best_plan, number(p.best_step_s),
                   fmt::format("{:.1f}%", 100 * (1 - p.best_step_s / p.published_step_s)), std::to_string(p.simulated), std::to_string(p.pruned),
                   same ? "" : p.why});
      }
      list.push_back(k);
    }
    if (o.json) {
      std::cout << nlohmann::json{{"plans", list}, {"compared", compared}, {"best_at_least_as_fast", at_least_as_fast}}.dump(2) << "\n";
    } else {
      std::cout << t.render("  ");
      std::cout << fmt::format("  {} cases compared; the best plan found is at least as fast as the published one in {}\n", compared, at_least_as_fast);
    }
    return;
  }
  if (o.unknowns) {
    // As --plans: nothing to vary is a mistake, not an empty table (exit 0 before 2026-12-07).
    if (std::none_of(cases.begin(), cases.end(), [](const validate::Case& c) { return c.kind == "training"; })) {
      throw InputError("--unknowns varies the unknown plan settings of training cases, and the files given have none");
    }
    print_unknowns(cases, run_options, o.pairs, o.json);
    return;
  }
  std::vector<CaseResult> results;
  results.reserve(cases.size());
  for (const auto& c : cases) results.push_back(validate::run_case(c, run_options));
  const auto summary = validate::summarize(results);

  if (o.json) {
    nlohmann::json out;
    out["cases"] = nlohmann::json::array();
    for (const auto& r : results) out["cases"].push_back(to_json(r));
    out["summary"] = nlohmann::json::object();
    for (const auto& [kind, s] : summary) {
      nlohmann::json k{{"cases", s.cases}, {"ok", s.ok}, {"unsupported", s.unsupported}, {"failed", s.failed}};
      k["mape_pct"] = s.ok > 0 ? nlohmann::json(std::round(s.mape_pct * 100) / 100) : nlohmann::json(nullptr);
      k["max_abs_error_pct"] = s.ok > 0 ? nlohmann::json(std::round(s.max_abs_error_pct * 100) / 100) : nlohmann::json(nullptr);
      out["summary"][kind] = k;
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  for (const char* kind : {"training", "inference", "gemm", "collective"}) {
    auto it = summary.find(kind);
    if (it == summary.end()) continue;
    // The kind's metric, and any other a case of it is compared on (a serving case with latencies only).
    std::vector<std::string> metrics{validate::primary_metric(kind)};
    for (const auto& r : results) {
      if (r.kind == kind && r.status == "ok" && std::find(metrics.begin(), metrics.end(), r.primary_metric) == metrics.end()) metrics.push_back(r.primary_metric);
    }
    std::cout << fmt::format("{} ({}, {})\n", kind, fmt::join(metrics, "; "), it->second.cases == 1 ? "1 case" : fmt::format("{} cases", it->second.cases));
    // The defaults a case took (or why it did not run) are long and shared by many cases: numbered
    // notes under the table keep it narrow.
    TextTable table({"id", "predicted", "measured", "error %", "defaults / reason"},
                    {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::left});
    Notes notes;
    for (const auto& r : results) {
      if (r.kind != kind) continue;
      const auto m = r.measured.find(r.primary_metric);
      const std::string measured = m == r.measured.end() ? "-" : number(m->second);
      if (r.status == "ok") {
        table.add_row({r.id, number(r.predicted.at(r.primary_metric)), measured, fmt::format("{:+.1f}", r.error_pct), notes.cite(join(r.defaults_applied))});
      } else {
        table.add_row({r.id, r.status, measured, "-", notes.cite(r.reason)});
      }
    }
    std::cout << table.render("  ");
    const auto& s = it->second;
    std::cout << fmt::format("  summary: {} case{}, {} ok, {} unsupported, {} failed; {}\n", s.cases, s.cases == 1 ? "" : "s", s.ok, s.unsupported, s.failed,
                             s.ok > 0 ? fmt::format("MAPE {:.1f}%, max |error| {:.1f}%", s.mape_pct, s.max_abs_error_pct)
                                      : std::string("no case ran, so no error to report"));
    std::cout << notes.render("  ", 100) << "\n";
  }
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("validate", "Compare predictions with published measurements (clustersim-validation/1 files)");
  cmd->add_option("files", o->files, "Validation YAML files")->required()->check(input_file());
  cmd->add_flag("--json", o->json, "Print one JSON object (cases and summary per kind)");
  cmd->add_option("--attention", o->attention, "Attention kernel for every training case: flash or unfused (Megatron before FlashAttention); default: unfused for sources published before 2023, flash after")
      ->check(CLI::IsMember({"flash", "unfused"}));
  cmd->add_option("--tp-overlap", o->tp_overlap,
                  "TP communication overlap for every training case with sequence parallelism: on or off; default: on for sources from 2024 on (or undated), off before")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--hardware", o->hardware,
                  "Hardware profile (file or shipped name) that replaces the shipped profile of the same name, e.g. a calibrated one; repeatable");
  auto* plans = cmd->add_option("--plans", o->plans,
                  "Search the plan space of the training cases whose id starts with this, and compare the best plan found with the published one")
      ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("expected the start of a case id (each search takes minutes), found ''") : std::string(); }, "PREFIX"));
  auto* unknowns = cmd->add_flag("--unknowns", o->unknowns,
                "For each training case, the step time under every other value of each plan setting it leaves unknown (micro batch up to 8, every vpp that splits "
                "a stage's layers evenly, ZeRO 0 instead of 1, sequence parallelism, recompute), one at a time, and whether the measurement lies inside that range");
  unknowns->excludes(plans);
  cmd->add_flag("--pairs", o->pairs, "With --unknowns: also every two values of different unknown settings together (one setting at a time can miss what two reach)")
      ->needs(unknowns);
  cmd->callback([o] { run(*o); });
}

}  // namespace cs::app
