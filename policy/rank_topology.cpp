// The rank view of a topology: the sequence-parallel group's GPUs, their tree ancestors, NUMA
// nodes and peer access (RankTopology, include/sparsp/policy.hpp).
#include "sparsp/policy.hpp"

namespace sparsp::policy {

RankTopology RankTopology::flat(int ranks, bool p2p) {
  RankTopology rt;
  rt.ranks = ranks;
  for (int r = 0; r < ranks; ++r) {
    rt.gpu_of_rank.push_back(r);
    rt.ancestors.push_back({"sw0", "cpu0"});
    rt.numa.push_back(0);
    rt.node.push_back(0);
  }
  rt.p2p.assign(static_cast<size_t>(ranks) * ranks, p2p ? 1 : 0);
  return rt;
}

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
    rt.numa.push_back(topo.gpu_socket(g));
    rt.node.push_back(topo.is_cluster() ? topo.node_of_gpu(g) : 0);
  }
  rt.p2p.assign(gpus.size() * gpus.size(), 0);
  for (size_t a = 0; a < gpus.size(); ++a)
    for (size_t b = 0; b < gpus.size(); ++b)
      rt.p2p[a * gpus.size() + b] =
          a != b && gpus[a] != gpus[b] && topo.p2p_allowed(gpus[a], gpus[b]);
  // NCCL's default P2P level (RankTopology::nccl_p2p): PXB, or any path on an AMD CPU when the
  // machine has at most 2 GPUs.
  bool amd = false;
  for (const auto& n : topo.nodes())
    if (n.kind == topology::NodeKind::cpu && n.family.rfind("amd", 0) == 0) amd = true;
  bool any_path = amd && topo.num_gpus() <= 2;
  // The farthest path class NCCL's P2P transport takes: PXB by default; the topology's
  // nccl.p2p_level (NCCL_P2P_LEVEL) overrides it and the AMD rule (PHB covers NODE: NCCL has
  // no NODE level; LOC: no P2P between two GPUs).
  topology::PathClass level = topology::PathClass::pxb;
  if (const std::string& l = topo.options().nccl.p2p_level; !l.empty()) {
    any_path = false;
    level = l == "LOC"   ? topology::PathClass::self
            : l == "NVL" ? topology::PathClass::nvlink
            : l == "PIX" ? topology::PathClass::pix
            : l == "PXB" ? topology::PathClass::pxb
            : l == "PHB" ? topology::PathClass::node
                         : topology::PathClass::sys;
  }
  rt.nccl_p2p.assign(gpus.size() * gpus.size(), 0);
  for (size_t a = 0; a < gpus.size(); ++a)
    for (size_t b = 0; b < gpus.size(); ++b) {
      if (!rt.p2p[a * gpus.size() + b]) continue;
      const auto& route = topo.route_ref(gpus[a], gpus[b]);
      // PathClass is ordered nearest first (self, nvlink, pix, pxb, phb, node, sys).
      const bool near = route && route->path_class <= level;
      rt.nccl_p2p[a * gpus.size() + b] = near || any_path;
    }
  return rt;
}

}  // namespace sparsp::policy
