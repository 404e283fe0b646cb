#include "clustersim/models/transformer.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace cs::models {

std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::gelu: return "gelu";
    case Activation::relu2: return "relu2";
    case Activation::swiglu: return "swiglu";
    case Activation::geglu: return "geglu";
  }
  return "?";
}

Activation parse_activation(std::string_view name) {
  if (name == "relu2") return Activation::relu2;
  if (name == "swiglu") return Activation::swiglu;
  if (name == "geglu") return Activation::geglu;
  return Activation::gelu;  // callers check the name with yaml::Map::choice first
}

namespace {

double ffn_parameters(const TransformerSpec& m, double ffn) { return (is_gated(m.activation) ? 3.0 : 2.0) * m.hidden * ffn; }

}  // namespace

double attention_parameters(const TransformerSpec& m) { return attention_parameters_per_rank(m, 1); }

double kv_heads_per_rank(const TransformerSpec& m, int tp) { return std::max(1.0, static_cast<double>(m.kv_heads) / tp); }

std::string tp_split_problem(const TransformerSpec& m, int tp) {
  if (m.heads % tp != 0) return fmt::format("tp = {} must divide the model's {} attention heads", tp, m.heads);
  if (m.kv_heads % tp != 0 && tp % m.kv_heads != 0) return fmt::format("tp = {} and the model's {} key/value heads: one must divide the other", tp, m.kv_heads);
  return "";
}

double attention_parameters_per_rank(const TransformerSpec& m, int tp) {
  const double h = m.hidden, t = tp;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const double q = a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank + double(a.q_lora_rank) * m.heads * qk / t : h * m.heads * qk / t;
    const double kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank + double(a.kv_lora_rank) * m.heads * (a.qk_nope_head_dim + a.v_head_dim) / t;
    return q + kv + double(m.heads) * a.v_head_dim * h / t;
  }
  const double q = h * m.heads * m.head_dim / t;
  const double kv = 2.0 * h * kv_heads_per_rank(m, tp) * m.head_dim;
  return q + kv + double(m.heads) * m.head_dim * h / t;
}

double dense_ffn_parameters(const TransformerSpec& m) { return ffn_parameters(m, m.ffn_hidden); }

double expert_parameters(const TransformerSpec& m) { return m.moe ? ffn_parameters(m, m.moe->expert_ffn_hidden) : 0.0; }

ParameterCount count_parameters(const TransformerSpec& m) {
  ParameterCount p;
  p.embedding = double(m.vocab) * m.hidden;
  p.output = m.tied_embeddings ? 0.0 : double(m.vocab) * m.hidden;
  p.attention = m.layers * attention_parameters(m);
  const int moe_layers = m.moe_layers();
  p.dense_ffn = (m.layers - moe_layers) * dense_ffn_parameters(m);
  if (m.moe) {
    p.routed_experts = double(moe_layers) * m.moe->experts * expert_parameters(m);
    p.shared_experts = double(moe_layers) * m.moe->shared_experts * ffn_parameters(m, m.moe->shared_expert_ffn_hidden);
    p.router = double(moe_layers) * m.hidden * m.moe->experts;
  }
  p.norms = (2.0 * m.layers + 1.0) * m.hidden;
  return p;
}

double active_parameters(const TransformerSpec& m) {
  const ParameterCount p = count_parameters(m);
  double active = p.attention + p.dense_ffn + p.shared_experts + p.router + p.norms + double(m.vocab) * m.hidden;
  if (m.moe) active += double(m.moe_layers()) * m.moe->top_k * expert_parameters(m);
  return active;
}

double model_flops_per_token(const TransformerSpec& m) {
  // Attention: the scores (query-key width) and the context (value width) over the whole s x s
  // matrix, forward and backward: 6 L s heads (d_qk + d_v), PaLM's 12 L s H Q where d_qk = d_v
  // (MLA's are 192 and 128).
  return 6.0 * active_parameters(m) + 6.0 * m.layers * double(m.heads) * (m.qk_head_dim() + m.v_head_dim()) * m.seq_len;
}

yaml::Check<int> layers_check() { return yaml::in_range(1, kMaxLayers, fmt::format("from 1 to {} layers", kMaxLayers)); }

yaml::Check<int> experts_check() { return yaml::in_range(2, 1 << 16, "from 2 to 65536 experts"); }

void check_moe(yaml::Map& e, const MoeSpec& s, int layers) {
  if (s.top_k > s.experts) e.at("top_k", "").fail(fmt::format("at most experts ({})", s.experts), std::to_string(s.top_k));
  if (s.dense_layers >= layers) e.at("dense_layers", "").fail(fmt::format("fewer than layers ({})", layers), std::to_string(s.dense_layers));
}

