// Topology: validation of the graph, path classes, P2P rules, resources and routes.
//
// Routing model (see topology/README.md, "Routes and resources"):
//  - NVLink pairs go over their NVLink (directly, or through the NVSwitch fabric).
//  - PCIe peer traffic goes up the tree to the lowest common switch / host bridge / CPU and down.
//    A switch with acs_redirect turns nothing: its peer traffic climbs to the root port above
//    (or the CPU) and comes back down the same uplink (both directions of it are used).
//  - Peer traffic turning at a root port or CPU uses that CPU's root complex resource with the
//    CPU's peer_coefficient; traffic crossing sockets also crosses the inter-socket link(s) and
//    uses both root complexes.
//  - GPU <-> host<k> goes up to the GPU's CPU, across sockets when k is another NUMA node, and
//    uses host<k>'s memory resource.
//  - Host-staged GPU i -> GPU j: leg 1 gpu i -> host<numa(i)>, leg 2 host<numa(i)> -> gpu j.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <set>

#include "sparsp/units.hpp"
#include "topology_impl.hpp"

namespace sparsp::topology {

std::string to_string(PathClass c, int nvlink_count) {
  switch (c) {
    case PathClass::self:
      return "X";
    case PathClass::nvlink:
      return "NV" + std::to_string(nvlink_count);
    case PathClass::pix:
      return "PIX";
    case PathClass::pxb:
      return "PXB";
    case PathClass::phb:
      return "PHB";
    case PathClass::node:
      return "NODE";
    case PathClass::sys:
      return "SYS";
  }
  return "?";
}

std::string to_string(NodeKind k) {
  switch (k) {
    case NodeKind::gpu:
      return "gpu";
    case NodeKind::pcie_switch:
      return "pcie_switch";
    case NodeKind::root_port:
      return "root_port";
    case NodeKind::cpu:
      return "cpu";
    case NodeKind::nvswitch:
      return "nvswitch";
    case NodeKind::nic:
      return "nic";
  }
  return "?";
}

std::string to_string(LinkKind k) {
  switch (k) {
    case LinkKind::pcie:
      return "pcie";
    case LinkKind::nvlink:
      return "nvlink";
    case LinkKind::upi:
      return "upi";
    case LinkKind::xgmi:
      return "xgmi";
  }
  return "?";
}

Topology::Topology() : impl_(std::make_unique<Impl>()) {}
Topology::~Topology() = default;
Topology::Topology(const Topology& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Topology& Topology::operator=(const Topology& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

const std::string& Topology::name() const { return impl_->name; }
const std::string& Topology::source() const { return impl_->source; }
const std::vector<Node>& Topology::nodes() const { return impl_->nodes; }
const std::vector<Link>& Topology::links() const { return impl_->links; }
const Topology::Options& Topology::options() const { return impl_->options; }
bool Topology::p2p_enabled() const { return impl_->options.p2p; }
bool Topology::p2p_cross_socket() const { return impl_->options.p2p_cross_socket; }
int Topology::num_gpus() const { return static_cast<int>(impl_->gpu_nodes.size()); }
int Topology::num_sockets() const { return static_cast<int>(impl_->cpu_of_numa.size()); }
int Topology::num_switches() const {
  return static_cast<int>(
      std::count_if(impl_->nodes.begin(), impl_->nodes.end(),
                    [](const Node& n) { return n.kind == NodeKind::pcie_switch; }));
}

std::vector<std::string> Topology::gpu_endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < num_gpus(); ++i) out.push_back("gpu" + std::to_string(i));
  return out;
}

std::vector<std::string> Topology::host_endpoints() const {
  std::vector<std::string> out;
  for (int k = 0; k < num_sockets(); ++k) out.push_back("host" + std::to_string(k));
  return out;
}

const GpuSpec& Topology::gpu(int index) const { return *impl_->nodes[impl_->gpu_nodes[index]].gpu; }
int Topology::gpu_node(int index) const { return impl_->gpu_nodes[index]; }

int Topology::gpu_numa_node(int index) const {
  return impl_->nodes[impl_->node_cpu[impl_->gpu_nodes[index]]].numa_node;
}

bool Topology::p2p_allowed(int i, int j) const { return impl_->p2p[i][j]; }
PathClass Topology::path_class(int i, int j) const { return impl_->path_class[i][j]; }
int Topology::nvlink_count(int i, int j) const { return impl_->nvlinks[i][j]; }

int Topology::node_index(std::string_view id) const {
  auto it = impl_->index.find(id);
  return it == impl_->index.end() ? -1 : it->second;
}

std::vector<std::string> Topology::ancestors(int index) const {
  std::vector<std::string> out;
  for (int n = impl_->parent[impl_->gpu_nodes[index]]; n >= 0; n = impl_->parent[n]) {
    out.push_back(impl_->nodes[n].id);
  }
  return out;
}

const std::vector<Resource>& Topology::resources() const { return impl_->resources; }

namespace {

// Parses "<prefix><digits>" with no leading zeros (except "0"); -1 otherwise.
int parse_indexed(std::string_view s, std::string_view prefix) {
  if (s.size() <= prefix.size() || s.substr(0, prefix.size()) != prefix) return -1;
  s.remove_prefix(prefix.size());
  if (s.size() > 6 || (s.size() > 1 && s[0] == '0')) return -1;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

int mode_index(RouteMode m) {
  switch (m) {
    case RouteMode::automatic:
      return 0;
    case RouteMode::p2p:
      return 1;
    case RouteMode::host_staged:
      return 2;
  }
  return 0;
}

}  // namespace

int Topology::endpoint_index(std::string_view endpoint) const {
  if (int g = parse_indexed(endpoint, "gpu"); g >= 0) return g < num_gpus() ? g : -1;
  if (int h = parse_indexed(endpoint, "host"); h >= 0)
    return h < num_sockets() ? num_gpus() + h : -1;
  return -1;
}

const Result<Route>& Topology::route_ref(int src, int dst, RouteMode mode) const {
  const int e = impl_->num_endpoints();
  return impl_->routes[static_cast<size_t>((mode_index(mode) * e + src) * e + dst)];
}

Result<Route> Topology::route(std::string_view src, std::string_view dst, RouteMode mode) const {
  const int s = endpoint_index(src);
  const int d = endpoint_index(dst);
  const std::string where = "topology '" + impl_->name + "'";
  if (s < 0) {
    return Error{where + ": unknown endpoint '" + std::string(src) + "' (expected gpu0..gpu" +
                 std::to_string(num_gpus() - 1) + " or host0..host" +
                 std::to_string(num_sockets() - 1) + ")"};
  }
  if (d < 0) {
    return Error{where + ": unknown endpoint '" + std::string(dst) + "' (expected gpu0..gpu" +
                 std::to_string(num_gpus() - 1) + " or host0..host" +
                 std::to_string(num_sockets() - 1) + ")"};
  }
  return route_ref(s, d, mode);
}

// ---------------------------------------------------------------------------------------------
// Building and validation
// ---------------------------------------------------------------------------------------------
namespace {

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

class Builder {
 public:
  Builder(Topology::Impl& t, const std::string& file, const std::vector<std::string>& node_places,
          const std::vector<std::string>& link_places)
      : t_(t), file_(file), node_places_(node_places), link_places_(link_places) {}

