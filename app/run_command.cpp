#include "run_command.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/models/serving_scenario.hpp"
#include "clustersim/models/training_scenario.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/text_table.hpp"
#include "clustersim/sim/time.hpp"
#include "output_dir.hpp"
#include "infeasible.hpp"
#include "report_command.hpp"

namespace cs::app {

namespace {

using models::TrainingResult;
using models::TrainingScenario;

struct Options {
  std::string scenario;
  bool json = false;
  std::string out;
  bool no_fold = false;
  bool ops = false;
  std::string report;
};

double gib(Bytes b) { return b.value() / double(1ull << 30); }

// A rate to `decimals` places, or to three significant figures where that would round it away (a
// tiny model's 0.1 tokens/s is not 0).
std::string rate_text(double v, int decimals) {
  return v >= 100 * std::pow(10.0, -decimals) ? fmt::format("{:.{}f}", v, decimals) : fmt::format("{:.3g}", v);
}

// The header of requests.csv, by which a training run into the same directory knows it as clustersim's.
constexpr const char* kRequestsHeader = "id,arrival_s,prompt_tokens,output_tokens,replica,first_scheduled_s,first_token_s,finish_s,ttft_s,tpot_s,e2e_s,preemptions";

std::string plan_summary(const models::TrainingJob& job) {
  const auto& p = job.plan;
  std::string s = fmt::format("TP{} PP{} DP{} CP{} EP{}", p.tp, p.pp, p.dp, p.cp, p.ep);
  if (p.etp > 1) s += fmt::format(" ETP{}", p.etp);
  if (p.pp > 1) {
    s += fmt::format(", {}{}", to_string(p.schedule),
                     p.vpp > 1 ? fmt::format(" (vpp {}{})", p.vpp, p.microbatch_group > 0 ? fmt::format(", micro-batches in groups of {}", p.microbatch_group) : "") : "");
    s += p.p2p_overlapped() ? ", overlapped pipeline sends" : ", blocking pipeline sends";
  }
  if (p.tp > 1) s += p.sequence_parallel ? ", sequence parallel" : ", no sequence parallel";
  if (p.tp_overlap && p.tp > 1) s += ", TP overlap";  // at TP 1 there is nothing to overlap
  s += fmt::format(", ZeRO-{}{}", p.zero_stage, p.whole_gradient_all_reduce() ? " (gradients all-reduced)" : "");
  if (models::unfused_accumulation(job)) s += ", unfused gradient accumulation";
  s += job.recompute == models::Recompute::none ? ", no recompute" : fmt::format(", {} recompute", to_string(job.recompute));
  s += fmt::format(", {}", hardware::to_string(job.precision));
  return s;
}

std::string_view kind_name(models::OpKind k) {
  switch (k) {
    case models::OpKind::gemm: return "gemm";
    case models::OpKind::attention: return "attention";
    case models::OpKind::memory: return "memory";
    case models::OpKind::comm: return "comm";
  }
  return "?";
}

// One micro-batch's operations on one rank: times per pass and the rate each achieves.
std::string ops_text(const char* title, const std::vector<models::OpTiming>& ops) {
  std::string out = fmt::format("\n{} (one micro-batch, one rank; milliseconds)\n", title);
  using A = reports::TextTable::Align;
  reports::TextTable t({"op", "kind", "forward", "backward", "recompute", "forward rate"}, {A::left, A::left, A::right, A::right, A::right, A::right});
  double f = 0, b = 0, rc = 0;
  for (const auto& op : ops) {
    std::string rate;
    if (op.flops > 0 && op.forward > 0) rate = fmt::format("{:.0f} TFLOP/s", op.flops / op.forward / 1e12);
    if (op.kind == models::OpKind::memory && op.forward > 0) rate = fmt::format("{:.0f} GB/s", op.bytes / op.forward / 1e9);
    t.add_row({op.name, std::string(kind_name(op.kind)), fmt::format("{:.3f}", op.forward * 1e3), fmt::format("{:.3f}", op.backward * 1e3),
               fmt::format("{:.3f}", op.recompute * 1e3), rate});
    f += op.forward;
    b += op.backward;
    rc += op.recompute;
  }
  t.add_row({"total", "", fmt::format("{:.3f}", f * 1e3), fmt::format("{:.3f}", b * 1e3), fmt::format("{:.3f}", rc * 1e3), ""});
  return out + t.render("  ");
}

nlohmann::json ops_json(const std::vector<models::OpTiming>& ops) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& op : ops) {
    a.push_back({{"op", op.name}, {"kind", kind_name(op.kind)}, {"forward_s", op.forward}, {"backward_s", op.backward}, {"recompute_s", op.recompute},
                 {"flops", op.flops}, {"bytes", op.bytes}});
  }
  return a;
}

