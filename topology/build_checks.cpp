// Builder phases that check the input graph: nodes (ids, models, cpus and NUMA nodes), links
// (ends, kinds, PCIe/NVLink parameters, numbers) and that every socket reaches the others.
#include <algorithm>
#include <cmath>
#include <deque>

#include "builder.hpp"

namespace sparsp::topology::detail {

namespace {

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

std::optional<Error> Builder::check_nodes() {
  auto& nodes = t_.nodes;
  if (nodes.empty()) return input_error(file_, node_places_.empty() ? "/nodes" : "", "no nodes");
  std::vector<int> cpus;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (auto e = check_node(i, cpus)) return e;
  }
  if (t_.gpu_nodes.empty())
    return input_error(file_, node_places_.empty() ? "/nodes" : "", "no gpu nodes");
  if (cpus.empty()) return input_error(file_, node_places_.empty() ? "/nodes" : "", "no cpu nodes");
  if (auto e = assign_numa_nodes(cpus)) return e;
  if (auto e = check_memory_numa_ids(cpus)) return e;
  t_.gpu_of_node.assign(nodes.size(), -1);
  for (size_t g = 0; g < t_.gpu_nodes.size(); ++g)
    t_.gpu_of_node[static_cast<size_t>(t_.gpu_nodes[g])] = static_cast<int>(g);
  return std::nullopt;
}

// Node i's id (indexed here) and model; gpus join gpu_nodes, cpus join `cpus`.
std::optional<Error> Builder::check_node(size_t i, std::vector<int>& cpus) {
  const Node& n = t_.nodes[i];
  if (n.id.empty()) return node_error(i, "id", "empty node id");
  auto [it, fresh] = t_.index.emplace(n.id, static_cast<int>(i));
  if (!fresh) {
    return node_error(i, "id",
                      "duplicate node id '" + n.id + "' (first at " +
                          node_place(static_cast<size_t>(it->second)) + ")");
  }
  if (n.kind == NodeKind::gpu) {
    if (!n.gpu) return node_error(i, "model", "gpu '" + n.id + "' has no model");
    t_.gpu_nodes.push_back(static_cast<int>(i));
  } else if (n.gpu) {
    return node_error(i, "model", "only gpu nodes have a model");
  }
  if (n.kind == NodeKind::cpu) {
    cpus.push_back(static_cast<int>(i));
    return check_cpu_node(i);
  }
  return std::nullopt;
}

std::optional<Error> Builder::check_cpu_node(size_t i) const {
  const Node& n = t_.nodes[i];
  if (!std::isfinite(n.host_memory_Bps) || n.host_memory_Bps < 0) {
    return node_error(i, "host_memory_Bps", "host memory bandwidth must be >= 0 and finite");
  }
  if (!std::isfinite(n.root_complex_Bps) || n.root_complex_Bps < 0) {
    return node_error(i, "root_complex_Bps", "root complex bandwidth must be >= 0 and finite");
  }
  if (!finite_positive(n.peer_coefficient)) {
    return node_error(i, "peer_coefficient", "peer coefficient must be > 0 and finite");
  }
  return std::nullopt;
}

// NUMA nodes: default to the cpu order, must be 0..C-1 without repeats.
std::optional<Error> Builder::assign_numa_nodes(const std::vector<int>& cpus) {
  t_.cpu_of_numa.assign(cpus.size(), -1);
  for (size_t c = 0; c < cpus.size(); ++c) {
    Node& n = t_.nodes[static_cast<size_t>(cpus[c])];
    if (n.numa_node < 0) n.numa_node = static_cast<int>(c);
    if (n.numa_node >= static_cast<int>(cpus.size())) {
      return node_error(static_cast<size_t>(cpus[c]), "numa_node",
                        "NUMA node " + std::to_string(n.numa_node) +
                            " out of range: " + std::to_string(cpus.size()) +
                            " cpus must use NUMA nodes 0.." + std::to_string(cpus.size() - 1));
    }
    if (t_.cpu_of_numa[static_cast<size_t>(n.numa_node)] >= 0) {
      return node_error(static_cast<size_t>(cpus[c]), "numa_node",
                        "NUMA node " + std::to_string(n.numa_node) + " used by two cpus");
    }
    t_.cpu_of_numa[static_cast<size_t>(n.numa_node)] = cpus[c];
  }
  return std::nullopt;
}

// A GPU's own memory NUMA node (nvidia-smi's GPU NUMA ID) is a NUMA node of its own: no other
// GPU and no cpu (by its OS number) has it.
std::optional<Error> Builder::check_memory_numa_ids(const std::vector<int>& cpus) const {
  const auto& nodes = t_.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.memory_numa_id < 0) continue;
    if (n.kind != NodeKind::gpu)
      return node_error(i, "memory_numa_id", "only gpu nodes have a memory_numa_id");
    for (size_t j = 0; j < i; ++j) {
      if (nodes[j].kind == NodeKind::gpu && nodes[j].memory_numa_id == n.memory_numa_id)
        return node_error(i, "memory_numa_id",
                          "NUMA node " + std::to_string(n.memory_numa_id) +
                              " is the memory of two GPUs ('" + nodes[j].id + "' and '" + n.id +
                              "')");
    }
    for (int c : cpus) {
      const Node& cpu = nodes[static_cast<size_t>(c)];
      const int os = cpu.numa_id >= 0 ? cpu.numa_id : cpu.numa_node;
      if (os == n.memory_numa_id)
        return node_error(i, "memory_numa_id",
                          "NUMA node " + std::to_string(os) + " is both cpu '" + cpu.id +
                              "' and the memory of gpu '" + n.id + "'");
    }
  }
  return std::nullopt;
}