  std::optional<Error> run() {
    if (auto e = check_nodes()) return e;
    if (auto e = check_links()) return e;
    if (auto e = build_tree()) return e;
    if (auto e = check_sockets()) return e;
    build_resources();
    build_gpu_matrices();
    build_routes();
    return std::nullopt;
  }

 private:
  std::string node_place(size_t i) const {
    return i < node_places_.size() ? node_places_[i] : "/nodes/" + std::to_string(i);
  }
  std::string link_place(size_t i) const {
    return i < link_places_.size() ? link_places_[i] : "/links/" + std::to_string(i);
  }
  Error node_error(size_t i, const std::string& field, const std::string& what) const {
    return input_error(file_, field.empty() ? node_place(i) : field_place(node_place(i), field),
                       what);
  }
  Error link_error(size_t i, const std::string& field, const std::string& what) const {
    return input_error(file_, field.empty() ? link_place(i) : field_place(link_place(i), field),
                       what);
  }

  std::optional<Error> check_nodes() {
    auto& nodes = t_.nodes;
    if (nodes.empty()) return input_error(file_, node_places_.empty() ? "/nodes" : "", "no nodes");
    std::vector<int> cpus;
    for (size_t i = 0; i < nodes.size(); ++i) {
      Node& n = nodes[i];
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
        if (!std::isfinite(n.host_memory_Bps) || n.host_memory_Bps < 0) {
          return node_error(i, "host_memory_Bps", "host memory bandwidth must be >= 0 and finite");
        }
        if (!std::isfinite(n.root_complex_Bps) || n.root_complex_Bps < 0) {
          return node_error(i, "root_complex_Bps",
                            "root complex bandwidth must be >= 0 and finite");
        }
        if (!finite_positive(n.peer_coefficient)) {
          return node_error(i, "peer_coefficient", "peer coefficient must be > 0 and finite");
        }
      }
    }
    if (t_.gpu_nodes.empty())
      return input_error(file_, node_places_.empty() ? "/nodes" : "", "no gpu nodes");
    if (cpus.empty())
      return input_error(file_, node_places_.empty() ? "/nodes" : "", "no cpu nodes");
    // NUMA nodes: default to the cpu order, must be 0..C-1 without repeats.
    t_.cpu_of_numa.assign(cpus.size(), -1);
    for (size_t c = 0; c < cpus.size(); ++c) {
      Node& n = nodes[static_cast<size_t>(cpus[c])];
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
    t_.gpu_of_node.assign(nodes.size(), -1);
    for (size_t g = 0; g < t_.gpu_nodes.size(); ++g)
      t_.gpu_of_node[static_cast<size_t>(t_.gpu_nodes[g])] = static_cast<int>(g);
    return std::nullopt;
  }

