#include "clustersim/validate/runner.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "clustersim/common/parts.hpp"
#include "clustersim/hardware/gemm_model.hpp"
#include "clustersim/models/serving_scenario.hpp"
#include "clustersim/models/collective_model.hpp"
#include "clustersim/models/plan_search.hpp"
#include "clustersim/models/training.hpp"
#include "clustersim/topology/topology_loader.hpp"

namespace cs::validate {

namespace {

// A case the models cannot run: reported, never silently skipped.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a case begins, for an error that is the case's own mistake.
SourceLocation case_location(const Case& c) { return SourceLocation{std::make_shared<const std::string>(c.file), c.line, 0}; }

// The shipped profiles and node templates, read once for all cases.
const std::vector<hardware::HardwareProfile>& shipped_profiles() {
  static const std::vector<hardware::HardwareProfile> profiles = [] {
    std::vector<hardware::HardwareProfile> out;
    IncludeStack includes;
    for (const auto& name : shipped_part_names("hardware")) out.push_back(hardware::load_hardware_profile(resolve_part(name, "hardware"), includes));
    return out;
  }();
  return profiles;
}

const std::vector<topology::NodeTemplate>& shipped_nodes() {
  static const std::vector<topology::NodeTemplate> nodes = [] {
    std::vector<topology::NodeTemplate> out;
    IncludeStack includes;
    for (const auto& name : shipped_part_names("nodes")) out.push_back(topology::load_node_file(resolve_part(name, "nodes"), includes));
    return out;
  }();
  return nodes;
}

// A profile given with --hardware replaces the shipped one of the same name, and says so among the
// case's defaults (a result had not shown that it came from another profile).
hardware::HardwareProfile profile_for(const std::string& gpu, const RunOptions& options, CaseResult& r) {
  for (const auto& hw : options.hardware) {
    if (hw.name == gpu) {
      r.defaults_applied.push_back(fmt::format("hardware profile {} (--hardware) in place of the shipped {}", hw.file.empty() ? hw.name : hw.file.string(), gpu));
      return hw;
    }
  }
  for (const auto& hw : shipped_profiles()) {
    if (hw.name == gpu) return hw;
  }
  throw Unsupported(fmt::format("no shipped hardware profile is named {}", gpu));
}

// The shipped node template of the case's GPU and node size, with its profile (--hardware's where
// given), named among the case's defaults.
topology::NodeTemplate node_for(const ClusterSpec& c, const RunOptions& options, CaseResult& r) {
  for (const auto& t : shipped_nodes()) {
    if (t.gpu.name == c.gpu && t.gpus() == c.gpus_per_node) {
      topology::NodeTemplate node = t;
      r.defaults_applied.push_back(fmt::format("node template {}", node.name));
      node.gpu = profile_for(c.gpu, options, r);
      // A profile given with --hardware replaces the template's own: its NVLink must carry the
      // template's links, as the template's loader requires (a 150 GB/s profile had run on 300 GB/s
      // links without a word).
      if (const auto over = topology::nvlink_excess(node, node.gpu)) {
        throw Unsupported(fmt::format("{}'s profile gives a GPU {} of NVLink per direction, but the node template's links carry at least {} to {}: give a "
                                      "node template whose links fit the profile, or a profile with the template's NVLink",
                                      node.gpu.name, to_string(node.gpu.nvlink->bandwidth), to_string(BytesPerSec(over->bytes_per_s)), over->device));
      }
      return node;
    }
  }
  throw Unsupported(fmt::format("no shipped node template holds {} x {}", c.gpus_per_node, c.gpu));
}

double error_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

void run_gemm(const Case& c, CaseResult& r, const RunOptions& options) {
  const auto hw = profile_for(c.cluster.gpu, options, r);
  const auto dtype = hardware::parse_dtype(c.gemm->dtype);
  if (!hw.supports(*dtype)) throw Unsupported(fmt::format("{} has no {} peak in its profile", hw.name, c.gemm->dtype));
  const auto e = hardware::estimate_gemm(hw, {c.gemm->m, c.gemm->n, c.gemm->k}, *dtype);
  r.predicted["tflops"] = e.achieved.value() / 1e12;
}

// The NVLink a case names (scale_up) must be the one its node template has: a case whose GPUs
// talk over another NVLink generation, or in a domain of another size, than the template's would be
// compared against a machine it did not run on. Each kind's generation and link count per GPU:
// A100 whitepaper (NVLink 3, 12 links), Hopper whitepaper (NVLink 4, 18 links), H800 (8 links, the
// hardware profile's derivation), Blackwell (NVLink 5, 18 links).
struct NvlinkKind {
  const char* name;
  int generation;
  int links;
};
constexpr NvlinkKind kNvlinkKinds[] = {{"nvlink3", 3, 12}, {"nvlink4", 4, 18}, {"nvlink4-h800", 4, 8}, {"nvlink5", 5, 18}};

// GPUs that the first GPU reaches over NVLink alone (directly or through NVSwitches).
int nvlink_domain_gpus(const topology::Topology& topo) {
  if (topo.gpus().empty()) return 0;
  const auto& g = topo.graph();
  std::vector<bool> seen(topo.device_count(), false);
  std::vector<topology::Vertex> frontier{topo.gpus().front()};
  seen[topo.gpus().front()] = true;
  int gpus = 0;
  while (!frontier.empty()) {
    const topology::Vertex v = frontier.back();
    frontier.pop_back();
    if (topo.device(v).kind == topology::DeviceKind::gpu) ++gpus;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
      const topology::Vertex t = boost::target(*e, g);
      const auto kind = topo.device(t).kind;
      if (topo.link(*e).kind != topology::LinkKind::nvlink || seen[t]) continue;
      if (kind != topology::DeviceKind::gpu && kind != topology::DeviceKind::nvswitch) continue;
      seen[t] = true;
      frontier.push_back(t);
    }
  }
  return gpus;
}

void check_scale_up(const ClusterSpec& cl, const topology::Topology& topo) {
  if (cl.scale_up_kind.empty() && cl.domain_gpus == 0) return;
  const hardware::HardwareProfile& hw = *topo.gpu;
  if (!cl.scale_up_kind.empty()) {
    const auto* kind = std::find_if(std::begin(kNvlinkKinds), std::end(kNvlinkKinds), [&](const NvlinkKind& k) { return cl.scale_up_kind == k.name; });
    const int generation = hw.nvlink ? hw.nvlink->generation : 0, links = hw.nvlink ? hw.nvlink->links : 0;
    if (kind != std::end(kNvlinkKinds) && (generation != kind->generation || links != kind->links)) {
      throw Unsupported(fmt::format("scale_up.kind {} is NVLink {} with {} links per GPU, but {}'s profile has {}: no shipped node template has {} on {}",
                                    kind->name, kind->generation, kind->links, hw.name,
                                    hw.nvlink ? fmt::format("NVLink {} with {} links", generation, links) : std::string("no NVLink"), kind->name, hw.name));
    }
  }
  if (cl.domain_gpus > 0) {
    const int domain = nvlink_domain_gpus(topo);
    if (domain != cl.domain_gpus) {
      throw Unsupported(fmt::format("scale_up.domain_gpus is {}, but the node template joins {} GPU{} over NVLink: no shipped node template has an NVLink domain of {} {}",
                                    cl.domain_gpus, domain, domain == 1 ? "" : "s", cl.domain_gpus, hw.name));
    }
  }
}

// A topology for a case's cluster: the shipped node template of that GPU with the case's GPUs per
// node, its NICs at the case's rate, and a non-blocking fat tree between the nodes.
topology::Topology build_cluster(const Case& c, CaseResult& r, const RunOptions& options) {
  const ClusterSpec& cl = c.cluster;
  topology::TopologySpec spec;
  spec.name = c.id;
  if (cl.gpus % cl.gpus_per_node != 0) {
    throw Unsupported(fmt::format("{} of a node's {} GPUs: clusters are built of whole nodes", cl.gpus, cl.gpus_per_node));
  }
  topology::NodeTemplate node = node_for(cl, options, r);
  const int nodes = cl.gpus / cl.gpus_per_node;
  spec.nodes = nodes;
  if (nodes > 1) {
    if (cl.fabric.empty()) {
      // The case leaves out what its own GPU count needs: its mistake (it had read "unsupported").
      throw InputError(case_location(c),
                       fmt::format("case {}: field 'cluster.scale_out': expected the fabric between the {} nodes of {} GPUs, found nothing (the key is missing)",
                                   c.id, nodes, cl.gpus));
    }
    // The case's per-GPU rate spread over the template's NIC ports.
    const int ports = node.nic_ports();
    if (ports == 0) throw Unsupported(fmt::format("node template {} has no NICs", node.name));
    for (auto& g : node.groups) {
      if (g.kind == topology::DeviceKind::nic) g.rate = BytesPerSec(cl.gbps_per_gpu * 1e9 / 8 * cl.gpus_per_node / ports);
    }
    spec.fabric.kind = topology::FabricKind::fat_tree;
    // EFA and RoCE are Ethernet; Omni-Path, like InfiniBand, routes by destination.
    spec.fabric.technology = cl.fabric == "roce" || cl.fabric == "efa" ? topology::Technology::roce : topology::Technology::infiniband;
    spec.fabric.technology_given = true;  // the case's own fabric, reported among its defaults as such
    const int leaves = (nodes * ports + 31) / 32;
    // A stated 3-tier Clos gets its third tier whatever the size (it had been read and dropped: a
    // 64-GPU case ran on 2 tiers either way); a fat tree takes the tiers its size needs.
    const bool three = leaves > 64 || cl.fabric_topology == "clos-3tier";
    spec.fabric.tiers = three ? std::vector<topology::TierSpec>{{64, 1.0}, {64, 1.0}, {64, 1.0}} : std::vector<topology::TierSpec>{{64, 1.0}, {64, 1.0}};
    r.defaults_applied.push_back(fmt::format("scale-out: non-blocking {}-tier {} of 64-port {} switches, {} Gb/s per GPU",
                                             spec.fabric.tiers.size(), cl.fabric_topology == "clos-3tier" ? "Clos (as stated)" : "fat tree", cl.fabric,
                                             cl.gbps_per_gpu));
    if (cl.fabric_assumed) r.defaults_applied.push_back("fabric assumed by the case (the source does not name it)");
  }
  spec.node = std::move(node);
  topology::Topology topo = topology::build_topology(spec);
  check_scale_up(cl, topo);
  return topo;
}

// Runs `body` for a result with status and reason: ok when it returns, unsupported or failed (with
// the message) when it throws.
template <class Result, class Body>
void guarded(Result& out, Body&& body) {
  try {
    body();
    out.status = "ok";
  } catch (const Unsupported& e) {
    out.status = "unsupported";
    out.reason = e.what();
  } catch (const InputError&) {
    throw;  // a mistake in the case (an impossible plan it states): exit 2 naming it, not a result
  } catch (const std::exception& e) {
    out.status = "failed";
    out.reason = e.what();
  }
}

// Megatron-DeepSpeed had no Megatron sequence parallelism until its 2023 rebase, and DeepSpeed's
// pipeline engine, which splits a stage's activations over TP before sending them, could not carry
// sequence-split ones (Megatron-DeepSpeed issues #148 and #170, 2023): a source naming DeepSpeed and
// dated before 2024 ran without it.
bool deepspeed_without_sp(const Case& c) {
  const int year = earliest_year(c.source);
  return names_deepspeed(c.source) && year != 0 && year < 2024;
}
// A case that leaves sequence parallelism unknown at TP > 1 whose software could not have run it:
// off, with nothing else to try.
bool sequence_parallel_fixed_off(const Case& c) {
  return c.training->sequence_parallel == "unknown" && c.training->tp > 1 && deepspeed_without_sp(c);
}

// Megatron-LM's and NeMo's usual settings stand in for what a source does not state
// (docs/training.md, "Defaults for unknown settings").
models::TrainingJob training_job(const Case& c, CaseResult& r) {
  const TrainingSpec& t = *c.training;
  models::TrainingJob job;
  job.model = t.model;
  models::ParallelismPlan& p = job.plan;
  if (!t.not_given.empty()) {
    // Keys the case leaves out (the format lists them all): said, where they had been taken unsaid.
    r.defaults_applied.push_back(fmt::format("not given in the case, so read as 1 (a parallel degree) or unknown: {}", fmt::join(t.not_given, ", ")));
  }
  p.tp = t.tp;
  p.pp = t.pp;
  p.dp = t.dp;
  p.cp = t.cp;
  p.ep = t.ep;
  if (p.ep > 1) {
    // The format does not say how experts sit on the ranks; the one layout modelled is named.
    r.defaults_applied.push_back("experts: MoE parallel folding (expert TP 1, EP groups of consecutive ranks; Megatron-Core 0.10 on)");
  }
  if (t.vpp) {
    p.vpp = *t.vpp;
  } else if (t.pp > 1) {
    r.defaults_applied.push_back("vpp unknown: 1 (plain 1F1B)");
  }
  p.schedule = p.vpp > 1 ? models::PipelineSchedule::interleaved : models::PipelineSchedule::one_f_one_b;
  if (t.zero_stage) {
    p.zero_stage = *t.zero_stage;
  } else {
    p.zero_stage = 1;
    r.defaults_applied.push_back("zero_stage unknown: 1 (distributed optimizer)");
  }
  if (t.sequence_parallel == "true" || t.sequence_parallel == "implied") {
    p.sequence_parallel = true;
  } else if (t.sequence_parallel == "false") {
    p.sequence_parallel = false;
  } else if (sequence_parallel_fixed_off(c)) {
    p.sequence_parallel = false;
    r.defaults_applied.push_back("sequence_parallel unknown: off (the source names DeepSpeed, whose pipeline engine ran without Megatron's sequence parallelism before 2024)");
  } else {
    p.sequence_parallel = t.tp > 1;
    if (t.tp > 1) r.defaults_applied.push_back("sequence_parallel unknown: on");
  }
  if (t.micro_batch) {
    job.micro_batch = *t.micro_batch;
  } else {
    job.micro_batch = 1;
    r.defaults_applied.push_back("micro batch unknown: 1");
  }
  job.global_batch = t.global_batch;
  // The format does not say whether the input embedding and the output layer share their weights.
  // Every source in it trained a GPT-style model with Megatron, NeMo, Megatron-DeepSpeed or
  // MosaicML's LLM Foundry, which all share them unless told otherwise (Megatron's
  // --untie-embeddings-and-output-weights is opt-in; NeMo's share_embeddings_and_output_weights
  // and MPT's tie_word_embeddings default to true).
  job.model.tied_embeddings = true;
  r.defaults_applied.push_back("embeddings unknown: tied (Megatron's, NeMo's, Megatron-DeepSpeed's and LLM Foundry's default)");
  if (t.recompute == "unknown") {
    job.recompute = models::Recompute::selective;  // settled in run_training: the least that fits
  } else {
    job.recompute = t.recompute == "none" ? models::Recompute::none : t.recompute == "full" ? models::Recompute::full : models::Recompute::selective;
  }
  job.precision = t.precision == "fp16" ? hardware::Dtype::fp16 : t.precision == "bf16" ? hardware::Dtype::bf16 : hardware::Dtype::fp8;
  if (t.precision == "mxfp8") r.defaults_applied.push_back("mxfp8 timed as fp8");
  return job;
}

}  // namespace

