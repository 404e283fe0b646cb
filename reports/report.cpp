#include "clustersim/reports/report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/input_file.hpp"
#include "clustersim/common/json_keys.hpp"
#include "clustersim/common/json_position.hpp"
#include "clustersim/common/markup.hpp"
#include "clustersim/common/pareto.hpp"
#include "clustersim/common/sampling.hpp"
#include "clustersim/common/units.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "report_assets.hpp"

namespace cs::reports {

namespace fs = std::filesystem;
using nlohmann::json;

std::string sha256_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path.string()));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    throw std::runtime_error("SHA-256 is not available from OpenSSL");
  }
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx, buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

bool html_reports_available() { return assets::kEchartsBundled; }

namespace {

// ---------------------------------------------------------------------------------------------
// Reading results

std::string kind_name(ReportSource::Kind k) {
  switch (k) {
    case ReportSource::Kind::training_run: return "training run (run --out summary.json)";
    case ReportSource::Kind::inference_run: return "inference run (run --out summary.json)";
    case ReportSource::Kind::plans: return "plan search (plan --out plans.json)";
    case ReportSource::Kind::cost: return "cost (cost --out cost.json)";
    case ReportSource::Kind::serving_cost: return "serving cost (cost --out cost.json on an inference scenario)";
    case ReportSource::Kind::sizing: return "fleet sizing (plan --out sizing.json)";
    case ReportSource::Kind::validation: return "accuracy (validate --json)";
  }
  return "?";
}

// A result's value as a refusal shows it: text quoted, anything else as JSON.
std::string shown(const json& v) { return v.is_string() ? fmt::format("'{}'", v.get<std::string>()) : v.dump(); }

// A result's field that is not what its command writes: "FILE:LINE:COL: field 'WHERE': expected ...,
// found ..." (the file is read again for the line: the parsed JSON keeps no positions).
[[noreturn]] void field_error(const fs::path& file, const std::string& where, const std::string& expected, const json& v) {
  throw InputError(json_location(file, where), where, expected, shown(v));
}

// A validate --json result as validate writes it: each case typed (an ok case with its signed error,
// measured values above zero), and a summary per kind that the cases bear out (counts, MAPE and
// worst error, to validate's rounding of two decimals). A hand-edited file that breaks that is
// refused, naming the field, rather than printed as "+nan%" or as a MAPE its cases do not give.
void check_validation(const json& d, const fs::path& file) {
  const auto fail = [&](const std::string& where, const std::string& expected, const json& v) { field_error(file, where, expected, v); };
  const auto get = [&](const json& o, const std::string& at, const char* key) -> const json& {
    if (!o.contains(key)) throw InputError(json_location(file, at + "." + key), fmt::format("field '{}.{}': missing", at, key));
    return o[key];
  };
  const auto finite = [](const json& v) { return v.is_number() && std::isfinite(v.get<double>()); };
  if (!d.contains("cases") || !d["cases"].is_array()) fail("cases", "a list of cases", d.value("cases", json("missing")));
  if (!d.contains("summary") || !d["summary"].is_object()) fail("summary", "an object of kinds", d.value("summary", json("missing")));
  struct Tally {
    double cases = 0, ok = 0, unsupported = 0, failed = 0, sum_abs = 0, worst = 0;
  };
  std::map<std::string, Tally> tally;
  std::map<std::string, std::size_t> ids;  // validate refuses a repeated id: two rows would share a CSV key
  for (std::size_t i = 0; i < d["cases"].size(); ++i) {
    const json& c = d["cases"][i];
    const std::string at = fmt::format("cases[{}]", i);
    if (!c.is_object()) fail(at, "an object", c);
    for (const char* k : {"id", "kind", "status"}) {
      const json& v = get(c, at, k);
      if (!v.is_string() || v.get<std::string>().empty()) fail(at + "." + k, "text", v);
    }
    for (const char* k : {"defaults_applied", "notes"}) {
      // Counted in the report's table of defaults: a list of text (a string had been skipped unsaid).
      if (!c.contains(k)) continue;
      if (!c[k].is_array()) fail(at + "." + k, "a list of text", c[k]);
      for (std::size_t j = 0; j < c[k].size(); ++j) {
        if (!c[k][j].is_string()) fail(fmt::format("{}.{}[{}]", at, k, j), "text", c[k][j]);
      }
    }
    if (const auto [it, fresh] = ids.emplace(c["id"].get<std::string>(), i); !fresh) {
      fail(at + ".id", fmt::format("an id no other case has (cases[{}] has it)", it->second), c["id"]);
    }
    const std::string status = c["status"].get<std::string>();
    Tally& t = tally[c["kind"].get<std::string>()];
    ++t.cases;
    if (status == "ok") {
      ++t.ok;
      const json& e = get(c, at, "error_pct");
      if (!finite(e)) fail(at + ".error_pct", "a number", e);
      t.sum_abs += std::abs(e.get<double>());
      t.worst = std::max(t.worst, std::abs(e.get<double>()));
      const json& metric = get(c, at, "primary_metric");
      if (!metric.is_string()) fail(at + ".primary_metric", "text", metric);
      for (const char* k : {"measured", "predicted"}) {
        const json& values = get(c, at, k);
        if (!values.is_object()) fail(at + "." + k, "an object of metrics", values);
        for (const auto& [name, v] : values.items()) {
          if (!finite(v) || v.get<double>() < 0 || (v.get<double>() == 0 && std::string_view(k) == "measured")) {
            fail(fmt::format("{}.{}.{}", at, k, name), std::string_view(k) == "measured" ? "a positive number" : "a non-negative number", v);
          }
        }
      }
      // The error is the primary metric's, predicted against measured, in percent to two decimals.
      const std::string name = metric.get<std::string>();
      const json& measured = get(c["measured"], at + ".measured", name.c_str());
      const json& predicted = get(c["predicted"], at + ".predicted", name.c_str());
      const double implied = 100.0 * (predicted.get<double>() / measured.get<double>() - 1.0);
      // validate rounds to two decimals; past 1e13 % a double cannot hold them, so allow its precision too.
      if (std::abs(implied - e.get<double>()) > 0.006 + 1e-12 * std::abs(implied)) fail(at + ".error_pct", fmt::format("{:.2f}, as its measured and predicted {} give", implied, name), e);
    } else if (status == "unsupported") {
      ++t.unsupported;
    } else if (status == "failed") {
      ++t.failed;
    } else {
      fail(at + ".status", "ok, unsupported or failed", c["status"]);
    }
  }
  for (const auto& item : d["summary"].items()) {
    // Named, not structured bindings: clang 14 (Debian 12) does not let the lambdas below capture those.
    const std::string kind = item.key();
    const json& s = item.value();
    const std::string at = "summary." + kind;
    if (!s.is_object()) fail(at, "an object", s);
    const Tally& t = tally.count(kind) ? tally.at(kind) : Tally{};
    const auto count = [&](const char* key, double listed) {
      if (!s.contains(key) && std::string_view(key) == "failed") return;  // written since 2026-11
      const json& v = get(s, at, key);
      if (!finite(v) || v.get<double>() != listed) fail(at + "." + key, fmt::format("{:g}, as the cases listed give", listed), v);
    };
    count("cases", t.cases);
    count("ok", t.ok);
    count("unsupported", t.unsupported);
    count("failed", t.failed);
    const auto figure = [&](const char* key, double from_cases, double tolerance) {
      const json& v = get(s, at, key);
      if (t.ok == 0) {
        if (!v.is_null()) fail(at + "." + key, "null (no case of the kind is ok)", v);
      } else if (!finite(v) || std::abs(v.get<double>() - from_cases) > tolerance + 1e-12 * std::abs(from_cases)) {
        fail(at + "." + key, fmt::format("{:.2f}, as the ok cases' errors give", from_cases), v);
      }
    };
    figure("mape_pct", t.ok > 0 ? t.sum_abs / t.ok : 0.0, 0.02);
    figure("max_abs_error_pct", t.worst, 0.01);
  }
  for (const auto& [kind, t] : tally) {
    if (!d["summary"].contains(kind)) fail("summary." + kind, fmt::format("the summary of the {:g} {} case{} listed", t.cases, kind, t.cases == 1 ? "" : "s"), json("missing"));
  }
}

// The headline figures a report shows must be what run wrote: finite numbers, not negative (a step
// time above zero). A hand-edited or foreign file that breaks that is refused, naming the field,
// rather than printed as "nan s" or "-1.000 s".
// `plan_positions`: where each kept plan stood in the file's plans list (read_one keeps the simulated
// ones only), so that an error names the plan the file holds at that place.
void check_figures(const json& d, const fs::path& file, ReportSource::Kind kind, const std::vector<std::size_t>& plan_positions) {
  const auto check = [&](const json& parent, const std::string& where, const char* key, bool positive) {
    const auto found = [&]() -> std::string {
      if (!parent.contains(key)) return "nothing (the key is missing)";
      return shown(parent[key]);
    };
    const bool ok = parent.contains(key) && parent[key].is_number() && std::isfinite(parent[key].get<double>()) &&
                    (positive ? parent[key].get<double>() > 0 : parent[key].get<double>() >= 0);
    if (!ok) {
      throw InputError(json_location(file, where + key), where + key, fmt::format("a {} number", positive ? "positive" : "non-negative"), found());
    }
  };
  const auto numbers_in = [&](const char* object) {
    if (!d[object].is_object()) throw InputError(json_location(file, object), object, "an object", d[object].dump());
    for (const auto& [k, v] : d[object].items()) {
      if (v.is_number() || !v.is_object()) check(d[object], std::string(object) + ".", k.c_str(), false);
    }
  };
  // Counts and names the scenario paragraph prints ("on -3 GPUs", "with the plan 5" otherwise):
  // checked where present; an absent one is printed as "-".
  const auto count_of = [&](const char* key, bool positive) {
    if (!d.contains(key)) return;
    const json& v = d[key];
    const double x = v.is_number() ? v.get<double>() : std::nan("");
    // GPU, node, rank, replica and trial counts are ints in clustersim: past 2^31 - 1 none is ("on
    // 1.845e+19 GPUs" otherwise). Tokens a step and plan counts are doubles and sizes, exact to 2^53.
    static const std::set<std::string> kInts = {"gpus", "micro_batches", "replicas", "tp", "pp", "nodes", "trials"};
    const double most = kInts.count(key) ? 2147483647.0 : 9007199254740992.0;
    if (!(std::isfinite(x) && x == std::floor(x) && (positive ? x > 0 : x >= 0) && x <= most)) {
      field_error(file, key, fmt::format("a {} whole number up to {:.0f}", positive ? "positive" : "non-negative", most), v);
    }
  };
  const auto text_of = [&](const char* key) {
    if (d.contains(key) && !d[key].is_string()) {
      throw InputError(json_location(file, key), key, "text", d[key].dump());
    }
  };
  static const std::map<ReportSource::Kind, std::pair<std::vector<const char*>, std::vector<const char*>>> kCountsAndNames = {
      {ReportSource::Kind::training_run, {{"gpus", "micro_batches", "tokens_per_step"}, {"scenario", "model", "gpu", "topology", "plan"}}},
      {ReportSource::Kind::inference_run, {{"replicas", "tp", "pp"}, {"scenario", "model", "gpu", "batching", "router", "workload"}}},
      {ReportSource::Kind::plans, {{"enumerated", "rejected_constraint", "rejected_memory", "pruned_by_bound", "simulated"}, {"scenario", "cost_unit"}}},
      {ReportSource::Kind::cost, {{"gpus", "nodes", "trials"}, {"scenario", "sheet"}}},
      {ReportSource::Kind::serving_cost, {{"gpus", "gpus_billed"}, {"scenario"}}},
      {ReportSource::Kind::sizing, {{"simulations"}, {"scenario"}}},
  };
  if (const auto it = kCountsAndNames.find(kind); it != kCountsAndNames.end()) {
    const bool zero_allowed = kind == ReportSource::Kind::plans || kind == ReportSource::Kind::sizing;
    for (const char* key : it->second.first) count_of(key, !zero_allowed);
    for (const char* key : it->second.second) text_of(key);
  }
  if (kind == ReportSource::Kind::cost) {
    // What the cost section reads of each offering, typed as `clustersim cost` writes it (null: never
    // or unbounded).
    const auto fail = [&](const std::string& where, const char* expected, const json& v) { field_error(file, where, expected, v); };
    if (!d["offerings"].is_array()) fail("offerings", "a list of offerings", d["offerings"]);
    const double trials = d["trials"].get<double>();
    for (std::size_t i = 0; i < d["offerings"].size(); ++i) {
      const json& o = d["offerings"][i];
      const std::string at = fmt::format("offerings[{}]", i);
      if (!o.is_object()) fail(at, "an object", o);
      const auto field = [&](const char* k) -> const json& {
        if (!o.contains(k)) throw InputError(json_location(file, at + "." + k), fmt::format("field '{}.{}': missing", at, k));
        return o[k];
      };
      for (const char* k : {"offering", "pricing"}) {
        if (!field(k).is_string()) fail(at + "." + k, "text", o[k]);
      }
      if (!field("can_finish").is_boolean()) fail(at + ".can_finish", "true or false", o["can_finish"]);
      const json& f = field("finished_trials");
      if (!f.is_number_integer() || f.get<double>() > trials) fail(at + ".finished_trials", "a whole number up to the trials run", f);
      for (const char* k : {"price_per_gpu_hour", "mean_interruptions"}) {
        if (!field(k).is_number()) fail(at + "." + k, "a number", o[k]);
      }
      for (const char* k : {"expected_cost_usd", "expected_wall_days"}) {
        if (o.contains(k) && !o[k].is_number() && !o[k].is_null()) fail(at + "." + k, "a number or null", o[k]);
      }
      for (const char* k : {"cost_usd", "wall_days"}) {
        const json& dist = field(k);
        if (!dist.is_object()) fail(at + "." + k, "an object of mean, p50, p90 and p99", dist);
        for (const char* q : {"mean", "p50", "p90", "p99"}) {
          if (!dist.contains(q) || !(dist[q].is_number() || dist[q].is_null())) {
            fail(fmt::format("{}.{}.{}", at, k, q), "a number or null", dist.contains(q) ? dist[q] : json("missing"));
          }
        }
      }
    }
  }
  if (kind == ReportSource::Kind::validation) check_validation(d, file);
  if (kind == ReportSource::Kind::plans && d.contains("plans") && d["plans"].is_array()) {
    // A simulated plan (the only ones kept) has its key and text, and a step time above zero: a
    // hand-edited 0 s had ranked first, a missing one had taken a GPU count's scaling point, and a
    // numeric key had shown the plan on 0 GPUs.
    const json& plans = d["plans"];
    for (std::size_t i = 0; i < plans.size(); ++i) {
      const std::string at = fmt::format("plans[{}].", i < plan_positions.size() ? plan_positions[i] : i);
      const json& p = plans[i];
      for (const char* k : {"key", "plan"}) {
        if (!p.contains(k) || !p[k].is_string()) {
          throw InputError(json_location(file, at + k), at + k, "text", p.contains(k) ? shown(p[k]) : "nothing (the key is missing)");
        }
      }
      check(p, at, "step_s", true);
    }
    // The fastest, the cheapest and the Pareto front as the search picks them (app/plan_command.cpp,
    // models::pareto_front), from the plans listed: an edited or stale file whose picks disagreed had
    // a headline and a front contradicting its own tables.
    std::vector<std::size_t> sim;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      if (plans[i].value("status", std::string("simulated")) == "simulated") sim.push_back(i);
    }
    const auto number = [&](std::size_t i, const char* k) { return plans[i].contains(k) && plans[i][k].is_number() ? plans[i][k].get<double>() : 0.0; };
    const auto time = [&](std::size_t i) { return number(i, "time_to_train_days") > 0 ? number(i, "time_to_train_days") : number(i, "step_s"); };
    const auto key = [&](std::size_t i) { return plans[i]["key"].get<std::string>(); };
    const auto pick = [&](const char* field, const char* what, const auto& less) {
      if (sim.empty() || !d.contains(field)) return;
      const std::size_t best = *std::min_element(sim.begin(), sim.end(), less);
      if (d[field] != json(key(best))) {
        throw InputError(json_location(file, field), field, fmt::format("{}, the {} of the plans listed", shown(json(key(best))), what), shown(d[field]));
      }
    };
    pick("fastest", "fastest", [&](std::size_t a, std::size_t b) { return number(a, "step_s") < number(b, "step_s"); });
    pick("cheapest", "cheapest", [&](std::size_t a, std::size_t b) { return number(a, "cost") < number(b, "cost"); });
    if (d.contains("pareto_front")) {
      std::vector<double> times, costs;
      for (std::size_t i : sim) {
        times.push_back(time(i));
        costs.push_back(number(i, "cost"));
      }
      json front = json::array();
      for (std::size_t k : cs::pareto_front(times, costs)) front.push_back(key(sim[k]));
      if (d["pareto_front"] != front) {
        throw InputError(json_location(file, "pareto_front"), "pareto_front",
                         fmt::format("the {} plans of the plans listed that no other is both faster and cheaper than ({})", front.size(), shown(front)),
                         shown(d["pareto_front"]));
      }
    }
  }
  if (kind == ReportSource::Kind::training_run) {
    check(d, "", "step_time_s", true);
    for (const char* k : {"mfu", "hfu", "tokens_per_s", "tflops_per_gpu"}) check(d, "", k, false);
    // Utilisations are fractions of the peak: at most 2 (MFU counts the whole attention matrix of a
    // causal model, whose kernels compute half), not the 300 digits a 1e300 printed as.
    for (const char* k : {"mfu", "hfu"}) {
      if (d[k].get<double>() > 2) field_error(file, k, "a fraction of the GPUs' peak (at most 2)", d[k]);
    }
    numbers_in("breakdown_s");
    // The memory the report draws: a positive HBM capacity, at least one stage, the fullest one
    // among them, and a verdict that agrees with the numbers (a capacity of 0 had printed "fits: 60.9
    // of 74.5 GiB (HBM 0.0 GiB per GPU)").
    if (d.contains("memory")) {
      const json& mem = d["memory"];
      if (!mem.is_object()) field_error(file, "memory", "a map", mem);
      check(mem, "memory.", "capacity_bytes", true);
      if (!mem.contains("stages") || !mem["stages"].is_array() || mem["stages"].empty()) {
        field_error(file, "memory.stages", "a list of every pipeline stage's memory (at least one)", mem.contains("stages") ? mem["stages"] : json("missing"));
      }
      const json& stages = mem["stages"];
      const json worst = mem.contains("worst_stage") ? mem["worst_stage"] : json("missing");
      if (!worst.is_number_integer() || worst.get<long long>() < 0 || worst.get<long long>() >= static_cast<long long>(stages.size())) {
        field_error(file, "memory.worst_stage", fmt::format("the index of one of the {} stages listed (0 to {})", stages.size(), stages.size() - 1), worst);
      }
      const json& fullest = stages[worst.get<std::size_t>()];
      const std::string at = fmt::format("memory.stages[{}].", worst.get<std::size_t>());
      if (!fullest.is_object()) field_error(file, at.substr(0, at.size() - 1), "a map", fullest);
      check(fullest, at, "total_bytes", true);
      if (mem.contains("fits") && mem["fits"].is_boolean() &&
          mem["fits"].get<bool>() != (fullest["total_bytes"].get<double>() <= mem["capacity_bytes"].get<double>())) {
        field_error(file, "memory.fits",
                    fmt::format("{} (the fullest stage needs {} bytes of {})", mem["fits"].get<bool>() ? "false" : "true", shown(fullest["total_bytes"]),
                                shown(mem["capacity_bytes"])),
                    mem["fits"]);
      }
    }
  } else if (kind == ReportSource::Kind::serving_cost) {
    // Each offering's name, pricing and figures as `clustersim cost` writes them (a $ per million
    // tokens is null where the fleet emitted none).
    if (!d["offerings"].is_array() || d["offerings"].empty()) field_error(file, "offerings", "a non-empty list of offerings", d["offerings"]);
    for (std::size_t i = 0; i < d["offerings"].size(); ++i) {
      const json& o = d["offerings"][i];
      const std::string at = fmt::format("offerings[{}]", i);
      if (!o.is_object()) field_error(file, at, "an object", o);
      for (const char* k : {"offering", "pricing"}) {
        if (!o.contains(k) || !o[k].is_string()) field_error(file, at + "." + k, "text", o.contains(k) ? o[k] : json("missing"));
      }
      for (const char* k : {"price_per_gpu_hour", "fleet_cost_per_hour"}) check(o, at + ".", k, false);
      for (const char* k : {"cost_per_million_output_tokens", "cost_per_million_total_tokens"}) {
        if (!o.contains(k) || !(o[k].is_number() || o[k].is_null())) field_error(file, at + "." + k, "a number or null", o.contains(k) ? o[k] : json("missing"));
      }
    }
    for (const char* k : {"output_token_throughput", "total_token_throughput", "sustained_output_token_throughput", "sustained_total_token_throughput"}) {
      check(d, "", k, false);
    }
    // The figures hold together as `cost` computes them: whole nodes billed, each offering's $/hour
    // its price times those GPUs, its $ per million tokens that over the steady rate (null where
    // the fleet emitted none). A hand edit that breaks one had been printed as given.
    const double gpus = d["gpus"].get<double>(), billed = d["gpus_billed"].get<double>();
    if (billed < gpus) field_error(file, "gpus_billed", fmt::format("at least the {} GPUs the fleet uses", shown(d["gpus"])), d["gpus_billed"]);
    const auto agrees = [](double a, double b) { return std::abs(a - b) <= 1e-6 * std::max({1.0, std::abs(a), std::abs(b)}); };
    for (std::size_t i = 0; i < d["offerings"].size(); ++i) {
      const json& o = d["offerings"][i];
      const std::string at = fmt::format("offerings[{}].", i);
      const double hourly = o["price_per_gpu_hour"].get<double>() * billed;
      if (!agrees(o["fleet_cost_per_hour"].get<double>(), hourly)) {
        field_error(file, at + "fleet_cost_per_hour", fmt::format("{:.9g}, price_per_gpu_hour x gpus_billed", hourly), o["fleet_cost_per_hour"]);
      }
      for (const auto& [k, rate_key] : {std::pair{"cost_per_million_output_tokens", "sustained_output_token_throughput"},
                                        std::pair{"cost_per_million_total_tokens", "sustained_total_token_throughput"}}) {
        const double rate = d[rate_key].get<double>();
        if (rate <= 0) {
          if (!o[k].is_null()) field_error(file, at + k, fmt::format("null: {} is 0", rate_key), o[k]);
        } else if (!o[k].is_number() || !agrees(o[k].get<double>(), hourly / (rate * 3600.0) * 1e6)) {
          field_error(file, at + k, fmt::format("{:.9g}, fleet_cost_per_hour over {} per hour, per million", hourly / (rate * 3600.0) * 1e6, rate_key), o[k]);
        }
      }
    }
  } else if (kind == ReportSource::Kind::inference_run) {
    for (const char* k : {"duration_s", "output_token_throughput", "request_throughput"}) check(d, "", k, false);
    for (const char* k : {"ttft", "tpot", "itl", "e2e_latency"}) {
      if (d.contains(k)) numbers_in(k);
    }
  }
  // The fields the report reads are of the type their command writes, wherever they stand: a number
  // (or null: none), true or false, a map, a list. (A string where a number belongs had been shown
  // as "nan" or charted as 0, and a string where a map belongs had ended in the JSON library's
  // words.) The checks of each kind above come first, with their own words, and what they type (a
  // cost offering's fields, its percentiles) is not listed again here.
  static const std::set<std::string> kNumbers = {
      "attainment", "attainment_required", "bytes", "capacity_bytes", "cost", "cost_per_hour", "cost_per_million_output_tokens", "days", "decode",
      "detect_s", "dp", "failure_free_days", "failures_per_1000_node_days", "fallback_price_per_gpu_hour",
      "gpu_hours", "gpus", "gpus_billed", "hfu", "kv_cache_use", "mean_ms", "median_ms", "memory_gib", "mfu", "nodes",
      "output_token_throughput", "p90_ms", "p99_ms", "pp", "preemptions", "prefill", "rate_rps",
      "replicas", "request_goodput", "request_throughput", "restart_s", "seed", "step_s", "step_time_s", "tflops_per_gpu", "time_to_train_days",
      "tokens", "tokens_per_s", "total_bytes", "total_token_throughput", "tp", "tpot_p90_ms", "train_tokens", "trials", "ttft_p90_ms", "write_s",
      // a stage's memory and a step's breakdown
      "weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "comm_buffers_bytes", "allowance_bytes", "compute", "tp_comm",
      "cp_comm", "ep_comm", "dp_comm", "pp_comm", "pipeline_bubble", "optimizer"};
  static const std::set<std::string> kFlags = {"async", "capped_by_max_gpus", "feasible", "fits", "marginal", "prefix_caching"};
  static const std::set<std::string> kMaps = {"breakdown_s", "checkpoint", "fewest_meeting", "memory", "reliability", "train"};
  static const std::set<std::string> kLists = {"candidates", "pareto_front", "parts", "plans", "rate_sweep", "scaling", "scaling_left_out", "stages"};
  // Text the report prints (a number where the preemption mode belongs had printed "preemption by ,"),
  // counts that are whole (4.5 replicas had been printed as given), and lists of lines.
  static const std::set<std::string> kStrings = {"batching", "gpu", "key", "model", "name", "node", "offering", "plan", "preemption", "pricing",
                                                 "reason", "router", "scenario", "scenario_file", "scenario_sha256", "status", "topology"};
  static const std::set<std::string> kWhole = {"decode", "gpus", "gpus_billed", "nodes", "pp", "prefill", "replicas", "tp", "trials"};
  static const std::set<std::string> kTextLists = {"defaults_applied", "notes"};
  const auto typed = [&](const std::string& key, const std::string& where, const json& x) {
    if (kStrings.count(key) && !x.is_string() && !x.is_null()) field_error(file, where, "text", x);
    if (kWhole.count(key) && !x.is_null() && !(x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() == std::floor(x.get<double>()))) {
      field_error(file, where, "a whole number", x);
    }
    if (kTextLists.count(key)) {
      if (!x.is_array()) field_error(file, where, "a list of text", x);
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!x[i].is_string()) field_error(file, fmt::format("{}[{}]", where, i), "text", x[i]);
      }
    }
    if (kNumbers.count(key) && !x.is_number() && !x.is_null()) field_error(file, where, "a number", x);
    if (kFlags.count(key) && !x.is_boolean()) field_error(file, where, "true or false", x);
    if (kMaps.count(key) && !x.is_object()) field_error(file, where, "a map", x);
    if (kLists.count(key) && !x.is_array()) field_error(file, where, "a list", x);
  };
  // Every other number these results hold is a time, rate, count, fraction, size or price: none is
  // negative. (A sizing candidate that cannot run has the attainment -1; a validation's errors are
  // signed, and its numbers are not checked here.)
  if (kind != ReportSource::Kind::validation) {
    const auto walk = [&](const auto& self, const json& v, const std::string& where) -> void {
      if (v.is_object()) {
        for (const auto& [k, x] : v.items()) {
          const std::string at = where.empty() ? k : where + "." + k;
          typed(k, at, x);
          self(self, x, at);
        }
      } else if (v.is_array()) {
        const bool plans = kind == ReportSource::Kind::plans && where == "plans";
        for (std::size_t i = 0; i < v.size(); ++i) {
          self(self, v[i], fmt::format("{}[{}]", where, plans && i < plan_positions.size() ? plan_positions[i] : i));
        }
      } else if (v.is_number()) {
        const double x = v.get<double>();
        const bool sentinel = kind == ReportSource::Kind::sizing && x == -1 && where.ends_with(".attainment");
        if (!std::isfinite(x) || (x < 0 && !sentinel)) {
          throw InputError(json_location(file, where), where, "a non-negative number", v.dump());
        }
      }
    };
    walk(walk, d, "");
    // Fields whose type depends on the kind of result, or that only stand at the top.
    if (d.contains("source") && !d["source"].is_object()) field_error(file, "source", "a map (the scenario file, its SHA-256, the parts read)", d["source"]);
    if (kind == ReportSource::Kind::sizing && d.contains("cheapest") && !d["cheapest"].is_object() && !d["cheapest"].is_null()) {
      field_error(file, "cheapest", "a map (the cheapest fleet that meets the SLO) or null", d["cheapest"]);  // "x" had read as no fleet meeting it
    }
    if (kind == ReportSource::Kind::plans) {
      for (const char* k : {"cheapest", "fastest"}) {
        if (d.contains(k) && !d[k].is_string() && !d[k].is_null()) field_error(file, k, "a plan's key or null", d[k]);
      }
    }
  }
}