  std::optional<Error> check_links() {
    auto& links = t_.links;
    std::set<std::pair<int, int>> seen;
    t_.up_link.assign(t_.nodes.size(), -1);
    t_.parent.assign(t_.nodes.size(), -1);
    for (size_t i = 0; i < links.size(); ++i) {
      Link& l = links[i];
      auto ia = t_.index.find(l.a);
      if (ia == t_.index.end()) return link_error(i, "a", "link to missing node '" + l.a + "'");
      auto ib = t_.index.find(l.b);
      if (ib == t_.index.end()) return link_error(i, "b", "link to missing node '" + l.b + "'");
      const int a = ia->second, b = ib->second;
      if (a == b) return link_error(i, "b", "link from '" + l.a + "' to itself");
      if (!seen.emplace(std::min(a, b), std::max(a, b)).second) {
        return link_error(i, "", "duplicate link between '" + l.a + "' and '" + l.b + "'");
      }
      const NodeKind ka = t_.nodes[static_cast<size_t>(a)].kind,
                     kb = t_.nodes[static_cast<size_t>(b)].kind;
      switch (l.kind) {
        case LinkKind::pcie: {
          if (l.pcie_gen < 1 || l.pcie_gen > 6) {
            return link_error(i, "gen", "PCIe gen must be 1..6, got " + std::to_string(l.pcie_gen));
          }
          const int w = l.pcie_width;
          if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16) {
            return link_error(i, "width",
                              "PCIe width must be 1, 2, 4, 8 or 16, got " + std::to_string(w));
          }
          if (ka == NodeKind::gpu || ka == NodeKind::nic) {
            return link_error(
                i, "a",
                "'" + l.a + "' (" + to_string(ka) + ") cannot be the upstream side of a PCIe link");
          }
          if (kb == NodeKind::cpu) {
            return link_error(i, "b",
                              "cpu '" + l.b + "' cannot be the downstream side of a PCIe link");
          }
          if (ka == NodeKind::nvswitch || kb == NodeKind::nvswitch) {
            return link_error(i, "kind", "nvswitch nodes connect by nvlink only");
          }
          if (t_.up_link[static_cast<size_t>(b)] >= 0) {
            return link_error(
                i, "b",
                "'" + l.b + "' already has an upstream PCIe link (" +
                    link_place(static_cast<size_t>(t_.up_link[static_cast<size_t>(b)])) + ")");
          }
          t_.up_link[static_cast<size_t>(b)] = static_cast<int>(i);
          t_.parent[static_cast<size_t>(b)] = a;
          if (l.capacity_Bps == 0 && !l.capacity_measured)
            l.capacity_Bps = pcie_usable_Bps(l.pcie_gen, l.pcie_width);
          break;
        }
        case LinkKind::nvlink: {
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
            return link_error(i, "per_link_Bps",
                              "NVLink per-link bandwidth must be > 0 and finite");
          }
          if (l.capacity_Bps == 0 && !l.capacity_measured)
            l.capacity_Bps = nvlink_usable_Bps(l.nvlink_count, l.nvlink_per_link_Bps);
          break;
        }
        case LinkKind::upi:
        case LinkKind::xgmi:
          if (ka != NodeKind::cpu || kb != NodeKind::cpu) {
            return link_error(i, "kind", to_string(l.kind) + " joins two cpus");
          }
          if (l.capacity_Bps == 0 && !l.capacity_measured) {
            return link_error(i, "capacity_Bps", to_string(l.kind) + " link needs a capacity");
          }
          break;
      }
      if (!finite_positive(l.capacity_Bps)) {
        return link_error(i, "capacity_Bps", "bandwidth must be > 0 and finite");
      }
      if (!std::isfinite(l.latency_s) || l.latency_s < 0) {
        return link_error(i, "latency_s", "latency must be >= 0 and finite");
      }
      if (!std::isfinite(l.duplex_factor) || l.duplex_factor < 0.5 || l.duplex_factor > 1) {
        return link_error(i, "duplex_factor", "duplex factor must be in [0.5, 1]");
      }
    }
    return std::nullopt;
  }

