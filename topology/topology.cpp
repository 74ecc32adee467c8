// Topology: the accessors, the names of the kinds and path classes, route lookup by endpoint
// name, and build(), whose phases (builder.hpp) live in the build_*.cpp files.
#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include "builder.hpp"
#include "cluster.hpp"
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
    case PathClass::net:
      return "NET";
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
    case LinkKind::c2c:
      return "c2c";
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
bool Topology::same_switch_chip(int i, int j) const {
  if (const auto& c = impl_->cluster) {
    if (i / c->gpus != j / c->gpus) return false;
    return c->server.same_switch_chip(i % c->gpus, j % c->gpus);
  }
  return impl_->same_chip[static_cast<size_t>(i)][static_cast<size_t>(j)];
}
double Topology::peer_concurrency_cost(int gpu) const {
  if (const auto& c = impl_->cluster) return c->server.peer_concurrency_cost(gpu % c->gpus);
  const std::string& chip = impl_->gpu_chip[static_cast<size_t>(gpu)];
  if (!chip.empty())
    for (const auto& [id, cost] : impl_->options.chip_peer_concurrency_cost)
      if (id == chip) return cost;
  return impl_->options.peer_concurrency_cost;
}
bool Topology::is_cluster() const { return impl_->cluster != nullptr; }
int Topology::num_nodes() const { return impl_->cluster ? impl_->cluster->nodes : 1; }
int Topology::gpus_per_node() const { return impl_->cluster ? impl_->cluster->gpus : num_gpus(); }
int Topology::node_of_gpu(int index) const {
  return impl_->cluster ? index / impl_->cluster->gpus : 0;
}
const Topology& Topology::server() const { return impl_->cluster->server; }
std::size_t Topology::cached_routes() const {
  if (const auto& c = impl_->cluster) {
    std::shared_lock lock(c->mu);
    return c->cache.size();
  }
  return impl_->routes.size();
}
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
  const Node& cpu = impl_->nodes[impl_->node_cpu[impl_->gpu_nodes[index]]];
  return cpu.numa_id >= 0 ? cpu.numa_id : cpu.numa_node;
}

int Topology::gpu_memory_numa_id(int index) const {
  return impl_->nodes[impl_->gpu_nodes[index]].memory_numa_id;
}

int Topology::gpu_socket(int index) const {
  return impl_->nodes[impl_->node_cpu[impl_->gpu_nodes[index]]].numa_node;
}

bool Topology::p2p_allowed(int i, int j) const {
  if (const auto& c = impl_->cluster)
    return i / c->gpus == j / c->gpus && c->server.p2p_allowed(i % c->gpus, j % c->gpus);
  return impl_->p2p[i][j];
}
PathClass Topology::path_class(int i, int j) const {
  if (const auto& c = impl_->cluster)
    return i / c->gpus != j / c->gpus ? PathClass::net
                                      : c->server.path_class(i % c->gpus, j % c->gpus);
  return impl_->path_class[i][j];
}
int Topology::nvlink_count(int i, int j) const {
  if (const auto& c = impl_->cluster)
    return i / c->gpus != j / c->gpus ? 0 : c->server.nvlink_count(i % c->gpus, j % c->gpus);
  return impl_->nvlinks[i][j];
}

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

std::pair<int, int> Topology::link_direction_resources(int link) const {
  const auto i = static_cast<size_t>(link);
  return {impl_->res_forward[i], impl_->res_backward[i]};
}

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
  // A cluster's "node<k>/gpu<j>" / "node<k>/host<j>": node k's own numbering.
  if (const auto& c = impl_->cluster; c && endpoint.substr(0, 4) == "node") {
    const size_t slash = endpoint.find('/');
    if (slash == std::string_view::npos) return -1;
    const int k = parse_indexed(endpoint.substr(0, slash), "node");
    if (k < 0 || k >= c->nodes) return -1;
    const std::string_view rest = endpoint.substr(slash + 1);
    if (int g = parse_indexed(rest, "gpu"); g >= 0) return g < c->gpus ? k * c->gpus + g : -1;
    if (int h = parse_indexed(rest, "host"); h >= 0)
      return h < c->hosts ? num_gpus() + k * c->hosts + h : -1;
    return -1;
  }
  if (int g = parse_indexed(endpoint, "gpu"); g >= 0) return g < num_gpus() ? g : -1;
  if (int h = parse_indexed(endpoint, "host"); h >= 0)
    return h < num_sockets() ? num_gpus() + h : -1;
  return -1;
}

const Result<Route>& Topology::route_ref(int src, int dst, RouteMode mode) const {
  if (impl_->cluster) return detail::cluster_route_ref(*this, src, dst, mode);
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

std::optional<Error> detail::Builder::run() {
  if (auto e = check_nodes()) return e;
  if (auto e = check_links()) return e;
  if (auto e = build_tree()) return e;
  if (auto e = check_sockets()) return e;
  apply_cpu_families();
  build_resources();
  build_gpu_matrices();
  build_routes();
  return std::nullopt;
}

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
  detail::Builder b(impl, source_name, node_places, link_places);
  if (auto e = b.run()) return *e;
  return t;
}

}  // namespace sparsp::topology
