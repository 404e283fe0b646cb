#include "plan_command.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>


#ifdef CLUSTERSIM_MPI
#include <mpi.h>
#endif
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/models/serving_sizing.hpp"
#include "clustersim/models/training_scenario.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/report.hpp"
#include "clustersim/reports/text_table.hpp"
#include "clustersim/sim/time.hpp"
#include "infeasible.hpp"
#include "output_dir.hpp"
#include "progress_line.hpp"
#include "report_command.hpp"

namespace cs::app {

namespace {

struct Options {
  std::string scenario;
  bool json = false;
  std::string out;
  int threads = 0;
  std::string results;
  int top = 10;
  int bound = 0;
  std::string report;
  std::vector<std::string> training_only;  // training options given on the command line
};

// A candidate's GPUs, and the GPUs of the nodes billed for them where those are more: "14 (16)".
std::string gpus_text(const models::SizingCandidate& c) {
  return c.gpus_billed > c.gpus ? fmt::format("{} ({})", c.gpus, c.gpus_billed) : std::to_string(c.gpus);
}

// The verdict column: "meets", with the fewest that met where the row was grown: to fill its billed
// nodes, or as far as max_gpus lets it.
std::string verdict(const models::SizingCandidate& c) {
  if (!c.feasible) return c.reason;
  if (c.fewest_replicas == 0) return "meets";
  return fmt::format("meets; {} ({} meet{})", c.capped_by_max_gpus ? "grown to max_gpus" : "fills its billed nodes", models::fewest_text(c),
                     c.fewest_replicas == 1 ? "s" : "");
}

std::string slo_text(const models::Slo& s) {
  std::string out;
  const auto add = [&](const char* name, double v) {
    if (v > 0) out += fmt::format("{}{} {:g} ms", out.empty() ? "" : ", ", name, v * 1e3);
  };
  add("TTFT", s.ttft);
  add("TPOT", s.tpot);
  add("E2E", s.e2e);
  return out;
}

nlohmann::json to_json(const models::InferenceScenario& sc, const models::SizingResult& r) {
  nlohmann::json j;
  j["scenario"] = sc.name;
  j["rate_rps"] = r.rate;
  j["requests"] = r.requests;
  j["span_s"] = r.span_s;
  j["attainment_required"] = r.attainment;
  j["slo"] = {{"ttft_s", sc.slo.ttft}, {"tpot_s", sc.slo.tpot}, {"e2e_s", sc.slo.e2e}};
  j["simulations"] = r.simulations;
  nlohmann::json offers = nlohmann::json::array();
  for (const auto& o : sc.sizing->offers) {
    offers.push_back({{"node", o.node.name}, {"gpu", o.node.gpu.name}, {"price_per_gpu_hour", o.price_per_gpu_hour}, {"as_of", o.as_of}, {"source", o.source}});
  }
  j["offers"] = offers;
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : r.candidates) {
    nlohmann::json k = {{"gpu", c.gpu},         {"node", c.node},
                        {"tp", c.tp},           {"pp", c.pp},
                        {"replicas", c.replicas},
                        {"prefill", c.prefill}, {"decode", c.decode},
                        {"gpus", c.gpus},       {"gpus_billed", c.gpus_billed},
                        {"cost_per_hour", c.cost_per_hour},
                        {"feasible", c.feasible}, {"attainment", c.attainment}};
    if (c.attainment >= 0) {
      k["cost_per_million_output_tokens"] = c.cost_per_million_output_tokens;
      k["output_token_throughput"] = c.metrics.output_throughput;
      k["sustained_output_token_throughput"] = c.metrics.sustained_output_throughput;
      k["ttft_p90_ms"] = c.metrics.ttft.p90 * 1e3;
      k["tpot_p90_ms"] = c.metrics.tpot.p90 * 1e3;
      k["e2e_p90_ms"] = c.metrics.e2e.p90 * 1e3;
    }
    if (!c.feasible) k["reason"] = c.reason;
    if (c.fewest_replicas > 0) {
      k["fewest_meeting"] = {{"replicas", c.fewest_replicas}, {"prefill", c.fewest_prefill}, {"decode", c.prefill > 0 ? c.fewest_replicas - c.fewest_prefill : 0},
                             {"gpus", c.fewest_replicas * c.tp * c.pp}, {"capped_by_max_gpus", c.capped_by_max_gpus}};
    }
    cands.push_back(k);
  }
  j["candidates"] = cands;
  if (!r.candidates.empty() && r.candidates.front().feasible) j["cheapest"] = cands.front();
  return j;
}

std::string to_text(const models::InferenceScenario& sc, const models::SizingResult& r) {
  // At another rate than its own the workload is replayed over the same span: say what is served.
  const std::string served = sc.recipe && std::abs(r.rate - sc.recipe->arrivals.rate) > 1e-9 * r.rate
                                 ? fmt::format("{} requests over {:.3g} s, the workload's span: {}", r.requests, r.span_s, sc.workload_text)
                                 : sc.workload_text;
  std::string out = fmt::format("{}: sizing for {:.3g} req/s ({}), SLO {} for {:g}% of requests\n", sc.name, r.rate, served, slo_text(sc.slo),
                                100 * r.attainment);
  using A = reports::TextTable::Align;
  // The node template where offers differ in it (the same GPU may come in two); PP where replicas pipeline.
  bool nodes_differ = false;
  for (const auto& o : sc.sizing->offers) nodes_differ = nodes_differ || o.node.name != sc.sizing->offers.front().node.name;
  const bool pipelined = sc.replica.pp > 1;
  std::vector<std::string> head{"gpu", pipelined ? "TP x PP" : "TP", "layout", "GPUs (billed)", "$/hour", "$/M out tok", "meet SLO", "TTFT P90 ms", "TPOT P90 ms", "steady tok/s", "verdict"};
  std::vector<A> align{A::left, A::right, A::left, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::left};
  if (nodes_differ) {
    head.insert(head.begin() + 1, "node");
    align.insert(align.begin() + 1, A::left);
  }
  reports::TextTable t(head, align);
  for (const auto& c : r.candidates) {
    const bool ran = c.attainment >= 0;
    // The layout tried, run or not: an aggregated and a disaggregated row that both fail (an fp8 model
    // on A100) had read as two identical rows.
    std::vector<std::string> row{c.gpu, pipelined ? fmt::format("{} x {}", c.tp, c.pp) : std::to_string(c.tp), models::layout_text(c),
                                 ran ? gpus_text(c) : "-", ran ? fmt::format("{:.2f}", c.cost_per_hour) : "-",
                                 ran ? fmt::format("{:.3f}", c.cost_per_million_output_tokens) : "-", ran ? fmt::format("{:.1f}%", 100 * c.attainment) : "-",
                                 ran ? fmt::format("{:.0f}", c.metrics.ttft.p90 * 1e3) : "-", ran ? fmt::format("{:.1f}", c.metrics.tpot.p90 * 1e3) : "-",
                                 ran ? fmt::format("{:.0f}", c.metrics.sustained_output_throughput) : "-", verdict(c)};
    if (nodes_differ) row.insert(row.begin() + 1, c.node);
    t.add_row(row);
  }
  out += t.render("  ");
  if (!r.candidates.empty() && r.candidates.front().feasible) {
    const auto& c = r.candidates.front();
    out += fmt::format("cheapest: {} x {} at TP {}{} ({}), {} GPU{}{}, ${:.2f}/hour, ${:.3f} per million output tokens{}\n", c.gpu, c.node, c.tp,
                       c.pp > 1 ? fmt::format(" x PP {}", c.pp) : "", models::layout_text(c), c.gpus, c.gpus == 1 ? "" : "s",
                       c.gpus_billed != c.gpus ? fmt::format(" (billed for their nodes' {})", c.gpus_billed) : std::string(), c.cost_per_hour,
                       c.cost_per_million_output_tokens,
                       c.fewest_replicas > 0 ? fmt::format("; {} met the SLO, {}", models::fewest_text(c),
                                                                      c.capped_by_max_gpus ? "grown to max_gpus" : "the rest of the billed nodes is headroom")
                                             : std::string());
  } else {
    out += "cheapest: none of the configurations meets the SLO (raise max_gpus, relax the SLO, or offer other GPUs)\n";
  }
  out += "prices:\n";
  for (const auto& o : sc.sizing->offers) {
    out += fmt::format("  {} ({}): ${:.3f} per GPU-hour, as of {}, {}\n", o.node.gpu.name, o.node.name, o.price_per_gpu_hour, o.as_of, o.source);
  }
  out += fmt::format("simulated: {} configuration{}\n", r.simulations, r.simulations == 1 ? "" : "s");
  return out;
}

std::string to_csv(const models::SizingResult& r) {
  std::string csv =
      "gpu,node,tp,pp,replicas,prefill,decode,gpus,gpus_billed,cost_per_hour,cost_per_million_output_tokens,attainment,feasible,ttft_p90_s,tpot_p90_s,"
      "output_tokens_per_s,sustained_output_tokens_per_s,fewest_replicas_meeting,fewest_prefill_meeting\n";
  for (const auto& c : r.candidates) {
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{:.4f},{:.6f},{:.6f},{},{:.6f},{:.6f},{:.3f},{:.3f},{},{}\n", c.gpu, c.node, c.tp, c.pp, c.replicas, c.prefill, c.decode,
                       c.gpus, c.gpus_billed, c.cost_per_hour, c.cost_per_million_output_tokens, c.attainment, c.feasible ? 1 : 0, c.metrics.ttft.p90, c.metrics.tpot.p90,
                       c.metrics.output_throughput, c.metrics.sustained_output_throughput,
                       // Empty where the row does not meet the SLO: no count of it met it.
                       !c.feasible ? std::string() : std::to_string(c.fewest_replicas > 0 ? c.fewest_replicas : c.replicas),
                       !c.feasible ? std::string() : std::to_string(c.fewest_replicas > 0 ? c.fewest_prefill : c.prefill));
  }
  return csv;
}

