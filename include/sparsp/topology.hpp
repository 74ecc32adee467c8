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
#include <utility>
#include <vector>

#include "sparsp/status.hpp"

namespace sparsp::topology {

namespace detail {
struct ImplAccess;
}

enum class NodeKind { gpu, pcie_switch, root_port, cpu, nvswitch, nic };
/// c2c: NVLink-C2C from a Grace CPU to its Hopper/Blackwell GPU, the GPU's host link where PCIe
/// would be (a tree edge, cpu upstream); its capacity is given (capacity_Bps).
enum class LinkKind { pcie, nvlink, upi, xgmi, c2c };

/// GPU-pair path classes exactly as `nvidia-smi topo -m` defines them (legend strings
/// "X", "NV#", "PIX", "PXB", "PHB", "NODE", "SYS"), and "NET" for two GPUs in different nodes of
/// a cluster (the pair talks over the network; NCCL's PATH_NET).
enum class PathClass { self, nvlink, pix, pxb, phb, node, sys, net };

/// How a GPU-to-GPU transfer is carried.
enum class RouteMode {
  automatic,    ///< P2P where the pair supports it, otherwise host-staged
  p2p,          ///< direct peer access; route() errors where P2P is unavailable
  host_staged,  ///< always GPU -> pinned host buffer (NUMA node of the source) -> GPU
};

/// Properties of one GPU model. Defaults are per model in the preset table (topology/gpu_models.*),
/// each with its datasheet source.
struct GpuSpec {
  std::string model;                ///< e.g. "NVIDIA GeForce RTX 4090"
  int sm_count = 0;                 ///< streaming multiprocessors
  int copy_engines = 2;             ///< asynchronous copy engines usable for transfers
  double memory_bytes = 0;          ///< device memory
  double peak_bf16_flops = 0;       ///< dense bf16 tensor-core peak, FLOP/s
  double memory_bandwidth_Bps = 0;  ///< device memory bandwidth, bytes/s
  bool p2p_capable = true;          ///< false for GeForce models under the stock driver
  // Registry facts (configs/gpus/models.json, each with its source there); 0 / empty: unknown.
  std::string architecture;          ///< "hopper", "ampere", ... (lower case)
  int sm_version = 0;                ///< compute capability x10 (90 = sm_90)
  int pcie_gen = 0;                  ///< the card's own PCIe generation (1..6)
  int pcie_width = 0;                ///< the card's own PCIe width
  int nvlink_gen = 0;                ///< NVLink generation (0: none)
  int nvlink_links = 0;              ///< NVLinks per GPU
  double c2c_Bps = 0;  ///< NVLink-C2C to its CPU, nominal per direction, bytes/s (0: none)
  double nvlink_per_link_Bps = 0;    ///< nominal rate of one NVLink per direction, bytes/s
  std::vector<std::string> aliases;  ///< other names (nvidia-smi's, short forms)
  std::vector<int> pci_device_ids;   ///< PCI device ids (vendor 0x10de)
};

struct Node {
  std::string id;
  NodeKind kind = NodeKind::gpu;
  std::optional<GpuSpec> gpu;     ///< set iff kind == gpu
  bool acs_redirect = false;      ///< pcie_switch: peer traffic hairpins through the root port
  int numa_node = -1;             ///< cpu: its socket index 0..C-1; others: -1 (from the tree)
  int numa_id = -1;               ///< cpu: the OS NUMA node number (as nvidia-smi and NCCL print
                                  ///< it), -1: same as numa_node
  /// nic: the card's model as the NIC table names it (find_nic_model: "ConnectX-7"); "" unknown.
  std::string nic_model;
  /// nic: line rate of one network port, bytes/s (JSON "rate_Gbps", per port); 0: the model's.
  double nic_rate_Bps = 0;
  /// gpu: the NUMA node of the GPU's own memory where the OS exposes it as one (nvidia-smi's
  /// "GPU NUMA ID": Grace Hopper's coherent HBM, 4/12/20/28 on a quad GH200), -1: none ("N/A").
  int memory_numa_id = -1;
  int ports = 1;                  ///< nic: network ports of the card (a dual-port card is 2)
  /// nic: the OS device name of each port as the input gives it (nvidia-smi's NIC columns or
  /// "NIC Legend", NCCL's <net name>), a card's ports joined by ",": "mlx5_0,mlx5_1"; "" unknown.
  std::string name;
  double host_memory_Bps = 0;     ///< cpu: host DRAM bandwidth of its NUMA node, reads and
                                  ///< writes together (one shared capacity)
  double root_complex_Bps = 0;    ///< cpu: aggregate root-complex capacity, 0 = unlimited
  double peer_coefficient = 1.0;  ///< cpu: cost per byte of peer traffic turning at this root
                                  ///< complex (NCCL charges Intel root complexes 1.2x)
  /// pcie_switch: id of the physical switch chip this (virtual) switch is a partition of; ""
  /// none. Peer traffic between two partitions of one chip crosses the chip's internal fabric
  /// (Options::chip_fabric_Bps), not their uplinks and the CPU.
  std::string chip;
  /// cpu: platform family (find_cpu_family: "amd-genoa", "amd-turin", "amd-trpro-7000",
  /// "intel-spr", "intel-emr"); "" unknown. Sets the duplex factor of the PCIe links below it
  /// and the cross-socket P2P efficiency, where published (topology/README.md).
  std::string family;
};

struct Link {
  std::string a, b;  ///< node ids; for PCIe, a is the upstream side
  LinkKind kind = LinkKind::pcie;
  int pcie_gen = 0;                ///< 1..6 for pcie
  int pcie_width = 0;              ///< 1, 2, 4, 8 or 16 for pcie
  int nvlink_count = 0;            ///< bonded links for nvlink
  double nvlink_per_link_Bps = 0;  ///< nvlink: nominal data rate of one link per direction
  double capacity_Bps = 0;         ///< usable per direction (derived or measured override)
  double latency_s = 0;            ///< one-way latency of this hop
  double duplex_factor = 1.0;      ///< both directions together carry at most
                                   ///< 2 * duplex_factor * capacity_Bps
  bool capacity_measured = false;  ///< capacity_Bps is a measured override, not derived
};

enum class ResourceKind {
  link_direction,
  link_duplex,
  root_complex,
  inter_socket,
  host_memory,
  switch_fabric,  ///< a partitioned switch chip's internal fabric ("chip:<id>")
};

/// One shared capacity: sum over flows f using it of coefficient_f * rate_f <= capacity_Bps.
struct Resource {
  std::string name;  ///< e.g. "gpu0->sw0", "gpu0<->sw0", "cpu0.rc", "host0.mem"
  ResourceKind kind = ResourceKind::link_direction;
  double capacity_Bps = 0;
  /// true: it can never be a bottleneck, because every route using it also uses one of a set of
  /// resources whose capacities sum to at most its own (coefficient 1 on both). Set for the
  /// leaf uplinks of a cluster fabric without oversubscription (capacity = the leaf's NIC links
  /// together; every flow through it crosses one of them). The simulator keeps such a resource
  /// out of the sharing problem (its load is still reported), so a cluster splits into small
  /// independent problems; the allocation is the same.
  bool never_binds = false;
};

struct ResourceUse {
  int resource = -1;         ///< index into Topology::resources()
  double coefficient = 1.0;  ///< bytes of capacity consumed per byte moved
};

/// One leg of a route: a single flow from `src` to `dst` endpoints.
struct RouteLeg {
  std::string src, dst;
  std::vector<std::string> hops;  ///< node ids visited, src first, dst last
  std::vector<ResourceUse> uses;  ///< sorted by resource index, no duplicates
  double latency_s = 0;           ///< sum of hop latencies
};

/// How data travels from one endpoint to another. A direct route has one leg; a host-staged
/// GPU-to-GPU route has two (src GPU -> staging host, staging host -> dst GPU), which the
/// simulator pipelines in chunks.
struct Route {
  PathClass path_class = PathClass::sys;  ///< between GPUs; for GPU<->host: phb/node/sys
  bool host_staged = false;
  std::string staging_host;  ///< "host<k>" when host_staged
  std::vector<RouteLeg> legs;
};

/// Measured NCCL send/recv throughput between two GPUs of this machine (`sparsp calibrate`'s
/// nccl:* fits, NCCL 2.28 on the two-GPU H200 machine: replay/RESULTS.md). The simulator applies
/// it to SM-driven (Engine::sm) GPU-to-GPU transfers: each at most `*_Bps`, all of them between
/// one GPU pair together (both directions) at most `*_bidir_Bps`. "p2p": NCCL's transport where
/// the pair has peer access (NVLink or PCIe P2P); "host": its host-memory (SHM) path, used where
/// the route is host-staged (no P2P, or NCCL_P2P_DISABLE=1). The same figures serve every pair
/// (measured on the first two GPUs). 0: not measured; the link capacities alone apply.
struct NcclFigures {
  double p2p_Bps = 0;         ///< one direction alone
  double p2p_bidir_Bps = 0;   ///< both directions at once, sum
  double host_Bps = 0;        ///< one direction alone, host path
  double host_bidir_Bps = 0;  ///< both directions at once, sum, host path
  double p2p_latency_s = 0;   ///< fitted latency of one send/recv (replaces the simulator's
  double host_latency_s = 0;  ///< launch overhead for such transfers); 0: not measured
  /// NCCL_P2P_LEVEL override (JSON "p2p_level": "LOC", "NVL", "PIX", "PXB", "PHB" or "SYS"):
  /// NCCL uses its P2P transport between two GPUs with peer access when their path is at most
  /// this far (PHB includes nvidia-smi's NODE, as NCCL has no NODE level); empty: NCCL's default
  /// (RankTopology::nccl_p2p).
  std::string p2p_level;
  /// One measured collective time (JSON nccl.collectives.<name>[i]).
  struct CollectivePoint {
    int gpus = 0;                   ///< ranks of the communicator, >= 2
    double bytes = 0;               ///< nccl-tests size (per rank), > 0
    double time_s = 0;              ///< file: time_us, > 0
    std::string transport = "p2p";  ///< "p2p" | "shm" | "net"
  };
  /// Per collective name ("all_to_all", "all_gather", "reduce_scatter", "all_reduce",
  /// "send_recv"), its points in file order; used in place of NCCL's model where they cover the
  /// case (sim/README.md "NCCL collectives").
  std::vector<std::pair<std::string, std::vector<CollectivePoint>>> collectives;
  bool any() const {
    return p2p_Bps > 0 || p2p_bidir_Bps > 0 || host_Bps > 0 || host_bidir_Bps > 0 ||
           p2p_latency_s > 0 || host_latency_s > 0 || !p2p_level.empty() || !collectives.empty();
  }
  /// Whether the measured send/recv figures above (not p2p_level / collectives) are given.
  bool any_send_recv() const {
    return p2p_Bps > 0 || p2p_bidir_Bps > 0 || host_Bps > 0 || host_bidir_Bps > 0 ||
           p2p_latency_s > 0 || host_latency_s > 0;
  }
};

/// One measured compute figure set of a GPU model (topology JSON "measured_compute", one array
/// entry each; configs/README.md). Written by `sparsp calibrate`, by hand or by the PyTorch
/// bridge. Every figure is >= 0 and finite; 0 / empty: not measured.
struct MeasuredCompute {
  std::string gpu_model;  ///< the registry's full name (lookup_gpu_model of the file's value)
  std::string kernel;     ///< kernel that was timed ("sparsp" = the replay's own, "fa3", ...)
  int head_dim = 0;       ///< head dimension it was timed at
  /// Block size (tokens) -> attention FLOP/s over active block pairs (file: TFLOP/s).
  std::vector<std::pair<int, double>> attention_flops_by_block;  ///< sorted by block
  double gemm_flops = 0;          ///< large bf16 GEMMs, FLOP/s (file: gemm_TFLOPs)
  double launch_overhead_s = -1;  ///< per kernel (file: launch_overhead_us); < 0: not measured
  /// Attention slowdown factors (time ratio - 1; file: contention.ce_copy, .sm_copy_per_sm);
  /// < 0: not measured.
  double contention_ce_copy = -1;         ///< beside copy-engine copies
  double contention_sm_copy_per_sm = -1;  ///< per SM taken by SM-driven copies
  std::string conditions;                 ///< free text: tokens, density, ... it was measured at
  std::string place;                      ///< JSON pointer of the entry ("/measured_compute/0")
};

class Topology {
 public:
  Topology();
  ~Topology();
  Topology(const Topology&);
  Topology& operator=(const Topology&);
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  /// Loads a topology JSON (full graph or template, see topology/README.md). Errors name the file
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
  /// NUMA node of the socket the GPU hangs from, as the OS numbers it (the cpu node's numa_id,
  /// else its numa_node).
  int gpu_numa_node(int index) const;
  /// NUMA node of the GPU's own memory (Node::memory_numa_id: nvidia-smi's GPU NUMA ID), -1 none.
  int gpu_memory_numa_id(int index) const;
  /// Index 0..num_sockets()-1 of the socket the GPU hangs from (its cpu node's numa_node; the
  /// host endpoint is host<gpu_socket>).
  int gpu_socket(int index) const;

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
  /// The resources of link `link`'s two directions, as indices into resources(): first a -> b
  /// (for PCIe, toward the device), second b -> a. Look a link's resources up here, not by
  /// name: a cluster prefixes the link ends ("node0/cpu0") and the resource name as a whole
  /// ("node0/cpu0->sw0"). REQUIRES: 0 <= link < links().size().
  std::pair<int, int> link_direction_resources(int link) const;
  /// Route between two endpoints ("gpuN" or "hostK"). Errors: unknown endpoint, no path,
  /// P2P requested where it is unavailable.
  Result<Route> route(std::string_view src, std::string_view dst,
                      RouteMode mode = RouteMode::automatic) const;

