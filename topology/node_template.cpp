#include "clustersim/topology/node_template.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "clustersim/common/suggest.hpp"

namespace cs::topology {

namespace {

constexpr int kMaxDevicesPerGroup = 4096;

const std::vector<std::string> kNodeDeviceKinds{"gpu", "nvswitch", "pcie_switch", "cpu", "nic"};
const std::vector<std::string> kNodeLinkKinds{"nvlink", "pcie", "socket", "c2c"};

DeviceKind parse_device_kind(const std::string& s) {
  for (DeviceKind k : kAllDeviceKinds) {
    if (to_string(k) == s) return k;
  }
  return DeviceKind::gpu;  // unreachable: s was checked against kNodeDeviceKinds
}

LinkKind parse_link_kind(const std::string& s) {
  for (LinkKind k : kAllLinkKinds) {
    if (to_string(k) == s) return k;
  }
  return LinkKind::pcie;
}

DeviceGroup read_group(const yaml::Node& node) {
  yaml::Map m(node);
  DeviceGroup g;
  g.name = m.get<std::string>("name", yaml::Check<std::string>{"a name of letters and underscores", [](const std::string& s) {
                                         return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
                                           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
                                         });
                                       }});
  g.kind = parse_device_kind(m.choice("kind", kNodeDeviceKinds));
  g.count = m.get_or<int>("count", 1, yaml::in_range(1, kMaxDevicesPerGroup, fmt::format("a count from 1 to {}", kMaxDevicesPerGroup)));
  g.latency = m.get_or<Seconds>("latency", Seconds(0), yaml::latency());
  if (g.kind == DeviceKind::nvswitch) g.chips = m.get_or<int>("chips", 1, yaml::positive<int>());
  if (g.kind == DeviceKind::nic) {
    g.rate = m.get<BytesPerSec>("rate", yaml::bandwidth());
    g.ports = m.get_or<int>("ports", 1, yaml::in_range(1, 8, "1 to 8 ports"));
    g.rails = m.get_or<int>("rails", 0, yaml::positive<int>());
    // NIC i is on rail i mod rails: rails beyond the NICs would stay empty (and the fabric a rail short).
    if (g.rails > g.count) {
      m.at("rails", "").fail(fmt::format("at most the group's {} NIC{} (NIC i is on rail i mod rails)", g.count, g.count == 1 ? "" : "s"),
                             std::to_string(g.rails));
    }
  }
  m.finish();
  return g;
}

// "gpu" (a whole group) or "cpu1" (one device): the longest group name that prefixes the text.
LinkEnd read_end(const yaml::Node& node, const std::vector<DeviceGroup>& groups) {
  const std::string text = node.scalar("a device group name or a device (group name and index)");
  std::vector<std::string> names;
  for (const auto& g : groups) names.push_back(g.name);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (text == groups[i].name) return {i, std::nullopt};
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::string& name = groups[i].name;
    if (text.size() > name.size() && text.compare(0, name.size(), name) == 0) {
      const std::string digits = text.substr(name.size());
      if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) && digits.size() < 6) {
        const int index = std::stoi(digits);
        if (index >= groups[i].count) {
          node.fail(fmt::format("a device of group '{}' (indices 0 to {})", name, groups[i].count - 1), "'" + text + "'");
        }
        return {i, index};
      }
    }
  }
  node.fail("a device group (" + join_alternatives(names) + ") or one device such as " + names.front() + "0",
            "'" + text + "'" + did_you_mean(text, names));
}

}  // namespace

int NodeTemplate::gpus() const {
  int n = 0;
  for (const auto& g : groups) {
    if (g.kind == DeviceKind::gpu) n += g.count;
  }
  return n;
}

int NodeTemplate::nic_ports() const {
  int n = 0;
  for (const auto& g : groups) {
    if (g.kind == DeviceKind::nic) n += g.count * g.ports;
  }
  return n;
}

// The (from, to) device pairs a link group joins, as indices within their groups.
template <class F>
static void for_each_pair(const LinkGroup& lg, const std::vector<DeviceGroup>& groups, F f) {
  const int nf = lg.from.index ? 1 : groups[lg.from.group].count;
  const int nt = lg.to.index ? 1 : groups[lg.to.group].count;
  const auto visit = [&](int i, int j) { f(lg.from.index.value_or(i), lg.to.index.value_or(j)); };
  switch (lg.pattern) {
    case LinkPattern::all:
      for (int i = 0; i < nf; ++i)
        for (int j = 0; j < nt; ++j) visit(i, j);
      break;
    case LinkPattern::zip:
      for (int i = 0; i < nf; ++i) visit(i, i);
      break;
    case LinkPattern::block:
      for (int i = 0; i < nf; ++i) visit(i, static_cast<int>(static_cast<long long>(i) * nt / nf));
      break;
  }
}