nlohmann::json to_json(const TrainingScenario& sc, const TrainingResult& r) {
  const auto& b = r.breakdown;
  nlohmann::json j;
  j["scenario"] = sc.name;
  j["model"] = sc.job.model.name;
  j["topology"] = sc.topology->name;
  j["gpu"] = sc.topology->gpu->name;
  j["gpus"] = r.gpus;
  j["plan"] = plan_summary(sc.job);
  j["micro_batches"] = r.micro_batches;
  j["step_time_s"] = r.step_time.value();
  j["tokens_per_step"] = r.tokens_per_step;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens_per_s_per_gpu"] = r.tokens_per_s / r.gpus;
  j["mfu"] = r.mfu;
  j["hfu"] = r.hfu;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["model_flops_per_step"] = r.model_flops_per_step;
  j["hardware_flops_per_step"] = r.hardware_flops_per_step;
  j["breakdown_s"] = nlohmann::json::object();
  for (const auto& [part, seconds] : models::breakdown_parts(b)) j["breakdown_s"][part] = seconds;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.memory.stages) {
    stages.push_back({{"stage", s.stage},
                      {"parameters", s.parameters},
                      {"weights_bytes", s.weights.value()},
                      {"gradients_bytes", s.gradients.value()},
                      {"optimizer_bytes", s.optimizer.value()},
                      {"activations_bytes", s.activations.value()},
                      {"comm_buffers_bytes", s.comm_buffers.value()},
                      {"allowance_bytes", s.allowance.value()},
                      {"total_bytes", s.total().value()}});
  }
  j["memory"] = {{"capacity_bytes", r.memory.capacity.value()}, {"fits", r.memory.fits()}, {"marginal", r.memory.marginal()}, {"verdict", r.memory.verdict()},
                 {"worst_stage", r.memory.worst_stage}, {"stages", stages}};
  if (sc.job.token_budget > 0) {
    j["train"] = {{"tokens", sc.job.token_budget}, {"seconds", r.time_to_train.value()}, {"days", r.time_to_train.value() / 86400.0},
                  {"gpu_hours", r.gpu_hours}};
  }
  j["simulation"] = {{"tasks", r.tasks}, {"events", r.stats.events}, {"flows", r.stats.flows}, {"folded", r.folded}};
  j["notes"] = r.notes;
  j["ops"] = {{"embedding", ops_json(r.embedding_ops)}, {"head", ops_json(r.head_ops)}};
  if (!r.layer_ops.empty()) j["ops"]["layer"] = ops_json(r.layer_ops);
  if (!r.moe_layer_ops.empty()) j["ops"]["moe_layer"] = ops_json(r.moe_layer_ops);
  return j;
}

