// Builder phases that derive the GPU x GPU matrices (NVLink counts, path classes, P2P rules) and
// every route, as resource uses per leg, for each endpoint pair and route mode.
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
#include <deque>

#include "builder.hpp"

namespace sparsp::topology::detail {

// ---- GPU matrices ----

// Nodes from v up to its cpu, v first.
std::vector<int> Builder::chain(int v) const {
  std::vector<int> out;
  for (; v >= 0; v = t_.parent[static_cast<size_t>(v)]) out.push_back(v);
  return out;
}

// The lowest node that a and b both have in their chain() (-1 when their trees differ).
int Builder::lowest_common(int a, int b) const {
  const auto ca = chain(a), cb = chain(b);
  for (int v : ca) {
    if (std::find(cb.begin(), cb.end(), v) != cb.end()) return v;
  }
  return -1;
}

PathClass Builder::pcie_class(int gi, int gj) const {
  return tree_class(t_.gpu_nodes[static_cast<size_t>(gi)], t_.gpu_nodes[static_cast<size_t>(gj)]);
}

void Builder::build_gpu_matrices() {
  const size_t g = t_.gpu_nodes.size();
  t_.same_chip.assign(g, std::vector<bool>(g, false));
  t_.gpu_chip.assign(g, std::string());
  for (size_t i = 0; i < g; ++i)
    if (const int pi = chip_partition(t_.gpu_nodes[i]); pi >= 0)
      t_.gpu_chip[i] = t_.nodes[static_cast<size_t>(pi)].chip;
  for (size_t i = 0; i < g; ++i)
    for (size_t j = 0; j < g; ++j) {
      const int pi = chip_partition(t_.gpu_nodes[i]), pj = chip_partition(t_.gpu_nodes[j]);
      t_.same_chip[i][j] =
          pi >= 0 && pj >= 0 && pi != pj &&
          t_.nodes[static_cast<size_t>(pi)].chip == t_.nodes[static_cast<size_t>(pj)].chip;
    }
  count_nvlinks();
  classify_gpu_pairs();
  apply_p2p_overrides();
}

// nvlinks: the bonded NVLink count of every GPU pair, over direct links plus, per NVSwitch both
// GPUs reach, the smaller of their link counts to it.
void Builder::count_nvlinks() {
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
        if (x != y) t_.nvlinks[static_cast<size_t>(x)][static_cast<size_t>(y)] += std::min(cx, cy);
      }
    }
  }
}

// path_class and the default P2P rule of every ordered GPU pair.
void Builder::classify_gpu_pairs() {
  const size_t g = t_.gpu_nodes.size();
  t_.path_class.assign(g, std::vector<PathClass>(g, PathClass::self));
  t_.p2p.assign(g, std::vector<bool>(g, false));
  for (size_t i = 0; i < g; ++i) {
    for (size_t j = 0; j < g; ++j) {
      if (i == j) continue;
      const int ii = static_cast<int>(i), jj = static_cast<int>(j);
      t_.path_class[i][j] = t_.nvlinks[i][j] > 0 ? PathClass::nvlink : pcie_class(ii, jj);
      t_.p2p[i][j] = p2p_by_default(i, j);
    }
  }
}

// NVLink peers always have peer access; PCIe peers when the topology's P2P is on, both models
// are capable and the pair shares a socket or P2P may cross sockets.
bool Builder::p2p_by_default(size_t i, size_t j) const {
  if (t_.nvlinks[i][j] > 0) return true;
  const GpuSpec& si = *t_.nodes[static_cast<size_t>(t_.gpu_nodes[i])].gpu;
  const GpuSpec& sj = *t_.nodes[static_cast<size_t>(t_.gpu_nodes[j])].gpu;
  return t_.options.p2p && si.p2p_capable && sj.p2p_capable &&
         (t_.options.p2p_cross_socket ||
          pcie_class(static_cast<int>(i), static_cast<int>(j)) != PathClass::sys);
}

void Builder::apply_p2p_overrides() {
  for (const auto& [pair, allowed] : t_.options.p2p_overrides) {
    const auto [i, j] = pair;
    t_.p2p[static_cast<size_t>(i)][static_cast<size_t>(j)] = allowed;
    t_.p2p[static_cast<size_t>(j)][static_cast<size_t>(i)] = allowed;
  }
}

// ---- route legs ----

void Builder::use(LegBuilder& leg, int resource, double coefficient) const {
  if (resource >= 0) leg.uses[resource] += coefficient;
}

