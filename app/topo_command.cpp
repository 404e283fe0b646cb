#include "topo_command.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/text_table.hpp"
#include "clustersim/topology/analysis.hpp"
#include "clustersim/topology/export.hpp"
#include "clustersim/topology/routing.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "output_dir.hpp"

namespace cs::app {

namespace {

using namespace cs::topology;
using reports::TextTable;

struct TopoOptions {
  std::string file;
  std::vector<std::string> path;
  std::size_t paths = 4;
  std::uint64_t flow = 0;
  bool pxn = false;
  bool json = false;
  bool timing = false;
  std::string dot;
  std::string graphml;
};

// A device named on the command line: its name ("n3.gpu5", "spine2") or a GPU rank ("7").
Vertex parse_device(const Topology& topo, const std::string& text) {
  if (auto v = topo.find(text)) return *v;
  if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) && text.size() < 10) {
    const auto rank = std::stoul(text);
    if (rank < topo.gpus().size()) return topo.gpus()[rank];
    throw InputError(fmt::format("--path: expected a device name or a GPU rank below {}, found '{}'", topo.gpus().size(), text));
  }
  throw InputError(fmt::format("--path: expected a device name (such as {} or {}) or a GPU rank, found '{}'",
                               topo.device(topo.gpus().front()).name, topo.device(topo.gpus().back()).name, text));
}

std::string render_assumptions(const std::vector<std::string>& assumptions) {
  std::string out;
  if (assumptions.empty()) return out;
  out += "\ndefaults applied\n";
  for (const auto& a : assumptions) out += "  - " + a + "\n";
  return out;
}

std::string ratio(double r) { return r <= 0 ? "-" : fmt::format("{:.3g}:1", r); }

std::string render_summary(const TopologySummary& s) {
  std::string out = fmt::format("topology {}{}\n", s.name, s.description.empty() ? "" : ": " + s.description);
  out += fmt::format("  nodes       {} x {} ({} GPU{}, {} per node)\n", s.nodes, s.node_template, s.gpus, s.gpus == 1 ? "" : "s",
                     s.gpus_per_node);
  out += fmt::format("  fabric      {}{}\n", s.fabric_kind,
                     s.technology.empty() ? "" : fmt::format(", {}, {} tier{}{}", s.technology, s.tiers.size(), s.tiers.size() == 1 ? "" : "s",
                                                             s.qps_per_connection > 1 ? fmt::format(", {} queue pairs per connection", s.qps_per_connection) : ""));
  out += "\ndevices\n";
  TextTable devices({"kind", "count", "note"}, {TextTable::Align::left, TextTable::Align::right, TextTable::Align::left});
  for (const auto& [kind, count] : s.devices) {
    devices.add_row({std::string(to_string(kind)), std::to_string(count),
                     kind == DeviceKind::nvswitch ? fmt::format("{} NVSwitch chips in all", s.nvswitch_chips) : ""});
  }
  out += devices.render("  ");
  out += "\nlinks (full-duplex cables)\n";
  TextTable links({"kind", "cables"}, {TextTable::Align::left, TextTable::Align::right});
  for (const auto& [kind, count] : s.cables) links.add_row({std::string(to_string(kind)), std::to_string(count)});
  out += links.render("  ");
  out += "\nbandwidth (one direction)\n";
  TextTable bw({"measure", "value", "how"}, {TextTable::Align::left, TextTable::Align::right, TextTable::Align::left});
  if (s.scale_up_per_gpu_max.value() <= 0) {
    bw.add_row({"scale-up per GPU", "none", "no NVLink: GPUs talk over PCIe"});
  } else if (s.scale_up_per_gpu == s.scale_up_per_gpu_max) {
    bw.add_row({"scale-up per GPU", to_string(s.scale_up_per_gpu), "NVLink links of one GPU"});
  } else {
    bw.add_row({"scale-up per GPU",
                fmt::format("{} to {}", s.scale_up_per_gpu.value() > 0 ? to_string(s.scale_up_per_gpu) : "none",
                            to_string(s.scale_up_per_gpu_max)),
                "NVLink links of one GPU: the template's GPUs differ"});
  }
  if (s.nodes > 1) {
    bw.add_row({"injection per GPU", to_string(s.injection_per_gpu), "max flow from a node's GPUs into the fabric / GPUs"});
  }
  if (s.gpus_per_node > 1) {
    bw.add_row({"bisection within a node", to_string(s.node_bisection), "max flow between the GPU halves of node 0"});
  }
  if (s.nodes > 1) bw.add_row({"bisection", to_string(s.bisection), "max flow through the fabric, split: " + s.bisection_split});
  out += bw.render("  ");
  if (!s.tiers.empty()) {
    out += "\nfabric tiers\n";
    TextTable tiers({"tier", "switches", "max ports", "down", "up", "oversubscription"},
                    {TextTable::Align::left, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right,
                     TextTable::Align::right, TextTable::Align::right});
    for (const auto& t : s.tiers) {
      tiers.add_row({t.name, std::to_string(t.switches), std::to_string(t.max_ports), to_string(t.down),
                     t.up.value() > 0 ? to_string(t.up) : "-", ratio(t.oversubscription())});
    }
    out += tiers.render("  ");
  }
  out += fmt::format("\ndiameter    {} hops between GPUs ({} from {} destination GPUs)\n", s.diameter,
                     s.diameter_exact ? "exact" : "sampled", s.diameter_sources);
  return out + render_assumptions(s.assumptions);
}

