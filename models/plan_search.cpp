#include "clustersim/models/plan_search.hpp"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "training_internal.hpp"

namespace cs::models {

namespace {

std::string recompute_name(Recompute r) { return std::string(to_string(r)); }

// A simulated outcome's numbers from a results line (the resume file or another shard).
void read_numbers(PlanOutcome& o, const nlohmann::json& j) {
  o.step_s = j["step_s"].get<double>();
  o.mfu = j.value("mfu", 0.0);
  o.tokens_per_s = j.value("tokens_per_s", 0.0);
  o.time_to_train_s = j.value("time_to_train_s", 0.0);
  if (j.contains("breakdown") && j["breakdown"].size() == 8) {
    const auto& b = j["breakdown"];
    o.breakdown = {b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]};
  }
}

nlohmann::json to_line(const PlanOutcome& o) {
  nlohmann::json j = {{"key", o.key},
                      {"status", o.status == PlanOutcome::Status::simulated    ? "simulated"
                                 : o.status == PlanOutcome::Status::constraint ? "constraint"
                                 : o.status == PlanOutcome::Status::memory     ? "memory"
                                                                               : "bound"}};
  if (!o.reason.empty()) j["reason"] = o.reason;
  if (o.status == PlanOutcome::Status::simulated) {
    const StepBreakdown& b = o.breakdown;
    j["step_s"] = o.step_s;
    j["mfu"] = o.mfu;
    j["tokens_per_s"] = o.tokens_per_s;
    j["time_to_train_s"] = o.time_to_train_s;
    j["breakdown"] = {b.compute, b.tp_comm, b.cp_comm, b.ep_comm, b.dp_comm, b.pp_comm, b.bubble, b.optimizer};
  }
  if (o.memory_bytes > 0) j["memory_bytes"] = o.memory_bytes;
  return j;
}

// Reads back what an earlier (perhaps killed) run wrote: one JSON object per line; a torn last line
// is skipped (its plan is evaluated again).
std::map<std::string, nlohmann::json> read_results(const std::filesystem::path& file) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("key") && j.contains("status")) {
        const std::string key = j["key"].get<std::string>();
        out[key] = std::move(j);
      }
    } catch (const nlohmann::json::exception&) {
      // torn line
    }
  }
  return out;
}

}  // namespace

namespace {

void price(PlanOutcome& o, double price_per_gpu_hour, double tokens) {
  if (tokens <= 0) o.time_to_train_s = 0;
  const double hours = (tokens > 0 ? o.time_to_train_s : o.step_s) / 3600.0 * o.job.plan.gpus();
  o.gpu_hours = hours;
  o.cost = price_per_gpu_hour > 0 ? hours * price_per_gpu_hour : hours;
}

}  // namespace

namespace {

// A plan's step cannot be shorter than the compute of its busiest pipeline stage (every micro-batch's
// forward, backward and recompute kernels, timed by the same per-op model the simulation uses,
// communication left out) plus the pipeline fill: the last stage starts only after the first
// micro-batch's forward chunk has crossed the p - 1 stages before it.
double lower_bound(const TrainingJob& j, const hardware::HardwareProfile& hw) {
  const TransformerSpec& m = j.model;
  const ParallelismPlan& p = j.plan;
  const Shard shard = shard_of(j);
  const CommTime none = [](CommGroup, CollectiveOp, double) { return Seconds(0); };
  const auto compute = [&](const std::vector<Op>& ops) {
    const OpsTime t = time_ops(ops, hw, j.precision, none, j.recompute, false);
    return std::make_pair(t.forward.compute, t.forward.compute + t.backward.compute + t.recompute.compute);
  };
  const auto dense = compute(layer_forward_ops(m, 0, shard));
  const auto moe = m.moe ? compute(layer_forward_ops(m, m.moe->dense_layers, shard)) : dense;
  const auto head = compute(head_forward_ops(m, shard));
  const std::vector<LayerRange> ranges = chunk_ranges(m.layers, p.pp, p.vpp);
  double busiest = 0, first_chunk_forward = 0;
  for (int s = 0; s < p.pp; ++s) {
    double work = 0;
    for (int v = 0; v < p.vpp; ++v) {
      const LayerRange& r = ranges[static_cast<std::size_t>(v * p.pp + s)];
      double forward = 0;
      for (int l = r.first; l < r.first + r.count; ++l) {
        const auto& t = m.is_moe_layer(l) ? moe : dense;
        work += t.second;
        forward += t.first;
      }
      if (v == 0 && s < p.pp - 1) first_chunk_forward += forward;
    }
    if (s == p.pp - 1) work += head.second;
    busiest = std::max(busiest, work);
  }
  return busiest * j.micro_batches() + first_chunk_forward;
}

}  // namespace