// Under mpirun: this process's rank and the world size (1 when not launched by MPI).
struct World {
  int rank = 0, size = 1;
  bool mpi = false;
};

// The process count mpirun launched (Open MPI's or a PMI launcher's variable), 1 without it.
int launched_processes() {
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!env) env = std::getenv("PMI_SIZE");
  return env ? std::max(1, std::atoi(env)) : 1;
}

World join_world() {
  World w;
  if (launched_processes() <= 1) return w;
#ifdef CLUSTERSIM_MPI
  MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  w.mpi = true;
  return w;
#else
  throw InputError("launched by mpirun, but this clustersim was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

// Rank 0 gathers every other rank's simulated plans into its result.
void gather(const World& w, models::SearchResult& r, double tokens) {
#ifdef CLUSTERSIM_MPI
  const std::string mine = models::shard_lines(r);
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(w.size)), offsets(static_cast<std::size_t>(w.size));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (w.rank == 0) {
    int total = 0;
    for (int k = 0; k < w.size; ++k) {
      offsets[static_cast<std::size_t>(k)] = total;
      total += lengths[static_cast<std::size_t>(k)];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (w.rank == 0) {
    for (int k = 1; k < w.size; ++k) {
      models::merge_shard(r, all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(k)]), static_cast<std::size_t>(lengths[static_cast<std::size_t>(k)])),
                          tokens);
    }
  }
#else
  (void)w, (void)r, (void)tokens;
#endif
}

