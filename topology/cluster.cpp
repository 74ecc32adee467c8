// Clusters (topology/README.md "Clusters"): N copies of one server topology, each with its NICs,
// joined by a rail-optimised or leaf/spine fabric. The composed Topology holds every node's tree
// (ids prefixed "node<k>/") and resources, then the fabric's; routes are never precomputed: a
// route inside a node is the server's own with its resources moved to the node's, and a route
// between nodes is composed from per-server pieces (GPU -> NIC, host -> NIC, their reverses)
// and the fabric hops, then cached (cluster_route_ref).
#include "cluster.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builder.hpp"
#include "sparsp/units.hpp"

namespace sparsp::topology::detail {

namespace {

const std::string kNoFile;
const std::vector<std::string> kNoPlaces;

std::string gpu_name(int g) { return "gpu" + std::to_string(g); }
std::string host_name(int h) { return "host" + std::to_string(h); }
std::string node_prefix(int k) { return "node" + std::to_string(k) + "/"; }

// Single-flow rate of a set of resource uses: the least capacity / coefficient.
double uses_rate(const std::vector<Resource>& res, const std::vector<ResourceUse>& uses) {
  double r = 0;
  for (const ResourceUse& u : uses) {
    const double cap = res[static_cast<size_t>(u.resource)].capacity_Bps;
    if (u.coefficient <= 0 || cap <= 0) continue;
    const double x = cap / u.coefficient;
    r = r > 0 ? std::min(r, x) : x;
  }
  return r;
}

// A leg being composed from pieces.
struct Acc {
  std::vector<std::string> hops;
  std::map<int, double> uses;
  double latency_s = 0;