int earliest_year(const std::string& text) {
  int best = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    // A group with a decimal part on either side is no year: an arXiv id (2010.04473 is October
    // 2020's, not 2010) or a version number.
    const auto digit_at = [&](std::size_t k) { return k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])); };
    const bool decimal = (j < text.size() && text[j] == '.' && digit_at(j + 1)) || (i >= 2 && text[i - 1] == '.' && digit_at(i - 2));
    if (j - i == 4 && !decimal) {
      const int y = std::stoi(text.substr(i, 4));
      if (y >= 1990 && y <= 2099 && (best == 0 || y < best)) best = y;
    }
    i = j;
  }
  return best;
}

bool names_deepspeed(const std::string& source) {
  std::string lower = source;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return lower.find("deepspeed") != std::string::npos;
}

namespace {

// A software setting a run has from the year `since` on (and when its source is undated) and not
// before, unless the command line asked for one; `history` says what came in `since`.
SoftwareChoice by_date(const std::optional<bool>& asked, int year, int since, const char* setting, const char* on, const char* off, const char* history) {
  if (asked) return {*asked, fmt::format("{}: {} (as asked)", setting, *asked ? on : off)};
  if (year == 0) return {true, fmt::format("{} unknown: {} (the source gives no year)", setting, on)};
  if (year < since) return {false, fmt::format("{} unknown: {} (the source, {}, predates {}, {})", setting, off, year, history, since)};
  return {true, fmt::format("{} unknown: {} (the source is from {})", setting, on, year)};
}

}  // namespace

