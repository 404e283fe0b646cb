#include <map>
#include <set>

#include "catch.hpp"
#include <fmt/format.h>

#include "clustersim/common/parts.hpp"
#include "clustersim/topology/analysis.hpp"
#include "clustersim/topology/routing.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "support.hpp"

using namespace cs;
using namespace cs::topology;
using Catch::Contains;

namespace {

Topology from_text(const std::string& text) {
  yaml::Node root = test::parse(text);
  yaml::Map m(root);
  IncludeStack includes;
  TopologySpec spec;
  read_topology(m.at("topology", "a topology"), spec, includes);
  m.finish();
  return build_topology(spec);
}

TopologySummary summary_of(const Topology& t) { return summarize(t, Router(t)); }

int count(const TopologySummary& s, DeviceKind k) {
  auto it = s.devices.find(k);
  return it == s.devices.end() ? 0 : it->second;
}

std::string fat_tree(int hosts, int radix, int tiers, double oversubscription = 1.0) {
  std::string text = fmt::format(
      "topology:\n  name: ft\n  node: single-gpu-host\n  nodes: {}\n  fabric:\n    kind: fat-tree\n    tiers:\n", hosts);
  for (int t = 0; t < tiers; ++t) {
    text += fmt::format("      - {{radix: {}, oversubscription: {}}}\n", radix, t == 0 ? oversubscription : 1.0);
  }
  return text;
}

std::vector<DeviceKind> kinds(const Topology& t, const Path& p) {
  std::vector<DeviceKind> out;
  for (Vertex v : p.devices) out.push_back(t.device(v).kind);
  return out;
}

Vertex dev(const Topology& t, const std::string& name) {
  auto v = t.find(name);
  REQUIRE(v);
  return *v;
}

}  // namespace

TEST_CASE("a k-ary 3-tier fat tree has k^3/4 hosts and 5k^2/4 switches", "[topology][fat-tree]") {
  for (int k : {4, 8, 16}) {
    INFO("k = " << k);
    const Topology t = from_text(fat_tree(k * k * k / 4, k, 3));
    const TopologySummary s = summary_of(t);
    CHECK(s.gpus == k * k * k / 4);
    CHECK(count(s, DeviceKind::leaf) + count(s, DeviceKind::spine) + count(s, DeviceKind::core) == 5 * k * k / 4);
    CHECK(count(s, DeviceKind::core) == (k / 2) * (k / 2));  // (k/2)^2 core switches
    // Full bisection: half the hosts at their 400 Gb/s line rate.
    CHECK(s.bisection.value() == Approx(k * k * k / 8 * 50e9));
    // GPU, NIC, edge, aggregation, core, aggregation, edge, NIC, GPU: 8 hops.
    CHECK(s.diameter == 8);
  }
}

TEST_CASE("a 2-tier leaf-spine of radix k joins k^2/2 hosts", "[topology][fat-tree]") {
  const int k = 8;
  const TopologySummary s = summary_of(from_text(fat_tree(k * k / 2, k, 2)));
  CHECK(count(s, DeviceKind::leaf) == k);
  CHECK(count(s, DeviceKind::spine) == k / 2);
  CHECK(s.bisection.value() == Approx(k * k / 4 * 50e9));
}

TEST_CASE("a job of N GPUs is billed for every GPU of the nodes holding the first N", "[topology]") {
  // Renting whole nodes: on three 8-GPU DGX H100 nodes 12 GPUs hold two nodes (16), 8 one, all 24 three.
  const Topology t = from_text("topology: {name: t, node: dgx-h100, nodes: 3, fabric: {kind: fat-tree, tiers: [{radix: 64}]}}\n");
  CHECK(t.gpus_of_nodes_holding(0) == 0);
  CHECK(t.gpus_of_nodes_holding(1) == 8);
  CHECK(t.gpus_of_nodes_holding(8) == 8);
  CHECK(t.gpus_of_nodes_holding(12) == 16);
  CHECK(t.gpus_of_nodes_holding(24) == 24);
  CHECK(t.gpus_of_nodes_holding(100) == 24);
}

