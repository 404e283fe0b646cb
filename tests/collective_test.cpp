#include <cmath>

#include "catch.hpp"
#include <fmt/format.h>

#include "clustersim/common/parts.hpp"
#include "clustersim/models/collective_model.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::models;
using cs::topology::Topology;
using cs::topology::Vertex;

namespace {

Topology from_text(const std::string& text) { return test::topology_from_text(text); }

Topology nodes_of(const std::string& node, int n) {
  if (n == 1) return from_text(fmt::format("topology: {{name: t, node: {}, nodes: 1}}\n", node));
  return from_text(fmt::format(
      "topology:\n  name: t\n  node: {}\n  nodes: {}\n  fabric: {{kind: rail-optimized, scalable_unit: 32, tiers: [{{radix: 64}}, {{radix: 64}}]}}\n",
      node, n));
}

std::vector<Vertex> gpus_where(const Topology& t, const std::function<bool(const topology::Device&)>& pick) {
  std::vector<Vertex> out;
  for (Vertex v : t.gpus()) {
    if (pick(t.device(v))) out.push_back(v);
  }
  return out;
}

Collective collective(CollectiveOp op, std::vector<Vertex> ranks, double bytes) {
  Collective c;
  c.op = op;
  c.ranks = std::move(ranks);
  c.bytes = Bytes(bytes);
  return c;
}

Collective all_reduce(std::vector<Vertex> ranks, double bytes) { return collective(CollectiveOp::all_reduce, std::move(ranks), bytes); }

// Runs several planned collectives at once in one task graph; returns each one's time.
std::vector<double> concurrently(const CollectiveModel& m, const std::vector<Collective>& cs) {
  sim::Simulator sim;
  sim::FluidNetwork net(sim, m.capacities());
  sim::TaskGraph g(sim, net, static_cast<int>(m.topology().gpus().size()));
  std::vector<sim::TaskGraph::TaskId> last;
  for (const auto& c : cs) last.push_back(m.add_to(g, m.plan(c)).second);
  g.run();
  std::vector<double> out;
  for (auto t : last) out.push_back(g.record(t).end.to_seconds());
  return out;
}

}  // namespace