SoftwareChoice attention_kernel(const Case& c, const RunOptions& options) {
  return by_date(options.flash_attention, earliest_year(c.source), 2023, "attention kernel", "flash", "unfused", "FlashAttention in Megatron-LM and NeMo");
}

SoftwareChoice tp_overlap(const Case& c, bool sequence_parallel, const RunOptions& options) {
  if (!sequence_parallel) return {false, ""};
  return by_date(options.tp_overlap, earliest_year(c.source), 2024, "TP overlap", "on", "off", "Megatron-Core's runs with --tp-comm-overlap");
}

namespace {

// Megatron-Core overlaps pipeline sends with compute for the interleaved schedule since 2023 (unset:
// its behaviour for whichever schedule a searched plan has); before, a stage waited for its sends
// (batch_isend_irecv + wait), and for plain 1F1B it still does. Sets the plan's overlap_p2p.
SoftwareChoice pipeline_send_overlap(const Case& c, models::ParallelismPlan& plan) {
  const bool interleaved = plan.schedule == models::PipelineSchedule::interleaved;
  SoftwareChoice p2p = by_date(std::nullopt, earliest_year(c.source), 2023, "pipeline send overlap", interleaved ? "on" : "off (1F1B)", "off",
                               "Megatron-Core's --overlap-p2p-communication");
  plan.overlap_p2p = p2p.value ? std::nullopt : std::optional<bool>(false);
  return p2p;
}

// What the validation format does not carry about the software that ran a case: the attention
// kernel, TP communication overlap and DP communication overlap, from the source's date
// (docs/training.md, "Defaults for unknown settings").
void software_defaults(const Case& c, models::TrainingJob& job, CaseResult& r, const RunOptions& options) {
  const SoftwareChoice attention = attention_kernel(c, options);
  job.plan.flash_attention = attention.value;
  r.defaults_applied.push_back(attention.note);
  const SoftwareChoice overlap = tp_overlap(c, job.plan.sequence_parallel && job.plan.tp > 1, options);
  job.plan.tp_overlap = overlap.value;
  if (!overlap.note.empty()) r.defaults_applied.push_back(overlap.note);
  {
    const SoftwareChoice p2p = pipeline_send_overlap(c, job.plan);
    if (job.plan.pp > 1) r.defaults_applied.push_back(p2p.note);
  }
  if (names_deepspeed(c.source)) {
    // DeepSpeed's engines add each micro-batch's 16-bit weight gradients into fp32 buffers in a pass
    // of their own (BF16_Optimizer's update_hp_grads; the fp16 engine's hooks): never fused.
    job.plan.grad_accumulation_fusion = false;
    r.defaults_applied.push_back("gradient accumulation fusion unknown: off (the source names DeepSpeed, whose optimizers accumulate gradients in a pass of their own)");
    const int year = earliest_year(c.source);
    if (job.plan.pp > 1 && job.plan.zero_stage == 1 && job.plan.dp * job.plan.cp > 1 && job.precision == hardware::Dtype::bf16 && year >= 2022) {
      // bf16 with pipeline parallelism runs DeepSpeed's BF16_Optimizer (DeepSpeed PR 1801, 2022,
      // written for BLOOM): the engine all-reduces its whole fp32 gradients
      // (allreduce_gradients over get_grads_for_reduction), then each rank updates its shard.
      job.plan.all_reduce_gradients = true;
      r.defaults_applied.push_back(fmt::format(
          "gradient reduction: all-reduce of the whole fp32 gradients (the source, {}, names DeepSpeed, whose bf16 pipeline engine runs BF16_Optimizer)", year));
    }
  } else {
    const SoftwareChoice fusion = by_date(std::nullopt, earliest_year(c.source), 2022, "gradient accumulation fusion", "on", "off",
                                          "fused weight-gradient accumulation in Apex and Megatron-LM");
    job.plan.grad_accumulation_fusion = fusion.value;
    r.defaults_applied.push_back(fusion.note);
  }
  if (models::dp_overlap_applies(job)) {  // (ZeRO-3 always overlaps: no default to take there)
    // Megatron-LM's local DDP (2021-22) all-reduced the gradients after the last micro-batch's
    // backward, and DeepSpeed's pipeline engine reduced them after the whole batch: neither
    // overlapped. Megatron-Core's --overlap-grad-reduce and --overlap-param-gather came in 2023.
    const SoftwareChoice dp = by_date(std::nullopt, earliest_year(c.source), 2023, "DP overlap", "on", "off", "Megatron-Core's overlapped gradient reduction");
    job.plan.overlap_grad_reduce = dp.value;
    job.plan.overlap_param_gather = dp.value;
    r.defaults_applied.push_back(dp.note);
  }
}

// An unknown recompute mode: the published run fitted in memory, so the least recompute with which
// the job does (full when none fits: the memory check then reports the overflow).
void least_recompute_that_fits(models::TrainingJob& job, const topology::Topology& topo) {
  for (models::Recompute mode : {models::Recompute::none, models::Recompute::selective, models::Recompute::full}) {
    job.recompute = mode;
    if (models::estimate_memory(job, *topo.gpu).fits()) break;
  }
}

// A training case's cluster and its job with every default applied.
struct PreparedTraining {
  topology::Topology topo;
  models::TrainingJob job;
};

PreparedTraining prepare_training(const Case& c, CaseResult& r, const RunOptions& options) {
  // A published run used its whole cluster: a plan for another GPU count is a mistake in the case.
  const TrainingSpec& q = *c.training;
  const std::int64_t plan_gpus = std::int64_t{q.tp} * q.pp * q.dp * q.cp;
  if (plan_gpus != c.cluster.gpus) {
    throw std::runtime_error(fmt::format("the plan's tp x pp x dp x cp = {} x {} x {} x {} = {} GPUs, but the case's cluster has {}", q.tp, q.pp, q.dp, q.cp,
                                         plan_gpus, c.cluster.gpus));
  }
  PreparedTraining p{build_cluster(c, r, options), training_job(c, r)};
  // MXFP8 (the OCP microscaling format) runs on Blackwell's tensor cores only; it is timed as fp8
  // there, and a case that names it on an earlier GPU is a mistake in the case.
  if (q.precision == "mxfp8" && p.topo.gpu && p.topo.gpu->architecture != "blackwell") {
    throw Unsupported(fmt::format("precision mxfp8 needs Blackwell tensor cores; {} is {}", p.topo.gpu->name, p.topo.gpu->architecture));
  }
  // A precision the GPU has no peak for is unsupported, as for GEMM and serving cases (it had
  // counted as failed for training cases only).
  if (p.topo.gpu && !p.topo.gpu->supports(p.job.precision)) {
    throw Unsupported(fmt::format("precision {}: the {} profile has no {} peak", q.precision, p.topo.gpu->name, hardware::to_string(p.job.precision)));
  }
  software_defaults(c, p.job, r, options);
  try {
    models::check_job(p.job, static_cast<int>(p.topo.gpus().size()), p.topo.gpu.get());
  } catch (const models::PlanError& e) {
    // A clash of settings the case states (tp not dividing the heads, vpp at pp 1) is a mistake in
    // the case, refused at its line as a scenario's is; one a default or an option caused (a software
    // setting read from the source's date, --attention unfused with cp > 1) is what the simulator
    // cannot run: unsupported. Told apart by the plan at the most permissive software settings: a
    // clash it still has, blamed on a setting the case states, is the case's. Until 2026-12-07 both
    // read "unsupported", exit 0.
    models::TrainingJob permissive = p.job;
    permissive.plan.flash_attention = true;
    permissive.plan.tp_overlap = false;
    permissive.plan.overlap_p2p = std::nullopt;
    permissive.plan.grad_accumulation_fusion = true;
    permissive.plan.all_reduce_gradients = false;
    permissive.plan.overlap_grad_reduce = permissive.plan.overlap_param_gather = true;
    try {
      models::check_job(permissive, static_cast<int>(p.topo.gpus().size()), p.topo.gpu.get());
    } catch (const models::PlanError& own) {
      const std::string& f = own.field;
      const bool stated = f == "parallelism.tp" || f == "parallelism.pp" || f == "parallelism.dp" || f == "parallelism.cp" || f == "parallelism.ep" ||
                          f == "batch.global" || f == "precision" || f.starts_with("model") || (f == "parallelism.vpp" && q.vpp) ||
                          (f == "batch.micro" && q.micro_batch) || (f == "parallelism.zero_stage" && q.zero_stage) ||
                          (f == "parallelism.sequence_parallel" && q.sequence_parallel != "unknown") || (f == "recompute" && q.recompute != "unknown");
      if (stated) {
        throw InputError(case_location(c),
                         fmt::format("case {}: field '{}': impossible plan: {}", c.id, f, own.what()));
      }
    }
    throw Unsupported(e.what());
  } catch (const std::invalid_argument& e) {
    throw Unsupported(e.what());
  }
  if (c.training->recompute == "unknown") {
    least_recompute_that_fits(p.job, p.topo);
    r.defaults_applied.push_back(fmt::format("recompute unknown: {} (the least that fits in memory)", models::to_string(p.job.recompute)));
  }
  return p;
}

void run_training(const Case& c, CaseResult& r, const RunOptions& options) {
  const PreparedTraining prepared = prepare_training(c, r, options);
  const models::TrainingJob& job = prepared.job;
  const models::TrainingResult result = models::simulate_training(job, prepared.topo);
  if (!result.memory.fits()) throw std::runtime_error(result.memory.verdict());
  r.predicted["step_time_s"] = result.step_time.value();
  r.predicted["tokens_per_s_per_gpu"] = result.tokens_per_s / result.gpus;
  r.predicted["tflops_per_gpu"] = result.tflops_per_gpu;
  r.predicted["mfu"] = result.mfu;
  r.breakdown = models::breakdown_parts(result.breakdown);
}

void run_collective(const Case& c, CaseResult& r, const RunOptions& options) {
  const topology::Topology topo = build_cluster(c, r, options);
  const models::CollectiveModel model(topo);
  models::Collective col;
  col.op = *models::parse_collective_op(c.collective->op);
  col.ranks = topo.gpus();
  col.bytes = Bytes(c.collective->bytes);
  if (!c.collective->algorithm.empty()) col.algorithm = models::parse_algorithm(c.collective->algorithm);
  models::CollectiveResult result;
  try {
    result = model.simulate(col);
  } catch (const std::invalid_argument& e) {
    throw Unsupported(e.what());
  }
  if (c.collective->algorithm.empty()) {
    r.defaults_applied.push_back(fmt::format("algorithm: NCCL's cost model chose {}/{}", to_string(result.plan.algorithm),
                                             to_string(result.plan.protocol)));
  }
  r.predicted["busbw_GBps"] = result.busbw.value() / 1e9;
}

}  // namespace