std::string summary_text(const TrainingScenario& sc, const TrainingResult& r) {
  std::string out;
  const auto& hw = *sc.topology->gpu;
  out += fmt::format("{}: {} on {} ({} of {} {} GPUs)\n", sc.name, sc.job.model.name, sc.topology->name, r.gpus, sc.topology->gpus().size(), hw.name);
  out += fmt::format("plan: {}\n", plan_summary(sc.job));
  out += fmt::format("batch: {} sequence{} of {} tokens per step = {} micro-batch{} of {} per data-parallel rank\n", sc.job.global_batch,
                     sc.job.global_batch == 1 ? "" : "s", sc.job.model.seq_len, r.micro_batches, r.micro_batches == 1 ? "" : "es", sc.job.micro_batch);
  out += "\n";
  // Steps under 0.1 s (small models) in milliseconds: three decimals of a second read 0.000 there.
  const bool in_ms = r.step_time.value() < 0.1;
  const double unit = in_ms ? 1e3 : 1.0;
  const char* unit_name = in_ms ? "ms" : "s";
  out += fmt::format("  step time         {:.3f} {}\n", r.step_time.value() * unit, unit_name);
  out += fmt::format("  throughput        {} tokens/s ({} per GPU)\n", rate_text(r.tokens_per_s, 0), rate_text(r.tokens_per_s / r.gpus, 1));
  out += fmt::format("  MFU / HFU         {:.1f}% / {:.1f}%\n", 100 * r.mfu, 100 * r.hfu);
  out += fmt::format("  model TFLOP/s     {:.1f} per GPU\n", r.tflops_per_gpu);
  out += "\nstep breakdown (mean over pipeline stages)\n";
  reports::TextTable t({"part", in_ms ? "ms" : "seconds", "share"}, {reports::TextTable::Align::left, reports::TextTable::Align::right, reports::TextTable::Align::right});
  const auto& b = r.breakdown;
  const double step = r.step_time.value();
  auto row = [&](const char* name, double v) { t.add_row({name, fmt::format("{:.3f}", v * unit), fmt::format("{:.1f}%", 100 * v / step)}); };
  row("compute", b.compute);
  row("exposed TP communication", b.tp_comm);
  row("exposed CP communication", b.cp_comm);
  row("exposed EP communication", b.ep_comm);
  row("exposed DP communication", b.dp_comm);
  row("pipeline sends", b.pp_comm);
  row("pipeline bubble", b.bubble);
  row("optimizer", b.optimizer);
  out += t.render("  ");
  const auto& w = r.memory.worst();
  out += fmt::format("\nmemory per GPU (fullest: pipeline stage {}, {} parameters)\n", w.stage,
                     w.parameters >= 1e8 ? fmt::format("{:.2f} B", w.parameters / 1e9) : fmt::format("{:.2f} M", w.parameters / 1e6));
  reports::TextTable mt({"part", "GiB"}, {reports::TextTable::Align::left, reports::TextTable::Align::right});
  auto mrow = [&](const char* name, Bytes v) { mt.add_row({name, fmt::format("{:.2f}", gib(v))}); };
  mrow("weights", w.weights);
  mrow("gradients", w.gradients);
  mrow("optimizer states", w.optimizer);
  mrow("activations", w.activations);
  mrow("communication buffers", w.comm_buffers);
  mrow("allowance (context, fragmentation)", w.allowance);
  mrow("total", w.total());
  out += mt.render("  ");
  out += fmt::format("  {}\n", r.memory.verdict());
  if (sc.job.token_budget > 0) {
    out += fmt::format("\ntime to train {:.4g} tokens: {}, {}\n", sc.job.token_budget, days_text(r.time_to_train), gpu_hours_text(r.gpu_hours));
  }
  for (const auto& n : r.notes) out += fmt::format("note: {}\n", n);
  out += fmt::format("simulated: {} tasks, {} events, {} flows{}\n", r.tasks, r.stats.events, r.stats.flows, r.folded ? "" : " (--no-fold: every rank)");
  return out;
}

// ---- inference scenarios -------------------------------------------------------------------------

std::string ms(double s) { return fmt::format("{:.1f}", s * 1e3); }

// The lengths a workload serves: their means, and how many generated requests were drawn again to
// fit the context.
struct LengthsServed {
  std::size_t redrawn = 0;
  double mean_prompt = 0, mean_output = 0;
};
LengthsServed lengths_served(const models::InferenceScenario& sc) {
  LengthsServed l;
  for (const auto& q : sc.requests) {
    l.redrawn += q.redrawn ? 1 : 0;
    l.mean_prompt += q.prompt_tokens;
    l.mean_output += q.output_tokens;
  }
  if (!sc.requests.empty()) {
    l.mean_prompt /= static_cast<double>(sc.requests.size());
    l.mean_output /= static_cast<double>(sc.requests.size());
  }
  return l;
}

