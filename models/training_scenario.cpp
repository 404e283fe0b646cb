#include "clustersim/models/training_scenario.hpp"

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "plan_fingerprint.hpp"

namespace cs::models {

namespace {

// A rank order: tp, cp, ep, dp and pp joined by '-', fastest-varying first.
std::vector<ParallelDim> parse_order(const yaml::Node& order) {
  const std::string text = order.scalar("a rank order such as tp-cp-ep-dp-pp");
  std::vector<ParallelDim> dims;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, '-')) {
    if (part == "tp") dims.push_back(ParallelDim::tp);
    else if (part == "cp") dims.push_back(ParallelDim::cp);
    else if (part == "ep") dims.push_back(ParallelDim::ep);
    else if (part == "dp") dims.push_back(ParallelDim::dp);
    else if (part == "pp") dims.push_back(ParallelDim::pp);
    else order.fail("tp, cp, ep, dp and pp joined by '-', fastest-varying first (Megatron's tp-cp-ep-dp-pp)", "'" + text + "'");
  }
  if (!is_rank_order(dims)) order.fail("each of tp, cp, ep, dp and pp exactly once", "'" + text + "'");
  return dims;
}

}  // namespace

void read_parallelism(const yaml::Node& node, ParallelismPlan& p) {
  yaml::Map m(node);
  const auto positive = yaml::positive<int>();
  p.tp = m.get_or<int>("tp", 1, positive);
  p.pp = m.get_or<int>("pp", 1, positive);
  p.dp = m.get_or<int>("dp", 1, positive);
  p.cp = m.get_or<int>("cp", 1, positive);
  p.ep = m.get_or<int>("ep", 1, positive);
  p.etp = m.get_or<int>("etp", 1, positive);
  p.vpp = m.get_or<int>("vpp", 1, positive);
  if (p.vpp > 1 && p.pp == 1) m.at("vpp", "").fail("1 when pp is 1 (interleaving splits each pipeline stage's layers into chunks)", std::to_string(p.vpp));
  p.microbatch_group = m.get_or<int>("microbatch_group", 0, positive);
  if (p.microbatch_group > 0 && p.vpp == 1) {
    m.at("microbatch_group", "").fail("no microbatch_group when vpp is 1 (it groups the micro-batches of the interleaved schedule)", std::to_string(p.microbatch_group));
  }
  p.sequence_parallel = m.get_or<bool>("sequence_parallel", p.tp > 1);
  p.tp_overlap = m.get_or<bool>("tp_overlap", false);
  p.zero_stage = m.get_or<int>("zero_stage", 1, yaml::in_range(0, 3, "a ZeRO stage 0, 1, 2 or 3"));
  const std::string fallback = p.pp == 1 ? "1f1b" : p.vpp > 1 ? "interleaved-1f1b" : "1f1b";
  const std::string schedule = m.choice_or("schedule", fallback, {"gpipe", "1f1b", "interleaved-1f1b"});
  p.schedule = schedule == "gpipe" ? PipelineSchedule::gpipe : schedule == "1f1b" ? PipelineSchedule::one_f_one_b : PipelineSchedule::interleaved;
  if (p.vpp > 1 && p.schedule != PipelineSchedule::interleaved) {
    m.at("schedule", "").fail("interleaved-1f1b when vpp > 1", schedule);
  }
  if (p.schedule == PipelineSchedule::interleaved && p.vpp == 1) m.at("schedule", "").fail("1f1b or gpipe when vpp is 1", schedule);
  // One stage has no pipeline: each micro-batch runs its forward then its backward (Megatron's
  // forward_backward_no_pipelining). GPipe's all-forwards-first would hold every micro-batch's activations.
  if (p.pp == 1 && p.schedule == PipelineSchedule::gpipe) m.at("schedule", "").fail("1f1b when pp is 1 (one stage has no pipeline to schedule)", schedule);
  if (auto order = m.find("order")) p.order = parse_order(*order);
  p.flash_attention = m.choice_or("attention", "flash", {"flash", "unfused"}) == "flash";
  p.overlap_grad_reduce = m.get_or<bool>("overlap_grad_reduce", true);
  // ZeRO-3 (FSDP) gathers each unit's weights ahead of use and reduce-scatters its gradients during
  // the backward pass; the step models only that, so the two switches cannot turn it off.
  if (p.zero_stage == 3) {
    for (const char* key : {"overlap_grad_reduce", "overlap_param_gather"}) {
      if (m.find(key) && !m.get<bool>(key)) {
        m.at(key, "").fail("true (or left out) with zero_stage 3 (FSDP's prefetched gathers and its reduce-scatters during backward are the only ZeRO-3 modelled)",
                           "false");
      }
    }
  }
  // Megatron asserts --overlap-param-gather needs --overlap-grad-reduce (arguments.py): the gather
  // follows the reduction when not given, and is refused on its own.
  p.overlap_param_gather = m.get_or<bool>("overlap_param_gather", p.overlap_grad_reduce);
  if (p.overlap_param_gather && !p.overlap_grad_reduce) {
    m.at("overlap_param_gather", "").fail_message("overlap_param_gather needs overlap_grad_reduce (Megatron refuses --overlap-param-gather without --overlap-grad-reduce)");
  }
  // Unset: Megatron-Core overlaps pipeline sends with compute for the interleaved schedule only.
  if (m.find("overlap_p2p")) p.overlap_p2p = m.get<bool>("overlap_p2p");
  p.bucket_parameters = m.get_or<double>("bucket_parameters", 0.0, yaml::non_negative<double>());
  p.grad_accumulation_fusion = m.get_or<bool>("grad_accumulation_fusion", true);
  p.all_reduce_gradients = m.get_or<bool>("all_reduce_gradients", false);
  if (p.all_reduce_gradients && p.zero_stage != 1) {
    m.at("all_reduce_gradients", "").fail(fmt::format("false with zero_stage {} ({})", p.zero_stage,
                                                      p.zero_stage == 0 ? "ZeRO-0 all-reduces its gradients anyway; the setting is ZeRO-1's"
                                                                        : "stages 2 and 3 shard the gradients, so they reduce-scatter them"),
                                          "true");
  }
  if (p.zero_stage == 0 && m.find("overlap_param_gather") && p.overlap_param_gather) {
    // Megatron: --overlap-param-gather needs the distributed optimizer (arguments.py); ZeRO-0
    // gathers nothing.
    m.at("overlap_param_gather", "").fail("false with zero_stage 0 (no parameters are gathered; Megatron needs --use-distributed-optimizer for it)", "true");
  }
  m.finish();
}

