#include "cost_command.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>


#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/models/cost.hpp"
#include "clustersim/models/serving_scenario.hpp"
#include "clustersim/models/training_scenario.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/text_table.hpp"
#include "output_dir.hpp"
#include "progress_line.hpp"
#include "infeasible.hpp"
#include "report_command.hpp"

namespace cs::app {

namespace {

struct Options {
  std::string scenario;
  bool json = false;
  std::string out;
  std::string report;
  int trials = 0;
  std::optional<std::uint64_t> seed;  // unset: the scenario's
};

constexpr double kDay = 86400.0;
// Checkpoint bytes per parameter: bf16 weights (2) and fp32 master weights and Adam moments (12),
// the ZeRO paper's 16 bytes per parameter less the gradients, which a checkpoint does not keep.
constexpr double kCheckpointBytesPerParameter = 14.0;

std::string days(double s) { return std::isfinite(s) ? fmt::format("{:.2f}", s / kDay) : "never"; }
// "95 min"; "never" when the interval is the whole failure-free run or more, so that no checkpoint is
// ever written (no failures expected, or an `interval:` past the run's end).
std::string checkpoint_every(double interval_s, double work_s) { return interval_s >= work_s ? "never" : fmt::format("{:.0f} min", interval_s / 60); }
// "87.3 h", "7.5e+299 h": a fixed-point figure up to ten million hours, then an exponent, so that a
// tiny failure rate does not print a 300-digit MTBF.
std::string hours(double h) { return !std::isfinite(h) ? "infinite" : h < 1e7 ? fmt::format("{:.1f} h", h) : fmt::format("{:.3g} h", h); }
// A percentile past the trials that finished is infinite: "never", as for days.
std::string money(double v) {
  if (!std::isfinite(v)) return "never";
  if (v >= 1e6) return fmt::format("{:.3f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

nlohmann::json distribution(const models::Distribution& d, double scale) {
  return {{"mean", d.mean / scale}, {"p50", d.p50 / scale}, {"p90", d.p90 / scale}, {"p99", d.p99 / scale}};
}

// The header of distributions.csv, by which an inference cost into the same directory knows it as clustersim's.
constexpr const char* kDistributionsHeader = "offering,trial,wall_days,cost_usd";

// Prices a training run; returns the message for exit status 3 when its plan does not fit in memory
// (the table and files are written all the same, with the verdict among the notes).
std::optional<std::string> training_cost(const Options& o) {
  const models::TrainingScenario sc = models::load_training_scenario(o.scenario);
  if (!sc.cost) throw InputError(fmt::format("{}: no 'cost' section (sheet, checkpoint, reliability) to price", o.scenario));
  models::CostSection cost = *sc.cost;
  if (o.trials > 0) cost.options.trials = o.trials;
  if (o.seed) cost.options.seed = *o.seed;
  prepare_outputs(o.out, o.report, out_option(o), {"cost.json", "distributions.csv"});
  const models::TrainingResult r = models::simulate_training(sc.job, *sc.topology);
  // `run` and `plan` say so; a price of a run that cannot start must too.
  std::optional<std::string> unfit;
  const bool marginal = r.memory.marginal();
  if (!r.memory.fits()) {
    const std::string verdict = r.memory.verdict();
    cost.notes.insert(cost.notes.begin(), marginal ? fmt::format("the plan fits in memory only if the allocator wastes little: {}", verdict)
                                                   : fmt::format("the plan does not fit in memory, so no offering can run it as priced: {}", verdict));
    if (!marginal) unfit = fmt::format("{}: the plan does not fit in memory ({}); the prices above are for a run that cannot start", o.scenario, verdict);
  }
  models::RunSpec run;
  run.work_s = r.time_to_train.value();
  std::set<int> nodes;
  for (int g = 0; g < r.gpus; ++g) nodes.insert(sc.topology->device(sc.topology->gpus()[static_cast<std::size_t>(g)]).node);
  run.nodes = static_cast<int>(nodes.size());
  // Offerings rent whole nodes: the job pays for every GPU of the nodes it runs on.
  run.gpus = sc.topology->gpus_of_nodes_holding(r.gpus);
  run.tokens = sc.job.token_budget;
  run.dp_replicas = sc.job.plan.dp;
  if (cost.options.elastic && (sc.job.plan.dp < 2 || run.nodes % sc.job.plan.dp != 0)) {
    const std::string why = fmt::format("elastic shrink drops whole data-parallel replicas: it needs dp > 1 and the {} nodes to divide among the {} replicas",
                                        run.nodes, sc.job.plan.dp);
    if (cost.origin.elastic) cost.origin.elastic->fail_message(why);
    throw InputError(fmt::format("{}: {}", o.scenario, why));
  }
  run.reliability = cost.reliability;
  run.checkpoint.bytes = models::count_parameters(sc.job.model).total() * kCheckpointBytesPerParameter;
  run.checkpoint.write_bandwidth = *cost.checkpoint_bandwidth;
  run.checkpoint.interval_s = cost.interval_s;
  run.checkpoint.async = cost.async;
  if (cost.async) {
    // The pause of an asynchronous checkpoint: each GPU copies its shard to host memory.
    const double host = models::host_link_bandwidth(*sc.topology);
    if (!(host > 0)) throw InputError(fmt::format("{}: async checkpoints need a GPU-to-CPU path in the topology", o.scenario));
    run.checkpoint.snapshot_s = run.checkpoint.bytes / r.gpus / host;
  }
  std::vector<models::CostEstimate> rows;
  // Many trials take minutes (a million a row: about a minute each on 2 cores): say where they are.
  try {
    const ProgressLine line(!o.json);  // cleared before a refusal prints
    auto options = cost.options;
    if (line.on()) {
      options.progress = [&line](const std::string& row, int done, int trials) {
        line.show(fmt::format("{:<60.60} {:>3}% of {} trials", row, static_cast<long long>(done) * 100 / trials, trials));
      };
    }
    rows = models::estimate_costs(run, cost.offerings, options);
  } catch (const models::CostInputError& e) {
    cost.refuse(e);
  }

  nlohmann::json j;
  j["source"] = source_of(o.scenario);
  j["scenario"] = sc.name;
  j["gpus"] = r.gpus;
  j["gpus_billed"] = run.gpus;
  j["nodes"] = run.nodes;
  j["step_time_s"] = r.step_time.value();
  j["fits_in_memory"] = r.memory.fits();
  j["marginal_in_memory"] = marginal;  // over only through the assumed fragmentation allowance
  j["train_tokens"] = run.tokens;
  j["failure_free_days"] = run.work_s / kDay;
  j["checkpoint"] = {{"bytes", run.checkpoint.bytes},
                     {"write_s", run.checkpoint.bytes / run.checkpoint.write_bandwidth},
                     {"async", run.checkpoint.async},
                     {"snapshot_s", run.checkpoint.snapshot_s}};
  j["reliability"] = {{"failures_per_1000_node_days", run.reliability.failures_per_1000_node_days},
                      {"detect_s", run.reliability.detect_s},
                      {"restart_s", run.reliability.restart_s}};
  j["sheet"] = cost.sheet.name;
  j["trials"] = cost.options.trials;
  j["seed"] = cost.options.seed;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : rows) {
    nlohmann::json k = {{"offering", e.offering},
                        {"pricing", to_string(e.pricing)},
                        {"price_per_gpu_hour", e.price_per_gpu_hour},
                        {"checkpoint_interval_s", e.interval_s},
                        {"can_finish", e.can_finish},
                        {"finished_trials", e.finished},
                        {"wall_days", distribution(e.wall_s, kDay)},
                        {"cost_usd", distribution(e.cost, 1.0)},
                        {"mean_interruptions", e.mean_interruptions},
                        {"gpu_hours_lost_per_event", e.gpu_hours_lost_per_event},
                        {"cost_per_million_tokens", e.finished == e.trials ? nlohmann::json(e.cost_per_million_tokens) : nlohmann::json(nullptr)}};
    if (e.pricing == models::Pricing::mixed) k["fallback_price_per_gpu_hour"] = e.fallback_price_per_gpu_hour;
    // null where the closed form cannot finish (the key stays, so every row has the same fields).
    k["expected_wall_days"] = std::isfinite(e.expected_wall_s) ? nlohmann::json(e.expected_wall_s / kDay) : nlohmann::json(nullptr);
    k["expected_cost_usd"] = std::isfinite(e.expected_cost) ? nlohmann::json(e.expected_cost) : nlohmann::json(nullptr);
    if (!e.verdict.empty()) k["verdict"] = e.verdict;
    if (e.pricing == models::Pricing::mixed) k["on_demand_fraction"] = e.on_demand_fraction;
    if (e.break_even_preemptions_per_node_hour) {
      k[e.break_even_per_zone ? "break_even_preemptions_per_zone_hour" : "break_even_preemptions_per_node_hour"] = *e.break_even_preemptions_per_node_hour;
    }
    if (e.break_even_utilisation) k["break_even_utilisation"] = *e.break_even_utilisation;
    list.push_back(k);
  }
  j["offerings"] = list;
  if (!cost.notes.empty()) j["notes"] = cost.notes;
  if (!o.out.empty()) {
    reports::make_output_directory(o.out, out_option(o));
    check_report_targets(o.report);
    std::string csv = std::string(kDistributionsHeader) + "\n";
    for (const auto& e : rows) {
      // Each finished trial under its own number (an unfinished one leaves a gap, as its seed does).
      for (std::size_t k = 0; k < e.walls.size(); ++k) {
        csv += fmt::format("{},{},{:.6f},{:.2f}\n", e.offering, e.finished_trials[k], e.walls[k] / kDay, e.costs[k]);
      }
    }
    reports::write_files_atomically(o.out, {{"cost.json", j.dump(2) + "\n"}, {"distributions.csv", csv}});
  }
  if (o.json) {
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "cost.json"}, false);
    std::cout << j.dump(2) << "\n";
    return unfit;
  }
  std::cout << fmt::format("{}: {:.4g} tokens on {} GPUs ({} nodes{}), step {:.3f} s: {:.2f} days failure-free\n", sc.name, run.tokens, r.gpus, run.nodes,
                           run.gpus != r.gpus ? fmt::format(", billed for their {} GPUs", run.gpus) : std::string(), r.step_time.value(), run.work_s / kDay);
  std::cout << fmt::format("checkpoint {:.0f} GB, written in {:.0f} s{}; failures {:.2f} per 1,000 node-days (MTBF {} for the job), restart {:.0f} s\n",
                           run.checkpoint.bytes / 1e9, run.checkpoint.bytes / run.checkpoint.write_bandwidth,
                           run.checkpoint.async ? fmt::format(" in the background after a {:.1f} s snapshot", run.checkpoint.snapshot_s) : "",
                           run.reliability.failures_per_1000_node_days,
                           hours(run.reliability.failures_per_1000_node_days > 0 ? 1000.0 * 24.0 / (run.reliability.failures_per_1000_node_days * run.nodes) : INFINITY),
                           rows.empty() ? 0.0 : rows.front().restart_s);
  using A = reports::TextTable::Align;
  reports::TextTable t({"offering", "pricing", "$/GPU-h", "ckpt every", "days P50", "P90", "P99", "cost P50", "P90", "P99", "$/M tokens", "events", "GPU-h lost/event", "break-even"},
                       {A::left, A::left, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::left});
  for (const auto& e : rows) {
    std::string even;
    if (e.break_even_preemptions_per_node_hour) {
      even = *e.break_even_preemptions_per_node_hour > 0 ? fmt::format("{:.2g} preemptions/{}-h", *e.break_even_preemptions_per_node_hour,
                                                                       e.break_even_per_zone ? "zone" : "node")
                                                          : e.break_even_none;
    }
    if (e.break_even_utilisation) even = fmt::format("utilisation {:.0f}%", 100 * *e.break_even_utilisation);
    if (e.pricing == models::Pricing::spot && even.empty()) even = "-";  // Weibull lifetimes, traces: no single rate to solve for
    if (e.pricing == models::Pricing::mixed) even = fmt::format("{:.0f}% on on-demand", 100 * e.on_demand_fraction);
    // A mixed row pays the spot price until it falls back, then the on-demand one.
    const std::string price = e.pricing == models::Pricing::mixed ? fmt::format("{:.3f}/{:.3f}", e.price_per_gpu_hour, e.fallback_price_per_gpu_hour)
                                                                  : fmt::format("{:.3f}", e.price_per_gpu_hour);
    t.add_row({e.offering, std::string(to_string(e.pricing)), price, checkpoint_every(e.interval_s, run.work_s),
               days(e.wall_s.p50), days(e.wall_s.p90), days(e.wall_s.p99), money(e.cost.p50), money(e.cost.p90), money(e.cost.p99), e.finished == e.trials ? fmt::format("{:.3f}", e.cost_per_million_tokens) : "-",
               fmt::format("{:.1f}", e.mean_interruptions), fmt::format("{:.1f}", e.gpu_hours_lost_per_event), even});
  }
  std::cout << t.render("  ");
  for (const auto& n : cost.notes) std::cout << "note: " << n << "\n";
  for (const auto& e : rows) {
    if (!e.verdict.empty()) std::cout << fmt::format("note: {}: {}\n", e.offering, e.verdict);
  }
  if (cost.options.elastic && std::none_of(rows.begin(), rows.end(), [](const auto& e) { return e.offering.ends_with(" (elastic)"); })) {
    std::cout << "note: elastic: no spot offering preempts nodes one at a time (Poisson, not zone-wide) to shrink on\n";
  }
  std::cout << "break-even: against the cheapest on-demand offering; spot: the preemption rate (per node-hour, or per zone-hour when\n"
               "  the zone fails together) at which it costs as much (Poisson preemptions only: '-' for Weibull lifetimes, traces and\n"
               "  none); owned: the utilisation at which a GPU-hour costs as much\n";
  if (std::any_of(rows.begin(), rows.end(), [](const auto& e) { return e.pricing == models::Pricing::mixed; })) {
    std::cout << "mixed: spot until the deadline needs on-demand, then on-demand ($/GPU-h: spot/on-demand; break-even: the share of\n"
                 "  billed GPU-hours on on-demand)\n";
  }
  std::cout << fmt::format("Monte Carlo: {} trials per offering, seed {}; closed form (Daly) beside it in --json\n", cost.options.trials, cost.options.seed);
  if (!o.out.empty()) std::cout << fmt::format("wrote {0}/cost.json and {0}/distributions.csv\n", o.out);
  if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "cost.json"});
  return unfit;
}