nlohmann::json inference_json(const models::InferenceScenario& sc, const models::InferenceResult& r) {
  const auto& m = r.metrics;
  const auto stats = [](const models::LatencyStats& s) {
    return nlohmann::json{{"mean_ms", s.mean * 1e3}, {"median_ms", s.median * 1e3}, {"p90_ms", s.p90 * 1e3}, {"p99_ms", s.p99 * 1e3}};
  };
  nlohmann::json j;
  j["scenario"] = sc.name;
  j["kind"] = "inference";
  j["model"] = sc.replica.model.name;
  j["gpu"] = sc.topology->gpu->name;
  j["tp"] = sc.replica.tp;
  j["pp"] = sc.replica.pp;
  j["ep"] = sc.replica.ep;
  j["replicas"] = sc.replicas;
  if (sc.disaggregation) j["disaggregation"] = {{"prefill", sc.disaggregation->prefill}, {"decode", sc.disaggregation->decode}};
  j["router"] = to_string(sc.router);
  j["batching"] = to_string(sc.replica.batching);
  j["preemption"] = to_string(sc.replica.preemption);
  j["workload"] = sc.workload_text;
  const LengthsServed lengths = lengths_served(sc);
  j["lengths"] = {{"mean_prompt_tokens", lengths.mean_prompt}, {"mean_output_tokens", lengths.mean_output}, {"redrawn", lengths.redrawn}};
  j["completed"] = m.completed;
  j["duration_s"] = m.duration;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.request_goodput;
  j["output_token_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["ttft"] = stats(m.ttft);
  j["tpot"] = stats(m.tpot);
  j["itl"] = stats(m.itl);
  j["max_itl"] = stats(m.itl_max);
  j["e2e_latency"] = stats(m.e2e);
  j["queueing_delay"] = stats(m.queueing);
  j["mean_concurrency"] = m.mean_concurrency;
  j["kv_cache_use"] = m.mean_kv_use;
  j["kv_blocks_per_replica"] = r.kv_blocks_per_replica;
  j["preemptions"] = m.preemptions;
  j["swaps"] = m.swaps;
  j["prefix_caching"] = sc.replica.prefix_caching;
  j["prefix_cache_hit_rate"] = m.prefix_hit_rate;
  if (sc.disaggregation) j["kv_transfers"] = {{"count", m.kv_transfers}, {"mean_ms", m.mean_kv_transfer * 1e3}};
  nlohmann::json hist = nlohmann::json::object();
  std::vector<std::int64_t> sizes;
  for (const auto& rep : r.replicas) {
    if (sizes.size() < rep.batch_size_histogram.size()) sizes.resize(rep.batch_size_histogram.size(), 0);
    for (std::size_t i = 0; i < rep.batch_size_histogram.size(); ++i) sizes[i] += rep.batch_size_histogram[i];
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > 0) hist[std::to_string(i)] = sizes[i];
  }
  j["batch_size_histogram"] = hist;
  j["events"] = r.events;
  return j;
}