static NodeTemplate read_node(const yaml::Node& node, IncludeStack& includes) {
  yaml::Map m(node);
  NodeTemplate t;
  t.name = m.get<std::string>("name", yaml::name());
  t.description = m.get_or<std::string>("description", "");
  t.gpu = hardware::load_hardware_reference(m.at("gpu", "a hardware profile (name, path or map)"), includes);

  for (const yaml::Node& item : m.at("devices", "a list of device groups").items()) {
    DeviceGroup g = read_group(item);
    for (const auto& other : t.groups) {
      if (other.name == g.name) item.fail("a device group name not used before", "'" + g.name + "' (a second time)");
    }
    t.groups.push_back(std::move(g));
  }
  if (t.groups.empty()) m.at("devices", "").fail("at least one device group");
  if (t.gpus() == 0) m.at("devices", "").fail("at least one group of kind gpu");
  for (const auto& g : t.groups) {
    for (const auto& h : t.groups) {
      if (&g != &h && h.name.size() > g.name.size() && h.name.compare(0, g.name.size(), g.name) == 0) {
        m.at("devices", "").fail(fmt::format("group names of which none is a prefix of another ('{}' and '{}' are)", g.name, h.name));
      }
    }
  }

  if (auto links = m.find("links")) {
    for (const yaml::Node& item : links->items()) {
      yaml::Map l(item);
      LinkGroup lg(item);
      lg.from = read_end(l.at("from", "a device group or device"), t.groups);
      lg.to = read_end(l.at("to", "a device group or device"), t.groups);
      const std::string pattern = l.choice_or("pattern", "all", {"all", "zip", "block"});
      lg.pattern = pattern == "zip" ? LinkPattern::zip : pattern == "block" ? LinkPattern::block : LinkPattern::all;
      lg.kind = parse_link_kind(l.choice("kind", kNodeLinkKinds));
      lg.bandwidth = l.get<BytesPerSec>("bandwidth", yaml::bandwidth());
      lg.latency = l.get_or<Seconds>("latency", Seconds(0), yaml::latency());
      l.finish();
      // A socket link joins two CPUs, an NVLink-C2C link a GPU and a CPU (a socket link between GPUs
      // had been taken as a path for their traffic).
      const DeviceKind from_kind = t.groups[lg.from.group].kind, to_kind = t.groups[lg.to.group].kind;
      if (lg.kind == LinkKind::socket && !(from_kind == DeviceKind::cpu && to_kind == DeviceKind::cpu)) {
        item.fail("a socket link between two CPUs", fmt::format("a socket link from a {} to a {}", to_string(from_kind), to_string(to_kind)));
      }
      if (lg.kind == LinkKind::c2c && !((from_kind == DeviceKind::gpu && to_kind == DeviceKind::cpu) ||
                                        (from_kind == DeviceKind::cpu && to_kind == DeviceKind::gpu))) {
        item.fail("a c2c (NVLink-C2C) link between a GPU and a CPU", fmt::format("a c2c link from a {} to a {}", to_string(from_kind), to_string(to_kind)));
      }
      // NVLink joins GPUs, NVSwitches and (IBM POWER9's) CPUs; a NIC or PCIe switch on it had been
      // counted as the GPU's scale-up bandwidth.
      const auto nvlink_end = [](DeviceKind k) { return k == DeviceKind::gpu || k == DeviceKind::nvswitch || k == DeviceKind::cpu; };
      if (lg.kind == LinkKind::nvlink && !(nvlink_end(from_kind) && nvlink_end(to_kind))) {
        item.fail("an NVLink link between GPUs, NVSwitches or CPUs", fmt::format("an nvlink link from a {} to a {}", to_string(from_kind), to_string(to_kind)));
      }
      if (lg.from.group == lg.to.group && !(lg.from.index && lg.to.index && *lg.from.index != *lg.to.index)) {
        const bool one_device = lg.from.index && lg.to.index;
        item.fail("a link between two different devices (two groups, or two single devices such as cpu0 and cpu1)",
                  one_device ? fmt::format("a link from {}{} to itself", t.groups[lg.from.group].name, *lg.from.index) : std::string("a link from a group to itself"));
      }
      const int nf = lg.from.index ? 1 : t.groups[lg.from.group].count;
      const int nt = lg.to.index ? 1 : t.groups[lg.to.group].count;
      if (lg.pattern == LinkPattern::zip && nf != nt) {
        item.fail("pattern zip between groups of equal size", fmt::format("{} and {} devices", nf, nt));
      }
      if (lg.pattern == LinkPattern::block && nf < nt) {
        item.fail("pattern block from the larger group to the smaller", fmt::format("{} to {} devices", nf, nt));
      }
      t.links.push_back(std::move(lg));
    }
  }
  // Links are bidirectional: a pair joined twice (cpu0 to cpu1 and cpu1 to cpu0, or two groups
  // listed twice) would be two parallel links, each routed as a path of its own.
  std::map<std::pair<std::pair<std::size_t, int>, std::pair<std::size_t, int>>, const LinkGroup*> joined;
  for (const LinkGroup& lg : t.links) {
    for_each_pair(lg, t.groups, [&](int i, int j) {
      auto a = std::make_pair(lg.from.group, i), b = std::make_pair(lg.to.group, j);
      if (b < a) std::swap(a, b);
      const auto [it, fresh] = joined.emplace(std::make_pair(a, b), &lg);
      if (!fresh) {
        lg.where.fail("each pair of devices joined once (a link carries both directions: list a pair once, with its whole bandwidth)",
                      fmt::format("{}{} and {}{} joined again, first at line {}", t.groups[a.first].name, a.second, t.groups[b.first].name, b.second,
                                  it->second->where.where().line));
      }
    });
  }
  // Every NIC is joined to something in its node: one that is not had carried no GPU's traffic, yet
  // its fabric port counted in the bisection (a probe's node doubled it).
  for (std::size_t gi = 0; gi < t.groups.size(); ++gi) {
    if (t.groups[gi].kind != DeviceKind::nic) continue;
    std::vector<bool> linked(static_cast<std::size_t>(t.groups[gi].count), false);
    // Linked to a device that carries traffic to it (another NIC does not).
    for (const LinkGroup& lg : t.links) {
      const bool from_nic = t.groups[lg.from.group].kind == DeviceKind::nic, to_nic = t.groups[lg.to.group].kind == DeviceKind::nic;
      for_each_pair(lg, t.groups, [&](int i, int j) {
        if (lg.from.group == gi && !to_nic) linked[static_cast<std::size_t>(i)] = true;
        if (lg.to.group == gi && !from_nic) linked[static_cast<std::size_t>(j)] = true;
      });
    }
    for (std::size_t i = 0; i < linked.size(); ++i) {
      if (!linked[i]) {
        const std::string expected = "every NIC linked to a device of its node (a GPU, PCIe switch or CPU), so that traffic can reach it";
        const std::string found = fmt::format("no link to {}{}", t.groups[gi].name, i);
        if (const auto links = m.find("links")) links->fail(expected, found);
        throw InputError(m.node().where(), m.node().field().empty() ? "links" : m.node().field() + ".links", expected, found + " (no links at all)");
      }
    }
  }
  // A GPU's NVLinks reach one NVSwitch: the model's convention is one logical switch per NVLink
  // domain (`chips` counts the physical ones), since NCCL stripes a transfer over all of a GPU's
  // NVLinks while routing takes one path. Four switch devices linked to every GPU had been accepted,
  // and each transfer then rode one of them: collectives at a quarter of the node's rate.
  {
    std::map<std::pair<std::size_t, int>, std::pair<std::pair<std::size_t, int>, const LinkGroup*>> switch_of;
    for (const LinkGroup& lg : t.links) {
      if (lg.kind != LinkKind::nvlink) continue;
      for_each_pair(lg, t.groups, [&](int i, int j) {
        for (const auto& [g, sw] : {std::make_pair(std::make_pair(lg.from.group, i), std::make_pair(lg.to.group, j)),
                                    std::make_pair(std::make_pair(lg.to.group, j), std::make_pair(lg.from.group, i))}) {
          if (t.groups[g.first].kind != DeviceKind::gpu || t.groups[sw.first].kind != DeviceKind::nvswitch) continue;
          const auto [it, fresh] = switch_of.emplace(g, std::make_pair(sw, &lg));
          if (!fresh && it->second.first != sw) {
            lg.where.fail(fmt::format("each GPU's NVLinks to one NVSwitch device: the NVLink domain's chips as one logical switch "
                                      "({{kind: nvswitch, count: 1, chips: N}}) with each GPU's link at its whole NVLink rate"),
                          fmt::format("{}{} linked to {}{} and {}{}", t.groups[g.first].name, g.second, t.groups[it->second.first.first].name,
                                      it->second.first.second, t.groups[sw.first].name, sw.second));
          }
        }
      });
    }
  }
  // A GPU's NVLinks together carry at most what its profile says (per direction): a mesh of 400 GB/s
  // links on an A100 (300 GB/s) had been simulated at 711 GB/s of bus bandwidth.
  if (const auto over = nvlink_excess(t, t.gpu)) {
    over->at->where.fail(fmt::format("NVLink links of a GPU that add up to at most its profile's {} per direction ({}: {} links)", to_string(t.gpu.nvlink->bandwidth),
                                     t.gpu.name, t.gpu.nvlink->links),
                         fmt::format("{} for {}", to_string(BytesPerSec(over->bytes_per_s)), over->device));
  }
  m.finish();
  return t;
}