TEST_CASE("busbw follows nccl-tests' definitions", "[collectives]") {
  CHECK(bus_factor(CollectiveOp::all_reduce, 8) == Approx(2.0 * 7 / 8));
  CHECK(bus_factor(CollectiveOp::all_gather, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(CollectiveOp::all_to_all, 4) == Approx(3.0 / 4));
  CHECK(bus_factor(CollectiveOp::broadcast, 8) == 1.0);
}

TEST_CASE("NCCL's graph search on the shipped systems", "[collectives][nccl]") {
  // DGX H100 (docs/nccl-model.md 7.4): rings 12 x 30 GB/s, NVLS 8 heads at 40; DGX A100 12 x 20;
  // 4 DGX A100 with HDR: 8 x 24 (PCIe Gen4 caps the GPU-NIC path).
  const Topology t1 = nodes_of("dgx-h100", 1), t2 = nodes_of("dgx-a100", 1), t3 = nodes_of("dgx-a100", 4);
  const CollectiveModel h100(t1);
  const auto ph = h100.plan(all_reduce(h100.topology().gpus(), 1 << 30));
  CHECK(ph.shape.channels == 12);
  CHECK(ph.shape.bi == Approx(30));
  CHECK(ph.shape.nvls_channels == 8);
  CHECK(ph.shape.nvls_bi == Approx(40));
  const CollectiveModel a100(t2);
  const auto pa = a100.plan(all_reduce(a100.topology().gpus(), 1 << 30));
  CHECK(pa.shape.channels * pa.shape.bi == Approx(240));
  const CollectiveModel a100x4(t3);
  const auto pm = a100x4.plan(all_reduce(a100x4.topology().gpus(), 1 << 30));
  CHECK(pm.shape.channels == 8);
  CHECK(pm.shape.be == Approx(24));
}

TEST_CASE("NCCL's graph search goes down the speed ladder while channels x speed grows", "[collectives][nccl]") {
  // Expectations (docs/nccl-model.md 7.3, pass 1 then duplication): an H800's 8 NVLinks (8 x 20.6 =
  // 164.8 GB/s) fit 2 x 60, 3 x 50, then 4 x 40 = 160, the best before 0.49 of 40; duplication gives
  // 8 x 20 (the first speed alone had given 4 x 30 = 120 GB/s, 25% under an A100 on the same links).
  // DGX H100 (370.8) stays 6 x 60 = 360 (9 x 40 and 12 x 30 are no larger), duplicated to 12 x 30;
  // B200 (721.8) 8 x 90 to 16 x 45; a PCIe Gen4 GPU alone (24 GB/s, Ada) 2 x 12 over 1 x 20.
  GraphInputs h800;
  h800.ranks = h800.ppn = 8;
  h800.architecture = "hopper";
  h800.nvswitch = true;
  h800.gpu_total = h800.gpu_to_gpu = 8 * 20.6;
  const CommShape s800 = nccl_graph(h800);
  CHECK(s800.channels == 8);
  CHECK(s800.bi == Approx(20));
  GraphInputs h100 = h800;
  h100.gpu_total = h100.gpu_to_gpu = 18 * 20.6;
  CHECK(nccl_graph(h100).channels == 12);
  CHECK(nccl_graph(h100).bi == Approx(30));
  GraphInputs b200 = h800;
  b200.architecture = "blackwell";
  b200.gpu_total = b200.gpu_to_gpu = 18 * 40.1;
  CHECK(nccl_graph(b200).channels == 16);
  CHECK(nccl_graph(b200).bi == Approx(45));
  GraphInputs pcie;
  pcie.ranks = pcie.ppn = 8;
  pcie.architecture = "ada";
  pcie.intra_nvlink = false;
  pcie.gpu_total = pcie.gpu_to_gpu = 24;
  CHECK(nccl_graph(pcie).channels == 2);
  CHECK(nccl_graph(pcie).bi == Approx(12));
}

TEST_CASE("NCCL's search inputs are the group's own: its members' NVLinks, its least GPU, the NICs it leaves by", "[collectives][nccl]") {
  // Expectations (a probe's cases): (1) GPUs whose NVLinks differ give one result whatever their
  // order (the first rank's links had been taken); (2) two GPUs of a 4-GPU NVLink mesh have one
  // 100 GB/s link between them, and NCCL's graph holds the group's GPUs only, so its model is the
  // simulated time, not a third of it; (3) two GPUs behind one NIC use one NIC's channels.
  const Topology het = from_text(
      "topology:\n  name: het\n  node:\n    name: het\n    gpu: h100-sxm5-80gb\n    devices:\n      - {name: gpu, kind: gpu, count: 4}\n"
      "      - {name: nvswitch, kind: nvswitch, count: 1}\n    links:\n"
      "      - {from: gpu0, to: nvswitch, kind: nvlink, bandwidth: 450GB/s}\n      - {from: gpu1, to: nvswitch, kind: nvlink, bandwidth: 450GB/s}\n"
      "      - {from: gpu2, to: nvswitch, kind: nvlink, bandwidth: 150GB/s}\n      - {from: gpu3, to: nvswitch, kind: nvlink, bandwidth: 150GB/s}\n");
  const CollectiveModel h(het);
  const auto& g = h.topology().gpus();
  const auto forward = h.simulate(all_reduce({g[0], g[2]}, 1 << 30)), backward = h.simulate(all_reduce({g[2], g[0]}, 1 << 30));
  CHECK(forward.time.value() == backward.time.value());
  CHECK(forward.plan.model.time.value() == backward.plan.model.time.value());
  const Topology mesh = from_text(
      "topology:\n  name: mesh\n  node:\n    name: mesh\n    gpu: a100-sxm4-80gb\n    devices:\n      - {name: gpu, kind: gpu, count: 4}\n    links:\n"
      "      - {from: gpu0, to: gpu1, kind: nvlink, bandwidth: 100GB/s}\n      - {from: gpu0, to: gpu2, kind: nvlink, bandwidth: 100GB/s}\n"
      "      - {from: gpu0, to: gpu3, kind: nvlink, bandwidth: 100GB/s}\n      - {from: gpu1, to: gpu2, kind: nvlink, bandwidth: 100GB/s}\n"
      "      - {from: gpu1, to: gpu3, kind: nvlink, bandwidth: 100GB/s}\n      - {from: gpu2, to: gpu3, kind: nvlink, bandwidth: 100GB/s}\n");
  const CollectiveModel m(mesh);
  const auto pair = m.simulate(all_reduce({m.topology().gpus()[0], m.topology().gpus()[1]}, 1 << 30));
  CHECK(pair.plan.model.time.value() == Approx(pair.time.value()).epsilon(0.01));
  const Topology shared = from_text(
      "topology:\n  name: shared\n  node:\n    name: shared\n    gpu: h100-sxm5-80gb\n    devices:\n      - {name: gpu, kind: gpu, count: 8}\n"
      "      - {name: nvswitch, kind: nvswitch, count: 1}\n      - {name: pcie, kind: pcie_switch, count: 4}\n      - {name: cpu, kind: cpu, count: 2}\n"
      "      - {name: nic, kind: nic, count: 4, rate: 400Gbps}\n    links:\n      - {from: gpu, to: nvswitch, kind: nvlink, bandwidth: 450GB/s}\n"
      "      - {from: gpu, to: pcie, pattern: block, kind: pcie, bandwidth: 63GB/s}\n      - {from: nic, to: pcie, pattern: zip, kind: pcie, bandwidth: 63GB/s}\n"
      "      - {from: pcie, to: cpu, pattern: block, kind: pcie, bandwidth: 63GB/s}\n      - {from: cpu0, to: cpu1, kind: socket, bandwidth: 128GB/s}\n"
      "  nodes: 2\n  fabric: {kind: fat-tree, tiers: [{radix: 64}]}\n");
  const CollectiveModel s(shared);
  const auto& sg = s.topology().gpus();
  const auto one_nic = s.simulate(all_reduce({sg[0], sg[1], sg[8], sg[9]}, 1 << 30));
  CHECK(one_nic.plan.model.time.value() == Approx(one_nic.time.value()).epsilon(0.01));
}

TEST_CASE("NVLS all-gather runs on at most 32 GPUs of a node, forced or not", "[collectives][nccl]") {
  // NCCL_MAX_NVLS_ARITY (device.h): a 72-GPU NVL72 rack's all-gather is no NVLS one (a probe had
  // forced one, and it ran).
  const Topology rack = nodes_of("gb200-nvl72", 1);
  const CollectiveModel m(rack);
  Collective c = collective(CollectiveOp::all_gather, m.topology().gpus(), 1 << 30);
  CHECK(m.plan(c).model.algorithm != Algorithm::nvls);
  c.algorithm = Algorithm::nvls;
  CHECK_THROWS_WITH(m.plan(c), Catch::Contains("at most 32 GPUs of a node (NCCL_MAX_NVLS_ARITY), found 72"));
  std::vector<Vertex> half(m.topology().gpus().begin(), m.topology().gpus().begin() + 32);
  Collective d = collective(CollectiveOp::all_gather, half, 1 << 30);
  d.algorithm = Algorithm::nvls;
  CHECK(m.plan(d).model.algorithm == Algorithm::nvls);
}

TEST_CASE("ring all-reduce on an uncontended ring takes 2(n-1) alpha + 2(n-1)/n S / B", "[collectives][ring]") {
  const Topology topo = nodes_of("dgx-h100", 1);
  const CollectiveModel m(topo);
  Collective c = all_reduce(m.topology().gpus(), 1 << 30);
  c.algorithm = Algorithm::ring;
  c.protocol = Protocol::simple;
  const auto r = m.simulate(c);
  // Expectations (NCCL's model, docs/nccl-model.md): n = 8, B = busBw = 12 channels x 30 GB/s = 360 GB/s,
  // alpha = the NVLink Ring Simple hop latency 3.4 us, plus the 8.4 us base latency.
  const double n = 8, S = 1 << 30, B = 360e9;
  const double expected = 8.4e-6 + 2 * (n - 1) * 3.4e-6 + 2 * (n - 1) / n * S / B;
  // Simulated time is whole nanoseconds: the latency and the completion each round by under 1 ns.
  CHECK(r.time.value() == Approx(expected).epsilon(0).margin(2e-9));
  CHECK(r.busbw.value() == Approx(2 * (n - 1) / n * S / expected));
}

TEST_CASE("a collective's progress callback reports as it runs and changes nothing", "[collectives]") {
  // An all-to-all of 128 GPUs: 16,256 flows, tens of thousands of events.
  const Topology topo = nodes_of("dgx-h100", 16);
  const CollectiveModel m(topo);
  Collective c = all_reduce(m.topology().gpus(), 1 << 30);
  c.op = CollectiveOp::all_to_all;
  const auto quiet = m.simulate(c);
  std::vector<std::uint64_t> events;
  sim::Time last = sim::Time::zero();
  bool monotone = true;
  const auto loud = m.simulate(c, [&](sim::Time now, const sim::RunStats& s) {
    monotone = monotone && now >= last;
    last = now;
    events.push_back(s.events);
  });
  CHECK(loud.time.value() == quiet.time.value());
  CHECK(loud.stats.events == quiet.stats.events);
  CHECK(monotone);
  // Every 20,000 events: as many calls as whole multiples the run reached.
  CHECK(events.size() == quiet.stats.events / 20'000);
  REQUIRE(!events.empty());
  CHECK(events.front() == 20'000);
}

TEST_CASE("ring all-reduce across nodes whose GPUs share NICs leaves through every NIC", "[collectives][ring]") {
  // Expectation: two DGX H100-like nodes with 4 NICs of 400G, GPUs 2i and 2i+1 behind NIC i. Rings
  // that leave through neighbouring GPUs had put two rings on one NIC and none on another: all 16
  // GPUs took 2.06x as long as 8 (one per NIC). With every NIC used, the 16 take what the bytes a
  // ring moves per hop ask, 2(15)/16 against 2(7)/8 of 8 GPUs': 1.07x.
  // Two nodes of 8 GPUs and 4 NICs, NIC j behind PCIe switch j; `wiring` joins the GPUs to the switches.
  const auto four_nics = [](const std::string& wiring) {
    return from_text(R"(topology:
  name: four-nics
  nodes: 2
  fabric: {kind: fat-tree, technology: infiniband, tiers: [{radix: 64}, {radix: 64}]}
  node:
    name: dgx-h100-4nic
    gpu: h100-sxm5-80gb
    devices:
      - {name: gpu, kind: gpu, count: 8}
      - {name: nvswitch, kind: nvswitch, count: 1, chips: 4}
      - {name: pcie, kind: pcie_switch, count: 4}
      - {name: cpu, kind: cpu, count: 2}
      - {name: nic, kind: nic, count: 4, rate: 400Gbps}
    links:
      - {from: gpu, to: nvswitch, kind: nvlink, bandwidth: 450GB/s}
)" + wiring + R"(      - {from: pcie, to: nic, pattern: zip, kind: pcie, bandwidth: 63GB/s}
      - {from: pcie, to: cpu, pattern: block, kind: pcie, bandwidth: 63GB/s}
      - {from: cpu0, to: cpu1, kind: socket, bandwidth: 128GB/s}
)");
  };
  const Topology topo = four_nics("      - {from: gpu, to: pcie, pattern: block, kind: pcie, bandwidth: 63GB/s}\n");
  const CollectiveModel m(topo);
  const auto time = [&](std::vector<Vertex> gpus) {
    Collective c = all_reduce(std::move(gpus), 16.0 * (1 << 30));
    c.algorithm = Algorithm::ring;
    return m.simulate(c).time.value();
  };
  const double all = time(topo.gpus());
  const double one_per_nic = time(gpus_where(topo, [](const topology::Device& d) { return d.local_index % 2 == 0; }));
  CHECK(all / one_per_nic == Approx((30.0 / 16) / (14.0 / 8)).epsilon(0.02));

  // The same with GPU i behind NIC i mod 4, as some hosts wire them: the starts spread by NIC, not
  // by index (every other GPU had put the rings on NICs 0 and 2 only: 2x).
  std::string wiring;
  for (int i = 0; i < 8; ++i) wiring += fmt::format("      - {{from: gpu{}, to: pcie{}, kind: pcie, bandwidth: 63GB/s}}\n", i, i % 4);
  const Topology interleaved = four_nics(wiring);
  const CollectiveModel mi(interleaved);
  Collective c = all_reduce(interleaved.gpus(), 16.0 * (1 << 30));
  c.algorithm = Algorithm::ring;
  const double interleaved_all = mi.simulate(c).time.value();
  CHECK(interleaved_all == Approx(all).epsilon(0.02));
}

TEST_CASE("rings on a switchless NVLink mesh spread over all its links", "[collectives][ring]") {
  // Expectation: four GPUs joined pairwise by 100 GB/s NVLinks (HGX A100 4-GPU's wiring: 12 links a
  // GPU, 4 to each peer) give each GPU 300 GB/s out, 240 GB/s at NCCL's 20 GB/s an NVLink (80 a
  // peer, as an NVSwitch system's 12 links give 240), and NCCL's rings use all of it. Rings that
  // rotated one cycle used 4 of the 12 directed links: 2.8x NCCL's time. Three of the four GPUs
  // have two links each to use: 2 x 80 GB/s. (Mesh links had run at the datasheet's 100 GB/s, so a
  // mesh came out 17% faster than the same GPUs on an NVSwitch.)
  const auto topo_text = [](int nodes) {
    return fmt::format(R"(topology:
  name: mesh
  nodes: {}
  {}
  node:
    name: hgx-a100-4
    gpu: a100-sxm4-80gb
    devices:
      - {{name: gpu, kind: gpu, count: 4}}
      - {{name: cpu, kind: cpu, count: 1}}
      - {{name: nic, kind: nic, count: 4, rate: 200Gbps}}
    links:
      - {{from: gpu0, to: gpu1, kind: nvlink, bandwidth: 100GB/s}}
      - {{from: gpu0, to: gpu2, kind: nvlink, bandwidth: 100GB/s}}
      - {{from: gpu0, to: gpu3, kind: nvlink, bandwidth: 100GB/s}}
      - {{from: gpu1, to: gpu2, kind: nvlink, bandwidth: 100GB/s}}
      - {{from: gpu1, to: gpu3, kind: nvlink, bandwidth: 100GB/s}}
      - {{from: gpu2, to: gpu3, kind: nvlink, bandwidth: 100GB/s}}
      - {{from: gpu, to: cpu, kind: pcie, bandwidth: 31.5GB/s}}
      - {{from: gpu, to: nic, pattern: zip, kind: pcie, bandwidth: 31.5GB/s}}
)",
                       nodes, nodes > 1 ? "fabric: {kind: fat-tree, technology: infiniband, tiers: [{radix: 64}]}" : "");
  };
  const Topology topo = from_text(topo_text(1));
  const CollectiveModel m(topo);
  const double size = 1.0 * (1 << 30);
  const auto four = m.simulate(all_reduce(topo.gpus(), size));
  CHECK(four.plan.algorithm == Algorithm::ring);
  CHECK(four.time.value() == Approx(four.plan.model.time.value()).epsilon(0.01));
  CHECK(four.busbw.value() > 2.5 * 80e9);
  CHECK(four.busbw.value() <= 3 * 80e9 * 1.001);
  const auto three = m.simulate(all_reduce({topo.gpus()[0], topo.gpus()[1], topo.gpus()[2]}, size));
  CHECK(three.busbw.value() == Approx(2 * 80e9).epsilon(0.03));
  // A chain from the root (broadcast) uses the mesh as well.
  Collective b = collective(CollectiveOp::broadcast, topo.gpus(), size);
  const auto bcast = m.simulate(b);
  CHECK(bcast.time.value() == Approx(bcast.plan.model.time.value()).epsilon(0.01));
  // Two rings forced by the caller still go both ways round: 2 x 80 GB/s.
  Collective two = all_reduce(topo.gpus(), size);
  two.channels = 2;
  CHECK(m.simulate(two).busbw.value() == Approx(2 * 80e9).epsilon(0.03));

  // Across two such nodes, with a 200G NIC per GPU, rings and the hierarchical scheme's steps inside
  // each node take NCCL's time too (the hierarchical one had run its node steps on one cycle: 1.6x).
  const Topology pair = from_text(topo_text(2));
  const CollectiveModel mp(pair);
  for (const Algorithm a : {Algorithm::ring, Algorithm::hierarchical}) {
    Collective c = all_reduce(pair.gpus(), size);
    c.algorithm = a;
    const auto r = mp.simulate(c);
    CHECK(r.time.value() == Approx(r.plan.model.time.value()).epsilon(0.01));
  }

  // NVLink bridges joining pairs (0-1, 2-3) hold no ring over direct links: the rings stay as they
  // were, one per NIC (the search had turned 2 rings into 4).
  const Topology pairs = from_text(R"(topology:
  name: pairs
  nodes: 2
  fabric: {kind: fat-tree, technology: infiniband, tiers: [{radix: 64}]}
  node:
    name: bridged-pairs
    gpu: a100-sxm4-80gb
    devices:
      - {name: gpu, kind: gpu, count: 4}
      - {name: cpu, kind: cpu, count: 1}
      - {name: nic, kind: nic, count: 2, rate: 200Gbps}
    links:
      - {from: gpu0, to: gpu1, kind: nvlink, bandwidth: 100GB/s}
      - {from: gpu2, to: gpu3, kind: nvlink, bandwidth: 100GB/s}
      - {from: gpu, to: cpu, kind: pcie, bandwidth: 31.5GB/s}
      - {from: gpu, to: nic, pattern: block, kind: pcie, bandwidth: 31.5GB/s}
)");
  Collective bridged = all_reduce(pairs.gpus(), size);
  bridged.algorithm = Algorithm::ring;
  CHECK(CollectiveModel(pairs).plan(bridged).channels == 2);
}

TEST_CASE("a multi-plane fabric carries between nodes what its planes together carry", "[collectives][planes]") {
  // Expectation: 16 single-GPU hosts whose NIC has two 200G ports on two planes move what the same
  // hosts move through one 400G port on one plane, for every pattern between nodes. Each flow had
  // been pinned to one port (the plane chosen by destination) and the NCCL model had seen one port:
  // half the bandwidth, for an all-to-all 40.3 ms against 21.0 ms. (Split without dividing its rate
  // cap, an LL all-reduce then ran at 349 us against NCCL's 542.)
  const auto hosts = [](const std::string& nic, const std::string& planes) {
    return from_text(fmt::format(R"(topology:
  name: hosts
  node: {{name: h1, gpu: h100-sxm5-80gb, devices: [{{name: gpu, kind: gpu, count: 1}}, {{name: nic, kind: nic, count: 1, {}}}],
          links: [{{from: gpu, to: nic, kind: pcie, bandwidth: 63GB/s}}]}}
  nodes: 16
  fabric: {{kind: fat-tree, technology: infiniband, {}tiers: [{{radix: 8}}, {{radix: 8}}]}}
)",
                                 nic, planes));
  };
  const Topology two = hosts("rate: 200Gbps, ports: 2", "planes: 2, ");
  const Topology one = hosts("rate: 400Gbps", "");
  const CollectiveModel m2(two), m1(one);
  for (const CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_to_all, CollectiveOp::all_gather}) {
    INFO(to_string(op));
    const auto on = [&](const CollectiveModel& m) { return m.simulate(collective(op, m.topology().gpus(), 1 << 30)); };
    const CollectiveResult a = on(m2), b = on(m1);
    CHECK(a.time.value() == Approx(b.time.value()).epsilon(1e-6));
    CHECK(a.plan.model.time.value() == Approx(b.plan.model.time.value()).epsilon(1e-6));
  }
  // Where the protocol's rate cap binds (LL at 4 MiB), it binds the transfer over both planes together.
  for (const CollectiveModel* m : {&m2, &m1}) {
    Collective c = all_reduce(m->topology().gpus(), 4 << 20);
    c.protocol = Protocol::ll;
    const CollectiveResult r = m->simulate(c);
    CHECK(r.time.value() == Approx(r.plan.model.time.value()).epsilon(1e-6));
  }
  const auto pair = [](const Topology& t) { return std::vector<Vertex>{t.gpus()[0], t.gpus()[5]}; };
  CHECK(m2.simulate(collective(CollectiveOp::send_recv, pair(two), 1 << 30)).time.value() ==
        Approx(m1.simulate(collective(CollectiveOp::send_recv, pair(one), 1 << 30)).time.value()).epsilon(1e-6));
  // CollNet (SHARP) reduces each plane's share in that plane's switches (its shards had gone up
  // one port, which binds below its rate cap on four planes of 100G).
  const Topology two_sharp = hosts("rate: 100Gbps, ports: 4", "planes: 4, in_network_reduction: true, ");
  const Topology one_sharp = hosts("rate: 400Gbps", "in_network_reduction: true, ");
  const CollectiveModel s2(two_sharp), s1(one_sharp);
  const auto collnet = [](const CollectiveModel& m) {
    Collective c = all_reduce(m.topology().gpus(), 1 << 30);
    c.algorithm = Algorithm::collnet;
    return m.simulate(c);
  };
  const CollectiveResult c2 = collnet(s2), c1 = collnet(s1);
  CHECK(c2.plan.model.time.value() == Approx(c1.plan.model.time.value()).epsilon(1e-6));
  CHECK(c2.time.value() == Approx(c1.time.value()).epsilon(1e-6));
}

