#include <algorithm>
#include <memory>
#include <random>
#include <set>

#include "catch.hpp"

#include "clustersim/sim/event_queue.hpp"
#include "clustersim/sim/fluid_network.hpp"
#include "clustersim/sim/simulator.hpp"
#include "clustersim/sim/task_graph.hpp"

using namespace cs::sim;

namespace {

constexpr double GB = 1e9;

// Records when each flow finished.
struct Recorder : FluidNetwork::Listener {
  Simulator* sim = nullptr;
  std::vector<Time> done;
  void flow_done(FluidNetwork::FlowId f, std::uint64_t) override {
    if (done.size() <= f) done.resize(f + 1, Time::max());
    done[f] = sim->now();
  }
};

struct Net {
  Simulator sim;
  FluidNetwork net;
  Recorder rec;
  explicit Net(std::vector<double> caps) : net(sim, std::move(caps)) { rec.sim = &sim; }
  FluidNetwork::FlowId flow(std::vector<FluidNetwork::LinkId> path, double bytes, Time latency = Time::zero(),
                            double cap = std::numeric_limits<double>::infinity()) {
    return net.start(std::move(path), bytes, latency, &rec, 0, cap);
  }
  // Rates right after the first solve at time 0.
  void settle() { sim.run(Time::zero()); }
};

struct Counter : EventHandler {
  std::vector<std::uint64_t> seen;
  void handle(std::uint64_t p) override { seen.push_back(p); }
};

}  // namespace

TEMPLATE_TEST_CASE("the event queue orders by time, then by insertion", "[sim][queue]", BinaryHeapQueue, RadixHeapQueue) {
  std::unique_ptr<EventQueue> q = std::make_unique<TestType>();
  Counter h;
  // Same times pop in insertion order; earlier times first.
  q->push(Time::ns(5), &h, 1);
  q->push(Time::ns(3), &h, 2);
  q->push(Time::ns(5), &h, 3);
  q->push(Time::ns(3), &h, 4);
  q->push(Time::ns(0), &h, 5);
  std::vector<std::uint64_t> order;
  while (!q->empty()) order.push_back(q->pop().payload);
  CHECK(order == std::vector<std::uint64_t>{5, 2, 4, 1, 3});
}

TEMPLATE_TEST_CASE("the event queue agrees with a sorted reference on random input", "[sim][queue]", BinaryHeapQueue, RadixHeapQueue) {
  std::mt19937_64 rng(42);
  TestType q;
  Counter h;
  std::vector<std::pair<Time::Rep, std::uint64_t>> ref;
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const auto t = static_cast<Time::Rep>(rng() % 1000);
    q.push(Time::ns(t), &h, i);
    ref.emplace_back(t, i);
  }
  std::stable_sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (const auto& [t, id] : ref) {
    const Event e = q.pop();
    REQUIRE(e.time == Time::ns(t));
    REQUIRE(e.payload == id);
  }
}

TEMPLATE_TEST_CASE("the event queue interleaves pushes and pops as a simulation does", "[sim][queue]", BinaryHeapQueue, RadixHeapQueue) {
  // Each pop pushes 0 to 3 events at or after the popped time; the reference is a sorted multiset
  // of (time, insertion order).
  std::mt19937_64 rng(5);
  TestType q;
  Counter h;
  std::set<std::pair<Time::Rep, std::uint64_t>> ref;
  std::uint64_t next = 0;
  for (int i = 0; i < 100; ++i) {
    const auto t = static_cast<Time::Rep>(rng() % 50);
    q.push(Time::ns(t), &h, next);
    ref.emplace(t, next++);
  }
  for (int step = 0; step < 50000 && !ref.empty(); ++step) {
    const Event e = q.pop();
    REQUIRE(std::make_pair(e.time.count_ns(), e.payload) == *ref.begin());
    ref.erase(ref.begin());
    for (int k = static_cast<int>(rng() % 4); k > 0 && step < 40000; --k) {
      const auto t = e.time.count_ns() + static_cast<Time::Rep>(rng() % 3 == 0 ? 0 : rng() % 1000);
      q.push(Time::ns(t), &h, next);
      ref.emplace(t, next++);
    }
  }
  CHECK(q.size() == ref.size());
}