std::optional<Error> Builder::check_links() {
  std::set<std::pair<int, int>> seen;
  t_.up_link.assign(t_.nodes.size(), -1);
  t_.parent.assign(t_.nodes.size(), -1);
  for (size_t i = 0; i < t_.links.size(); ++i) {
    if (auto e = check_link(i, seen)) return e;
  }
  return std::nullopt;
}

// Link i: its ends exist and differ, no other link joins them (`seen`), then its kind's rules
// and its numbers.
std::optional<Error> Builder::check_link(size_t i, std::set<std::pair<int, int>>& seen) {
  const Link& l = t_.links[i];
  auto ia = t_.index.find(l.a);
  if (ia == t_.index.end()) return link_error(i, "a", "link to missing node '" + l.a + "'");
  auto ib = t_.index.find(l.b);
  if (ib == t_.index.end()) return link_error(i, "b", "link to missing node '" + l.b + "'");
  const int a = ia->second, b = ib->second;
  if (a == b) return link_error(i, "b", "link from '" + l.a + "' to itself");
  if (!seen.emplace(std::min(a, b), std::max(a, b)).second) {
    return link_error(i, "", "duplicate link between '" + l.a + "' and '" + l.b + "'");
  }
  std::optional<Error> e;
  switch (l.kind) {
    case LinkKind::pcie:
      e = check_pcie_link(i, a, b);
      break;
    case LinkKind::nvlink:
      e = check_nvlink_link(i, a, b);
      break;
    case LinkKind::upi:
    case LinkKind::xgmi:
      e = check_socket_link(i, a, b);
      break;
    case LinkKind::c2c:
      e = check_c2c_link(i, a, b);
      break;
  }
  if (e) return e;
  return check_link_numbers(i);
}

// PCIe link i from upstream node a to downstream node b: gen, width, which kinds may sit on
// either side, one upstream link per node. Records the tree edge and the default capacity.
std::optional<Error> Builder::check_pcie_link(size_t i, int a, int b) {
  Link& l = t_.links[i];
  const NodeKind ka = t_.nodes[static_cast<size_t>(a)].kind,
                 kb = t_.nodes[static_cast<size_t>(b)].kind;
  if (l.pcie_gen < 1 || l.pcie_gen > 6) {
    return link_error(i, "gen", "PCIe gen must be 1..6, got " + std::to_string(l.pcie_gen));
  }
  const int w = l.pcie_width;
  if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16) {
    return link_error(i, "width", "PCIe width must be 1, 2, 4, 8 or 16, got " + std::to_string(w));
  }
  if (ka == NodeKind::gpu || ka == NodeKind::nic) {
    return link_error(
        i, "a", "'" + l.a + "' (" + to_string(ka) + ") cannot be the upstream side of a PCIe link");
  }
  if (kb == NodeKind::cpu) {
    return link_error(i, "b", "cpu '" + l.b + "' cannot be the downstream side of a PCIe link");
  }
  if (ka == NodeKind::nvswitch || kb == NodeKind::nvswitch) {
    return link_error(i, "kind", "nvswitch nodes connect by nvlink only");
  }
  if (auto e = claim_upstream(i, a, b, "an upstream PCIe link")) return e;
  if (l.capacity_Bps == 0 && !l.capacity_measured)
    l.capacity_Bps = pcie_usable_Bps(l.pcie_gen, l.pcie_width);
  return std::nullopt;
}

// Makes tree link i (a upstream of b) b's one upstream link; an error if b has one already.
std::optional<Error> Builder::claim_upstream(size_t i, int a, int b, const std::string& what) {
  if (t_.up_link[static_cast<size_t>(b)] >= 0) {
    return link_error(i, "b",
                      "'" + t_.links[i].b + "' already has " + what + " (" +
                          link_place(static_cast<size_t>(t_.up_link[static_cast<size_t>(b)])) +
                          ")");
  }
  t_.up_link[static_cast<size_t>(b)] = static_cast<int>(i);
  t_.parent[static_cast<size_t>(b)] = a;
  return std::nullopt;
}

