#include "collective_command.hpp"

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "clustersim/common/input_error.hpp"
#include "clustersim/common/suggest.hpp"
#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/models/collective_model.hpp"
#include "clustersim/reports/atomic_file.hpp"
#include "clustersim/reports/text_table.hpp"
#include "clustersim/sim/fluid_network.hpp"
#include "clustersim/topology/topology_loader.hpp"
#include "output_dir.hpp"
#include "progress_line.hpp"

namespace cs::app {

namespace {

using namespace cs::models;
using reports::TextTable;

struct Options {
  std::string topology;
  std::string op = "all_reduce";
  std::string size = "1GiB";
  std::string sweep;
  std::string gpus;
  std::string algorithm;
  std::string protocol;
  int channels = 0;
  int root = 0;
  bool no_pxn = false;
  bool json = false;
  std::string trace;
};

Bytes parse_size(const std::string& text, const char* option) {
  double v = 0;
  // Whole bytes: nccl-tests counts elements, and 1.5B is no message (4.1MB is, whatever its binary
  // floating-point product).
  if (!parse_quantity_text(text, UnitTable<Bytes>::begin(), UnitTable<Bytes>::size(), v) || !(v >= 1) || std::abs(v - std::round(v)) > 1e-9 * v) {
    throw InputError(fmt::format("{}: expected a size of whole bytes, at least 1, with a unit ({}), found '{}'", option,
                                 list_units(UnitTable<Bytes>::begin(), UnitTable<Bytes>::size()), text));
  }
  return Bytes(std::round(v));
}

// "0-7,16,18-19" -> GPU ranks.
std::vector<topology::Vertex> parse_gpus(const topology::Topology& topo, const std::string& text) {
  std::vector<topology::Vertex> out;
  if (text.empty()) return topo.gpus();
  const auto bad = [&](const std::string& part) {
    return InputError(fmt::format("--gpus: expected GPU ranks or ranges below {} such as 0-7,16, found '{}'", topo.gpus().size(), part));
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t dash = part.find('-');
    try {
      std::size_t used = 0;
      const unsigned long lo = std::stoul(part.substr(0, dash), &used);
      if (used != part.substr(0, dash).size()) throw bad(part);
      unsigned long hi = lo;
      if (dash != std::string::npos) {
        hi = std::stoul(part.substr(dash + 1), &used);
        if (used != part.substr(dash + 1).size()) throw bad(part);
      }
      if (hi < lo || hi >= topo.gpus().size()) throw bad(part);
      for (unsigned long r = lo; r <= hi; ++r) out.push_back(topo.gpus()[r]);
    } catch (const std::logic_error&) {
      throw bad(part);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

template <class T, class F>
std::optional<T> parse_named(const std::string& text, const char* option, F parse, const std::vector<std::string>& names) {
  if (text.empty()) return std::nullopt;
  if (auto v = parse(text)) return v;
  throw InputError(fmt::format("{}: expected one of {}, found '{}'{}", option, join_alternatives(names), text, did_you_mean(text, names)));
}

std::string format_us(Seconds s) { return fmt::format("{:.2f}", s.value() * 1e6); }
std::string format_gbps(BytesPerSec b) { return fmt::format("{:.2f}", b.value() / 1e9); }

void run(const Options& o) {
  const topology::Topology topo = topology::load_topology(o.topology);
  if (!o.trace.empty()) refuse_outputs_over_inputs({std::filesystem::path(o.trace)}, "--trace");
  const CollectiveModel model(topo, CollectiveOptions{.pxn = !o.no_pxn});
  Collective c;
  c.op = *parse_named<CollectiveOp>(o.op, "--op", parse_collective_op,
                                    {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"});
  c.ranks = parse_gpus(topo, o.gpus);
  std::vector<std::string> algorithms;
  for (const auto& a : algorithm_registry()) algorithms.emplace_back(to_string(a.algorithm));
  c.algorithm = parse_named<Algorithm>(o.algorithm, "--algorithm", parse_algorithm, algorithms);
  c.protocol = parse_named<Protocol>(o.protocol, "--protocol", parse_protocol, {"LL", "LL128", "Simple"});
  c.channels = o.channels;
  c.root = o.root;

  std::vector<Bytes> sizes;
  if (o.sweep.empty()) {
    sizes.push_back(parse_size(o.size, "--size"));
  } else {
    const auto colon = o.sweep.find(':');
    if (colon == std::string::npos) throw InputError(fmt::format("--sweep: expected MIN:MAX such as 8B:8GiB, found '{}'", o.sweep));
    const Bytes lo = parse_size(o.sweep.substr(0, colon), "--sweep"), hi = parse_size(o.sweep.substr(colon + 1), "--sweep");
    if (hi < lo) throw InputError(fmt::format("--sweep: MAX is below MIN in '{}'", o.sweep));
    for (double s = lo.value(); s <= hi.value() * (1 + 1e-12); s *= 2) sizes.push_back(Bytes(s));
  }

  nlohmann::json rows = nlohmann::json::array();
  TextTable table({"size", "algorithm", "protocol", "channels", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "NCCL model (us)", "flows"},
                  {TextTable::Align::right, TextTable::Align::left, TextTable::Align::left, TextTable::Align::right,
                   TextTable::Align::right, TextTable::Align::right, TextTable::Align::right, TextTable::Align::right,
                   TextTable::Align::right});
  for (const Bytes size : sizes) {
    c.bytes = size;
    CollectiveResult r;
    // On a terminal, how far a long simulation has got (a tree all-reduce over the 16K-GPU RoCE Clos
    // runs for minutes).
    const auto start = std::chrono::steady_clock::now();
    try {
      const ProgressLine line(!o.json);
      const auto progress = [&](sim::Time now, const sim::RunStats& s) {
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        line.show(fmt::format("{}: {:.0f} us simulated, {} flows started, {} events, {:.0f} s", to_string(size), now.to_seconds() * 1e6, s.flows, s.events, wall));
      };
      r = model.simulate(c, line.on() ? std::function<void(sim::Time, const sim::RunStats&)>(progress) : nullptr);
    } catch (const std::invalid_argument& e) {
      throw InputError(e.what());
    }
    table.add_row({to_string(size), std::string(to_string(r.plan.algorithm)), std::string(to_string(r.plan.protocol)),
                   std::to_string(r.plan.algorithm == Algorithm::nvls ? r.plan.shape.nvls_channels : r.plan.shape.channels), format_us(r.time), format_gbps(r.algbw), format_gbps(r.busbw), format_us(r.plan.model.time),
                   std::to_string(r.stats.flows)});
    rows.push_back({{"bytes", size.value()}, {"algorithm", to_string(r.plan.algorithm)}, {"protocol", to_string(r.plan.protocol)},
                    {"channels", r.plan.algorithm == Algorithm::nvls ? r.plan.shape.nvls_channels : r.plan.shape.channels},
                    {"rings", r.plan.channels}, {"time_us", r.time.value() * 1e6}, {"algbw_GBps", r.algbw.value() / 1e9},
                    {"busbw_GBps", r.busbw.value() / 1e9}, {"nccl_model_time_us", r.plan.model.time.value() * 1e6},
                    {"flows", r.stats.flows}, {"events", r.stats.events}, {"solver_calls", r.stats.solver_calls}});
  }
  if (!o.trace.empty()) {
    // The trace of the last size, with link loads.
    sim::Simulator sim;
    sim::FluidNetwork net(sim, model.capacities());
    sim::TaskGraph graph(sim, net, static_cast<int>(topo.gpus().size()));
    std::vector<std::string> names(topo.directed_link_count());
    for (auto [e, end] = boost::edges(topo.graph()); e != end; ++e) {
      names[topo.link(*e).id] = topo.device(boost::source(*e, topo.graph())).name + " -> " + topo.device(boost::target(*e, topo.graph())).name;
    }
    graph.trace_links(std::move(names));
    model.add_to(graph, model.plan(c));
    graph.run();
    reports::write_file_atomically(o.trace, graph.chrome_trace());
  }
  if (o.json) {
    std::cout << nlohmann::json{{"topology", topo.name}, {"op", o.op}, {"ranks", c.ranks.size()}, {"results", rows}}.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{} over {} GPUs of {} (busbw as nccl-tests defines it)\n", to_string(c.op), c.ranks.size(), topo.name);
  std::cout << table.render("  ");
  // --channels shapes the simulation only: the channels column and the NCCL model keep NCCL's own
  // search (a probe read 8 channels beside a time one ring gives).
  if (o.channels > 0) {
    std::cout << fmt::format("note: --channels {} builds {} ring{} or tree pair{} for the simulation (time, algbw, busbw); the channels column and "
                             "the NCCL model are NCCL's own search's\n",
                             o.channels, o.channels, o.channels == 1 ? "" : "s", o.channels == 1 ? "" : "s");
  }
}

}  // namespace

void add_collective_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("collective", "Simulate an NCCL collective on a topology: time, algbw and busbw");
  cmd->add_option("topology", o->topology, "Topology YAML file or shipped preset")->required();
  cmd->add_option("--op", o->op, "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all or send_recv")->default_val("all_reduce");
  CLI::Option* size = cmd->add_option("--size", o->size, "Size as nccl-tests counts it (e.g. 16GiB)")->default_val("1GiB");
  cmd->add_option("--sweep", o->sweep, "Sizes from MIN to MAX by powers of two (e.g. 8B:8GiB); instead of --size")->excludes(size);
  cmd->add_option("--gpus", o->gpus, "GPU ranks taking part, in communicator rank order (e.g. 0-7,16-23); default all. Rings visit the nodes in the order their GPUs first appear, as NCCL's rings follow ranks, so the order can change the time on an oversubscribed or hashed fabric")
      ->check(CLI::Validator([](std::string& s) { return s.empty() ? std::string("expected GPU ranks such as 0-7,16-23, found an empty list") : std::string(); },
                             "RANKS"));
  cmd->add_option("--algorithm", o->algorithm, "Force ring, tree, hierarchical, nvls, collnet, pairwise or direct (default: NCCL's choice)");
  cmd->add_option("--protocol", o->protocol, "Force LL, LL128 or Simple");
  cmd->add_option("--channels", o->channels, "Rings or tree pairs to build (default, or 0: one per NIC rail used)")->check(CLI::Range(0, 64));
  CLI::Option* root = cmd->add_option("--root", o->root, "Root rank of broadcast and reduce")->default_val(0);
  cmd->add_flag("--no-pxn", o->no_pxn, "Route inter-node traffic without NVLink relaying (NCCL_PXN_DISABLE=1)");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_option("--trace", o->trace, "Write a Chrome/Perfetto trace of the (last) collective with link loads")->check(output_file());
  cmd->callback([o, root] {
    // Only broadcast and reduce have a root: one given to another collective would be ignored.
    if (root->count() > 0 && o->op != "broadcast" && o->op != "reduce") {
      throw InputError(fmt::format("--root: only broadcast and reduce have a root, and --op is {}", o->op));
    }
    run(*o);
  });
}

}  // namespace cs::app
