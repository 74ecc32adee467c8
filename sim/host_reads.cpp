// Host reads under writes: see host_reads.hpp.
#include "host_reads.hpp"

namespace sparsp::sim {

bool is_host_endpoint(const std::string& id) {
  const size_t slash = id.rfind('/');
  return id.compare(slash == std::string::npos ? 0 : slash + 1, 4, "host") == 0;
}

HostReadRule::HostReadRule(const topology::Topology& topo, double fraction, int max_gen)
    : topo_(topo), fraction_(fraction) {
  if (!(fraction_ > 0 && fraction_ < 1)) return;
  // By link index, not by name: a cluster's resource names are not "<a>-><b>" of its link ends
  // (Topology::link_direction_resources).
  const auto& links = topo.links();
  for (size_t i = 0; i < links.size(); ++i) {
    const topology::Link& l = links[i];
    if (l.kind != topology::LinkKind::pcie || l.pcie_gen < 1 || l.pcie_gen > max_gen) continue;
    const auto [down, up] = topo.link_direction_resources(static_cast<int>(i));
    if (down < 0 || up < 0) continue;
    toward_device_[down] = static_cast<int>(i);
    toward_host_[up] = static_cast<int>(i);
  }
}

int HostReadRule::switched_for(int link, Problem& p) {
  auto [it, fresh] = switched_.try_emplace(link, static_cast<int>(p.switched.size()));
  if (fresh) {
    const double on = fraction_ * topo_.links()[static_cast<size_t>(link)].capacity_Bps;
    p.switched.push_back(SwitchedResource{static_cast<int>(p.capacity_Bps.size()), on});
    p.capacity_Bps.push_back(1e30);  // unbounded until a write switches it on (the engine)
  }
  return it->second;
}

void HostReadRule::apply(const topology::Route& route, Task& k, Problem& p) {
  if (toward_device_.empty()) return;
  for (size_t l = 0; l < route.legs.size() && l < k.legs.size(); ++l) {
    const topology::RouteLeg& leg = route.legs[l];
    const bool reads = is_host_endpoint(leg.src), writes = is_host_endpoint(leg.dst);
    if (reads == writes) continue;  // GPU to GPU (or host to host): neither
    std::vector<lmm::Use> added;
    for (const topology::ResourceUse& u : leg.uses) {
      const auto& side = reads ? toward_device_ : toward_host_;
      const auto it = side.find(u.resource);
      if (it == side.end()) continue;
      const int s = switched_for(it->second, p);
      if (reads)
        added.push_back(lmm::Use{p.switched[static_cast<size_t>(s)].resource, 1.0});
      else
        k.switches.push_back(s);
    }
    for (const lmm::Use& u : added) k.legs[l].uses.push_back(u);
  }
}

}  // namespace sparsp::sim