TEST_CASE("a fabric that leaves its technology out lists InfiniBand among the defaults applied", "[topology][fat-tree]") {
  const auto lists_technology = [](const Topology& t) {
    return std::any_of(t.assumptions.begin(), t.assumptions.end(), [](const std::string& a) { return a.rfind("technology infiniband", 0) == 0; });
  };
  CHECK(lists_technology(from_text(fat_tree(8, 8, 2))));
  std::string roce = fat_tree(8, 8, 2);
  roce.replace(roce.find("kind: fat-tree"), 14, "kind: fat-tree\n    technology: roce");
  CHECK_FALSE(lists_technology(from_text(roce)));
}

TEST_CASE("a 2:1 oversubscribed leaf tier halves the bisection bandwidth", "[topology][fat-tree]") {
  // 192 hosts on radix-48 leaves: 24 down / 24 up at 1:1, 32 down / 16 up at 2:1.
  const TopologySummary full = summary_of(from_text(fat_tree(192, 48, 2, 1.0)));
  const TopologySummary half = summary_of(from_text(fat_tree(192, 48, 2, 2.0)));
  CHECK(full.bisection.value() == Approx(96 * 50e9));
  CHECK(half.bisection.value() == Approx(full.bisection.value() / 2));
  REQUIRE(half.tiers.size() == 2);
  CHECK(half.tiers[0].oversubscription() == Approx(2.0));
  CHECK(full.tiers[0].oversubscription() == Approx(1.0));
}