nlohmann::json summary_json(const TopologySummary& s) {
  nlohmann::json j;
  j["name"] = s.name;
  j["description"] = s.description;
  j["node_template"] = s.node_template;
  j["nodes"] = s.nodes;
  j["gpus"] = s.gpus;
  j["gpus_per_node"] = s.gpus_per_node;
  j["fabric"] = {{"kind", s.fabric_kind}, {"technology", s.technology}, {"tiers", s.tiers.size()}, {"qps_per_connection", s.qps_per_connection}};
  for (const auto& [kind, count] : s.devices) j["devices"][std::string(to_string(kind))] = count;
  for (const auto& [kind, count] : s.cables) j["cables"][std::string(to_string(kind))] = count;
  j["nvswitch_chips"] = s.nvswitch_chips;
  // null where the measure does not exist: injection and bisection with one node, a node's bisection
  // with one GPU a node.
  const auto or_null = [](bool exists, BytesPerSec v) { return exists ? nlohmann::json(v.value()) : nlohmann::json(nullptr); };
  j["bandwidth_Bps"] = {{"scale_up_per_gpu", s.scale_up_per_gpu.value()},
                        {"scale_up_per_gpu_max", s.scale_up_per_gpu_max.value()},
                        {"injection_per_gpu", or_null(s.nodes > 1, s.injection_per_gpu)},
                        {"node_bisection", or_null(s.gpus_per_node > 1, s.node_bisection)},
                        {"bisection", or_null(s.nodes > 1, s.bisection)}};
  j["bisection_split"] = s.bisection_split;
  j["tiers"] = nlohmann::json::array();
  for (const auto& t : s.tiers) {
    j["tiers"].push_back({{"tier", t.tier}, {"name", t.name}, {"switches", t.switches}, {"max_ports", t.max_ports},
                          {"down_Bps", t.down.value()}, {"up_Bps", t.up.value()},
                          {"oversubscription", t.up.value() > 0 ? nlohmann::json(t.oversubscription()) : nlohmann::json(nullptr)}});
  }
  j["diameter_hops"] = s.diameter;
  j["diameter_exact"] = s.diameter_exact;
  j["defaults_applied"] = s.assumptions;
  return j;
}

// A link's place among the parallel cables between its two devices (RoCE keeps each cable a link of
// its own): "#2" for the second of several, empty for a link without parallels.
std::string cable_of(const Topology& topo, topology::Edge e) {
  const auto& g = topo.graph();
  const topology::Vertex from = boost::source(e, g), to = boost::target(e, g);
  int index = 0, count = 0;
  for (auto [o, end] = boost::out_edges(from, g); o != end; ++o) {
    if (boost::target(*o, g) != to) continue;
    ++count;
    if (topo.link(*o).id == topo.link(e).id) index = count;
  }
  return count > 1 ? fmt::format("#{}", index) : std::string();
}