std::string inference_text(const models::InferenceScenario& sc, const models::InferenceResult& r) {
  const auto& m = r.metrics;
  std::string shard = fmt::format("TP {}", sc.replica.tp);
  if (sc.replica.pp > 1) shard += fmt::format(", PP {}", sc.replica.pp);
  if (sc.replica.ep > 1) shard += fmt::format(", EP {}", sc.replica.ep);
  const int gpus = sc.replicas * sc.replica.tp * sc.replica.pp;
  std::string out = fmt::format("{}: {} on {} {} GPU{} ({} replica{} of {}), {}\n", sc.name, sc.replica.model.name, gpus, sc.topology->gpu->name,
                                gpus == 1 ? "" : "s", sc.replicas, sc.replicas == 1 ? "" : "s", shard, sc.workload_text);
  out += fmt::format("  replicas          {}, {} router, {} batching, preemption by {}\n",
                     sc.disaggregation ? fmt::format("{} prefill + {} decode (disaggregated)", sc.disaggregation->prefill, sc.disaggregation->decode)
                                       : fmt::format("{} aggregated", sc.replicas),
                     to_string(sc.router), to_string(sc.replica.batching), to_string(sc.replica.preemption));
  out += fmt::format("  requests          {} completed in {:.1f} s: {:.2f} req/s, goodput {:.2f} req/s\n", m.completed, m.duration, m.request_throughput,
                     m.request_goodput);
  out += fmt::format("  tokens/s          {:.0f} output, {:.0f} total\n", m.output_throughput, m.total_token_throughput);
  if (const LengthsServed l = lengths_served(sc); l.redrawn > 0) {
    // Said, as the distributions asked for are not the lengths served (a lognormal of median 7,000
    // tokens under an 8,192 context served prompts of about 1,900 without a word).
    out += fmt::format("  lengths           {} of {} requests ({:.3g}%) drew more tokens than the context ({}) holds and were drawn again: "
                       "mean prompt {:.0f}, output {:.0f} tokens served\n",
                       l.redrawn, sc.requests.size(), 100.0 * static_cast<double>(l.redrawn) / static_cast<double>(sc.requests.size()),
                       sc.replica.context(), l.mean_prompt, l.mean_output);
  }
  reports::TextTable t({"ms", "mean", "median", "P90", "P99"}, {reports::TextTable::Align::left, reports::TextTable::Align::right,
                                                                reports::TextTable::Align::right, reports::TextTable::Align::right,
                                                                reports::TextTable::Align::right});
  const auto row = [&](const char* name, const models::LatencyStats& s) { t.add_row({name, ms(s.mean), ms(s.median), ms(s.p90), ms(s.p99)}); };
  row("TTFT", m.ttft);
  row("TPOT", m.tpot);
  row("ITL", m.itl);
  row("max ITL", m.itl_max);
  row("E2E latency", m.e2e);
  row("queueing", m.queueing);
  out += t.render("  ");
  out += fmt::format("  concurrency       {:.1f} requests in the system on average\n", m.mean_concurrency);
  out += fmt::format("  KV cache          {} blocks of {} tokens per replica, {:.1f}% used on average, {} preemptions\n", r.kv_blocks_per_replica,
                     sc.replica.block_size, 100 * m.mean_kv_use, m.preemptions);
  if (m.swaps > 0) out += fmt::format("  swaps             {} of the preemptions swapped to host memory\n", m.swaps);
  if (m.prefix_hit_rate > 0) out += fmt::format("  prefix cache      {:.1f}% of the tokens looked up served from cached blocks\n", 100 * m.prefix_hit_rate);
  if (sc.disaggregation) out += fmt::format("  KV transfers      {}, {:.2f} ms each on average\n", m.kv_transfers, m.mean_kv_transfer * 1e3);
  out += fmt::format("simulated: {} events\n", r.events);
  return out;
}

