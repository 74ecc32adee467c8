#pragma once
// A cluster of server nodes joined by a network fabric (topology/README.md "Clusters"): the
// composed Topology state, the on-demand route cache and the cluster reports. Private to the
// topology library.
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "topology_impl.hpp"

namespace sparsp::topology::detail {

/// What the cluster JSON says, checked (json_io.cpp): the server already holds its NICs.
struct ClusterInput {
  std::string name, source;
  Topology server;
  int nodes = 1;
  std::string fabric = "rail";  ///< "rail" | "leaf_spine"
  double port_Bps = 0;          ///< fabric port line rate per direction
  double hop_latency_s = 0;     ///< one-way latency of one fabric hop (NIC-leaf, leaf-spine)
  double oversubscription = 1;  ///< leaf down capacity / up capacity (leaf_spine; rail: 1)
  int nodes_per_leaf = 0;       ///< leaf_spine: nodes under one leaf
  bool gdr = true;              ///< GPUDirect RDMA allowed at all (NCCL_NET_GDR_LEVEL != LOC)
  std::string json;             ///< canonical cluster JSON (Topology::to_json)
};

struct Cluster {
  Topology server;
  std::string fabric;
  int nodes = 0, gpus = 0, hosts = 0;                 ///< per node: GPUs, host endpoints
  int tree_nodes = 0, tree_links = 0, resources = 0;  ///< per node
  double port_Bps = 0, hop_latency_s = 0, oversubscription = 1;
  int nodes_per_leaf = 0, leaves = 0;
  bool gdr = true;
  std::vector<int> nics;                           ///< server node index of each NIC, in node order
  std::vector<double> nic_Bps;                     ///< per NIC: network capacity per direction
  std::vector<int> gpu_nic;                        ///< local GPU -> the NIC it uses (NCCL's choice)
  std::vector<PathClass> gpu_nic_class;            ///< local GPU -> class of its path to that NIC
  std::vector<double> gpu_nic_Bps;                 ///< local GPU -> single-flow rate of that path
  std::vector<bool> gpu_gdr;                       ///< local GPU -> GPUDirect RDMA to its NIC
  std::vector<RouteLeg> gpu_to_nic, nic_to_gpu;    ///< [gpu * nics + nic], server terms
  std::vector<RouteLeg> host_to_nic, nic_to_host;  ///< [host * nics + nic], server terms
  int fabric_base = 0;                             ///< index of the first fabric resource
  std::string json;

  int leaf_of(int node, int nic) const { return fabric == "rail" ? nic : node / nodes_per_leaf; }
  int nic_up(int node, int nic) const {
    return fabric_base + 2 * (node * static_cast<int>(nics.size()) + nic);
  }
  int leaf_up(int leaf) const {
    return fabric_base + 2 * nodes * static_cast<int>(nics.size()) + 2 * leaf;
  }

  /// The route between two global endpoints (not cached).
  Result<Route> compute(int s, int d, RouteMode mode, const std::string& name) const;

  mutable std::shared_mutex mu;
  mutable std::unordered_map<std::uint64_t, std::unique_ptr<const Result<Route>>> cache;
};

/// Assembles the cluster Topology (nodes, links and resources of every node, prefixed, then the
/// fabric's), choosing each GPU's NIC.
Result<Topology> make_cluster(ClusterInput in);
/// route_ref of a cluster: cached, thread-safe, stable references.
const Result<Route>& cluster_route_ref(const Topology& t, int src, int dst, RouteMode mode);
/// `topo show` / `topo show --json` / `topo matrix` of a cluster: by path class, not per pair.
std::string cluster_show_text(const Topology& t);
std::string cluster_show_json(const Topology& t);
std::string cluster_matrix_text(const Topology& t);

}  // namespace sparsp::topology::detail