  void hop(const std::string& h) {
    if (hops.empty() || hops.back() != h) hops.push_back(h);
  }
  void use(int r, double c) { uses[r] += c; }
  // A leg of the server, moved to node k (resources offset, hops prefixed).
  void piece(const RouteLeg& leg, int k, int res_per_node) {
    for (const std::string& h : leg.hops) hop(node_prefix(k) + h);
    for (const ResourceUse& u : leg.uses) use(u.resource + k * res_per_node, u.coefficient);
    latency_s += leg.latency_s;
  }
  RouteLeg finish(std::string src, std::string dst) {
    RouteLeg out;
    out.src = std::move(src);
    out.dst = std::move(dst);
    out.hops = std::move(hops);
    for (const auto& [r, c] : uses) out.uses.push_back(ResourceUse{r, c});
    out.latency_s = latency_s;
    return out;
  }
};

}  // namespace

Result<Route> Cluster::compute(int s, int d, RouteMode mode, const std::string& name) const {
  const int total_gpus = nodes * gpus;
  const int ni = static_cast<int>(nics.size());
  const std::string where = "topology '" + name + "'";
  auto ep = [&](int e) { return e < total_gpus ? gpu_name(e) : host_name(e - total_gpus); };
  // Node and local endpoint index (server terms: GPUs 0..gpus-1, then hosts).
  auto local = [&](int e, int& node) {
    if (e < total_gpus) {
      node = e / gpus;
      return e % gpus;
    }
    node = (e - total_gpus) / hosts;
    return gpus + (e - total_gpus) % hosts;
  };
  int na = 0, nb = 0;
  const int ls = local(s, na), ld = local(d, nb);
  if (na == nb) {  // inside one node: the server's route, moved to node na
    const Result<Route>& r = server.route_ref(ls, ld, mode);
    if (!r)
      return Error{where + ": " + ep(s) + "->" + ep(d) + " (node" + std::to_string(na) +
                   "): " + r.error().message};
    Route out = *r;
    auto global = [&](const std::string& e) {
      if (e.rfind("gpu", 0) == 0) return gpu_name(na * gpus + std::stoi(e.substr(3)));
      return host_name(na * hosts + std::stoi(e.substr(4)));
    };
    if (out.host_staged) out.staging_host = global(out.staging_host);
    for (RouteLeg& leg : out.legs) {
      leg.src = global(leg.src);
      leg.dst = global(leg.dst);
      for (std::string& h : leg.hops) h = node_prefix(na) + h;
      for (ResourceUse& u : leg.uses) u.resource += na * resources;
    }
    return out;
  }
  if (ls >= gpus || ld >= gpus)
    return Error{where + ": " + ep(s) + "->" + ep(d) +
                 ": copies between a GPU or host and a host of another node are not modelled"};
  if (mode == RouteMode::p2p)
    return Error{where + ": " + ep(s) + "->" + ep(d) +
                 ": P2P is not available (the GPUs are in different nodes: node" +
                 std::to_string(na) + ", node" + std::to_string(nb) + ")"};
  const int ca = gpu_nic[static_cast<size_t>(ls)], cb = gpu_nic[static_cast<size_t>(ld)];
  const bool gdr_a = mode != RouteMode::host_staged && gpu_gdr[static_cast<size_t>(ls)];
  const bool gdr_b = mode != RouteMode::host_staged && gpu_gdr[static_cast<size_t>(ld)];
  const int ha = server.gpu_socket(ls), hb = server.gpu_socket(ld);
  const std::string nic_a =
      node_prefix(na) + server.nodes()[static_cast<size_t>(nics[static_cast<size_t>(ca)])].id;
  const std::string nic_b =
      node_prefix(nb) + server.nodes()[static_cast<size_t>(nics[static_cast<size_t>(cb)])].id;
  auto net = [&](Acc& acc) {
    const int la = leaf_of(na, ca), lb = leaf_of(nb, cb);
    acc.hop(nic_a);
    acc.use(nic_up(na, ca), 1.0);
    acc.hop("leaf" + std::to_string(la));
    acc.latency_s += hop_latency_s;
    if (la != lb) {
      acc.use(leaf_up(la), 1.0);
      acc.hop("spine");
      acc.use(leaf_up(lb) + 1, 1.0);
      acc.hop("leaf" + std::to_string(lb));
      acc.latency_s += 2 * hop_latency_s;
    }
    acc.use(nic_up(nb, cb) + 1, 1.0);
    acc.hop(nic_b);
    acc.latency_s += hop_latency_s;
  };
  auto at = [&](const std::vector<RouteLeg>& v, int row, int nic) -> const RouteLeg& {
    return v[static_cast<size_t>(row * ni + nic)];
  };
  const Route& down_b = *server.route_ref(gpus + hb, ld);  // host hb -> GPU ld
  const Route& up_a = *server.route_ref(ls, gpus + ha);    // GPU ls -> host ha
  Route r;
  r.path_class = PathClass::net;
  const std::string src = gpu_name(s), dst = gpu_name(d);
  if (gdr_a && gdr_b) {
    Acc acc;
    acc.piece(at(gpu_to_nic, ls, ca), na, resources);
    net(acc);
    acc.piece(at(nic_to_gpu, ld, cb), nb, resources);
    r.legs.push_back(acc.finish(src, dst));
    return r;
  }
  r.host_staged = true;
  if (!gdr_a) {  // GPU -> its host, then host -> NIC -> fabric -> NIC -> (GPU | host -> GPU)
    const std::string staging = host_name(na * hosts + ha);
    r.staging_host = staging;
    Acc first;
    first.piece(up_a.legs[0], na, resources);
    r.legs.push_back(first.finish(src, staging));
    Acc second;
    second.piece(at(host_to_nic, ha, ca), na, resources);
    net(second);
    if (gdr_b) {
      second.piece(at(nic_to_gpu, ld, cb), nb, resources);
    } else {
      second.piece(at(nic_to_host, hb, cb), nb, resources);
      second.piece(down_b.legs[0], nb, resources);
    }
    r.legs.push_back(second.finish(staging, dst));
    return r;
  }
  // GDR at the source only: GPU -> NIC -> fabric -> NIC -> host of the destination, then -> GPU.
  const std::string staging = host_name(nb * hosts + hb);
  r.staging_host = staging;
  Acc first;
  first.piece(at(gpu_to_nic, ls, ca), na, resources);
  net(first);
  first.piece(at(nic_to_host, hb, cb), nb, resources);
  r.legs.push_back(first.finish(src, staging));
  Acc second;
  second.piece(down_b.legs[0], nb, resources);
  r.legs.push_back(second.finish(staging, dst));
  return r;
}

Result<Topology> make_cluster(ClusterInput in) {
  auto c = std::make_shared<Cluster>();
  c->server = std::move(in.server);
  const Topology::Impl& s = ImplAccess::of(c->server);
  c->fabric = in.fabric;
  c->nodes = in.nodes;
  c->gpus = c->server.num_gpus();
  c->hosts = c->server.num_sockets();
  c->tree_nodes = static_cast<int>(s.nodes.size());
  c->tree_links = static_cast<int>(s.links.size());
  c->resources = static_cast<int>(s.resources.size());
  c->port_Bps = in.port_Bps;
  c->hop_latency_s = in.hop_latency_s;
  c->oversubscription = in.oversubscription;
  c->gdr = in.gdr;
  c->json = std::move(in.json);
  for (size_t i = 0; i < s.nodes.size(); ++i)
    if (s.nodes[i].kind == NodeKind::nic) c->nics.push_back(static_cast<int>(i));
  const int ni = static_cast<int>(c->nics.size());
  c->nodes_per_leaf = c->fabric == "rail" ? c->nodes : in.nodes_per_leaf;
  c->leaves = c->fabric == "rail" ? ni : (c->nodes + c->nodes_per_leaf - 1) / c->nodes_per_leaf;
  for (int nic : c->nics) {
    const Node& n = s.nodes[static_cast<size_t>(nic)];
    double port = n.nic_rate_Bps;
    std::optional<NicModel> model = find_nic_model(n.nic_model);
    if (port <= 0 && model) port = model->port_rate_Bps;
    c->nic_Bps.push_back(n.ports * std::min(port, c->port_Bps));
  }

  // Pieces of inter-node routes and each GPU's NIC (NCCL's ncclTopoGetLocalNet, paraphrased: the
  // NICs of the widest path from the GPU, nearest path class among those; several such NICs are
  // spread over the GPUs that share them by GPU index).
  Builder b(const_cast<Topology::Impl&>(s), kNoFile, kNoPlaces, kNoPlaces);
  b.prepare_legs();
  const int g = c->gpus, h = c->hosts;
  for (int gi = 0; gi < g; ++gi)
    for (int k = 0; k < ni; ++k) {
      const int gn = s.gpu_nodes[static_cast<size_t>(gi)], nn = c->nics[static_cast<size_t>(k)];
      const std::string nic = s.nodes[static_cast<size_t>(nn)].id;
      c->gpu_to_nic.push_back(b.tree_leg(gn, nn, gpu_name(gi), nic));
      c->nic_to_gpu.push_back(b.tree_leg(nn, gn, nic, gpu_name(gi)));
    }
  for (int hi = 0; hi < h; ++hi)
    for (int k = 0; k < ni; ++k) {
      const int nn = c->nics[static_cast<size_t>(k)];
      const std::string nic = s.nodes[static_cast<size_t>(nn)].id;
      c->host_to_nic.push_back(b.host_tree_leg(nn, hi, false, nic));
      c->nic_to_host.push_back(b.host_tree_leg(nn, hi, true, nic));
    }
  auto bw = [&](int gi, int k) {
    return std::min(uses_rate(s.resources, c->gpu_to_nic[static_cast<size_t>(gi * ni + k)].uses),
                    uses_rate(s.resources, c->nic_to_gpu[static_cast<size_t>(gi * ni + k)].uses));
  };
  auto cls = [&](int gi, int k) {
    return b.tree_class(s.gpu_nodes[static_cast<size_t>(gi)], c->nics[static_cast<size_t>(k)]);
  };
  // Orders (bandwidth, class) pairs: wider first, then nearer.
  auto better = [](double bx, PathClass cx, double by, PathClass cy) {
    if (bx > by * (1 + 1e-9)) return true;
    if (by > bx * (1 + 1e-9)) return false;
    return cx < cy;
  };
  for (int gi = 0; gi < g; ++gi) {
    std::vector<int> local;
    for (int k = 0; k < ni; ++k) {
      if (local.empty() || better(bw(gi, k), cls(gi, k), bw(gi, local[0]), cls(gi, local[0]))) {
        local = {k};
      } else if (!better(bw(gi, local[0]), cls(gi, local[0]), bw(gi, k), cls(gi, k))) {
        local.push_back(k);
      }
    }
    // The GPUs for which local[0] is nearest (NCCL: ncclTopoGetLocal from the NIC's side).
    int sharing = 0;
    double best_b = 0;
    PathClass best_c = PathClass::net;
    for (int gj = 0; gj < g; ++gj) {
      if (sharing == 0 || better(bw(gj, local[0]), cls(gj, local[0]), best_b, best_c)) {
        sharing = 1;
        best_b = bw(gj, local[0]);
        best_c = cls(gj, local[0]);
      } else if (!better(best_b, best_c, bw(gj, local[0]), cls(gj, local[0]))) {
        ++sharing;
      }
    }
    const int pick = local[static_cast<size_t>((gi % sharing) % static_cast<int>(local.size()))];
    c->gpu_nic.push_back(pick);
    c->gpu_nic_class.push_back(cls(gi, pick));
    c->gpu_nic_Bps.push_back(bw(gi, pick));
    const Node& nic = s.nodes[static_cast<size_t>(c->nics[static_cast<size_t>(pick)])];
    const auto model = find_nic_model(nic.nic_model);
    // NCCL's ncclTopoCheckGdr: both ends GDR capable (GeForce boards are not, as they have no
    // peer access under the stock driver) and the path at most PXB (NCCL_NET_GDR_LEVEL default).
    c->gpu_gdr.push_back(c->gdr && (!model || model->gdr) && c->server.gpu(gi).p2p_capable &&
                         cls(gi, pick) <= PathClass::pxb);
  }

  Topology t;
  Topology::Impl& x = ImplAccess::of(t);
  x.name = std::move(in.name);
  x.source = std::move(in.source);
  x.options = s.options;
  x.options.p2p_overrides.clear();  // GPU indices of one node; the server keeps them
  x.options.nccl = NcclFigures{};   // measured inside one server, not across the network
  x.options.chip_fabric_Bps.clear();
  const int nn = c->tree_nodes, nl = c->tree_links, nr = c->resources;
  auto off = [](int v, int by) { return v < 0 ? -1 : v + by; };
  for (int k = 0; k < c->nodes; ++k) {
    const std::string p = node_prefix(k);
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      Node n = s.nodes[i];
      n.id = p + n.id;
      if (n.kind == NodeKind::cpu) {
        if (n.numa_id < 0) n.numa_id = n.numa_node;  // the node's own OS numbering
        n.numa_node += k * h;
      }
      if (!n.chip.empty()) n.chip = p + n.chip;
      x.index[n.id] = k * nn + static_cast<int>(i);
      x.nodes.push_back(std::move(n));
    }
    for (const Link& l0 : s.links) {
      Link l = l0;
      l.a = p + l.a;
      l.b = p + l.b;
      x.links.push_back(std::move(l));
    }
    for (int v : s.gpu_nodes) x.gpu_nodes.push_back(v + k * nn);
    for (int v : s.gpu_of_node) x.gpu_of_node.push_back(off(v, k * g));
    for (int v : s.cpu_of_numa) x.cpu_of_numa.push_back(v + k * nn);
    for (int v : s.up_link) x.up_link.push_back(off(v, k * nl));
    for (int v : s.parent) x.parent.push_back(off(v, k * nn));
    for (int v : s.node_cpu) x.node_cpu.push_back(off(v, k * nn));
    for (const Resource& r : s.resources)
      x.resources.push_back(Resource{p + r.name, r.kind, r.capacity_Bps});
    for (int v : s.res_forward) x.res_forward.push_back(off(v, k * nr));
    for (int v : s.res_backward) x.res_backward.push_back(off(v, k * nr));
    for (int v : s.res_duplex) x.res_duplex.push_back(off(v, k * nr));
    for (int v : s.res_root_complex) x.res_root_complex.push_back(off(v, k * nr));
    for (int v : s.res_host_memory) x.res_host_memory.push_back(off(v, k * nr));
    for (const auto& [chip, r] : s.res_chip) x.res_chip[p + chip] = r + k * nr;
    for (const auto& [pair, r] : s.res_xsocket)
      x.res_xsocket[{pair.first + k * nn, pair.second + k * nn}] = r + k * nr;
  }
  // The fabric: both directions of every NIC's network link, then of every leaf's uplink (one
  // capacity per leaf and direction: its spine links together).
  c->fabric_base = static_cast<int>(x.resources.size());
  std::vector<double> leaf_down(static_cast<size_t>(c->leaves), 0.0);
  for (int k = 0; k < c->nodes; ++k)
    for (int i = 0; i < ni; ++i) {
      const std::string nic =
          node_prefix(k) + s.nodes[static_cast<size_t>(c->nics[static_cast<size_t>(i)])].id;
      const std::string leaf = "leaf" + std::to_string(c->leaf_of(k, i));
      const double cap = c->nic_Bps[static_cast<size_t>(i)];
      x.resources.push_back(Resource{nic + "->" + leaf, ResourceKind::link_direction, cap});
      x.resources.push_back(Resource{leaf + "->" + nic, ResourceKind::link_direction, cap});
      leaf_down[static_cast<size_t>(c->leaf_of(k, i))] += cap;
    }
  for (int l = 0; l < c->leaves; ++l) {
    const std::string leaf = "leaf" + std::to_string(l);
    const double cap = leaf_down[static_cast<size_t>(l)] / c->oversubscription;
    // Without oversubscription the uplink is the sum of the NIC links below it, and every route
    // through it also crosses one of them (Cluster::compute): it never binds.
    const bool never_binds = c->oversubscription <= 1;
    x.resources.push_back(
        Resource{leaf + "->spine", ResourceKind::link_direction, cap, never_binds});
    x.resources.push_back(
        Resource{"spine->" + leaf, ResourceKind::link_direction, cap, never_binds});
  }
  x.cluster = std::move(c);
  return t;
}