ReportSource read_one(const fs::path& file) {
  std::ifstream in = open_input_file(file, "a clustersim result (JSON)", std::ios::binary);
  ReportSource s;
  s.path = file;
  s.bytes = fs::file_size(file);
  // A plan search can hold a million plans: keep the simulated ones only (the others carry no
  // numbers a report shows), so that memory stays near the file's simulated part.
  // No result nests deeper than a few levels; a file that does (a probe's 100,000 nested lists) is
  // refused before the checks below recurse through it.
  constexpr int kMaxDepth = 64;
  std::size_t plans_seen = 0;
  // A key written twice is refused (a hand edit's "gpus": 8, "gpus": 16 had reported 16 GPUs beside
  // the 8 of its plan), as calibrate refuses it.
  JsonKeyTracker keys(SourceLocation{std::make_shared<const std::string>(file.string())});
  const json::parser_callback_t keep = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxDepth) {
      throw InputError(fmt::format("{}: not a result clustersim wrote: it nests more than {} levels deep", file.string(), kMaxDepth));
    }
    keys.on(event, parsed);
    if (event == json::parse_event_t::object_end && parsed.is_object() && parsed.contains("key") && parsed.contains("status")) {
      const auto& st = parsed["status"];
      // A plan's status is one plan writes (one that was not had been dropped with the unsimulated
      // plans, and the report then counted one simulated plan fewer than its own headline).
      static const std::set<std::string> kStatuses = {"simulated", "constraint", "memory", "bound"};
      if (!st.is_string() || !kStatuses.count(st.get<std::string>())) {
        const std::string where = fmt::format("plans[{}].status", plans_seen);
        throw InputError(json_location(file, where), where, "simulated, constraint, memory or bound", st.dump());
      }
      const bool simulated = st.is_string() && st.get_ref<const std::string&>() == "simulated";
      if (simulated) s.plan_positions.push_back(plans_seen);
      ++plans_seen;
      return simulated;
    }
    return true;
  };
  try {
    s.data = json::parse(in, keep);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not JSON (byte {}): {}", file.string(), e.byte, e.what()));
  } catch (const json::exception& e) {  // a number out of range
    throw InputError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  const json& d = s.data;
  const auto has = [&](const char* k) { return d.is_object() && d.contains(k); };
  if (has("breakdown_s") && has("step_time_s") && has("memory")) {
    s.kind = ReportSource::Kind::training_run;
  } else if (has("kind") && d["kind"] == "inference" && has("ttft")) {
    s.kind = ReportSource::Kind::inference_run;
  } else if (has("plans") && has("enumerated")) {
    s.kind = ReportSource::Kind::plans;
  } else if (has("offerings") && has("trials")) {
    s.kind = ReportSource::Kind::cost;
  } else if (has("candidates") && has("offers")) {
    s.kind = ReportSource::Kind::sizing;
  } else if (has("cases") && has("summary")) {
    s.kind = ReportSource::Kind::validation;
  } else if (has("offerings") && has("output_token_throughput")) {
    s.kind = ReportSource::Kind::serving_cost;
  } else if ((has("unknowns") && has("cases")) || (has("compared") && has("plans"))) {
    // validate's other outputs are not results a report reads (they had been refused as a validate
    // --json output or a plans.json each missing a field).
    throw InputError(fmt::format("{}: the output of validate {}, which a report does not read: give the output of validate --json (without --unknowns "
                                 "or --plans)",
                                 file.string(), has("unknowns") ? "--unknowns" : "--plans"));
  } else {
    // A result missing one of the fields that tell its kind (a hand edit): name the field rather than
    // call the file foreign. The kind is the one with most of its fields there.
    struct Signature {
      const char* what;
      std::vector<const char*> keys;
    };
    static const std::vector<Signature> kSignatures = {{"a summary.json of run", {"breakdown_s", "step_time_s", "memory"}},
                                                       {"a plans.json of plan", {"plans", "enumerated"}},
                                                       {"a cost.json of cost", {"offerings", "trials"}},
                                                       {"a serving fleet's cost.json of cost", {"offerings", "output_token_throughput", "sustained_output_token_throughput"}},
                                                       {"a sizing.json of plan", {"candidates", "offers"}},
                                                       {"a validate --json output", {"cases", "summary"}}};
    const Signature* best = nullptr;
    std::size_t most = 0;
    for (const Signature& sig : kSignatures) {
      const auto n = static_cast<std::size_t>(std::count_if(sig.keys.begin(), sig.keys.end(), [&](const char* k) { return has(k); }));
      if (n > most) best = &sig, most = n;
    }
    if (best) {
      const auto missing = std::find_if(best->keys.begin(), best->keys.end(), [&](const char* k) { return !has(k); });
      throw InputError(fmt::format("{}: field '{}': expected it in {} (whose other fields are here), found nothing (the key is missing)", file.string(),
                                   *missing, best->what));
    }
    throw InputError(fmt::format("{}: not a clustersim result (expected summary.json of run, plans.json of plan, cost.json of cost, sizing.json of plan, "
                                 "or the output of validate --json)",
                                 file.string()));
  }
  check_figures(d, file, s.kind, s.plan_positions);
  s.sha256 = sha256_file(file);
  return s;
}