std::optional<NvlinkExcess> nvlink_excess(const NodeTemplate& t, const hardware::HardwareProfile& gpu) {
  if (!gpu.nvlink || gpu.nvlink->bandwidth.value() <= 0) return std::nullopt;
  const double limit = gpu.nvlink->bandwidth.value();
  std::map<std::pair<std::size_t, int>, double> per_gpu;
  std::optional<NvlinkExcess> over;
  for (const LinkGroup& lg : t.links) {
    if (lg.kind != LinkKind::nvlink || over) continue;
    for_each_pair(lg, t.groups, [&](int i, int j) {
      for (const auto& [group, index] : {std::make_pair(lg.from.group, i), std::make_pair(lg.to.group, j)}) {
        if (t.groups[group].kind != DeviceKind::gpu || over) continue;
        double& sum = per_gpu[{group, index}];
        sum += lg.bandwidth.value();
        if (sum > limit * (1 + 1e-9)) over = NvlinkExcess{&lg, fmt::format("{}{}", t.groups[group].name, index), sum};
      }
    });
  }
  return over;
}

NodeTemplate load_node_file(const std::filesystem::path& file, IncludeStack& includes, const SourceLocation& from) {
  auto guard = includes.enter(file, from);
  auto doc = yaml::Document::load_file(file);
  NodeTemplate t = read_node(part_body(doc->root(), "node"), includes);
  return t;
}

