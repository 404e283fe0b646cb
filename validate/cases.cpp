#include "clustersim/validate/cases.hpp"

#include <cmath>
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace cs::validate {

namespace {

using yaml::Map;
using yaml::Node;

const yaml::Check<int> kPositive = yaml::positive<int>();

// An integer field that may also be the word `unknown` (std::nullopt).
std::optional<int> int_or_unknown(Map& m, const char* key) {
  if (auto n = m.find(key)) {
    if (n->is_scalar() && n->scalar() == "unknown") return std::nullopt;
    return n->as<int>(yaml::Check<int>{"a positive integer or unknown", [](int v) { return v > 0; }});
  }
  return std::nullopt;
}

models::TransformerSpec read_model(const Node& node, const std::string& id) {
  Map m(node);
  models::TransformerSpec t;
  t.name = id;
  // The scenario reader's bounds: a typo's billions of layers or impossible experts are refused here
  // too, not simulated.
  t.layers = m.get<int>("layers", models::layers_check());
  t.hidden = m.get<int>("hidden", kPositive);
  t.ffn_hidden = m.get<int>("ffn_hidden", kPositive);
  t.heads = m.get<int>("heads", kPositive);
  t.kv_heads = m.get<int>("kv_heads", kPositive);
  if (t.heads % t.kv_heads != 0) m.at("kv_heads", "").fail(fmt::format("a divisor of heads ({})", t.heads), std::to_string(t.kv_heads));
  if (t.hidden % t.heads != 0) m.at("heads", "").fail(fmt::format("a divisor of hidden ({})", t.hidden), std::to_string(t.heads));
  t.head_dim = t.hidden / t.heads;
  t.vocab = m.get<int>("vocab", kPositive);
  t.seq_len = m.get_or<int>("seq_len", 0, kPositive);  // training cases give it; serving cases take it from the workload
  t.activation = models::parse_activation(m.choice("activation", {"gelu", "swiglu", "geglu", "relu2"}));
  if (auto moe = m.find("moe")) {
    Map e(*moe);
    models::MoeSpec x;
    x.experts = e.get<int>("experts", models::experts_check());
    x.top_k = e.get<int>("top_k", kPositive);
    x.expert_ffn_hidden = e.get<int>("expert_ffn_hidden", kPositive);
    x.shared_experts = e.get_or<int>("shared_experts", 0, yaml::non_negative<int>());
    x.shared_expert_ffn_hidden = x.expert_ffn_hidden;
    x.dense_layers = e.get_or<int>("dense_layers", 0, yaml::non_negative<int>());
    e.finish();
    models::check_moe(e, x, t.layers);
    t.moe = x;
  }
  if (auto att = m.find("attention")) {
    Map a(*att);
    a.choice("kind", {"mla"});
    models::MlaSpec x;
    x.q_lora_rank = a.get<int>("q_lora_rank", kPositive);
    x.kv_lora_rank = a.get<int>("kv_lora_rank", kPositive);
    x.qk_nope_head_dim = a.get<int>("qk_nope_head_dim", kPositive);
    x.qk_rope_head_dim = a.get<int>("qk_rope_head_dim", kPositive);
    x.v_head_dim = a.get<int>("v_head_dim", kPositive);
    a.finish();
    t.mla = x;
    t.head_dim = x.qk_nope_head_dim + x.qk_rope_head_dim;
  }
  m.finish();
  return t;
}

ClusterSpec read_cluster(const Node& node) {
  Map m(node);
  ClusterSpec c;
  c.gpu = m.choice("gpu", {"A100-SXM4-80GB", "A100-SXM4-40GB", "H100-SXM5-80GB", "H800-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "GB200"});
  c.gpus = m.get<int>("gpus", kPositive);
  c.gpus_per_node = m.get_or<int>("gpus_per_node", c.gpus, kPositive);
  if (auto up = m.find("scale_up")) {
    Map u(*up);
    c.scale_up_kind = u.choice("kind", {"nvlink3", "nvlink4", "nvlink4-h800", "nvlink5"});
    c.domain_gpus = u.get<int>("domain_gpus", yaml::Check<int>{"8 or 72", [](int v) { return v == 8 || v == 72; }});
    u.finish();
  }
  if (auto out = m.find("scale_out")) {
    Map o(*out);
    c.fabric = o.choice("fabric", {"infiniband", "roce", "omnipath", "efa"});
    c.gbps_per_gpu = o.get<double>("gbps_per_gpu", yaml::positive<double>());
    c.fabric_topology = o.choice_or("topology", "fat-tree", {"fat-tree", "clos-3tier"});
    c.fabric_assumed = o.get_or<bool>("assumed", false);
    o.finish();
  }
  m.finish();
  if (c.gpus > c.gpus_per_node && c.gpus % c.gpus_per_node != 0) {
    m.at("gpus", "").fail(fmt::format("at most gpus_per_node ({0}) or a multiple of it", c.gpus_per_node), std::to_string(c.gpus));
  }
  return c;
}

void read_parallelism(const Node& node, TrainingSpec& t) {
  Map m(node);
  for (const char* key : {"tp", "pp", "dp", "cp", "ep", "vpp", "zero_stage", "sequence_parallel"}) {
    if (!m.find(key)) t.not_given.push_back(fmt::format("parallelism.{}", key));
  }
  t.tp = m.get_or<int>("tp", 1, kPositive);
  t.pp = m.get_or<int>("pp", 1, kPositive);
  t.dp = m.get_or<int>("dp", 1, kPositive);
  t.cp = m.get_or<int>("cp", 1, kPositive);
  t.ep = m.get_or<int>("ep", 1, kPositive);
  t.vpp = int_or_unknown(m, "vpp");
  if (auto z = m.find("zero_stage")) {
    if (!(z->is_scalar() && z->scalar() == "unknown")) t.zero_stage = z->as<int>(yaml::in_range(0, 3, "0, 1, 2, 3 or unknown"));
  }
  if (auto s = m.find("sequence_parallel")) {
    // Read as the scenarios read a boolean (True and FALSE too, never a quoted "true"), or a word.
    const char* expected = "true, false, implied or unknown";
    const std::string v = s->scalar(expected);
    if (v == "implied" || v == "unknown") {
      t.sequence_parallel = v;
    } else if (const auto b = yaml::boolean_spelling(s->plain_scalar(expected))) {
      t.sequence_parallel = *b ? "true" : "false";
    } else {
      s->fail(expected);
    }
  }
  m.finish();
}

void read_batch(const Node& node, TrainingSpec& t) {
  Map m(node);
  if (!m.find("micro")) t.not_given.push_back("batch.micro");
  t.micro_batch = int_or_unknown(m, "micro");
  t.global_batch = m.get<int>("global", kPositive);
  m.finish();
}

void read_serving(const Node& node, InferenceSpec& s) {
  Map m(node);
  s.tp = m.get<int>("tp", kPositive);
  s.pp = m.get_or<int>("pp", 1, kPositive);
  s.replicas = m.get_or<int>("replicas", 1, kPositive);
  s.weights = m.choice("weights", {"fp16", "bf16", "fp8"});
  s.kv_cache = m.choice_or("kv_cache", "unknown", {"fp16", "fp8", "unknown"});
  s.engine = m.choice("engine", {"vllm", "tensorrt-llm", "sglang"});
  m.finish();
}

void read_workload(const Node& node, InferenceSpec& s) {
  Map m(node);
  // Up to 16 M tokens each (longer than any model's context), so that their sum stays a count
  // (2^31 - 1 input tokens had overflowed the context length to 0).
  const auto tokens = yaml::in_range<int>(1, 1 << 24, "a token count from 1 to 16777216");
  s.input_tokens = m.get<int>("input_tokens", tokens);
  s.output_tokens = m.get<int>("output_tokens", tokens);
  Map a(m.at("arrival", "an arrival process map"));
  s.arrival = a.choice("kind", {"offline", "closed-loop", "poisson"});
  if (s.arrival == "closed-loop") s.concurrency = a.get<int>("concurrency", kPositive);
  if (s.arrival == "poisson") s.rate_rps = a.get<double>("rate_rps", yaml::positive<double>());
  a.finish();
  m.finish();
}

Case read_case(const Node& node) {
  Map m(node);
  Case c;
  // An id names the case in every table and in --plans: empty, it printed a blank row.
  // ... and blank or broken over lines it did the same, or split the row.
  c.id = m.get<std::string>("id", yaml::name("a case id (not empty, not only spaces, on one line, without tabs)"));
  c.kind = m.choice("kind", {"training", "inference", "gemm", "collective"});
  c.source = m.get<std::string>("source");
  c.confidence = m.choice_or("confidence", "exact", {"exact", "derived-from-tflops", "derived-from-tokens-per-s", "secondary"});
  TrainingSpec t;
  if (auto model = m.find("model")) t.model = read_model(*model, c.id);
  c.cluster = read_cluster(m.at("cluster", "a cluster map"));
  // A training case states its plan, batch, recompute and precision (or `unknown` where the format
  // allows it): a missing one had been taken silently as its default (bf16 for a case in fp16).
  const bool training = c.kind == "training";
  if (auto p = training ? std::optional<Node>(m.at("parallelism", "a parallelism map")) : m.find("parallelism")) read_parallelism(*p, t);
  if (auto b = training ? std::optional<Node>(m.at("batch", "a batch map")) : m.find("batch")) read_batch(*b, t);
  if (training) t.recompute = m.choice("recompute", {"none", "selective", "full", "unknown"});
  else if (auto r = m.find("recompute")) t.recompute = yaml::parse_choice(*r, {"none", "selective", "full", "unknown"});
  if (training) t.precision = m.choice("precision", {"fp16", "bf16", "fp8", "mxfp8"});
  else if (auto p = m.find("precision")) t.precision = yaml::parse_choice(*p, {"fp16", "bf16", "fp8", "mxfp8"});
  InferenceSpec inf;
  const bool has_serving = m.find("serving").has_value(), has_workload = m.find("workload").has_value();
  if (auto s = m.find("serving")) read_serving(*s, inf);
  if (auto w = m.find("workload")) read_workload(*w, inf);
  if (has_serving && has_workload) c.inference = inf;
  if (auto g = m.find("gemm")) {
    Map gm(*g);
    GemmSpec spec;
    spec.m = gm.get<std::int64_t>("m", yaml::positive<std::int64_t>());
    spec.n = gm.get<std::int64_t>("n", yaml::positive<std::int64_t>());
    spec.k = gm.get<std::int64_t>("k", yaml::positive<std::int64_t>());
    spec.dtype = gm.choice("dtype", {"fp32", "tf32", "fp16", "bf16", "fp8", "fp4"});
    gm.finish();
    c.gemm = spec;
  }
  if (auto col = m.find("collective")) {
    Map cm(*col);
    CollectiveSpec spec;
    spec.op = cm.choice("op", {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"});
    // Whole bytes, as nccl-tests sizes are (1.5 or 1e-300 bytes gave a -100% error that the MAPE took in).
    const yaml::Check<double> whole_bytes{"a whole number of bytes from 1 to 2^53",
                                          [](double x) { return x >= 1 && x <= 0x1p53 && x == std::floor(x); }};
    spec.bytes = cm.get<double>("bytes", whole_bytes);
    spec.algorithm = cm.choice_or("algorithm", "", {"ring", "tree", "nvls"});
    cm.finish();
    c.collective = spec;
  }
  {
    Map meas(m.at("measured", "a map of measured values"));
    // Named, not temporaries in the conditional below: clang 14 destroys such a temporary twice when
    // the read throws.
    // A fraction, or a time, rate or throughput from 1e-9 to 1e12 in the metric's unit: wide of any
    // measurement, and narrow enough that an error against it stays finite (1e308 ms or 1e-320 ms
    // had given an infinite error and MAPE).
    const yaml::Check<double> fraction{"a fraction from 1e-9 to 1", [](double x) { return x >= 1e-9 && x <= 1; }};
    const yaml::Check<double> positive{"a positive number from 1e-9 to 1e12", [](double x) { return x >= 1e-9 && x <= 1e12; }};
    // Each kind's metrics (the format's `measured` lines); another kind's would be read and never
    // compared, so they are refused as another kind's sections are.
    const std::map<std::string, std::vector<std::string>> metrics = {{"training", {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"}},
                                                                      {"inference", {"output_tokens_per_s", "ttft_ms_mean", "itl_ms_mean"}},
                                                                      {"gemm", {"tflops"}},
                                                                      {"collective", {"busbw_GBps"}}};
    for (const auto& [kind, keys] : metrics) {
      for (const std::string& key : keys) {
        auto v = meas.find(key);
        if (!v) continue;
        const double value = v->as<double>(key == "mfu" ? fraction : positive);
        if (kind != c.kind) {
          const auto article = [](const std::string& w) { return w.starts_with("i") ? "an" : "a"; };  // an inference case
          v->fail_message(fmt::format("{} {} case is not compared on {}, {} {} case's metric (it would be ignored)", article(c.kind), c.kind, key, article(kind), kind));
        }
        c.measured[key] = value;
      }
    }
    meas.finish();
    if (c.measured.empty()) meas.node().fail("at least one measured value");
    // The value a case is compared on must be there: without it the case could only fail.
    const std::map<std::string, std::vector<std::string>> primary = {{"training", {"step_time_s"}},
                                                                      {"inference", {"output_tokens_per_s", "ttft_ms_mean", "itl_ms_mean"}},
                                                                      {"gemm", {"tflops"}},
                                                                      {"collective", {"busbw_GBps"}}};
    const auto& wanted = primary.at(c.kind);
    if (std::none_of(wanted.begin(), wanted.end(), [&](const std::string& k) { return c.measured.count(k) > 0; })) {
      std::vector<std::string> found;
      for (const auto& [key, value] : c.measured) found.push_back(key);
      meas.node().fail(fmt::format("{} for a {} case (the value it is compared on)", fmt::join(wanted, " or "), c.kind), fmt::format("only {}", fmt::join(found, ", ")));
    }
  }
  m.finish();
  // A section of another kind would be read and then ignored: say so instead.
  {
    const std::map<std::string, std::vector<std::string>> sections = {
        {"training", {"model", "parallelism", "batch", "recompute", "precision"}},
        {"inference", {"model", "serving", "workload"}},
        {"gemm", {"gemm"}},
        {"collective", {"collective"}}};
    const auto& mine = sections.at(c.kind);
    for (const auto& [kind, keys] : sections) {
      for (const auto& key : keys) {
        if (std::find(mine.begin(), mine.end(), key) != mine.end()) continue;
        if (auto n = m.find(key)) n->fail_message(fmt::format("a {} case has no '{}' section (it would be ignored)", c.kind, key));
      }
    }
  }
  if (c.kind == "training") {
    m.at("model", "a model map for kind training");
    m.at("parallelism", "a parallelism map for kind training");
    m.at("batch", "a batch map for kind training");
    if (t.model.seq_len == 0) m.at("model", "").fail("a model with seq_len for kind training", "none");
    // A published run used its whole cluster, and its batch splits evenly over the replicas.
    const std::int64_t plan_gpus = std::int64_t{t.tp} * t.pp * t.dp * t.cp;
    if (plan_gpus != c.cluster.gpus) {
      m.at("parallelism", "").fail(fmt::format("tp x pp x dp x cp = the cluster's {} GPUs", c.cluster.gpus),
                                   fmt::format("{} x {} x {} x {} = {}", t.tp, t.pp, t.dp, t.cp, plan_gpus));
    }
    const Node batch = m.at("batch", "");
    const std::int64_t per_step = std::int64_t{t.micro_batch.value_or(1)} * t.dp;
    if (t.global_batch % per_step != 0) {
      Map(batch).at("global", "").fail(t.micro_batch ? fmt::format("a multiple of micro x dp = {} x {} = {}", *t.micro_batch, t.dp, per_step)
                                                     : fmt::format("a multiple of dp ({}), a whole number of sequences per replica", t.dp),
                                       std::to_string(t.global_batch));
    }
    c.training = std::move(t);
  }
  if (c.kind == "inference") {
    m.at("model", "a model map for kind inference");
    m.at("serving", "a serving map for kind inference");
    m.at("workload", "a workload map for kind inference");
    c.training = std::move(t);  // the model
  }
  if (c.kind == "gemm" && !c.gemm) m.at("gemm", "a gemm map (m, n, k, dtype) for kind gemm");
  if (c.kind == "collective" && !c.collective) m.at("collective", "a collective map (op, bytes) for kind collective");
  c.file = *node.where().file;
  c.line = node.where().line;
  return c;
}

}  // namespace

std::vector<Case> read_cases(const std::filesystem::path& file) {
  auto doc = yaml::Document::load_file(file);
  // Another kind of clustersim file (a scenario, a topology) is named as such, not as a validation
  // file missing its format.
  if (doc->root().is_map()) {
    static const std::set<std::string> kOtherParts = {"scenario", "topology", "node", "hardware", "model", "cost_sheet"};
    const auto keys = Map(doc->root()).keys();
    if (keys.size() == 1 && kOtherParts.count(keys.front())) {
      doc->root().fail("a validation file (format: clustersim-validation/1, cases)", fmt::format("a {} file (root key '{}')", keys.front(), keys.front()));
    }
  }
  Map root(doc->root());
  root.choice("format", {"clustersim-validation/1"});
  std::vector<Case> cases;
  std::set<std::string> ids;
  const Node list = root.at("cases", "a list of cases");
  for (const Node& item : list.items()) {
    Case c = read_case(item);
    if (!ids.insert(c.id).second) item.fail("a case id not used before in this file", "'" + c.id + "' (a second time)");
    cases.push_back(std::move(c));
  }
  // Nothing to compare would print nothing and pass for a validation.
  if (cases.empty()) list.fail("at least one case", "an empty list");
  root.finish();
  return cases;
}

}  // namespace cs::validate