TEST_CASE("a tree all-reduce alone takes NCCL's predicted time, whatever the GPUs per node", "[collectives][tree]") {
  // Expectation (docs/collectives.md): alone on the network a collective takes NCCL's predicted
  // time. Inside a node both trees run down the node's chain; they must not share one flow's rate
  // cap (which took twice the time whenever a node held two or more GPUs of the group).
  const Topology topo = nodes_of("dgx-h100", 4);
  const CollectiveModel m(topo);
  for (int per_node : {1, 2, 8}) {
    const auto ranks = gpus_where(m.topology(), [&](const topology::Device& d) { return d.gpu_rank % 8 < per_node; });
    REQUIRE(ranks.size() == static_cast<std::size_t>(4 * per_node));
    Collective c = all_reduce(ranks, 1 << 30);
    c.algorithm = Algorithm::tree;
    c.protocol = Protocol::simple;
    const auto r = m.simulate(c);
    INFO(per_node << " GPUs per node");
    CHECK(r.time.value() == Approx(r.plan.model.time.value()).epsilon(1e-3));
  }
  // Left to NCCL's choice (tree at some sizes, ring at others), a larger all-reduce never ends sooner.
  double previous = 0;
  for (double bytes = 1 << 16; bytes <= 1 << 30; bytes *= 2) {
    const double t = m.simulate(all_reduce(m.topology().gpus(), bytes)).time.value();
    INFO(bytes << " bytes");
    CHECK(t >= previous);
    previous = t;
  }
}

