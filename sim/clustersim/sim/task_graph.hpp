// A task-graph executor on the engine: tasks with dependencies, run on GPU streams and the fluid
// network.
//
//  - compute: occupies one stream of one GPU for a duration (at full speed);
//  - transfer: a set of network flows (a collective or a point-to-point copy) that occupies one
//    stream on each GPU it involves and ends when its last flow ends;
//  - delay: a fixed wait on no resource.
// A task starts once all its predecessors have ended and, on each of its streams, it is the ready
// task with the smallest id and the stream is idle (streams are in-order queues, as CUDA streams
// are; the global id order keeps multi-GPU tasks from deadlocking).
//
// Overlap interference: while a GPU runs a transfer, its compute tasks run slower by the factor
// (1 + compute_slowdown), since communication kernels take SMs and HBM bandwidth. The default 0
// means no interference; models set it from their hardware profile. Time spent is recorded per task.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "clustersim/sim/fluid_network.hpp"
#include "clustersim/sim/simulator.hpp"

namespace cs::sim {

struct FlowSpec {
  std::vector<FluidNetwork::LinkId> path;
  double bytes = 0;
  Time latency;
  double rate_cap = std::numeric_limits<double>::infinity();
};
// A transfer's flows, shared by every task that moves the same flows (a ZeRO-3 step repeats one
// collective per layer and micro-batch): each task would otherwise hold a copy of every path.
using SharedFlows = std::shared_ptr<const std::vector<FlowSpec>>;

struct ExecutorOptions {
  int streams_per_gpu = 2;        // stream 0: compute, stream 1: communication, by convention
  double compute_slowdown = 0.0;  // compute runs at 1 / (1 + this) while a transfer is active on its GPU
};

class TaskGraph final : public EventHandler, public FluidNetwork::Listener {
 public:
  using TaskId = std::uint32_t;
  enum class Kind : std::uint8_t { compute, transfer, delay };

  struct Record {
    Time start = Time::max();
    Time end = Time::max();
    [[nodiscard]] bool done() const { return end != Time::max(); }
  };

  TaskGraph(Simulator& sim, FluidNetwork& net, int gpus, ExecutorOptions options = {});

  TaskId add_compute(int gpu, int stream, Time duration, std::string name, std::string category = "compute");
  TaskId add_transfer(std::vector<int> gpus, int stream, std::vector<FlowSpec> flows, std::string name,
                      std::string category = "comm");
  TaskId add_transfer(std::vector<int> gpus, int stream, SharedFlows flows, std::string name, std::string category = "comm");
  TaskId add_delay(Time duration, std::string name);
  // `after` starts only once `before` has ended.
  void depend(TaskId before, TaskId after);
  // The tasks of each set start together: none before every predecessor of every task of the set
  // has ended (tasks whose work waits on each other inside them). Each set joins its tasks'
  // predecessors through one zero-length delay task. Call once the set's tasks have all their
  // predecessors; a task is in one set at most.
  void start_together(const std::vector<std::vector<TaskId>>& sets, const std::string& name);

  // Starts every task without predecessors and runs the simulation to the end. Returns the time
  // the last task ended. Throws std::logic_error if tasks are left unfinished (a dependency cycle).
  Time run();

  [[nodiscard]] const Record& record(TaskId t) const { return tasks_[t].record; }
  [[nodiscard]] std::size_t size() const { return tasks_.size(); }
  [[nodiscard]] const std::string& name(TaskId t) const { return tasks_[t].name; }

  // Chrome/Perfetto trace JSON: one slice per task per GPU stream (pid = GPU, tid = stream), and
  // when link names are given, a counter per link with its load in GB/s over time.
  [[nodiscard]] std::string chrome_trace() const;
  // Records link loads for the trace; names[l] labels link l (call before run()).
  void trace_links(std::vector<std::string> names);
  // Names the trace's rows: names[s] labels stream s of every GPU (unnamed streams keep Perfetto's
  // "Thread s").
  void trace_streams(std::vector<std::string> names) { stream_names_ = std::move(names); }

  void handle(std::uint64_t payload) override;
  void flow_done(FluidNetwork::FlowId flow, std::uint64_t tag) override;

 private:
  struct Task {
    Kind kind = Kind::delay;
    std::string name;
    std::string category;
    std::vector<int> gpus;  // compute: one; transfer: all involved
    int stream = 0;
    Time duration;          // compute and delay
    SharedFlows flows;
    std::vector<TaskId> successors;
    std::uint32_t waiting = 0;  // predecessors not yet ended
    std::uint32_t flows_left = 0;
    Record record;
    // compute progress
    double work_left_ns = 0;
    double speed = 1.0;
    Time updated;
    std::uint32_t version = 0;
  };
  struct Stream {
    bool busy = false;
    TaskId running = 0;
    std::set<TaskId> ready;
  };

  Stream& stream(int gpu, int s) { return streams_[static_cast<std::size_t>(gpu) * options_.streams_per_gpu + s]; }
  void make_ready(TaskId t);
  void try_start(int gpu, int s);
  void start(TaskId t);
  void finish(TaskId t);
  void schedule_compute_end(TaskId t);
  void set_comm_active(int gpu, int delta);

  Simulator& sim_;
  FluidNetwork& net_;
  ExecutorOptions options_;
  int gpus_;
  std::vector<Task> tasks_;
  std::vector<Stream> streams_;
  std::vector<int> comm_active_;   // transfers running per GPU
  std::vector<std::vector<TaskId>> running_compute_;  // per GPU
  std::vector<std::string> link_names_;
  std::vector<std::string> stream_names_;
  struct LinkSample {
    Time time;
    std::uint32_t link;
    double load;
  };
  std::vector<LinkSample> link_samples_;
};

}  // namespace cs::sim
