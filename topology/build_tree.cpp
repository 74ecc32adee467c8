// Builder phase that walks the PCIe tree: the cpu at the top of every node's tree, cycles, nodes
// with no path to a cpu and nvswitches with no links.
#include "builder.hpp"

namespace sparsp::topology::detail {

std::optional<Error> Builder::build_tree() {
  if (auto e = assign_node_cpus()) return e;
  return check_tree_reach();
}

// node_cpu: walks up from every node (but nvswitches) to the top of its tree; a cycle is an
// error, a top that is not a cpu leaves -1.
std::optional<Error> Builder::assign_node_cpus() {
  const size_t n = t_.nodes.size();
  t_.node_cpu.assign(n, -1);
  std::vector<int> state(n, 0);  // 0 new, 1 on the current walk, 2 done
  for (size_t start = 0; start < n; ++start) {
    const NodeKind k = t_.nodes[start].kind;
    if (k == NodeKind::nvswitch) continue;
    std::vector<int> walk;
    int v = static_cast<int>(start);
    while (v >= 0 && state[static_cast<size_t>(v)] == 0) {
      state[static_cast<size_t>(v)] = 1;
      walk.push_back(v);
      v = t_.parent[static_cast<size_t>(v)];
    }
    int top_cpu = -1;
    if (v >= 0 && state[static_cast<size_t>(v)] == 1) {
      // Cycle: v is on the current walk. Name it from v around.
      std::string cycle = t_.nodes[static_cast<size_t>(v)].id;
      for (int u = t_.parent[static_cast<size_t>(v)]; u != v;
           u = t_.parent[static_cast<size_t>(u)]) {
        cycle = t_.nodes[static_cast<size_t>(u)].id + " -> " + cycle;
      }
      cycle = t_.nodes[static_cast<size_t>(v)].id + " -> " + cycle;
      return link_error(static_cast<size_t>(t_.up_link[static_cast<size_t>(v)]), "",
                        "cycle in the PCIe tree: " + cycle);
    }
    if (v >= 0) {
      top_cpu = t_.node_cpu[static_cast<size_t>(v)];
    } else {
      const int top = walk.back();
      if (t_.nodes[static_cast<size_t>(top)].kind == NodeKind::cpu) top_cpu = top;
    }
    for (int u : walk) {
      state[static_cast<size_t>(u)] = 2;
      t_.node_cpu[static_cast<size_t>(u)] = top_cpu;
    }
  }
  return std::nullopt;
}

// Every node but nvswitches has a PCIe path to a cpu; every nvswitch has a link.
std::optional<Error> Builder::check_tree_reach() const {
  const size_t n = t_.nodes.size();
  for (size_t i = 0; i < n; ++i) {
    const Node& node = t_.nodes[i];
    if (node.kind == NodeKind::nvswitch || t_.node_cpu[i] >= 0) continue;
    return node_error(i, "", to_string(node.kind) + " '" + node.id + "' has no PCIe path to a cpu");
  }
  for (size_t i = 0; i < n; ++i) {
    if (t_.nodes[i].kind != NodeKind::nvswitch) continue;
    bool any = false;
    for (const Link& l : t_.links) any = any || l.a == t_.nodes[i].id || l.b == t_.nodes[i].id;
    if (!any) return node_error(i, "", "nvswitch '" + t_.nodes[i].id + "' has no links");
  }
  return std::nullopt;
}

}  // namespace sparsp::topology::detail