TEST_CASE("NCCL's channel count respects what a GPU can carry: uneven nodes and GB200 racks", "[collectives][nccl]") {
  // Expectations (docs/nccl-model.md 7): channels are the minimum over the ranks (a node with two of
  // the group's GPUs holds two NICs' channels), and the search stops once the channels reach the
  // GPU's total bandwidth. An all-gather over 8 + 2 GPUs of two DGX H100 nodes then takes NCCL's
  // predicted time (it took 4 times it: eight NICs' channels into a node with two), and a ring over
  // two GB200 NVL72 racks is predicted within 10% of what the simulation can move (not at 32 channels
  // x 48 GB/s, twice a GPU's NVLink).
  {
    const Topology topo = nodes_of("dgx-h100", 2);
    const CollectiveModel m(topo);
    const auto ranks = gpus_where(m.topology(), [](const topology::Device& d) { return d.gpu_rank < 10; });
    Collective c = all_reduce(ranks, 4.0 * (1 << 30));
    c.op = CollectiveOp::all_gather;
    const auto r = m.simulate(c);
    CHECK(r.time.value() == Approx(r.plan.model.time.value()).epsilon(0.01));
  }
  {
    const Topology topo = topology::load_topology("gb200-nvl72-x8");
    const CollectiveModel m(topo);
    const auto ranks = gpus_where(m.topology(), [](const topology::Device& d) { return d.gpu_rank < 144; });
    Collective c = all_reduce(ranks, 16.0 * (1 << 30));
    c.op = CollectiveOp::all_gather;
    c.algorithm = Algorithm::ring;
    c.protocol = Protocol::simple;
    const auto r = m.simulate(c);
    // The search stops at ceil(totalBw / Be) channels: totalBw = 18 NVLink 5 links x 40.1 GB/s
    // (NCCL's SM100_NVLINK_BW) = 722 GB/s, Be = 48 GB/s, so ceil(15.04) = 16.
    CHECK(r.plan.shape.channels <= 16);
    CHECK(r.time.value() == Approx(r.plan.model.time.value()).epsilon(0.1));
  }
  {
    // NVLS inside one NVL72 rack: 32 channels at most, so a GPU's link carries 32 + 1 channel loads
    // at 72 GPUs as at 32 (722 / 33 = 21.9 GB/s: the ladder's 20). ppn + 1 had asked for 722 / 73
    // = 9.9, under the ladder, whose lowest step (18) was taken regardless: 10% below 32 GPUs.
    const Topology topo = topology::load_topology("gb200-nvl72-x8");
    const CollectiveModel m(topo);
    const auto rack = [&](int n) { return gpus_where(m.topology(), [n](const topology::Device& d) { return d.gpu_rank < n; }); };
    const auto p72 = m.plan(all_reduce(rack(72), 8.0 * (1 << 30)));
    const auto p32 = m.plan(all_reduce(rack(32), 8.0 * (1 << 30)));
    CHECK(p72.shape.nvls_channels == 32);
    CHECK(p72.shape.nvls_bi == Approx(20));
    CHECK(p32.shape.nvls_bi == Approx(20));
  }
}