std::string plan_key(const TrainingJob& j) {
  const ParallelismPlan& p = j.plan;
  return fmt::format("gpus={} tp={} pp={} vpp={} cp={} ep={} dp={} micro={} zero={} recompute={} sp={}", p.gpus(), p.tp, p.pp, p.vpp, p.cp, p.ep, p.dp,
                     j.micro_batch, p.zero_stage, recompute_name(j.recompute), p.sequence_parallel && p.tp > 1 ? 1 : 0);
}

std::string plan_text(const TrainingJob& j) {
  const auto& p = j.plan;
  std::string s = fmt::format("TP{} PP{}", p.tp, p.pp);
  if (p.vpp > 1) s += fmt::format(" vpp{}", p.vpp);
  if (p.cp > 1) s += fmt::format(" CP{}", p.cp);
  if (p.ep > 1) s += fmt::format(" EP{}", p.ep);
  s += fmt::format(" DP{} mb{} Z{} {}{}", p.dp, j.micro_batch, p.zero_stage, to_string(j.recompute), p.sequence_parallel && p.tp > 1 ? " SP" : "");
  return s;
}

SearchSpace default_space(const TrainingJob& job, const topology::Topology& topo) {
  SearchSpace s;
  s.gpus = {job.plan.gpus()};
  int per_node = 0;
  const auto& gpus = topo.gpus();
  for (auto v : gpus) per_node += topo.device(v).node == topo.device(gpus.front()).node ? 1 : 0;
  for (int t = 1; t <= std::max(1, per_node); t *= 2) s.tp.push_back(t);
  for (int p = 1; p <= std::min(64, job.model.layers); ++p) {
    if (job.model.layers % p == 0) s.pp.push_back(p);
  }
  s.vpp = {1, 2, 4};
  s.cp = {1};
  s.ep = {1};
  if (job.model.moe) {
    for (int e = 2; e <= std::min(64, job.model.moe->experts); e *= 2) {
      if (job.model.moe->experts % e == 0) s.ep.push_back(e);
    }
  }
  s.micro = {1, 2, 4};
  s.zero = {1};
  s.recompute = {Recompute::none, Recompute::selective, Recompute::full};
  s.sequence_parallel = {true};
  // The job's own plan is always in the space, so that the search can say where it ranks.
  const auto with = [](std::vector<int>& v, int x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) {
      v.push_back(x);
      std::sort(v.begin(), v.end());
    }
  };
  with(s.tp, job.plan.tp);
  with(s.pp, job.plan.pp);
  with(s.vpp, job.plan.vpp);
  with(s.cp, job.plan.cp);
  with(s.ep, job.plan.ep);
  with(s.micro, job.micro_batch);
  with(s.zero, job.plan.zero_stage);
  if (!job.plan.sequence_parallel && job.plan.tp > 1) s.sequence_parallel.push_back(false);
  return s;
}

