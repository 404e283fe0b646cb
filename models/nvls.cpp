// NVLink SHARP (NVLS) inside one NVSwitch domain, at most at NCCL's NVLS algorithm bandwidth (which
// carries its NVLS efficiency for the architecture). All-reduce: each GPU writes its whole buffer to
// the switch, which reduces and multicasts the result back, so each GPU link carries S in each
// direction (against 2(n-1)/n S for a ring). All-gather: each GPU multicasts its shard S/n (one write
// the switch copies to every GPU) and receives the other (n-1)/n S. Reduce-scatter: the switch reads
// every GPU's part of each other shard ((n-1)/n S up each link) and returns each GPU its reduced S/n.
#include <fmt/format.h>

#include "collective_builders.hpp"

namespace cs::models::detail {

std::vector<CollectivePhase> build_nvls(const CollectiveModel& m, const Group& g, const Collective& c, sim::Time latency,
                                        double rate_cap) {
  const auto& topo = m.topology();
  const auto& graph = topo.graph();
  const double n = static_cast<double>(g.ranks.size());
  const bool gather_or_scatter = c.op == CollectiveOp::all_gather || c.op == CollectiveOp::reduce_scatter;
  // NCCL's model times all-gather and reduce-scatter as S / algbw: the fuller link's (n-1)/n S at
  // (n-1)/n of it takes that long.
  FlowBuilder flows(m, latency, 1.0, gather_or_scatter ? rate_cap * (n - 1) / n : rate_cap);
  for (topology::Vertex gpu : g.ranks) {
    topology::Vertex nvswitch = gpu;
    for (auto [e, end] = boost::out_edges(gpu, graph); e != end; ++e) {
      if (topo.device(boost::target(*e, graph)).kind == topology::DeviceKind::nvswitch) nvswitch = boost::target(*e, graph);
    }
    const double s = c.bytes.value();
    const double up = c.op == CollectiveOp::all_gather ? s / n : c.op == CollectiveOp::reduce_scatter ? s * (n - 1) / n : s;
    const double down = c.op == CollectiveOp::all_gather ? s * (n - 1) / n : c.op == CollectiveOp::reduce_scatter ? s / n : s;
    flows.add_link(gpu, nvswitch, up);
    flows.add_link(nvswitch, gpu, down);
  }
  return {CollectivePhase{fmt::format("{} nvls", to_string(c.op)), flows.take()}};
}

}  // namespace cs::models::detail