void leave_world(const World& w) {
#ifdef CLUSTERSIM_MPI
  if (w.mpi) MPI_Finalize();
#else
  (void)w;
#endif
}

// --results names a file to read back and rewrite: refuse, before any work, what cannot be one.
void check_results_path(const std::string& results) {
  if (results.empty()) return;
  const std::filesystem::path path(results);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(fmt::format("--results: expected a file (JSON lines), found the directory {}", results));
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError(fmt::format("--results {}: {} {}", results, dir.string(), std::filesystem::exists(dir, ec) ? "is not a directory" : "(its directory) does not exist"));
  }
}

// A rank that fails stops them all: the others would wait in the gather for ever (and this rank
// in MPI_Finalize for them). The message names the rank; mpirun exits with the status.
[[noreturn]] void abort_world(const World& w, const std::exception& e) {
  const bool input = dynamic_cast<const InputError*>(&e) != nullptr || dynamic_cast<const sim::TimeRangeError*>(&e) != nullptr;
  std::cerr << fmt::format("clustersim: error: (MPI rank {} of {}) {}\n", w.rank, w.size, e.what()) << std::flush;
#ifdef CLUSTERSIM_MPI
  MPI_Abort(MPI_COMM_WORLD, input ? 2 : 1);
#endif
  std::_Exit(input ? 2 : 1);
}

