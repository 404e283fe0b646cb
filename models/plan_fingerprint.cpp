#include "plan_fingerprint.hpp"

#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "clustersim/common/field_count.hpp"
#include "source_digest.hpp"  // generated: CLUSTERSIM_SOURCE_DIGEST (models/source_digest.cmake)

#ifndef CLUSTERSIM_VERSION
#error "CLUSTERSIM_VERSION must be defined (models/CMakeLists.txt)"
#endif

namespace cs::models {

namespace {

// FNV-1a over fields, each followed by a separator so that ("ab", "c") and ("a", "bc") differ.
// Numbers go in as their shortest round-trip text, the same on every platform.
class Fnv {
 public:
  Fnv& operator<<(std::string_view text) {
    for (char c : text) mix(static_cast<unsigned char>(c));
    mix(0x1f);
    return *this;
  }
  Fnv& operator<<(double v) { return *this << std::string_view(fmt::format("{}", v)); }
  Fnv& operator<<(int v) { return *this << static_cast<double>(v); }
  Fnv& operator<<(bool v) { return *this << std::string_view(v ? "1" : "0"); }
  [[nodiscard]] std::string hex() const { return fmt::format("{:016x}", h_); }

 private:
  void mix(unsigned char c) {
    h_ ^= c;
    h_ *= 1099511628211ull;
  }
  std::uint64_t h_ = 14695981039346656037ull;
};

// The structs below are hashed or listed field by field. A field added to one of them must be added
// to its list (or shown to change no simulated number and counted here), which these counts enforce.
// Left out on purpose: HardwareProfile's `calibration` (provenance) and `file`, and a model's
// `description`.
static_assert(field_count<hardware::HardwareProfile>() == 20, "HardwareProfile changed: update add_profile");
static_assert(field_count<hardware::GemmModelParams>() == 8, "GemmModelParams changed: update add_profile");
static_assert(field_count<hardware::GemmResidualTable>() == 7, "GemmResidualTable changed: update add_profile");
static_assert(field_count<hardware::AttentionParams>() == 3, "AttentionParams changed: update add_profile");
static_assert(field_count<hardware::CalibratedCollective>() == 8, "CalibratedCollective changed: update add_profile");
static_assert(field_count<hardware::CalibratedTransfer>() == 2, "CalibratedTransfer changed: update add_profile");
static_assert(field_count<hardware::NvlinkSpec>() == 3, "NvlinkSpec changed: update add_profile");
static_assert(field_count<hardware::PcieSpec>() == 2, "PcieSpec changed: update add_profile");
static_assert(field_count<topology::Device>() == 12, "Device changed: update system_digest");
static_assert(field_count<topology::Link>() == 6, "Link changed: update system_digest");
static_assert(field_count<TransformerSpec>() == 16, "TransformerSpec changed: update results_inputs");
static_assert(field_count<MoeSpec>() == 7, "MoeSpec changed: update results_inputs");
static_assert(field_count<MlaSpec>() == 5, "MlaSpec changed: update results_inputs");
// A plan's fields are in its key (plan_key) or among the settings kept from the scenario.
static_assert(field_count<ParallelismPlan>() == 20, "ParallelismPlan changed: update plan_key or results_inputs' kept settings");
static_assert(field_count<TrainingJob>() == 8, "TrainingJob changed: update plan_key or results_inputs");

void add_profile(Fnv& f, const hardware::HardwareProfile& hw) {
  f << hw.name << hw.vendor << hw.architecture << hw.compute_capability << hw.sm_count << hw.boost_clock.value();
  for (const auto& [d, peak] : hw.peak_flops) f << hardware::to_string(d) << peak.value();
  f << "memory" << hw.memory_capacity.value() << hw.memory_bandwidth.value();
  if (hw.nvlink) f << "nvlink" << hw.nvlink->generation << hw.nvlink->links << hw.nvlink->bandwidth.value();
  if (hw.pcie) f << "pcie" << hw.pcie->generation << hw.pcie->lanes;
  f << "tdp" << hw.tdp.value() << hw.kernel_launch_overhead.value();
  const hardware::GemmModelParams& g = hw.gemm;
  f << "gemm" << g.tile_ridge_intensity << g.k_half << g.memory_efficiency << g.sustained_fraction;
  for (const auto& [d, v] : g.max_efficiency) f << "max" << hardware::to_string(d) << v;
  for (const auto& [d, v] : g.tile_ridge_by_dtype) f << "ridge" << hardware::to_string(d) << v;
  for (const auto& [d, v] : g.k_half_by_dtype) f << "k_half" << hardware::to_string(d) << v;
  for (const auto& [d, t] : g.residuals) {
    f << "residuals" << hardware::to_string(d) << t.m_first << t.m_last << t.n_first << t.n_last << t.k_first << t.k_last;
    for (double x : t.factors) f << x;
  }
  f << "attention" << hw.attention.forward_efficiency << hw.attention.backward_efficiency << hw.attention.tail_blocks;
  for (const auto& c : hw.collectives) {
    f << "collective" << c.op << c.link << c.ranks << c.nodes << c.algorithm << c.latency.value() << c.busbw.value();
    for (const auto& [bytes, e] : c.efficiency) f << bytes << e;
  }
  for (const auto* t : {&hw.host_to_device, &hw.device_to_host}) {
    if (*t) f << "transfer" << (*t)->latency.value() << (*t)->bandwidth.value();
  }
}

}  // namespace

std::string system_digest(const topology::Topology& topo) {
  Fnv f;
  f << topo.node_template << topo.fabric_kind << topo.technology << topo.fabric_tiers << topo.in_network_reduction << topo.node_count()
    << topo.qps_per_connection;
  const topology::Graph& g = topo.graph();
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    const topology::Device& d = topo.device(*v);
    f << d.name << topology::to_string(d.kind) << d.node << d.local_index << d.gpu_rank << d.rail << d.plane << d.unit << d.tier << d.chips
      << d.latency.value() << d.model;
  }
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const topology::Link& l = topo.link(*e);
    f << static_cast<int>(boost::source(*e, g)) << static_cast<int>(boost::target(*e, g)) << topology::to_string(l.kind) << l.bandwidth.value()
      << l.latency.value() << l.lanes << l.tier << static_cast<double>(l.id);
  }
  if (topo.gpu) add_profile(f, *topo.gpu);
  return f.hex();
}