void inference_cost(const Options& o) {
  const models::InferenceScenario sc = models::load_inference_scenario(o.scenario);
  if (!sc.cost) throw InputError(fmt::format("{}: no 'cost' section (sheet) to price", o.scenario));
  prepare_outputs(o.out, o.report, out_option(o), {"cost.json"});
  const models::InferenceResult r = models::simulate_inference(sc);
  const int gpus = sc.replicas * sc.replica.tp * sc.replica.pp;
  // Whole nodes are rented: the fleet pays for every GPU of the nodes its replicas sit on, those past
  // a node's last whole TP group included.
  const int billed = models::ServingLayout(*sc.topology, sc.replica.tp).gpus_billed(sc.replicas * sc.replica.pp);
  const auto& m = r.metrics;
  nlohmann::json j;
  j["scenario"] = sc.name;
  j["source"] = source_of(o.scenario);
  j["gpus"] = gpus;
  j["gpus_billed"] = billed;
  j["output_token_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["sustained_output_token_throughput"] = m.sustained_output_throughput;
  j["sustained_total_token_throughput"] = m.sustained_total_token_throughput;
  nlohmann::json list = nlohmann::json::array();
  using A = reports::TextTable::Align;
  reports::TextTable t({"offering", "pricing", "$/GPU-h", "fleet $/hour", "$/M output tokens", "$/M total tokens"}, {A::left, A::left, A::right, A::right, A::right, A::right});
  for (const auto& off : sc.cost->offerings) {
    const double price = off.effective_price_per_gpu_hour();
    const double hourly = price * billed;
    // At the steady rates: a fleet serves a continuing load, not this run's ramp and drain.
    const double per_output = m.sustained_output_throughput > 0 ? hourly / (m.sustained_output_throughput * 3600.0) * 1e6 : INFINITY;
    const double per_total = m.sustained_total_token_throughput > 0 ? hourly / (m.sustained_total_token_throughput * 3600.0) * 1e6 : INFINITY;
    list.push_back({{"offering", off.name}, {"pricing", to_string(off.pricing)}, {"price_per_gpu_hour", price}, {"fleet_cost_per_hour", hourly},
                    {"cost_per_million_output_tokens", per_output}, {"cost_per_million_total_tokens", per_total}});
    t.add_row({off.name, std::string(to_string(off.pricing)), fmt::format("{:.3f}", price), fmt::format("{:.2f}", hourly), fmt::format("{:.3f}", per_output),
               fmt::format("{:.3f}", per_total)});
  }
  j["offerings"] = list;
  if (!sc.cost->notes.empty()) j["notes"] = sc.cost->notes;
  std::string removed;
  if (!o.out.empty()) {
    reports::make_output_directory(o.out, out_option(o));
    check_report_targets(o.report);
    std::error_code ec;
    const bool replaced = std::filesystem::exists(std::filesystem::path(o.out) / "cost.json", ec);
    reports::write_file_atomically(std::filesystem::path(o.out) / "cost.json", j.dump(2) + "\n");
    removed = remove_stale_companion(o.out, "distributions.csv", kDistributionsHeader, "cost.json", replaced);
  }
  if (o.json) {
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "cost.json"}, false);
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{}: {} GPUs{} serving {:.0f} output tokens/s ({:.0f} total) in steady state at the simulated load ({:.0f} and {:.0f} over the "
                           "whole run, its drain included)\n",
                           sc.name, gpus, billed != gpus ? fmt::format(" (billed for their nodes' {})", billed) : std::string(), m.sustained_output_throughput, m.sustained_total_token_throughput, m.output_throughput, m.total_token_throughput);
  std::cout << t.render("  ");
  for (const auto& n : sc.cost->notes) std::cout << "note: " << n << "\n";
  std::cout << "note: list prices; spot preemptions of a serving fleet (lost capacity, requests retried) are not modelled\n";
  if (!o.out.empty()) std::cout << fmt::format("wrote {}/cost.json{}\n", o.out, removed);
  if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "cost.json"});
}

}  // namespace