// Traverse link `li` from node `from` to the other end.
void Builder::traverse(LegBuilder& leg, int li, int from) const {
  const Link& l = t_.links[static_cast<size_t>(li)];
  const bool forward = end_a_[static_cast<size_t>(li)] == from;
  use(leg,
      forward ? t_.res_forward[static_cast<size_t>(li)] : t_.res_backward[static_cast<size_t>(li)],
      1.0);
  use(leg, t_.res_duplex[static_cast<size_t>(li)], 1.0);
  leg.latency_s += l.latency_s;
  leg.hops.push_back(forward ? l.b : l.a);
}

// Up the PCIe tree from node `from` to `top`, one of its ancestors.
void Builder::climb(LegBuilder& leg, int from, int top) const {
  for (int v = from; v != top; v = t_.parent[static_cast<size_t>(v)])
    traverse(leg, t_.up_link[static_cast<size_t>(v)], v);
}

// Down the PCIe tree from `top` to up[0], along `up` (a chain() that holds top).
void Builder::descend(LegBuilder& leg, const std::vector<int>& up, int top) const {
  std::vector<int> down;
  for (int v : up) {
    if (v == top) break;
    down.push_back(v);
  }
  int at = top;
  for (auto it = down.rbegin(); it != down.rend(); ++it) {
    traverse(leg, t_.up_link[static_cast<size_t>(*it)], at);
    at = *it;
  }
}