NodeTemplate load_node_reference(const yaml::Node& node, IncludeStack& includes) {
  if (node.is_map()) return read_node(node, includes);
  return load_node_file(resolve_part(node, "nodes"), includes, node.where());
}

std::vector<NicPort> instantiate_node(const NodeTemplate& t, int index, Topology& topo) {
  // first[g] is the vertex of device 0 of group g; the devices of a group are consecutive.
  std::vector<Vertex> first(t.groups.size());
  std::vector<NicPort> ports;
  for (std::size_t gi = 0; gi < t.groups.size(); ++gi) {
    const DeviceGroup& g = t.groups[gi];
    for (int i = 0; i < g.count; ++i) {
      Device d;
      d.name = fmt::format("n{}.{}{}", index, g.name, i);
      d.kind = g.kind;
      d.node = index;
      d.local_index = i;
      d.chips = g.chips;
      d.latency = g.latency;
      if (g.kind == DeviceKind::nic) d.rail = i % (g.rails > 0 ? g.rails : g.count);
      if (g.kind == DeviceKind::gpu) d.model = t.gpu.name;
      const int rail = d.rail;
      const Vertex v = topo.add_device(std::move(d));
      if (i == 0) first[gi] = v;
      if (g.kind == DeviceKind::nic) {
        for (int p = 0; p < g.ports; ++p) ports.push_back({v, p, g.rate, rail});
      }
    }
  }
  for (const LinkGroup& lg : t.links) {
    for_each_pair(lg, t.groups, [&](int i, int j) {
      topo.add_link(first[lg.from.group] + static_cast<Vertex>(i), first[lg.to.group] + static_cast<Vertex>(j),
                    Link{.kind = lg.kind, .bandwidth = lg.bandwidth, .latency = lg.latency});
    });
  }
  return ports;
}

}  // namespace cs::topology