std::string primary_metric(const std::string& kind) {
  if (kind == "training") return "step_time_s";
  if (kind == "inference") return "output_tokens_per_s";
  if (kind == "gemm") return "tflops";
  return "busbw_GBps";
}

// Engine defaults where a case does not give the scheduler's limits (docs/serving.md "Validation").
// vLLM V1: max_num_seqs 256, max_num_batched_tokens 8192 with chunked prefill (vLLM engine
// arguments). TensorRT-LLM: assumption, max batch size 2048 and max num tokens 8192 (trtllm-build's
// defaults as its docs list them). SGLang: assumption, vLLM's limits.
void run_inference(const Case& c, CaseResult& r, const RunOptions& options) {
  const InferenceSpec& s = *c.inference;
  // The replicas need only their GPUs, but clusters are built of whole nodes: round up to them.
  Case whole = c;
  const int per_node = std::max(1, c.cluster.gpus_per_node);
  whole.cluster.gpus = (c.cluster.gpus + per_node - 1) / per_node * per_node;
  const topology::Topology topo = build_cluster(whole, r, options);
  auto shared = std::make_shared<const topology::Topology>(topo);
  // What `run` refuses in a scenario is a mistake in the case too.
  const std::int64_t serving_gpus = std::int64_t{s.replicas} * s.tp * s.pp;
  if (serving_gpus < c.cluster.gpus) {
    // Said, not refused: a serving benchmark names the machine it ran on, whose other GPUs idled.
    r.defaults_applied.push_back(fmt::format("the serving plan ({} replica{} of TP {} x PP {}) uses {} of the cluster's {} GPUs", s.replicas,
                                             s.replicas == 1 ? "" : "s", s.tp, s.pp, serving_gpus, c.cluster.gpus));
  }
  if (serving_gpus > c.cluster.gpus) {
    throw std::runtime_error(fmt::format("{} replicas of TP {} x PP {} need {} GPUs, but the case's cluster has {}", s.replicas, s.tp, s.pp, serving_gpus,
                                         c.cluster.gpus));
  }
  if (const std::string why = models::tp_split_problem(c.training->model, s.tp); !why.empty()) {
    throw std::runtime_error(fmt::format("TP {} does not split the attention heads evenly ({})", s.tp, why));
  }
  if (!topo.gpu->supports(*hardware::parse_dtype(s.weights))) {
    throw Unsupported(fmt::format("{} weights: the {} profile has no {} peak", s.weights, topo.gpu->name, s.weights));
  }
  // A case's model may give its context length; a request longer than it is no run of that model.
  const std::int64_t longest = std::int64_t{s.input_tokens} + s.output_tokens;
  if (c.training->model.seq_len > 0 && longest > c.training->model.seq_len) {
    throw std::runtime_error(fmt::format("input + output = {} tokens, longer than the model's seq_len of {}", longest, c.training->model.seq_len));
  }
  models::InferenceScenario sc;
  sc.name = c.id;
  sc.topology = shared;
  sc.replicas = s.replicas;
  models::ReplicaConfig& rc = sc.replica;
  rc.model = c.training->model;
  rc.tp = s.tp;
  rc.pp = s.pp;
  rc.weights = *hardware::parse_dtype(s.weights);
  std::string kv = s.kv_cache;
  if (kv == "unknown") {
    kv = "fp16";
    r.defaults_applied.push_back("kv_cache: 16-bit (the engines' default)");
  }
  rc.kv_bytes_per_element = kv == "fp8" ? 1.0 : 2.0;
  // The benchmark's sequences are its longest: trtllm-bench builds its engine with max_seq_len =
  // input + output of the dataset, and a benchmark server needs no longer context.
  rc.max_model_len = s.input_tokens + s.output_tokens;
  r.defaults_applied.push_back(fmt::format("max_model_len: {} (input + output)", rc.max_model_len));
  if (s.engine == "tensorrt-llm") {
    rc.max_num_seqs = 2048;
    rc.reserve_full_kv = true;
    r.defaults_applied.push_back("TensorRT-LLM: max batch 2048, max num tokens 8192 (assumed), KV reserved per request (GUARANTEED_NO_EVICT)");
    // TensorRT-LLM's PyTorch backend (its default since 1.0) runs scheduling, input preparation and
    // sampling post-processing on one Python thread one step ahead of the GPU; on steady decode it
    // exposes about 580 us per iteration as GPU idle (NVIDIA/TensorRT-LLM issue #13957, Llama 3.1 8B
    // FP8, measured on B200: a host-side cost, taken as the same on H100).
    rc.iteration_overhead = Seconds(580e-6);
    r.defaults_applied.push_back("TensorRT-LLM PyTorch backend: 580 us of host work exposed per iteration (TensorRT-LLM issue #13957)");
  } else {
    r.defaults_applied.push_back(fmt::format("{} limits: max_num_seqs 256, max_num_batched_tokens 8192; no per-iteration host overhead (no sourced figure)", s.engine));
  }
  if (rc.tp > 1) rc.all_reduce_seconds = models::tp_all_reduce_seconds(shared, rc.tp);
  if (rc.pp > 1) rc.pp_send_seconds = models::pp_send_seconds(shared, rc.tp, rc.pp);
  // Offline and closed-loop load: enough requests for the batch to fill and drain many times.
  const int count = s.arrival == "poisson" ? std::max(1000, static_cast<int>(s.rate_rps * 120)) : std::max(2000, 8 * rc.max_num_seqs);
  const models::LengthDistribution in{models::LengthDistribution::Kind::fixed, double(s.input_tokens), 0, {}};
  const models::LengthDistribution out{models::LengthDistribution::Kind::fixed, double(s.output_tokens), 0, {}};
  models::ArrivalProcess p;
  p.kind = s.arrival == "poisson" ? models::ArrivalProcess::Kind::poisson : models::ArrivalProcess::Kind::offline;
  p.rate = s.rate_rps > 0 ? s.rate_rps : 1;
  sc.requests = models::generate_requests(count, p, in, out, 1);
  if (s.arrival == "closed-loop") sc.closed_loop = models::ClosedLoop{s.concurrency};
  r.defaults_applied.push_back(fmt::format("{} requests", count));
  try {
    const models::InferenceResult res = models::simulate_inference(sc);
    r.predicted["output_tokens_per_s"] = res.metrics.output_throughput;
    r.predicted["ttft_ms_mean"] = res.metrics.ttft.mean * 1e3;
    r.predicted["itl_ms_mean"] = res.metrics.itl.mean * 1e3;
  } catch (const std::invalid_argument& e) {
    throw Unsupported(e.what());
  }
}

