#include "clustersim/models/serving_scenario.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>
#include <stdexcept>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"
#include "clustersim/models/collective_model.hpp"
#include "clustersim/topology/topology_loader.hpp"

namespace cs::models {

namespace {
// The most requests a workload may hold (each is kept in memory with its results: about 1 KB).
constexpr int kMaxRequests = 10'000'000;
}  // namespace

namespace {

LengthDistribution read_lengths(const yaml::Node& node) {
  LengthDistribution d;
  if (!node.is_map()) {
    d.kind = LengthDistribution::Kind::fixed;
    d.a = node.as<int>(yaml::positive<int>());
    return d;
  }
  yaml::Map m(node);
  const std::string kind = m.choice("kind", {"fixed", "uniform", "lognormal", "empirical"});
  if (kind == "fixed") {
    d.a = m.get<int>("tokens", yaml::positive<int>());
  } else if (kind == "uniform") {
    d.kind = LengthDistribution::Kind::uniform;
    d.a = m.get<int>("min", yaml::positive<int>());
    d.b = m.get<int>("max", yaml::at_least<int>(static_cast<int>(d.a), fmt::format("at least min ({})", d.a)));
  } else if (kind == "lognormal") {
    d.kind = LengthDistribution::Kind::lognormal;
    d.a = m.get<double>("median", yaml::positive<double>());
    // Up to 10: at 10 one draw in ten is already 360,000 times the median. Far past it every draw is
    // 1 token or as many as an int holds.
    d.b = m.get<double>("sigma", yaml::in_range(0.0, 10.0, "a sigma from 0 to 10"));
  } else {
    d.kind = LengthDistribution::Kind::empirical;
    yaml::Node values = m.at("values", "a list of token counts");
    for (const auto& v : values.items()) d.values.push_back(v.as<int>(yaml::positive<int>()));
    if (d.values.empty()) values.fail("at least one token count");
  }
  m.finish();
  return d;
}

}  // namespace

namespace {

// Collective times are simulated at powers of two and cached (the callers ask for many nearly equal
// sizes); a size between two is timed by linear interpolation in bytes between them, which a
// collective's alpha + bytes / B time follows exactly where NCCL keeps its algorithm and protocol.
// Rounding up instead charged up to twice the bytes: a prefill one token past 1,024 paid 25% more
// per TP all-reduce.
template <class At>
double between_size_classes(double bytes, const At& at) {
  bytes = std::max(bytes, 1.0);
  const double lo = std::exp2(std::floor(std::log2(bytes)));
  const auto low = static_cast<std::int64_t>(lo);
  if (bytes <= lo) return at(low);
  const double a = at(low), b = at(2 * low);
  return a + (b - a) * (bytes - lo) / lo;
}

// The simulated time of `op` over `ranks` as a function of its size.

std::function<double(double)> cached_collective_seconds(const std::shared_ptr<const topology::Topology>& topo, CollectiveOp op,
                                                        std::vector<topology::Vertex> ranks) {
  auto model = std::make_shared<CollectiveModel>(*topo);
  auto cache = std::make_shared<std::map<std::int64_t, double>>();
  return [topo, model, cache, op, ranks = std::move(ranks)](double bytes) {
    return between_size_classes(bytes, [&](std::int64_t size) {
      auto it = cache->find(size);
      if (it == cache->end()) {
        Collective c;
        c.op = op;
        c.ranks = ranks;
        c.bytes = Bytes(static_cast<double>(size));
        it = cache->emplace(size, model->simulate(c).time.value()).first;
      }
      return it->second;
    });
  };
}

}  // namespace

std::function<double(double)> tp_all_reduce_seconds(const std::shared_ptr<const topology::Topology>& topo, int tp) {
  std::vector<topology::Vertex> group;
  const auto gpus = topo->gpus();
  const int node = topo->device(gpus.front()).node;
  for (auto v : gpus) {
    if (topo->device(v).node == node && static_cast<int>(group.size()) < tp) group.push_back(v);
  }
  if (static_cast<int>(group.size()) < tp) {
    throw std::invalid_argument(fmt::format("tp {} needs {} GPUs in one node; the topology\x27s nodes hold {}", tp, tp, group.size()));
  }
  return cached_collective_seconds(topo, CollectiveOp::all_reduce, group);
}

namespace {

SizingSpec read_sizing(const yaml::Node& node, IncludeStack& includes) {
  yaml::Map m(node);
  SizingSpec z;
  const yaml::Node offers = m.at("gpus", "a list of {node, price_per_gpu_hour, as_of, source}");
  if (!offers.is_list() || offers.items().empty()) offers.fail("a non-empty list of {node, price_per_gpu_hour, as_of, source}");
  for (const yaml::Node& item : offers.items()) {
    yaml::Map o(item);
    SizingOffer offer;
    const yaml::Node node_field = o.at("node", "a node template: a shipped name, a path, or a map");
    offer.node = topology::load_node_reference(node_field, includes);
    for (const SizingOffer& earlier : z.offers) {
      if (earlier.node.name == offer.node.name) node_field.fail("each node template once (one price each)", fmt::format("{} a second time", offer.node.name));
    }
    offer.price_per_gpu_hour = o.get<double>("price_per_gpu_hour", yaml::price_per_hour());
    offer.as_of = o.get<std::string>("as_of");
    offer.source = o.get<std::string>("source");
    o.finish();
    z.offers.push_back(std::move(offer));
  }
  if (auto t = m.find("tp")) {
    if (!t->is_list() || t->items().empty()) t->fail("a non-empty list of TP degrees");
    for (const yaml::Node& v : t->items()) {
      const int tp = v.as<int>(yaml::positive<int>());
      if (std::find(z.tp.begin(), z.tp.end(), tp) != z.tp.end()) v.fail("each TP degree once", fmt::format("{} a second time", tp));
      z.tp.push_back(tp);
    }
  }
  z.disaggregation = m.get_or<bool>("disaggregation", false);
  z.attainment = m.get_or<double>("attainment", 0.9, yaml::Check<double>{"a fraction in (0, 1]", [](double v) { return v > 0 && v <= 1; }});
  z.max_gpus = m.get_or<int>("max_gpus", 64, yaml::in_range(1, 100'000, "from 1 to 100,000 GPUs"));
  z.rate = m.get_or<double>("rate", 0.0, yaml::positive<double>());
  m.finish();
  return z;
}

}  // namespace

double host_link_bandwidth(const topology::Topology& topo) {
  const topology::Router router(topo);
  const topology::Vertex gpu = topo.gpus().front();
  double best = 0;
  for (auto [v, end] = boost::vertices(topo.graph()); v != end; ++v) {
    const topology::Device& d = topo.device(*v);
    if (d.kind != topology::DeviceKind::cpu || d.node != topo.device(gpu).node) continue;
    if (auto path = router.route(gpu, *v)) best = std::max(best, path->bottleneck.value());
  }
  return best;
}

ServingLayout::ServingLayout(const topology::Topology& topo, int tp) : tp_(tp) {
  if (tp < 1) throw std::invalid_argument(fmt::format("tp must be at least 1, not {}", tp));
  const auto& gpus = topo.gpus();
  // Runs of GPUs of one node, in topology order.
  for (std::size_t start = 0; start < gpus.size();) {
    const int node = topo.device(gpus[start]).node;
    std::size_t end = start + 1;
    while (end < gpus.size() && topo.device(gpus[end]).node == node) ++end;
    const int held = static_cast<int>(end - start);
    for (std::size_t at = start; at + static_cast<std::size_t>(tp) <= end; at += static_cast<std::size_t>(tp)) {
      first_.push_back(at);
      node_gpus_.push_back(held);
      node_.push_back(node);
    }
    start = end;
  }
}

std::size_t ServingLayout::first_gpu(int group) const {
  if (group < 0 || group >= groups()) {
    throw std::invalid_argument(fmt::format("TP group {} of {} GPUs is past the {} whole groups the topology's nodes hold", group + 1, tp_, groups()));
  }
  return first_[static_cast<std::size_t>(group)];
}

int ServingLayout::gpus_billed(int n) const {
  int billed = 0;
  for (int g = 0; g < std::min(n, groups()); ++g) {
    if (g == 0 || node_[static_cast<std::size_t>(g)] != node_[static_cast<std::size_t>(g - 1)]) billed += node_gpus_[static_cast<std::size_t>(g)];
  }
  return billed;
}

void check_placement(const topology::Topology& topo, int tp, int pp, int replicas) {
  const auto& gpus = topo.gpus();
  const std::int64_t need = std::int64_t{tp} * pp * replicas;
  if (need > static_cast<std::int64_t>(gpus.size())) {
    throw std::invalid_argument(fmt::format("{} replica{} x TP {} x PP {} need{} {} GPUs; the topology has {}", replicas, replicas == 1 ? "" : "s", tp, pp,
                                            replicas == 1 ? "s" : "", need, gpus.size()));
  }
  const ServingLayout layout(topo, tp);
  if (std::int64_t{replicas} * pp > layout.groups()) {
    const int node_gpus = topo.node_count() > 0 ? static_cast<int>(gpus.size()) / topo.node_count() : static_cast<int>(gpus.size());
    throw std::invalid_argument(fmt::format("{} replica{} x PP {} need{} {} TP groups of {} GPUs, each inside one node; the topology's {} nodes of {} GPUs hold {} "
                                            "({} a node{})",
                                            replicas, replicas == 1 ? "" : "s", pp, replicas == 1 ? "s" : "", std::int64_t{replicas} * pp, tp,
                                            topo.node_count(), node_gpus, layout.groups(),
                                            node_gpus / tp, node_gpus % tp != 0 ? fmt::format(", {} GPUs of each idle", node_gpus % tp) : ""));
  }
}

void kv_transfer_network(const std::shared_ptr<const topology::Topology>& topo, int tp, int pp, Disaggregation& d) {
  auto model = std::make_shared<CollectiveModel>(*topo);
  d.link_capacities = model->capacities();
  const int prefill = d.prefill;
  const auto layout = std::make_shared<const ServingLayout>(*topo, tp);
  d.kv_flows = [topo, model, layout, tp, pp, prefill](int p, int k, double bytes) {
    std::vector<sim::FlowSpec> flows;
    const auto& g = topo->gpus();
    // GPU j of a replica: stage j / tp's group, its (j mod tp)-th GPU.
    const auto gpu = [&](int replica, int j) { return g[layout->first_gpu(replica * pp + j / tp) + static_cast<std::size_t>(j % tp)]; };
    for (int j = 0; j < tp * pp; ++j) {
      Collective c;
      c.op = CollectiveOp::send_recv;
      c.ranks = {gpu(p, j), gpu(prefill + k, j)};
      c.bytes = Bytes(std::max(bytes, 1.0));
      for (const auto& phase : model->plan(c).phases) flows.insert(flows.end(), phase.flows->begin(), phase.flows->end());
    }
    return flows;
  };
}

std::function<double(int, int, double)> pp_send_seconds(const std::shared_ptr<const topology::Topology>& topo, int tp, int pp) {
  const auto& gpus = topo->gpus();
  if (static_cast<std::size_t>(tp) * pp > gpus.size()) {
    throw std::invalid_argument(fmt::format("{} pipeline stages of TP {} need more than {} GPUs", pp, tp, gpus.size()));
  }
  auto model = std::make_shared<CollectiveModel>(*topo);
  auto cache = std::make_shared<std::map<std::tuple<int, int, std::int64_t>, double>>();
  const auto layout = std::make_shared<const ServingLayout>(*topo, tp);
  if (pp > layout->groups()) {
    throw std::invalid_argument(fmt::format("{} pipeline stages of TP {} need {} TP groups inside nodes; the topology's nodes hold {}", pp, tp, pp, layout->groups()));
  }
  return [topo, model, cache, layout, tp, pp](int replica, int boundary, double bytes) {
    return between_size_classes(bytes, [&](std::int64_t size) {
      const auto key = std::make_tuple(replica, boundary, size);
      auto it = cache->find(key);
      if (it == cache->end()) {
        const auto& g = topo->gpus();
        const int group = replica * pp + boundary;
        if (group + 1 >= layout->groups()) {
          throw std::invalid_argument(fmt::format("replica {}'s stage {} is TP group {}, past the {} whole groups of {} GPUs the topology's nodes hold",
                                                  replica, boundary + 2, group + 2, layout->groups(), tp));
        }
        const std::size_t from = layout->first_gpu(group), to = layout->first_gpu(group + 1);
        std::vector<Collective> sends;
        for (int j = 0; j < tp; ++j) {
          Collective& c = sends.emplace_back();
          c.op = CollectiveOp::send_recv;
          c.ranks = {g[from + static_cast<std::size_t>(j)], g[to + static_cast<std::size_t>(j)]};
          c.bytes = Bytes(static_cast<double>(size));
        }
        it = cache->emplace(key, model->simulate_together(sends).value()).first;
      }
      return it->second;
    });
  };
}

double WorkloadRecipe::span() const {
  if (duration > 0) return duration;
  return arrivals.kind == ArrivalProcess::Kind::offline || !(arrivals.rate > 0) ? 0.0 : requests / arrivals.rate;
}

double WorkloadRecipe::count_at(double rate) const {
  const double s = span();
  return s > 0 ? std::max(1.0, std::round(s * rate)) : static_cast<double>(requests);
}

std::vector<ServingRequest> WorkloadRecipe::generate_at(double rate, const std::filesystem::path& file) const {
  ArrivalProcess a = arrivals;
  a.rate = rate;
  const double count = count_at(rate);
  if (!(count <= kMaxRequests)) {
    throw InputError(fmt::format("{}: the workload at {:g} requests/s over its {:g} s is {:.3g} requests; at most {} are supported", file.string(), rate,
                                 span(), count, kMaxRequests));
  }
  try {
    return generate_requests(static_cast<int>(count), a, prompt, output, seed, prefix, context);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: the workload at {:g} requests/s: impossible workload: {}", file.string(), rate, e.what()));
  }
}

std::string scenario_kind(const std::filesystem::path& file) {
  auto doc = yaml::Document::load_file(file);
  const yaml::Node body = part_body(doc->root(), "scenario");
  if (!body.is_map()) body.fail("a scenario map");
  yaml::Map m(body);
  return m.choice("kind", {"training", "inference"});
}

InferenceScenario load_inference_scenario(const std::filesystem::path& file) {
  auto doc = yaml::Document::load_file(file);
  const yaml::Node body = part_body(doc->root(), "scenario");
  yaml::Map m(body);
  InferenceScenario sc;
  sc.file = file;
  sc.name = m.get<std::string>("name", yaml::name());
  sc.description = m.get_or<std::string>("description", "");
  m.choice("kind", {"inference"});
  IncludeStack includes;
  auto guard = includes.enter(file, {});
  ReplicaConfig& r = sc.replica;
  r.model = load_transformer_reference(m.at("model", "a model: a shipped preset name, a path, or a map"), includes);
  const yaml::Node topo_node = m.at("topology", "a topology: a shipped preset name, a path, or a map");
  sc.topology = std::make_shared<const topology::Topology>(topology::load_topology_reference(topo_node, includes));
  if (!sc.topology->gpu) topo_node.fail("a topology whose nodes name a GPU hardware profile");
  const hardware::HardwareProfile& hw = *sc.topology->gpu;

  const yaml::Node serving_node = m.at("serving", "a serving map (tp, replicas, weights, ...)");
  {
    yaml::Map s(serving_node);
    r.tp = s.get_or<int>("tp", 1, yaml::positive<int>());
    if (const std::string why = tp_split_problem(r.model, r.tp); !why.empty()) {
      s.at("tp", "").fail(fmt::format("a TP degree that splits the attention heads evenly ({})", why), std::to_string(r.tp));
    }
    r.pp = s.get_or<int>("pp", 1, yaml::positive<int>());
    if (s.get_or<bool>("expert_parallel", false)) {
      if (!r.model.moe) s.at("expert_parallel", "").fail_message("expert_parallel needs an MoE model");
      r.expert_parallel = true;
      r.ep = r.tp;
    }
    sc.replicas = s.get_or<int>("replicas", 1, yaml::positive<int>());
    const std::string weights = s.choice_or("weights", "bf16", {"fp16", "bf16", "fp8", "int4"});
    if (weights == "int4") {
      // Weight-only int4: half a byte per parameter in memory, dequantised into 16-bit GEMMs.
      r.weights = hardware::Dtype::bf16;
      r.weight_bytes_per_parameter = 0.5;
    } else {
      r.weights = *hardware::parse_dtype(weights);
      if (!hw.supports(r.weights)) s.at("weights", "").fail(fmt::format("a dtype the {} computes in (it has no {} peak)", hw.name, weights), weights);
    }
    r.kv_bytes_per_element = s.choice_or("kv_cache", "bf16", {"fp16", "bf16", "fp8"}) == "fp8" ? 1.0 : 2.0;
    // vLLM's max_model_len: the model's context unless the server is told otherwise (a preset carries
    // its training length: Llama 3.1 405B serves 131,072 tokens).
    r.max_model_len = s.get_or<int>("max_model_len", r.model.seq_len, yaml::positive<int>());
    r.max_num_seqs = s.get_or<int>("max_num_seqs", r.max_num_seqs, yaml::positive<int>());
    r.max_num_batched_tokens = s.get_or<int>("max_num_batched_tokens", r.max_num_batched_tokens, yaml::positive<int>());
    r.chunked_prefill = s.get_or<bool>("chunked_prefill", r.chunked_prefill);
    // vLLM's SchedulerConfig refuses a token budget below max_num_seqs (each running sequence's
    // decode token must fit one step); a budget of 1 had served 300 requests one at a time.
    if (r.max_num_batched_tokens < r.max_num_seqs) {
      s.at(s.find("max_num_batched_tokens") ? "max_num_batched_tokens" : "max_num_seqs", "")
          .fail("max_num_batched_tokens at least max_num_seqs, as vLLM requires (each running sequence's next token must fit one step)",
                fmt::format("max_num_batched_tokens {} below max_num_seqs {}", r.max_num_batched_tokens, r.max_num_seqs));
    }
    // vLLM's blocks are 8 to 128 tokens (its --block-size choices); 4,096 leaves room for any engine.
    r.block_size = s.get_or<int>("block_size", r.block_size, yaml::in_range(1, 4096, "from 1 to 4096 tokens per block"));
    r.watermark = s.get_or<double>("watermark", r.watermark, yaml::in_range(0.0, 0.5, "a fraction from 0 to 0.5"));
    r.gpu_memory_utilization =
        s.get_or<double>("gpu_memory_utilization", r.gpu_memory_utilization, yaml::Check<double>{"a fraction in (0, 1]", [](double v) { return v > 0 && v <= 1; }});
    // Host work per scheduler step is microseconds to milliseconds; a second or more is a unit typo.
    r.iteration_overhead = s.get_or<Seconds>("iteration_overhead", r.iteration_overhead, yaml::in_range(Seconds(0), Seconds(1), "from 0 to 1 s per iteration"));
    const std::string router = s.choice_or("router", "round-robin", {"round-robin", "least-outstanding", "kv-aware"});
    sc.router = router == "round-robin" ? Router::round_robin : router == "least-outstanding" ? Router::least_outstanding : Router::kv_aware;
    r.batching = s.choice_or("batching", "continuous", {"continuous", "static"}) == "static" ? Batching::static_batch : Batching::continuous;
    r.prefix_caching = s.get_or<bool>("prefix_caching", r.batching == Batching::continuous);
    if (r.prefix_caching && r.batching == Batching::static_batch) s.at("prefix_caching", "").fail_message("prefix caching needs continuous batching");
    if (r.pp > 1 && r.batching == Batching::static_batch) s.at("batching", "").fail("continuous batching with pp > 1 (static batching runs one batch, not one per stage)", "static");
    r.preemption = s.choice_or("preemption", "recompute", {"recompute", "swap"}) == "swap" ? Preemption::swap : Preemption::recompute;
    if (auto sw = s.find("swap_space")) {
      if (r.preemption != Preemption::swap) sw->fail_message("swap_space applies to preemption: swap");
      r.swap_space_bytes = sw->as<Bytes>(yaml::in_range(Bytes(1), Bytes(1e15), "from 1 B to 1 PB of host memory")).value();
    }
    if (r.preemption == Preemption::swap) {
      r.swap_bandwidth = host_link_bandwidth(*sc.topology);
      if (!(r.swap_bandwidth > 0)) s.at("preemption", "").fail_message(fmt::format("swap needs a GPU-to-CPU path in {}; it has none", sc.topology->name));
    }
    if (auto d = s.find("disaggregation")) {
      if (s.find("replicas")) d->fail_message("give either replicas or disaggregation (its prefill + decode replicas), not both");
      if (r.batching == Batching::static_batch) d->fail_message("disaggregation needs continuous batching");
      yaml::Map dm(*d);
      Disaggregation dis;
      dis.prefill = dm.get<int>("prefill", yaml::positive<int>());
      dis.decode = dm.get<int>("decode", yaml::positive<int>());
      dm.finish();
      sc.replicas = dis.prefill + dis.decode;
      sc.disaggregation = std::move(dis);
    }
    s.finish();
    const int gpus = static_cast<int>(sc.topology->gpus().size());
    // In 64 bits: 2^31 - 1 replicas of TP 2 had wrapped to "need -2 GPUs".
    if (const std::int64_t need = std::int64_t{r.tp} * r.pp * sc.replicas; need > gpus) {
      serving_node.fail_message(fmt::format("impossible plan: {} replica{} x TP {} x PP {} need{} {} GPUs; {} has {}", sc.replicas, sc.replicas == 1 ? "" : "s",
                                            r.tp, r.pp, sc.replicas == 1 ? "s" : "", need,
                                            sc.topology->name, gpus));
    }
    try {
      (void)kv_block_capacity(r, hw);
      if (r.tp > 1) r.all_reduce_seconds = tp_all_reduce_seconds(sc.topology, r.tp);
      check_placement(*sc.topology, r.tp, r.pp, sc.replicas);
      if (r.pp > 1) r.pp_send_seconds = pp_send_seconds(sc.topology, r.tp, r.pp);
      if (sc.disaggregation) kv_transfer_network(sc.topology, r.tp, r.pp, *sc.disaggregation);
    } catch (const std::invalid_argument& e) {
      serving_node.fail_message(fmt::format("impossible plan: {}", e.what()));
    }
  }

  std::optional<yaml::Node> workload_node;  // where the requests come from, for the checks below
  std::filesystem::path trace_file;         // a trace's requests are blamed on their rows
  {
    const yaml::Node wnode = m.at("workload", "a workload map (requests, arrival, prompt_tokens, output_tokens)");
    workload_node = wnode;
    yaml::Map w(wnode);
    yaml::Map a(w.at("arrival", "an arrival map with a kind"));
    const std::string kind = a.choice("kind", {"poisson", "gamma", "closed-loop", "offline", "trace"});
    const auto seed = w.get_or<std::uint64_t>("seed", 1);
    if (kind == "trace") {
      const yaml::Node f = a.at("file", "the trace CSV's path");
      std::filesystem::path path = f.scalar("a path");
      if (path.is_relative()) path = f.directory() / path;
      std::error_code ec;
      if (std::filesystem::is_directory(path, ec)) f.fail("the path of a trace CSV file", fmt::format("a directory, {}", path.string()));
      if (!std::filesystem::exists(path, ec)) f.fail("the path of a trace CSV file", fmt::format("no file at {}", path.string()));
      a.finish();
      sc.requests = read_trace(path);
      trace_file = path;
      sc.workload_text = fmt::format("trace {} ({} request{})", path.filename().string(), sc.requests.size(), sc.requests.size() == 1 ? "" : "s");
      for (const char* key : {"requests", "duration", "prompt_tokens", "output_tokens", "shared_prefix"}) {
        if (w.find(key)) w.at(key, "").fail_message(fmt::format("'{}' comes from the trace file; remove it", key));
      }
    } else {
      ArrivalProcess p;
      if (kind == "poisson" || kind == "gamma") {
        p.kind = kind == "poisson" ? ArrivalProcess::Kind::poisson : ArrivalProcess::Kind::gamma;
        p.rate = a.get<double>("rate", yaml::positive<double>());
        // vLLM's gamma shape: below 0.01 (inter-arrival CV past 10) every arrival collapses onto t = 0.
        if (kind == "gamma") p.burstiness = a.get<double>("burstiness", yaml::in_range(0.01, 1e6, "a burstiness from 0.01 (a coefficient of variation of 10) to 1e6"));
      } else {
        p.kind = ArrivalProcess::Kind::offline;
        if (kind == "closed-loop") sc.closed_loop = ClosedLoop{a.get<int>("concurrency", yaml::positive<int>())};
      }
      a.finish();
      int count = 0;
      if (auto d = w.find("duration")) {
        if (p.kind == ArrivalProcess::Kind::offline) d->fail("no duration for offline or closed-loop load (give requests)");
        if (w.find("requests")) d->fail("either requests or duration, not both");
        // Each request is held in memory with its results: a workload is bounded like a request count.
        const double requests = d->as<Seconds>(yaml::positive<Seconds>()).value() * p.rate;
        if (!(requests <= kMaxRequests)) {
          d->fail_message(fmt::format("{} at {:g} requests/s is {:.3g} requests; at most {} are supported (shorten the duration)", d->scalar(""), p.rate, requests,
                                      kMaxRequests));
        }
        if (requests < 0.5) {
          d->fail_message(fmt::format("{} at {:g} requests/s is {:.3g} requests; at least 1 is needed (raise the rate or lengthen the duration)", d->scalar(""),
                                      p.rate, requests));
        }
        count = std::max(1, static_cast<int>(std::llround(requests)));
      } else {
        count = w.get<int>("requests", yaml::in_range(1, kMaxRequests, "from 1 to 10,000,000 requests"));
        if (p.rate > 0 && !(count / p.rate <= kMaxArrivalSeconds)) {
          a.at("rate", "").fail_message(fmt::format("{} requests at {:g} requests/s arrive over about {:.3g} s, beyond the {:.3g} s a simulation can span (raise the rate)",
                                                    count, p.rate, count / p.rate, kMaxArrivalSeconds));
        }
      }
      const LengthDistribution prompt = read_lengths(w.at("prompt_tokens", "a token count or a length distribution"));
      const LengthDistribution output = read_lengths(w.at("output_tokens", "a token count or a length distribution"));
      SharedPrefix prefix;
      if (auto pn = w.find("shared_prefix")) {
        yaml::Map pm(*pn);
        prefix.tokens = pm.get<int>("tokens", yaml::in_range(1, 10'000'000, "from 1 to 10,000,000 tokens"));
        prefix.groups = pm.get_or<int>("groups", 1, yaml::in_range(1, 1'000'000, "from 1 to 1,000,000 prefixes"));
        pm.finish();
      }
      try {
        sc.requests = generate_requests(count, p, prompt, output, seed, prefix, r.max_model_len);
      } catch (const std::invalid_argument& e) {
        wnode.fail_message(fmt::format("impossible workload: {} (raise serving.max_model_len, or shorten the lengths)", e.what()));
      }
      if (kind == "poisson" || kind == "gamma") {
        WorkloadRecipe recipe{p, prompt, output, count, 0.0, seed, prefix, r.max_model_len};
        if (auto d = w.find("duration")) recipe.duration = d->as<Seconds>().value();
        sc.recipe = recipe;
      }
      const std::string requests = fmt::format("{} request{}", count, count == 1 ? "" : "s");
      sc.workload_text = kind == "closed-loop" ? fmt::format("{}, closed loop of {}", requests, sc.closed_loop->concurrency)
                         : kind == "offline"   ? fmt::format("{}, offline (all at once)", requests)
                                               : fmt::format("{}, {} at {:g} req/s", requests, kind, p.rate);
    }
    w.finish();
  }
  if (auto c = m.find("cost")) {
    // Offerings rent nodes of their own size: one of another size than the topology's is left out
    // (or refused where it is the only one), as for training (a p5's 8-GPU price had been billed
    // for single-GPU hosts, and a 2-GPU node's price per node divided over 8).
    const int node_gpus = sc.topology->node_count() > 0 ? static_cast<int>(sc.topology->gpus().size()) / sc.topology->node_count() : 0;
    sc.cost = read_cost_section(*c, hw.name, includes, false, node_gpus);
  }
  std::optional<yaml::Node> sizing_node = m.find("sizing");
  if (sizing_node) sc.sizing = read_sizing(*sizing_node, includes);
  if (auto s = m.find("slo")) {
    yaml::Map slo(*s);
    sc.slo.ttft = slo.get_or<Seconds>("ttft", Seconds(0), yaml::positive<Seconds>()).value();
    sc.slo.tpot = slo.get_or<Seconds>("tpot", Seconds(0), yaml::positive<Seconds>()).value();
    sc.slo.e2e = slo.get_or<Seconds>("e2e", Seconds(0), yaml::positive<Seconds>()).value();
    slo.finish();
  }
  m.finish();
  if (sc.sizing) {
    if (sc.slo.ttft <= 0 && sc.slo.tpot <= 0 && sc.slo.e2e <= 0) sizing_node->fail_message("sizing needs an slo to meet (ttft, tpot or e2e)");
    if (sc.sizing->rate > 0 && !sc.recipe) sizing_node->fail_message("a sizing rate needs a poisson or gamma workload to replay at that rate");
    // A closed loop slows its arrivals to what the fleet serves, and an offline batch has no rate:
    // neither asks a fleet to keep up with a load.
    if (sc.closed_loop || (!sc.recipe && !sc.requests.empty() && sc.requests.back().arrival <= sc.requests.front().arrival)) {
      sizing_node->fail_message("sizing needs an open-loop workload whose requests arrive over time (poisson, gamma or a trace), not a closed loop or an offline batch");
    }
    // The sizing replays the workload's span at its rate (WorkloadRecipe::count_at).
    if (sc.sizing->rate > 0 && sc.recipe && sc.recipe->span() * sc.sizing->rate > kMaxRequests) {
      sizing_node->fail_message(fmt::format("a sizing rate of {:g} requests/s over the workload's {:.3g} s is {:.3g} requests; at most {} are supported", sc.sizing->rate,
                                            sc.recipe->span(), sc.recipe->span() * sc.sizing->rate, kMaxRequests));
    }
    if (sc.sizing->rate > 0 && sc.recipe && sc.recipe->span() * sc.sizing->rate < 0.5) {
      sizing_node->fail_message(fmt::format("a sizing rate of {:g} requests/s over the workload's {:.3g} s is {:.3g} requests; at least 1 is needed", sc.sizing->rate,
                                            sc.recipe->span(), sc.recipe->span() * sc.sizing->rate));
    }
  }
  // Every request must fit the context (and so one replica's KV pool, which holds a whole context)
  // and, without chunked prefill, one batch.
  // A request read from a trace is blamed on its row, a generated one on the YAML node.
  const auto fail_request = [&](const ServingRequest& q, const yaml::Node& node, const std::string& message) {
    if (q.trace_line > 0) throw InputError(SourceLocation{std::make_shared<const std::string>(trace_file.string()), q.trace_line, 1}, message);
    node.fail_message(message);
  };
  for (const auto& q : sc.requests) {
    if (q.total_tokens() > r.max_model_len) {
      // vLLM refuses such a request (max_model_len, by default the model's context).
      fail_request(q, workload_node.value_or(body),
                   fmt::format("impossible workload: request {} has {} tokens ({} + {}), more than max_model_len ({}, {}) "
                               "allows (raise serving.max_model_len for a model extended to longer contexts)",
                               q.id, q.total_tokens(), q.prompt_tokens, q.output_tokens, r.max_model_len,
                               r.max_model_len == r.model.seq_len ? fmt::format("{}'s seq_len", r.model.name) : std::string("given")));
    }
    if (r.batching == Batching::static_batch && q.prompt_tokens > r.max_num_batched_tokens) {
      // A static batch prefills its prompts whole, those that fit the budget (docs/serving.md): a longer
      // one had been prefilled alone past it (a probe's 1,000-token prompts under 512).
      fail_request(q, yaml::Map(serving_node).find("max_num_batched_tokens").value_or(serving_node),
                   fmt::format("impossible workload: request {} has a prompt of {} tokens, more than max_num_batched_tokens ({}), which bounds what a "
                               "static batch prefills (raise it)",
                               q.id, q.prompt_tokens, r.max_num_batched_tokens));
    }
    // Without chunked prefill a pass takes a sequence whole.
    if (!r.chunked_prefill && q.longest_pass_tokens() > r.max_num_batched_tokens) {
      fail_request(q, yaml::Map(serving_node).find("max_num_batched_tokens").value_or(serving_node),
                   fmt::format("impossible workload: request {} may need a pass of {} tokens ({} prompt + {} generated, recomputed after a "
                               "preemption), more than max_num_batched_tokens ({}) allows without chunked prefill (raise it or set chunked_prefill: true)",
                               q.id, q.longest_pass_tokens(), q.prompt_tokens, q.output_tokens - 1, r.max_num_batched_tokens));
    }
  }
  return sc;
}

InferenceResult simulate_inference(const InferenceScenario& sc) {
  ClusterConfig config;
  config.replica = sc.replica;
  config.replicas = sc.replicas;
  config.router = sc.router;
  config.disaggregation = sc.disaggregation;
  ClusterRun run = run_cluster(sc.requests, config, *sc.topology->gpu, sc.closed_loop);
  InferenceResult out;
  out.metrics = serving_metrics(run, sc.slo);
  out.kv_blocks_per_replica = run.replicas.front().kv_blocks;
  out.events = run.events;
  out.replicas = std::move(run.replicas);
  out.requests = std::move(run.requests);
  return out;
}

}  // namespace cs::models