TransformerSpec read_transformer(const yaml::Node& node) {
  yaml::Map m(node);
  TransformerSpec t;
  const auto positive = yaml::positive<int>();
  t.name = m.get<std::string>("name", yaml::name());
  t.description = m.get_or<std::string>("description", "");
  // The largest published models have a few hundred layers; the bound keeps a typo from building
  // a step graph of billions of tasks.
  t.layers = m.get<int>("layers", layers_check());
  t.hidden = m.get<int>("hidden", positive);
  t.heads = m.get<int>("heads", positive);
  t.kv_heads = m.get_or<int>("kv_heads", t.heads, positive);
  if (t.heads % t.kv_heads != 0) m.at("kv_heads", "").fail(fmt::format("a divisor of heads ({})", t.heads), std::to_string(t.kv_heads));
  // (MLA's head width is its qk parts', read below: heads need not divide hidden there.)
  if (!m.find("head_dim") && !m.find("attention") && t.hidden % t.heads != 0) {
    // Megatron refuses it too (num_attention_heads must divide hidden_size unless kv_channels is given).
    m.at("heads", "").fail_message(fmt::format("heads ({}) must divide hidden ({}) unless head_dim is given", t.heads, t.hidden));
  }
  t.head_dim = m.get_or<int>("head_dim", t.hidden / t.heads, positive);
  t.ffn_hidden = m.get<int>("ffn_hidden", positive);
  t.activation = parse_activation(m.choice("activation", {"gelu", "relu2", "swiglu", "geglu"}));
  t.vocab = m.get<int>("vocab", positive);
  t.seq_len = m.get<int>("seq_len", positive);
  t.tied_embeddings = m.get_or<bool>("tied_embeddings", false);
  const yaml::Check<double> probability{"a probability from 0 to below 1", [](double p) { return p >= 0.0 && p < 1.0; }};
  t.attention_dropout = m.get_or<double>("attention_dropout", t.attention_dropout, probability);
  t.hidden_dropout = m.get_or<double>("hidden_dropout", t.hidden_dropout, probability);
  if (auto moe = m.find("moe")) {
    yaml::Map e(*moe);
    MoeSpec s;
    s.experts = e.get<int>("experts", experts_check());
    s.top_k = e.get<int>("top_k", positive);
    s.expert_ffn_hidden = e.get<int>("expert_ffn_hidden", positive);
    s.shared_experts = e.get_or<int>("shared_experts", 0, yaml::non_negative<int>());
    s.shared_expert_ffn_hidden = e.get_or<int>("shared_expert_ffn_hidden", s.expert_ffn_hidden, positive);
    s.dense_layers = e.get_or<int>("dense_layers", 0, yaml::non_negative<int>());
    s.capacity_factor = e.get_or<double>("capacity_factor", 1.0, yaml::at_least(1.0, "a capacity factor >= 1"));
    e.finish();
    check_moe(e, s, t.layers);
    // At experts / top_k every expert's capacity holds every token; beyond it, only padding grows.
    const double most = double(s.experts) / s.top_k;
    if (s.capacity_factor > most) {
      e.at("capacity_factor", "").fail(fmt::format("from 1 to experts / top_k = {:g} (where every expert can take every token)", most),
                                       fmt::format("{:g}", s.capacity_factor));
    }
    t.moe = s;
  }
  if (auto att = m.find("attention")) {
    yaml::Map a(*att);
    a.choice("kind", {"mla"});
    MlaSpec s;
    s.q_lora_rank = a.get_or<int>("q_lora_rank", 0, yaml::non_negative<int>());
    s.kv_lora_rank = a.get<int>("kv_lora_rank", positive);
    s.qk_nope_head_dim = a.get<int>("qk_nope_head_dim", positive);
    s.qk_rope_head_dim = a.get<int>("qk_rope_head_dim", positive);
    s.v_head_dim = a.get<int>("v_head_dim", positive);
    a.finish();
    t.mla = s;
    // MLA's per-head query and key width is its two parts; a head_dim that says otherwise would be ignored.
    const int qk = s.qk_nope_head_dim + s.qk_rope_head_dim;
    if (m.find("head_dim") && t.head_dim != qk) {
      m.at("head_dim", "").fail(fmt::format("qk_nope_head_dim + qk_rope_head_dim = {} with MLA attention (or left out)", qk), std::to_string(t.head_dim));
    }
    t.head_dim = qk;
  }
  m.finish();
  return t;
}

TransformerSpec load_transformer_file(const std::filesystem::path& file, IncludeStack& includes, const SourceLocation& from) {
  auto guard = includes.enter(file, from);
  auto doc = yaml::Document::load_file(file);
  return read_transformer(part_body(doc->root(), "model"));
}

TransformerSpec load_transformer_reference(const yaml::Node& node, IncludeStack& includes) {
  if (node.is_map()) return read_transformer(node);
  return load_transformer_file(resolve_part(node, "models"), includes, node.where());
}

}  // namespace cs::models