PlanComparison compare_plans(const Case& c, const RunOptions& options, std::function<void(std::size_t, std::size_t)> progress,
                             bool exhaustive) {
  PlanComparison out;
  out.id = c.id;
  guarded(out, [&] {
    if (c.kind != "training") throw Unsupported("not a training case");
    CaseResult r;
    const PreparedTraining prepared = prepare_training(c, r, options);
    const topology::Topology& topo = prepared.topo;
    const models::TrainingJob& job = prepared.job;
    models::SearchSpace space = models::default_space(job, topo);
    space.uneven_layers = true;  // the published plans split layers as the code allowed
    if (std::find(space.recompute.begin(), space.recompute.end(), job.recompute) == space.recompute.end()) space.recompute.push_back(job.recompute);
    if (!job.plan.sequence_parallel) space.sequence_parallel = {false, true};
    // Only the fastest plan is wanted: branch and bound with K = 1 skips the plans whose lower
    // bound already loses to it (the same best as a full search; the published plan is always
    // simulated).
    models::SearchOptions search;
    search.bound = !exhaustive;
    search.keep = 1;
    search.progress = std::move(progress);
    const models::SearchResult sr = models::search_plans(job, topo, space, search);
    out.pruned = sr.bound;
    const models::PlanOutcome* best = nullptr;
    const models::PlanOutcome* published = nullptr;
    const std::string own = models::plan_key(job);
    for (const auto& o : sr.outcomes) {
      const bool mine = sr.key(o) == own;
      if (mine && o.status != models::PlanOutcome::Status::simulated) throw Unsupported("the published plan is rejected here: " + sr.reason(o));
      if (o.status != models::PlanOutcome::Status::simulated) continue;
      ++out.simulated;
      if (!best || o.step_s < best->step_s) best = &o;
      if (mine) published = &o;
    }
    out.published_plan = models::plan_text(job);
    if (!published) throw Unsupported("the published plan is not in the searched space");
    out.published_step_s = published->step_s;
    out.best_plan = models::plan_text(sr.job(*best));
    out.best_step_s = best->step_s;
    if (best != published) {
      // The parts of the step that differ most between the two plans.
      const auto& a = published->breakdown;
      const auto& b = best->breakdown;
      const std::vector<std::pair<std::string, double>> deltas{{"compute", b.compute - a.compute},
                                                               {"exposed TP/CP/EP communication", (b.tp_comm + b.cp_comm + b.ep_comm) - (a.tp_comm + a.cp_comm + a.ep_comm)},
                                                               {"exposed DP communication", b.dp_comm - a.dp_comm},
                                                               {"pipeline bubble and sends", (b.bubble + b.pp_comm) - (a.bubble + a.pp_comm)},
                                                               {"optimizer", b.optimizer - a.optimizer}};
      std::string why;
      for (const auto& [part, d] : deltas) {
        if (std::abs(d) >= 0.01 * published->step_s) why += fmt::format("{}{} {:+.3g} s", why.empty() ? "" : ", ", part, d);
      }
      out.why = why.empty() ? "differences under 1% of the step in every part" : why;
    }
  });
  return out;
}