TEST_CASE("NVLS busbw exceeds ring busbw on an NVSwitch node", "[collectives][nvls]") {
  const Topology topo = nodes_of("dgx-h100", 1);
  const CollectiveModel m(topo);
  Collective c = all_reduce(m.topology().gpus(), 16.0 * (1 << 30));
  c.algorithm = Algorithm::ring;
  const auto ring = m.simulate(c);
  c.algorithm = Algorithm::nvls;
  const auto nvls = m.simulate(c);
  CHECK(nvls.busbw.value() > 1.2 * ring.busbw.value());
  // NCCL's model for NVLS on H100: 8 heads x min(40 x 0.85 x 7/8 x 2, inter) = 476 GB/s busbw.
  CHECK(nvls.busbw.value() / 1e9 == Approx(476).epsilon(0.01));
  // Left to NCCL's cost model, a large all-reduce picks NVLS and a tiny one LL.
  CHECK(m.plan(all_reduce(m.topology().gpus(), 1 << 30)).algorithm == Algorithm::nvls);
  CHECK(m.plan(all_reduce(m.topology().gpus(), 4096)).protocol == Protocol::ll);
}

TEST_CASE("NVLS all-gather and reduce-scatter run when asked, and NCCL's model leaves them to the ring on H100", "[collectives][nvls]") {
  const Topology topo = nodes_of("dgx-h100", 1);
  const CollectiveModel m(topo);
  for (CollectiveOp op : {CollectiveOp::all_gather, CollectiveOp::reduce_scatter}) {
    Collective c = collective(op, m.topology().gpus(), 4.0 * (1 << 30));
    c.algorithm = Algorithm::nvls;
    const auto nvls = m.simulate(c);
    // NCCL's model: 8 heads x 40 GB/s x 0.85 x 7/8 x (ppn - 1) / ppn = 208 GB/s, algbw = busbw; the
    // fuller link's (n-1)/n S at (n-1)/n of it takes S / algbw, as NCCL times it.
    CHECK(nvls.plan.model.algbw.value() / 1e9 == Approx(8 * 40 * 0.85 * 7.0 / 8 * 7.0 / 8).epsilon(1e-6));
    CHECK(nvls.time.value() == Approx(nvls.plan.model.time.value()).epsilon(0.01));
    // Left to NCCL's cost model, the ring: faster at every size here.
    CHECK(m.plan(collective(op, m.topology().gpus(), 4.0 * (1 << 30))).algorithm == Algorithm::ring);
    CHECK(m.plan(collective(op, m.topology().gpus(), 16 << 20)).algorithm == Algorithm::ring);
  }
}