  std::optional<Error> build_tree() {
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
    for (size_t i = 0; i < n; ++i) {
      const Node& node = t_.nodes[i];
      if (node.kind == NodeKind::nvswitch || t_.node_cpu[i] >= 0) continue;
      return node_error(i, "",
                        to_string(node.kind) + " '" + node.id + "' has no PCIe path to a cpu");
    }
    for (size_t i = 0; i < n; ++i) {
      if (t_.nodes[i].kind != NodeKind::nvswitch) continue;
      bool any = false;
      for (const Link& l : t_.links) any = any || l.a == t_.nodes[i].id || l.b == t_.nodes[i].id;
      if (!any) return node_error(i, "", "nvswitch '" + t_.nodes[i].id + "' has no links");
    }
    return std::nullopt;
  }

  std::optional<Error> check_sockets() {
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

  int add_resource(std::string name, ResourceKind kind, double capacity) {
    t_.resources.push_back(Resource{std::move(name), kind, capacity});
    return static_cast<int>(t_.resources.size()) - 1;
  }

  void build_resources() {
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

  // Nodes from v up to its cpu, v first.
  std::vector<int> chain(int v) const {
    std::vector<int> out;
    for (; v >= 0; v = t_.parent[static_cast<size_t>(v)]) out.push_back(v);
    return out;
  }

  PathClass pcie_class(int gi, int gj) const {
    const int ni = t_.gpu_nodes[static_cast<size_t>(gi)],
              nj = t_.gpu_nodes[static_cast<size_t>(gj)];
    if (t_.node_cpu[static_cast<size_t>(ni)] != t_.node_cpu[static_cast<size_t>(nj)])
      return PathClass::sys;
    const auto ci = chain(ni), cj = chain(nj);
    int lca = -1;
    for (int v : ci) {
      if (std::find(cj.begin(), cj.end(), v) != cj.end()) {
        lca = v;
        break;
      }
    }
    const NodeKind k = t_.nodes[static_cast<size_t>(lca)].kind;
    if (k == NodeKind::cpu) return PathClass::node;
    if (k == NodeKind::root_port) return PathClass::phb;
    // Below a switch: PIX when both hang directly off it (one bridge), PXB otherwise.
    const bool direct =
        t_.parent[static_cast<size_t>(ni)] == lca && t_.parent[static_cast<size_t>(nj)] == lca;
    return direct ? PathClass::pix : PathClass::pxb;
  }

  void build_gpu_matrices() {
    const size_t g = t_.gpu_nodes.size();
    t_.nvlinks.assign(g, std::vector<int>(g, 0));
    std::map<int, std::map<int, int>> to_switch;  // nvswitch node -> gpu -> count
    for (const Link& l : t_.links) {
      if (l.kind != LinkKind::nvlink) continue;
      const int a = t_.index.at(l.a), b = t_.index.at(l.b);
      const int ga = t_.gpu_of_node[static_cast<size_t>(a)],
                gb = t_.gpu_of_node[static_cast<size_t>(b)];
      if (ga >= 0 && gb >= 0) {
        t_.nvlinks[static_cast<size_t>(ga)][static_cast<size_t>(gb)] += l.nvlink_count;
        t_.nvlinks[static_cast<size_t>(gb)][static_cast<size_t>(ga)] += l.nvlink_count;
      } else if (ga >= 0) {
        to_switch[b][ga] += l.nvlink_count;
      } else {
        to_switch[a][gb] += l.nvlink_count;
      }
    }
    for (const auto& [sw, gpus] : to_switch) {
      for (const auto& [x, cx] : gpus) {
        for (const auto& [y, cy] : gpus) {
          if (x != y)
            t_.nvlinks[static_cast<size_t>(x)][static_cast<size_t>(y)] += std::min(cx, cy);
        }
      }
    }
    t_.path_class.assign(g, std::vector<PathClass>(g, PathClass::self));
    t_.p2p.assign(g, std::vector<bool>(g, false));
    for (size_t i = 0; i < g; ++i) {
      for (size_t j = 0; j < g; ++j) {
        if (i == j) continue;
        const int ii = static_cast<int>(i), jj = static_cast<int>(j);
        t_.path_class[i][j] = t_.nvlinks[i][j] > 0 ? PathClass::nvlink : pcie_class(ii, jj);
        bool ok;
        if (t_.nvlinks[i][j] > 0) {
          ok = true;  // NVLink peers always have peer access
        } else {
          const GpuSpec& si = *t_.nodes[static_cast<size_t>(t_.gpu_nodes[i])].gpu;
          const GpuSpec& sj = *t_.nodes[static_cast<size_t>(t_.gpu_nodes[j])].gpu;
          ok = t_.options.p2p && si.p2p_capable && sj.p2p_capable &&
               (t_.options.p2p_cross_socket || pcie_class(ii, jj) != PathClass::sys);
        }
        t_.p2p[i][j] = ok;
      }
    }
    for (const auto& [pair, allowed] : t_.options.p2p_overrides) {
      const auto [i, j] = pair;
      t_.p2p[static_cast<size_t>(i)][static_cast<size_t>(j)] = allowed;
      t_.p2p[static_cast<size_t>(j)][static_cast<size_t>(i)] = allowed;
    }
  }

  // ---- routes ----
  struct LegBuilder {
    std::vector<std::string> hops;
    std::map<int, double> uses;
    double latency_s = 0;
  };

  void use(LegBuilder& leg, int resource, double coefficient) const {
    if (resource >= 0) leg.uses[resource] += coefficient;
  }

  // Traverse link `li` from node `from` to the other end.
  void traverse(LegBuilder& leg, int li, int from) const {
    const Link& l = t_.links[static_cast<size_t>(li)];
    const bool forward = end_a_[static_cast<size_t>(li)] == from;
    use(leg,
        forward ? t_.res_forward[static_cast<size_t>(li)]
                : t_.res_backward[static_cast<size_t>(li)],
        1.0);
    use(leg, t_.res_duplex[static_cast<size_t>(li)], 1.0);
    leg.latency_s += l.latency_s;
    leg.hops.push_back(forward ? l.b : l.a);
  }

  // Shortest inter-socket path of links between two cpus (BFS, links in file order), cached.
  const std::vector<int>& socket_path(int from, int to) const {
    auto cached = socket_paths_.find({from, to});
    if (cached != socket_paths_.end()) return cached->second;
    std::map<int, int> via;  // node -> link used to reach it
    std::deque<int> q{from};
    via[from] = -1;
    while (!q.empty()) {
      const int u = q.front();
      q.pop_front();
      if (u == to) break;
      for (int li : socket_links_) {
        const int a = end_a_[static_cast<size_t>(li)], b = end_b_[static_cast<size_t>(li)];
        const int w = a == u ? b : (b == u ? a : -1);
        if (w >= 0 && !via.count(w)) {
          via[w] = li;
          q.push_back(w);
        }
      }
    }
    std::vector<int> out;
    for (int v = to; v != from;) {
      const int li = via.at(v);
      out.push_back(li);
      v = end_a_[static_cast<size_t>(li)] == v ? end_b_[static_cast<size_t>(li)]
                                               : end_a_[static_cast<size_t>(li)];
    }
    std::reverse(out.begin(), out.end());
    return socket_paths_.emplace(std::make_pair(from, to), std::move(out)).first->second;
  }

  // Walk from cpu `from` to cpu `to` over inter-socket links, charging root complexes.
  void cross_sockets(LegBuilder& leg, int from, int to, double rc_coefficient) const {
    int at = from;
    for (int li : socket_path(from, to)) {
      traverse(leg, li, at);
      at = end_a_[static_cast<size_t>(li)] == at ? end_b_[static_cast<size_t>(li)]
                                                 : end_a_[static_cast<size_t>(li)];
      use(leg, t_.res_root_complex[static_cast<size_t>(at)], rc_coefficient);
    }
  }

  RouteLeg finish(LegBuilder&& leg, std::string src, std::string dst) const {
    RouteLeg out;
    out.src = std::move(src);
    out.dst = std::move(dst);
    out.hops = std::move(leg.hops);
    for (const auto& [r, c] : leg.uses) out.uses.push_back(ResourceUse{r, c});
    out.latency_s = leg.latency_s;
    return out;
  }

  // GPU <-> host memory of NUMA node k; to_host selects the direction.
  RouteLeg host_leg(int g, int k, bool to_host) const {
    const int gn = t_.gpu_nodes[static_cast<size_t>(g)];
    const int cpu = t_.node_cpu[static_cast<size_t>(gn)];
    const int host_cpu = t_.cpu_of_numa[static_cast<size_t>(k)];
    const std::string gname = "gpu" + std::to_string(g), hname = "host" + std::to_string(k);
    LegBuilder leg;
    if (to_host) {
      leg.hops.push_back(t_.nodes[static_cast<size_t>(gn)].id);
      for (int v = gn; t_.parent[static_cast<size_t>(v)] >= 0;
           v = t_.parent[static_cast<size_t>(v)]) {
        traverse(leg, t_.up_link[static_cast<size_t>(v)], v);
      }
      use(leg, t_.res_root_complex[static_cast<size_t>(cpu)], 1.0);
      cross_sockets(leg, cpu, host_cpu, 1.0);
      use(leg, t_.res_host_memory[static_cast<size_t>(k)], 1.0);
      leg.hops.push_back(hname);
      return finish(std::move(leg), gname, hname);
    }
    leg.hops.push_back(hname);
    leg.hops.push_back(t_.nodes[static_cast<size_t>(host_cpu)].id);
    use(leg, t_.res_host_memory[static_cast<size_t>(k)], 1.0);
    use(leg, t_.res_root_complex[static_cast<size_t>(host_cpu)], 1.0);
    cross_sockets(leg, host_cpu, cpu, 1.0);
    const auto down = chain(gn);  // gpu ... cpu
    for (size_t idx = down.size() - 1; idx > 0; --idx) {
      traverse(leg, t_.up_link[static_cast<size_t>(down[idx - 1])], down[idx]);
    }
    return finish(std::move(leg), hname, gname);
  }

  RouteLeg p2p_leg(int gi, int gj) const {
    const int ni = t_.gpu_nodes[static_cast<size_t>(gi)],
              nj = t_.gpu_nodes[static_cast<size_t>(gj)];
    const std::string si = "gpu" + std::to_string(gi), sj = "gpu" + std::to_string(gj);
    LegBuilder leg;
    leg.hops.push_back(t_.nodes[static_cast<size_t>(ni)].id);
    if (t_.nvlinks[static_cast<size_t>(gi)][static_cast<size_t>(gj)] > 0) {
      // Direct NVLink if present, else spread over the NVSwitches both GPUs reach, in proportion
      // to min(links_i, links_j) per switch (NVSwitch fabrics stripe traffic over all links).
      if (auto direct = nvlink_between_.find({std::min(ni, nj), std::max(ni, nj)});
          direct != nvlink_between_.end()) {
        traverse(leg, direct->second, ni);
        return finish(std::move(leg), si, sj);
      }
      struct Via {
        int sw;
        int up;
        int down;
        int weight;
      };
      std::vector<Via> vias;
      int total = 0;
      for (const auto& [sw, gpu_links] : nvswitch_links_) {
        const int s = sw;
        auto iu = gpu_links.find(ni), id = gpu_links.find(nj);
        if (iu == gpu_links.end() || id == gpu_links.end()) continue;
        const int up = iu->second, down = id->second;
        {
          const int w = std::min(t_.links[static_cast<size_t>(up)].nvlink_count,
                                 t_.links[static_cast<size_t>(down)].nvlink_count);
          vias.push_back(Via{s, up, down, w});
          total += w;
        }
      }
      double latency = 0;
      for (const Via& v : vias) {
        const double share = static_cast<double>(v.weight) / total;
        LegBuilder part;
        traverse(part, v.up, ni);
        traverse(part, v.down, v.sw);
        for (const auto& [r, c] : part.uses) leg.uses[r] += c * share;
        if (leg.hops.size() == 1) {
          leg.hops.push_back(t_.nodes[static_cast<size_t>(v.sw)].id);
          latency = part.latency_s;
        }
      }
      leg.latency_s = latency;
      leg.hops.push_back(t_.nodes[static_cast<size_t>(nj)].id);
      return finish(std::move(leg), si, sj);
    }
    const int ci = t_.node_cpu[static_cast<size_t>(ni)], cj = t_.node_cpu[static_cast<size_t>(nj)];
    const auto up_i = chain(ni), up_j = chain(nj);
    int turn;
    if (ci == cj) {
      turn = -1;
      for (int v : up_i) {
        if (std::find(up_j.begin(), up_j.end(), v) != up_j.end()) {
          turn = v;
          break;
        }
      }
      // ACS redirect: a switch that redirects peer requests sends them to the root port above.
      if (t_.nodes[static_cast<size_t>(turn)].kind == NodeKind::pcie_switch &&
          t_.nodes[static_cast<size_t>(turn)].acs_redirect) {
        while (t_.nodes[static_cast<size_t>(turn)].kind == NodeKind::pcie_switch)
          turn = t_.parent[static_cast<size_t>(turn)];
      }
    } else {
      turn = ci;
    }
    for (int v = ni; v != turn; v = t_.parent[static_cast<size_t>(v)])
      traverse(leg, t_.up_link[static_cast<size_t>(v)], v);
    const NodeKind tk = t_.nodes[static_cast<size_t>(turn)].kind;
    const double pc = t_.nodes[static_cast<size_t>(ci)].peer_coefficient;
    if (tk == NodeKind::cpu || tk == NodeKind::root_port)
      use(leg, t_.res_root_complex[static_cast<size_t>(ci)], pc);
    int down_from = turn;
    if (ci != cj) {
      cross_sockets(leg, ci, cj, t_.nodes[static_cast<size_t>(cj)].peer_coefficient);
      down_from = cj;
    }
    // Down from down_from to nj.
    std::vector<int> down;
    for (int v : up_j) {
      if (v == down_from) break;
      down.push_back(v);
    }
    int at = down_from;
    for (auto it = down.rbegin(); it != down.rend(); ++it) {
      traverse(leg, t_.up_link[static_cast<size_t>(*it)], at);
      at = *it;
    }
    return finish(std::move(leg), si, sj);
  }

  Result<Route> make_route(int s, int d, RouteMode mode) const {
    const int g = static_cast<int>(t_.gpu_nodes.size());
    const std::string where = "topology '" + t_.name + "'";
    auto ep = [g](int e) {
      return e < g ? "gpu" + std::to_string(e) : "host" + std::to_string(e - g);
    };
    Route r;
    if (s >= g && d >= g) {
      return Error{where + ": " + ep(s) + "->" + ep(d) + ": host-to-host copies are not modelled"};
    }
    if (s == d) {
      r.path_class = PathClass::self;
      RouteLeg leg;
      leg.src = leg.dst = ep(s);
      leg.hops = {t_.nodes[static_cast<size_t>(t_.gpu_nodes[static_cast<size_t>(s)])].id};
      r.legs.push_back(std::move(leg));
      return r;
    }
    if (s >= g || d >= g) {
      const int gpu = s < g ? s : d;
      const int k = (s < g ? d : s) - g;
      r.path_class =
          t_.nodes[static_cast<size_t>(
                       t_.node_cpu[static_cast<size_t>(t_.gpu_nodes[static_cast<size_t>(gpu)])])]
                      .numa_node == k
              ? PathClass::phb
              : PathClass::sys;
      r.legs.push_back(host_leg(gpu, k, s < g));
      return r;
    }
    r.path_class = t_.path_class[static_cast<size_t>(s)][static_cast<size_t>(d)];
    const bool allowed = t_.p2p[static_cast<size_t>(s)][static_cast<size_t>(d)];
    if (mode == RouteMode::p2p && !allowed) {
      return Error{where + ": " + ep(s) + "->" + ep(d) + ": P2P is not available (" +
                   why_no_p2p(s, d) + ")"};
    }
    if (mode == RouteMode::p2p || (mode == RouteMode::automatic && allowed)) {
      r.legs.push_back(p2p_leg(s, d));
      return r;
    }
    const int k =
        t_.nodes[static_cast<size_t>(
                     t_.node_cpu[static_cast<size_t>(t_.gpu_nodes[static_cast<size_t>(s)])])]
            .numa_node;
    r.host_staged = true;
    r.staging_host = "host" + std::to_string(k);
    r.legs.push_back(host_leg(s, k, true));
    r.legs.push_back(host_leg(d, k, false));
    return r;
  }

  std::string why_no_p2p(int i, int j) const {
    for (const auto& [pair, allowed] : t_.options.p2p_overrides) {
      if (!allowed &&
          ((pair.first == i && pair.second == j) || (pair.first == j && pair.second == i))) {
        return "per-pair override";
      }
    }
    if (!t_.options.p2p) return "P2P disabled for the topology";
    for (int g : {i, j}) {
      const GpuSpec& s = *t_.nodes[static_cast<size_t>(t_.gpu_nodes[static_cast<size_t>(g)])].gpu;
      if (!s.p2p_capable) return s.model + " has no peer access under the stock driver";
    }
    return "PCIe P2P across sockets is disabled";
  }

  void build_routes() {
    end_a_.clear();
    end_b_.clear();
    for (size_t li = 0; li < t_.links.size(); ++li) {
      const Link& l = t_.links[li];
      const int a = t_.index.at(l.a), b = t_.index.at(l.b);
      end_a_.push_back(a);
      end_b_.push_back(b);
      if (l.kind == LinkKind::upi || l.kind == LinkKind::xgmi)
        socket_links_.push_back(static_cast<int>(li));
      if (l.kind != LinkKind::nvlink) continue;
      const NodeKind ka = t_.nodes[static_cast<size_t>(a)].kind;
      const NodeKind kb = t_.nodes[static_cast<size_t>(b)].kind;
      if (ka == NodeKind::gpu && kb == NodeKind::gpu) {
        nvlink_between_[{std::min(a, b), std::max(a, b)}] = static_cast<int>(li);
      } else if (ka == NodeKind::nvswitch) {
        nvswitch_links_[a][b] = static_cast<int>(li);
      } else {
        nvswitch_links_[b][a] = static_cast<int>(li);
      }
    }
    const int e = t_.num_endpoints();
    t_.routes.clear();
    t_.routes.reserve(static_cast<size_t>(3 * e * e));
    for (RouteMode m : {RouteMode::automatic, RouteMode::p2p, RouteMode::host_staged}) {
      for (int s = 0; s < e; ++s) {
        for (int d = 0; d < e; ++d) t_.routes.push_back(make_route(s, d, m));
      }
    }
  }

  Topology::Impl& t_;
  // Lookup tables for route building (filled at the start of build_routes).
  std::vector<int> end_a_, end_b_;                     ///< link -> node index of a / b
  std::vector<int> socket_links_;                      ///< upi/xgmi links
  std::map<std::pair<int, int>, int> nvlink_between_;  ///< gpu node pair -> nvlink
  std::map<int, std::map<int, int>> nvswitch_links_;   ///< nvswitch -> gpu node -> link
  mutable std::map<std::pair<int, int>, std::vector<int>> socket_paths_;
  const std::string& file_;
  const std::vector<std::string>& node_places_;
  const std::vector<std::string>& link_places_;
};

}  // namespace

Result<Topology> Topology::build(std::string name, std::string source, std::vector<Node> nodes,
                                 std::vector<Link> links, Options options,
                                 const std::string& source_name,
                                 std::vector<std::string> node_places,
                                 std::vector<std::string> link_places) {
  Topology t;
  Impl& impl = *t.impl_;
  impl.name = std::move(name);
  impl.source = std::move(source);
  impl.nodes = std::move(nodes);
  impl.links = std::move(links);
  impl.options = std::move(options);
  for (auto& [pair, allowed] : impl.options.p2p_overrides) {
    (void)allowed;
    if (pair.first > pair.second) std::swap(pair.first, pair.second);
  }
  std::sort(impl.options.p2p_overrides.begin(), impl.options.p2p_overrides.end());
  const auto gpus = std::count_if(impl.nodes.begin(), impl.nodes.end(),
                                  [](const Node& n) { return n.kind == NodeKind::gpu; });
  // One server: routes are precomputed for every endpoint pair, so the size is bounded.
  constexpr long kMaxGpus = 64, kMaxNodes = 4096, kMaxLinks = 16384;
  if (gpus > kMaxGpus)
    return input_error(source_name, "",
                       "more than " + std::to_string(kMaxGpus) + " GPUs in one topology");
  if (static_cast<long>(impl.nodes.size()) > kMaxNodes)
    return input_error(source_name, "", "more than 4096 nodes");
  if (static_cast<long>(impl.links.size()) > kMaxLinks)
    return input_error(source_name, "", "more than 16384 links");
  for (const auto& [pair, allowed] : impl.options.p2p_overrides) {
    (void)allowed;
    if (pair.first < 0 || pair.second >= gpus || pair.first == pair.second) {
      return input_error(source_name, "/p2p_overrides",
                         "override names a GPU pair outside 0.." + std::to_string(gpus - 1));
    }
  }
  Builder b(impl, source_name, node_places, link_places);
  if (auto e = b.run()) return *e;
  return t;
}

}  // namespace sparsp::topology
