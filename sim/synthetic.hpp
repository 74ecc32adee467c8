#pragma once
// Synthetic networks and flow sets for the benchmarks and the SimGrid cross-check: built directly
// as resources + uses-vectors (no Topology), so the same flow set can be fed to the engine and to
// SimGrid. Deterministic: one seeded SplitMix64 generator, no std distributions (whose output
// differs between standard libraries).
#include <cstdint>
#include <string>
#include <vector>

#include "lmm.hpp"

namespace sparsp::sim::synthetic {

struct Net {
  std::vector<double> capacity_Bps;
  std::vector<std::string> names;
  /// Per constraint (empty: none): 1 where it can never bind (lmm.hpp); the rail cluster's leaf
  /// uplinks, whose capacity is that of the NICs below them.
  std::vector<uint8_t> never_binds;
  /// true: constraints 2l and 2l+1 are the two directions of split-duplex link l (SimGrid
  /// SPLITDUPLEX); false: each constraint is its own shared resource (SimGrid SHARED link).
  bool split_duplex_pairs = false;
  int hosts = 0;
  std::vector<std::vector<lmm::Use>> routes;  ///< [src * hosts + dst]; empty for src == dst
                                              ///< (empty for a rail cluster: see route())
  std::vector<double> latency_s;              ///< per route (empty for a rail cluster)
  /// Rail cluster only (rail_cluster): GPUs per node, and the first constraint of each kind.
  int gpus_per_node = 0;
  int rail_gpu_base = -1, rail_nic_base = -1, rail_leaf_base = -1;

  /// The uses-vector of src -> dst, sorted by constraint (src != dst): routes[src * hosts + dst],
  /// or computed on demand for a rail cluster, whose hosts^2 routes are not stored.
  std::vector<lmm::Use> route(int src, int dst) const;
};

/// A PCIe GPU server: 2 sockets, gpus / 2 per socket behind switches of (up to) 8 GPUs (8 GPUs:
/// one switch of 4 per socket). Per GPU link and switch uplink: 25 GB/s per direction, 40 GB/s
/// both ways together (duplex constraint); root complex 60 GB/s per socket; inter-socket 20 GB/s
/// per direction; 0.5 us per hop. All coefficients 1 (so SimGrid can model it exactly).
Net pcie_server(int gpus);

/// A rail-optimised GPU cluster of `nodes` nodes of 8 GPUs, the 16x8-h100-ndr-rail preset's shape
/// (configs/clusters) scaled out, with every coefficient 1 so that SimGrid models it exactly:
/// per GPU an NVLink port to the node's NVSwitch (450 GB/s per direction) and a PCIe Gen5 link
/// to its NIC's switch (64 GB/s per direction); one 400 Gb/s NIC per GPU (50 GB/s per direction),
/// NIC k of every node on rail leaf k; leaves joined by a non-blocking spine (per leaf, up and
/// down: nodes x 50 GB/s). Routes: same node, NVLink out + in; other node, PCIe up, NIC tx, NIC
/// rx, PCIe down, plus leaf up and leaf down when the GPUs sit on different rails. Constraints:
/// 6 per GPU + 2 per leaf (6,160 at 128 nodes); routes are computed on demand (Net::route).
/// The leaf constraints never bind (never_binds): a rail's flows to other rails all cross the
/// NIC links of that rail, whose capacities sum to the leaf's.
Net rail_cluster(int nodes);

/// Random split-duplex network: `links` links of 1-50 GB/s per direction and 0-5 us latency;
/// each ordered host pair routes over 1-5 random links, each in a random direction.
Net random_split_duplex(uint64_t seed, int hosts, int links);

struct FlowSpec {
  int src = 0, dst = 0;
  double bytes = 0;
  double start_s = 0;
};

/// n flows between random distinct hosts, bytes uniform in [min_bytes, max_bytes] (whole bytes),
/// start uniform in [0, max_start_s].
std::vector<FlowSpec> random_flows(const Net& net, int n, uint64_t seed, double min_bytes,
                                   double max_bytes, double max_start_s);

/// SplitMix64 (Steele, Lea, Flood 2014): next 64-bit value.
uint64_t splitmix64(uint64_t& state);
/// Uniform double in [0, 1) from the top 53 bits.
double uniform01(uint64_t& state);

}  // namespace sparsp::sim::synthetic