const Result<Route>& cluster_route_ref(const Topology& t, int src, int dst, RouteMode mode) {
  const Cluster& c = *ImplAccess::of(t).cluster;
  const auto e = static_cast<std::uint64_t>(c.nodes) * static_cast<std::uint64_t>(c.gpus + c.hosts);
  const std::uint64_t m = mode == RouteMode::automatic ? 0 : (mode == RouteMode::p2p ? 1 : 2);
  const std::uint64_t key =
      (m * e + static_cast<std::uint64_t>(src)) * e + static_cast<std::uint64_t>(dst);
  {
    std::shared_lock lock(c.mu);
    if (auto it = c.cache.find(key); it != c.cache.end()) return *it->second;
  }
  // Endpoint indices: GPUs 0..G-1 then hosts; the cluster's numbering is the same.
  auto fresh = std::make_unique<const Result<Route>>(c.compute(src, dst, mode, t.name()));
  std::unique_lock lock(c.mu);
  auto [it, inserted] = c.cache.try_emplace(key, std::move(fresh));
  (void)inserted;  // another thread may have composed the same route first: keep that one
  return *it->second;
}

}  // namespace sparsp::topology::detail

namespace sparsp::topology::detail {

namespace {

// Per path class: ordered GPU pairs, and the single-flow rate and latency range of the pairs
// measured (all pairs of one node; for NET, every GPU of node 0 to every GPU of the nearest
// other node, and of the first node on another leaf).
struct ClassRow {
  std::string name;
  long pairs = 0;
  double min_Bps = 0, max_Bps = 0, min_latency_s = 0, max_latency_s = 0;
  bool any = false;
  void add(double bps, double lat) {
    if (!any || bps < min_Bps) min_Bps = bps;
    if (!any || bps > max_Bps) max_Bps = bps;
    if (!any || lat < min_latency_s) min_latency_s = lat;
    if (!any || lat > max_latency_s) max_latency_s = lat;
    any = true;
  }
};

// A route's single-flow rate (legs pipelined: the slowest leg) and its latency (legs summed).
void route_figures(const std::vector<Resource>& res, const Route& r, double& bps, double& lat) {
  bps = 0;
  lat = 0;
  for (const RouteLeg& leg : r.legs) {
    const double x = uses_rate(res, leg.uses);
    bps = bps > 0 ? std::min(bps, x) : x;
    lat += leg.latency_s;
  }
}

std::vector<ClassRow> class_rows(const Topology& t) {
  const Cluster& c = *ImplAccess::of(t).cluster;
  std::vector<ClassRow> rows;
  auto row = [&](const std::string& name) -> ClassRow& {
    for (ClassRow& r : rows)
      if (r.name == name) return r;
    rows.push_back(ClassRow{name});
    return rows.back();
  };
  const SingleFlowReport rep = single_flow_report(c.server);
  for (int i = 0; i < c.gpus; ++i)
    for (int j = 0; j < c.gpus; ++j) {
      if (i == j) continue;
      const auto ii = static_cast<size_t>(i), jj = static_cast<size_t>(j);
      ClassRow& r = row(to_string(rep.path_class[ii][jj], rep.nvlink_count[ii][jj]));
      r.pairs += c.nodes;
      r.add(rep.bandwidth_Bps[ii][jj], rep.latency_s[ii][jj]);
    }
  if (c.nodes > 1) {
    ClassRow& r = row("NET");
    const long total = static_cast<long>(c.nodes) * c.gpus;
    r.pairs = total * (total - 1) - static_cast<long>(c.nodes) * c.gpus * (c.gpus - 1);
    std::vector<int> others = {1};
    if (c.fabric == "leaf_spine" && c.leaves > 1) others.push_back(c.nodes_per_leaf);
    for (int other : others)
      for (int i = 0; i < c.gpus; ++i)
        for (int j = 0; j < c.gpus; ++j) {
          const Result<Route> route =
              c.compute(i, other * c.gpus + j, RouteMode::automatic, t.name());
          if (!route) continue;
          double bps = 0, lat = 0;
          route_figures(t.resources(), *route, bps, lat);
          r.add(bps, lat);
        }
  }
  return rows;
}

std::string fmt1(double v, int decimals = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

}  // namespace

std::string cluster_show_text(const Topology& t) {
  const Cluster& c = *ImplAccess::of(t).cluster;
  std::ostringstream out;
  out << "Cluster " << (t.name().empty() ? "(unnamed)" : t.name()) << "\n";
  if (!t.source().empty()) out << "Source: " << t.source() << "\n";
  out << "Nodes: " << c.nodes << " x " << c.server.name() << "   GPUs: " << t.num_gpus() << " ("
      << c.gpus << " per node; node k's GPU j is gpu<k*" << c.gpus << "+j> or node<k>/gpu<j>)\n";
  out << "Fabric: " << c.fabric << ", " << c.leaves << " lea" << (c.leaves == 1 ? "f" : "ves")
      << (c.fabric == "leaf_spine" ? ", " + std::to_string(c.nodes_per_leaf) + " nodes per leaf"
                                   : std::string(", NIC k of every node on leaf k"))
      << ", port " << fmt1(units::Bps_to_GBps(c.port_Bps)) << " GB/s, "
      << fmt1(units::s_to_us(c.hop_latency_s), 2) << " us per hop, oversubscription "
      << fmt1(c.oversubscription, 2) << ":1\n";
  out << "GPUDirect RDMA: " << (c.gdr ? "where NCCL allows it (GPU-NIC path at most PXB)" : "off")
      << "\n\nNICs (per node):\n";
  const auto& nodes = c.server.nodes();
  for (size_t k = 0; k < c.nics.size(); ++k) {
    const Node& n = nodes[static_cast<size_t>(c.nics[k])];
    std::string parent;
    for (const Link& l : c.server.links())
      if (l.b == n.id) parent = l.a;
    out << "  " << n.id << (n.name.empty() ? "" : " (" + n.name + ")") << "  "
        << (n.nic_model.empty() ? "unknown model" : n.nic_model) << ", " << n.ports << " port"
        << (n.ports == 1 ? "" : "s") << ", " << fmt1(units::Bps_to_GBps(c.nic_Bps[k]))
        << " GB/s per direction to leaf" << c.leaf_of(0, static_cast<int>(k)) << ", under "
        << parent << "\n";
  }
  out << "\nGPU -> NIC (NCCL's choice by PCIe proximity):\n";
  for (int g = 0; g < c.gpus; ++g) {
    const auto gg = static_cast<size_t>(g);
    out << "  gpu" << g << " -> "
        << nodes[static_cast<size_t>(c.nics[static_cast<size_t>(c.gpu_nic[gg])])].id << "  "
        << to_string(c.gpu_nic_class[gg]) << ", "
        << (c.gpu_gdr[gg] ? "GPUDirect RDMA" : "host-staged") << ", "
        << fmt1(units::Bps_to_GBps(c.gpu_nic_Bps[gg])) << " GB/s\n";
  }
  out << "\nPath classes (ordered GPU pairs; one flow alone, automatic route mode):\n";
  out << "  class   pairs        GB/s min..max     latency us min..max\n";
  for (const ClassRow& r : class_rows(t)) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-6s %8ld   %7.1f..%-7.1f   %6.2f..%.2f\n", r.name.c_str(),
                  r.pairs, units::Bps_to_GBps(r.min_Bps), units::Bps_to_GBps(r.max_Bps),
                  units::s_to_us(r.min_latency_s), units::s_to_us(r.max_latency_s));
    out << line;
  }
  out << "Resources: " << t.resources().size() << " (" << c.resources << " per node, "
      << t.resources().size() - static_cast<size_t>(c.resources) * static_cast<size_t>(c.nodes)
      << " in the fabric)\n";
  return out.str();
}