namespace {

// The values a plan setting the case leaves unknown could have had, besides its default, as job edits.
// The software settings validate reads from the source's date (attention kernel, TP, DP and
// pipeline-send overlap, gradient accumulation fusion) are not varied: each follows from what the
// software could do at the time, and --attention and --tp-overlap flip them for every case.
struct Edit {
  std::string setting;
  std::string value;
  std::function<void(models::TrainingJob&)> apply;
  bool keeps_recompute = false;  // the edit sets the recompute mode itself
};

std::vector<Edit> unknown_settings(const Case& c, const models::TrainingJob& job, const RunOptions& options) {
  const TrainingSpec& t = *c.training;
  const models::ParallelismPlan& p = job.plan;
  std::vector<Edit> out;
  if (!t.micro_batch) {
    // Micro-batches of up to 8 sequences that divide a replica's share of the batch.
    const int per_replica = t.global_batch / std::max(1, t.dp);
    for (int m = 2; m <= std::min(8, per_replica); ++m) {
      if (per_replica % m == 0) out.push_back({"micro batch", std::to_string(m), [m](models::TrainingJob& j) { j.micro_batch = m; }});
    }
  }
  if (!t.vpp && t.pp > 1) {
    // Every interleaving depth that splits a stage's layers evenly, down to one layer a chunk: Megatron
    // takes any --num-layers-per-virtual-pipeline-stage that divides them (check_job drops the rest,
    // such as a batch whose micro-batches do not divide by pp).
    const int layers_per_stage = t.model.layers / t.pp;
    for (int v = 2; t.model.layers % t.pp == 0 && v <= layers_per_stage; ++v) {
      if (layers_per_stage % v != 0) continue;
      out.push_back({"vpp", std::to_string(v), [v, &c](models::TrainingJob& j) {
                       j.plan.vpp = v;
                       j.plan.schedule = models::PipelineSchedule::interleaved;
                       pipeline_send_overlap(c, j.plan);
                     }});
    }
  }
  if (!t.zero_stage && models::reduces_gradients(job)) {
    out.push_back({"zero_stage", "0", [](models::TrainingJob& j) {
                     j.plan.zero_stage = 0;
                     j.plan.all_reduce_gradients = false;
                   }});
  }
  // Not for DeepSpeed before 2024, whose pipeline engine could not run it (the default's reason).
  if (t.sequence_parallel == "unknown" && t.tp > 1 && !sequence_parallel_fixed_off(c)) {
    const bool sp = !p.sequence_parallel;
    out.push_back({"sequence_parallel", sp ? "on" : "off", [sp, &c, &options](models::TrainingJob& j) {
                     j.plan.sequence_parallel = sp;
                     j.plan.tp_overlap = tp_overlap(c, sp, options).value;
                   }});
  }
  if (t.recompute == "unknown") {
    for (models::Recompute mode : {models::Recompute::none, models::Recompute::selective, models::Recompute::full}) {
      if (mode != job.recompute) out.push_back({"recompute", std::string(models::to_string(mode)), [mode](models::TrainingJob& j) { j.recompute = mode; }, true});
    }
  }
  return out;
}

}  // namespace