  /// Canonical JSON of the full graph (round-trips through from_json_text).
  std::string to_json() const;

  // ---- extensions (topology helper) -------------------------------------------------------------
  /// Where the description comes from (datasheet, write-up, importer input); may be empty.
  const std::string& source() const;
  /// Topology-level P2P switch (false: no PCIe P2P anywhere; NVLink pairs still peer).
  bool p2p_enabled() const;
  /// Whether PCIe P2P may cross sockets (many Intel platforms disable it).
  bool p2p_cross_socket() const;
  int num_switches() const;  ///< pcie_switch nodes
  int num_sockets() const;   ///< cpu nodes
  /// Index of a node by id, -1 if absent.
  int node_index(std::string_view id) const;
  /// Node index of GPU `index` (GPU order = order of gpu nodes in nodes()).
  int gpu_node(int index) const;
  /// Endpoint index: GPUs 0..num_gpus()-1, then host<k> at num_gpus()+k; -1 if unknown.
  int endpoint_index(std::string_view endpoint) const;
  /// Same as route() but by endpoint index and without copying: every route of one server is
  /// computed once at load time; a cluster's on the first call for that (src, dst, mode), then
  /// kept. The reference stays valid while the topology (or a copy of it) lives.
  /// REQUIRES: 0 <= src, dst < num_gpus() + host_endpoints().size(). Thread-safe.
  const Result<Route>& route_ref(int src, int dst, RouteMode mode = RouteMode::automatic) const;