// A results CSV beside a result (requests.csv, distributions.csv): header and rows, or nothing.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  [[nodiscard]] int column(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  }
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  return out;
}

std::optional<Csv> read_csv(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  std::ifstream in = open_input_file(file, "a results CSV");
  Csv c;
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  c.header = split(line);
  while (std::getline(in, line)) {
    if (!line.empty()) c.rows.push_back(split(line));
  }
  return c;
}

double number_at(const std::vector<std::string>& row, int col) {
  if (col < 0 || col >= static_cast<int>(row.size())) return std::nan("");
  try {
    return std::stod(row[static_cast<std::size_t>(col)]);
  } catch (...) {
    return std::nan("");
  }
}

}  // namespace

std::vector<ReportSource> read_results(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<ReportSource> out;
    for (const char* name : {"summary.json", "plans.json", "cost.json", "sizing.json", "accuracy.json"}) {
      if (fs::exists(path / name)) out.push_back(read_one(path / name));
    }
    if (out.empty()) {
      throw InputError(fmt::format("{}: holds no clustersim result (summary.json, plans.json, cost.json, sizing.json or accuracy.json)", path.string()));
    }
    return out;
  }
  if (!fs::exists(path, ec)) throw InputError(fmt::format("{}: no such file or directory", path.string()));
  return {read_one(path)};
}

namespace {

// ---------------------------------------------------------------------------------------------
// The document: sections of paragraphs, tables and charts, rendered to HTML and Markdown alike.

struct Table {
  std::vector<std::string> header;
  std::vector<bool> numeric;
  std::vector<std::vector<std::string>> rows;
};

struct Block {
  enum class Kind { paragraph, table, chart, missing, note, link };
  Kind kind = Kind::paragraph;
  std::string text;   // paragraph, missing, note; link: its label
  std::string href;   // link
  Table table;        // table; chart: its data as a table
  json chart;         // chart spec (report.js)
};

struct Section {
  std::string title;
  std::vector<Block> blocks;
};

struct CsvRow {
  std::string section, subject, metric, value, unit;
};

struct Document {
  std::string title;
  std::string lead;
  std::vector<Section> sections;
  std::vector<CsvRow> csv;
  int charts = 0;
};

std::string fmt_num(double v, int digits = 4) {
  if (!std::isfinite(v)) return "-";
  // A whole number (a GPU count, trials, a seed) in full: a seed of 123456 had read 1.235e+05, which
  // reruns another Monte Carlo.
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  if (v != 0 && (std::fabs(v) >= 1e7 || std::fabs(v) < 1e-3)) return fmt::format("{:.{}e}", v, digits - 1);
  return fmt::format("{:.{}g}", v, digits);
}
// Large counts the way an engineer says them: 2.10 M, 15.0 T. The scale is the rounded figure's
// (999,700 is "1 M", not "1e+03 k").
std::string count(double v) {
  if (!std::isfinite(v)) return "-";
  const double shown = std::stod(fmt::format("{:.3g}", v));
  for (const auto& [scale, suffix] : std::vector<std::pair<double, const char*>>{{1e12, " T"}, {1e9, " B"}, {1e6, " M"}, {1e3, " k"}}) {
    if (std::fabs(shown) >= scale) return fmt::format("{:.3g}{}", shown / scale, suffix);
  }
  return fmt::format("{:.4g}", v);
}
std::string fixed(double v, int decimals) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "-"; }
std::string pct(double fraction) { return std::isfinite(fraction) ? fmt::format("{:.1f}%", 100 * fraction) : "-"; }
std::string usd(double v) {
  if (!std::isfinite(v)) return "-";
  // By the figure as rounded: $999,999 is "$1.00 M", not "$1000.0 k".
  if (std::fabs(v) >= 999.95e3) return fmt::format("${:.2f} M", v / 1e6);
  if (std::fabs(v) >= 999.995) return fmt::format("${:.1f} k", v / 1e3);
  return fmt::format("${:.2f}", v);
}
double num(const json& j, const char* key, double fallback = std::nan("")) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return fallback;
  return j[key].get<double>();
}
std::string str(const json& j, const char* key, const std::string& fallback = "") {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return fallback;
  return j[key].get<std::string>();
}
// A name a sentence prints: "-" where the result does not hold it (as for numbers).
std::string name(const json& j, const char* key) { return str(j, key, "-"); }
bool flag(const json& j, const char* key, bool fallback) { return j.is_object() && j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback; }
// A time in days as a sentence says it ("1.5 days", "3.2 hours"), "-" where the result has none.
std::string days_shown(double days) { return std::isfinite(days) ? days_text(Seconds(days * 86400.0)) : "-"; }
// A fraction as a whole percentage, "-" where the result has none.
std::string percent_shown(double fraction) { return std::isfinite(fraction) ? fmt::format("{:.0f}%", 100 * fraction) : "-"; }
constexpr double kGiB = double(1ull << 30);

// cost.json's percentiles (and mean) of each offering's cost and finish time against its trials in
// distributions.csv, computed as the cost command computes them: the two files must be one run's. The
// CSV rounds costs to the cent and days to the millionth, so agreement is to that rounding.
// `costs` is in $ million and `walls` in days, per offering; a null figure is an infinite one.
void check_percentiles_against_trials(const json& d, const std::map<std::string, std::vector<double>>& costs,
                                      const std::map<std::string, std::vector<double>>& walls, const fs::path& dist_file, const fs::path& cost_file) {
  const auto trials = d["trials"].get<std::size_t>();
  for (const json& o : d["offerings"]) {
    const std::string offering = str(o, "offering");
    const auto trials_of = [&](const std::map<std::string, std::vector<double>>& by_offering) {
      const auto it = by_offering.find(offering);
      return it == by_offering.end() ? std::vector<double>{} : it->second;
    };
    const struct {
      const char* field;
      std::vector<double> values;
      double scale, rounding;
    } figures[] = {{"cost_usd", trials_of(costs), 1e6, 0.005}, {"wall_days", trials_of(walls), 1.0, 5e-7}};
    for (auto f : figures) {
      std::vector<double>& v = f.values;
      for (double& x : v) x *= f.scale;
      std::sort(v.begin(), v.end());
      const json& given = o[f.field];
      const auto stated = [&](const char* key) { return given[key].is_null() ? std::numeric_limits<double>::infinity() : given[key].get<double>(); };
      const auto compare = [&](const char* key, double from_trials) {
        const double in_file = stated(key);
        const bool agree = std::isinf(in_file) || std::isinf(from_trials)
                               ? in_file == from_trials
                               : std::fabs(in_file - from_trials) <= 2 * f.rounding + 1e-9 * std::fabs(in_file);
        if (!agree) {
          const auto as_text = [](double x) { return std::isfinite(x) ? fmt::format("{:.9g}", x) : std::string("null (never)"); };
          throw InputError(fmt::format("{}: offering '{}' {}.{} is {} over its trials in {}, but {} says {}: the two files are not from one run",
                                       dist_file.string(), offering, f.field, key, as_text(from_trials), dist_file.filename().string(),
                                       cost_file.filename().string(), as_text(in_file)));
        }
      };
      compare("p50", quantile_with_unfinished(v, trials, 0.5));
      compare("p90", quantile_with_unfinished(v, trials, 0.9));
      compare("p99", quantile_with_unfinished(v, trials, 0.99));
      compare("mean", v.size() == trials && !v.empty() ? std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size())
                                                       : std::numeric_limits<double>::infinity());
    }
  }
}

class Builder {
 public:
  Builder(const std::vector<ReportSource>& sources, const fs::path& dir) : sources_(sources), dir_(dir) {}

  Document build(const ReportOptions& options) {
    doc_.title = options.title.empty() ? default_title() : options.title;
    doc_.lead = fmt::format("Written by clustersim {} from {} result file{}. Every number below comes from those files; parts they do not hold are marked.",
                            options.version, sources_.size(), sources_.size() == 1 ? "" : "s");
    scenario();
    headline();
    breakdown();
    memory();
    scaling();
    plans();
    cost();
    serving();
    sizing();
    assumptions();
    accuracy();
    reproduce(options);
    return std::move(doc_);
  }

 private:
  std::vector<const ReportSource*> of(ReportSource::Kind k) const {
    std::vector<const ReportSource*> out;
    for (const auto& s : sources_) {
      if (s.kind == k) out.push_back(&s);
    }
    return out;
  }