namespace {

// The GPUs of one of a topology's nodes (0 when it has none).
int node_gpus(const topology::Topology& topo) {
  return topo.node_count() > 0 ? static_cast<int>(topo.gpus().size()) / topo.node_count() : 0;
}

// The cheapest on-demand offering of `gpu` in nodes of the topology's size (read_cost_section's rule).
const Offering* cheapest_on_demand(const std::vector<Offering>& offerings, const std::string& gpu, int gpus_per_node) {
  const Offering* best = nullptr;
  for (const auto& o : offerings) {
    if (o.pricing != Pricing::on_demand || o.gpu != gpu || (gpus_per_node > 0 && o.gpus_per_node != gpus_per_node)) continue;
    if (!best || o.price_per_gpu_hour < best->price_per_gpu_hour) best = &o;
  }
  return best;
}

// Prices for the plan search: the scenario's GPUs at the cheapest on-demand offering of its cost
// section (or of search.cost_sheet), every other system's at the cheapest on-demand offering for its
// GPU in the same sheet. Systems with another GPU type than the scenario's need prices, or their
// GPU-hours would be compared as if they cost the same.
void price_search(TrainingScenario& sc, const std::optional<CostSheet>& search_sheet, const std::vector<yaml::Node>& system_nodes, const yaml::Node* sheet_node,
                  const yaml::Node* search_node) {
  const std::string& own_gpu = sc.topology->gpu->name;
  const CostSheet* sheet = search_sheet ? &*search_sheet : sc.cost ? &sc.cost->sheet : nullptr;
  const int own_node = node_gpus(*sc.topology);
  const Offering* own = sc.cost && !search_sheet ? cheapest_on_demand(sc.cost->offerings, own_gpu, own_node)
                        : sheet              ? cheapest_on_demand(sheet->offerings, own_gpu, own_node)
                                             : nullptr;
  if (sheet && !own && (search_sheet || !sc.search.systems.empty())) {
    // The cost section's `offerings:` list may have left the sheet's out: say which.
    const Offering* in_sheet = cheapest_on_demand(sheet->offerings, own_gpu, own_node);
    const std::string what =
        in_sheet ? fmt::format("the cost section's offerings list leaves out every on-demand offering of cost sheet {} for the scenario's {} in nodes of {} GPUs "
                               "(such as {}), so plans cannot be priced",
                               sheet->name, own_gpu, own_node, in_sheet->name)
                 : fmt::format("cost sheet {} has no on-demand offering for the scenario's {} in nodes of {} GPUs, so plans cannot be priced", sheet->name,
                               own_gpu, own_node);
    if (sheet_node) sheet_node->fail_message(what);
    if (search_node) search_node->fail_message(what);
  }
  if (own) {
    sc.price_per_gpu_hour = own->price_per_gpu_hour;
    sc.price_offering = own->name;
  }
  for (std::size_t k = 0; k < sc.search.systems.size(); ++k) {
    SearchSystem& sys = sc.search.systems[k];
    const std::string& gpu = sys.topology->gpu->name;
    if (!own) {
      if (gpu != own_gpu) {
        system_nodes[k].fail_message(fmt::format("topology {} has {} GPUs, the scenario {}: comparing GPU types needs their prices (add search.cost_sheet, e.g. "
                                                 "public-clouds-2026-11, or a cost section)",
                                                 sys.topology->name, gpu, own_gpu));
      }
      continue;
    }
    const Offering* o = cheapest_on_demand(sheet->offerings, gpu, node_gpus(*sys.topology));
    if (!o) {
      system_nodes[k].fail_message(fmt::format("cost sheet {} has no on-demand offering for {} in nodes of {} GPUs (topology {})", sheet->name, gpu,
                                               node_gpus(*sys.topology), sys.topology->name));
    }
    sys.price_per_gpu_hour = o->price_per_gpu_hour;
    sys.offering = o->name;
  }
}

}  // namespace

