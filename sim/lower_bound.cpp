// lower_bound(): a workload's makespan can be no shorter than its busiest shared resource or GPU
// (include/sparsp/sim.hpp).
#include <map>

#include "sparsp/sim.hpp"

namespace sparsp::sim {

Result<LowerBound> lower_bound(const topology::Topology& topo, const Workload& work) {
  const auto& res = topo.resources();
  std::vector<double> load(res.size(), 0.0);
  for (const auto& t : work.transfers) {
    const int si = topo.endpoint_index(t.src), di = topo.endpoint_index(t.dst);
    if (si < 0 || di < 0) return Error{"transfer " + t.id + ": unknown endpoint"};
    const auto& r = topo.route_ref(si, di, t.route);
    if (!r) return r.error();
    for (const auto& leg : r->legs)
      for (const auto& u : leg.uses)
        load[static_cast<size_t>(u.resource)] += u.coefficient * t.bytes;
  }
  LowerBound lb;
  for (size_t i = 0; i < res.size(); ++i) {
    if (res[i].capacity_Bps <= 0) continue;
    const double s = load[i] / res[i].capacity_Bps;
    if (s > lb.bound_s) {
      lb.bound_s = s;
      lb.binding = res[i].name;
    }
  }
  std::map<std::string, double> comp;
  for (const auto& c : work.compute) comp[c.gpu] += c.duration_s;
  for (const auto& [g, s] : comp)
    if (s > lb.bound_s) {
      lb.bound_s = s;
      lb.binding = g + " compute";
    }
  return lb;
}

}  // namespace sparsp::sim
