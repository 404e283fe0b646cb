// The topology graph: devices (vertices) and links (edges) in a Boost.Graph.
//
// A physical link is full duplex: it is stored as two directed edges, one per direction, each with
// the link's bandwidth in that direction. Every directed edge has a dense id (0..links-1) so that
// flow models can keep per-link state in plain vectors; the two directions of one cable have ids
// 2i and 2i+1.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "clustersim/common/units.hpp"
#include "clustersim/hardware/hardware_profile.hpp"

namespace cs::topology {

enum class DeviceKind { gpu, nvswitch, pcie_switch, cpu, nic, leaf, spine, core };
enum class LinkKind { nvlink, pcie, socket, c2c, infiniband, ethernet };

inline constexpr DeviceKind kAllDeviceKinds[] = {DeviceKind::gpu,  DeviceKind::nvswitch, DeviceKind::pcie_switch,
                                                 DeviceKind::cpu,  DeviceKind::nic,      DeviceKind::leaf,
                                                 DeviceKind::spine, DeviceKind::core};
inline constexpr LinkKind kAllLinkKinds[] = {LinkKind::nvlink, LinkKind::pcie,       LinkKind::socket,
                                             LinkKind::c2c,    LinkKind::infiniband, LinkKind::ethernet};

std::string_view to_string(DeviceKind k);
std::string_view to_string(LinkKind k);
bool is_fabric_switch(DeviceKind k);  // leaf, spine, core
bool is_fabric_link(LinkKind k);      // infiniband, ethernet

struct Device {
  std::string name;
  DeviceKind kind = DeviceKind::gpu;
  int node = -1;         // server (or rack) index; -1 for fabric switches
  int local_index = 0;   // index within its group in the node (gpu3 -> 3)
  int gpu_rank = -1;     // global GPU index for GPUs
  int rail = -1;         // NICs: rail; leaves of rail-aligned fabrics: the rail they serve
  int plane = -1;        // NIC ports and fabric switches: fabric plane
  int unit = -1;         // leaves: scalable unit (rail-aligned) or pod (3-tier)
  int tier = 0;          // fabric switches: 1 leaf, 2 spine, 3 core
  int chips = 1;         // a logical NVSwitch may stand for several chips
  Seconds latency;       // forwarding latency through the device
  std::string model;     // GPUs: hardware profile name
};

struct Link {
  LinkKind kind = LinkKind::pcie;
  BytesPerSec bandwidth;  // this direction
  Seconds latency;        // propagation and serialisation of one hop
  int lanes = 1;          // parallel cables aggregated into this link
  int tier = -1;          // fabric links: 0 NIC-leaf, 1 leaf-spine, 2 spine-core; -1 inside a node
  std::uint32_t id = 0;   // dense directed-link id
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, Device, Link>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

class Topology {
 public:
  Topology() = default;
  // Copies and moves are made out of line, in graph.cpp: GCC's -Wmaybe-uninitialized misfires
  // inside Boost.Graph's adjacency_list copy (which Boost 1.74's graph also moves with) wherever it
  // is inlined, and there it is silenced once.
  Topology(const Topology& other);
  Topology& operator=(const Topology& other);
  Topology(Topology&& other) noexcept(false);
  Topology& operator=(Topology&& other) noexcept(false);
  ~Topology();

  Vertex add_device(Device d);
  // Adds both directions of a full-duplex link; returns the edge a -> b.
  Edge add_link(Vertex a, Vertex b, Link link);

  [[nodiscard]] const Graph& graph() const { return graph_; }
  [[nodiscard]] const Device& device(Vertex v) const { return graph_[v]; }
  [[nodiscard]] const Link& link(Edge e) const { return graph_[e]; }
  [[nodiscard]] std::size_t device_count() const { return boost::num_vertices(graph_); }
  [[nodiscard]] std::size_t directed_link_count() const { return next_link_id_; }
  [[nodiscard]] const std::vector<Vertex>& gpus() const { return gpus_; }
  [[nodiscard]] int node_count() const { return node_count_; }
  void set_node_count(int n) { node_count_ = n; }

  // The device with this name, if any.
  [[nodiscard]] std::optional<Vertex> find(std::string_view name) const;
  // Every GPU of the nodes that hold the first `used` GPUs in topology order (where a job of `used`
  // GPUs runs): what renting whole nodes bills.
  [[nodiscard]] int gpus_of_nodes_holding(int used) const;

  std::string name;
  std::string description;
  std::string node_template;  // the node template's name
  std::string fabric_kind;    // "none", "fat-tree", "rail-optimized", "rail-only"
  std::string technology;     // "infiniband", "roce" or empty
  int fabric_tiers = 0;
  int fabric_planes = 1;  // independent fabric planes (NIC port p on plane p)
  bool in_network_reduction = false;  // the fabric's switches reduce (SHARP), and NCCL may use CollNet
  int qps_per_connection = 1;         // RoCE: flows a transfer between nodes is hashed as (NCCL_IB_QPS_PER_CONNECTION)
  std::vector<std::string> assumptions;  // defaults the builder applied, for the output to state
  std::shared_ptr<const hardware::HardwareProfile> gpu;  // the profile of every GPU (one node template)

 private:
  Graph graph_;
  std::vector<Vertex> gpus_;
  std::unordered_map<std::string, Vertex> by_name_;
  std::uint32_t next_link_id_ = 0;
  int node_count_ = 0;
};

}  // namespace cs::topology