  /// Builds a topology from in-memory nodes/links (importers, tests). `node_places` and
  /// `link_places` (same length as nodes/links, or empty) name where each came from for errors,
  /// e.g. "/nodes/3" or "12"; `source_name` is the file. Validates exactly as from_json_text.
  struct Options {
    bool p2p = true;               ///< topology-level P2P switch
    bool p2p_cross_socket = true;  ///< PCIe P2P across sockets allowed
    /// Per-pair overrides (GPU indices i < j, allowed?), applied after every other rule.
    std::vector<std::pair<std::pair<int, int>, bool>> p2p_overrides;
    NcclFigures nccl;  ///< measured NCCL throughput (JSON "nccl"), if any
    /// What an importer assumed or dropped (JSON "source_notes"), one line each.
    std::vector<std::string> notes;
    /// Measured compute figures (JSON "measured_compute"), in file order.
    std::vector<MeasuredCompute> measured_compute;
    /// Switch chips with a capped internal fabric (JSON "chips": {"<id>": {"fabric_GBps": N}}):
    /// (chip id, bytes/s for peer traffic between its partitions, both directions summed). A
    /// chip not listed has an unlimited fabric.
    std::vector<std::pair<std::string, double>> chip_fabric_Bps;
    /// Peer-concurrency cost of this machine's PCIe fabric (JSON "peer_concurrency_cost", a
    /// number in [0, 100]): replaces sim::SimOptions::peer_concurrency_cost for every GPU of this
    /// topology (a GPU sending and receiving m >= 2 PCIe peer streams at once moves at most
    /// 2 x duplex x link / (1 + cost (m - 1)) in and out together). < 0: not given (the
    /// simulator's default). Source: the file's own (e.g. a published all-to-all through a CPU
    /// root complex; sim/README.md "NCCL P2P through the CPU").
    double peer_concurrency_cost = -1;
    /// Per switch chip (JSON "chips": {"<id>": {"peer_concurrency_cost": N}}, N in [0, 100]):
    /// (chip id, cost) for every GPU below a partition of that chip (the lowest pcie_switch above
    /// the GPU with a "chip" key). Replaces peer_concurrency_cost (the machine's) for those GPUs;
    /// GPUs of a chip not listed keep the machine's. Why per chip: two servers with the same GPU
    /// and 7 peers per GPU move 21 and 31.8 GB/s per GPU in an all-to-all (sim/README.md,
    /// "Peer concurrency per switch chip"), so the cost is the switch's, not the GPU's.
    std::vector<std::pair<std::string, double>> chip_peer_concurrency_cost;
    /// Host reads under writes of this machine (JSON "host_read_under_write", a number in
    /// [0.01, 1]; 1 = off; in a cluster's server it applies in every node): replaces
    /// sim::SimOptions::host_read_under_write. < 0: not given (the
    /// simulator's default 0.49, nvbandwidth A100 PCIe; sim/README.md "Host reads under writes").
    double host_read_under_write = -1;
  };
  static Result<Topology> build(std::string name, std::string source, std::vector<Node> nodes,
                                std::vector<Link> links, Options options,
                                const std::string& source_name,
                                std::vector<std::string> node_places = {},
                                std::vector<std::string> link_places = {});
  const Options& options() const;
  /// Whether GPUs i and j hang below two different partitions of one switch chip (their peer
  /// traffic crosses the chip's fabric; `topo show` marks such pairs).
  bool same_switch_chip(int i, int j) const;
  /// The peer-concurrency cost that applies to GPU `gpu`: its switch chip's
  /// (Options::chip_peer_concurrency_cost), else the machine's (Options::peer_concurrency_cost);
  /// < 0 when neither is given (the simulator's default applies). REQUIRES: 0 <= gpu < num_gpus().
  double peer_concurrency_cost(int gpu) const;