std::string path_line(const Topology& topo, const Path& p) {
  std::string chain;
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    if (i) chain += fmt::format(" -{}{}-> ", to_string(topo.link(p.links[i - 1]).kind), cable_of(topo, p.links[i - 1]));
    chain += topo.device(p.devices[i]).name;
  }
  return fmt::format("{} hops, bottleneck {}, latency {}: {}", p.hops(), to_string(p.bottleneck), to_string(p.latency), chain);
}

std::string render_path(const Topology& topo, const Router& router, Vertex a, Vertex b, const TopoOptions& o) {
  const std::string an = topo.device(a).name, bn = topo.device(b).name;
  auto chosen = router.route(a, b, o.flow);
  if (!chosen) throw InputError(fmt::format("--path: no route from {} to {} in topology {}", an, bn, topo.name));
  const bool by_destination = topo.technology == "infiniband";
  // PXN relays through a GPU of the source's node over NVLink, where the destination's rail needs it.
  const bool relayed = chosen->devices.size() > 2 && std::any_of(chosen->devices.begin() + 1, chosen->devices.end() - 1, [&](Vertex v) {
                         return topo.device(v).kind == topology::DeviceKind::gpu;
                       });
  std::string out = fmt::format("route {} -> {}{}; ECMP {}\n", an, bn, !o.pxn ? "" : relayed ? " (PXN)" : " (PXN: no relay on this route)",
                                by_destination ? "by destination (D-mod-k, InfiniBand)" : "by flow hash");
  out += fmt::format("  flow {}: {}\n", o.flow, path_line(topo, *chosen));
  const auto alternatives = router.all_paths(a, b, o.paths);
  out += fmt::format("  {} equal-cost shortest path{} without relaying{}\n", alternatives.total, alternatives.total == 1 ? "" : "s",
                     alternatives.total > alternatives.paths.size() ? fmt::format(", the first {}:", alternatives.paths.size()) : ":");
  for (std::size_t i = 0; i < alternatives.paths.size(); ++i) {
    out += fmt::format("  [{}] {}\n", i, path_line(topo, alternatives.paths[i]));
  }
  return out + render_assumptions(topo.assumptions);
}

nlohmann::json path_json(const Topology& topo, const Path& p) {
  nlohmann::json devices = nlohmann::json::array(), links = nlohmann::json::array();
  for (const Vertex v : p.devices) devices.push_back(topo.device(v).name);
  // A parallel cable is named by its place among them ("ethernet#2"), so equal-cost paths that differ
  // only in their cable read apart.
  for (const Edge e : p.links) links.push_back(std::string(to_string(topo.link(e).kind)) + cable_of(topo, e));
  return {{"hops", p.hops()}, {"bottleneck_Bps", p.bottleneck.value()}, {"latency_s", p.latency.value()}, {"devices", devices}, {"links", links}};
}

// The same as render_path, for scripts.
nlohmann::json route_json(const Topology& topo, const Router& router, Vertex a, Vertex b, const TopoOptions& o) {
  const std::string an = topo.device(a).name, bn = topo.device(b).name;
  auto chosen = router.route(a, b, o.flow);
  if (!chosen) throw InputError(fmt::format("--path: no route from {} to {} in topology {}", an, bn, topo.name));
  const auto alternatives = router.all_paths(a, b, o.paths);
  nlohmann::json paths = nlohmann::json::array();
  for (const Path& p : alternatives.paths) paths.push_back(path_json(topo, p));
  return {{"from", an},
          {"to", bn},
          {"pxn", o.pxn},
          {"ecmp", topo.technology == "infiniband" ? "destination" : "hash"},
          {"flow", o.flow},
          {"route", path_json(topo, *chosen)},
          {"equal_cost_paths", alternatives.total},
          {"paths", paths},
          {"defaults_applied", topo.assumptions}};
}