nlohmann::json results_inputs(const TrainingJob& base, const std::vector<SearchSystem>& systems) {
  const TransformerSpec& m = base.model;
  nlohmann::json model = {{"name", m.name},       {"layers", m.layers},         {"hidden", m.hidden},     {"heads", m.heads},
                          {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim},   {"ffn_hidden", m.ffn_hidden},
                          {"activation", std::string(to_string(m.activation))}, {"vocab", m.vocab},   {"seq_len", m.seq_len},
                          {"tied_embeddings", m.tied_embeddings}, {"attention_dropout", m.attention_dropout},
                          {"hidden_dropout", m.hidden_dropout}};
  if (m.moe) {
    model["moe"] = {{"experts", m.moe->experts},
                    {"top_k", m.moe->top_k},
                    {"expert_ffn_hidden", m.moe->expert_ffn_hidden},
                    {"shared_experts", m.moe->shared_experts},
                    {"shared_expert_ffn_hidden", m.moe->shared_expert_ffn_hidden},
                    {"dense_layers", m.moe->dense_layers},
                    {"capacity_factor", m.moe->capacity_factor}};
  }
  if (m.mla) {
    model["mla"] = {{"q_lora_rank", m.mla->q_lora_rank},
                    {"kv_lora_rank", m.mla->kv_lora_rank},
                    {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                    {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                    {"v_head_dim", m.mla->v_head_dim}};
  }
  const ParallelismPlan& p = base.plan;
  const PipelineSchedule plain = searched_schedule(p, 2, 1);  // a pipeline's, not interleaved
  nlohmann::json kept = {{"schedule_without_interleaving", std::string(to_string(plain))},
                         {"overlap_p2p", p.overlap_p2p ? nlohmann::json(*p.overlap_p2p) : nlohmann::json("unset")},
                         {"bucket_parameters", p.bucket_parameters},
                         {"grad_accumulation_fusion", p.grad_accumulation_fusion},
                         {"all_reduce_gradients", p.all_reduce_gradients},
                         {"microbatch_group", p.microbatch_group}};
  nlohmann::json sys = nlohmann::json::array();
  for (const SearchSystem& s : systems) {
    const topology::Topology& t = *s.topology;
    sys.push_back({{"topology", t.name},
                   {"gpu", t.gpu ? t.gpu->name : std::string()},
                   {"gpus", t.gpus().size()},
                   {"digest", system_digest(t)}});
  }
  // The version and the digest of the simulator's sources: a build whose model code differs, even
  // under the same version number, simulated other step times.
  return {{"clustersim", CLUSTERSIM_VERSION},
          {"sources", CLUSTERSIM_SOURCE_DIGEST},
          {"model", std::move(model)},
          {"precision", std::string(hardware::to_string(base.precision))},
          {"global_batch", base.global_batch},
          {"gradient_bytes", base.gradient_bytes()},
          {"train_tokens", base.token_budget},
          {"plan_settings_kept", std::move(kept)},
          {"systems", std::move(sys)}};
}

std::string fingerprint(const nlohmann::json& inputs) { return (Fnv() << std::string_view(inputs.dump())).hex(); }

std::string inputs_difference(const nlohmann::json& file, const nlohmann::json& now, std::size_t most) {
  const nlohmann::json patch = nlohmann::json::diff(file, now);
  std::string out;
  for (std::size_t i = 0; i < patch.size() && i < most; ++i) {
    std::string path = patch[i]["path"].get<std::string>();
    // An element appended to a list is "<list>/-": name it by the index it takes (a probe's added
    // system ended in the JSON library's "array index '-' out of range").
    if (path.size() >= 2 && path.ends_with("/-")) {
      const nlohmann::json::json_pointer list(path.substr(0, path.size() - 2));
      path = path.substr(0, path.size() - 1) + std::to_string(file.contains(list) && file[list].is_array() ? file[list].size() : 0);
    }
    std::string field = path.substr(1);
    for (char& c : field) c = c == '/' ? '.' : c;
    const std::string op = patch[i]["op"].get<std::string>();
    // The patch carries the new value of an add or replace; the old one is read from the file.
    const std::string before = op == "add" ? "absent" : file[nlohmann::json::json_pointer(path)].dump();
    const std::string after = op == "remove" ? "absent" : patch[i]["value"].dump();
    out += fmt::format("{}{}: {} in the file, {} now", out.empty() ? "" : "; ", field.empty() ? "inputs" : field, before, after);
  }
  if (patch.size() > most) out += fmt::format("; and {} more", patch.size() - most);
  return out;
}

}  // namespace cs::models