// Returns why nothing in the space runs, where nothing does (rank 0 only): the caller throws it
// as Infeasible once the MPI world is left.
std::optional<std::string> search_training_plans(const Options& o, const World& world);

void training_plan(const Options& o) {
  check_results_path(o.results);
  // The resumable results file must not be one of the files --out and --report write (a --results
  // out/plans.json had been replaced by --out's plans.json, and the rerun then refused it).
  for (const auto& [dir, names] : {std::pair<std::string, std::vector<std::string>>{o.out, {"plans.json", "plans.csv"}},
                                   std::pair<std::string, std::vector<std::string>>{o.report, reports::report_file_names()}}) {
    if (o.results.empty() || dir.empty()) continue;
    for (const std::string& name : names) {
      if (same_output(o.results, std::filesystem::path(dir) / name)) {
        throw InputError(fmt::format("--results {} is the {} that --{} writes: give the results file another name", o.results, name, dir == o.report ? "report" : "out"));
      }
    }
  }
  const World world = join_world();
  std::optional<std::string> none_runs;
  if (!world.mpi) {
    none_runs = search_training_plans(o, world);
  } else {
    try {
      none_runs = search_training_plans(o, world);
    } catch (const std::exception& e) {
      abort_world(world, e);
    }
    leave_world(world);
  }
  if (none_runs) throw Infeasible(*none_runs);
}