TEST_CASE("hierarchical all-reduce beats a flat single ring across nodes", "[collectives][hierarchical]") {
  const Topology topo = nodes_of("dgx-h100", 4);
  const CollectiveModel m(topo);
  Collective c = all_reduce(m.topology().gpus(), 1 << 30);
  c.algorithm = Algorithm::ring;
  c.channels = 1;  // one ring through all 32 GPUs: one NIC per node carries everything
  const auto flat = m.simulate(c);
  c.algorithm = Algorithm::hierarchical;
  c.channels = 0;
  const auto hier = m.simulate(c);
  CHECK(hier.time < flat.time);
  CHECK(hier.plan.phases.size() == 3);
}

TEST_CASE("concurrent collectives contend exactly where they share links", "[collectives][contention]") {
  // 4 nodes of 8 GPUs sharing 4 NICs (two GPUs per NIC and PCIe switch), rail-optimized on 4 rails.
  const std::string node =
      "    name: shared-nic\n    gpu: h100-sxm5-80gb\n    devices:\n      - {name: gpu, kind: gpu, count: 8}\n"
      "      - {name: nvswitch, kind: nvswitch, count: 1}\n      - {name: pcie, kind: pcie_switch, count: 4}\n"
      "      - {name: nic, kind: nic, count: 4, rate: 400Gbps}\n    links:\n"
      "      - {from: gpu, to: nvswitch, kind: nvlink, bandwidth: 450GB/s}\n"
      "      - {from: gpu, to: pcie, pattern: block, kind: pcie, bandwidth: 63GB/s}\n"
      "      - {from: nic, to: pcie, pattern: zip, kind: pcie, bandwidth: 63GB/s}\n";
  const Topology t = from_text("topology:\n  name: t\n  node:\n" + node +
                               "  nodes: 4\n  fabric: {kind: rail-optimized, scalable_unit: 32, tiers: [{radix: 64}, {radix: 64}]}\n");
  const CollectiveModel m(t, CollectiveOptions{.pxn = false});
  auto dp_group = [&](int local) { return all_reduce(gpus_where(t, [&](const auto& d) { return d.local_index == local; }), 256 << 20); };
  const double alone = m.simulate(dp_group(0)).time.value();
  // GPUs 0 and 2 use NICs 0 and 1: separate rails, no slow-down.
  const auto apart = concurrently(m, {dp_group(0), dp_group(2)});
  CHECK(apart[0] == Approx(alone).epsilon(1e-6));
  CHECK(apart[1] == Approx(alone).epsilon(1e-6));
  // GPUs 0 and 1 share NIC 0 and its rail: each gets half the bandwidth.
  const auto together = concurrently(m, {dp_group(0), dp_group(1)});
  CHECK(together[0] > 1.8 * alone - 0.1e-3);
  CHECK(together[1] > 1.8 * alone - 0.1e-3);
}

TEST_CASE("eight DP all-reduces on the eight rails of DGX H100 nodes do not slow each other", "[collectives][contention]") {
  const Topology t = nodes_of("dgx-h100", 4);
  const CollectiveModel m(t);
  std::vector<Collective> groups;
  for (int rail = 0; rail < 8; ++rail) {
    groups.push_back(all_reduce(gpus_where(t, [&](const auto& d) { return d.local_index == rail; }), 256 << 20));
  }
  const double alone = m.simulate(groups[0]).time.value();
  for (double t_end : concurrently(m, groups)) CHECK(t_end == Approx(alone).epsilon(1e-6));
}

TEST_CASE("an all-to-all across rails is limited by the spine when PXN is off", "[collectives][all-to-all]") {
  // Leaves oversubscribed 4:1: cross-rail traffic that must climb to the spines gets a quarter of
  // its NIC rate; with PXN it changes rail over NVLink and stays on its leaf.
  const Topology t = from_text(
      "topology:\n  name: t\n  node: dgx-h100\n  nodes: 4\n"
      "  fabric: {kind: rail-optimized, scalable_unit: 4, tiers: [{radix: 64, oversubscription: 4}, {radix: 64}]}\n");
  Collective c;
  c.op = CollectiveOp::all_to_all;
  c.ranks = t.gpus();
  c.bytes = Bytes(256 << 20);
  const auto with_pxn = CollectiveModel(t, CollectiveOptions{.pxn = true}).simulate(c);
  const auto without = CollectiveModel(t, CollectiveOptions{.pxn = false}).simulate(c);
  CHECK(without.time.value() > 2.0 * with_pxn.time.value());
}

TEST_CASE("CollNet reduces in the switches of a SHARP fabric", "[collectives][collnet]") {
  const Topology t = from_text(
      "topology:\n  name: t\n  node: dgx-h100\n  nodes: 4\n"
      "  fabric: {kind: rail-optimized, scalable_unit: 32, in_network_reduction: true, tiers: [{radix: 64}, {radix: 64}]}\n");
  const CollectiveModel m(t);
  Collective c = all_reduce(t.gpus(), 1 << 30);
  c.algorithm = Algorithm::collnet;
  const auto r = m.simulate(c);
  // NCCL's CollNetDirect on H100 (collnet.cc 2.31): busBw = 8 channels x 48 GB/s / ((1 + 1) / 2) x 0.85;
  // algbw = busBw / 2 = 163.2 GB/s; the shards meet no contention, so the simulation agrees.
  CHECK(r.plan.model.algbw.value() / 1e9 == Approx(8 * 48 * 0.85 / 2));
  CHECK(r.time.value() == Approx(r.plan.model.time.value()).epsilon(1e-6));
  // With SHARP the aggregated shard of a rail leaves each leaf once, not once per node.
  std::size_t up_to_spine = 0;
  for (const auto& f : *r.plan.phases.front().flows) {
    if (f.path.size() == 1 && t.device(boost::source(*std::find_if(boost::edges(t.graph()).first, boost::edges(t.graph()).second,
                                                                    [&](auto e) { return t.link(e).id == f.path[0]; }),
                                                     t.graph()))
                                      .kind == topology::DeviceKind::leaf) {
      ++up_to_spine;
    }
  }
  CHECK(up_to_spine > 0);
  // For small messages its latency wins: NCCL's model picks it on its own.
  CHECK(m.plan(all_reduce(t.gpus(), 64 << 10)).algorithm == Algorithm::collnet);
  // SHARP needs InfiniBand.
  CHECK_THAT(test::input_error([] {
               from_text("topology:\n  name: t\n  node: dgx-h100\n  nodes: 2\n"
                         "  fabric: {kind: fat-tree, technology: roce, in_network_reduction: true, tiers: [{radix: 64}]}\n");
             }),
             Catch::Contains("expected false: in-network reduction (SHARP) needs an InfiniBand fabric, found true"));
}

