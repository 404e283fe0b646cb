// NVLink SHARP (NVLS) all-reduce inside one NVSwitch domain: each GPU writes its whole buffer to
// the switch, which reduces and multicasts the result back, so each GPU link carries S in each
// direction (against 2(n-1)/n S for a ring), at most at NCCL's NVLS algorithm bandwidth (which
// carries its NVLS efficiency for the architecture).
#include <fmt/format.h>

#include "collective_builders.hpp"

namespace cs::models::detail {

std::vector<CollectivePhase> build_nvls(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time latency,
                                        double rate_cap) {
  const auto& topo = m.topology();
  const auto& graph = topo.graph();
  FlowBuilder flows(m, latency, 1.0, rate_cap);
  for (topology::Vertex gpu : g.ranks) {
    topology::Vertex nvswitch = gpu;
    for (auto [e, end] = boost::out_edges(gpu, graph); e != end; ++e) {
      if (topo.device(boost::target(*e, graph)).kind == topology::DeviceKind::nvswitch) nvswitch = boost::target(*e, graph);
    }
    flows.add_link(gpu, nvswitch, c.bytes.value());
    flows.add_link(nvswitch, gpu, c.bytes.value());
  }
  return {CollectivePhase{"all_reduce nvls", flows.take()}};
}

}  // namespace cs::models::detail