// NVLink-C2C link i: from a cpu (upstream) to a gpu, the gpu's one upstream link, with a given
// capacity. Records the tree edge as a PCIe link would.
std::optional<Error> Builder::check_c2c_link(size_t i, int a, int b) {
  const Link& l = t_.links[i];
  if (t_.nodes[static_cast<size_t>(a)].kind != NodeKind::cpu ||
      t_.nodes[static_cast<size_t>(b)].kind != NodeKind::gpu) {
    return link_error(i, "kind", "c2c joins a cpu (a) to a gpu (b)");
  }
  if (l.capacity_Bps == 0 && !l.capacity_measured)
    return link_error(i, "capacity_Bps", "c2c link needs a capacity");
  return claim_upstream(i, a, b, "an upstream link");
}

// NVLink i between a and b: two gpus or a gpu and an nvswitch, its count and per-link
// bandwidth (defaulted here), and the default capacity.
std::optional<Error> Builder::check_nvlink_link(size_t i, int a, int b) {
  Link& l = t_.links[i];
  const NodeKind ka = t_.nodes[static_cast<size_t>(a)].kind,
                 kb = t_.nodes[static_cast<size_t>(b)].kind;
  const bool a_ok = ka == NodeKind::gpu || ka == NodeKind::nvswitch;
  const bool b_ok = kb == NodeKind::gpu || kb == NodeKind::nvswitch;
  if (!a_ok || !b_ok || (ka == NodeKind::nvswitch && kb == NodeKind::nvswitch)) {
    return link_error(i, "kind", "nvlink joins two gpus or a gpu and an nvswitch");
  }
  if (l.nvlink_count < 1 || l.nvlink_count > 64) {
    return link_error(i, "count",
                      "NVLink count must be 1..64, got " + std::to_string(l.nvlink_count));
  }
  if (l.nvlink_per_link_Bps == 0) l.nvlink_per_link_Bps = nvlink_default_per_link_Bps();
  if (!finite_positive(l.nvlink_per_link_Bps)) {
    return link_error(i, "per_link_Bps", "NVLink per-link bandwidth must be > 0 and finite");
  }
  if (l.capacity_Bps == 0 && !l.capacity_measured)
    l.capacity_Bps = nvlink_usable_Bps(l.nvlink_count, l.nvlink_per_link_Bps);
  return std::nullopt;
}

// Inter-socket (upi/xgmi) link i: joins two cpus and states its capacity.
std::optional<Error> Builder::check_socket_link(size_t i, int a, int b) const {
  const Link& l = t_.links[i];
  if (t_.nodes[static_cast<size_t>(a)].kind != NodeKind::cpu ||
      t_.nodes[static_cast<size_t>(b)].kind != NodeKind::cpu) {
    return link_error(i, "kind", to_string(l.kind) + " joins two cpus");
  }
  if (l.capacity_Bps == 0 && !l.capacity_measured) {
    return link_error(i, "capacity_Bps", to_string(l.kind) + " link needs a capacity");
  }
  return std::nullopt;
}

// Capacity, latency and duplex factor of link i (after its kind set the defaults).
std::optional<Error> Builder::check_link_numbers(size_t i) const {
  const Link& l = t_.links[i];
  if (!finite_positive(l.capacity_Bps)) {
    return link_error(i, "capacity_Bps", "bandwidth must be > 0 and finite");
  }
  if (!std::isfinite(l.latency_s) || l.latency_s < 0) {
    return link_error(i, "latency_s", "latency must be >= 0 and finite");
  }
  if (!std::isfinite(l.duplex_factor) || l.duplex_factor < 0.5 || l.duplex_factor > 1) {
    return link_error(i, "duplex_factor", "duplex factor must be in [0.5, 1]");
  }
  return std::nullopt;
}

// Every cpu reaches cpu 0 (NUMA node 0) over inter-socket links.
std::optional<Error> Builder::check_sockets() {
  const size_t c = t_.cpu_of_numa.size();
  if (c <= 1) return std::nullopt;
  std::vector<bool> reached(t_.nodes.size(), false);
  std::deque<int> q{t_.cpu_of_numa[0]};
  reached[static_cast<size_t>(t_.cpu_of_numa[0])] = true;
  while (!q.empty()) {
    const int u = q.front();
    q.pop_front();
    for (const Link& l : t_.links) {
      if (l.kind != LinkKind::upi && l.kind != LinkKind::xgmi) continue;
      const int a = t_.index.at(l.a), b = t_.index.at(l.b);
      const int w = a == u ? b : (b == u ? a : -1);
      if (w >= 0 && !reached[static_cast<size_t>(w)]) {
        reached[static_cast<size_t>(w)] = true;
        q.push_back(w);
      }
    }
  }
  for (size_t k = 0; k < c; ++k) {
    const int cpu = t_.cpu_of_numa[k];
    if (!reached[static_cast<size_t>(cpu)]) {
      return node_error(static_cast<size_t>(cpu), "",
                        "cpu '" + t_.nodes[static_cast<size_t>(cpu)].id +
                            "' has no inter-socket (upi/xgmi) path to cpu '" +
                            t_.nodes[static_cast<size_t>(t_.cpu_of_numa[0])].id + "'");
    }
  }
  return std::nullopt;
}

}  // namespace sparsp::topology::detail
