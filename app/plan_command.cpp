#include "plan_command.hpp"

#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/models/serving_sizing.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/text_table.hpp"

namespace cs::app {

namespace {

struct Options {
  std::string scenario;
  bool json = false;
  std::string out;
};

std::string layout(const models::SizingCandidate& c) {
  if (c.replicas == 0) return "-";
  if (c.prefill > 0) return fmt::format("{}P + {}D", c.prefill, c.decode);
  return fmt::format("{} replica{}", c.replicas, c.replicas == 1 ? "" : "s");
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
                        {"tp", c.tp},           {"replicas", c.replicas},
                        {"prefill", c.prefill}, {"decode", c.decode},
                        {"gpus", c.gpus},       {"cost_per_hour", c.cost_per_hour},
                        {"feasible", c.feasible}, {"attainment", c.attainment}};
    if (c.attainment >= 0) {
      k["cost_per_million_output_tokens"] = c.cost_per_million_output_tokens;
      k["output_token_throughput"] = c.metrics.output_throughput;
      k["ttft_p90_ms"] = c.metrics.ttft.p90 * 1e3;
      k["tpot_p90_ms"] = c.metrics.tpot.p90 * 1e3;
      k["e2e_p90_ms"] = c.metrics.e2e.p90 * 1e3;
    }
    if (!c.feasible) k["reason"] = c.reason;
    cands.push_back(k);
  }
  j["candidates"] = cands;
  if (!r.candidates.empty() && r.candidates.front().feasible) j["cheapest"] = cands.front();
  return j;
}

std::string to_text(const models::InferenceScenario& sc, const models::SizingResult& r) {
  std::string out = fmt::format("{}: sizing for {:.3g} req/s ({}), SLO {} for {:.0f}% of requests\n", sc.name, r.rate, sc.workload_text, slo_text(sc.slo),
                                100 * r.attainment);
  using A = reports::TextTable::Align;
  reports::TextTable t({"gpu", "TP", "layout", "GPUs", "$/hour", "$/M out tok", "meet SLO", "TTFT P90 ms", "TPOT P90 ms", "out tok/s", "verdict"},
                       {A::left, A::right, A::left, A::right, A::right, A::right, A::right, A::right, A::right, A::right, A::left});
  for (const auto& c : r.candidates) {
    const bool ran = c.attainment >= 0;
    t.add_row({c.gpu, std::to_string(c.tp), ran ? layout(c) : "-", ran ? std::to_string(c.gpus) : "-", ran ? fmt::format("{:.2f}", c.cost_per_hour) : "-",
               ran ? fmt::format("{:.3f}", c.cost_per_million_output_tokens) : "-", ran ? fmt::format("{:.1f}%", 100 * c.attainment) : "-",
               ran ? fmt::format("{:.0f}", c.metrics.ttft.p90 * 1e3) : "-", ran ? fmt::format("{:.1f}", c.metrics.tpot.p90 * 1e3) : "-",
               ran ? fmt::format("{:.0f}", c.metrics.output_throughput) : "-", c.feasible ? "meets" : c.reason});
  }
  out += t.render("  ");
  if (!r.candidates.empty() && r.candidates.front().feasible) {
    const auto& c = r.candidates.front();
    out += fmt::format("cheapest: {} x {} at TP {} ({}), {} GPUs, ${:.2f}/hour, ${:.3f} per million output tokens\n", c.gpu, c.node, c.tp, layout(c), c.gpus,
                       c.cost_per_hour, c.cost_per_million_output_tokens);
  } else {
    out += "cheapest: none of the configurations meets the SLO (raise max_gpus, relax the SLO, or offer other GPUs)\n";
  }
  out += "prices:\n";
  for (const auto& o : sc.sizing->offers) {
    out += fmt::format("  {} ({}): ${:.3f} per GPU-hour, as of {}, {}\n", o.node.gpu.name, o.node.name, o.price_per_gpu_hour, o.as_of, o.source);
  }
  out += fmt::format("simulated: {} configurations\n", r.simulations);
  return out;
}

std::string to_csv(const models::SizingResult& r) {
  std::string csv = "gpu,node,tp,replicas,prefill,decode,gpus,cost_per_hour,cost_per_million_output_tokens,attainment,feasible,ttft_p90_s,tpot_p90_s,output_tokens_per_s\n";
  for (const auto& c : r.candidates) {
    csv += fmt::format("{},{},{},{},{},{},{},{:.4f},{:.6f},{:.6f},{},{:.6f},{:.6f},{:.3f}\n", c.gpu, c.node, c.tp, c.replicas, c.prefill, c.decode, c.gpus,
                       c.cost_per_hour, c.cost_per_million_output_tokens, c.attainment, c.feasible ? 1 : 0, c.metrics.ttft.p90, c.metrics.tpot.p90,
                       c.metrics.output_throughput);
  }
  return csv;
}

void plan(const Options& o) {
  if (models::scenario_kind(o.scenario) != "inference") {
    throw InputError(fmt::format("{}: plan search for training scenarios is not built yet; `clustersim plan` sizes inference scenarios", o.scenario));
  }
  const models::InferenceScenario sc = models::load_inference_scenario(o.scenario);
  if (!sc.sizing) throw InputError(fmt::format("{}: no 'sizing' section (gpus with prices, tp, attainment) to plan from", o.scenario));
  const models::SizingResult r = models::size_fleet(sc);
  const nlohmann::json j = to_json(sc, r);
  if (!o.out.empty()) {
    std::filesystem::create_directories(o.out);
    reports::write_file_atomically(std::filesystem::path(o.out) / "sizing.json", j.dump(2) + "\n");
    reports::write_file_atomically(std::filesystem::path(o.out) / "sizing.csv", to_csv(r));
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << to_text(sc, r);
    if (!o.out.empty()) std::cout << fmt::format("wrote {0}/sizing.json and {0}/sizing.csv\n", o.out);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("plan", "Size the cheapest fleet (GPU type, TP, replicas, aggregated or disaggregated) that meets an inference scenario's SLOs");
  cmd->add_option("scenario", o->scenario, "Inference scenario YAML file with a sizing section")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_option("--out", o->out, "Directory to write sizing.json and sizing.csv");
  cmd->callback([o] { plan(*o); });
}

}  // namespace cs::app
