// Builder phase that lists the shared capacities: both directions (and the duplex sum) of every
// link, each cpu's root complex and each NUMA node's host memory.
#include <algorithm>

#include "builder.hpp"

namespace sparsp::topology::detail {

int Builder::add_resource(std::string name, ResourceKind kind, double capacity) {
  t_.resources.push_back(Resource{std::move(name), kind, capacity});
  return static_cast<int>(t_.resources.size()) - 1;
}

void Builder::build_resources() {
  const size_t nl = t_.links.size();
  t_.res_forward.assign(nl, -1);
  t_.res_backward.assign(nl, -1);
  t_.res_duplex.assign(nl, -1);
  for (size_t i = 0; i < nl; ++i) {
    const Link& l = t_.links[i];
    const ResourceKind dir_kind = (l.kind == LinkKind::upi || l.kind == LinkKind::xgmi)
                                      ? ResourceKind::inter_socket
                                      : ResourceKind::link_direction;
    t_.res_forward[i] = add_resource(l.a + "->" + l.b, dir_kind, l.capacity_Bps);
    t_.res_backward[i] = add_resource(l.b + "->" + l.a, dir_kind, l.capacity_Bps);
    if (l.duplex_factor < 1.0) {
      t_.res_duplex[i] = add_resource(l.a + "<->" + l.b, ResourceKind::link_duplex,
                                      2.0 * l.duplex_factor * l.capacity_Bps);
    }
  }
  t_.res_root_complex.assign(t_.nodes.size(), -1);
  for (size_t k = 0; k < t_.cpu_of_numa.size(); ++k) {
    const auto cpu = static_cast<size_t>(t_.cpu_of_numa[k]);
    const Node& n = t_.nodes[cpu];
    if (n.root_complex_Bps > 0) {
      t_.res_root_complex[cpu] =
          add_resource(n.id + ".rc", ResourceKind::root_complex, n.root_complex_Bps);
    }
  }
  t_.res_chip.clear();
  for (const auto& [chip, bps] : t_.options.chip_fabric_Bps)
    t_.res_chip[chip] = add_resource("chip:" + chip, ResourceKind::switch_fabric, bps);
  // Cross-socket PCIe P2P (CPU families): per ordered GPU pair on two sockets, at most the lower
  // cross_socket_p2p of the two families times the slower of the two GPUs' links. A per-pair cap,
  // not a per-byte link cost: one reader of 7 peers across sockets still fills its link (p2pmark
  // single reader, 55 GB/s on the direct-attach Genoa case), while one pair alone runs at 43.
  t_.res_xsocket.clear();
  for (size_t i = 0; i < t_.gpu_nodes.size(); ++i)
    for (size_t j = 0; j < t_.gpu_nodes.size(); ++j) {
      const int ni = t_.gpu_nodes[i], nj = t_.gpu_nodes[j];
      const int ci = t_.node_cpu[static_cast<size_t>(ni)],
                cj = t_.node_cpu[static_cast<size_t>(nj)];
      if (i == j || ci == cj || ci < 0 || cj < 0) continue;
      double e = 1.0;
      for (int c : {ci, cj})
        if (auto f = find_cpu_family(t_.nodes[static_cast<size_t>(c)].family))
          e = std::min(e, f->cross_socket_p2p);
      const int ui = t_.up_link[static_cast<size_t>(ni)], uj = t_.up_link[static_cast<size_t>(nj)];
      if (e >= 1.0 || ui < 0 || uj < 0) continue;
      const double link = std::min(t_.links[static_cast<size_t>(ui)].capacity_Bps,
                                   t_.links[static_cast<size_t>(uj)].capacity_Bps);
      t_.res_xsocket[{ni, nj}] = add_resource(t_.nodes[static_cast<size_t>(ni)].id + "=>" +
                                                  t_.nodes[static_cast<size_t>(nj)].id + ".xsocket",
                                              ResourceKind::root_complex, e * link);
    }
  t_.res_host_memory.assign(t_.cpu_of_numa.size(), -1);
  for (size_t k = 0; k < t_.cpu_of_numa.size(); ++k) {
    const Node& n = t_.nodes[static_cast<size_t>(t_.cpu_of_numa[k])];
    if (n.host_memory_Bps > 0) {
      t_.res_host_memory[k] = add_resource("host" + std::to_string(k) + ".mem",
                                           ResourceKind::host_memory, n.host_memory_Bps);
    }
  }
}

// CPU families (cpu_families()): a family with a published duplex factor sets it on every PCIe
// link of its tree that still has the default factor (a link's own duplex_factor wins).
void Builder::apply_cpu_families() {
  for (size_t li = 0; li < t_.links.size(); ++li) {
    Link& l = t_.links[li];
    if (l.kind != LinkKind::pcie || l.duplex_factor != pcie_default_duplex_factor()) continue;
    const int below = t_.index.at(l.b);
    const int cpu = t_.node_cpu[static_cast<size_t>(below)];
    if (cpu < 0) continue;
    const auto fam = find_cpu_family(t_.nodes[static_cast<size_t>(cpu)].family);
    if (fam && fam->duplex_factor > 0) l.duplex_factor = fam->duplex_factor;
  }
}

}  // namespace sparsp::topology::detail