  std::string default_title() const {
    std::vector<std::string> names;
    for (const auto& s : sources_) {
      const std::string n = str(s.data, "scenario");
      if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    std::string t = "Capacity-planning report";
    if (!names.empty()) {
      t += ": ";
      for (std::size_t i = 0; i < names.size(); ++i) t += (i ? ", " : "") + names[i];
    }
    return t;
  }

  Section& section(const std::string& title) {
    doc_.sections.push_back({title, {}});
    return doc_.sections.back();
  }
  static void para(Section& s, std::string text) { s.blocks.push_back({Block::Kind::paragraph, std::move(text), {}, {}, {}}); }
  static void note(Section& s, std::string text) { s.blocks.push_back({Block::Kind::note, std::move(text), {}, {}, {}}); }
  static void missing(Section& s, std::string text) { s.blocks.push_back({Block::Kind::missing, std::move(text), {}, {}, {}}); }
  static void table(Section& s, Table t) { s.blocks.push_back({Block::Kind::table, {}, {}, std::move(t), {}}); }
  // A chart with nothing to draw becomes a note saying so, not an empty frame.
  static bool has_points(const json& spec) {
    for (const auto& series : spec.value("series", json::array())) {
      for (const char* key : {"values", "points"}) {
        if (series.contains(key) && !series[key].empty()) return true;
      }
    }
    return false;
  }
  void chart(Section& s, json spec, Table data, const std::string& if_empty = "the results hold no values for it") {
    if (!has_points(spec)) {
      missing(s, fmt::format("{}: nothing to draw, {}.", str(spec, "title"), if_empty));
      return;
    }
    spec["id"] = fmt::format("chart-{}", ++doc_.charts);
    s.blocks.push_back({Block::Kind::chart, str(spec, "title"), {}, std::move(data), std::move(spec)});
  }
  // A result's subject in the CSV: its scenario's name, and its file where another result of the
  // same kind has that name too (two runs of one scenario at other plans), so that no two rows share
  // a section, subject and metric.
  std::string who_of(const ReportSource& r) const {
    const std::string name = str(r.data, "scenario", "-");
    const auto same = std::count_if(sources_.begin(), sources_.end(), [&](const ReportSource& o) { return o.kind == r.kind && str(o.data, "scenario", "-") == name; });
    return same > 1 ? fmt::format("{} ({})", name, r.path.string()) : name;
  }

  void csv(const std::string& section, const std::string& subject, const std::string& metric, double value, const std::string& unit) {
    doc_.csv.push_back({section, subject, metric, std::isfinite(value) ? fmt::format("{:.9g}", value) : "", unit});
  }
  // A simulated plan's step time and cost.
  void plan_csv(const std::string& section, const std::string& subject, const json& plan, const std::string& cost_unit) {
    csv(section, subject, "step_time", num(plan, "step_s"), "s");
    csv(section, subject, "cost", num(plan, "cost"), cost_unit);
  }
  void csv_text(const std::string& section, const std::string& subject, const std::string& metric, const std::string& value) {
    doc_.csv.push_back({section, subject, metric, value, ""});
  }

  // -- sections --------------------------------------------------------------------------------

  void scenario() {
    Section& s = section("The scenario");
    for (const auto* r : of(ReportSource::Kind::training_run)) {
      const json& d = r->data;
      std::string text = fmt::format("Training {} on {} {} GPUs of {}, with the plan {}. Each step trains {} tokens ({} micro-batches per data-parallel rank).",
                                     name(d, "model"), fmt_num(num(d, "gpus")), name(d, "gpu"), name(d, "topology"), name(d, "plan"),
                                     count(num(d, "tokens_per_step")), fmt_num(num(d, "micro_batches")));
      if (d.contains("train")) text += fmt::format(" The budget is {} tokens.", count(num(d["train"], "tokens")));
      para(s, fmt::format("{}: {}", who_of(*r), text));
    }
    for (const auto* r : of(ReportSource::Kind::inference_run)) {
      const json& d = r->data;
      para(s, fmt::format("{}: serving {} on {} replica{} of TP{} PP{} on {} GPUs; {} batching, {} router; workload: {}.", who_of(*r), name(d, "model"),
                          fmt_num(num(d, "replicas")), num(d, "replicas") == 1 ? "" : "s", fmt_num(num(d, "tp")), fmt_num(num(d, "pp")), name(d, "gpu"),
                          name(d, "batching"), name(d, "router"), name(d, "workload")));
    }
    for (const auto* r : of(ReportSource::Kind::plans)) {
      const json& d = r->data;
      para(s, fmt::format("{}: a plan search over {} plans: {} break a constraint, {} do not fit in memory, {} cannot reach the top plans (lower bound), {} simulated. "
                          "Cost unit: {}.",
                          who_of(*r), fmt_num(num(d, "enumerated"), 9), fmt_num(num(d, "rejected_constraint"), 9), fmt_num(num(d, "rejected_memory"), 9),
                          fmt_num(num(d, "pruned_by_bound", 0), 9), fmt_num(num(d, "simulated"), 9), name(d, "cost_unit")));
    }
    for (const auto* r : of(ReportSource::Kind::cost)) {
      const json& d = r->data;
      para(s, fmt::format("{}: the cost of training {} tokens on {} GPUs ({} nodes) at {} s per step ({} without failures), on each offering of cost sheet "
                          "{}, by a Monte Carlo of {} trials (seed {}).",
                          who_of(*r), count(num(d, "train_tokens")), fmt_num(num(d, "gpus")), fmt_num(num(d, "nodes")), fixed(num(d, "step_time_s"), 3),
                          days_shown(num(d, "failure_free_days")), name(d, "sheet"), fmt_num(num(d, "trials")), fmt_num(num(d, "seed"))));
    }
    for (const auto* r : of(ReportSource::Kind::serving_cost)) {
      const json& d = r->data;
      para(s, fmt::format("{}: the cost of a serving fleet of {} GPUs{} at its simulated steady rate of {} output tokens/s, on each offering of its cost "
                          "sheet.",
                          who_of(*r), fmt_num(num(d, "gpus")), billed_text(d), fixed(num(d, "sustained_output_token_throughput"), 0)));
    }
    for (const auto* r : of(ReportSource::Kind::sizing)) {
      const json& d = r->data;
      para(s, fmt::format("{}: sizing for the cheapest fleet to serve {} requests/s with {} of requests within the SLO, among {} configurations simulated.",
                          who_of(*r), fmt_num(num(d, "rate_rps"), 3), percent_shown(num(d, "attainment_required")), fmt_num(num(d, "simulations"))));
    }
    for (const auto* r : of(ReportSource::Kind::validation)) {
      para(s, fmt::format("{}: the model against {} published measurements.", r->path.filename().string(), r->data["cases"].size()));
    }
  }

  void headline() {
    Section& s = section("Headline numbers");
    bool any = false;
    for (const auto* r : of(ReportSource::Kind::training_run)) {
      any = true;
      const json& d = r->data;
      const std::string who = who_of(*r);
      Table t{{"metric", "value"}, {false, true}, {}};
      const auto row = [&](const std::string& m, const std::string& v) { t.rows.push_back({m, v}); };
      row("step time", fixed(num(d, "step_time_s"), 3) + " s");
      row("MFU (model FLOPs utilisation)", pct(num(d, "mfu")));
      row("HFU (hardware FLOPs utilisation, with recompute)", pct(num(d, "hfu")));
      row("tokens/s", count(num(d, "tokens_per_s")));
      row("TFLOP/s per GPU", fixed(num(d, "tflops_per_gpu"), 1));
      if (d.contains("train")) {
        row("time to train", days_shown(num(d["train"], "days")));
        row("GPU-hours to train", count(num(d["train"], "gpu_hours")));
      }
      const json& m = d["memory"];
      // A marginal plan (over only through the assumed fragmentation allowance) is neither.
      const std::string fits = m.value("fits", false) ? "yes" : m.value("marginal", false) ? "marginal" : "no";
      row("fits in GPU memory", fits == "no" ? "NO" : fits);
      row("memory", str(m, "verdict"));
      para(s, who);
      table(s, std::move(t));
      csv("headline", who, "step_time", num(d, "step_time_s"), "s");
      csv("headline", who, "mfu", num(d, "mfu"), "fraction");
      csv("headline", who, "hfu", num(d, "hfu"), "fraction");
      csv("headline", who, "tokens_per_s", num(d, "tokens_per_s"), "tokens/s");
      csv("headline", who, "tflops_per_gpu", num(d, "tflops_per_gpu"), "TFLOP/s");
      if (d.contains("train")) {
        csv("headline", who, "time_to_train", num(d["train"], "days"), "days");
        csv("headline", who, "gpu_hours_to_train", num(d["train"], "gpu_hours"), "GPU-hours");  // as report.md shows it
      }
      csv_text("headline", who, "fits_in_memory", fits);
    }
    for (const auto* r : of(ReportSource::Kind::inference_run)) {
      any = true;
      const json& d = r->data;
      const std::string who = who_of(*r);
      Table t{{"metric", "mean", "median", "P90", "P99"}, {false, true, true, true, true}, {}};
      for (const char* k : {"ttft", "tpot", "itl", "e2e_latency", "queueing_delay"}) {
        if (!d.contains(k)) continue;
        const json& q = d[k];
        t.rows.push_back({fmt::format("{} (ms)", k), fixed(num(q, "mean_ms"), 1), fixed(num(q, "median_ms"), 1), fixed(num(q, "p90_ms"), 1), fixed(num(q, "p99_ms"), 1)});
        csv("headline", who, fmt::format("{}_p50", k), num(q, "median_ms"), "ms");
        csv("headline", who, fmt::format("{}_p90", k), num(q, "p90_ms"), "ms");
        csv("headline", who, fmt::format("{}_p99", k), num(q, "p99_ms"), "ms");
      }
      para(s, fmt::format("{}: {} requests/s ({} within the SLO), {} output tokens/s, {} total tokens/s, {} preemptions, mean KV cache use {}.", who,
                          fixed(num(d, "request_throughput"), 2), fixed(num(d, "request_goodput"), 2), fmt_num(num(d, "output_token_throughput"), 6),
                          fmt_num(num(d, "total_token_throughput"), 6), fmt_num(num(d, "preemptions")), pct(num(d, "kv_cache_use"))));
      table(s, std::move(t));
      csv("headline", who, "request_throughput", num(d, "request_throughput"), "requests/s");
      csv("headline", who, "request_goodput", num(d, "request_goodput"), "requests/s");
      csv("headline", who, "output_token_throughput", num(d, "output_token_throughput"), "tokens/s");
    }
    for (const auto* r : of(ReportSource::Kind::cost)) {
      any = true;
      const json& d = r->data;
      std::vector<std::string> notes;
      Table t{{"offering", "pricing", "$/GPU-h", "expected cost", "expected days", "finishes"}, {false, false, true, true, true, true}, {}};
      const std::string who = who_of(*r);
      for (const json& o : d["offerings"]) {
        // An offering that cannot finish (interruptions so frequent that the expected wall time
        // reaches the trials' cap) has no cost or finish time: say so rather than print zeros.
        const bool finishes = o.value("can_finish", true);
        // A mixed row pays the spot price, then the on-demand one after it falls back.
        std::string price = fixed(num(o, "price_per_gpu_hour"), 3);
        if (o.contains("fallback_price_per_gpu_hour")) price += " / " + fixed(num(o, "fallback_price_per_gpu_hour"), 3);
        t.rows.push_back({str(o, "offering"), str(o, "pricing"), price, finishes ? usd(num(o, "expected_cost_usd")) : "never finishes",
                          finishes ? days_figure(num(o, "expected_wall_days")) : "never",
                          finishes ? fmt::format("{} of {}", o.value("finished_trials", 0), d.value("trials", 0)) : fmt::format("never: {}", str(o, "verdict", "cannot finish"))});
        const std::string subject = fmt::format("{}: {}", who, str(o, "offering"));
        csv("headline", subject, "expected_cost", finishes ? num(o, "expected_cost_usd") : std::nan(""), "USD");
        csv("headline", subject, "expected_days", finishes ? num(o, "expected_wall_days") : std::nan(""), "days");
        // What a row that finishes still says: trials late for the deadline, a term's commitment,
        // trials that did not finish (the table shows a verdict only for a row that never does).
        if (finishes && !str(o, "verdict").empty()) {
          notes.push_back(fmt::format("{}: {}", str(o, "offering"), str(o, "verdict")));
          csv_text("headline", subject, "note", str(o, "verdict"));
        }
      }
      para(s, fmt::format("{}: cost on each offering (expected values from Daly's closed form, Monte Carlo means for the elastic and mixed rows, "
                          "whose policies no closed form follows; the Monte Carlo's distributions below).",
                          who));
      table(s, std::move(t));
      for (const std::string& n : notes) para(s, "Note: " + n + ".");
    }
    for (const auto* r : of(ReportSource::Kind::serving_cost)) {
      any = true;
      const json& d = r->data;
      const std::string who = who_of(*r);
      // The cheapest offering per million output tokens (list prices; a fleet that emitted nothing has none).
      const json* best = nullptr;
      for (const json& o : d["offerings"]) {
        if (o["cost_per_million_output_tokens"].is_number() && (!best || num(o, "cost_per_million_output_tokens") < num(*best, "cost_per_million_output_tokens"))) {
          best = &o;
        }
      }
      if (best) {
        para(s, fmt::format("{}: the fleet's cheapest offering is {} ({}): ${}/hour for {} GPUs{}, ${} per million output tokens at the steady rate.", who,
                            str(*best, "offering"), str(*best, "pricing"), fixed(num(*best, "fleet_cost_per_hour"), 2), fmt_num(num(d, "gpus")), billed_text(d),
                            fixed(num(*best, "cost_per_million_output_tokens"), 3)));
        csv("headline", fmt::format("{}: {}", who, str(*best, "offering")), "cost_per_million_output_tokens", num(*best, "cost_per_million_output_tokens"), "USD");
      } else {
        para(s, fmt::format("{}: the fleet emitted no output tokens at a steady rate, so no offering has a price per token.", who));
      }
    }
    for (const auto* r : of(ReportSource::Kind::sizing)) {
      any = true;
      const json& d = r->data;
      if (d.contains("cheapest") && d["cheapest"].is_object()) {
        const json& c = d["cheapest"];
        const double pp = num(c, "pp", 1);
        const std::string fewest = fewest_text(c);
        para(s, fmt::format("{}: the cheapest fleet that meets the SLO is {} on {} at TP {}{}, {}: GPUs {}, ${}/hour, ${} per million output tokens{}.",
                            who_of(*r), str(c, "gpu"), str(c, "node"), fmt_num(num(c, "tp")), pp > 1 ? fmt::format(" x PP {}", fmt_num(pp)) : "",
                            fleet_text(c),
                            num(c, "gpus_billed", num(c, "gpus")) > num(c, "gpus")
                                ? fmt::format("{} (billed for their nodes' {})", fmt_num(num(c, "gpus")), fmt_num(num(c, "gpus_billed")))
                                : fmt_num(num(c, "gpus")),
                            fixed(num(c, "cost_per_hour"), 2), fixed(num(c, "cost_per_million_output_tokens"), 3),
                            fewest.empty() ? ""
                                           : fmt::format("; {} met the SLO, {}", fewest,
                                                         grown_to_cap(c) ? "grown to max_gpus" : "the rest of the billed nodes is headroom")));
      } else {
        para(s, fmt::format("{}: none of the configurations meets the SLO within the GPUs allowed (see Fleet sizing for how close each came).",
                            who_of(*r)));
      }
    }
    for (const auto* r : of(ReportSource::Kind::plans)) {
      any = true;
      const json& d = r->data;
      const std::string who = who_of(*r), fastest = str(d, "fastest"), cheapest = str(d, "cheapest");
      para(s, fmt::format("{}: fastest plan {}; cheapest plan {} ({}).", who, plan_text(d, fastest), plan_text(d, cheapest), str(d, "cost_unit")));
      // The same in the CSV, each with its step time and cost.
      for (const auto& [role, key] : {std::pair{"fastest", fastest}, std::pair{"cheapest", cheapest}}) {
        if (const json* p = plan_of(d, key)) {
          plan_csv("headline", fmt::format("{}: {} {}", who, role, key), *p, str(d, "cost_unit"));
        }
      }
    }
    if (!any) missing(s, "No run, cost, plan or sizing result: headline numbers need one (clustersim run --out, cost --out or plan --out).");
  }

  // A sizing candidate's GPUs, and the GPUs of the whole nodes billed where those are more: "10 (16)"
  // (sizing.json before billing by node had no gpus_billed).
  static std::string gpus_billed_text(const json& c) {
    const double gpus = num(c, "gpus"), billed = num(c, "gpus_billed", gpus);
    return billed > gpus ? fmt::format("{} ({})", fmt_num(gpus), fmt_num(billed)) : fmt_num(gpus);
  }

  // " (billed for their nodes' 16)" where a fleet's whole nodes hold more GPUs than it uses.
  static std::string billed_text(const json& d) {
    return num(d, "gpus_billed", num(d, "gpus")) > num(d, "gpus") ? fmt::format(" (billed for their nodes' {})", fmt_num(num(d, "gpus_billed"))) : "";
  }

  // A sizing candidate's replicas: "4 replicas", or "3 prefill + 2 decode replicas".
  static std::string fleet_text(const json& c) {
    const double replicas = num(c, "replicas");
    return num(c, "prefill", 0) > 0 ? fmt::format("{} prefill + {} decode replicas", fmt_num(num(c, "prefill")), fmt_num(num(c, "decode")))
                                    : fmt::format("{} replica{}", fmt_num(replicas), replicas == 1 ? "" : "s");
  }
  // A fleet grown to fill the nodes billed for it names the fewest that met the SLO: "; 6 replicas
  // met the SLO" (empty for a fleet that is the fewest, or a sizing.json from before the field).
  // Whether max_gpus, not the billed nodes, stopped a grown fleet (written by plan since 2026-12-07).
  static bool grown_to_cap(const json& c) {
    return c.contains("fewest_meeting") && c["fewest_meeting"].is_object() && c["fewest_meeting"].value("capped_by_max_gpus", false);
  }
  static std::string fewest_text(const json& c) {
    if (!c.contains("fewest_meeting") || !c["fewest_meeting"].is_object()) return "";
    const json& f = c["fewest_meeting"];
    const bool split = num(c, "prefill", 0) > 0;
    return split ? fmt::format("{} prefill + {} decode", fmt_num(num(f, "prefill")), fmt_num(num(f, "decode")))
                 : fmt::format("{} replica{}", fmt_num(num(f, "replicas")), num(f, "replicas") == 1 ? "" : "s");
  }

  // The simulated plan of a search with this key, or null.
  static const json* plan_of(const json& plans, const std::string& key) {
    for (const json& p : plans["plans"]) {
      if (str(p, "key") == key) return &p;
    }
    return nullptr;
  }
  static std::string plan_text(const json& plans, const std::string& key) {
    if (const json* p = plan_of(plans, key)) return str(*p, "plan");
    return key.empty() ? "none" : key;
  }

  void breakdown() {
    Section& s = section("Where the step time goes");
    static const std::vector<std::pair<const char*, std::vector<const char*>>> parts = {
        {"compute", {"compute"}},
        {"exposed TP/CP/EP communication", {"tp_comm", "cp_comm", "ep_comm"}},
        {"exposed DP communication", {"dp_comm"}},
        {"pipeline sends", {"pp_comm"}},
        {"pipeline bubble", {"pipeline_bubble"}},
        {"optimizer", {"optimizer"}},
    };
    std::vector<std::string> categories;
    std::vector<std::vector<double>> values(parts.size());
    const auto add = [&](const std::string& label, const json& b) {
      categories.push_back(label);
      for (std::size_t k = 0; k < parts.size(); ++k) {
        double v = 0;
        for (const char* key : parts[k].second) v += num(b, key, 0);
        values[k].push_back(v);
      }
    };
    for (const auto* r : of(ReportSource::Kind::training_run)) add(fmt::format("{}: {}", who_of(*r), short_plan(str(r->data, "plan"))), r->data["breakdown_s"]);
    for (const auto* r : of(ReportSource::Kind::plans)) {
      for (const json* p : fastest_plans(r->data, 10)) add(fmt::format("{}: {}", who_of(*r), str(*p, "plan")), p->value("breakdown_s", json::object()));
    }
    if (categories.empty()) {
      missing(s, of(ReportSource::Kind::plans).empty()
                     ? "No training run or plan search: the breakdown needs one (clustersim run --out, or plan --out on a training scenario)."
                     : "The plan search simulated no plan (none in its space runs: see Plans compared), so there is no step to break down.");
      return;
    }
    json spec = {{"type", "bars"}, {"title", "Step time by part (seconds)"}, {"unit", "s"}, {"categories", categories}, {"series", json::array()}};
    Table t{{"run or plan"}, {false}, {}};
    for (std::size_t k = 0; k < parts.size(); ++k) {
      spec["series"].push_back({{"name", parts[k].first}, {"values", values[k]}});
      t.header.push_back(std::string(parts[k].first) + " (s)");
      t.numeric.push_back(true);
    }
    for (std::size_t c = 0; c < categories.size(); ++c) {
      std::vector<std::string> row{categories[c]};
      for (std::size_t k = 0; k < parts.size(); ++k) {
        row.push_back(fixed(values[k][c], 3));
        csv("breakdown", categories[c], parts[k].first, values[k][c], "s");
      }
      t.rows.push_back(std::move(row));
    }
    spec["height"] = 120 + 34 * static_cast<int>(categories.size());
    chart(s, std::move(spec), std::move(t));
    note(s, "Exposed communication is what the step waits for after overlap; compute includes recompute. The plans are the fastest ten of each search.");
  }

  static std::string short_plan(const std::string& plan) { return plan.substr(0, plan.find(',')); }

  static std::vector<const json*> fastest_plans(const json& plans, std::size_t k) {
    std::vector<const json*> v;
    for (const json& p : plans["plans"]) {
      if (str(p, "status") == "simulated" && p.contains("step_s")) v.push_back(&p);
    }
    std::stable_sort(v.begin(), v.end(), [](const json* a, const json* b) { return num(*a, "step_s") < num(*b, "step_s"); });
    if (v.size() > k) v.resize(k);
    return v;
  }

  void memory() {
    Section& s = section("Memory per GPU");
    bool any = false;
    for (const auto* r : of(ReportSource::Kind::training_run)) {
      const json& m = r->data["memory"];
      if (!m.contains("stages") || m["stages"].empty()) continue;
      any = true;
      static const std::vector<std::pair<const char*, const char*>> parts = {{"weights", "weights_bytes"},       {"gradients", "gradients_bytes"},
                                                                             {"optimizer states", "optimizer_bytes"}, {"activations", "activations_bytes"},
                                                                             {"communication buffers", "comm_buffers_bytes"}, {"allocator allowance", "allowance_bytes"}};
      std::vector<std::string> categories;
      json series = json::array();
      Table t{{"pipeline stage"}, {false}, {}};
      for (const auto& [name, key] : parts) {
        std::vector<double> v;
        for (const json& st : m["stages"]) v.push_back(num(st, key, 0) / kGiB);
        series.push_back({{"name", name}, {"values", v}});
        t.header.push_back(std::string(name) + " (GiB)");
        t.numeric.push_back(true);
      }
      t.header.push_back("total (GiB)");
      t.numeric.push_back(true);
      const std::string who = who_of(*r);
      std::size_t i = 0;
      for (const json& st : m["stages"]) {
        categories.push_back(fmt::format("stage {}", st.value("stage", static_cast<int>(i))));
        std::vector<std::string> row{categories.back()};
        // A part the result does not hold reads "-" (an empty CSV value), not 0; the stacked bar
        // draws nothing for it.
        for (const auto& [name, key] : parts) {
          row.push_back(fixed(num(st, key) / kGiB, 2));
          csv("memory", fmt::format("{} {}", who, categories.back()), name, num(st, key) / kGiB, "GiB");
        }
        row.push_back(fixed(num(st, "total_bytes") / kGiB, 2));
        csv("memory", fmt::format("{} {}", who, categories.back()), "total", num(st, "total_bytes") / kGiB, "GiB");  // as report.md's table
        t.rows.push_back(std::move(row));
        ++i;
      }
      const double capacity = num(m, "capacity_bytes") / kGiB;
      json spec = {{"type", "bars"},   {"title", fmt::format("{}: memory per GPU by pipeline stage (GiB)", who)},
                   {"unit", "GiB"},    {"categories", categories},
                   {"series", series}, {"limit", {{"value", capacity}, {"label", "HBM"}}},
                   {"height", 140 + 34 * static_cast<int>(categories.size())}};
      para(s, fmt::format("{}: {} (HBM {} GiB per GPU).", who, name(m, "verdict"), fixed(capacity, 1)));
      chart(s, std::move(spec), std::move(t));
      csv("memory", who, "hbm_capacity", capacity, "GiB");
    }
    if (!any) missing(s, "No training run: memory per GPU needs one (clustersim run --out on a training scenario).");
  }

  void scaling() {
    Section& s = section("Scaling with the GPU count");
    bool any = false;
    for (const auto* r : of(ReportSource::Kind::training_run)) {
      const json& d = r->data;
      if (!d.contains("scaling") || d["scaling"].size() < 2) continue;
      any = true;
      scaling_chart(s, who_of(*r), who_of(*r) + ": the plan's data-parallel degree varied, the global batch kept", d["scaling"], "plan");
      if (const std::string left = left_out_degrees(d); !left.empty()) para(s, fmt::format("{}: not on the curve: {}.", who_of(*r), left));
    }
    for (const auto* r : of(ReportSource::Kind::plans)) {
      // The fastest simulated plan at each GPU count.
      std::map<int, const json*> best;
      for (const json& p : r->data["plans"]) {
        const int g = static_cast<int>(std::lround(gpus_of(p)));
        if (g <= 0 || str(p, "status") != "simulated") continue;
        auto& b = best[g];
        if (!b || num(p, "step_s") < num(*b, "step_s")) b = &p;
      }
      if (best.size() < 2) continue;
      any = true;
      json points = json::array();
      for (const auto& [g, p] : best) {
        points.push_back({{"gpus", g}, {"step_s", num(*p, "step_s")}, {"mfu", num(*p, "mfu")}, {"days", num(*p, "time_to_train_days")}, {"plan", str(*p, "plan")}});
      }
      // Its own subjects in the CSV: a run's sweep of the same scenario gives other figures at the
      // same GPU counts (the CSV had held one key twice).
      scaling_chart(s, who_of(*r) + " (fastest plan)", who_of(*r) + ": the fastest plan found at each GPU count", points, "plan");
    }
    if (any) {
      // A training run without a sweep beside curves of other results: said, as a serving run's
      // missing rate sweep is (it had been passed over without a word).
      for (const auto* r : of(ReportSource::Kind::training_run)) {
        if (!r->data.contains("scaling")) {
          missing(s, fmt::format("{}: no scaling sweep (the run was made without --report; `clustersim run SCENARIO --report DIR` adds one).", who_of(*r)));
        }
      }
    }
    if (!any) {
      // A run whose sweep kept only its own plan ran the command already: say why the others went.
      const auto runs = of(ReportSource::Kind::training_run);
      const bool swept = std::any_of(runs.begin(), runs.end(), [](const ReportSource* r) { return r->data.contains("scaling"); });
      std::string why;
      for (const auto* r : runs) {
        if (const std::string left = left_out_degrees(r->data); !left.empty()) why += fmt::format(" {}: {}.", who_of(*r), left);
      }
      missing(s, swept ? "No scaling curve: the run's sweep of the data-parallel degree (a quarter, half, twice and four times its own) found no other degree "
                         "that runs: each breaks the global batch or the interleaving, needs more GPUs than the topology has, or does not fit in memory." +
                             why + " A plan search over several GPU counts (search: gpus: [...]) gives the fastest plan at each."
                       : "No scaling data: `clustersim run SCENARIO --report DIR` simulates the plan at other data-parallel degrees, and a plan search over "
                         "several GPU counts (search: gpus: [...]) gives the fastest plan at each.");
    }
  }

  // The degrees a run's scaling sweep could not run, each with its reason ("DP 64 (512 GPUs): ...").
  static std::string left_out_degrees(const json& run) {
    std::string out;
    if (!run.contains("scaling_left_out")) return out;
    for (const json& p : run["scaling_left_out"]) {
      if (!out.empty()) out += "; ";
      out += fmt::format("DP {} ({} GPUs): {}", fmt_num(num(p, "dp"), 6), fmt_num(num(p, "gpus"), 6), str(p, "reason"));
    }
    return out;
  }

  static double gpus_of(const json& p) {
    const std::string key = str(p, "key");
    const auto at = key.find("gpus=");
    if (at == std::string::npos) return 0;
    return std::atof(key.c_str() + at + 5);
  }

  void scaling_chart(Section& s, const std::string& who, const std::string& title, const json& points, const char* label_key) {
    json mfu = json::array(), days = json::array();
    Table t{{"GPUs", "step s", "MFU", "days to train", label_key}, {true, true, true, true, false}, {}};
    // Days to train where the results have them (a token budget); a point without its days (a
    // hand-edited null) shows "-" and leaves the line, rather than blanking the whole column.
    const auto day_of = [](const json& p) { return std::isfinite(num(p, "days")) && num(p, "days") > 0 ? num(p, "days") : std::nan(""); };
    const bool have_days = std::any_of(points.begin(), points.end(), [&](const json& p) { return std::isfinite(day_of(p)); });
    for (const json& p : points) {
      const double g = num(p, "gpus");
      const double y = have_days ? day_of(p) : num(p, "step_s");
      mfu.push_back({g, 100 * num(p, "mfu")});
      if (std::isfinite(y)) days.push_back({g, y});
      t.rows.push_back({fmt_num(g, 6), fixed(num(p, "step_s"), 3), pct(num(p, "mfu")), have_days && std::isfinite(y) ? days_figure(y) : "-", str(p, label_key)});
      csv("scaling", fmt::format("{}: {} GPUs", who, fmt_num(g, 6)), "mfu", num(p, "mfu"), "fraction");
      if (std::isfinite(y)) csv("scaling", fmt::format("{}: {} GPUs", who, fmt_num(g, 6)), have_days ? "time_to_train" : "step_time", y, have_days ? "days" : "s");
    }
    json spec = {{"type", "lines"},
                 {"title", title},
                 {"x_name", "GPUs"},
                 {"x_log", true},
                 {"x_log_base", 2},
                 {"y_names", {"MFU (%)", have_days ? "days to train" : "step time (s)"}},
                 {"series", {{{"name", "MFU (%)"}, {"points", mfu}, {"axis", 0}}, {{"name", have_days ? "days to train" : "step time (s)"}, {"points", days}, {"axis", 1}}}}};
    chart(s, std::move(spec), std::move(t));
  }

  void plans() {
    Section& s = section("Plans compared");
    const auto sources = of(ReportSource::Kind::plans);
    if (sources.empty()) {
      missing(s, "No plan search: `clustersim plan SCENARIO --out DIR` on a training scenario compares plans.");
      return;
    }
    for (const auto* r : sources) {
      const json& d = r->data;
      const std::string who = who_of(*r);
      const bool days = !d["plans"].empty() && d["plans"].front().contains("time_to_train_days");
      // Dollars as the cost section shows them ("$13.32 M", where it had printed 1.3318e+07); GPU-hours as numbers.
      const bool dollars = str(d, "cost_unit").starts_with("USD");
      const auto cost_text = [&](const json& p) { return dollars ? usd(num(p, "cost")) : fmt_num(num(p, "cost"), 5); };
      const std::vector<const json*> all = fastest_plans(d, SIZE_MAX);
      if (all.empty()) {
        // Nothing to rank: say why rather than print empty tables (a probe's "nothing fits" search).
        para(s, fmt::format("{}: no plan of the {} in the space runs: {} break a constraint and {} do not fit in memory (each plan's reason is in "
                            "plans.csv, and `clustersim plan` prints them by kind).",
                            who, fmt_num(num(d, "enumerated"), 9), fmt_num(num(d, "rejected_constraint"), 9), fmt_num(num(d, "rejected_memory"), 9)));
        continue;
      }
      const std::vector<const json*> by_time(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(all.size(), 10)));
      std::vector<const json*> by_cost = all;
      std::stable_sort(by_cost.begin(), by_cost.end(), [](const json* a, const json* b) { return num(*a, "cost") < num(*b, "cost"); });
      if (by_cost.size() > 10) by_cost.resize(10);
      const auto plan_table = [&](const std::vector<const json*>& v) {
        Table t{{"#", "plan", "GPUs", "step s", "MFU", days ? "days" : "-", "cost", "GiB/GPU"}, {true, false, true, true, true, true, true, true}, {}};
        int n = 0;
        for (const json* p : v) {
          t.rows.push_back({std::to_string(++n), str(*p, "plan"), fmt_num(gpus_of(*p), 6), fixed(num(*p, "step_s"), 3), pct(num(*p, "mfu")),
                            days ? days_figure(num(*p, "time_to_train_days")) : "-", cost_text(*p), fixed(num(*p, "memory_gib"), 1)});
        }
        return t;
      };
      para(s, fmt::format("{}: the fastest plans (cost in {}).", who, str(d, "cost_unit")));
      table(s, plan_table(by_time));
      for (const json* p : by_time) {
        plan_csv("plans", fmt::format("{}: {}", who, str(*p, "key")), *p, str(d, "cost_unit"));
      }
      para(s, fmt::format("{}: the cheapest plans.", who));
      table(s, plan_table(by_cost));
      for (const json* p : by_cost) {
        plan_csv("cheapest_plans", fmt::format("{}: {}", who, str(*p, "key")), *p, str(d, "cost_unit"));
      }
      // Time against cost: every simulated plan (the fastest 5,000 when more), the front as a line.
      std::set<std::string> front;
      for (const auto& k : d.value("pareto_front", json::array())) front.insert(k.get<std::string>());
      json cloud = json::array(), line = json::array();
      // Its data table: the front (every plan is in plans.csv).
      Table ft{{"plan on the Pareto front", days ? "days" : "step s", "cost"}, {false, true, true}, {}};
      std::vector<const json*> shown = all;
      if (shown.size() > 5000) shown.resize(5000);
      const auto x_of = [&](const json& p) { return days ? num(p, "time_to_train_days") : num(p, "step_s"); };
      const double scale = dollars ? 1e-6 : 1.0;
      for (const json* p : shown) cloud.push_back({x_of(*p), num(*p, "cost") * scale, str(*p, "plan")});
      std::vector<const json*> on_front;
      for (const json* p : all) {
        if (front.count(str(*p, "key"))) on_front.push_back(p);
      }
      std::stable_sort(on_front.begin(), on_front.end(), [&](const json* a, const json* b) { return x_of(*a) < x_of(*b); });
      for (const json* p : on_front) {
        line.push_back({x_of(*p), num(*p, "cost") * scale, str(*p, "plan")});
        ft.rows.push_back({str(*p, "plan"), days ? days_figure(x_of(*p)) : fixed(x_of(*p), 3), cost_text(*p)});
        csv("pareto_front", fmt::format("{}: {}", who, str(*p, "key")), days ? "time_to_train" : "step_time", x_of(*p), days ? "days" : "s");
        csv("pareto_front", fmt::format("{}: {}", who, str(*p, "key")), "cost", num(*p, "cost"), str(d, "cost_unit"));
      }
      json spec = {{"type", "scatter"},
                   {"title", fmt::format("{}: time against cost, {} simulated plans", who, all.size())},
                   {"x_name", days ? "days to train" : "step time (s)"},
                   {"y_name", dollars ? "cost ($ million)" : "cost (GPU-hours)"},
                   {"series", {{{"name", "simulated plans"}, {"points", cloud}}, {{"name", "Pareto front"}, {"points", line}, {"line", true}}}}};
      chart(s, std::move(spec), std::move(ft), "the search simulated no plan (see plans.csv for every plan's reason)");
      note(s, "Every rejected plan's reason (a broken constraint, out of memory by how much, or the lower bound) is in the search's plans.csv.");
    }
  }