TEST_CASE("all-to-allv moves each pair's own size", "[collectives][all-to-all]") {
  const Topology t = nodes_of("dgx-h100", 1);
  const CollectiveModel m(t);
  const Collective even = collective(CollectiveOp::all_to_all, t.gpus(), 8 << 20);
  // The same matrix written out: 1 MiB between every pair, equal to the even all-to-all of 8 MiB.
  Collective v = even;
  v.pair_bytes.assign(64, 1 << 20);
  CHECK(m.simulate(v).time == m.simulate(even).time);
  // One pair sends 64 MiB more: its NVLink share bounds the time (as much as the rest together).
  v.pair_bytes[0 * 8 + 5] += 64 << 20;
  CHECK(m.simulate(v).time.value() > 5 * m.simulate(even).time.value());
  v.pair_bytes.resize(10);
  CHECK_THROWS_WITH(m.plan(v), Catch::Contains("per-pair sizes need 8 x 8 entries, found 10"));
}

TEST_CASE("send/recv and all-to-all alone take their estimate: node-mates over NVLink, the rest through the NICs", "[collectives][all-to-all]") {
  // NCCL's tuner has no model of either; the estimate is the bytes over the GPUs' paths. On two DGX
  // H100 an all-to-all sends 7/16 of a GPU's buffer over NVLink and 8/16 through its NIC at once:
  // the NIC's half sets the time, about half of what all of it through the NIC would take.
  const Topology topo = nodes_of("dgx-h100", 2);
  const CollectiveModel m(topo);
  Collective a = collective(CollectiveOp::all_to_all, topo.gpus(), 1 << 30);
  const auto ra = m.simulate(a);
  CHECK(ra.time.value() == Approx(ra.plan.model.time.value()).epsilon(0.01));
  // 8/16 of 1 GiB through a GPU's path to its NIC, NCCL's PCIe Gen5 48 GB/s.
  CHECK(ra.plan.model.time.value() == Approx(0.5 * (1 << 30) / 48e9).epsilon(0.02));
  // Inside one node: 7/8 of the buffer over the GPU's NVLink.
  a.ranks = std::vector<Vertex>(topo.gpus().begin(), topo.gpus().begin() + 8);
  const auto one = m.simulate(a);
  CHECK(one.time.value() == Approx(one.plan.model.time.value()).epsilon(0.01));
  for (const std::size_t peer : {std::size_t{1}, std::size_t{8}}) {
    const auto rp = m.simulate(collective(CollectiveOp::send_recv, {topo.gpus()[0], topo.gpus()[peer]}, 1 << 30));
    CHECK(rp.time.value() == Approx(rp.plan.model.time.value()).epsilon(0.01));
  }
}

TEST_CASE("broadcast, reduce and send/recv", "[collectives]") {
  const Topology topo = nodes_of("dgx-h100", 2);
  const CollectiveModel m(topo);
  Collective b;
  b.op = CollectiveOp::broadcast;
  b.ranks = m.topology().gpus();
  b.bytes = Bytes(1 << 30);
  b.root = 3;
  const auto rb = m.simulate(b);
  CHECK(rb.plan.algorithm == Algorithm::ring);
  // A pipelined chain moves S at the ring's bus bandwidth: busbw = algbw for broadcast.
  CHECK(rb.busbw.value() == Approx(rb.algbw.value()));
  Collective p;
  p.op = CollectiveOp::send_recv;
  p.ranks = {m.topology().gpus()[0], m.topology().gpus()[8]};
  p.bytes = Bytes(1 << 30);
  const auto rp = m.simulate(p);
  // Between nodes one GPU's path is bounded by NCCL's PCIe Gen5 figure, 48 GB/s.
  CHECK(rp.algbw.value() / 1e9 == Approx(48).epsilon(0.02));
}

TEST_CASE("impossible collectives are refused clearly", "[collectives][errors]") {
  const Topology topo = nodes_of("dgx-a100", 1);
  const CollectiveModel m(topo);
  Collective c = all_reduce({m.topology().gpus()[0]}, 1024);
  CHECK_THROWS_WITH(m.plan(c), Catch::Contains("needs at least 2 GPUs"));
  c = all_reduce(m.topology().gpus(), 1024);
  c.algorithm = Algorithm::nvls;
  CHECK_THROWS_WITH(m.plan(c), Catch::Contains("nvls needs one node whose GPUs all meet at one NVSwitch, on Hopper or later"));
  c.algorithm = Algorithm::collnet;
  CHECK_THROWS_WITH(m.plan(c), Catch::Contains("collnet needs a fabric with in_network_reduction (SHARP)"));
  c = all_reduce({m.topology().gpus()[0], m.topology().gpus()[0]}, 1024);
  CHECK_THROWS_WITH(m.plan(c), Catch::Contains("appears twice"));
  // The hierarchical scheme is an all-reduce's: an all-gather or all-to-all forced onto it had been
  // timed as the all-reduce (a probe).
  const Topology two = nodes_of("dgx-h100", 2);
  const CollectiveModel m2(two);
  for (CollectiveOp op : {CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::all_to_all, CollectiveOp::broadcast}) {
    Collective h = collective(op, m2.topology().gpus(), 1 << 28);
    h.algorithm = Algorithm::hierarchical;
    CHECK_THROWS_WITH(m2.plan(h), Catch::Contains("hierarchical is an all_reduce scheme"));
  }
  // NVLS needs one switch under every GPU: a node of two NVSwitches joined by a thin link is refused
  // it when forced and never offered it (its halves had been "reduced" apart, the link unloaded).
  const Topology split = from_text(R"(topology:
  name: t
  node:
    name: n
    gpu: h100-sxm5-80gb
    devices:
      - {name: gpu, kind: gpu, count: 4}
      - {name: sw, kind: nvswitch, count: 2}
    links:
      - {from: gpu, to: sw, pattern: block, kind: nvlink, bandwidth: 300GB/s}
      - {from: sw0, to: sw1, kind: nvlink, bandwidth: 10GB/s}
)");
  const CollectiveModel ms(split);
  Collective n = all_reduce(ms.topology().gpus(), 1 << 30);
  CHECK(ms.plan(n).algorithm != Algorithm::nvls);
  n.algorithm = Algorithm::nvls;
  CHECK_THROWS_WITH(ms.plan(n), Catch::Contains("nvls needs one node whose GPUs all meet at one NVSwitch"));
}