std::string cluster_show_json(const Topology& t) {
  using ojson = nlohmann::ordered_json;
  const Cluster& c = *ImplAccess::of(t).cluster;
  ojson root;
  root["name"] = t.name();
  root["source"] = t.source();
  root["cluster"] = true;
  root["nodes"] = c.nodes;
  root["server"] = c.server.name();
  root["gpus"] = t.num_gpus();
  root["gpus_per_node"] = c.gpus;
  ojson f;
  f["kind"] = c.fabric;
  f["leaves"] = c.leaves;
  if (c.fabric == "leaf_spine") f["nodes_per_leaf"] = c.nodes_per_leaf;
  f["port_Bps"] = c.port_Bps;
  f["hop_latency_s"] = c.hop_latency_s;
  f["oversubscription"] = c.oversubscription;
  root["fabric"] = f;
  root["gdr"] = c.gdr;
  ojson nics = ojson::array();
  for (size_t k = 0; k < c.nics.size(); ++k) {
    const Node& n = c.server.nodes()[static_cast<size_t>(c.nics[k])];
    nics.push_back(ojson{{"id", n.id},
                         {"name", n.name},
                         {"model", n.nic_model},
                         {"ports", n.ports},
                         {"network_Bps", c.nic_Bps[k]},
                         {"leaf", c.leaf_of(0, static_cast<int>(k))}});
  }
  root["nics"] = nics;
  ojson gn = ojson::array();
  for (int g = 0; g < c.gpus; ++g) {
    const auto gg = static_cast<size_t>(g);
    gn.push_back(ojson{
        {"gpu", "gpu" + std::to_string(g)},
        {"nic",
         c.server.nodes()[static_cast<size_t>(c.nics[static_cast<size_t>(c.gpu_nic[gg])])].id},
        {"path_class", to_string(c.gpu_nic_class[gg])},
        {"gdr", static_cast<bool>(c.gpu_gdr[gg])},
        {"path_Bps", c.gpu_nic_Bps[gg]}});
  }
  root["gpu_nic"] = gn;
  ojson rows = ojson::array();
  for (const ClassRow& r : class_rows(t))
    rows.push_back(ojson{{"class", r.name},
                         {"pairs", r.pairs},
                         {"min_Bps", r.min_Bps},
                         {"max_Bps", r.max_Bps},
                         {"min_latency_s", r.min_latency_s},
                         {"max_latency_s", r.max_latency_s}});
  root["path_classes"] = rows;
  root["resources"] = t.resources().size();
  return root.dump(2) + "\n";
}

std::string cluster_matrix_text(const Topology& t) {
  const Cluster& c = *ImplAccess::of(t).cluster;
  std::ostringstream out;
  out << "# cluster " << t.name() << ": " << c.nodes << " nodes alike; node k's GPU j is gpu<k*"
      << c.gpus << "+j>. One node:\n";
  out << to_matrix_text(c.server);
  out << "# Between GPUs of different nodes: NET\n# Ordered GPU pairs by class:";
  for (const ClassRow& r : class_rows(t)) out << " " << r.name << "=" << r.pairs;
  out << "\n";
  return out.str();
}

}  // namespace sparsp::topology::detail