  void cost() {
    Section& s = section("Spot versus on-demand");
    const auto sources = of(ReportSource::Kind::cost);
    const auto fleets = of(ReportSource::Kind::serving_cost);
    if (sources.empty() && fleets.empty()) {
      missing(s, "No cost result: `clustersim cost SCENARIO --out DIR` prices a run on every offering, with failures and spot preemptions.");
      return;
    }
    // A serving fleet on each offering at list prices: no Monte Carlo (spot preemptions of a fleet,
    // its lost capacity and retried requests, are not modelled).
    for (const auto* r : fleets) {
      const json& d = r->data;
      const std::string who = who_of(*r);
      Table t{{"offering", "pricing", "$/GPU-h", "fleet $/hour", "$/M output tokens", "$/M total tokens"}, {false, false, true, true, true, true}, {}};
      const auto per_million = [&](const json& o, const char* k) { return o[k].is_number() ? fixed(num(o, k), 3) : std::string("none emitted"); };
      for (const json& o : d["offerings"]) {
        t.rows.push_back({str(o, "offering"), str(o, "pricing"), fixed(num(o, "price_per_gpu_hour"), 3), fixed(num(o, "fleet_cost_per_hour"), 2),
                          per_million(o, "cost_per_million_output_tokens"), per_million(o, "cost_per_million_total_tokens")});
        const std::string subject = fmt::format("{}: {}", who, str(o, "offering"));
        csv("cost", subject, "fleet_cost_per_hour", num(o, "fleet_cost_per_hour"), "USD/hour");
        csv("cost", subject, "cost_per_million_output_tokens", o["cost_per_million_output_tokens"].is_number() ? num(o, "cost_per_million_output_tokens") : std::nan(""), "USD");
        csv("cost", subject, "cost_per_million_total_tokens", o["cost_per_million_total_tokens"].is_number() ? num(o, "cost_per_million_total_tokens") : std::nan(""), "USD");
      }
      para(s, fmt::format("{}: the serving fleet, {} GPUs{}, on each offering at list prices, per million tokens at the simulated steady rates: {} output "
                          "and {} total tokens/s. Spot rows pay the spot price; a fleet's spot preemptions (lost capacity, retried requests) are not "
                          "modelled.",
                          who, fmt_num(num(d, "gpus")), billed_text(d), fixed(num(d, "sustained_output_token_throughput"), 0),
                          fixed(num(d, "sustained_total_token_throughput"), 0)));
      table(s, std::move(t));
    }
    for (const auto* r : sources) {
      const json& d = r->data;
      const std::string who = who_of(*r);
      Table t{{"offering", "pricing", "cost P50", "cost P90", "days P50", "days P90", "interruptions (mean)"}, {false, false, true, true, true, true, true}, {}};
      std::vector<std::string> names;
      std::vector<double> p50, spread;
      for (const json& o : d["offerings"]) {
        const json& c = o.value("cost_usd", json::object());
        const json& w = o.value("wall_days", json::object());
        const bool finishes = o.value("can_finish", true);
        // Its CSV values stay empty when it never finishes.
        const auto q = [&](const json& j, const char* k) { return finishes ? num(j, k) : std::nan(""); };
        // A percentile that reaches into the trials that did not finish is null: never.
        const auto percentile = [&](const json& j, const char* k, const auto& show) { return j[k].is_null() ? std::string("never") : show(num(j, k)); };
        t.rows.push_back({str(o, "offering"), str(o, "pricing"), finishes ? percentile(c, "p50", usd) : "never finishes",
                          finishes ? percentile(c, "p90", usd) : "never finishes", finishes ? percentile(w, "p50", days_figure) : "never",
                          finishes ? percentile(w, "p90", days_figure) : "never", fixed(num(o, "mean_interruptions"), 1)});
        const std::string subject = fmt::format("{}: {}", who, str(o, "offering"));
        csv("cost", subject, "cost_p50", q(c, "p50"), "USD");
        csv("cost", subject, "cost_p90", q(c, "p90"), "USD");
        csv("cost", subject, "days_p50", q(w, "p50"), "days");
        csv("cost", subject, "days_p90", q(w, "p90"), "days");
        if (finishes && std::isfinite(num(c, "p50"))) {
          names.push_back(str(o, "offering"));
          p50.push_back(num(c, "p50") / 1e6);
          spread.push_back((num(c, "p90") - num(c, "p50")) / 1e6);
        }
      }
      para(s, fmt::format("{}: the distribution of cost and finish time over {} trials on each offering.", who, fmt_num(num(d, "trials"))));
      table(s, t);
      // The distributions themselves, from distributions.csv beside cost.json.
      const fs::path dist_file = r->path.parent_path() / "distributions.csv";
      const auto dist = read_csv(dist_file);
      if (fs::exists(dist_file) && !(dist && dist->column("offering") >= 0 && dist->column("trial") >= 0 && dist->column("wall_days") >= 0 &&
                                     dist->column("cost_usd") >= 0)) {
        throw InputError(fmt::format("{}:1: expected the header of `clustersim cost`'s trials (offering,trial,wall_days,cost_usd), found '{}'", dist_file.string(),
                                     dist ? fmt::format("{}", fmt::join(dist->header, ",")) : std::string()));
      }
      if (dist) {
        // Each finished trial's cost, per offering. The trials that did not finish count after every
        // one that did (as the cost command counts them), so a curve levels off at the share that
        // finished.
        std::map<std::string, std::size_t> finished;
        std::vector<std::string> order;
        for (const json& o : d["offerings"]) {
          finished[str(o, "offering")] = o["finished_trials"].get<std::size_t>();
          order.push_back(str(o, "offering"));
        }
        const auto trials = d["trials"].get<std::size_t>();
        const auto name_col = static_cast<std::size_t>(dist->column("offering"));
        std::map<std::string, std::vector<double>> costs, walls;
        std::map<std::string, double> last_trial;  // trial numbers rise within an offering
        for (std::size_t i = 0; i < dist->rows.size(); ++i) {
          const auto& row = dist->rows[i];
          const std::string name = name_col < row.size() ? row[name_col] : "";
          const double v = number_at(row, dist->column("cost_usd"));
          const double days = number_at(row, dist->column("wall_days"));
          const double trial = number_at(row, dist->column("trial"));
          const bool numbered = std::isfinite(trial) && trial >= 0 && trial < static_cast<double>(trials) && trial == std::floor(trial) &&
                                (!last_trial.count(name) || trial > last_trial[name]);
          if (row.size() != dist->header.size() || !finished.count(name) || !(std::isfinite(v) && v >= 0) || !(std::isfinite(days) && days >= 0) ||
              !numbered) {
            throw InputError(fmt::format("{}:{}: expected {} fields: an offering of {}, a trial number under {} above the offering's last, a "
                                         "finish time in days and a cost in dollars, found '{}'",
                                         dist_file.string(), i + 2, dist->header.size(), r->path.filename().string(), trials, fmt::join(row, ",")));
          }
          last_trial[name] = trial;
          costs[name].push_back(v / 1e6);
          walls[name].push_back(days);
        }
        for (const auto& [name, n] : finished) {
          if (costs[name].size() != n) {
            throw InputError(fmt::format("{}: holds {} trials of {} where {} says {} finished: the two files are not from one run", dist_file.string(),
                                         costs[name].size(), name, r->path.filename().string(), n));
          }
        }
        check_percentiles_against_trials(d, costs, walls, dist_file, r->path);
        json series = json::array();
        Table ct{{"offering", "P10", "P50", "P90", "finished trials"}, {false, true, true, true, true}, {}};
        std::vector<std::string> none_finished;
        for (const auto& name : order) {
          auto& v = costs[name];
          if (v.empty()) {
            // No curve to draw: its row says so (it had been left out without a word).
            none_finished.push_back(name);
            ct.rows.push_back({name, "never", "never", "never", fmt::format("0 of {}", trials)});
            continue;
          }
          std::sort(v.begin(), v.end());
          json pts = json::array();
          const std::size_t n = v.size();
          const std::size_t steps = std::min<std::size_t>(n, 100);
          for (std::size_t k = 0; k < steps; ++k) {
            const std::size_t i = steps == 1 ? 0 : k * (n - 1) / (steps - 1);
            pts.push_back({v[i], static_cast<double>(i + 1) / static_cast<double>(trials)});
          }
          series.push_back({{"name", name}, {"points", pts}, {"step", true}});
          // Percentiles over every trial, as the cost command computes them (v is in $ million): one
          // that reaches into the unfinished trials is never.
          const auto at = [&](double f) {
            const double x = quantile_with_unfinished(v, trials, f);
            return std::isfinite(x) ? usd(1e6 * x) : std::string("never");
          };
          ct.rows.push_back({name, at(0.1), at(0.5), at(0.9), n == trials ? std::to_string(n) : fmt::format("{} of {}", n, trials)});
        }
        json spec = {{"type", "lines"},
                     {"title", fmt::format("{}: cost distribution per offering (CDF over trials)", who)},
                     {"x_name", "cost ($ million)"},
                     {"y_names", {"fraction of trials"}},
                     {"y_min", 0},
                     {"y_max", 1},
                     {"series", series}};
        chart(s, std::move(spec), std::move(ct), "no offering finished a trial");
        if (!none_finished.empty() && none_finished.size() < order.size()) {
          note(s, fmt::format("Not drawn: {} (no trial finished).", fmt::join(none_finished, ", ")));
        }
      } else {
        Table ct{{"offering", "P50", "P90"}, {false, true, true}, {}};
        for (std::size_t i = 0; i < names.size(); ++i) ct.rows.push_back({names[i], usd(p50[i] * 1e6), usd((p50[i] + spread[i]) * 1e6)});
        json spec = {{"type", "bars"},
                     {"title", fmt::format("{}: cost P50 and P90 per offering ($ million)", who)},
                     {"unit", "$ million"},
                     {"categories", names},
                     {"series", {{{"name", "P50"}, {"values", p50}}, {{"name", "P90 above P50"}, {"values", spread}}}},
                     {"height", 140 + 30 * static_cast<int>(names.size())}};
        chart(s, std::move(spec), std::move(ct), "no offering can finish");
        note(s, "distributions.csv was not beside cost.json, so only the P50 and P90 are drawn.");
      }
    }
  }

