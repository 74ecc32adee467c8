#pragma once
// NCCL's own cost model for one collective on one node, re-expressed (not copied) from NCCL
// 2.30.7, commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 of github.com/NVIDIA/nccl:
// src/graph/tuning.cc (ncclTopoTuneModel: baseLatencies, hwLatencies, llMaxBws,
// perChMaxRingLL128Bws, the ring bus-to-algorithm bandwidth ratio nRanks / nsteps;
// ncclTopoGetAlgoTime: time = latency + bytes / bandwidth, the tuner picking the fastest enabled
// protocol). Units here: seconds, bytes, bytes/s (NCCL's tables are in us and GB/s = 1e9 B/s).
//
// Scope (issue 19 item 1): ring all-gather, reduce-scatter and all-reduce with the
// LL / LL128 / Simple protocols on one node (hardware class NVLink or PCI); all-to-all and
// grouped send/recv as direct P2P (every rank to every other at once), with the transport P2P or
// SHM through host memory. The simulator times the transfers of a collective (sim::Transfer::
// collective) with the per-transfer terms below (collective_timing, sim/README.md "NCCL
// collectives"); the max-min flow model still shares the links they cross.
#include <array>
#include <string>
#include <vector>

namespace sparsp::sim::nccl {

enum class Collective { all_to_all, all_gather, reduce_scatter, all_reduce, send_recv };
enum class Protocol { ll, ll128, simple };
/// NCCL_HW_*: the link class the ring's intra-node hops run over.
enum class HwClass { nvlink, pci, net };
/// tuning.cc's compCapIndex rows: Volta (7.x), Ampere / Ada (8.x), Hopper (9.x), Blackwell (10+).
enum class Arch { volta, ampere, hopper, blackwell };

/// One ring as NCCL's graph search found it.
struct RingSetup {
  int ranks = 2;              ///< GPUs in the communicator, >= 2
  int channels = 2;           ///< ring channels (graph nChannels), >= 1
  double channel_Bps = 12e9;  ///< per-channel bandwidth of the ring graph (graph bwIntra)
  HwClass hw = HwClass::pci;
  Arch arch = Arch::ampere;
  /// LL128 is on by default only on Hopper / Blackwell (tuning.cc, protoEnable); false elsewhere.
  bool ll128_enabled = false;
};

/// Ring steps a rank's data makes: 2(P-1) for all-reduce, P-1 for all-gather / reduce-scatter,
/// P otherwise (tuning.cc nsteps).
int ring_steps(Collective c, int ranks);
/// Base latency + nsteps x per-hop hardware latency of the class, seconds.
double ring_latency_s(Collective c, Protocol p, const RingSetup& s);
/// Bus bandwidth: channels x channel_Bps, then LL at half of it capped by llMaxBw, LL128 at 0.92
/// of it capped by channels x perChMaxRingLL128Bw (tuning.cc "model refinements"), bytes/s.
double ring_bus_Bps(Protocol p, const RingSetup& s);
/// Algorithm bandwidth = bus bandwidth x P / nsteps, bytes/s.
double ring_algo_Bps(Collective c, Protocol p, const RingSetup& s);
/// latency + bytes / algorithm bandwidth; `bytes` is the collective's total size (nccl-tests'
/// "size": the gathered buffer for all-gather, the full input for reduce-scatter / all-reduce).
double ring_time_s(Collective c, Protocol p, double bytes, const RingSetup& s);
/// The enabled protocol of least ring_time_s (ties: LL, then LL128, then Simple).
Protocol choose_protocol(Collective c, double bytes, const RingSetup& s);

/// How bytes move between one GPU pair (paths.cc: P2P where p2pLevel allows it, else SHM).
enum class Transport { p2p, shm, net };

/// Direct all-to-all (or grouped send/recv with every peer) of `bytes` per rank in total, of
/// which (P-1)/P leave the rank. p2p: each GPU sends at `gpu_link_Bps` (its own link, one
/// direction). shm: each byte is written to and read back from host memory (shm.cc: the sender
/// copies into a host buffer the receiver reads), so the P ranks' traffic 2 x P x (P-1)/P x
/// bytes also shares `host_memory_Bps`; the slower of the two terms sets the time. Latency: one
/// Simple-protocol base + hardware hop latency of the class (PCI for SHM). net: not modelled
/// (returns -1; no NIC is described in the topology).
double alltoall_time_s(int ranks, double bytes, Transport t, double gpu_link_Bps,
                       double host_memory_Bps, HwClass hw);

// ---- point-to-point (send/recv, all-to-all) as NCCL runs it ----

/// Channels NCCL gives each peer of a send/recv: 2 over PCIe (and SHM); over NVLink
/// 2 x max(1, floor(path_Bps / per-link NVLink bandwidth of the arch)) (paths.cc
/// ncclTopoGetNchannels; per-link figures of graph/topo.h: 20 GB/s Volta / Ampere, 20.6 Hopper,
/// 40.1 Blackwell).
int p2p_channels_per_peer(HwClass hw, double path_Bps, Arch arch);
/// Protocol of one send/recv of `bytes`: LL when bytes <= channels x 16 KiB (enqueue.cc,
/// NCCL_P2P_LL_THRESHOLD = 16384), else Simple (NCCL runs point-to-point work on LL or Simple).
Protocol p2p_protocol(double bytes, int channels_per_peer);
/// Latency of one direct step: the protocol's base latency + one hardware hop of the class (the
/// tuning.cc ring rows, one step), seconds. SHM: class PCI.
double p2p_latency_s(Protocol p, HwClass hw);
/// Fraction of the path bandwidth a protocol carries: LL 0.5 (each 16-byte line carries 8 bytes
/// of data and 8 of flags; tuning.cc halves LL's bus bandwidth), LL128 0.92 (tuning.cc), Simple 1.
double protocol_efficiency(Protocol p);

/// NCCL's pipeline through a staged (SHM) or direct path: chunk of p2pChunkSize (init.cc:
/// 128 KiB on PCIe, 512 KiB when every path is NVLink) and NCCL_STEPS = 8 slots per channel.
constexpr double kP2pPciChunkBytes = 131072;
constexpr double kP2pNvlChunkBytes = 524288;
constexpr int kNcclSteps = 8;

// ---- per-transfer timing of a collective (what the simulator applies) ----

/// One measured point of a collective (topology JSON nccl.collectives, `sparsp calibrate`).
struct CollectivePoint {
  int gpus = 0;       ///< ranks of the communicator
  double bytes = 0;   ///< nccl-tests "size": per-rank buffer (all-to-all: the send buffer)
  double time_s = 0;  ///< measured time of the whole collective
  Transport transport = Transport::p2p;
};

/// Time of `bytes` on `gpus` ranks over `transport`, interpolated linearly in bytes between the
/// two nearest points of the same gpus and transport (points sorted or not). Covered: bytes
/// between the smallest and largest such point (inclusive); outside, or no such point: < 0.
double interpolate_points(const std::vector<CollectivePoint>& points, int gpus, double bytes,
                          Transport transport);

/// What the simulator applies to one transfer of a collective.
struct TransferTiming {
  double latency_s = 0;  ///< before its first byte (replaces the launch overhead)
  double cap_Bps = 0;    ///< its rate at most (0: none beyond the links)
  Protocol protocol = Protocol::simple;
  bool from_points = false;  ///< the measured points set it (else the model)
};

/// Where one transfer of a collective runs.
struct TransferContext {
  Collective op = Collective::all_to_all;
  int ranks = 2;                ///< communicator size P
  double collective_bytes = 0;  ///< nccl-tests size of the collective (per rank)
  double transfer_bytes = 0;    ///< this transfer's bytes
  Transport transport = Transport::p2p;
  HwClass hw = HwClass::pci;  ///< the pair's link class (NVLink or PCI)
  Arch arch = Arch::ampere;
  double path_Bps = 0;  ///< single-flow rate of this transfer's route (bus bandwidth of
                        ///< the pair: channels x per-channel bandwidth), > 0
};

/// The timing of one transfer so that, uncontended, the collective takes NCCL's time:
/// - ring ops (all-gather, reduce-scatter, all-reduce): the transfer is one of nsteps sequential
///   ring steps; channels = p2p_channels_per_peer, channel_Bps = path_Bps / channels; latency =
///   ring_latency_s / nsteps and cap = ring_bus_Bps of the chosen protocol, so nsteps steps of
///   transfer_bytes = collective_bytes / P take ring_time_s;
/// - direct ops (all-to-all, send/recv): latency = p2p_latency_s, cap = protocol_efficiency x
///   path_Bps, protocol by transfer_bytes (p2p_protocol);
/// - points covering (op, ranks, transport) at collective_bytes give the time T instead: the
///   model's latency L (at most T / 2) is kept and the cap makes the bandwidth part T - L
///   (ring: per step (T - L) / nsteps for transfer_bytes; direct: T - L for transfer_bytes).
/// REQUIRES: ranks >= 2, path_Bps > 0, bytes >= 0.
TransferTiming transfer_timing(const TransferContext& x,
                               const std::vector<CollectivePoint>& points);

/// Names as in files: "all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv";
/// transports "p2p", "shm", "net". parse_*: false when unknown.
const char* collective_name(Collective c);
bool parse_collective(const std::string& name, Collective* out);
const char* transport_name(Transport t);
bool parse_transport(const std::string& name, Transport* out);

}  // namespace sparsp::sim::nccl
