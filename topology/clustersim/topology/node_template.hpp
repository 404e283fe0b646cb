// A node template: the devices of one server (or rack) and the links between them, instantiated
// once per node of a topology. Format: docs/topology.md ("Node templates").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "clustersim/common/parts.hpp"
#include "clustersim/common/yaml_reader.hpp"
#include "clustersim/hardware/hardware_profile.hpp"
#include "clustersim/topology/graph.hpp"

namespace cs::topology {

struct DeviceGroup {
  std::string name;  // device i is named <name><i>
  DeviceKind kind = DeviceKind::gpu;
  int count = 1;
  int chips = 1;          // nvswitch: physical chips this logical switch stands for
  BytesPerSec rate;       // nic: line rate of each port
  int ports = 1;          // nic: ports per NIC, one per fabric plane
  int rails = 0;          // nic: NIC i is on rail i mod rails (0: rails = count)
  Seconds latency;        // forwarding latency through one device
};

enum class LinkPattern { all, zip, block };

struct LinkEnd {
  std::size_t group = 0;       // index into NodeTemplate::groups
  std::optional<int> index;    // one device of the group, or the whole group
};

struct LinkGroup {
  explicit LinkGroup(yaml::Node w) : where(std::move(w)) {}
  LinkEnd from;
  LinkEnd to;
  LinkPattern pattern = LinkPattern::all;
  LinkKind kind = LinkKind::pcie;
  BytesPerSec bandwidth;  // per direction
  Seconds latency;
  yaml::Node where;       // for messages about this link group
};

struct NodeTemplate {
  std::string name;
  std::string description;
  hardware::HardwareProfile gpu;
  std::vector<DeviceGroup> groups;
  std::vector<LinkGroup> links;

  [[nodiscard]] int gpus() const;
  [[nodiscard]] int nic_ports() const;
};

// The first GPU whose NVLink links add up to more than `gpu`'s NVLink per direction, the link group
// that tips it over and the sum, or nothing: checked when a template is read, and again when
// another profile replaces its own (validate --hardware).
struct NvlinkExcess {
  const LinkGroup* at = nullptr;
  std::string device;  // "gpu3"
  double bytes_per_s = 0;
};
std::optional<NvlinkExcess> nvlink_excess(const NodeTemplate& t, const hardware::HardwareProfile& gpu);

// A node template given inline (a map) or by reference (path or shipped name under nodes/).
NodeTemplate load_node_reference(const yaml::Node& node, IncludeStack& includes);
NodeTemplate load_node_file(const std::filesystem::path& file, IncludeStack& includes, const SourceLocation& from = {});

// One fabric port of a NIC: a NIC with several ports (one per fabric plane) is one device with one
// fabric link per port.
struct NicPort {
  Vertex nic;
  int port = 0;
  BytesPerSec rate;
  int rail = 0;
};

// Adds node `index` of the template to the topology (devices named n<index>.<group><i>); returns
// its NIC ports in order (nic0 port 0, nic0 port 1, ..., nic1 port 0, ...).
std::vector<NicPort> instantiate_node(const NodeTemplate& t, int index, Topology& topo);

}  // namespace cs::topology