  void serving() {
    Section& s = section("Serving latency and throughput");
    const auto sources = of(ReportSource::Kind::inference_run);
    if (sources.empty()) {
      missing(s, "No inference run: `clustersim run INFERENCE_SCENARIO --out DIR` gives latency distributions.");
      return;
    }
    for (const auto* r : sources) {
      const json& d = r->data;
      const std::string who = who_of(*r);
      const auto req = read_csv(r->path.parent_path() / "requests.csv");
      if (req) {
        json series = json::array();
        Table t{{"metric", "P50 (ms)", "P90 (ms)", "P99 (ms)", "requests"}, {false, true, true, true, true}, {}};
        for (const auto& [col, name] : std::vector<std::pair<const char*, const char*>>{{"ttft_s", "TTFT"}, {"tpot_s", "TPOT"}, {"e2e_s", "end-to-end latency"}}) {
          const int c = req->column(col);
          if (c < 0) continue;
          std::vector<double> v, all;
          for (const auto& row : req->rows) {
            const double x = number_at(row, c);
            if (!std::isfinite(x)) continue;
            // TPOT is defined for requests of two or more output tokens (requests.csv leaves it
            // empty otherwise); every defined value counts toward the percentiles, and the
            // positive ones are drawn (the axis is logarithmic).
            all.push_back(x * 1e3);
            if (x > 0) v.push_back(x * 1e3);
          }
          if (all.empty()) continue;
          const SampleSummary sum = summarize(all);
          std::sort(v.begin(), v.end());
          json pts = json::array();
          const std::size_t n = v.size(), steps = std::min<std::size_t>(n, 200);
          for (std::size_t k = 0; k < steps; ++k) {
            const std::size_t i = steps == 1 ? 0 : k * (n - 1) / (steps - 1);
            pts.push_back({v[i], static_cast<double>(i + 1) / static_cast<double>(n)});
          }
          if (!v.empty()) series.push_back({{"name", name}, {"points", pts}});
          t.rows.push_back({name, fixed(sum.p50, 2), fixed(sum.p90, 2), fixed(sum.p99, 2), std::to_string(all.size())});
        }
        json spec = {{"type", "lines"}, {"title", fmt::format("{}: latency CDFs (every request)", who)}, {"x_name", "milliseconds"}, {"x_log", true},
                     {"y_names", {"fraction of requests"}}, {"y_min", 0}, {"y_max", 1}, {"series", series}};
        chart(s, std::move(spec), std::move(t), "requests.csv holds no completed request");
      } else {
        missing(s, fmt::format("{}: requests.csv was not beside summary.json, so the latency CDFs cannot be drawn (percentiles are in the headline table).", who));
      }
      if (d.contains("rate_sweep") && d["rate_sweep"].size() >= 2) {
        json tput = json::array(), good = json::array(), ttft = json::array();
        Table t{{"offered req/s", "served req/s", "goodput req/s", "output tokens/s", "TTFT P90 ms", "TPOT P90 ms"}, {true, true, true, true, true, true}, {}};
        for (const json& p : d["rate_sweep"]) {
          tput.push_back({num(p, "rate_rps"), num(p, "request_throughput")});
          good.push_back({num(p, "rate_rps"), num(p, "request_goodput")});
          ttft.push_back({num(p, "rate_rps"), num(p, "ttft_p90_ms")});
          t.rows.push_back({fixed(num(p, "rate_rps"), 2), fixed(num(p, "request_throughput"), 2), fixed(num(p, "request_goodput"), 2),
                            fmt_num(num(p, "output_token_throughput"), 6), fixed(num(p, "ttft_p90_ms"), 1), fixed(num(p, "tpot_p90_ms"), 2)});
          csv("serving_rate_sweep", fmt::format("{}: {} req/s", who, fixed(num(p, "rate_rps"), 3)), "request_throughput", num(p, "request_throughput"), "requests/s");
        }
        json spec = {{"type", "lines"},
                     {"title", fmt::format("{}: throughput and TTFT against the offered request rate", who)},
                     {"x_name", "offered requests/s"},
                     {"y_names", {"requests/s", "TTFT P90 (ms)"}},
                     {"series", {{{"name", "served"}, {"points", tput}, {"axis", 0}}, {{"name", "within the SLO"}, {"points", good}, {"axis", 0}},
                                 {{"name", "TTFT P90"}, {"points", ttft}, {"axis", 1}}}}};
        chart(s, std::move(spec), std::move(t));
      } else {
        // `run --report` sweeps a generated open-loop workload only: an offline batch, a closed loop and a
        // trace have no request rate to vary (the message had told an offline run's user to run what they ran).
        missing(s, fmt::format("{}: no rate sweep: `clustersim run SCENARIO --report DIR` replays a generated workload of Poisson or gamma arrivals at "
                               "other request rates; an offline batch, a closed loop or a trace has no rate to vary.",
                               who));
      }
    }
  }

