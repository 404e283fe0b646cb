#include "clustersim/sim/task_graph.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace cs::sim {

namespace {

std::uint64_t encode(TaskGraph::TaskId t, std::uint32_t version) { return (static_cast<std::uint64_t>(version) << 32) | t; }

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

TaskGraph::TaskGraph(Simulator& sim, FluidNetwork& net, int gpus, ExecutorOptions options)
    : sim_(sim), net_(net), options_(options), gpus_(gpus) {
  assert(gpus >= 0 && options.streams_per_gpu >= 1 && options.compute_slowdown >= 0);
  streams_.resize(static_cast<std::size_t>(gpus) * static_cast<std::size_t>(options.streams_per_gpu));
  comm_active_.assign(static_cast<std::size_t>(gpus), 0);
  running_compute_.resize(static_cast<std::size_t>(gpus));
}

TaskGraph::TaskId TaskGraph::add_compute(int gpu, int stream, Time duration, std::string name, std::string category) {
  assert(gpu >= 0 && gpu < gpus_ && stream >= 0 && stream < options_.streams_per_gpu && duration >= Time::zero());
  Task t;
  t.kind = Kind::compute;
  t.name = std::move(name);
  t.category = std::move(category);
  t.gpus = {gpu};
  t.stream = stream;
  t.duration = duration;
  tasks_.push_back(std::move(t));
  return static_cast<TaskId>(tasks_.size() - 1);
}

TaskGraph::TaskId TaskGraph::add_transfer(std::vector<int> gpus, int stream, std::vector<FlowSpec> flows, std::string name,
                                          std::string category) {
  return add_transfer(std::move(gpus), stream, std::make_shared<const std::vector<FlowSpec>>(std::move(flows)), std::move(name), std::move(category));
}

TaskGraph::TaskId TaskGraph::add_transfer(std::vector<int> gpus, int stream, SharedFlows flows, std::string name, std::string category) {
  assert(flows);
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  assert(std::all_of(gpus.begin(), gpus.end(), [&](int g) { return g >= 0 && g < gpus_; }));
  assert(stream >= 0 && stream < options_.streams_per_gpu);
  Task t;
  t.kind = Kind::transfer;
  t.name = std::move(name);
  t.category = std::move(category);
  t.gpus = std::move(gpus);
  t.stream = stream;
  t.flows = std::move(flows);
  tasks_.push_back(std::move(t));
  return static_cast<TaskId>(tasks_.size() - 1);
}

TaskGraph::TaskId TaskGraph::add_delay(Time duration, std::string name) {
  Task t;
  t.kind = Kind::delay;
  t.name = std::move(name);
  t.category = "delay";
  t.duration = duration;
  tasks_.push_back(std::move(t));
  return static_cast<TaskId>(tasks_.size() - 1);
}

void TaskGraph::depend(TaskId before, TaskId after) {
  assert(before < tasks_.size() && after < tasks_.size() && before != after);
  tasks_[before].successors.push_back(after);
  ++tasks_[after].waiting;
}

void TaskGraph::start_together(const std::vector<std::vector<TaskId>>& sets, const std::string& name) {
  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  const std::size_t existing = tasks_.size();
  std::vector<std::uint32_t> set_of(existing, kNone);
  for (std::size_t j = 0; j < sets.size(); ++j) {
    for (TaskId t : sets[j]) {
      assert(t < existing && set_of[t] == kNone);
      set_of[t] = static_cast<std::uint32_t>(j);
    }
  }
  std::vector<TaskId> gates;
  gates.reserve(sets.size());
  for (std::size_t j = 0; j < sets.size(); ++j) gates.push_back(add_delay(Time(), name));
  std::vector<std::uint32_t> joined;
  for (TaskId p = 0; p < existing; ++p) {
    joined.clear();
    for (TaskId s : tasks_[p].successors) {
      if (s < existing && set_of[s] != kNone && set_of[s] != set_of[p]) joined.push_back(set_of[s]);
    }
    std::sort(joined.begin(), joined.end());
    joined.erase(std::unique(joined.begin(), joined.end()), joined.end());
    for (std::uint32_t j : joined) depend(p, gates[j]);
  }
  for (std::size_t j = 0; j < sets.size(); ++j) {
    for (TaskId t : sets[j]) depend(gates[j], t);
  }
}

void TaskGraph::trace_links(std::vector<std::string> names) {
  link_names_ = std::move(names);
  net_.set_link_observer([this](Time t, FluidNetwork::LinkId l, double load) { link_samples_.push_back({t, l, load}); });
}

Time TaskGraph::run() {
  // The tasks ready before any starts: a task that finishes at once (an empty transfer) readies its
  // successors as it goes, and a scan that met them after would make them ready, and run them, twice.
  std::vector<TaskId> ready;
  for (TaskId t = 0; t < tasks_.size(); ++t) {
    if (tasks_[t].waiting == 0) ready.push_back(t);
  }
  for (TaskId t : ready) make_ready(t);
  sim_.run();
  Time last = Time::zero();
  for (const Task& t : tasks_) {
    if (!t.record.done()) throw std::logic_error(fmt::format("task '{}' never ran: the task graph has a dependency cycle", t.name));
    last = std::max(last, t.record.end);
  }
  return last;
}

void TaskGraph::make_ready(TaskId id) {
  Task& t = tasks_[id];
  if (t.kind == Kind::delay) {
    start(id);
    return;
  }
  for (int g : t.gpus) stream(g, t.stream).ready.insert(id);
  if (t.gpus.empty()) {
    start(id);
    return;
  }
  for (int g : t.gpus) try_start(g, t.stream);
}

void TaskGraph::try_start(int gpu, int s) {
  Stream& st = stream(gpu, s);
  if (st.busy || st.ready.empty()) return;
  const TaskId id = *st.ready.begin();
  const Task& t = tasks_[id];
  for (int g : t.gpus) {
    const Stream& other = stream(g, t.stream);
    if (other.busy || other.ready.empty() || *other.ready.begin() != id) return;
  }
  for (int g : t.gpus) {
    Stream& other = stream(g, t.stream);
    other.ready.erase(other.ready.begin());
    other.busy = true;
    other.running = id;
  }
  start(id);
}

void TaskGraph::start(TaskId id) {
  Task& t = tasks_[id];
  t.record.start = sim_.now();
  switch (t.kind) {
    case Kind::delay:
      sim_.schedule_in(t.duration, this, encode(id, 0));
      break;
    case Kind::compute: {
      const int g = t.gpus.front();
      t.work_left_ns = static_cast<double>(t.duration.count_ns());
      t.speed = comm_active_[static_cast<std::size_t>(g)] > 0 ? 1.0 / (1.0 + options_.compute_slowdown) : 1.0;
      t.updated = sim_.now();
      running_compute_[static_cast<std::size_t>(g)].push_back(id);
      schedule_compute_end(id);
      break;
    }
    case Kind::transfer: {
      for (int g : t.gpus) set_comm_active(g, +1);
      t.flows_left = static_cast<std::uint32_t>(t.flows->size());
      if (t.flows->empty()) {
        finish(id);
        break;
      }
      // Flows may complete at once (zero bytes, no latency) and finish the task inside this loop;
      // the count is set before any starts. The list is shared with other tasks: each start copies
      // its path.
      const SharedFlows flows = t.flows;
      for (const FlowSpec& f : *flows) net_.start(f.path, f.bytes, f.latency, this, id, f.rate_cap);
      break;
    }
  }
}

void TaskGraph::schedule_compute_end(TaskId id) {
  Task& t = tasks_[id];
  ++t.version;
  const double ns = std::ceil(t.work_left_ns / t.speed - 1e-9);
  sim_.schedule_in(Time::nanoseconds(std::max(0.0, ns)), this, encode(id, t.version));
}

void TaskGraph::set_comm_active(int gpu, int delta) {
  int& n = comm_active_[static_cast<std::size_t>(gpu)];
  const bool before = n > 0;
  n += delta;
  const bool after = n > 0;
  if (before == after || options_.compute_slowdown == 0.0) return;
  const double speed = after ? 1.0 / (1.0 + options_.compute_slowdown) : 1.0;
  for (TaskId id : running_compute_[static_cast<std::size_t>(gpu)]) {
    Task& t = tasks_[id];
    t.work_left_ns = std::max(0.0, t.work_left_ns - static_cast<double>((sim_.now() - t.updated).count_ns()) * t.speed);
    t.updated = sim_.now();
    t.speed = speed;
    schedule_compute_end(id);
  }
}

void TaskGraph::handle(std::uint64_t payload) {
  const TaskId id = static_cast<TaskId>(payload & 0xffffffffu);
  const std::uint32_t version = static_cast<std::uint32_t>(payload >> 32);
  Task& t = tasks_[id];
  if (t.record.done()) return;
  if (t.kind == Kind::compute && version != t.version) return;  // superseded by a speed change
  finish(id);
}

void TaskGraph::flow_done(FluidNetwork::FlowId, std::uint64_t tag) {
  Task& t = tasks_[static_cast<TaskId>(tag)];
  assert(t.flows_left > 0);
  if (--t.flows_left == 0) finish(static_cast<TaskId>(tag));
}

void TaskGraph::finish(TaskId id) {
  Task& t = tasks_[id];
  t.record.end = sim_.now();
  if (t.kind == Kind::compute) {
    auto& running = running_compute_[static_cast<std::size_t>(t.gpus.front())];
    running.erase(std::find(running.begin(), running.end(), id));
  }
  if (t.kind == Kind::transfer) {
    for (int g : t.gpus) set_comm_active(g, -1);
  }
  if (t.kind != Kind::delay) {
    for (int g : t.gpus) {
      Stream& st = stream(g, t.stream);
      st.busy = false;
    }
  }
  for (TaskId s : t.successors) {
    if (--tasks_[s].waiting == 0) make_ready(s);
  }
  if (t.kind != Kind::delay) {
    for (int g : t.gpus) try_start(g, t.stream);
  }
}

std::string TaskGraph::chrome_trace() const {
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  bool first = true;
  auto add = [&](const std::string& event) {
    if (!first) out += ",\n";
    first = false;
    out += event;
  };
  // Names for the GPUs and streams that ran something only: a plan on part of a node (or a stream
  // a plan does not use) had shown empty rows in Perfetto.
  std::vector<char> used(static_cast<std::size_t>(gpus_) * static_cast<std::size_t>(options_.streams_per_gpu), 0);
  for (const Task& t : tasks_) {
    if (!t.record.done()) continue;
    for (int g : t.gpus) used[static_cast<std::size_t>(g) * static_cast<std::size_t>(options_.streams_per_gpu) + static_cast<std::size_t>(t.stream)] = 1;
  }
  for (int g = 0; g < gpus_; ++g) {
    const auto row = used.begin() + static_cast<std::ptrdiff_t>(g) * options_.streams_per_gpu;
    if (std::none_of(row, row + options_.streams_per_gpu, [](char u) { return u != 0; })) continue;
    add(fmt::format(R"({{"ph": "M", "name": "process_name", "pid": {}, "args": {{"name": "GPU {}"}}}})", g, g));
    for (std::size_t s = 0; s < stream_names_.size() && s < static_cast<std::size_t>(options_.streams_per_gpu); ++s) {
      if (!row[static_cast<std::ptrdiff_t>(s)]) continue;
      add(fmt::format(R"({{"ph": "M", "name": "thread_name", "pid": {}, "tid": {}, "args": {{"name": "{}"}}}})", g, s, json_escape(stream_names_[s])));
    }
  }
  const int links_pid = gpus_;  // link counters get a process of their own after the GPUs
  if (!link_samples_.empty()) {
    add(fmt::format(R"({{"ph": "M", "name": "process_name", "pid": {}, "args": {{"name": "links"}}}})", links_pid));
  }
  // Delays (barriers, gates) belong to no GPU: a process of their own after the links, named.
  const bool delays = std::any_of(tasks_.begin(), tasks_.end(), [](const Task& t) { return t.gpus.empty() && t.record.done(); });
  if (delays) add(fmt::format(R"({{"ph": "M", "name": "process_name", "pid": {}, "args": {{"name": "barriers"}}}})", links_pid + 1));
  for (TaskId id = 0; id < tasks_.size(); ++id) {
    const Task& t = tasks_[id];
    if (!t.record.done()) continue;
    const double ts = static_cast<double>(t.record.start.count_ns()) / 1e3;
    const double dur = static_cast<double>((t.record.end - t.record.start).count_ns()) / 1e3;
    const std::vector<int> where = t.gpus.empty() ? std::vector<int>{links_pid + 1} : t.gpus;  // delays: a row of their own
    for (int g : where) {
      add(fmt::format(R"({{"ph": "X", "name": "{}", "cat": "{}", "pid": {}, "tid": {}, "ts": {:.3f}, "dur": {:.3f}}})",
                      json_escape(t.name), json_escape(t.category), g, t.stream, ts, dur));
    }
  }
  for (const LinkSample& s : link_samples_) {
    const std::string name = s.link < link_names_.size() ? link_names_[s.link] : fmt::format("link {}", s.link);
    add(fmt::format(R"({{"ph": "C", "name": "{}", "pid": {}, "ts": {:.3f}, "args": {{"GB/s": {:.6g}}}}})", json_escape(name),
                    links_pid, static_cast<double>(s.time.count_ns()) / 1e3, s.load / 1e9));
  }
  out += "\n]}\n";
  return out;
}

}  // namespace cs::sim