void run_topo(const TopoOptions& o) {
  if (!o.dot.empty() && !o.graphml.empty() && same_output(o.dot, o.graphml)) {
    throw InputError(fmt::format("--dot and --graphml name the same file ({}): give each its own", o.graphml));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Topology topo = load_topology(o.file);
  {
    std::vector<std::filesystem::path> exports;
    if (!o.dot.empty()) exports.emplace_back(o.dot);
    if (!o.graphml.empty()) exports.emplace_back(o.graphml);
    refuse_outputs_over_inputs(exports, !o.dot.empty() ? "--dot" : "--graphml");
  }
  const auto t1 = std::chrono::steady_clock::now();
  const Router router(topo, RoutingOptions{.pxn = o.pxn});
  if (!o.path.empty()) {
    const Vertex a = parse_device(topo, o.path[0]);
    const Vertex b = parse_device(topo, o.path[1]);
    if (a == b) throw InputError(fmt::format("--path: expected two different devices, found {} twice", topo.device(a).name));
    if (o.json) {
      std::cout << route_json(topo, router, a, b, o).dump(2) << "\n";
    } else {
      std::cout << render_path(topo, router, a, b, o);
    }
  } else {
    const TopologySummary s = summarize(topo, router);
    if (o.json) {
      std::cout << summary_json(s).dump(2) << "\n";
    } else {
      std::cout << render_summary(s);
    }
  }
  // Both exports or neither (a symbolic link in the GraphML's place had failed the command after the
  // DOT file was replaced): one set of outputs, each named by its whole path.
  std::vector<reports::OutputFile> exports;
  if (!o.dot.empty()) exports.push_back({o.dot, to_dot(topo)});
  if (!o.graphml.empty()) exports.push_back({o.graphml, to_graphml(topo)});
  if (!exports.empty()) reports::write_files_atomically("", exports);
  if (o.timing) {
    const auto t2 = std::chrono::steady_clock::now();
    std::cerr << fmt::format("timing: load and build {:.3f} s, analysis {:.3f} s, {} devices, {} directed links\n",
                             std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                             topo.device_count(), topo.directed_link_count());
  }
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto opts = std::make_shared<TopoOptions>();
  CLI::App* cmd = app.add_subcommand("topo", "Inspect a topology: counts, bandwidths, bisection, tiers, diameter, routes");
  cmd->add_option("topology", opts->file, "Topology YAML file, or the name of a shipped preset (e.g. dgx-h100-superpod)")->required();
  CLI::Option* path = cmd->add_option("--path", opts->path, "Show the routes between two devices (names such as n0.gpu0, or GPU ranks)")->expected(2);
  cmd->add_option("--paths", opts->paths, "How many equal-cost paths --path lists")->default_val(4)->check(CLI::Range(1, 1000))->needs(path);
  // Checked as a number before it is read: an unsigned read would wrap "-1" round to 2^64 - 1.
  cmd->add_option("--flow", opts->flow, "Flow id whose ECMP choice --path shows")
      ->default_val(0)
      ->check(CLI::Validator(
          [](std::string& s) {
            std::uint64_t v = 0;
            const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            return ec == std::errc() && end == s.data() + s.size() ? std::string() : fmt::format("expected a flow id from 0 to {}, found '{}'", std::uint64_t{UINT64_MAX}, s);
          },
          "ID"))
      ->needs(path);
  cmd->add_flag("--pxn", opts->pxn, "Route inter-node GPU traffic over NVLink to the NIC on the destination's rail (NCCL PXN)")->needs(path);
  cmd->add_flag("--json", opts->json, "Print the summary (or the --path routes) as JSON");
  cmd->add_option("--dot", opts->dot, "Also write the graph as Graphviz DOT to this file")->check(output_file());
  cmd->add_option("--graphml", opts->graphml, "Also write the graph as GraphML to this file")->check(output_file());
  cmd->add_flag("--timing", opts->timing, "Print load and analysis wall time to stderr");
  cmd->callback([opts] { run_topo(*opts); });
}

}  // namespace cs::app