  void sizing() {
    const auto sources = of(ReportSource::Kind::sizing);
    if (sources.empty()) return;
    Section& s = section("Fleet sizing");
    for (const auto* r : sources) {
      const json& d = r->data;
      Table t{{"GPU on node", "TP", "replicas (prefill+decode)", "GPUs (billed)", "$/hour", "$/M output tokens", "meets SLO", "verdict"}, {false, true, false, true, true, true, true, false}, {}};
      for (const json& c : d["candidates"]) {
        const bool ran = num(c, "attainment", -1) >= 0;
        const bool split = num(c, "prefill", 0) > 0;
        const double replicas = num(c, "replicas");
        // A fleet is its GPU, node, TP and replicas: two offers of one GPU on different nodes differ.
        const std::string gpu = c.contains("node") ? fmt::format("{} on {}", str(c, "gpu"), str(c, "node")) : str(c, "gpu");
        const std::string layout = split ? fmt::format("{} ({}+{})", fmt_num(replicas), fmt_num(num(c, "prefill")), fmt_num(num(c, "decode"))) : fmt_num(replicas);
        // Replicas of several pipeline stages say so (sizing.json before the pp field had none).
        const double pp = num(c, "pp", 1);
        const std::string tp = pp > 1 ? fmt::format("{} (PP {})", fmt_num(num(c, "tp")), fmt_num(pp)) : fmt_num(num(c, "tp"));
        t.rows.push_back({gpu, tp, ran ? layout : "-", ran ? gpus_billed_text(c) : "-", ran ? fixed(num(c, "cost_per_hour"), 2) : "-",
                          ran ? fixed(num(c, "cost_per_million_output_tokens"), 3) : "-", ran ? pct(num(c, "attainment")) : "-",
                          !c.value("feasible", false)        ? str(c, "reason", "misses the SLO")
                          : fewest_text(c).empty()           ? std::string("meets the SLO")
                                                             : fmt::format("meets the SLO; {} ({} meet{})", grown_to_cap(c) ? "grown to max_gpus" : "fills its billed nodes",
                                        fewest_text(c), num(c["fewest_meeting"], "replicas") == 1 ? "s" : "")});
        if (ran) {
          const std::string subject = fmt::format("{}: {} TP{}{}, {}", who_of(*r), gpu, fmt_num(num(c, "tp")), pp > 1 ? fmt::format(" PP{}", fmt_num(pp)) : "", fleet_text(c));
          csv("sizing", subject, "gpus", num(c, "gpus"), "GPUs");
          if (c.contains("gpus_billed")) csv("sizing", subject, "gpus_billed", num(c, "gpus_billed"), "GPUs (whole nodes)");
          csv("sizing", subject, "cost_per_hour", num(c, "cost_per_hour"), "USD/hour");
          csv("sizing", subject, "cost_per_million_output_tokens", num(c, "cost_per_million_output_tokens"), "USD");
          csv("sizing", subject, "slo_attainment", num(c, "attainment"), "fraction");
          csv("sizing", subject, "meets_slo", c.value("feasible", false) ? 1.0 : 0.0, "1 if it does");
          if (c.contains("fewest_meeting") && c["fewest_meeting"].is_object()) {
            csv("sizing", subject, "fewest_replicas_meeting", num(c["fewest_meeting"], "replicas"), "replicas (the row grown from them)");
          }
        }
      }
      para(s, fmt::format("{}: the configurations that meet the SLO, cheapest per hour first, then those that do not, most requests within it first; at "
                          "{} requests/s.",
                          who_of(*r), fmt_num(num(d, "rate_rps"), 3)));
      table(s, std::move(t));
    }
  }

  void assumptions() {
    Section& s = section("Assumptions and defaults applied");
    bool any = false;
    for (const auto* r : of(ReportSource::Kind::training_run)) {
      for (const auto& n : r->data.value("notes", json::array())) {
        para(s, fmt::format("{}: {}", who_of(*r), n.get<std::string>()));
        any = true;
      }
    }
    for (const auto* r : of(ReportSource::Kind::inference_run)) {
      const json& d = r->data;
      para(s, fmt::format("{}: preemption by {}, prefix caching {}, {} batching.", who_of(*r), str(d, "preemption"), d.value("prefix_caching", false) ? "on" : "off",
                          str(d, "batching")));
      any = true;
    }
    for (const auto* r : of(ReportSource::Kind::cost)) {
      const json& d = r->data;
      const json& rel = d.value("reliability", json::object());
      const json& cp = d.value("checkpoint", json::object());
      para(s, fmt::format("{}: {} failures per 1,000 node-days, {} s to detect and {} s to restart; a checkpoint of {} GB takes {} s to write ({}).",
                          who_of(*r), fmt_num(num(rel, "failures_per_1000_node_days")), fixed(num(rel, "detect_s"), 0), fixed(num(rel, "restart_s"), 0),
                          fixed(num(cp, "bytes") / 1e9, 1), fixed(num(cp, "write_s"), 1), flag(cp, "async", false) ? "asynchronous" : "the job waits"));
      any = true;
    }
    for (const auto* r : of(ReportSource::Kind::plans)) {
      para(s, fmt::format("{}: cost unit {}.", who_of(*r), str(r->data, "cost_unit")));
      any = true;
    }
    // Counted per validation result: two results of one file (with and without --tp-overlap, say)
    // had been summed into one table, 72 uses of a default over 36 cases.
    const auto validations = of(ReportSource::Kind::validation);
    for (const auto* r : validations) {
      std::map<std::string, int> defaults;
      for (const auto& c : r->data["cases"]) {
        for (const auto& a : c.value("defaults_applied", json::array())) ++defaults[a.get<std::string>()];
      }
      if (defaults.empty()) continue;
      Table t{{validations.size() > 1 ? fmt::format("default applied to published cases ({})", r->path.string()) : std::string("default applied to published cases"),
               "cases"},
              {false, true},
              {}};
      for (const auto& [text, n] : defaults) t.rows.push_back({text, std::to_string(n)});
      table(s, std::move(t));
      any = true;
    }
    note(s, "The models' own scope and assumptions are documented in docs/training.md, docs/serving.md and docs/cost.md.");
    if (!any) missing(s, "The results record no defaults beyond the documented ones.");
  }

  // A validation case's error in percent from its full-precision figures (checked against error_pct
  // when read): rounding validate's two decimals again to one showed -16.35 as -16.4 where validate
  // prints -16.3. NaN where the figures are missing.
  static double case_error(const json& c) {
    const std::string metric = str(c, "primary_metric");
    const double m = num(c.value("measured", json::object()), metric.c_str()), p = num(c.value("predicted", json::object()), metric.c_str());
    return m > 0 ? 100.0 * (p / m - 1.0) : std::nan("");
  }