std::optional<std::string> search_training_plans(const Options& o, const World& world) {
  const models::TrainingScenario sc = models::load_training_scenario(o.scenario);
  if (world.rank == 0) prepare_outputs(o.out, o.report, out_option(o), {"plans.json", "plans.csv"});
  if (!o.results.empty()) refuse_outputs_over_inputs({std::filesystem::path(o.results)}, "--results");
  models::SearchOptions opt;
  opt.threads = o.threads;
  opt.shard = world.rank;
  opt.shards = world.size;
  if (o.bound > 0) {
    if (world.size > 1) throw InputError("--bound prunes in one process; leave it out under mpirun");
    opt.bound = true;
    opt.keep = o.bound;
  }
  // Each rank keeps its own results file (resume with the same rank count).
  if (!o.results.empty()) opt.results = world.size > 1 ? fmt::format("{}.rank{}-of-{}", o.results, world.rank, world.size) : o.results;
  check_results_path(opt.results.string());
  std::string price_note = "GPU-hours of whole nodes";  // the GPUs of the nodes a plan runs on (price above)
  if (sc.price_per_gpu_hour > 0) {
    opt.price_per_gpu_hour = sc.price_per_gpu_hour;
    price_note = fmt::format("USD at {} (${:.3f}/GPU-h)", sc.price_offering, sc.price_per_gpu_hour);
    if (!sc.search.systems.empty()) {
      price_note = fmt::format("USD at on-demand list prices: {} ${:.3f}/GPU-h on {}", sc.price_offering, sc.price_per_gpu_hour, sc.topology->name);
      for (const auto& sys : sc.search.systems) price_note += fmt::format("; {} ${:.3f}/GPU-h on {}", sys.offering, sys.price_per_gpu_hour, sys.topology->name);
    }
  }
  // Without a token budget a plan's cost is one step's (search_plans prices the step).
  if (sc.job.token_budget <= 0) price_note += " per step (no train_tokens to price a whole run)";
  const auto start = std::chrono::steady_clock::now();
  models::SearchResult r = [&] {
    const ProgressLine line(!o.json && world.rank == 0);
    models::SearchOptions shown = opt;
    if (line.on()) {
      shown.progress = [&](std::size_t done, std::size_t total) {
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double eta = done > 0 ? el / done * (total - done) : 0;
        const int width = 30, filled = static_cast<int>(width * done / std::max<std::size_t>(total, 1));
        line.show(fmt::format("[{}{}] {}/{} simulated or pruned, ETA {:.0f} s", std::string(filled, '#'), std::string(width - filled, ' '), done, total, eta));
      };
    }
    return models::search_plans(sc.job, *sc.topology, sc.search, shown);
  }();
  if (world.size > 1) {
    gather(world, r, sc.job.token_budget);
    if (world.rank != 0) return std::nullopt;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool budget = sc.job.token_budget > 0;
  const auto days = [&](const models::PlanOutcome& x) { return budget ? x.time_to_train_s / 86400.0 : 0.0; };

  std::vector<std::size_t> sim;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    if (r.outcomes[i].status == models::PlanOutcome::Status::simulated) sim.push_back(i);
  }
  std::vector<std::size_t> by_time = sim, by_cost = sim;
  std::stable_sort(by_time.begin(), by_time.end(), [&](auto a, auto b) { return r.outcomes[a].step_s < r.outcomes[b].step_s; });
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](auto a, auto b) { return r.outcomes[a].cost < r.outcomes[b].cost; });
  const std::vector<std::size_t> front = models::pareto_front(r);
  const std::optional<std::string> none_runs =
      by_time.empty() ? std::optional<std::string>(fmt::format("{}: no plan in the space runs: of its {} plan{}, {} break a constraint and {} do not fit in memory",
                                                               o.scenario, r.enumerated, r.enumerated == 1 ? "" : "s", r.constraint, r.memory))
                      : std::nullopt;

  nlohmann::json j;
  j["scenario"] = sc.name;
  j["enumerated"] = r.enumerated;
  j["rejected_constraint"] = r.constraint;
  j["rejected_memory"] = r.memory;
  j["simulated"] = r.simulated;
  j["resumed"] = r.resumed;
  j["pruned_by_bound"] = r.bound;
  j["cost_unit"] = price_note;
  j["source"] = source_of(o.scenario);
  constexpr const char* kPlans = "@plans@";  // where the every-plan array goes
  j["plans"] = kPlans;
  nlohmann::json fr = nlohmann::json::array();
  for (auto i : front) fr.push_back(r.key(r.outcomes[i]));
  j["pareto_front"] = fr;
  if (!by_time.empty()) j["fastest"] = r.key(r.outcomes[by_time.front()]);
  if (!by_cost.empty()) j["cheapest"] = r.key(r.outcomes[by_cost.front()]);
  const std::string document = j.dump(2) + "\n";
  const std::size_t at = document.find(fmt::format("\"{}\"", kPlans));
  const std::string_view head = std::string_view(document).substr(0, at);
  const std::string_view tail = std::string_view(document).substr(at + std::string_view(kPlans).size() + 2);
  const auto status_of = [](const models::PlanOutcome& x) {
    return x.status == models::PlanOutcome::Status::simulated    ? "simulated"
           : x.status == models::PlanOutcome::Status::constraint ? "constraint"
           : x.status == models::PlanOutcome::Status::memory     ? "memory"
                                                                  : "bound";
  };
  // Every plan, one JSON object and one CSV row each, streamed: a space can hold a million plans,
  // and the documents run to hundreds of megabytes.
  const auto write_json = [&](const auto& put) {
    put(head);
    put("[");
    bool first = true;
    for (const auto& x : r.outcomes) {
      nlohmann::json k = {{"key", r.key(x)}, {"plan", r.text(x)}, {"status", status_of(x)}};
      if (r.systems.size() > 1) k["topology"] = r.topology(x).name;
      if (x.status == models::PlanOutcome::Status::simulated) {
        k["step_s"] = x.step_s;
        k["mfu"] = x.mfu;
        k["tokens_per_s"] = x.tokens_per_s;
        if (budget) k["time_to_train_days"] = days(x);
        k["gpu_hours"] = x.gpu_hours;
        k["cost"] = x.cost;
        const auto& b = x.breakdown;
        k["breakdown_s"] = {{"compute", b.compute}, {"tp_comm", b.tp_comm}, {"cp_comm", b.cp_comm}, {"ep_comm", b.ep_comm}, {"dp_comm", b.dp_comm},
                            {"pp_comm", b.pp_comm}, {"pipeline_bubble", b.bubble}, {"optimizer", b.optimizer}};
      } else {
        k["reason"] = r.reason(x);
      }
      if (x.memory_bytes > 0) k["memory_gib"] = x.memory_bytes / double(1ull << 30);
      if (x.lower_bound_s > 0) k["lower_bound_s"] = x.lower_bound_s;
      put(first ? "\n    " : ",\n    ");
      put(k.dump());
      first = false;
    }
    put(first ? "]" : "\n  ]");
    put(tail);
  };
  const auto write_csv = [&](const auto& put) {
    put("key,status,step_s,mfu,tokens_per_s,time_to_train_days,gpu_hours,cost,memory_gib,reason\n");
    for (const auto& x : r.outcomes) {
      std::string reason = r.reason(x);
      std::replace(reason.begin(), reason.end(), ',', ';');
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      // A plan that was not simulated has no timings: empty fields, not zeros that sort it first.
      const bool simulated = x.status == models::PlanOutcome::Status::simulated;
      // Without a token budget there is no time to train (empty), and GPU-hours and cost are one
      // step's: small figures that a fixed one or two decimals had printed as 0.0 and 0.01 for every plan.
      const auto figure = [](double v, const char* fixed) { return std::abs(v) >= 1 ? fmt::format(fmt::runtime(fixed), v) : fmt::format("{:.4g}", v); };
      const std::string timings = simulated ? fmt::format("{:.6f},{:.4f},{:.1f},{},{},{}", x.step_s, x.mfu, x.tokens_per_s, budget ? fmt::format("{:.4f}", days(x)) : std::string(),
                                                          figure(x.gpu_hours, "{:.1f}"), figure(x.cost, "{:.2f}"))
                                            : std::string(",,,,,");
      const std::string memory = x.memory_bytes > 0 ? fmt::format("{:.2f}", x.memory_bytes / double(1ull << 30)) : std::string();
      put(fmt::format("{},{},{},{},{}\n", r.key(x), status_of(x), timings, memory, reason));
    }
  };
  if (!o.out.empty()) {
    reports::make_output_directory(o.out, out_option(o));
    check_report_targets(o.report);
    // Both files or neither, streamed (a wide search's can be large).
    reports::write_files_atomically(o.out, {"plans.json", "plans.csv"}, [&](std::size_t i, reports::AtomicFileWriter& file) {
      const auto put = [&](std::string_view text) { file.write(text); };
      if (i == 0) {
        write_json(put);
      } else {
        write_csv(put);
      }
    });
  }
  if (o.json) {
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "plans.json"}, false);
    write_json([](std::string_view text) { std::cout << text; });
    return none_runs;
  }
  std::cout << fmt::format("{}: {} plan{} enumerated: {} break a constraint, {} do not fit in memory, {}{} simulated ({} resumed) in {:.2f} s{}\n", sc.name,
                           r.enumerated, r.enumerated == 1 ? "" : "s", r.constraint, r.memory, o.bound > 0 ? fmt::format("{} cannot reach the top {} (lower bound), ", r.bound, o.bound) : "",
                           r.simulated, r.resumed, wall,
                           world.size > 1 ? fmt::format(" on {} MPI ranks", world.size) : "");
  using A = reports::TextTable::Align;
  const auto table = [&](const char* title, const std::vector<std::size_t>& order, std::size_t k) {
    std::cout << title << "\n";
    reports::TextTable t({"#", "plan", "GPUs", "step s", "MFU", "tokens/s", "days", budget ? "cost" : "cost/step", "compute", "TP", "DP", "PP+bubble", "GiB/GPU"},
                         {A::right, A::left, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::right});
    for (std::size_t n = 0; n < std::min(k, order.size()); ++n) {
      const auto& x = r.outcomes[order[n]];
      const auto& b = x.breakdown;
      const models::TrainingJob job = r.job(x);
      t.add_row({std::to_string(n + 1), r.text(x) + (order[n] == r.own ? " (scenario's)" : ""), std::to_string(job.plan.gpus()), fmt::format("{:.3f}", x.step_s),
                 fmt::format("{:.1f}%", 100 * x.mfu), fmt::format("{:.0f}", x.tokens_per_s), budget ? days_figure(days(x)) : "-",
                 fmt::format("{:.4g}", x.cost), fmt::format("{:.2f}", b.compute), fmt::format("{:.2f}", b.tp_comm + b.cp_comm + b.ep_comm),
                 fmt::format("{:.2f}", b.dp_comm), fmt::format("{:.2f}", b.pp_comm + b.bubble), fmt::format("{:.1f}", x.memory_bytes / double(1ull << 30))});
    }
    std::cout << t.render("  ");
  };
  // The branch and bound keeps the best K exact and prunes what cannot reach them: past K a ranked
  // table would show survivors, not the true next plans (a probe found two cheaper plans pruned).
  const int exact_rows = o.bound > 0 ? std::min(o.top, o.bound) : o.top;
  if (by_time.empty()) {
    std::cout << "no plan in the space runs: every one breaks a constraint or does not fit in memory (the reasons below)\n";
  } else {
    if (exact_rows < o.top) {
      std::cout << fmt::format("(--bound {} keeps the top {} exact and prunes the rest: the ranked tables stop there; raise --bound for more)\n", o.bound,
                               o.bound);
    }
    table(fmt::format("fastest (top {} by throughput):", exact_rows).c_str(), by_time, static_cast<std::size_t>(exact_rows));
  }
  std::set<int> counts;
  for (auto i : sim) counts.insert(r.outcomes[i].plan.gpus);
  if (counts.size() > 1 || r.systems.size() > 1) {
    table(fmt::format("cheapest (top {} by cost, {}):", exact_rows, price_note).c_str(), by_cost, static_cast<std::size_t>(exact_rows));
    table("Pareto front (time to train against cost):", front, front.size());
  }
  if (r.systems.size() > 1) {
    // The cheapest simulated plan on each system, so that GPU types can be compared side by side.
    std::vector<std::size_t> per_system;
    for (std::size_t k = 0; k < r.systems.size(); ++k) {
      const auto it = std::find_if(by_cost.begin(), by_cost.end(), [&](std::size_t i) { return r.outcomes[i].plan.system == static_cast<int>(k); });
      if (it != by_cost.end()) per_system.push_back(*it);
    }
    table("cheapest on each topology:", per_system, per_system.size());
    // A system where nothing was simulated would otherwise be missing from that table without a word.
    for (std::size_t k = 0; k < r.systems.size(); ++k) {
      std::size_t constraint = 0, memory = 0, pruned = 0, simulated = 0;
      for (const auto& x : r.outcomes) {
        if (x.plan.system != static_cast<int>(k)) continue;
        switch (x.status) {
          case models::PlanOutcome::Status::simulated: ++simulated; break;
          case models::PlanOutcome::Status::constraint: ++constraint; break;
          case models::PlanOutcome::Status::memory: ++memory; break;
          case models::PlanOutcome::Status::bound: ++pruned; break;
        }
      }
      if (simulated > 0) continue;
      std::cout << fmt::format("  no plan simulated on {}: of its {} plans, {} break a constraint, {} do not fit in memory, {} were pruned by the bound\n",
                               r.systems[k].topology->name, constraint + memory + pruned, constraint, memory, pruned);
    }
  }
  // The scenario's own plan (always in the space), and why the others lose.
  const auto ranked = std::find(by_time.begin(), by_time.end(), r.own);
  if (ranked != by_time.end()) {
    const std::size_t n = static_cast<std::size_t>(ranked - by_time.begin());
    std::cout << fmt::format("the scenario's plan ranks {} of {} simulated{}{}\n", n + 1, by_time.size(),
                             n == 0 ? "" : fmt::format("; the fastest is {:.1f}% faster", 100 * (1 - r.outcomes[by_time[0]].step_s / r.outcomes[by_time[n]].step_s)),
                             // A pruned plan cannot reach the top K, but it may well beat the scenario's.
                             // (within the top K none can: each pruned plan's bound exceeds the K-th best step)
                             r.bound > 0 && n + 1 > static_cast<std::size_t>(r.keep)
                                 ? fmt::format(" (the {} plans the bound pruned are not ranked: some may be faster than it)", r.bound)
                                 : "");
  } else {
    const auto& x = r.outcomes[r.own];
    std::cout << fmt::format("the scenario's plan ({}) is not simulated: {}\n", r.text(x), r.reason(x));
  }
  std::map<std::string, std::pair<int, std::string>> reasons;  // reason class -> count, example
  for (const auto& x : r.outcomes) {
    if (x.status == models::PlanOutcome::Status::simulated) continue;
    std::string cls = x.status == models::PlanOutcome::Status::memory  ? "out of memory"
                      : x.status == models::PlanOutcome::Status::bound ? "lower bound"
                                                                       : x.reason.substr(0, x.reason.find_first_of("0123456789"));
    auto& e = reasons[cls];
    if (e.first++ == 0) e.second = fmt::format("{}: {}", r.text(x), r.reason(x));
  }
  if (!reasons.empty()) {
    std::cout << "rejected (count, reason, an example; every plan's reason is in --out plans.csv):\n";
    for (const auto& [cls, e] : reasons) std::cout << fmt::format("  {:>6}  {}\n", e.first, e.second);
  }
  std::cout << fmt::format("cost unit: {}\n", price_note);
  if (!o.out.empty()) std::cout << fmt::format("wrote {0}/plans.json and {0}/plans.csv\n", o.out);
  if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "plans.json"});
  return none_runs;
}