// Shortest inter-socket path of links between two cpus (BFS, links in file order), cached.
const std::vector<int>& Builder::socket_path(int from, int to) const {
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
void Builder::cross_sockets(LegBuilder& leg, int from, int to, double rc_coefficient) const {
  int at = from;
  for (int li : socket_path(from, to)) {
    traverse(leg, li, at);
    at = end_a_[static_cast<size_t>(li)] == at ? end_b_[static_cast<size_t>(li)]
                                               : end_a_[static_cast<size_t>(li)];
    use(leg, t_.res_root_complex[static_cast<size_t>(at)], rc_coefficient);
  }
}

RouteLeg Builder::finish(LegBuilder&& leg, std::string src, std::string dst) const {
  RouteLeg out;
  out.src = std::move(src);
  out.dst = std::move(dst);
  out.hops = std::move(leg.hops);
  for (const auto& [r, c] : leg.uses) out.uses.push_back(ResourceUse{r, c});
  out.latency_s = leg.latency_s;
  return out;
}

// NUMA node of GPU g's cpu.
int Builder::gpu_numa_node(int g) const {
  return t_
      .nodes[static_cast<size_t>(
          t_.node_cpu[static_cast<size_t>(t_.gpu_nodes[static_cast<size_t>(g)])])]
      .numa_node;
}

// GPU <-> host memory of NUMA node k; to_host selects the direction.
RouteLeg Builder::host_leg(int g, int k, bool to_host) const {
  const int gn = t_.gpu_nodes[static_cast<size_t>(g)];
  const int cpu = t_.node_cpu[static_cast<size_t>(gn)];
  const int host_cpu = t_.cpu_of_numa[static_cast<size_t>(k)];
  const std::string gname = "gpu" + std::to_string(g), hname = "host" + std::to_string(k);
  LegBuilder leg;
  if (to_host) {
    leg.hops.push_back(t_.nodes[static_cast<size_t>(gn)].id);
    climb(leg, gn, cpu);
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
  descend(leg, chain(gn), cpu);
  return finish(std::move(leg), hname, gname);
}

// GPU gi -> GPU gj directly: over NVLink when the pair has any, else over PCIe.
RouteLeg Builder::p2p_leg(int gi, int gj) const {
  const int ni = t_.gpu_nodes[static_cast<size_t>(gi)], nj = t_.gpu_nodes[static_cast<size_t>(gj)];
  const std::string si = "gpu" + std::to_string(gi), sj = "gpu" + std::to_string(gj);
  LegBuilder leg;
  leg.hops.push_back(t_.nodes[static_cast<size_t>(ni)].id);
  if (t_.nvlinks[static_cast<size_t>(gi)][static_cast<size_t>(gj)] > 0) {
    nvlink_path(leg, ni, nj);
  } else {
    pcie_path(leg, ni, nj);
  }
  return finish(std::move(leg), si, sj);
}

// Direct NVLink if present, else spread over the NVSwitches both GPUs reach, in proportion
// to min(links_i, links_j) per switch (NVSwitch fabrics stripe traffic over all links).
void Builder::nvlink_path(LegBuilder& leg, int ni, int nj) const {
  if (auto direct = nvlink_between_.find({std::min(ni, nj), std::max(ni, nj)});
      direct != nvlink_between_.end()) {
    traverse(leg, direct->second, ni);
    return;
  }
  const std::vector<NvSwitchVia> vias = nvswitch_vias(ni, nj);
  int total = 0;
  for (const NvSwitchVia& v : vias) total += v.weight;
  double latency = 0;
  for (const NvSwitchVia& v : vias) {
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
}

// The NVSwitches that GPU nodes ni and nj both link to, in switch order.
std::vector<Builder::NvSwitchVia> Builder::nvswitch_vias(int ni, int nj) const {
  std::vector<NvSwitchVia> vias;
  for (const auto& [sw, gpu_links] : nvswitch_links_) {
    auto iu = gpu_links.find(ni), id = gpu_links.find(nj);
    if (iu == gpu_links.end() || id == gpu_links.end()) continue;
    const int up = iu->second, down = id->second;
    const int w = std::min(t_.links[static_cast<size_t>(up)].nvlink_count,
                           t_.links[static_cast<size_t>(down)].nvlink_count);
    vias.push_back(NvSwitchVia{sw, up, down, w});
  }
  return vias;
}

// Where PCIe peer traffic from GPU node ni to nj turns: the lowest node both trees share (past
// an ACS-redirecting switch, the first non-switch above it), or ni's cpu across sockets.
int Builder::pcie_turn(int ni, int nj) const {
  const int ci = t_.node_cpu[static_cast<size_t>(ni)], cj = t_.node_cpu[static_cast<size_t>(nj)];
  if (ci != cj) return ci;
  int turn = lowest_common(ni, nj);
  // ACS redirect: a switch that redirects peer requests sends them to the root port above.
  if (t_.nodes[static_cast<size_t>(turn)].kind == NodeKind::pcie_switch &&
      t_.nodes[static_cast<size_t>(turn)].acs_redirect) {
    while (t_.nodes[static_cast<size_t>(turn)].kind == NodeKind::pcie_switch)
      turn = t_.parent[static_cast<size_t>(turn)];
  }
  return turn;
}

// The lowest pcie_switch above node n that is a partition of a chip (Node::chip), -1 if none.
int Builder::chip_partition(int n) const {
  for (int v = t_.parent[static_cast<size_t>(n)]; v >= 0; v = t_.parent[static_cast<size_t>(v)]) {
    const Node& x = t_.nodes[static_cast<size_t>(v)];
    if (x.kind != NodeKind::pcie_switch) return -1;
    if (!x.chip.empty()) return v;
  }
  return -1;
}

// Up from GPU node ni to the turn, the root complex there, across sockets if need be, and down
// to GPU node nj. Between two partitions of one switch chip: up to ni's partition, across the
// chip's fabric (its resource when capped), down from nj's partition. Across sockets of a CPU
// family with a cross-socket P2P efficiency below 1, the pair's own cap (res_xsocket).
void Builder::pcie_path(LegBuilder& leg, int ni, int nj) const {
  const int ci = t_.node_cpu[static_cast<size_t>(ni)], cj = t_.node_cpu[static_cast<size_t>(nj)];
  const int pi = chip_partition(ni), pj = chip_partition(nj);
  if (pi >= 0 && pj >= 0 && pi != pj &&
      t_.nodes[static_cast<size_t>(pi)].chip == t_.nodes[static_cast<size_t>(pj)].chip &&
      !t_.nodes[static_cast<size_t>(pi)].acs_redirect &&
      !t_.nodes[static_cast<size_t>(pj)].acs_redirect) {
    climb(leg, ni, pi);
    if (auto it = t_.res_chip.find(t_.nodes[static_cast<size_t>(pi)].chip); it != t_.res_chip.end())
      use(leg, it->second, 1.0);
    leg.hops.push_back(t_.nodes[static_cast<size_t>(pj)].id);
    descend(leg, chain(nj), pj);
    return;
  }
  if (auto it = t_.res_xsocket.find({ni, nj}); it != t_.res_xsocket.end())
    use(leg, it->second, 1.0);
  const int turn = pcie_turn(ni, nj);
  climb(leg, ni, turn);
  const NodeKind tk = t_.nodes[static_cast<size_t>(turn)].kind;
  const double pc = t_.nodes[static_cast<size_t>(ci)].peer_coefficient;
  if (tk == NodeKind::cpu || tk == NodeKind::root_port)
    use(leg, t_.res_root_complex[static_cast<size_t>(ci)], pc);
  int down_from = turn;
  if (ci != cj) {
    cross_sockets(leg, ci, cj, t_.nodes[static_cast<size_t>(cj)].peer_coefficient);
    down_from = cj;
  }
  descend(leg, chain(nj), down_from);
}

// ---- pieces of cluster routes ----

RouteLeg Builder::tree_leg(int from, int to, std::string src, std::string dst) const {
  LegBuilder leg;
  leg.hops.push_back(t_.nodes[static_cast<size_t>(from)].id);
  pcie_path(leg, from, to);
  return finish(std::move(leg), std::move(src), std::move(dst));
}

RouteLeg Builder::host_tree_leg(int node, int k, bool to_host, std::string node_name) const {
  const int cpu = t_.node_cpu[static_cast<size_t>(node)];
  const int host_cpu = t_.cpu_of_numa[static_cast<size_t>(k)];
  const std::string hname = "host" + std::to_string(k);
  LegBuilder leg;
  if (to_host) {
    leg.hops.push_back(t_.nodes[static_cast<size_t>(node)].id);
    climb(leg, node, cpu);
    use(leg, t_.res_root_complex[static_cast<size_t>(cpu)], 1.0);
    cross_sockets(leg, cpu, host_cpu, 1.0);
    use(leg, t_.res_host_memory[static_cast<size_t>(k)], 1.0);
    leg.hops.push_back(hname);
    return finish(std::move(leg), std::move(node_name), hname);
  }
  leg.hops.push_back(hname);
  leg.hops.push_back(t_.nodes[static_cast<size_t>(host_cpu)].id);
  use(leg, t_.res_host_memory[static_cast<size_t>(k)], 1.0);
  use(leg, t_.res_root_complex[static_cast<size_t>(host_cpu)], 1.0);
  cross_sockets(leg, host_cpu, cpu, 1.0);
  descend(leg, chain(node), cpu);
  return finish(std::move(leg), hname, std::move(node_name));
}

// Tree nodes a and b: SYS across sockets; else by their lowest common ancestor (NODE at a CPU,
// PHB at a root port, PIX below one switch with both directly under it, PXB otherwise).
PathClass Builder::tree_class(int a, int b) const {
  if (t_.node_cpu[static_cast<size_t>(a)] != t_.node_cpu[static_cast<size_t>(b)])
    return PathClass::sys;
  const int lca = lowest_common(a, b);
  const NodeKind k = t_.nodes[static_cast<size_t>(lca)].kind;
  if (k == NodeKind::cpu) return PathClass::node;
  if (k == NodeKind::root_port) return PathClass::phb;
  const bool direct =
      t_.parent[static_cast<size_t>(a)] == lca && t_.parent[static_cast<size_t>(b)] == lca;
  return direct ? PathClass::pix : PathClass::pxb;
}

// ---- routes ----

Result<Route> Builder::make_route(int s, int d, RouteMode mode) const {
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
    r.path_class = gpu_numa_node(gpu) == k ? PathClass::phb : PathClass::sys;
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
  const int k = gpu_numa_node(s);
  r.host_staged = true;
  r.staging_host = "host" + std::to_string(k);
  r.legs.push_back(host_leg(s, k, true));
  r.legs.push_back(host_leg(d, k, false));
  return r;
}

std::string Builder::why_no_p2p(int i, int j) const {
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

// Lookup tables for the legs: link ends, inter-socket links, direct NVLinks by GPU node pair,
// NVSwitch links by switch and GPU node.
void Builder::index_links() {
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
}

// routes[mode][src][dst] over every endpoint pair, in the order route_ref indexes them.
void Builder::build_routes() {
  index_links();
  const int e = t_.num_endpoints();
  t_.routes.clear();
  t_.routes.reserve(static_cast<size_t>(3 * e * e));
  for (RouteMode m : {RouteMode::automatic, RouteMode::p2p, RouteMode::host_staged}) {
    for (int s = 0; s < e; ++s) {
      for (int d = 0; d < e; ++d) t_.routes.push_back(make_route(s, d, m));
    }
  }
}

}  // namespace sparsp::topology::detail