Sensitivity sensitivity(const Case& c, const RunOptions& options, bool pairs) {
  Sensitivity out;
  out.id = c.id;
  guarded(out, [&] {
    if (c.kind != "training") throw Unsupported("not a training case");
    const auto measured = c.measured.find("step_time_s");
    if (measured == c.measured.end()) throw std::runtime_error("the case has no measured step_time_s");
    out.measured_s = measured->second;
    CaseResult r;
    const PreparedTraining prepared = prepare_training(c, r, options);
    const int gpus = static_cast<int>(prepared.topo.gpus().size());
    const models::TrainingResult base = models::simulate_training(prepared.job, prepared.topo);
    if (!base.memory.fits()) throw std::runtime_error(base.memory.verdict());
    out.default_s = out.low_s = out.high_s = base.step_time.value();
    out.default_error_pct = error_pct(out.default_s, out.measured_s);
    // The default's job with these edits; alternatives the software could not have run are left out.
    const auto try_edits = [&](const std::vector<const Edit*>& chosen) {
      models::TrainingJob job = prepared.job;
      bool keeps_recompute = false;
      for (const Edit* e : chosen) {
        e->apply(job);
        keeps_recompute = keeps_recompute || e->keeps_recompute;
      }
      Alternative a{chosen[0]->setting, chosen[0]->value, "", "", "ok", "", 0, 0};
      std::string label = a.setting + " " + a.value;
      if (chosen.size() > 1) {
        a.with_setting = chosen[1]->setting;
        a.with_value = chosen[1]->value;
        label += " + " + a.with_setting + " " + a.with_value;
      }
      try {
        models::check_job(job, gpus);
      } catch (const std::invalid_argument& e) {
        // Not a plan the software could have run (an uneven split, a batch that does not divide):
        // left out of the range, said among the untried (one setting at a time only: pairs of them
        // are many).
        if (chosen.size() == 1) out.untried.push_back(fmt::format("{} ({})", label, e.what()));
        return;
      }
      // With the recompute mode unknown, each alternative takes the least that fits, as the default does.
      if (c.training->recompute == "unknown" && !keeps_recompute) least_recompute_that_fits(job, prepared.topo);
      const models::MemoryReport memory = models::estimate_memory(job, *prepared.topo.gpu);
      if (!memory.fits()) {
        a.status = "does not fit";
        a.reason = memory.verdict();
      } else {
        a.step_s = models::simulate_training(job, prepared.topo).step_time.value();
        a.error_pct = error_pct(a.step_s, out.measured_s);
        if (a.step_s < out.low_s) {
          out.low_s = a.step_s;
          out.low_at = label;
        }
        if (a.step_s > out.high_s) {
          out.high_s = a.step_s;
          out.high_at = label;
        }
      }
      out.alternatives.push_back(std::move(a));
    };
    const std::vector<Edit> edits = unknown_settings(c, prepared.job, options);
    if (sequence_parallel_fixed_off(c)) {
      out.untried.push_back("sequence_parallel on (DeepSpeed's pipeline engine ran without it before 2024)");
    }
    for (const Edit& e : edits) try_edits({&e});
    if (pairs) {
      for (std::size_t i = 0; i < edits.size(); ++i) {
        for (std::size_t j = i + 1; j < edits.size(); ++j) {
          if (edits[i].setting != edits[j].setting) try_edits({&edits[i], &edits[j]});
        }
      }
    }
  });
  return out;
}

