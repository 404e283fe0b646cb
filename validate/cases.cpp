#include "clustersim/validate/cases.hpp"

#include <set>

#include <fmt/format.h>

namespace cs::validate {

namespace {

using yaml::Map;
using yaml::Node;

const yaml::Check<int> kPositive = yaml::positive<int>();

// An integer field that may also be the word `unknown`.
void int_or_unknown(Map& m, const char* key) {
  if (auto n = m.find(key)) {
    if (n->is_scalar() && n->scalar() == "unknown") return;
    static_cast<void>(n->as<int>(yaml::Check<int>{"a positive integer or unknown", [](int v) { return v > 0; }}));  // checked, not kept
  }
}

void read_model(const Node& node) {
  Map m(node);
  for (const char* key : {"layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab"}) m.get<int>(key, kPositive);
  m.get_or<int>("seq_len", 0, kPositive);  // training cases give it; serving cases take it from the workload
  m.choice("activation", {"gelu", "swiglu", "geglu", "relu2"});
  if (auto moe = m.find("moe")) {
    Map e(*moe);
    e.get<int>("experts", kPositive);
    e.get<int>("top_k", kPositive);
    e.get<int>("expert_ffn_hidden", kPositive);
    e.get_or<int>("shared_experts", 0, yaml::non_negative<int>());
    e.get_or<int>("dense_layers", 0, yaml::non_negative<int>());
    e.finish();
  }
  if (auto att = m.find("attention")) {
    Map a(*att);
    a.choice("kind", {"mla"});
    for (const char* key : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) a.get<int>(key, kPositive);
    a.finish();
  }
  m.finish();
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

void read_parallelism(const Node& node) {
  Map m(node);
  for (const char* key : {"tp", "pp", "dp", "cp", "ep"}) m.get_or<int>(key, 1, kPositive);
  int_or_unknown(m, "vpp");
  if (auto z = m.find("zero_stage")) yaml::parse_choice(*z, {"0", "1", "2", "3", "unknown"});
  if (auto s = m.find("sequence_parallel")) yaml::parse_choice(*s, {"true", "false", "implied", "unknown"});
  m.finish();
}

void read_batch(const Node& node) {
  Map m(node);
  int_or_unknown(m, "micro");
  m.get<int>("global", kPositive);
  m.finish();
}

void read_serving(const Node& node) {
  Map m(node);
  m.get<int>("tp", kPositive);
  m.get_or<int>("pp", 1, kPositive);
  m.get_or<int>("replicas", 1, kPositive);
  m.choice("weights", {"fp16", "bf16", "fp8"});
  m.choice_or("kv_cache", "unknown", {"fp16", "fp8", "unknown"});
  m.choice("engine", {"vllm", "tensorrt-llm", "sglang"});
  m.finish();
}

void read_workload(const Node& node) {
  Map m(node);
  m.get<int>("input_tokens", kPositive);
  m.get<int>("output_tokens", kPositive);
  Map a(m.at("arrival", "an arrival process map"));
  const std::string kind = a.choice("kind", {"offline", "closed-loop", "poisson"});
  if (kind == "closed-loop") a.get<int>("concurrency", kPositive);
  if (kind == "poisson") a.get<double>("rate_rps", yaml::positive<double>());
  a.finish();
  m.finish();
}

Case read_case(const Node& node) {
  Map m(node);
  Case c;
  c.id = m.get<std::string>("id");
  c.kind = m.choice("kind", {"training", "inference", "gemm", "collective"});
  c.source = m.get<std::string>("source");
  c.confidence = m.choice_or("confidence", "exact", {"exact", "derived-from-tflops", "derived-from-tokens-per-s", "secondary"});
  if (auto model = m.find("model")) read_model(*model);
  c.cluster = read_cluster(m.at("cluster", "a cluster map"));
  if (auto p = m.find("parallelism")) read_parallelism(*p);
  if (auto b = m.find("batch")) read_batch(*b);
  if (auto r = m.find("recompute")) yaml::parse_choice(*r, {"none", "selective", "full", "unknown"});
  if (auto p = m.find("precision")) yaml::parse_choice(*p, {"fp16", "bf16", "fp8", "mxfp8"});
  if (auto s = m.find("serving")) read_serving(*s);
  if (auto w = m.find("workload")) read_workload(*w);
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
    spec.bytes = cm.get<double>("bytes", yaml::positive<double>());
    spec.algorithm = cm.choice_or("algorithm", "", {"ring", "tree", "nvls"});
    cm.finish();
    c.collective = spec;
  }
  {
    Map meas(m.at("measured", "a map of measured values"));
    for (const char* key : {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "output_tokens_per_s", "ttft_ms_mean",
                                   "itl_ms_mean", "tflops", "busbw_GBps"}) {
      if (auto v = meas.find(key)) c.measured[key] = v->as<double>(yaml::positive<double>());
    }
    meas.finish();
    if (c.measured.empty()) meas.node().fail("at least one measured value");
  }
  m.finish();
  if (c.kind == "gemm" && !c.gemm) m.at("gemm", "a gemm map (m, n, k, dtype) for kind gemm");
  if (c.kind == "collective" && !c.collective) m.at("collective", "a collective map (op, bytes) for kind collective");
  c.file = *node.where().file;
  c.line = node.where().line;
  return c;
}

}  // namespace

std::vector<Case> read_cases(const std::filesystem::path& file) {
  auto doc = yaml::Document::load_file(file);
  Map root(doc->root());
  root.choice("format", {"clustersim-validation/1"});
  std::vector<Case> cases;
  std::set<std::string> ids;
  for (const Node& item : root.at("cases", "a list of cases").items()) {
    Case c = read_case(item);
    if (!ids.insert(c.id).second) item.fail("a case id not used before in this file", "'" + c.id + "' (a second time)");
    cases.push_back(std::move(c));
  }
  root.finish();
  return cases;
}

}  // namespace cs::validate