  void accuracy() {
    Section& s = section("Accuracy on published measurements");
    const auto sources = of(ReportSource::Kind::validation);
    if (sources.empty()) {
      missing(s, "No accuracy result: `clustersim validate ../shared/validation/training.yaml --json > accuracy.json` and pass accuracy.json to clustersim report.");
      return;
    }
    for (const auto* r : sources) {
      const json& d = r->data;
      // A subject led by the result's file where several accuracy results are given (two runs of one
      // file, at --tp-overlap on and off, had given every row twice under the same key).
      const std::string lead = sources.size() > 1 ? r->path.string() + ": " : std::string();
      Table sum{{"kind", "cases", "ok", "unsupported", "failed", "MAPE", "worst |error|"}, {false, true, true, true, true, true, true}, {}};
      for (const auto& item : d["summary"].items()) {
        const std::string kind = item.key();
        const json& v = item.value();  // not a structured binding: clang 14 cannot capture one in the lambda below
        // No ok case of the kind: no error to average (validate writes null), shown as "-". Else from
        // the cases' own measured and predicted figures, as their rows are (validate's two decimals
        // rounded again to one had put the summary at 6.5% beside its one case's 6.4%).
        double sum_abs = 0, worst = 0;
        int counted = 0;
        bool exact = true;
        for (const auto& c : d["cases"]) {
          if (str(c, "kind") != kind || str(c, "status") != "ok") continue;
          const double e = std::fabs(case_error(c));
          if (!std::isfinite(e)) {
            exact = false;
            break;
          }
          sum_abs += e;
          worst = std::max(worst, e);
          ++counted;
        }
        const auto pct = [&](const char* key) {
          if (!v[key].is_number()) return std::string("-");
          if (exact && counted > 0) return fmt::format("{:.1f}%", std::string_view(key) == "mape_pct" ? sum_abs / counted : worst);
          return fmt::format("{:.1f}%", v[key].get<double>());
        };
        sum.rows.push_back({kind, fmt_num(num(v, "cases")), fmt_num(num(v, "ok")), fmt_num(num(v, "unsupported", 0)), fmt_num(num(v, "failed", 0)),
                            pct("mape_pct"), pct("max_abs_error_pct")});
        if (v["mape_pct"].is_number()) {
          csv("accuracy", lead + kind, "mape", num(v, "mape_pct"), "%");
          csv("accuracy", lead + kind, "worst_abs_error", num(v, "max_abs_error_pct"), "%");
        }
      }
      para(s, fmt::format("{}: error of the prediction against the published measurement, per case.", r->path.filename().string()));
      table(s, std::move(sum));
      Table t{{"case", "metric", "measured", "predicted", "error"}, {false, false, true, true, true}, {}};
      for (const auto& c : d["cases"]) {
        const std::string metric = str(c, "primary_metric");
        const json& m = c.value("measured", json::object());
        const json& p = c.value("predicted", json::object());
        const double error = case_error(c);
        t.rows.push_back({str(c, "id"), metric, fmt_num(num(m, metric.c_str())), fmt_num(num(p, metric.c_str())),
                          str(c, "status") == "ok" ? fmt::format("{:+.1f}%", error) : str(c, "status")});
        csv("accuracy", lead + str(c, "id"), "error", num(c, "error_pct"), "%");
      }
      table(s, std::move(t));
    }
  }

  void reproduce(const ReportOptions& options) {
    Section& s = section("Reproducing this report");
    para(s, fmt::format("clustersim {}; charts by Apache ECharts {} (inlined in report.html).", options.version, assets::kEchartsVersion));
    Table t{{"input", "what", "bytes", "SHA-256"}, {false, false, true, false}, {}};
    std::set<std::pair<std::string, std::string>> scenarios;
    // A file read at two versions (edited between two results) is named with the result that read
    // the later one, so that its CSV rows differ in their subject (the key had been given twice).
    std::map<std::string, std::string> first_version;
    const auto as_read = [&](const std::string& file, const std::string& sha, const ReportSource& by) {
      const auto [it, fresh] = first_version.emplace(file, sha);
      return fresh || it->second == sha ? file : fmt::format("{} (as read for {})", file, by.path.string());
    };
    for (const auto& src : sources_) {
      t.rows.push_back({src.path.string(), kind_name(src.kind), std::to_string(src.bytes), src.sha256});
      csv_text("inputs", src.path.string(), "sha256", src.sha256);
      const json& from = src.data.value("source", json::object());
      // A scenario that several results read is listed once (twice if it changed between them).
      if (from.contains("scenario_file") && scenarios.insert({str(from, "scenario_file"), str(from, "scenario_sha256")}).second) {
        const std::string file = as_read(str(from, "scenario_file"), str(from, "scenario_sha256"), src);
        t.rows.push_back({file, "its scenario, as read", "-", str(from, "scenario_sha256")});
        csv_text("inputs", file, "sha256", str(from, "scenario_sha256"));
      }
      // The parts the scenario named (model, topology, node, hardware, cost sheet), as read.
      if (from.contains("parts") && from["parts"].is_array()) {
        for (const json& part : from["parts"]) {
          if (str(part, "file").empty() || !scenarios.insert({str(part, "file"), str(part, "sha256")}).second) continue;
          const std::string file = as_read(str(part, "file"), str(part, "sha256", "-"), src);
          t.rows.push_back({file, "a part its scenario names", "-", str(part, "sha256", "-")});
          csv_text("inputs", file, "sha256", str(part, "sha256", "-"));
        }
      }
    }
    table(s, std::move(t));
    // Shell words, single-quoted where they need it.
    const auto word = [](const std::string& w) {
      if (!w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./=:+,") == std::string::npos) return w;
      std::string q = "'";
      for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q + "'";
    };
    std::string files;
    for (const auto& src : sources_) files += fmt::format(" {}", word(src.path.string()));
    const std::string title = options.title.empty() ? std::string() : fmt::format(" --title {}", word(options.title));
    para(s, fmt::format("Rebuild it with: clustersim report{} --out DIR{}", files, title));
    for (const auto* r : of(ReportSource::Kind::training_run)) trace_link(s, *r);
    for (const auto* r : of(ReportSource::Kind::inference_run)) trace_link(s, *r);
  }

  void trace_link(Section& s, const ReportSource& r) {
    const fs::path trace = r.path.parent_path() / "trace.json";
    if (!fs::exists(trace)) return;
    std::error_code ec;
    fs::path rel = fs::relative(fs::absolute(trace, ec), fs::absolute(dir_, ec), ec);
    if (ec || rel.empty()) rel = fs::absolute(trace, ec);
    s.blocks.push_back({Block::Kind::link, fmt::format("{}: Perfetto trace ({})", str(r.data, "scenario"), rel.generic_string()), url_path(rel), {}, {}});
    note(s, "Open the trace at https://ui.perfetto.dev (Open trace file), or in chrome://tracing.");
  }

  // A path as a URL reference: unreserved characters and '/' kept, the rest percent-encoded, and a
  // relative path led by "./" so that a name with ':' is not read as a scheme.
  static std::string url_path(const fs::path& p) {
    const std::string text = p.generic_string();
    std::string out = p.is_relative() ? "./" : "file://";
    for (const unsigned char c : text) {
      if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
        out += static_cast<char>(c);
      } else {
        out += fmt::format("%{:02X}", c);
      }
    }
    return out;
  }

  const std::vector<ReportSource>& sources_;
  fs::path dir_;
  Document doc_;
};

// ---------------------------------------------------------------------------------------------
// Rendering

std::string html_escape(const std::string& s) { return xml_escape(s); }
// A report's sentence in HTML: escaped, and its `commands` as <code> as the Markdown shows them (the
// page had printed the backticks). Text with an odd number of them keeps them as written.
std::string html_text(const std::string& s) {
  const std::string e = html_escape(s);
  if (std::count(e.begin(), e.end(), '`') % 2 != 0) return e;
  std::string out;
  bool open = false;
  for (const char c : e) {
    if (c == '`') {
      out += open ? "</code>" : "<code>";
      open = !open;
    } else {
      out += c;
    }
  }
  return out;
}

// Inline script text must not close its <script> element.
std::string script_safe(std::string s) {
  std::size_t at = 0;
  while ((at = s.find("</", at)) != std::string::npos) {
    s.replace(at, 2, "<\\/");
    at += 3;
  }
  return s;
}

std::string joined(std::span<const std::string_view> parts) {
  std::string out;
  std::size_t n = 0;
  for (auto p : parts) n += p.size();
  out.reserve(n);
  for (auto p : parts) out += p;
  return out;
}

std::string html_table(const Table& t) {
  std::string out = "<table>\n<tr>";
  for (std::size_t i = 0; i < t.header.size(); ++i) out += fmt::format("<th{}>{}</th>", t.numeric[i] ? " class=\"num\"" : "", html_escape(t.header[i]));
  out += "</tr>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) out += fmt::format("<td{}>{}</td>", i < t.numeric.size() && t.numeric[i] ? " class=\"num\"" : "", html_escape(row[i]));
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string render_html(const Document& d) {
  std::string body;
  json charts = json::array();
  for (const auto& sec : d.sections) {
    body += fmt::format("<h2>{}</h2>\n", html_escape(sec.title));
    for (const auto& b : sec.blocks) {
      switch (b.kind) {
        case Block::Kind::paragraph: body += fmt::format("<p>{}</p>\n", html_text(b.text)); break;
        case Block::Kind::note: body += fmt::format("<p class=\"note\">{}</p>\n", html_text(b.text)); break;
        case Block::Kind::missing: body += fmt::format("<p class=\"missing\">{}</p>\n", html_text(b.text)); break;
        case Block::Kind::table: body += html_table(b.table); break;
        case Block::Kind::link: body += fmt::format("<p><a href=\"{}\">{}</a></p>\n", html_escape(b.href), html_escape(b.text)); break;
        case Block::Kind::chart: {
          const int height = b.chart.value("height", 380);
          body += fmt::format("<h3>{}</h3>\n<div class=\"chart\" id=\"{}\" style=\"height:{}px\" role=\"img\" aria-label=\"{}\"></div>\n", html_escape(b.text),
                              b.chart["id"].get<std::string>(), std::max(260, height), html_escape(b.text));
          body += "<details><summary>the chart's data</summary>\n" + html_table(b.table) + "</details>\n";
          charts.push_back(b.chart);
          break;
        }
      }
    }
  }
  const json data = {{"charts", charts}};
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += fmt::format("<title>{}</title>\n<style>\n{}</style>\n</head>\n<body>\n", html_escape(d.title), joined(assets::kStyle));
  out += fmt::format("<h1>{}</h1>\n<p class=\"lead\">{}</p>\n", html_escape(d.title), html_escape(d.lead));
  out += body;
  // '<' appears in JSON only inside strings, where \u003c means the same: no markup can start there.
  std::string data_text = data.dump();
  for (std::size_t at = 0; (at = data_text.find('<', at)) != std::string::npos;) data_text.replace(at, 1, "\\u003c");
  out += "<script id=\"report-data\" type=\"application/json\">" + data_text + "</script>\n";
  out += "<script>\n" + script_safe(joined(assets::kEcharts)) + "\n</script>\n";
  out += "<script>\n" + script_safe(joined(assets::kScript)) + "\n</script>\n";
  return out + "</body>\n</html>\n";
}

// Text from the results stays text in Markdown too: no raw HTML ('<' and '&' as entities).
std::string md_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '&') {
      out += "&amp;";
    } else if (c == '\n' || c == '\r') {
      out += ' ';  // a paragraph's lines join anyway; a name's newline must not start a heading or end a table row
    } else {
      out += c;
    }
  }
  return out;
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : md_text(s)) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string md_table(const Table& t) {
  std::string out = "|";
  for (const auto& h : t.header) out += fmt::format(" {} |", md_cell(h));
  out += "\n|";
  for (std::size_t i = 0; i < t.header.size(); ++i) out += t.numeric[i] ? "---:|" : "---|";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& c : row) out += fmt::format(" {} |", md_cell(c));
    out += "\n";
  }
  return out + "\n";
}

std::string render_markdown(const Document& d) {
  std::string out = fmt::format("# {}\n\n{}\n\n", md_text(d.title), md_text(d.lead));
  for (const auto& sec : d.sections) {
    out += fmt::format("## {}\n\n", sec.title);
    for (const auto& b : sec.blocks) {
      switch (b.kind) {
        case Block::Kind::paragraph: out += fmt::format("{}\n\n", md_text(b.text)); break;
        case Block::Kind::note: out += fmt::format("*{}*\n\n", md_text(b.text)); break;
        case Block::Kind::missing: out += fmt::format("> **Not in these results.** {}\n\n", md_text(b.text)); break;
        case Block::Kind::table: out += md_table(b.table); break;
        case Block::Kind::link: out += fmt::format("[{}]({})\n\n", md_text(b.text), b.href); break;
        case Block::Kind::chart: out += fmt::format("### {}\n\n(chart in report.html; its data:)\n\n{}", md_text(b.text), md_table(b.table)); break;
      }
    }
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string render_csv(const Document& d) {
  std::string out = "section,subject,metric,value,unit\n";
  for (const auto& r : d.csv) out += fmt::format("{},{},{},{},{}\n", csv_field(r.section), csv_field(r.subject), csv_field(r.metric), csv_field(r.value), csv_field(r.unit));
  return out;
}

}  // namespace

void check_report_possible(const fs::path& dir) {
  if (!html_reports_available()) {
    throw std::runtime_error("this clustersim was built without the charting library for HTML reports: run `npm ci` in reports/web (scripts/setup.sh does it) and rebuild");
  }
  check_targets(dir, report_file_names());
}

const std::vector<std::string>& report_file_names() {
  static const std::vector<std::string> names{"report.html", "report.md", "report.csv"};
  return names;
}

void write_report(const fs::path& dir, const std::vector<ReportSource>& sources, const ReportOptions& options) {
  if (sources.empty()) throw InputError("no results to report on");
  check_report_possible(dir);
  Document doc;
  try {
    doc = Builder(sources, dir).build(options);
  } catch (const json::exception& e) {
    // A field of the wrong type (hand-edited or from another program): name the file, found by
    // building each result alone.
    for (const auto& s : sources) {
      try {
        Builder({s}, dir).build(options);
      } catch (const json::exception& one) {
        throw InputError(fmt::format("{}: not a result clustersim wrote: a field has the wrong type or is missing ({})", s.path.string(), one.what()));
      }
    }
    throw InputError(fmt::format("{}: the results do not fit together: {}", sources.front().path.string(), e.what()));
  }
  make_output_directory(dir, "the report's directory");
  const auto& names = report_file_names();
  write_files_atomically(dir, {{names[0], render_html(doc)}, {names[1], render_markdown(doc)}, {names[2], render_csv(doc)}});
}

}  // namespace cs::reports
