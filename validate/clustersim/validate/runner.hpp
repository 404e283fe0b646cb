// Runs validation cases against the models and compares with what was measured.
//
//  - gemm: the GPU's shipped hardware profile and its GEMM model (hardware/gemm_model.hpp);
//  - collective: a topology built from the case's cluster (the shipped node template with that
//    GPU count, its NICs at the case's rate, a non-blocking fat tree between nodes) and the
//    collective simulated on it (models/collective_model.hpp);
//  - training: the same cluster, the case's plan with documented defaults for what the source does
//    not state, and one simulated step (models/training.hpp);
//  - inference: reported as unsupported until the serving model exists.
// error_pct = 100 (predicted - measured) / measured on the kind's primary metric.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clustersim/hardware/hardware_profile.hpp"
#include "clustersim/validate/cases.hpp"

namespace cs::validate {

struct CaseResult {
  std::string id;
  std::string kind;
  std::string status;  // ok | unsupported | failed
  std::string reason;
  std::string primary_metric;
  std::map<std::string, double> predicted;
  std::map<std::string, double> measured;
  double error_pct = 0;
  std::map<std::string, double> errors_pct;
  std::vector<std::string> defaults_applied;
  // Training: where the predicted step goes (seconds per part, mean over pipeline stages; the parts
  // of models::StepBreakdown), so an error can be traced to a part.
  std::vector<std::pair<std::string, double>> breakdown;
};

struct KindSummary {
  int cases = 0;
  int ok = 0;
  int unsupported = 0;
  int failed = 0;
  double mape_pct = 0;
  double max_abs_error_pct = 0;
};

// Assumptions applied to every training case (the validation format does not carry them).
struct RunOptions {
  // The attention kernel of every training case; unset: by the source's date (attention_kernel).
  std::optional<bool> flash_attention;
  // TP communication overlap of every training case with sequence parallelism; unset: by the
  // source's date (tp_overlap).
  std::optional<bool> tp_overlap;
  // Profiles that replace the shipped profile of the same name (a calibrated profile, for example).
  std::vector<hardware::HardwareProfile> hardware;
};

CaseResult run_case(const Case& c, const RunOptions& options = {});

// A setting of the software that ran a published case, which the validation format does not
// carry, and the note for defaults_applied. Unless RunOptions sets it, the earliest year the
// case's source names decides (docs/training.md, "Defaults for unknown settings").
struct SoftwareChoice {
  bool value = false;
  std::string note;  // empty when the setting does not apply
};
// FlashAttention (true) or Megatron's unfused kernels. FlashAttention (Dao et al., arXiv
// 2205.14135, May 2022) reached Megatron-LM and NeMo in 2023: a run published before 2023 used the
// unfused kernels, a later or undated one flash.
SoftwareChoice attention_kernel(const Case& c, const RunOptions& options);
// TP collectives overlapped with the GEMMs (Transformer Engine's userbuffers, Megatron's
// --tp-comm-overlap), with sequence parallelism only. Megatron-Core's README states it for its 2024
// runs: on from 2024 (or undated), off before.
SoftwareChoice tp_overlap(const Case& c, bool sequence_parallel, const RunOptions& options);
// Whether a source names DeepSpeed as the training software (Megatron-DeepSpeed, "Using DeepSpeed
// and Megatron ..."), case-insensitively.
bool names_deepspeed(const std::string& source);
// The earliest four-digit year from 1990 to 2099 in a text (digits next to other digits do not
// count: an arXiv id's 2104.04473 is no year); 0 when there is none.
int earliest_year(const std::string& text);
// Per kind, in the order training, inference, gemm, collective (kinds without cases left out).
std::map<std::string, KindSummary> summarize(const std::vector<CaseResult>& results);
// The primary metric of a kind.
std::string primary_metric(const std::string& kind);

// How much a training case's prediction depends on the plan settings it leaves unknown (micro batch,
// vpp, ZeRO stage, sequence parallelism, recompute): the step under each other value such a setting
// could have had, one setting at a time with the others at their defaults (docs/training.md, "How
// much the unknown settings matter"). A measurement outside the range of every alternative points at
// the model; one inside it may be a setting the source left out.
struct Alternative {
  std::string setting;  // as defaults_applied names it: "micro batch", "vpp", ...
  std::string value;    // the value tried
  // With pairs: a second unknown setting tried together with the first (empty: the first alone).
  std::string with_setting;
  std::string with_value;
  std::string status;   // ok | does not fit (the memory verdict in reason)
  std::string reason;
  double step_s = 0;
  double error_pct = 0;
};
struct Sensitivity {
  std::string id;
  std::string status;  // ok | unsupported | failed
  std::string reason;
  double measured_s = 0;
  double default_s = 0;
  double default_error_pct = 0;
  std::vector<Alternative> alternatives;
  // Values of unknown settings not tried, with why: a plan the software could not have run (Megatron-
  // Core needs sequence parallelism with TP and experts), or a setting a source's software had no
  // other value of (DeepSpeed's engine before 2024 and sequence parallelism).
  std::vector<std::string> untried;
  // Over the default and every alternative that ran, and the alternatives that reach them
  // ("default" when no alternative goes further).
  double low_s = 0, high_s = 0;
  std::string low_at = "default", high_at = "default";
  [[nodiscard]] bool measured_inside() const { return measured_s >= low_s && measured_s <= high_s; }
  // Whether any alternative ran (one that does not fit in memory gives no range).
  [[nodiscard]] bool has_unknowns() const {
    return std::any_of(alternatives.begin(), alternatives.end(), [](const Alternative& a) { return a.status == "ok"; });
  }
  // Whether the source leaves any plan setting unknown, whatever could be tried.
  [[nodiscard]] bool has_unknown_settings() const { return !alternatives.empty() || !untried.empty(); }
};
// `pairs`: also every two values of different unknown settings together (one setting at a time can
// miss what two unstated settings reach).
Sensitivity sensitivity(const Case& c, const RunOptions& options = {}, bool pairs = false);

// A training case's published plan against the best plan a search finds on the same cluster
// (the default space of models/plan_search.hpp with the published plan in it).
struct PlanComparison {
  std::string id;
  std::string status;               // ok | unsupported | failed
  std::string reason;
  std::string published_plan, best_plan;
  double published_step_s = 0, best_step_s = 0;
  std::size_t simulated = 0;
  std::size_t pruned = 0;           // plans whose lower bound lost to the best found (never simulated)
  std::string why;                  // where the best plan's time goes differently (its breakdown)
};
// `progress` (optional) is called as plans are simulated, with the count done and the count left
// to simulate or prune. `exhaustive` simulates every plan instead of pruning by the lower bound
// (the same best plan, slower; for tests).
PlanComparison compare_plans(const Case& c, const RunOptions& options = {},
                             std::function<void(std::size_t done, std::size_t total)> progress = {}, bool exhaustive = false);

}  // namespace cs::validate