// A Perfetto (Chrome JSON) trace of every request: one process per replica, each request an async
// slice in it with its phases queued, prefill (to the first token) and decode nested inside it. The
// slices' ids are the process's own (id2.local), which is what groups async slices under a process in
// Perfetto: plain ids are global there, and every request had been a row of its own outside the
// replicas.
std::string inference_trace(const models::InferenceResult& r) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  const auto event = [&](const char* ph, const std::string& name, int replica, int id, double t) {
    out += fmt::format("{}{{\"ph\": \"{}\", \"cat\": \"request\", \"name\": \"{}\", \"pid\": {}, \"tid\": 0, \"id2\": {{\"local\": \"0x{:x}\"}}, \"ts\": {:.3f}}}",
                       first ? "" : ",\n", ph, name, replica + 1, id, t * 1e6);
    first = false;
  };
  for (std::size_t k = 0; k < r.replicas.size(); ++k) {
    out += fmt::format("{}{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {}, \"args\": {{\"name\": \"replica {}\"}}}}", first ? "" : ",\n", k + 1, k);
    out += fmt::format(",\n{{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": {}, \"args\": {{\"sort_index\": {}}}}}", k + 1, k);
    first = false;
  }
  for (const auto& q : r.requests) {
    const int id = q.request.id;
    const int replica = q.replica;
    const std::string name = fmt::format("request {} ({}+{} tokens)", id, q.request.prompt_tokens, q.request.output_tokens);
    event("b", name, replica, id, q.request.arrival);
    event("b", "queued", replica, id, q.request.arrival);
    event("e", "queued", replica, id, q.first_scheduled);
    event("b", "prefill", replica, id, q.first_scheduled);
    event("e", "prefill", replica, id, q.first_token);
    if (q.decode_replica >= 0) {
      event("b", "kv transfer", replica, id, q.kv_transfer_start);
      event("e", "kv transfer", replica, id, q.kv_transfer_end);
      event("e", name, replica, id, q.kv_transfer_end);
      // The decode part on the decode replica's track, as its own slice.
      const int did = id + static_cast<int>(r.requests.size());
      event("b", fmt::format("request {} decode", id), q.decode_replica, did, q.kv_transfer_end);
      event("e", fmt::format("request {} decode", id), q.decode_replica, did, q.finish);
    } else {
      event("b", "decode", replica, id, q.first_token);
      event("e", "decode", replica, id, q.finish);
      event("e", name, replica, id, q.finish);
    }
  }
  return out + "\n]}\n";
}

// For the report's scaling curve: the plan at a quarter, half, twice and four times its data-parallel
// degree (where the global batch, the interleaving, the topology and the GPUs' memory allow), the
// global batch kept. A degree that cannot run goes into `left_out` with its reason, for the report to
// say (the curve had lost such points without a word).
nlohmann::json scaling_sweep(const TrainingScenario& sc, const TrainingResult& own, bool fold, nlohmann::json& left_out) {
  nlohmann::json points = nlohmann::json::array();
  left_out = nlohmann::json::array();
  const int dp = sc.job.plan.dp;
  for (const int d : {dp / 4, dp / 2, dp, dp * 2, dp * 4}) {
    if (d < 1 || (!points.empty() && points.back()["dp"].get<int>() >= d)) continue;
    models::TrainingJob job = sc.job;
    job.plan.dp = d;
    // The scenario's micro-batch group where this degree runs it, else Megatron-Core's default, as
    // the plan search takes it.
    if (job.plan.microbatch_group > 0 && !models::microbatch_groups_run(job.micro_batches(), job.plan.pp, job.plan.microbatch_group)) {
      job.plan.microbatch_group = 0;
    }
    double step = own.step_time.value(), mfu = own.mfu, days = own.time_to_train.value() / 86400.0;
    if (d != dp) {
      // Each reason is one the simulation gives: the batch, the interleaving or the cluster's size
      // (check_job), --no-fold's task count, a step past the clock (fewer replicas on a very slow system).
      const auto leave_out = [&](std::string reason) { left_out.push_back({{"dp", d}, {"gpus", job.plan.gpus()}, {"reason", std::move(reason)}}); };
      try {
        models::check_job(job, static_cast<int>(sc.topology->gpus().size()));
        // Out of memory at this degree: not a point anyone could run, so not worth simulating.
        if (const models::MemoryReport memory = models::estimate_memory(job, *sc.topology->gpu); !memory.fits()) {
          leave_out(memory.verdict());
          continue;
        }
        models::TrainingOptions opt;
        opt.fold = fold;
        const TrainingResult r = models::simulate_training(job, *sc.topology, opt);
        step = r.step_time.value();
        mfu = r.mfu;
        days = r.time_to_train.value() / 86400.0;
      } catch (const std::invalid_argument& e) {
        leave_out(e.what());
        continue;
      } catch (const sim::TimeRangeError& e) {
        leave_out(e.what());
        continue;
      }
    }
    points.push_back({{"dp", d}, {"gpus", job.plan.gpus()}, {"step_s", step}, {"mfu", mfu}, {"days", sc.job.token_budget > 0 ? days : 0.0},
                      {"plan", fmt::format("DP{}{}", d, d == dp ? " (the scenario's)" : "")}});
  }
  return points;
}

