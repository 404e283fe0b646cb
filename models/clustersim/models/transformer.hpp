// A decoder-only transformer by its dimensions: dense or mixture-of-experts, MHA/GQA/MQA or MLA
// attention, plain or gated FFN. Shipped presets live in scenarios/models/ (docs/model-presets.md);
// the format and the parameter count are documented in docs/training.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "clustersim/common/parts.hpp"
#include "clustersim/common/yaml_reader.hpp"

namespace cs::models {

// gelu and relu2 (squared ReLU) are plain two-matrix MLPs; swiglu and geglu are gated, with three
// matrices (gate, up, down).
enum class Activation { gelu, relu2, swiglu, geglu };
std::string_view to_string(Activation a);
// The names used in files: gelu, relu2, swiglu, geglu.
Activation parse_activation(std::string_view name);
[[nodiscard]] inline bool is_gated(Activation a) { return a == Activation::swiglu || a == Activation::geglu; }

struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  int expert_ffn_hidden = 0;
  int shared_experts = 0;
  int shared_expert_ffn_hidden = 0;  // per shared expert
  int dense_layers = 0;              // leading layers with a dense FFN of ffn_hidden
  double capacity_factor = 1.0;      // tokens an expert computes, over its balanced share (1: dropless)
};

// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values pass through low-rank
// projections; keys carry a decoupled RoPE part shared by all heads.
struct MlaSpec {
  int q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

struct TransformerSpec {
  std::string name;
  std::string description;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int ffn_hidden = 0;
  Activation activation = Activation::gelu;
  int vocab = 0;
  int seq_len = 0;
  bool tied_embeddings = false;
  // Dropout probabilities, Megatron-LM's defaults (--attention-dropout and --hidden-dropout 0.1,
  // megatron/training/arguments.py). Only zero or not matters to the model: at zero PyTorch's
  // dropout returns its input (no kernel, no mask); above it each hidden dropout (after the
  // attention's and the FFN's output projections) keeps a one-byte mask per element, and the
  // unfused attention keeps the probabilities' mask and output.
  double attention_dropout = 0.1;
  double hidden_dropout = 0.1;
  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;

  [[nodiscard]] bool is_moe_layer(int layer) const { return moe && layer >= moe->dense_layers; }
  [[nodiscard]] int moe_layers() const { return moe ? layers - moe->dense_layers : 0; }
  // Width of the attention output (heads x value head dim) and of the query/key head dim.
  [[nodiscard]] std::int64_t attention_width() const { return std::int64_t{heads} * v_head_dim(); }
  [[nodiscard]] int qk_head_dim() const { return mla ? mla->qk_nope_head_dim + mla->qk_rope_head_dim : head_dim; }
  [[nodiscard]] int v_head_dim() const { return mla ? mla->v_head_dim : head_dim; }
};

// Parameter counts (norms included; biases not modelled).
struct ParameterCount {
  double embedding = 0;        // input embedding, V x h
  double output = 0;           // output projection (0 when tied)
  double attention = 0;        // all layers
  double dense_ffn = 0;        // all dense-FFN layers
  double routed_experts = 0;   // all MoE layers, every routed expert
  double shared_experts = 0;   // all MoE layers
  double router = 0;
  double norms = 0;
  [[nodiscard]] double total() const {
    return embedding + output + attention + dense_ffn + routed_experts + shared_experts + router + norms;
  }
};

// Per-layer pieces, for placing layers on pipeline stages.
// The most layers a model file may have (the largest published models have a few hundred).
inline constexpr int kMaxLayers = 10000;
// The bounds every reader of a model holds it to (scenario model files, validation cases): a layer
// count up to kMaxLayers, 2 to 65,536 experts, and a `moe` map `e` whose top_k is at most its
// experts and whose leading dense layers leave MoE layers in a model of `layers`.
yaml::Check<int> layers_check();
yaml::Check<int> experts_check();
void check_moe(yaml::Map& e, const MoeSpec& s, int layers);

double attention_parameters(const TransformerSpec& m);  // a layer's whole: attention_parameters_per_rank(m, 1)
// Key/value heads a tensor-parallel rank holds: kv_heads / tp, or one when there are fewer than tp
// (replicated, one per rank; tp_split_problem requires one of kv_heads and tp to divide the other).
double kv_heads_per_rank(const TransformerSpec& m, int tp);
// Why tensor parallelism `tp` cannot split the model's attention, or "" when it can: Megatron, vLLM
// and TensorRT-LLM split the query heads evenly, and the key/value heads evenly or replicate them
// (one of kv_heads and tp divides the other).
std::string tp_split_problem(const TransformerSpec& m, int tp);

// One tensor-parallel rank's share of a layer's attention weights: the query and output projections
// split tp ways; grouped KV heads fewer than tp replicated, one per rank (as the layer's operations
// run them); MLA's down projections and their norms whole on every rank (Megatron-Core builds them
// duplicated, not split).
double attention_parameters_per_rank(const TransformerSpec& m, int tp);
double dense_ffn_parameters(const TransformerSpec& m);
double expert_parameters(const TransformerSpec& m);  // one routed expert
ParameterCount count_parameters(const TransformerSpec& m);
// Parameters a token passes through: every dense weight, top_k routed experts and the shared ones,
// and the output projection; the input embedding is a lookup and is left out.
double active_parameters(const TransformerSpec& m);

// Model FLOPs per token of one training step (forward and backward, no recompute):
//   6 x active_parameters + 12 x layers x attention_width x seq_len
// (PaLM, Chowdhery et al. 2022, appendix B; Megatron counts the same; the attention term counts the
// full, not causally halved, score matrix, as both do).
double model_flops_per_token(const TransformerSpec& m);

TransformerSpec read_transformer(const yaml::Node& node);
TransformerSpec load_transformer_file(const std::filesystem::path& file, IncludeStack& includes, const SourceLocation& from = {});
// A model given as an inline map, a path or a shipped preset name.
TransformerSpec load_transformer_reference(const yaml::Node& node, IncludeStack& includes);

}  // namespace cs::models