SearchResult search_plans(const TrainingJob& base, const topology::Topology& topo, const SearchSpace& space, const SearchOptions& options) {
  for (const auto* dim : {&space.gpus, &space.tp, &space.pp, &space.vpp, &space.cp, &space.ep, &space.micro, &space.zero}) {
    if (dim->empty()) throw std::invalid_argument("every dimension of the search space needs at least one value");
  }
  if (space.recompute.empty() || space.sequence_parallel.empty()) throw std::invalid_argument("every dimension of the search space needs at least one value");
  if (!topo.gpu) throw std::invalid_argument(fmt::format("topology {} names no GPU hardware profile", topo.name));
  const int cluster = static_cast<int>(topo.gpus().size());

  // Enumerate in a fixed order; plans that differ only in a setting that does not apply (sequence
  // parallelism at TP 1) are one plan.
  SearchResult out;
  std::map<std::string, std::size_t> seen;
  for (int g : space.gpus) {
    for (int tp : space.tp) {
      for (int pp : space.pp) {
        for (int vpp : space.vpp) {
          for (int cp : space.cp) {
            for (int ep : space.ep) {
              for (int micro : space.micro) {
                for (int zero : space.zero) {
                  for (Recompute rc : space.recompute) {
                    for (bool sp : space.sequence_parallel) {
                      TrainingJob j = base;
                      ParallelismPlan& p = j.plan;
                      p.tp = tp;
                      p.pp = pp;
                      p.vpp = vpp;
                      p.cp = cp;
                      p.ep = ep;
                      p.zero_stage = zero;
                      p.sequence_parallel = sp && tp > 1;
                      p.tp_overlap = p.tp_overlap && p.sequence_parallel;
                      p.schedule = vpp > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
                      j.micro_batch = micro;
                      j.recompute = rc;
                      PlanOutcome o;
                      const int model_parallel = tp * pp * cp;
                      p.dp = std::max(1, g / model_parallel);
                      o.job = j;
                      o.key = plan_key(j);
                      if (seen.count(o.key) != 0) continue;
                      // Constraints first: they cost nothing.
                      std::string why;
                      if (g % model_parallel != 0) {
                        why = fmt::format("tp x pp x cp = {} does not divide the {} GPUs", model_parallel, g);
                      } else if (g > cluster) {
                        why = fmt::format("{} GPUs but the topology has {}", g, cluster);
                      } else if (!space.uneven_layers && j.model.layers % (pp * vpp) != 0) {
                        why = fmt::format("pp x vpp = {} does not divide the {} layers", pp * vpp, j.model.layers);
                      } else {
                        try {
                          check_job(j, cluster);
                        } catch (const std::invalid_argument& e) {
                          why = e.what();
                        }
                      }
                      if (!why.empty()) {
                        o.status = PlanOutcome::Status::constraint;
                        o.reason = why;
                      } else {
                        const MemoryReport mem = estimate_memory(j, *topo.gpu);
                        o.memory_bytes = mem.worst().total().value();
                        if (!mem.fits()) {
                          o.status = PlanOutcome::Status::memory;
                          o.reason = mem.verdict();
                        } else {
                          o.lower_bound_s = lower_bound(j, *topo.gpu);
                        }
                      }
                      seen[o.key] = out.outcomes.size();
                      out.outcomes.push_back(std::move(o));
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  out.enumerated = out.outcomes.size();

  // What an earlier run already simulated.
  std::map<std::string, nlohmann::json> done;
  if (!options.results.empty() && std::filesystem::exists(options.results)) done = read_results(options.results);
  std::vector<std::size_t> pending;  // this shard's plans to simulate or read back, in order
  for (std::size_t i = 0; i < out.outcomes.size(); ++i) {
    PlanOutcome& o = out.outcomes[i];
    if (o.status != PlanOutcome::Status::simulated) continue;
    if (static_cast<int>(i % static_cast<std::size_t>(std::max(1, options.shards))) != options.shard) {
      o.evaluated = false;
      continue;
    }
    const auto it = done.find(o.key);
    if (it != done.end() && it->second.value("status", std::string()) == "simulated" && it->second.contains("step_s")) {
      read_numbers(o, it->second);
      o.resumed = true;
      ++out.resumed;
    }
    pending.push_back(i);  // resumed plans too: the bound must treat them as a fresh run would
  }
  // Rewrite the file with what is known (drops torn lines and duplicates), then append as plans finish.
  std::ofstream results;
  std::mutex mutex;
  if (!options.results.empty()) {
    const auto tmp = options.results.string() + ".tmp";
    {
      std::ofstream f(tmp, std::ios::trunc);
      if (!f) throw std::invalid_argument(fmt::format("cannot write the results file {}", options.results.string()));
      for (const auto& o : out.outcomes) {
        if (o.resumed) f << to_line(o).dump() << "\n";
      }
    }
    std::filesystem::rename(tmp, options.results);
    results.open(options.results, std::ios::app);
  }
  const int threads = std::max(1, options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency()));
  if (options.bound && options.shards > 1) throw std::invalid_argument("the lower-bound pruning runs in one process: leave --bound out under mpirun");
  const bool bound = options.bound && options.keep > 0;
  if (bound) {
    std::stable_sort(pending.begin(), pending.end(), [&](std::size_t a, std::size_t b) { return out.outcomes[a].lower_bound_s < out.outcomes[b].lower_bound_s; });
  }
  std::atomic<std::size_t> next{0}, finished{0};
  std::exception_ptr error;
  std::vector<std::size_t> round;
  std::vector<char> processed(out.outcomes.size(), 0);
  const auto worker = [&] {
    for (;;) {
      const std::size_t n = next.fetch_add(1);
      if (n >= round.size()) return;
      PlanOutcome& o = out.outcomes[round[n]];
      processed[round[n]] = 1;
      if (o.resumed) continue;  // read back from the results file
      try {
        const TrainingResult r = simulate_training(o.job, topo);
        o.step_s = r.step_time.value();
        o.mfu = r.mfu;
        o.tokens_per_s = r.tokens_per_s;
        o.time_to_train_s = r.time_to_train.value();
        o.breakdown = r.breakdown;
      } catch (const std::invalid_argument& e) {
        o.status = PlanOutcome::Status::constraint;
        o.reason = e.what();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        next = round.size();
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (results.is_open()) {
        results << to_line(o).dump() << "\n";
        results.flush();
      }
      const std::size_t f = ++finished;
      if (options.progress) options.progress(f, pending.size());
    }
  };
  // The keep-th best step time and cost (GPU-seconds per step) among the plans simulated so far.
  const auto kth = [&](bool cost) {
    std::vector<double> v;
    for (std::size_t i = 0; i < out.outcomes.size(); ++i) {
      const auto& o = out.outcomes[i];
      if (processed[i] && o.status == PlanOutcome::Status::simulated && o.step_s > 0) v.push_back(cost ? o.step_s * o.job.plan.gpus() : o.step_s);
    }
    if (static_cast<int>(v.size()) < options.keep) return 1e300;
    std::nth_element(v.begin(), v.begin() + (options.keep - 1), v.end());
    return v[static_cast<std::size_t>(options.keep - 1)];
  };
  // Rounds of a fixed size (the same for any thread count): prune by the bound, simulate the rest.
  constexpr std::size_t kRound = 64;
  for (std::size_t first = 0; first < pending.size() && !error; first += kRound) {
    round.clear();
    const double best_time = bound ? kth(false) : 1e300, best_cost = bound ? kth(true) : 1e300;
    for (std::size_t n = first; n < std::min(pending.size(), first + kRound); ++n) {
      PlanOutcome& o = out.outcomes[pending[n]];
      if (bound && o.lower_bound_s > best_time && o.lower_bound_s * o.job.plan.gpus() > best_cost) {
        if (o.resumed) --out.resumed;  // a run from scratch would not have simulated it either
        o.resumed = false;
        o.status = PlanOutcome::Status::bound;
        o.reason = fmt::format("its lower bound {:.4g} s exceeds the {}th best step {:.4g} s and cost", o.lower_bound_s, options.keep, best_time);
      } else {
        round.push_back(pending[n]);
      }
    }
    next = 0;
    std::vector<std::thread> pool;
    for (int t = 1; t < threads && static_cast<std::size_t>(t) < round.size(); ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);

  for (PlanOutcome& o : out.outcomes) {
    switch (o.status) {
      case PlanOutcome::Status::constraint: ++out.constraint; break;
      case PlanOutcome::Status::memory: ++out.memory; break;
      case PlanOutcome::Status::bound: ++out.bound; break;
      case PlanOutcome::Status::simulated:
        ++out.simulated;
        price(o, options.price_per_gpu_hour, base.token_budget);
        break;
    }
  }
  return out;
}

std::string shard_lines(const SearchResult& result) {
  std::string out;
  for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
    const PlanOutcome& o = result.outcomes[i];
    if (!o.evaluated) continue;
    if (o.status == PlanOutcome::Status::simulated || !o.reason.empty()) {
      nlohmann::json j = to_line(o);
      j["index"] = i;
      j["resumed"] = o.resumed;
      out += j.dump() + "\n";
    }
  }
  return out;
}

void merge_shard(SearchResult& into, const std::string& lines, double price_per_gpu_hour, double token_budget) {
  std::size_t start = 0;
  while (start < lines.size()) {
    const std::size_t end = lines.find('\n', start);
    const nlohmann::json j = nlohmann::json::parse(lines.substr(start, end - start));
    start = end == std::string::npos ? lines.size() : end + 1;
    const auto i = j["index"].get<std::size_t>();
    if (i >= into.outcomes.size() || into.outcomes[i].key != j["key"].get<std::string>()) {
      throw std::invalid_argument("a shard's results do not match this search space (were the ranks given the same scenario?)");
    }
    PlanOutcome& o = into.outcomes[i];
    if (o.evaluated) continue;
    o.evaluated = true;
    o.resumed = j.value("resumed", false);
    if (o.resumed) ++into.resumed;
    if (j["status"] == "simulated") {
      read_numbers(o, j);
      price(o, price_per_gpu_hour, token_budget);
    } else {
      // Simulation found the plan impossible.
      o.status = PlanOutcome::Status::constraint;
      o.reason = j.value("reason", std::string());
      --into.simulated;
      ++into.constraint;
    }
  }
}

std::vector<std::size_t> pareto_front(const SearchResult& result) {
  std::vector<std::size_t> sim;
  for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
    if (result.outcomes[i].status == PlanOutcome::Status::simulated) sim.push_back(i);
  }
  const auto time = [&](std::size_t i) { const auto& o = result.outcomes[i]; return o.time_to_train_s > 0 ? o.time_to_train_s : o.step_s; };
  std::sort(sim.begin(), sim.end(), [&](std::size_t a, std::size_t b) {
    return time(a) < time(b) || (time(a) == time(b) && (result.outcomes[a].cost < result.outcomes[b].cost || (result.outcomes[a].cost == result.outcomes[b].cost && a < b)));
  });
  std::vector<std::size_t> front;
  double best = 1e300;
  for (std::size_t i : sim) {
    if (result.outcomes[i].cost < best) {
      front.push_back(i);
      best = result.outcomes[i].cost;
    }
  }
  return front;
}

}  // namespace cs::models
