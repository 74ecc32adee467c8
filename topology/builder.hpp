#pragma once
// Topology::build's Builder: the phases that validate a graph and derive its tree, resources,
// GPU matrices and routes. Private to the topology library; one source file per phase group.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "topology_impl.hpp"

namespace sparsp::topology::detail {

class Builder {
 public:
  Builder(Topology::Impl& t, const std::string& file, const std::vector<std::string>& node_places,
          const std::vector<std::string>& link_places)
      : t_(t), file_(file), node_places_(node_places), link_places_(link_places) {}

  /// Runs the phases in order; the first error found stops the build.
  std::optional<Error> run();

  // ---- pieces of cluster routes (topology/cluster.cpp), on an already built topology ----
  /// Fills the link lookup tables the legs below need.
  void prepare_legs() { index_links(); }
  /// PCIe leg between two tree nodes (GPU <-> NIC): up to where they meet, the root complex
  /// there, across sockets if need be, and down (the peer rules of pcie_path).
  RouteLeg tree_leg(int from, int to, std::string src, std::string dst) const;
  /// Host memory of NUMA node k <-> tree node `node` (NIC): host_leg's path for any node.
  RouteLeg host_tree_leg(int node, int k, bool to_host, std::string node_name) const;
  /// nvidia-smi's class of the PCIe path between two tree nodes (PIX, PXB, PHB, NODE, SYS).
  PathClass tree_class(int a, int b) const;

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

  // ---- node, link and socket checks (build_checks.cpp) ----
  std::optional<Error> check_nodes();
  std::optional<Error> check_node(size_t i, std::vector<int>& cpus);
  std::optional<Error> check_cpu_node(size_t i) const;
  std::optional<Error> assign_numa_nodes(const std::vector<int>& cpus);
  std::optional<Error> check_memory_numa_ids(const std::vector<int>& cpus) const;
  std::optional<Error> check_links();
  std::optional<Error> check_link(size_t i, std::set<std::pair<int, int>>& seen);
  std::optional<Error> check_pcie_link(size_t i, int a, int b);
  std::optional<Error> check_nvlink_link(size_t i, int a, int b);
  std::optional<Error> check_socket_link(size_t i, int a, int b) const;
  std::optional<Error> check_c2c_link(size_t i, int a, int b);
  std::optional<Error> claim_upstream(size_t i, int a, int b, const std::string& what);
  std::optional<Error> check_link_numbers(size_t i) const;
  std::optional<Error> check_sockets();

  // ---- the PCIe tree (build_tree.cpp) ----
  std::optional<Error> build_tree();
  std::optional<Error> assign_node_cpus();
  std::optional<Error> check_tree_reach() const;

  // ---- resources (build_resources.cpp) ----
  int add_resource(std::string name, ResourceKind kind, double capacity);
  void build_resources();

  // ---- GPU matrices and routes (build_routes.cpp) ----
  std::vector<int> chain(int v) const;
  int lowest_common(int a, int b) const;
  PathClass pcie_class(int gi, int gj) const;
  void build_gpu_matrices();
  void count_nvlinks();
  void classify_gpu_pairs();
  bool p2p_by_default(size_t i, size_t j) const;
  void apply_p2p_overrides();

  struct LegBuilder {
    std::vector<std::string> hops;
    std::map<int, double> uses;
    double latency_s = 0;
  };
  /// One NVSwitch a GPU pair reaches over NVLink: the links up and down, and its share weight.
  struct NvSwitchVia {
    int sw;
    int up;
    int down;
    int weight;
  };

  void use(LegBuilder& leg, int resource, double coefficient) const;
  void traverse(LegBuilder& leg, int li, int from) const;
  void climb(LegBuilder& leg, int from, int top) const;
  void descend(LegBuilder& leg, const std::vector<int>& up, int top) const;
  const std::vector<int>& socket_path(int from, int to) const;
  void cross_sockets(LegBuilder& leg, int from, int to, double rc_coefficient) const;
  RouteLeg finish(LegBuilder&& leg, std::string src, std::string dst) const;
  int gpu_numa_node(int g) const;
  RouteLeg host_leg(int g, int k, bool to_host) const;
  RouteLeg p2p_leg(int gi, int gj) const;
  void nvlink_path(LegBuilder& leg, int ni, int nj) const;
  std::vector<NvSwitchVia> nvswitch_vias(int ni, int nj) const;
  int pcie_turn(int ni, int nj) const;
  int chip_partition(int n) const;
  void apply_cpu_families();
  void pcie_path(LegBuilder& leg, int ni, int nj) const;
  Result<Route> make_route(int s, int d, RouteMode mode) const;
  std::string why_no_p2p(int i, int j) const;
  void index_links();
  void build_routes();

  Topology::Impl& t_;
  // Lookup tables for route building (filled by index_links at the start of build_routes).
  std::vector<int> end_a_, end_b_;                     ///< link -> node index of a / b
  std::vector<int> socket_links_;                      ///< upi/xgmi links
  std::map<std::pair<int, int>, int> nvlink_between_;  ///< gpu node pair -> nvlink
  std::map<int, std::map<int, int>> nvswitch_links_;   ///< nvswitch -> gpu node -> link
  mutable std::map<std::pair<int, int>, std::vector<int>> socket_paths_;
  const std::string& file_;
  const std::vector<std::string>& node_places_;
  const std::vector<std::string>& link_places_;
};

}  // namespace sparsp::topology::detail
