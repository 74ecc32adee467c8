// Builder phase that lists the shared capacities: both directions (and the duplex sum) of every
// link, each cpu's root complex and each NUMA node's host memory.
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
  t_.res_host_memory.assign(t_.cpu_of_numa.size(), -1);
  for (size_t k = 0; k < t_.cpu_of_numa.size(); ++k) {
    const Node& n = t_.nodes[static_cast<size_t>(t_.cpu_of_numa[k])];
    if (n.host_memory_Bps > 0) {
      t_.res_host_memory[k] = add_resource("host" + std::to_string(k) + ".mem",
                                           ResourceKind::host_memory, n.host_memory_Bps);
    }
  }
}

}  // namespace sparsp::topology::detail