void add_cost_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("cost", "Price a scenario's run on each offering of its cost sheet: finish-time and cost distributions with failures, preemptions and checkpoints");
  cmd->add_option("scenario", o->scenario, "Training or inference scenario YAML file with a cost section")->required()->check(input_file());
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_option("--out", o->out, "Directory to write cost.json and, for a training run, distributions.csv (every trial's finish time and cost)")->transform(output_directory());
  cmd->add_option("--trials", o->trials, "Monte Carlo trials per offering (default: the scenario's, else 1000)")->check(CLI::Range(1, 1000000));
  // An integer from 0 to 2^64 - 1, checked as text: CLI11 would wrap "-1" into a 20-digit seed.
  cmd->add_option("--seed", o->seed, "Seed of the Monte Carlo (default: the scenario's, else 1)")
      ->check(CLI::Validator(
          [](std::string& v) {
            std::uint64_t x = 0;
            const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            return ec == std::errc() && end == v.data() + v.size() ? std::string() : "expected a seed of 0 to 18446744073709551615, found " + v;
          },
          "SEED"));
  cmd->add_option("--report", o->report, "Also write the capacity-planning report (report.html, .md, .csv) into this directory (and --out's files, when --out is not given)")->transform(output_directory());
  cmd->callback([o] {
    if (!o->report.empty() && o->out.empty()) o->out = o->report;
    if (models::scenario_kind(o->scenario) == "inference") {
      // A fleet is priced by the hour, without trials: these would be ignored.
      if (o->trials > 0 || o->seed) throw InputError("--trials and --seed apply to training scenarios only (an inference fleet is priced without a Monte Carlo)");
      inference_cost(*o);
    } else {
      if (const std::optional<std::string> unfit = training_cost(*o)) throw Infeasible(*unfit);
    }
  });
}

}  // namespace cs::app
