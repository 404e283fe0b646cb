#include "clustersim/topology/export.hpp"

#include <fmt/format.h>

#include "clustersim/common/markup.hpp"

namespace cs::topology {

namespace {

std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

const char* dot_shape(DeviceKind k) {
  switch (k) {
    case DeviceKind::gpu: return "box";
    case DeviceKind::nic: return "ellipse";
    case DeviceKind::cpu: return "octagon";
    default: return "diamond";
  }
}

}  // namespace

std::string to_dot(const Topology& topo) {
  const Graph& g = topo.graph();
  std::string out = fmt::format("graph \"{}\" {{\n", dot_escape(topo.name));
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    const Device& d = topo.device(*v);
    out += fmt::format("  \"{}\" [kind={}, shape={}];\n", dot_escape(d.name), to_string(d.kind), dot_shape(d.kind));
  }
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Link& l = topo.link(*e);
    if (l.id & 1u) continue;  // one line per full-duplex link
    // Parallel cables between two switches are one link of several lanes on InfiniBand (the label
    // says how many), one link each on RoCE (fabric.cpp, connect).
    const std::string label = l.lanes > 1 ? fmt::format("{} x {}", l.lanes, to_string(BytesPerSec(l.bandwidth.value() / l.lanes))) : to_string(l.bandwidth);
    out += fmt::format("  \"{}\" -- \"{}\" [kind={}, label=\"{}\"];\n", dot_escape(topo.device(boost::source(*e, g)).name),
                       dot_escape(topo.device(boost::target(*e, g)).name), to_string(l.kind), label);
  }
  out += "}\n";
  return out;
}

std::string to_graphml(const Topology& topo) {
  const Graph& g = topo.graph();
  std::string out =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"
      "  <key id=\"kind\" for=\"node\" attr.name=\"kind\" attr.type=\"string\"/>\n"
      "  <key id=\"node\" for=\"node\" attr.name=\"node\" attr.type=\"int\"/>\n"
      "  <key id=\"rail\" for=\"node\" attr.name=\"rail\" attr.type=\"int\"/>\n"
      "  <key id=\"tier\" for=\"node\" attr.name=\"tier\" attr.type=\"int\"/>\n"
      "  <key id=\"link_kind\" for=\"edge\" attr.name=\"kind\" attr.type=\"string\"/>\n"
      "  <key id=\"bandwidth\" for=\"edge\" attr.name=\"bandwidth_Bps\" attr.type=\"double\"/>\n"
      "  <key id=\"latency\" for=\"edge\" attr.name=\"latency_s\" attr.type=\"double\"/>\n"
      "  <key id=\"lanes\" for=\"edge\" attr.name=\"lanes\" attr.type=\"int\"/>\n";
  out += fmt::format("  <graph id=\"{}\" edgedefault=\"undirected\">\n", xml_escape(topo.name));
  for (auto [v, end] = boost::vertices(g); v != end; ++v) {
    const Device& d = topo.device(*v);
    out += fmt::format(
        "    <node id=\"{}\"><data key=\"kind\">{}</data><data key=\"node\">{}</data><data key=\"rail\">{}</data>"
        "<data key=\"tier\">{}</data></node>\n",
        xml_escape(d.name), to_string(d.kind), d.node, d.rail, d.tier);
  }
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Link& l = topo.link(*e);
    if (l.id & 1u) continue;
    out += fmt::format(
        "    <edge source=\"{}\" target=\"{}\"><data key=\"link_kind\">{}</data><data key=\"bandwidth\">{}</data>"
        "<data key=\"latency\">{}</data><data key=\"lanes\">{}</data></edge>\n",
        xml_escape(topo.device(boost::source(*e, g)).name), xml_escape(topo.device(boost::target(*e, g)).name),
        to_string(l.kind), l.bandwidth.value(), l.latency.value(), l.lanes);
  }
  out += "  </graph>\n</graphml>\n";
  return out;
}

}  // namespace cs::topology