TEMPLATE_TEST_CASE("a peek past the clock does not lose an event pushed after it", "[sim][queue]", BinaryHeapQueue, RadixHeapQueue) {
  // A run that stops early peeks at the next event (t = 100); the simulation then schedules one at
  // t = 10, which must come out first, and the rest in order.
  TestType q;
  Counter h;
  q.push(Time::ns(100), &h, 1);
  q.push(Time::ns(200), &h, 2);
  CHECK(q.top().time == Time::ns(100));
  q.push(Time::ns(10), &h, 3);
  q.push(Time::ns(100), &h, 4);
  std::vector<std::uint64_t> order;
  while (!q.empty()) order.push_back(q.pop().payload);
  CHECK(order == std::vector<std::uint64_t>{3, 1, 4, 2});
}

TEMPLATE_TEST_CASE("discarding events keeps the others in their order", "[sim][queue]", BinaryHeapQueue, RadixHeapQueue) {
  TestType q;
  Counter h;
  std::mt19937 rng(7);
  std::vector<std::pair<std::int64_t, std::uint64_t>> expect;  // (time, payload) of the kept events, by (time, push order)
  for (std::uint64_t i = 0; i < 2000; ++i) {
    const std::int64_t t = static_cast<std::int64_t>(rng() % 500);
    q.push(Time::nanoseconds(t), &h, i);
    if (i % 3 != 0) expect.push_back({t, i});
  }
  // Pop a few first, as a simulation does before it discards.
  std::stable_sort(expect.begin(), expect.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::uint64_t> popped;
  for (int k = 0; k < 50; ++k) popped.push_back(q.pop().payload);
  const std::size_t removed = q.discard([&](const Event& e) { return e.payload % 3 == 0; });
  std::size_t kept_popped = 0;
  for (std::uint64_t p : popped) kept_popped += p % 3 != 0;
  CHECK(q.size() == expect.size() - kept_popped);
  CHECK(removed + q.size() + popped.size() == 2000);
  std::vector<std::uint64_t> rest;
  while (!q.empty()) rest.push_back(q.pop().payload);
  std::vector<std::uint64_t> want;
  for (const auto& [t, p] : expect) {
    if (std::find(popped.begin(), popped.end(), p) == popped.end()) want.push_back(p);
  }
  CHECK(rest == want);
}

TEST_CASE("superseded completion events are discarded, and the flows end as before", "[sim][flows]") {
  // 2,000 flows of different sizes on one link: every completion re-solves the rest, leaving their
  // old completion events behind (2 million scheduled in all; over a million pending at once, past
  // the discard threshold of 2^20, where 1,600 flows stay under it). Flow k of
  // (k + 1) MB ends when the k + 1 smallest are done: at (sum over j <= k of (j + 1) MB x the flows
  // still running while j was the smallest) / 1 GB/s, computed here step by step.
  constexpr int kFlows = 2000;
  Net n({1 * GB});
  std::vector<FluidNetwork::FlowId> ids;
  for (int k = 0; k < kFlows; ++k) ids.push_back(n.flow({0}, (k + 1) * 1e6));
  n.sim.run();
  double t = 0;
  for (int k = 0; k < kFlows; ++k) {
    t += 1e6 * (kFlows - k) / GB;  // the next smallest has 1 MB more to move than the last, at 1 GB/s / (flows left)
    CHECK(n.rec.done[ids[static_cast<std::size_t>(k)]].to_seconds() == Approx(t).epsilon(1e-6));
  }
  CHECK(n.sim.pending() == 0);
  // The discard happened: without it every scheduled completion, current or superseded, would be
  // popped, 2,000 + 1,999 + ... + 1 = 2,001,000 of them.
  CHECK(n.sim.stats().events < 2'001'000);
}

TEST_CASE("a re-solve keeps the completion event of a flow whose rate it leaves unchanged", "[sim][flows]") {
  // A (capped at 0.1 GB/s) shares link 0 with B, which shares link 1 with C. When C ends, and again
  // when B ends, the re-solve reaches A and leaves it at its cap: its completion event at 3 s stays.
  // Events: the solve at 0, C's end, its solve, B's end, its solve, B's superseded event, A's end,
  // its solve; superseding A's event at each re-solve too had made 10.
  Net n({2 * GB, 1 * GB});
  const auto a = n.flow({0}, 0.3e9, Time::zero(), 0.1 * GB);
  const auto b = n.flow({0, 1}, 1e9);
  const auto c = n.flow({1}, 0.25e9);
  n.sim.run();
  CHECK(n.rec.done[c] == Time::ms(500));
  CHECK(n.rec.done[b] == Time::ms(1250));
  CHECK(n.rec.done[a] == Time::ms(3000));
  CHECK(n.sim.stats().events == 8);
}

TEST_CASE("the progress callback sees the clock and the counts every so many events", "[sim]") {
  Simulator sim;
  Counter h;
  for (int t = 0; t < 10; ++t) sim.schedule_at(Time::ns(t), &h, static_cast<std::uint64_t>(t));
  std::vector<std::pair<std::int64_t, std::uint64_t>> seen;  // (ns, events) at each call
  sim.set_progress([&](Time now, const RunStats& s) { seen.emplace_back(now.count_ns(), s.events); }, 3);
  sim.run();
  CHECK(seen == std::vector<std::pair<std::int64_t, std::uint64_t>>{{2, 3}, {5, 6}, {8, 9}});
  CHECK(h.seen.size() == 10);
}

TEST_CASE("max-min: n flows on one bottleneck share it equally", "[sim][maxmin]") {
  Net n({10 * GB});
  for (int i = 0; i < 4; ++i) n.flow({0}, 1 * GB);
  n.settle();
  // Expectations: r_i = C / n = 10 / 4 = 2.5 GB/s each.
  for (FluidNetwork::FlowId f = 0; f < 4; ++f) CHECK(n.net.rate(f) == Approx(2.5 * GB));
  n.sim.run();
  // All finish together: 4 GB over 10 GB/s = 0.4 s.
  for (FluidNetwork::FlowId f = 0; f < 4; ++f) CHECK(n.rec.done[f] == Time::ms(400));
}

TEST_CASE("max-min: two bottlenecks", "[sim][maxmin]") {
  // Link 0 (1 GB/s) carries flows A and B; link 1 (3 GB/s) carries B and C.
  // Expectations: link 0 saturates first at 0.5 each, so rA = rB = 0.5; then C takes what link 1 has
  // left: rC = 3 - 0.5 = 2.5.
  Net n({1 * GB, 3 * GB});
  const auto a = n.flow({0}, 1 * GB), b = n.flow({0, 1}, 1 * GB), c = n.flow({1}, 1 * GB);
  n.settle();
  CHECK(n.net.rate(a) == Approx(0.5 * GB));
  CHECK(n.net.rate(b) == Approx(0.5 * GB));
  CHECK(n.net.rate(c) == Approx(2.5 * GB));
}

TEST_CASE("max-min: a flow limited elsewhere frees capacity for the others", "[sim][maxmin]") {
  // Link 0 (10 GB/s) has flows A, B, C; C also crosses link 1 (1 GB/s).
  // Expectations: C is held to 1 by link 1, so A and B split the rest: rA = rB = (10 - 1) / 2 = 4.5.
  Net n({10 * GB, 1 * GB});
  const auto a = n.flow({0}, 1 * GB), b = n.flow({0}, 1 * GB), c = n.flow({0, 1}, 1 * GB);
  n.settle();
  CHECK(n.net.rate(c) == Approx(1 * GB));
  CHECK(n.net.rate(a) == Approx(4.5 * GB));
  CHECK(n.net.rate(b) == Approx(4.5 * GB));
  // A per-flow cap acts the same way: capped at 2, D leaves 8 to share with E... (new network)
  Net m({10 * GB});
  const auto d = m.flow({0}, 1 * GB, Time::zero(), 2 * GB), e = m.flow({0}, 1 * GB);
  m.settle();
  CHECK(m.net.rate(d) == Approx(2 * GB));
  CHECK(m.net.rate(e) == Approx(8 * GB));
}

TEST_CASE("max-min: the two directions of a full-duplex link are independent", "[sim][maxmin]") {
  // Links 0 and 1 are the two directions of one 10 GB/s cable: opposite flows each get all of it.
  Net n({10 * GB, 10 * GB});
  const auto fwd = n.flow({0}, 1 * GB), back = n.flow({1}, 1 * GB);
  n.settle();
  CHECK(n.net.rate(fwd) == Approx(10 * GB));
  CHECK(n.net.rate(back) == Approx(10 * GB));
}

TEST_CASE("flow completion times equal the hand-computed ones", "[sim][flows]") {
  // One 10 GB/s link. A: 2 GB from t = 0. B: 1 GB starting after 100 ms of latency.
  // 0 - 100 ms: A alone at 10 GB/s moves 1 GB (1 GB left).
  // From 100 ms both at 5 GB/s: B's 1 GB and A's 1 GB both take 200 ms: both end at 300 ms.
  Net n({10 * GB});
  const auto a = n.flow({0}, 2 * GB);
  const auto b = n.flow({0}, 1 * GB, Time::ms(100));
  n.sim.run();
  CHECK(n.rec.done[a] == Time::ms(300));
  CHECK(n.rec.done[b] == Time::ms(300));
  // Unequal sizes: C (1 GB) and D (3 GB) on 10 GB/s: C ends at 200 ms (5 GB/s); D then runs at
  // 10 GB/s with 2 GB left: ends at 400 ms.
  Net m({10 * GB});
  const auto c = m.flow({0}, 1 * GB), d = m.flow({0}, 3 * GB);
  m.sim.run();
  CHECK(m.rec.done[c] == Time::ms(200));
  CHECK(m.rec.done[d] == Time::ms(400));
  // Latency only: a zero-byte flow ends after its latency.
  Net z({1 * GB});
  const auto e = z.flow({0}, 0, Time::us(3));
  z.sim.run();
  CHECK(z.rec.done[e] == Time::us(3));
}

TEST_CASE("a finished flow's slot serves a later flow, and the old flow's stale completion does not end it", "[sim][flows]") {
  // One 1 GB/s link. A (1 GB) and C (0.25 GB) share it from t = 0 at 0.5 GB/s each: A's first
  // completion is due at 2 s. C ends at 0.5 s; A then runs alone and ends at 1.25 s, so the event
  // at 2 s is stale. B (1 GB), started once A has ended (the clock stands at A's end, 1.25 s),
  // takes A's slot (the last freed) and must end at 2.25 s, not at the stale 2 s.
  Net n({1 * GB});
  const auto a = n.flow({0}, 1 * GB);
  const auto c = n.flow({0}, 0.25 * GB);
  n.sim.run(Time::ms(1300));
  CHECK(n.rec.done[c] == Time::ms(500));
  CHECK(n.rec.done[a] == Time::ms(1250));
  const auto b = n.flow({0}, 1 * GB);
  CHECK(b == a);
  CHECK(n.net.active_flows() == 1);
  n.sim.run();
  CHECK(n.rec.done[b] == Time::ms(2250));
}

TEST_CASE("only the touched component is re-solved", "[sim][flows]") {
  // Two disjoint links: flows on link 1 are not re-rated when a flow on link 0 starts or ends.
  Net n({1 * GB, 1 * GB});
  n.flow({0}, 1 * GB);
  n.flow({1}, 2 * GB);
  n.sim.run();
  // Solves: at t = 0 (both start: 2 flows re-rated), at 1 s when the first ends and at 2 s when the
  // second ends. The flow on link 1 is not re-rated when the flow on link 0 ends: 2 re-ratings in all.
  CHECK(n.sim.stats().solver_calls == 3);
  CHECK(n.sim.stats().solved_flows == 2);
}

TEST_CASE("tasks run on streams in dependency and id order", "[sim][tasks]") {
  Simulator sim;
  FluidNetwork net(sim, {10 * GB});
  TaskGraph g(sim, net, 2);
  // GPU 0 stream 0: c1 (10 us) then c2 (5 us); the transfer (1 GB at 10 GB/s = 100 ms) waits for c1;
  // c3 on GPU 1 waits for the transfer.
  const auto c1 = g.add_compute(0, 0, Time::us(10), "c1");
  const auto c2 = g.add_compute(0, 0, Time::us(5), "c2");
  const auto x = g.add_transfer({0, 1}, 1, {FlowSpec{{0}, 1 * GB, Time::us(2)}}, "x");
  const auto c3 = g.add_compute(1, 0, Time::us(1), "c3");
  g.depend(c1, x);
  g.depend(x, c3);
  const Time end = g.run();
  CHECK(g.record(c1).start == Time::zero());
  CHECK(g.record(c2).start == Time::us(10));  // same stream, after c1
  CHECK(g.record(x).start == Time::us(10));
  CHECK(g.record(x).end == Time::us(10) + Time::us(2) + Time::ms(100));
  CHECK(g.record(c3).start == g.record(x).end);
  CHECK(end == g.record(c3).end);
}

TEST_CASE("a task readied by one that finishes at once runs once", "[sim][tasks]") {
  // Found by a probe: an empty transfer (a hierarchical all-reduce's intra-node step with one GPU a
  // node) finished as the run began and readied its successor, which the run's scan then readied
  // again: the successor's flows ran twice, and the collective took twice its time.
  Simulator sim;
  FluidNetwork net(sim, {10 * GB});
  TaskGraph g(sim, net, 2);
  const auto empty = g.add_transfer({0, 1}, 0, std::vector<FlowSpec>{}, "empty");
  const auto x = g.add_transfer({0, 1}, 0, {FlowSpec{{0}, 1 * GB, Time::zero()}}, "x");
  const auto after = g.add_transfer({0, 1}, 0, std::vector<FlowSpec>{}, "after");
  g.depend(empty, x);
  g.depend(x, after);
  const Time end = g.run();
  CHECK(sim.stats().flows == 1);
  CHECK(g.record(x).start == Time::zero());
  CHECK(end == Time::ms(100));
}

TEST_CASE("compute slows down while a transfer shares its GPU", "[sim][tasks]") {
  Simulator sim;
  FluidNetwork net(sim, {1 * GB});
  TaskGraph g(sim, net, 1, ExecutorOptions{.streams_per_gpu = 2, .compute_slowdown = 0.25});
  // 100 us of compute; a 50 us transfer (50 KB at 1 GB/s) runs alongside from t = 0.
  // Expectations: during the transfer compute runs at 1/1.25 = 0.8: 40 us of work done by 50 us,
  // the remaining 60 us at full speed: ends at 110 us.
  const auto c = g.add_compute(0, 0, Time::us(100), "c");
  g.add_transfer({0}, 1, {FlowSpec{{0}, 50e3, Time::zero()}}, "x");
  g.run();
  CHECK(g.record(c).end == Time::us(110));
}

TEST_CASE("tasks started together wait for every predecessor of the set", "[sim][tasks]") {
  Simulator sim;
  FluidNetwork net(sim, {1 * GB});
  TaskGraph g(sim, net, 3);
  // Three GPUs: a1 (10 us) then b1, a2 (30 us) then b2, a transfer (1 MB at 1 GB/s = 1 ms) then b3.
  // Together, b1, b2 and b3 start when the last of their predecessors, the transfer, ends.
  const auto a1 = g.add_compute(0, 0, Time::us(10), "a1");
  const auto a2 = g.add_compute(1, 0, Time::us(30), "a2");
  const auto x = g.add_transfer({2}, 1, {FlowSpec{{0}, 1e6, Time::zero()}}, "x");
  const auto b1 = g.add_compute(0, 0, Time::us(5), "b1");
  const auto b2 = g.add_compute(1, 0, Time::us(5), "b2");
  const auto b3 = g.add_compute(2, 0, Time::us(5), "b3");
  const auto c1 = g.add_compute(0, 0, Time::us(1), "c1");
  g.depend(a1, b1);
  g.depend(a2, b2);
  g.depend(x, b3);
  g.depend(b1, c1);
  g.start_together({{b1, b2, b3}}, "together");
  g.run();
  for (auto b : {b1, b2, b3}) CHECK(g.record(b).start == Time::ms(1));
  CHECK(g.record(c1).start == Time::ms(1) + Time::us(5));  // the set's successors are not held
}

TEST_CASE("a dependency cycle is reported, not hung", "[sim][tasks]") {
  Simulator sim;
  FluidNetwork net(sim, {1 * GB});
  TaskGraph g(sim, net, 1);
  const auto a = g.add_compute(0, 0, Time::us(1), "a");
  const auto b = g.add_compute(0, 0, Time::us(1), "b");
  g.depend(a, b);
  g.depend(b, a);
  CHECK_THROWS_WITH(g.run(), Catch::Contains("dependency cycle"));
}

TEST_CASE("the same run twice gives identical traces", "[sim][determinism]") {
  auto trace = [] {
    Simulator sim;
    FluidNetwork net(sim, {10 * GB, 10 * GB, 5 * GB});
    TaskGraph g(sim, net, 4);
    g.trace_links({"a", "b", "c"});
    std::vector<TaskGraph::TaskId> prev;
    for (int i = 0; i < 40; ++i) {
      const auto c = g.add_compute(i % 4, 0, Time::us(3 + i % 7), "compute");
      const auto x = g.add_transfer({i % 4, (i + 1) % 4}, 1,
                                    {FlowSpec{{static_cast<std::uint32_t>(i % 3)}, 1e6 * (1 + i % 5), Time::us(1)},
                                     FlowSpec{{static_cast<std::uint32_t>((i + 1) % 3), 2}, 3e5, Time::us(2)}},
                                    "xfer");
      g.depend(c, x);
      if (!prev.empty()) g.depend(prev.back(), c);
      prev.push_back(x);
    }
    g.run();
    return g.chrome_trace();
  };
  const std::string first = trace();
  CHECK(first == trace());
  CHECK(first.find("\"ph\": \"C\"") != std::string::npos);
}

TEST_CASE("a time beyond the engine's range is an error, never a wrapped or saturated clock", "[sim][time]") {
  CHECK(Time::seconds(4.6e9).count_ns() == 4'600'000'000'000'000'000);
  CHECK_THROWS_AS(Time::seconds(4.7e9), TimeRangeError);
  CHECK_THROWS_AS(Time::seconds(std::numeric_limits<double>::infinity()), TimeRangeError);
  CHECK_THROWS_AS(Time::seconds(std::numeric_limits<double>::quiet_NaN()), TimeRangeError);
  // A flow on a link of 1e-300 B/s would end after 1e309 s: refused, where a saturated time once
  // wrapped round to an instant in the past and the flow "finished" at once.
  Net n({1e-300});
  n.flow({0}, 1e9);
  CHECK_THROWS_AS(n.sim.run(Time::max()), TimeRangeError);
  // An event built from two times in range cannot overflow, and one past the limit is refused.
  Simulator sim;
  Counter h;
  CHECK_THROWS_WITH(sim.schedule_at(Time::ns(Time::kLimit) + Time::ns(1), &h), Catch::Contains("beyond the simulator's range"));
}
