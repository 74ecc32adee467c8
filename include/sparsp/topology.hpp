#pragma once
// Topology of one multi-GPU server: GPUs, PCIe switches, root ports / host bridges, CPU sockets
// (root complex, NUMA node, host memory), NVSwitches, NICs, and the links between them.
//
// The topology is also the *compiler* of the bandwidth-sharing constraints the simulator solves:
// resources() lists every shared capacity (one per link direction, one per duplex link for the
// sum of both directions, root complexes, inter-socket fabric, host memory per NUMA node) and
// route() maps a transfer between two endpoints onto (resource, coefficient) pairs. The simulator
// (sim/) knows nothing about PCIe; it only sees resources and routes.
//
// Endpoints are named as in every sparsp file: GPUs "gpu0".."gpuN-1" (in the topology's GPU
// order), host memory of NUMA node k "host<k>".
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sparsp/status.hpp"

namespace sparsp::topology {

enum class NodeKind { gpu, pcie_switch, root_port, cpu, nvswitch, nic };
enum class LinkKind { pcie, nvlink, upi, xgmi };

/// GPU-pair path classes exactly as `nvidia-smi topo -m` defines them (legend strings
/// "X", "NV#", "PIX", "PXB", "PHB", "NODE", "SYS").
enum class PathClass { self, nvlink, pix, pxb, phb, node, sys };

/// How a GPU-to-GPU transfer is carried.
enum class RouteMode {
  automatic,    ///< P2P where the pair supports it, otherwise host-staged
  p2p,          ///< direct peer access; route() errors where P2P is unavailable
  host_staged,  ///< always GPU -> pinned host buffer (NUMA node of the source) -> GPU
};

/// Properties of one GPU model. Defaults are per model in the preset table (topology/gpu_models.*),
/// each with its datasheet source.
struct GpuSpec {
  std::string model;                 ///< e.g. "NVIDIA GeForce RTX 4090"
  int sm_count = 0;                  ///< streaming multiprocessors
  int copy_engines = 2;              ///< asynchronous copy engines usable for transfers
  double memory_bytes = 0;           ///< device memory
  double peak_bf16_flops = 0;        ///< dense bf16 tensor-core peak, FLOP/s
  double memory_bandwidth_Bps = 0;   ///< device memory bandwidth, bytes/s
  bool p2p_capable = true;           ///< false for GeForce models under the stock driver
};

struct Node {
  std::string id;
  NodeKind kind = NodeKind::gpu;
  std::optional<GpuSpec> gpu;        ///< set iff kind == gpu
  bool acs_redirect = false;         ///< pcie_switch: peer traffic hairpins through the root port
  int numa_node = -1;                ///< cpu: its NUMA node; others: -1 (derived from the tree)
  double host_memory_Bps = 0;        ///< cpu: host DRAM bandwidth of its NUMA node (per direction)
  double root_complex_Bps = 0;       ///< cpu: aggregate root-complex capacity, 0 = unlimited
  double peer_coefficient = 1.0;     ///< cpu: cost per byte of peer traffic turning at this root
                                     ///< complex (NCCL charges Intel root complexes 1.2x)
};

struct Link {
  std::string a, b;                  ///< node ids; for PCIe, a is the upstream side
  LinkKind kind = LinkKind::pcie;
  int pcie_gen = 0;                  ///< 1..6 for pcie
  int pcie_width = 0;                ///< 1, 2, 4, 8 or 16 for pcie
  int nvlink_count = 0;              ///< bonded links for nvlink
  double capacity_Bps = 0;           ///< usable per direction (derived or measured override)
  double latency_s = 0;              ///< one-way latency of this hop
  double duplex_factor = 1.0;        ///< both directions together carry at most
                                     ///< 2 * duplex_factor * capacity_Bps
};

enum class ResourceKind { link_direction, link_duplex, root_complex, inter_socket, host_memory };

/// One shared capacity: sum over flows f using it of coefficient_f * rate_f <= capacity_Bps.
struct Resource {
  std::string name;                  ///< e.g. "gpu0->sw0", "gpu0<->sw0", "cpu0.rc", "host0.mem"
  ResourceKind kind = ResourceKind::link_direction;
  double capacity_Bps = 0;
};

struct ResourceUse {
  int resource = -1;                 ///< index into Topology::resources()
  double coefficient = 1.0;          ///< bytes of capacity consumed per byte moved
};

/// One leg of a route: a single flow from `src` to `dst` endpoints.
struct RouteLeg {
  std::string src, dst;
  std::vector<std::string> hops;     ///< node ids visited, src first, dst last
  std::vector<ResourceUse> uses;     ///< sorted by resource index, no duplicates
  double latency_s = 0;              ///< sum of hop latencies
};

/// How data travels from one endpoint to another. A direct route has one leg; a host-staged
/// GPU-to-GPU route has two (src GPU -> staging host, staging host -> dst GPU), which the
/// simulator pipelines in chunks.
struct Route {
  PathClass path_class = PathClass::sys;  ///< between GPUs; for GPU<->host: phb/node/sys
  bool host_staged = false;
  std::string staging_host;          ///< "host<k>" when host_staged
  std::vector<RouteLeg> legs;
};

class Topology {
 public:
  Topology();
  ~Topology();
  Topology(const Topology&);
  Topology& operator=(const Topology&);
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  /// Loads a topology JSON (full graph or template, see configs/README.md). Errors name the file
  /// and the JSON pointer.
  static Result<Topology> from_json_file(const std::string& path);
  /// `source_name` is used in error messages in place of a file name.
  static Result<Topology> from_json_text(std::string_view text, const std::string& source_name);
  /// A preset from configs/topologies/ by name (file stem), or a path to a JSON file.
  static Result<Topology> load(const std::string& name_or_path);

  const std::string& name() const;
  const std::vector<Node>& nodes() const;
  const std::vector<Link>& links() const;

  int num_gpus() const;
  /// Endpoint names in GPU order: "gpu0", "gpu1", ...
  std::vector<std::string> gpu_endpoints() const;
  /// Endpoint names of host memories: "host0", ... one per NUMA node.
  std::vector<std::string> host_endpoints() const;
  const GpuSpec& gpu(int index) const;
  /// NUMA node of the socket the GPU hangs from.
  int gpu_numa_node(int index) const;

  /// Whether GPU i and j can use direct peer access (NVLink, or PCIe P2P allowed by model,
  /// topology and per-pair overrides).
  bool p2p_allowed(int i, int j) const;
  PathClass path_class(int i, int j) const;
  int nvlink_count(int i, int j) const;

  /// Node ids from GPU `index`'s parent up to and including its CPU socket, nearest first; used
  /// by topology-aware mapping (GPUs sharing a prefix share a switch, then a socket).
  std::vector<std::string> ancestors(int index) const;

  /// Every shared capacity of the machine, in a fixed deterministic order.
  const std::vector<Resource>& resources() const;
  /// Route between two endpoints ("gpuN" or "hostK"). Errors: unknown endpoint, no path,
  /// P2P requested where it is unavailable.
  Result<Route> route(std::string_view src, std::string_view dst,
                      RouteMode mode = RouteMode::automatic) const;

  /// Canonical JSON of the full graph (round-trips through from_json_text).
  std::string to_json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// "X", "NV#" (with the count), "PIX", "PXB", "PHB", "NODE", "SYS".
std::string to_string(PathClass c, int nvlink_count = 0);
std::string to_string(NodeKind k);
std::string to_string(LinkKind k);

}  // namespace sparsp::topology