void plan(const Options& o) {
  if (models::scenario_kind(o.scenario) != "inference") {
    training_plan(o);
    return;
  }
  if (!o.training_only.empty()) {
    std::string given;
    for (const auto& name : o.training_only) given += (given.empty() ? "" : ", ") + name;
    throw InputError(fmt::format("{} appl{} to training scenarios only: {} is an inference scenario", given, o.training_only.size() == 1 ? "ies" : "y",
                                 o.scenario));
  }
  // Sizing is not sharded: every rank would size the whole fleet and print it.
  if (launched_processes() > 1) {
    throw InputError(fmt::format("inference sizing runs in one process (its simulations use this machine's cores); leave out mpirun ({} processes launched)",
                                 launched_processes()));
  }
  const models::InferenceScenario sc = models::load_inference_scenario(o.scenario);
  if (!sc.sizing) throw InputError(fmt::format("{}: no 'sizing' section (gpus with prices, tp, attainment) to plan from", o.scenario));
  prepare_outputs(o.out, o.report, out_option(o), {"sizing.json", "sizing.csv"});
  // On a terminal, what is being simulated (a large sizing runs for minutes).
  const auto start = std::chrono::steady_clock::now();
  const models::SizingResult r = [&] {
    const ProgressLine line(!o.json);
    models::SizingProgress progress;
    if (line.on()) {
      progress = [&](const std::string& configuration, int simulated) {
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        line.show(fmt::format("{} simulated in {:.0f} s; now {}", simulated, el, configuration));
      };
    }
    return models::size_fleet(sc, progress);
  }();
  nlohmann::json j = to_json(sc, r);
  j["source"] = source_of(o.scenario);
  if (!o.out.empty()) {
    reports::make_output_directory(o.out, out_option(o));
    check_report_targets(o.report);
    reports::write_files_atomically(o.out, {{"sizing.json", j.dump(2) + "\n"}, {"sizing.csv", to_csv(r)}});
  }
  if (o.json) {
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "sizing.json"}, false);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << to_text(sc, r);
    if (!o.out.empty()) std::cout << fmt::format("wrote {0}/sizing.json and {0}/sizing.csv\n", o.out);
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "sizing.json"});
  }
  if (r.candidates.empty() || !r.candidates.front().feasible) {
    throw Infeasible(fmt::format("{}: no configuration meets the SLO for {:g}% of requests within max_gpus {}", o.scenario,
                                 100 * sc.sizing->attainment, sc.sizing->max_gpus));
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("plan", "Search a training scenario's plan space (fastest and cheapest plans, Pareto front, rejections), or size the cheapest inference fleet that meets its SLOs");
  cmd->add_option("scenario", o->scenario, "Training scenario (optional search section) or inference scenario with a sizing section")->required()->check(input_file());
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_option("--out", o->out, "Directory to write sizing.json and sizing.csv (inference) or plans.json and plans.csv (training)")->transform(output_directory());
  const std::vector<CLI::Option*> training_only = {
      cmd->add_option("--threads", o->threads, "Training: threads simulating plans (default: every core)")->check(CLI::Range(0, 4096)),
      cmd->add_option("--results", o->results, "Training: resumable results file (JSON lines); a rerun skips the plans it holds"),
      cmd->add_option("--bound", o->bound, "Training: branch and bound, skipping plans whose lower bound cannot reach the top K by time or cost")->check(CLI::Range(1, 100000)),
      cmd->add_option("--top", o->top, "Training: rows in each ranked table (default 10)")->check(CLI::Range(1, 100000))};
  cmd->add_option("--report", o->report, "Also write the capacity-planning report (report.html, .md, .csv) into this directory (and --out's files, when --out is not given)")->transform(output_directory());
  cmd->callback([o, training_only] {
    if (!o->report.empty() && o->out.empty()) o->out = o->report;
    for (const CLI::Option* opt : training_only) {
      if (opt->count() > 0) o->training_only.push_back(opt->get_name());
    }
    plan(*o);
  });
}

}  // namespace cs::app