// For the report's throughput curve: a generated workload replayed at other rates (the same lengths
// and seed), from a quarter to four times its own, so that the curve reaches saturation.
nlohmann::json rate_sweep(const models::InferenceScenario& sc) {
  nlohmann::json points = nlohmann::json::array();
  if (!sc.recipe || sc.recipe->arrivals.kind == models::ArrivalProcess::Kind::offline || sc.closed_loop) return points;
  const models::WorkloadRecipe& w = *sc.recipe;
  for (const double f : {0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0}) {
    models::InferenceScenario at = sc;
    const double rate = w.arrivals.rate * f;
    const double count = w.count_at(rate);
    if (count < 1 || count > 10'000'000) continue;  // the workload limit of a scenario
    at.requests = w.generate_at(rate, sc.file);
    const models::ServingMetrics m = models::simulate_inference(at).metrics;
    points.push_back({{"rate_rps", rate}, {"request_throughput", m.request_throughput}, {"request_goodput", m.request_goodput},
                      {"output_token_throughput", m.output_throughput}, {"ttft_p90_ms", m.ttft.p90 * 1e3}, {"tpot_p90_ms", m.tpot.p90 * 1e3}});
  }
  return points;
}

void run_inference(const Options& o) {
  if (o.no_fold) throw InputError("--no-fold applies to training scenarios only");
  if (o.ops) throw InputError("--ops applies to training scenarios only");
  const models::InferenceScenario sc = models::load_inference_scenario(o.scenario);
  prepare_outputs(o.out, o.report, out_option(o), {"summary.json", "requests.csv", "trace.json"});
  const models::InferenceResult r = models::simulate_inference(sc);
  nlohmann::json j = inference_json(sc, r);
  j["source"] = source_of(o.scenario);
  if (!o.report.empty()) {
    const nlohmann::json sweep = rate_sweep(sc);
    if (!sweep.empty()) j["rate_sweep"] = sweep;
  }
  if (!o.out.empty()) {
    reports::make_output_directory(o.out, out_option(o));
    check_report_targets(o.report);
    std::string csv = kRequestsHeader;
    if (sc.disaggregation) csv += ",decode_replica,kv_transfer_start_s,kv_transfer_end_s";
    csv += "\n";
    for (const auto& q : r.requests) {
      // TPOT is defined from the second output token on: empty for a one-token request.
      const std::string tpot = q.request.output_tokens > 1 ? fmt::format("{:.9f}", q.tpot()) : "";
      csv += fmt::format("{},{:.9f},{},{},{},{:.9f},{:.9f},{:.9f},{:.9f},{},{:.9f},{}", q.request.id, q.request.arrival, q.request.prompt_tokens,
                         q.request.output_tokens, q.replica, q.first_scheduled, q.first_token, q.finish, q.ttft(), tpot, q.e2e(), q.preemptions);
      if (sc.disaggregation) csv += fmt::format(",{},{:.9f},{:.9f}", q.decode_replica, q.kv_transfer_start, q.kv_transfer_end);
      csv += "\n";
    }
    reports::write_files_atomically(o.out, {{"summary.json", j.dump(2) + "\n"}, {"requests.csv", csv}, {"trace.json", inference_trace(r)}});
  }
  if (o.json) {
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "summary.json"}, false);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << inference_text(sc, r);
    if (!o.out.empty()) std::cout << fmt::format("wrote {0}/summary.json, {0}/requests.csv and {0}/trace.json (open at ui.perfetto.dev)\n", o.out);
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "summary.json"});
  }
}