TEST_CASE("the same collective twice gives identical results", "[collectives][determinism]") {
  const Topology topo = nodes_of("dgx-h100", 4);
  const CollectiveModel m(topo);
  Collective c = all_reduce(m.topology().gpus(), 64 << 20);
  const auto a = m.simulate(c), b = m.simulate(c);
  CHECK(a.time == b.time);
  CHECK(a.stats.events == b.stats.events);
}

TEST_CASE("an all-to-all past 1,024 GPUs on a hashed fabric is refused, and on one routed by destination is not", "[collectives][long]") {
  // A probe's 2,048-GPU all-to-all on the RoCE Clos was accepted and would have run for hours (1,024:
  // 7.6 min, the solver's cost growing as the cube of the GPU count where flows end at many times).
  const auto fabric = [](const char* technology) {
    return from_text(fmt::format("topology: {{name: t, node: dgx-h100, nodes: 129, fabric: {{kind: fat-tree, technology: {}, tiers: [{{radix: 64}}, "
                                 "{{radix: 64}}, {{radix: 64}}]}}}}\n",
                                 technology));
  };
  const Topology roce = fabric("roce"), ib = fabric("infiniband");
  std::vector<Vertex> ranks = roce.gpus();
  ranks.resize(1025);
  CHECK_THROWS_WITH(CollectiveModel(roce).plan(collective(CollectiveOp::all_to_all, ranks, 1e9)),
                    Catch::Contains("all_to_all among 1025 GPUs on a fabric that hashes flows over its paths (RoCE ECMP): at most 1024"));
  ranks.resize(1024);
  CHECK_NOTHROW(CollectiveModel(roce).plan(collective(CollectiveOp::all_to_all, ranks, 1e9)));
  std::vector<Vertex> all = ib.gpus();
  all.resize(1025);
  CHECK_NOTHROW(CollectiveModel(ib).plan(collective(CollectiveOp::all_to_all, all, 1e9)));
}

TEST_CASE("an all-to-all past 2,048 GPUs is refused by its flow count, before any flow is built", "[collectives]") {
  // 257 DGX H100 nodes: 2,056 GPUs, 4.2 M pairs. At 16,384 GPUs the 268 M flows had run the
  // machine out of memory (std::bad_alloc after minutes, exit 1).
  const Topology t = from_text(
      "topology: {name: t, node: dgx-h100, nodes: 257, fabric: {kind: fat-tree, technology: infiniband, tiers: [{radix: 64}, {radix: 64}, {radix: 64}]}}\n");
  const CollectiveModel m(t);
  CHECK_THROWS_WITH(m.plan(collective(CollectiveOp::all_to_all, t.gpus(), 1e9)),
                    Catch::Contains("all_to_all among 2056 GPUs is 2056 x 2055") && Catch::Contains("at most 4192256 (2,048 GPUs)"));
  // Other collectives over them are planned as before.
  CHECK(m.plan(all_reduce(t.gpus(), 1e9)).phases.size() > 0);
}

TEST_CASE("RoCE: parallel cables hash as paths of their own, and queue pairs per connection even out the collisions", "[collectives][roce]") {
  // Expectations: a 2-tier RoCE Clos of 64 DGX H100 (two cables from each leaf to each spine). Each
  // cable is an ECMP next hop of its own, so a ring over GPUs 64-127 meets collisions that GPUs 0-63
  // escape, as in 3 tiers (the cables had been one bundled link in 2 tiers and hid them); with 4
  // queue pairs per connection each share is hashed on its own and both sets run at the NIC rate.
  const auto roce = [](int qps) {
    return from_text(fmt::format("topology:\n  name: r\n  node: dgx-h100\n  nodes: 64\n  fabric:\n    kind: fat-tree\n    technology: roce\n"
                                 "    qps_per_connection: {}\n    tiers: [{{radix: 64}}, {{radix: 64}}]\n",
                                 qps));
  };
  const auto ring_time = [](const CollectiveModel& m, int first) {
    std::vector<Vertex> ranks(m.topology().gpus().begin() + first, m.topology().gpus().begin() + first + 64);
    return m.simulate(all_reduce(ranks, 1 << 30)).time.value();
  };
  const Topology one = roce(1), four = roce(4);
  const CollectiveModel m1(one), m4(four);
  const double clear = ring_time(m1, 0);
  CHECK(ring_time(m1, 64) > 1.5 * clear);
  CHECK(ring_time(m4, 64) == Approx(clear).epsilon(0.01));
  CHECK(ring_time(m4, 0) == Approx(clear).epsilon(0.01));
}

TEST_CASE("RoCE: an all-to-all counts each queue pair's flow against the hashed fabric's limit", "[collectives][roce]") {
  // A probe: 1,024 GPUs at 128 queue pairs needed 133 M flows and ended in bad_alloc. Expectation:
  // 512 GPUs at 16 queue pairs (4.2 M flows, four times 1,024 GPUs' pairs) are refused up front, and
  // at 1 queue pair they pass that check.
  const Topology t = from_text(
      "topology:\n  name: r\n  node: dgx-h100\n  nodes: 64\n  fabric:\n    kind: fat-tree\n    technology: roce\n    qps_per_connection: 16\n"
      "    tiers: [{radix: 64}, {radix: 64}]\n");
  const CollectiveModel m(t);
  const std::vector<Vertex> ranks(m.topology().gpus().begin(), m.topology().gpus().end());
  REQUIRE(ranks.size() == 512);
  try {
    (void)m.plan(collective(CollectiveOp::all_to_all, ranks, 1 << 20));
    FAIL("an all-to-all of 4.2 M flows was accepted");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::Contains("at 16 queue pairs per connection is up to 4.19e+06 flows"));
  }
}