TrainingScenario load_training_scenario(const std::filesystem::path& file) {
  auto doc = yaml::Document::load_file(file);
  const yaml::Node body = part_body(doc->root(), "scenario");
  yaml::Map m(body);
  TrainingScenario sc;
  sc.file = file;
  sc.name = m.get<std::string>("name", yaml::name());
  sc.description = m.get_or<std::string>("description", "");
  m.choice("kind", {"training"});
  IncludeStack includes;
  auto guard = includes.enter(file, {});
  const yaml::Node model_node = m.at("model", "a model: a shipped preset name, a path, or a map");
  sc.job.model = load_transformer_reference(model_node, includes);
  const yaml::Node topo_node = m.at("topology", "a topology: a shipped preset name, a path, or a map");
  sc.topology = std::make_shared<const topology::Topology>(topology::load_topology_reference(topo_node, includes));
  const yaml::Node plan_node = m.at("parallelism", "a parallelism map (tp, pp, dp, ...)");
  read_parallelism(plan_node, sc.job.plan);
  {
    const yaml::Node batch_node = m.at("batch", "a batch map with micro and global (sequences)");
    sc.batch_where = batch_node.where();
    yaml::Map b(batch_node);
    sc.job.micro_batch = b.get_or<int>("micro", 1, yaml::positive<int>());
    sc.job.global_batch = b.get<int>("global", yaml::positive<int>());
    // Training at another sequence length than the preset's.
    sc.job.model.seq_len = b.get_or<int>("seq_len", sc.job.model.seq_len, yaml::positive<int>());
    b.finish();
  }
  const std::string rc = m.choice_or("recompute", "selective", {"none", "selective", "full"});
  sc.job.recompute = rc == "none" ? Recompute::none : rc == "full" ? Recompute::full : Recompute::selective;
  const std::string precision = m.choice_or("precision", "bf16", {"fp16", "bf16", "fp8"});
  sc.job.precision = *hardware::parse_dtype(precision);
  if (auto g = m.find("gradient_dtype")) {
    const std::string d = yaml::parse_choice(*g, {"fp32", "bf16", "fp16"});
    sc.job.grad_bytes = d == "fp32" ? 4.0 : 2.0;
  }
  // From one token to 1e18: the largest published pretraining runs are a few times 1e13 tokens (Qwen3:
  // 36 trillion), so a count beyond the bound is a typo, whose "time to train" would read as nonsense.
  sc.job.token_budget = m.get_or<double>("train_tokens", 0.0, yaml::in_range(1.0, 1e18, "a token count from 1 to 1e18"));
  sc.search = default_space(sc.job, *sc.topology);
  std::vector<yaml::Node> system_nodes;  // where each of search.systems was given
  std::optional<CostSheet> search_sheet;
  std::optional<yaml::Node> sheet_node, search_node;
  if (auto z = m.find("search")) {
    search_node = *z;
    yaml::Map sm(*z);
    // A value listed twice would be searched once (the space is a set): refused at its second place,
    // as a typo for another value is likelier than a wish to say it twice.
    const auto add_once = [](const yaml::Node& v, auto& list, const auto& value, std::string_view text) {
      if (std::find(list.begin(), list.end(), value) != list.end()) v.fail("each value once", fmt::format("{} a second time", text));
      list.push_back(value);
    };
    // Other systems (GPU types, fabrics) to try: topologies as the scenario's own is given.
    if (auto n = sm.find("topology")) {
      if (!n->is_list() || n->items().empty()) n->fail("a non-empty list of topologies (shipped names, paths or maps)");
      for (const yaml::Node& item : n->items()) {
        auto t = std::make_shared<const topology::Topology>(topology::load_topology_reference(item, includes));
        if (!t->gpu) item.fail_message(fmt::format("topology {} names no GPU hardware profile", t->name));
        // Plans are told apart by their topology's name (keys, texts, the results file), so a name
        // already used must be the same system again, which is tried once; another system under it
        // is refused rather than dropped.
        const auto repeats = [&](const topology::Topology& u, const yaml::Node& there) {
          if (u.name != t->name) return false;
          if (system_digest(u) != system_digest(*t)) {
            const auto what = [](const topology::Topology& x) {
              return fmt::format("{} {} GPUs, fabric {}", x.gpus().size(), x.gpu ? x.gpu->name : std::string("unprofiled"), x.fabric_kind);
            };
            item.fail_message(fmt::format("topology name '{}' is already given to another system at {} (there {}; here {}): give one of them another name",
                                          t->name, there.where().to_string(), what(u), what(*t)));
          }
          return true;
        };
        bool repeated = repeats(*sc.topology, topo_node);
        for (std::size_t k = 0; k < sc.search_topologies.size() && !repeated; ++k) repeated = repeats(*sc.search_topologies[k], system_nodes[k]);
        if (repeated) continue;
        sc.search_topologies.push_back(t);
        sc.search.systems.push_back({t.get(), 0, {}});
        system_nodes.push_back(item);
      }
    }
    // Each value is bounded by what it must divide, so that no product of them can overflow: a GPU
    // count by the largest topology searched, a parallel degree by the largest GPU count (tp x pp x
    // cp divides it, EP splits its ranks), vpp by the layers (pp x vpp chunks), micro by the global
    // batch (micro x dp divides it).
    const auto ints = [&](const char* key, std::vector<int>& into, int low, int high, const std::string& why) {
      auto n = sm.find(key);
      if (!n) return;
      if (!n->is_list() || n->items().empty()) n->fail(fmt::format("a non-empty list of integers from {} to {} ({})", low, high, why));
      into.clear();
      const auto check = yaml::in_range(low, high, fmt::format("an integer from {} to {} ({})", low, high, why));
      for (const yaml::Node& v : n->items()) {
        const int value = v.as<int>(check);
        add_once(v, into, value, std::to_string(value));
      }
    };
    int largest_topology = static_cast<int>(sc.topology->gpus().size());
    for (const auto& t : sc.search_topologies) largest_topology = std::max(largest_topology, static_cast<int>(t->gpus().size()));
    ints("gpus", sc.search.gpus, 1, largest_topology,
         fmt::format("GPUs of a topology searched, the largest of which has {}", largest_topology));
    const int most_gpus = *std::max_element(sc.search.gpus.begin(), sc.search.gpus.end());
    const std::string divides_gpus = fmt::format("tp x pp x cp divides a GPU count searched, at most {}", most_gpus);
    ints("tp", sc.search.tp, 1, most_gpus, divides_gpus);
    ints("pp", sc.search.pp, 1, most_gpus, divides_gpus);
    // vpp and micro also take `all`: every divisor (of layers / pp, of global batch / dp).
    const auto ints_or_all = [&](const char* key, std::vector<int>& into, bool& all, int high, const std::string& why) {
      auto n = sm.find(key);
      if (n && n->is_scalar() && n->scalar("") == "all") {
        all = true;
        return;
      }
      ints(key, into, 1, high, why);
    };
    ints_or_all("vpp", sc.search.vpp, sc.search.every_vpp, sc.job.model.layers,
                fmt::format("pp x vpp model chunks share the model's {} layers", sc.job.model.layers));
    ints("cp", sc.search.cp, 1, most_gpus, divides_gpus);
    ints("ep", sc.search.ep, 1, most_gpus, fmt::format("EP splits the ranks of a GPU count searched, at most {}", most_gpus));
    // etp: integers, or `tp` for each plan's own TP.
    if (auto n = sm.find("etp")) {
      const std::string expected = fmt::format("a non-empty list of expert TP degrees: integers from 1 to {} (etp x ep splits the ranks of a GPU count searched), or tp (each plan's TP)", most_gpus);
      if (!n->is_list() || n->items().empty()) n->fail(expected);
      sc.search.etp.clear();
      const std::string item = fmt::format("an integer from 1 to {} (etp x ep splits the ranks of a GPU count searched), or tp", most_gpus);
      const auto check = yaml::in_range(1, most_gpus, item);
      for (const yaml::Node& v : n->items()) {
        const std::string text = v.is_scalar() ? v.scalar("") : std::string();
        int value = SearchSpace::kEtpFollowsTp;
        if (text != "tp") {
          if (text.empty() || text.find_first_not_of("+-0123456789") != std::string::npos) v.fail(item);
          value = v.as<int>(check);
        }
        add_once(v, sc.search.etp, value, text == "tp" ? text : std::to_string(value));
      }
    }
    ints_or_all("micro", sc.search.micro, sc.search.every_micro, sc.job.global_batch,
                fmt::format("micro x dp divides the global batch of {} sequences", sc.job.global_batch));
    ints("zero_stage", sc.search.zero, 0, 3, "a ZeRO stage");
    if (auto n = sm.find("recompute")) {
      if (!n->is_list() || n->items().empty()) n->fail("a non-empty list of none, selective, full");
      sc.search.recompute.clear();
      for (const yaml::Node& v : n->items()) {
        const std::string r = yaml::parse_choice(v, {"none", "selective", "full"});
        const Recompute value = r == "none" ? Recompute::none : r == "full" ? Recompute::full : Recompute::selective;
        add_once(v, sc.search.recompute, value, r);
      }
    }
    const auto bools = [&](const char* key, std::vector<bool>& into) {
      auto n = sm.find(key);
      if (!n) return;
      if (!n->is_list() || n->items().empty()) n->fail("a non-empty list of true, false");
      into.clear();
      for (const yaml::Node& v : n->items()) {
        const bool value = v.as<bool>();
        add_once(v, into, value, value ? "true" : "false");
      }
    };
    bools("sequence_parallel", sc.search.sequence_parallel);
    bools("tp_overlap", sc.search.tp_overlap);
    bools("dp_overlap", sc.search.dp_overlap);
    if (auto n = sm.find("attention")) {
      if (!n->is_list() || n->items().empty()) n->fail("a non-empty list of flash, unfused");
      for (const yaml::Node& v : n->items()) {
        const std::string kernel = yaml::parse_choice(v, {"flash", "unfused"});
        add_once(v, sc.search.flash_attention, kernel == "flash", kernel);
      }
    }
    if (auto n = sm.find("order")) {
      if (n->is_scalar() && n->scalar("") == "all") {
        // Every order: only the places of the dimensions with more than one rank matter, and the
        // search keeps one order per distinct placement.
        std::vector<ParallelDim> dims{ParallelDim::tp, ParallelDim::cp, ParallelDim::ep, ParallelDim::dp, ParallelDim::pp};
        std::sort(dims.begin(), dims.end());
        do sc.search.orders.push_back(dims);
        while (std::next_permutation(dims.begin(), dims.end()));
      } else {
        if (!n->is_list() || n->items().empty()) n->fail("a non-empty list of rank orders such as tp-cp-ep-dp-pp, or all");
        for (const yaml::Node& v : n->items()) {
          const std::vector<ParallelDim> order = parse_order(v);
          add_once(v, sc.search.orders, order, v.scalar(""));
        }
      }
    }
    if (auto n = sm.find("cost_sheet")) {
      search_sheet = load_cost_sheet_reference(*n, includes);
      sheet_node = *n;
    }
    sc.search.uneven_layers = sm.get_or<bool>("uneven_layers", false);
    sm.finish();
  }
  if (auto c = m.find("cost")) {
    if (!sc.topology->gpu) topo_node.fail("a topology whose nodes name a GPU hardware profile");
    if (sc.job.token_budget <= 0) c->fail_message("a cost section needs train_tokens: the tokens whose training it prices");
    sc.cost = read_cost_section(*c, sc.topology->gpu->name, includes, true, node_gpus(*sc.topology));
    sc.cost->origin.train_tokens = m.find("train_tokens");
  }
  price_search(sc, search_sheet, system_nodes, sheet_node ? &*sheet_node : nullptr, search_node ? &*search_node : nullptr);
  m.finish();
  try {
    check_job(sc.job, static_cast<int>(sc.topology->gpus().size()), sc.topology->gpu.get());
    if (!sc.topology->gpu) throw PlanError("topology", "the topology names no GPU hardware profile");
    if (!sc.topology->gpu->supports(sc.job.precision)) {
      throw PlanError("precision", fmt::format("precision {}: the {} has no {} tensor cores", precision, sc.topology->gpu->name, precision));
    }
  } catch (const PlanError& e) {
    // At the setting to blame where the scenario writes it; else at its section, else the plan.
    std::optional<yaml::Node> at;
    const std::string::size_type dot = e.field.find('.');
    if (auto section = m.find(e.field.substr(0, dot))) {
      at = section;
      if (dot != std::string::npos && section->is_map()) {
        if (auto key = yaml::Map(*section).find(e.field.substr(dot + 1))) at = key;
      }
    }
    (at ? *at : plan_node).fail_message(fmt::format("impossible plan: {}", e.what()));
  }
  return sc;
}

}  // namespace cs::models