  // ---- clusters (topology/cluster.cpp; the JSON in configs/README.md "Cluster topologies") ------
  /// Whether this is a cluster of several server nodes joined by a network fabric. In a cluster,
  /// GPUs are numbered node by node (node k's GPU j is gpu<k * gpus_per_node + j>), hosts too
  /// (host<k * hosts_per_node + j>), and endpoints may also be named "node<k>/gpu<j>",
  /// "node<k>/host<j>". nodes(), links() and resources() hold every server's, ids and names
  /// prefixed "node<k>/", then the fabric's resources ("node<k>/nic<i>->leaf<l>", ...).
  bool is_cluster() const;
  int num_nodes() const;      ///< server nodes (1 for one server)
  int gpus_per_node() const;  ///< num_gpus() for one server
  /// The node GPU `index` belongs to (0 for one server).
  int node_of_gpu(int index) const;
  /// One node's server topology (NICs included); REQUIRES is_cluster().
  const Topology& server() const;
  /// Routes held in memory: every (mode, src, dst) of one server, precomputed at load; for a
  /// cluster, those computed so far (route_ref computes on demand and keeps each one), so the
  /// count grows with the pairs asked for, not with GPUs^2.
  std::size_t cached_routes() const;

  /// Opaque implementation state (topology/topology_impl.hpp).
  struct Impl;