CaseResult run_case(const Case& c, const RunOptions& options) {
  CaseResult r;
  r.id = c.id;
  r.kind = c.kind;
  r.primary_metric = primary_metric(c.kind);
  // A serving case may publish only its latencies (the file format lists ttft_ms_mean and
  // itl_ms_mean beside the throughput): then the first of them it gives is its metric.
  if (c.kind == "inference" && !c.measured.count(r.primary_metric)) {
    for (const char* latency : {"ttft_ms_mean", "itl_ms_mean"}) {
      if (c.measured.count(latency)) {
        r.primary_metric = latency;
        break;
      }
    }
  }
  r.measured = c.measured;
  try {
    if (c.kind == "gemm") {
      run_gemm(c, r, options);
    } else if (c.kind == "collective") {
      run_collective(c, r, options);
    } else if (c.kind == "training") {
      run_training(c, r, options);
    } else if (c.kind == "inference") {
      run_inference(c, r, options);
    } else {
      throw Unsupported(fmt::format("{} cases need the {} model, which clustersim does not have yet", c.kind,
                                    c.kind == "training" ? "training-step" : "serving"));
    }
  } catch (const Unsupported& e) {
    r.status = "unsupported";
    r.reason = e.what();
    r.predicted.clear();
    return r;
  } catch (const InputError&) {
    throw;  // a mistake in the case itself: exit 2 naming it
  } catch (const std::exception& e) {
    r.status = "failed";
    r.reason = e.what();
    r.predicted.clear();
    return r;
  }
  auto measured = c.measured.find(r.primary_metric);
  if (measured == c.measured.end()) {
    r.status = "failed";
    r.reason = fmt::format("the case has no measured {}", r.primary_metric);
    return r;
  }
  r.status = "ok";
  for (const auto& [key, value] : r.predicted) {
    if (auto m = c.measured.find(key); m != c.measured.end()) r.errors_pct[key] = error_pct(value, m->second);
  }
  r.error_pct = r.errors_pct.at(r.primary_metric);
  return r;
}

std::map<std::string, KindSummary> summarize(const std::vector<CaseResult>& results) {
  std::map<std::string, KindSummary> out;
  for (const auto& r : results) {
    KindSummary& s = out[r.kind];
    ++s.cases;
    if (r.status == "ok") {
      ++s.ok;
      s.mape_pct += std::fabs(r.error_pct);
      s.max_abs_error_pct = std::max(s.max_abs_error_pct, std::fabs(r.error_pct));
    } else if (r.status == "unsupported") {
      ++s.unsupported;
    } else {
      ++s.failed;
    }
  }
  for (auto& [kind, s] : out) {
    if (s.ok > 0) s.mape_pct /= s.ok;
  }
  return out;
}

}  // namespace cs::validate
