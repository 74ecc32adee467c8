#pragma once
// Private state of sparsp::topology::Topology, shared by the topology library's sources.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sparsp/topology.hpp"

namespace sparsp::topology {

namespace detail {
struct Cluster;  // topology/cluster.hpp
}

struct Topology::Impl {
  std::string name;
  std::string source;
  std::vector<Node> nodes;
  std::vector<Link> links;
  Options options;

  // ---- derived at build time ----
  std::map<std::string, int, std::less<>> index;  ///< node id -> node index
  std::vector<int> gpu_nodes;                     ///< GPU order -> node index
  std::vector<int> gpu_of_node;                   ///< node index -> GPU index or -1
  std::vector<int> cpu_of_numa;                   ///< NUMA node -> cpu node index
  std::vector<int> up_link;                       ///< node -> upstream PCIe link or -1
  std::vector<int> parent;                        ///< node -> upstream PCIe node or -1
  std::vector<int> node_cpu;                      ///< node -> cpu node at the top of its tree
  std::vector<Resource> resources;
  std::vector<int> res_forward, res_backward;      ///< link -> resource of a->b / b->a
  std::vector<int> res_duplex;                     ///< link -> duplex resource or -1
  std::vector<int> res_root_complex;               ///< node -> root complex resource or -1
  std::vector<int> res_host_memory;                ///< NUMA node -> host memory resource or -1
  std::map<std::string, int> res_chip;             ///< capped switch chip id -> fabric resource
  /// (src GPU node, dst GPU node) across sockets -> that pair's cross-socket P2P cap resource
  std::map<std::pair<int, int>, int> res_xsocket;
  std::vector<std::vector<bool>> same_chip;        ///< GPU x GPU: below two partitions of a chip
  std::vector<std::string> gpu_chip;               ///< GPU -> chip id of its partition, or ""
  std::vector<std::vector<int>> nvlinks;           ///< GPU x GPU bonded NVLink count
  std::vector<std::vector<PathClass>> path_class;  ///< GPU x GPU
  std::vector<std::vector<bool>> p2p;              ///< GPU x GPU direct peer access allowed
  std::vector<Result<Route>> routes;               ///< [mode][src][dst], endpoints = GPUs, hosts
  /// Set for a cluster (then the GPU x GPU matrices and `routes` above stay empty: routes are
  /// composed on demand from the server's pieces, topology/cluster.cpp). Shared by copies.
  std::shared_ptr<const detail::Cluster> cluster;

  int num_endpoints() const { return static_cast<int>(gpu_nodes.size() + cpu_of_numa.size()); }
};

namespace detail {
/// The topology library's way into a Topology's state (clusters are assembled outside build()).
struct ImplAccess {
  static Topology::Impl& of(Topology& t) { return *t.impl_; }
  static const Topology::Impl& of(const Topology& t) { return *t.impl_; }
};
}  // namespace detail

/// "place/field" for JSON-pointer places, the place itself for line numbers.
inline std::string field_place(const std::string& place, const std::string& field) {
  if (!place.empty() && place[0] == '/') return place + "/" + field;
  return place;
}

}  // namespace sparsp::topology