 private:
  friend struct detail::ImplAccess;
  std::unique_ptr<Impl> impl_;
};

/// One network adapter model (topology/nic_models.cpp, each figure with its datasheet source).
struct NicModel {
  std::string name;                  ///< "ConnectX-7"
  double port_rate_Bps = 0;          ///< line rate of one port, bytes/s (400 Gb/s = 50e9)
  int ports = 1;                     ///< ports of the usual card
  int pcie_gen = 0, pcie_width = 0;  ///< host interface
  bool gdr = true;                   ///< GPUDirect RDMA capable
  std::string source;
};
/// The NIC table, in name order.
const std::vector<NicModel>& nic_models();
/// The model with this name (case and punctuation insensitive: "cx7", "connectx-7"); nullopt.
std::optional<NicModel> find_nic_model(std::string_view name);

// ---- physical-layer models (topology/link_models.cpp; formulas and sources documented there) ----

/// Usable DMA bandwidth of one PCIe link direction in bytes/s:
///   lanes * rate_GTps[gen] * 1e9 / 8 * encoding[gen] * tlp_efficiency[gen] * kPcieDmaEfficiency.
/// REQUIRES: gen in 1..6, width in {1,2,4,8,16}. See topology/README.md for each factor's source.
double pcie_usable_Bps(int gen, int width);
/// Line rate before encoding (bytes/s per direction), for reports.
double pcie_raw_Bps(int gen, int width);
/// Default per-direction duplex factor of a PCIe link (both directions together carry at most
/// 2 * factor * capacity): 0.894 = 99.0 / (55.4 + 55.3), bandwidthTest bidirectional vs H2D+D2H
/// on the Gen5 x16 H200 replay machine (see topology/README.md).
double pcie_default_duplex_factor();
/// Usable NVLink bandwidth per direction: count * per_link_Bps * kNvlinkEfficiency (0.88, from the
/// H200 NV18 copy-engine measurement 396 GB/s of 18 x 25 GB/s nominal).
double nvlink_usable_Bps(int count, double per_link_Bps);
/// Nominal data rate of one NVLink (NVLink 3/4: 25 GB/s per direction).
double nvlink_default_per_link_Bps();
/// Nominal rate of one NVLink of generation `gen` per direction (NVLink 1: 20 GB/s, 2-4: 25 GB/s,
/// 5: 50 GB/s; sources in topology/README.md); 0 for an unknown generation.
double nvlink_per_link_Bps_of_gen(int gen);
/// NVLink generation of a compute capability x10 (sm 60 -> 1, 70 -> 2, 80 -> 3, 90 -> 4,
/// 100 -> 5), 0 when it has none or is unknown.
int nvlink_gen_of_sm(int sm_version);

/// GPU model table (topology/gpu_models.cpp), each entry with its datasheet source.
const std::vector<GpuSpec>& gpu_models();
/// Looks up a model by full or short name, case and punctuation insensitive ("rtx4090",
/// "NVIDIA GeForce RTX 4090", "h200"); nullopt if unknown.
std::optional<GpuSpec> find_gpu_model(std::string_view name);
/// As find_gpu_model, but errors say why: unknown name, or an alias that matches several models
/// ("A100"), listing them. `file` names the input in the message.
Result<GpuSpec> lookup_gpu_model(std::string_view name, const std::string& file);
/// The registry entry with this PCI device id (NVIDIA vendor 0x10de); nullopt if none.
std::optional<GpuSpec> find_gpu_model_by_pci_id(int device_id);

/// Per-platform PCIe figures of a CPU family (topology/cpu_families.cpp, each with its source).
struct CpuFamily {
  std::string name;               ///< e.g. "amd-genoa"
  double duplex_factor = 0;       ///< PCIe links below it; 0: not published (link default)
  double cross_socket_p2p = 1.0;  ///< PCIe P2P across sockets reaches this fraction of a link
  std::string source;             ///< where the figures come from
};
/// The family table, in name order.
const std::vector<CpuFamily>& cpu_families();
/// The family with this exact name; nullopt if unknown.
std::optional<CpuFamily> find_cpu_family(std::string_view name);

/// Names of the built-in presets (file stems of configs/topologies/*.json), sorted.
std::vector<std::string> preset_names();
/// Names of the built-in cluster presets (configs/clusters/*.json), sorted; Topology::load takes
/// them as it takes preset_names().
std::vector<std::string> cluster_preset_names();

// ---- importers and exporters (topology/import_*.cpp, topology/export.cpp)
// ------------------------

/// What an importer input cannot say. Empty/unset fields take the documented defaults.
struct ImportOptions {
  std::string gpu_model;      ///< model name (find_gpu_model); default "generic"
  int pcie_gen = 0;           ///< 0: the input's real figure, else the GPU model's, else 4
  int pcie_width = 0;         ///< 0: the input's figure, else 16
  std::optional<bool> p2p;    ///< default: the GPU model's p2p_capable
  bool acs_redirect = false;  ///< set on every inferred PCIe switch
  /// NVLink the input does not list, added only when the user says so: "nvswitch:N" (every GPU
  /// has N links into one NVSwitch fabric) or "direct:N" (N links per GPU, spread evenly over
  /// all peers); empty: none added.
  std::string nvlink;
};

/// `nvidia-smi topo -m` text (ANSI escapes, affinity columns, NIC rows/legend tolerated). GPU k of
/// the matrix becomes "gpu<k>"; PIX cliques -> one switch, PXB -> a switch above them, PHB -> one
/// host bridge (root_port), NODE -> one NUMA node, SYS -> separate sockets. Errors name the line.
Result<Topology> import_nvidia_smi(std::string_view text, const std::string& source_name,
                                   const ImportOptions& options = {});
/// NCCL topology XML (NCCL_TOPO_DUMP_FILE): system/cpu/pci/gpu/nvlink/nic. GPUs are numbered by
/// their `dev` attribute. Errors name the line.
Result<Topology> import_nccl_xml(std::string_view text, const std::string& source_name,
                                 const ImportOptions& options = {});

/// GPU x GPU path-class matrix in nvidia-smi's layout: header "\tGPU0\tGPU1...", one row per GPU,
/// tab separated, "X" on the diagonal, then the legend.
std::string to_matrix_text(const Topology& topo);
/// Graphviz DOT of nodes and links (labels carry kind and GB/s).
std::string to_dot(const Topology& topo);

/// Single-flow figures per GPU pair and GPU<->host (what `topo show` prints).
struct SingleFlowReport {
  std::vector<std::vector<PathClass>> path_class;
  std::vector<std::vector<int>> nvlink_count;
  std::vector<std::vector<bool>> p2p;                    ///< automatic mode uses direct P2P
  std::vector<std::vector<double>> bandwidth_Bps;        ///< one flow i->j alone (automatic mode)
  std::vector<std::vector<double>> bidir_bandwidth_Bps;  ///< i->j and j->i together, summed
  std::vector<std::vector<double>> latency_s;            ///< sum of hop latencies (all legs)
  std::vector<double> h2d_Bps, d2h_Bps;                  ///< GPU <-> host of its own NUMA node
  std::vector<double> h2d_bidir_Bps;                     ///< H2D and D2H together, summed
};
SingleFlowReport single_flow_report(const Topology& topo);
/// Max-min fair rates (bytes/s) of flows given as resource uses, solved by progressive filling
/// over topo.resources(). Used for the report's bidirectional figures; the simulator has its own.
std::vector<double> max_min_rates(const Topology& topo,
                                  const std::vector<std::vector<ResourceUse>>& flows);
/// Human-readable `topo show` text and its JSON (fields listed in cli/cmd_topo.cpp).
std::string show_text(const Topology& topo);
std::string show_json(const Topology& topo);

/// "X", "NV#" (with the count), "PIX", "PXB", "PHB", "NODE", "SYS", "NET".
std::string to_string(PathClass c, int nvlink_count = 0);
std::string to_string(NodeKind k);
std::string to_string(LinkKind k);

}  // namespace sparsp::topology