TEST_CASE("scale-up per GPU is the least and the most of the template's GPUs", "[topology]") {
  // Found by a probe: only GPU 0 was read, so a template where it alone lacks NVLink said "none".
  const TopologySummary s = summary_of(from_text(R"(
topology:
  name: mixed
  nodes: 1
  fabric: {kind: none}
  node:
    name: m3
    gpu: a100-sxm4-80gb
    devices: [{name: gpu, kind: gpu, count: 3}, {name: cpu, kind: cpu, count: 1}]
    links:
      - {from: gpu1, to: gpu2, kind: nvlink, bandwidth: 100GB/s}
      - {from: gpu, to: cpu, kind: pcie, bandwidth: 32GB/s}
)"));
  CHECK(s.scale_up_per_gpu.value() == 0.0);
  CHECK(s.scale_up_per_gpu_max.value() == Approx(100e9));
  const TopologySummary dgx = summary_of(load_topology("dgx-h100-superpod"));
  CHECK(dgx.scale_up_per_gpu_max == dgx.scale_up_per_gpu);
}

TEST_CASE("the DGX H100 SuperPOD preset matches the reference architecture", "[topology][superpod]") {
  const TopologySummary s = summary_of(load_topology("dgx-h100-superpod"));
  // NVIDIA DGX SuperPOD RA (DGX H100): 4 SUs = 127 nodes = 1,016 GPUs, 32 leaf and 16 spine switches.
  CHECK(s.nodes == 127);
  CHECK(s.gpus == 1016);
  CHECK(count(s, DeviceKind::leaf) == 32);
  CHECK(count(s, DeviceKind::spine) == 16);
  CHECK(count(s, DeviceKind::nvswitch) == 127);
  CHECK(s.nvswitch_chips == 127 * 4);
  CHECK(s.scale_up_per_gpu.value() == Approx(450e9));
  CHECK(s.injection_per_gpu.value() == Approx(50e9));  // one NDR 400G NIC per GPU
  // 63 of 127 nodes on the smaller side, each 8 x 50 GB/s, all through a non-blocking fabric.
  CHECK(s.bisection.value() == Approx(63 * 8 * 50e9));
  for (const auto& tier : s.tiers) CHECK(tier.max_ports <= 64);
}

TEST_CASE("smaller SuperPODs size their spines as the reference architecture does", "[topology][superpod]") {
  // RA table: SUs / nodes / leaf / spine = 1 / 31 / 8 / 4; 2 / 63 / 16 / 8; 3 / 95 / 24 / 16.
  const std::vector<std::array<int, 3>> rows{{31, 8, 4}, {63, 16, 8}, {95, 24, 16}};
  for (const auto& [nodes, leaves, spines] : rows) {
    INFO(nodes << " nodes");
    const TopologySummary s = summary_of(from_text(fmt::format(
        "topology:\n  name: pod\n  extends: {}\n  nodes: {}\n", (scenario_library_dir() / "topologies/dgx-h100-superpod.yaml").string(), nodes)));
    CHECK(count(s, DeviceKind::leaf) == leaves);
    CHECK(count(s, DeviceKind::spine) == spines);
  }
}

TEST_CASE("InfiniBand routes by destination (D-mod-k) over all spines", "[topology][routing]") {
  const Topology t = load_topology("dgx-h100-superpod");
  const Router router(t);
  // From one GPU to rail 0 of 16 consecutive nodes of the last scalable unit: 16 spines.
  std::set<std::string> spines;
  for (int node = 96; node < 112; ++node) {
    const auto p = router.route(dev(t, "n0.gpu0"), dev(t, fmt::format("n{}.gpu0", node)));
    REQUIRE(p);
    for (Vertex v : p->devices) {
      if (t.device(v).kind == DeviceKind::spine) spines.insert(t.device(v).name);
    }
  }
  CHECK(spines.size() == 16);
  // The flow id does not move a flow: the switches route by destination.
  CHECK(router.route(dev(t, "n0.gpu0"), dev(t, "n126.gpu7"), 1)->devices == router.route(dev(t, "n0.gpu0"), dev(t, "n126.gpu7"), 2)->devices);
}

TEST_CASE("D-mod-k numbers the ports leaf by leaf: one node's ports spread over any number of uplinks", "[topology][routing]") {
  // Expectation: on a 2:1 oversubscribed fat tree (3 spines above each leaf, not a power of two),
  // the eight NIC ports of one destination node are consecutive destinations under their leaf, so
  // flows from one node to the eight GPUs of another spread 3/3/2 over the spines. (Numbering by
  // node plus local index x (2 x nodes + 1) = 33 sent all eight through one spine.)
  const Topology t = from_text(fmt::format(
      "topology:\n  name: o2\n  node: {}\n  nodes: 16\n  fabric:\n    kind: fat-tree\n    technology: infiniband\n"
      "    tiers:\n      - {{radix: 64, oversubscription: 2}}\n      - {{radix: 64}}\n",
      (scenario_library_dir() / "nodes/dgx-h100.yaml").string()));
  const Router router(t);
  std::map<std::string, int> per_spine;
  for (int x = 0; x < 8; ++x) {
    const auto p = router.route(dev(t, fmt::format("n13.gpu{}", x)), dev(t, fmt::format("n0.gpu{}", x)));
    REQUIRE(p);
    for (Vertex v : p->devices) {
      if (t.device(v).kind == DeviceKind::spine) ++per_spine[t.device(v).name];
    }
  }
  CHECK(per_spine.size() == 3);
  for (const auto& [spine, flows] : per_spine) CHECK(flows <= 3);
}

TEST_CASE("a fabric extended over a base is checked as merged, and a changed kind drops what it does not use", "[topology]") {
  // A probe: SHARP from the base and RoCE from the child had been simulated as CollNet on Ethernet;
  // a child's kind fat-tree had kept the base's scalable unit, and kind none its tiers, unused.
  test::TempDir dir;
  const std::string pod = (scenario_library_dir() / "topologies/dgx-h100-superpod.yaml").string();
  const auto base = dir.write("sharp.yaml", fmt::format("topology:\n  name: sharp\n  extends: {}\n  fabric: {{in_network_reduction: true}}\n", pod));
  CHECK(load_topology(base.string()).in_network_reduction);
  const auto roce = dir.write("roce.yaml", fmt::format("topology:\n  name: roce\n  extends: {}\n  fabric: {{technology: roce}}\n", base.string()));
  CHECK_THAT(test::input_error([&] { (void)load_topology(roce.string()); }),
             Catch::Contains("roce.yaml:4:24: field 'topology.fabric.technology': technology roce with in-network reduction (SHARP) from the base topology"));
  const auto off = dir.write("off.yaml", fmt::format("topology:\n  name: off\n  extends: {}\n  fabric: {{technology: roce, in_network_reduction: false}}\n", base.string()));
  CHECK_FALSE(load_topology(off.string()).in_network_reduction);
  const auto fat = dir.write("fat.yaml", fmt::format("topology:\n  name: fat\n  extends: {}\n  fabric: {{kind: fat-tree}}\n", pod));
  CHECK(load_topology(fat.string()).fabric_kind == "fat-tree");
  const auto none = dir.write("none.yaml", fmt::format("topology:\n  name: none\n  extends: {}\n  nodes: 1\n  fabric: {{kind: none}}\n", base.string()));
  const Topology one = load_topology(none.string());
  CHECK(one.fabric_tiers == 0);
  CHECK_FALSE(one.in_network_reduction);
}

TEST_CASE("Ethernet ECMP spreads flows over all spines and keeps each flow on one path", "[topology][routing]") {
  const Topology t = from_text(fmt::format("topology:\n  name: roce\n  extends: {}\n  fabric: {{technology: roce}}\n",
                                           (scenario_library_dir() / "topologies/dgx-h100-superpod.yaml").string()));
  const Router router(t);
  const Vertex a = dev(t, "n0.gpu0"), b = dev(t, "n126.gpu7");
  std::set<std::string> spines;
  for (std::uint64_t flow = 0; flow < 256; ++flow) {
    const auto p = router.route(a, b, flow);
    REQUIRE(p);
    CHECK(p->hops() == 8);
    for (Vertex v : p->devices) {
      if (t.device(v).kind == DeviceKind::spine) spines.insert(t.device(v).name);
    }
    CHECK(router.route(a, b, flow)->devices == p->devices);  // deterministic
  }
  CHECK(spines.size() == 16);
  // Each leaf has two cables to each of the 16 spines, and hashing takes each as a next hop of its
  // own, up and down: 16 x 2 x 2 paths.
  CHECK(router.all_paths(a, b, 100).total == 64);
}

TEST_CASE("on the L40S box a cross-socket GPU pair routes GPU, switch, CPU, CPU, switch, GPU", "[topology][routing]") {
  const Topology t = load_topology("l40s-box");
  const auto p = Router(t).route(dev(t, "n0.gpu0"), dev(t, "n0.gpu7"));
  REQUIRE(p);
  CHECK(kinds(t, *p) == std::vector<DeviceKind>{DeviceKind::gpu, DeviceKind::pcie_switch, DeviceKind::cpu, DeviceKind::cpu,
                                                DeviceKind::pcie_switch, DeviceKind::gpu});
  // Its latency is the sum of its links' and its transit devices' latencies.
  double expected = 0;
  for (Edge e : p->links) expected += t.link(e).latency.value();
  for (std::size_t i = 1; i + 1 < p->devices.size(); ++i) expected += t.device(p->devices[i]).latency.value();
  CHECK(p->latency.value() == Approx(expected));
  // Same socket, same switch: GPU, switch, GPU.
  CHECK(Router(t).route(dev(t, "n0.gpu0"), dev(t, "n0.gpu1"))->hops() == 2);
}

TEST_CASE("PXN moves a cross-rail flow onto the destination's rail over NVLink", "[topology][routing]") {
  const Topology t = load_topology("dgx-h100-superpod");
  const Router direct(t), pxn(t, RoutingOptions{.pxn = true});
  // Within one scalable unit: gpu0 -> nvswitch -> gpu7 of node 0, then the rail-7 leaf, no spine.
  const auto near = pxn.route(dev(t, "n0.gpu0"), dev(t, "n20.gpu7"));
  REQUIRE(near);
  CHECK(t.device(near->devices[2]).name == "n0.gpu7");
  for (Vertex v : near->devices) CHECK(t.device(v).kind != DeviceKind::spine);
  CHECK(near->hops() == 8);
  // Without PXN the same pair crosses rails through a spine.
  const auto plain = direct.route(dev(t, "n0.gpu0"), dev(t, "n20.gpu7"));
  REQUIRE(plain);
  CHECK(t.device(plain->devices[1]).kind == DeviceKind::pcie_switch);
  bool spine = false;
  for (Vertex v : plain->devices) spine |= t.device(v).kind == DeviceKind::spine;
  CHECK(spine);
  // Across scalable units the relayed flow stays on rail 7 leaves.
  const auto far = pxn.route(dev(t, "n0.gpu0"), dev(t, "n126.gpu7"));
  REQUIRE(far);
  for (Vertex v : far->devices) {
    if (t.device(v).kind == DeviceKind::leaf) CHECK(t.device(v).rail == 7);
  }
}

TEST_CASE("PXN does not relay through a GPU reached without NVLink", "[topology][routing]") {
  // Expectation: on PCIe-only L40S hosts NCCL's PXN finds no NVLink peer, so a cross-rail flow goes
  // out through its own NIC (6 hops), as without PXN. It had relayed over PCIe and the socket link
  // to the destination's rail GPU (11 hops), and an all-to-all ran 1.5x as long.
  const Topology t = from_text(
      "topology:\n  name: l40s-x2\n  node: l40s-pcie-8x\n  nodes: 2\n"
      "  fabric: {kind: fat-tree, technology: infiniband, tiers: [{radix: 64}, {radix: 64}]}\n");
  const auto a = dev(t, "n0.gpu0"), b = dev(t, "n1.gpu5");
  const auto pxn = Router(t, RoutingOptions{.pxn = true}).route(a, b);
  const auto plain = Router(t).route(a, b);
  REQUIRE(pxn);
  REQUIRE(plain);
  CHECK(pxn->devices == plain->devices);
  CHECK(pxn->hops() == 6);
}

TEST_CASE("rail-only fabrics have no path between rails through the fabric", "[topology][rail-only]") {
  const Topology t = from_text(
      "topology:\n  name: ro\n  node: dgx-h100\n  nodes: 64\n  fabric:\n    kind: rail-only\n    scalable_unit: 32\n"
      "    tiers: [{radix: 64}, {radix: 64}]\n");
  const TopologySummary s = summary_of(t);
  CHECK(count(s, DeviceKind::leaf) == 16);  // 2 SUs x 8 rails
  CHECK(count(s, DeviceKind::spine) == 8 * 1);  // per rail: 2 leaves x 32 uplinks / 64 ports = 1 spine
  const Vertex a = dev(t, "n0.gpu0"), b = dev(t, "n63.gpu7");
  // Without PXN every path changes rail inside a server, over PCIe and the socket link, and the
  // fabric switches it meets all serve one rail.
  const auto alternatives = Router(t).all_paths(a, b, 16);
  CHECK(alternatives.total == 2);  // change rail in the source node or in the destination node
  for (const Path& p : alternatives.paths) {
    bool socket = false;
    for (Edge e : p.links) socket |= t.link(e).kind == LinkKind::socket;
    CHECK(socket);
    std::set<int> rails;
    for (Vertex v : p.devices) {
      if (is_fabric_switch(t.device(v).kind)) rails.insert(t.device(v).rail);
    }
    CHECK(rails.size() == 1);
  }
  // With PXN it changes rail over NVLink in the source node.
  const auto pxn = Router(t, RoutingOptions{.pxn = true}).route(a, b);
  REQUIRE(pxn);
  CHECK(t.device(pxn->devices[2]).name == "n0.gpu7");
}

TEST_CASE("paths never pass through a third server", "[topology][routing]") {
  const Topology t = from_text(
      "topology:\n  name: ro\n  node: dgx-h100\n  nodes: 64\n  fabric:\n    kind: rail-only\n    scalable_unit: 32\n"
      "    tiers: [{radix: 64}, {radix: 64}]\n");
  const Router router(t);
  for (std::uint64_t flow = 0; flow < 64; ++flow) {
    const auto p = router.route(dev(t, "n1.gpu2"), dev(t, "n40.gpu5"), flow);
    REQUIRE(p);
    for (Vertex v : p->devices) {
      const int node = t.device(v).node;
      CHECK((node == -1 || node == 1 || node == 40));
    }
  }
}

TEST_CASE("GPUs of a node joined only through their NICs route out to the fabric and back", "[topology][routing]") {
  // A probe: `topo` called such a topology connected (diameter 4), but no route joined the two GPUs
  // of a node, as the structured routing searched inside the node only.
  const Topology t = from_text(
      "topology:\n  name: d\n  node:\n    name: tn\n    gpu: h100-sxm5-80gb\n    devices:\n      - {name: gpu, kind: gpu, count: 2}\n"
      "      - {name: nic, kind: nic, count: 2, rate: 400Gbps}\n    links:\n      - {from: gpu, to: nic, pattern: zip, kind: pcie, bandwidth: 63GB/s}\n"
      "  nodes: 2\n  fabric: {kind: fat-tree, tiers: [{radix: 8}]}\n");
  const Router router(t);
  const auto p = router.route(dev(t, "n0.gpu0"), dev(t, "n0.gpu1"));
  REQUIRE(p);
  CHECK(p->hops() == 4);
  CHECK(p->hops() == router.distance(dev(t, "n0.gpu0"), dev(t, "n0.gpu1")));
  CHECK(p->bottleneck.value() == Approx(50e9));
  for (Vertex v : p->devices) CHECK((t.device(v).node == -1 || t.device(v).node == 0));
}

TEST_CASE("multi-plane fabrics give each NIC port its own plane", "[topology][planes]") {
  const std::string node =
      "    name: dual\n    gpu: h100-sxm5-80gb\n    devices:\n      - {name: gpu, kind: gpu, count: 1}\n"
      "      - {name: nic, kind: nic, count: 1, rate: 200Gbps, ports: 2}\n"
      "    links:\n      - {from: gpu, to: nic, kind: pcie, bandwidth: 63GB/s}\n";
  const Topology t = from_text("topology:\n  name: mp\n  node:\n" + node +
                               "  nodes: 64\n  fabric:\n    kind: fat-tree\n    planes: 2\n    tiers: [{radix: 32}, {radix: 32}]\n");
  const TopologySummary s = summary_of(t);
  // Per plane: 64 ports / 16 down per leaf = 4 leaves, 4 x 16 / 32 = 2 spines.
  CHECK(count(s, DeviceKind::leaf) == 8);
  CHECK(count(s, DeviceKind::spine) == 4);
  CHECK(t.find("p1.leaf3"));
  // Two 200G planes: 32 hosts x 2 x 25 GB/s across the bisection.
  CHECK(s.bisection.value() == Approx(32 * 2 * 25e9));
}

TEST_CASE("topology errors are clear", "[topology][errors]") {
  // A leaf cannot hold a whole scalable unit.
  CHECK_THAT(test::input_error([] {
               from_text("topology:\n  name: x\n  node: dgx-h100\n  nodes: 64\n  fabric:\n    kind: rail-optimized\n"
                         "    scalable_unit: 48\n    tiers: [{radix: 64}, {radix: 64}]\n");
             }),
             Contains("test.yaml:6:5: field 'topology.fabric': a leaf serves 48 NIC ports of one rail in a scalable unit and "
                      "needs 48 uplinks at 1:1, 96 ports in all, more than its radix 64"));
  // Too many leaves for one spine layer.
  CHECK_THAT(test::input_error([] { from_text(fat_tree(1024, 16, 2)); }), Contains("add a core tier"));
  // One tier cannot join several leaves.
  CHECK_THAT(test::input_error([] { from_text(fat_tree(100, 64, 1)); }), Contains("add a spine tier"));
  // A million GPUs.
  CHECK_THAT(test::input_error([] { from_text("topology:\n  name: x\n  node: dgx-h100\n  nodes: 125000\n"); }),
             Contains("field 'topology.nodes': expected at most 262144 GPUs in all, found 125000 (125000 nodes of 8 GPUs are 1000000 GPUs"));
  // Several nodes but no fabric.
  CHECK_THAT(test::input_error([] { from_text("topology:\n  name: x\n  node: dgx-h100\n  nodes: 2\n"); }),
             Contains("test.yaml:4:10: field 'topology.nodes': 2 nodes need a fabric to join them (add a 'fabric:' map)"));
  // A GPU that nothing connects to.
  CHECK_THAT(test::input_error([] {
               from_text("topology:\n  name: x\n  node:\n    name: n\n    gpu: l40s\n    devices:\n"
                         "      - {name: gpu, kind: gpu, count: 2}\n      - {name: cpu, kind: cpu, count: 1}\n"
                         "    links:\n      - {from: gpu0, to: cpu, kind: pcie, bandwidth: 32GB/s}\n");
             }),
             Contains("the topology is disconnected: n0.gpu1 cannot reach n0.gpu0"));
  // Zero bandwidth.
  CHECK_THAT(test::input_error([] {
               from_text("topology:\n  name: x\n  node:\n    name: n\n    gpu: l40s\n    devices:\n"
                         "      - {name: gpu, kind: gpu, count: 2}\n    links:\n      - {from: gpu0, to: gpu1, kind: pcie, bandwidth: 0GB/s}\n");
             }),
             Contains("field 'topology.node.links[0].bandwidth': expected a bandwidth of at least 1KB/s and at most 1PB/s, found '0GB/s'"));
  // A link endpoint that is not a device of the node.
  CHECK_THAT(test::input_error([] {
               from_text("topology:\n  name: x\n  node:\n    name: n\n    gpu: l40s\n    devices:\n"
                         "      - {name: gpu, kind: gpu, count: 2}\n    links:\n      - {from: gpu0, to: gpu9, kind: pcie, bandwidth: 1GB/s}\n");
             }),
             Contains("expected a device of group 'gpu' (indices 0 to 1), found 'gpu9'"));
}

TEST_CASE("a bare name that is no shipped part but names something beside the file says what is there", "[topology][parts]") {
  // A probe's `topology: dd` beside a directory dd, and `mytopo` beside a file of that name without
  // .yaml, had read only "expected a file path or a shipped name ..., found 'dd'".
  test::TempDir dir;
  std::filesystem::create_directory(dir.path() / "dd");
  dir.write("mytopo", "topology: {name: t, node: single-gpu-host}\n");
  const auto refuse = [&](const std::string& name) {
    const auto doc = yaml::Document::load_file(dir.write("s.yaml", "ref: " + name + "\n"));
    return test::input_error([&] { (void)resolve_part(yaml::Map(doc->root()).at("ref", "a reference"), "topologies"); });
  };
  CHECK_THAT(refuse("dd"), Contains("found 'dd' (") && Contains("dd is here, a directory, not a part file)"));
  CHECK_THAT(refuse("mytopo"), Contains("found 'mytopo' (a file ") && Contains("a file is given by a path, with a '/' or ending in .yaml: ./mytopo)"));
  CHECK_THAT(refuse("nothing-here"), !Contains(" is here"));
}

TEST_CASE("every shipped node template and topology loads", "[topology][shipped]") {
  for (const auto& name : shipped_part_names("nodes")) {
    INFO(name);
    const Topology t = from_text("topology:\n  name: one\n  node: " + name + "\n");
    CHECK(!t.gpus().empty());
  }
  const auto topologies = shipped_part_names("topologies");
  CHECK(topologies.size() >= 5);
  for (const auto& name : topologies) {
    INFO(name);
    const Topology t = load_topology(name);
    CHECK(!t.gpus().empty());
  }
}

TEST_CASE("the same input builds the same graph", "[topology][determinism]") {
  const Topology a = load_topology("dgx-a100-superpod");
  const Topology b = load_topology("dgx-a100-superpod");
  REQUIRE(a.device_count() == b.device_count());
  for (std::size_t v = 0; v < a.device_count(); ++v) CHECK(a.device(v).name == b.device(v).name);
  CHECK(a.directed_link_count() == b.directed_link_count());
}
