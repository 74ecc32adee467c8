// The parts of the policies that read a Topology: the rank view and the lower bound.
#include <map>

#include "sparsp/policy.hpp"

namespace sparsp::sim {

Result<RankTopology> rank_topology(const topology::Topology& topo, const std::vector<int>& gpus) {
  RankTopology rt;
  rt.ranks = static_cast<int>(gpus.size());
  for (size_t r = 0; r < gpus.size(); ++r) {
    const int g = gpus[r];
    if (g < 0 || g >= topo.num_gpus())
      return Error{"GPU " + std::to_string(g) + " is not in topology '" + topo.name() + "' (" +
                   std::to_string(topo.num_gpus()) + " GPUs)"};
    rt.gpu_of_rank.push_back(g);
    rt.ancestors.push_back(topo.ancestors(g));
    rt.numa.push_back(topo.gpu_numa_node(g));
  }
  rt.p2p.assign(gpus.size() * gpus.size(), 0);
  for (size_t a = 0; a < gpus.size(); ++a)
    for (size_t b = 0; b < gpus.size(); ++b)
      rt.p2p[a * gpus.size() + b] = a != b && gpus[a] != gpus[b] && topo.p2p_allowed(gpus[a], gpus[b]);
  return rt;
}

// ---- lower bound -----------------------------------------------------------------------------

Result<LowerBound> lower_bound(const topology::Topology& topo, const Workload& work) {
  const auto& res = topo.resources();
  std::vector<double> load(res.size(), 0.0);
  for (const auto& t : work.transfers) {
    const int si = topo.endpoint_index(t.src), di = topo.endpoint_index(t.dst);
    if (si < 0 || di < 0) return Error{"transfer " + t.id + ": unknown endpoint"};
    const auto& r = topo.route_ref(si, di, t.route);
    if (!r) return r.error();
    for (const auto& leg : r->legs)
      for (const auto& u : leg.uses) load[static_cast<size_t>(u.resource)] += u.coefficient * t.bytes;
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