void run(const Options& o) {
  if (models::scenario_kind(o.scenario) == "inference") {
    run_inference(o);
    return;
  }
  const TrainingScenario sc = models::load_training_scenario(o.scenario);
  prepare_outputs(o.out, o.report, out_option(o), {"summary.json", "trace.json"});
  models::TrainingOptions opt;
  opt.fold = !o.no_fold;
  opt.trace = !o.out.empty();
  TrainingResult r = [&] {
    try {
      return models::simulate_training(sc.job, *sc.topology, opt);
    } catch (const models::PlanError& e) {
      // The scenario passed its checks at load; what remains is the size --no-fold asks to simulate.
      if (!o.no_fold) throw;
      throw InputError(fmt::format("{}: --no-fold: {}", o.scenario, e.what()));
    } catch (const sim::TimeRangeError& e) {
      // Most often the batch: say which step ran past the clock, where the scenario sets it.
      throw InputError(sc.batch_where, fmt::format("the step of this batch (micro batch {} of {} tokens, global batch {}) runs past the clock: {}",
                                                   sc.job.micro_batch, sc.job.model.seq_len, sc.job.global_batch, e.what()));
    }
  }();
  nlohmann::json j = to_json(sc, r);
  j["source"] = source_of(o.scenario);
  if (!o.report.empty()) {
    nlohmann::json left_out;
    j["scaling"] = scaling_sweep(sc, r, opt.fold, left_out);
    if (!left_out.empty()) j["scaling_left_out"] = std::move(left_out);
  }
  std::string removed;
  if (!o.out.empty()) {
    reports::make_output_directory(o.out, out_option(o));
    check_report_targets(o.report);
    std::error_code ec;
    const bool replaced = std::filesystem::exists(std::filesystem::path(o.out) / "summary.json", ec);
    reports::write_files_atomically(o.out, {{"summary.json", j.dump(2) + "\n"}, {"trace.json", r.trace}});
    removed = remove_stale_companion(o.out, "requests.csv", kRequestsHeader, "summary.json", replaced);
  }
  if (o.json) {
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "summary.json"}, false);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << summary_text(sc, r);
    if (o.ops) {
      if (!r.layer_ops.empty()) std::cout << ops_text(r.moe_layer_ops.empty() ? "operations of a layer" : "operations of a dense layer", r.layer_ops);
      if (!r.moe_layer_ops.empty()) std::cout << ops_text("operations of an MoE layer", r.moe_layer_ops);
      std::cout << ops_text("operations of the input embedding (first stage)", r.embedding_ops);
      std::cout << ops_text("operations of the output head (last stage)", r.head_ops);
    }
    if (!o.out.empty()) std::cout << fmt::format("wrote {0}/summary.json and {0}/trace.json (open at ui.perfetto.dev){1}\n", o.out, removed);
    if (!o.report.empty()) write_report_of(o.report, {std::filesystem::path(o.out) / "summary.json"});
  }
  // A marginal verdict (over only through the assumed fragmentation allowance) is a warning: such
  // plans have run (NeMo's Llama 3 8B in fp8 on one node, validate/extra/nemo-24.07-fp8).
  if (!r.memory.fits() && !r.memory.marginal()) {
    throw Infeasible(fmt::format("{}: the plan does not fit in memory ({}); the step above is what it would take on GPUs with that memory",
                                     o.scenario, r.memory.verdict()));
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("run", "Simulate a scenario: a training step (step time, MFU, breakdown, memory, time to train) or an inference workload (TTFT, TPOT, throughput)");
  cmd->add_option("scenario", o->scenario, "Scenario YAML file")->required()->check(input_file());
  cmd->add_flag("--json", o->json, "Print the summary as JSON");
  cmd->add_option("--out", o->out, "Directory to write summary.json and a Perfetto trace of the step (trace.json)")->transform(output_directory());
  cmd->add_flag("--ops", o->ops, "Training: also print each operation's forward, backward and recompute time for one micro-batch");
  cmd->add_flag("--no-fold", o->no_fold, "Simulate every rank instead of one representative per pipeline stage (slower; same answer)");
  cmd->add_option("--report", o->report,
                  "Also write the capacity-planning report (report.html, .md, .csv) into this directory, with a scaling curve (training) or a request-rate sweep "
                  "(inference); --out's files go there too when --out is not given")
      ->transform(output_directory());
  cmd->callback([o] {
    if (!o->report.empty() && o->out.empty()) o->out = o->report;
    run(*o);
  });
}

}  // namespace cs::app
