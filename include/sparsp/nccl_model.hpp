#pragma once
// NCCL's own cost model for one collective on one node, re-expressed (not copied) from NCCL
// 2.30.7, commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 of github.com/NVIDIA/nccl:
// src/graph/tuning.cc (ncclTopoTuneModel: baseLatencies, hwLatencies, llMaxBws,
// perChMaxRingLL128Bws, the ring bus-to-algorithm bandwidth ratio nRanks / nsteps;
// ncclTopoGetAlgoTime: time = latency + bytes / bandwidth, the tuner picking the fastest enabled
// protocol). Units here: seconds, bytes, bytes/s (NCCL's tables are in us and GB/s = 1e9 B/s).
//
// Scope (issue 19 item 1, first part): ring all-gather, reduce-scatter and all-reduce with the
// LL / LL128 / Simple protocols on one node (hardware class NVLink or PCI); all-to-all and
// grouped send/recv as direct P2P (every rank to every other at once), with the transport P2P or
// SHM through host memory. The simulator does not time its collective messages through this
// model yet (sim/RESULTS.md "NCCL collective model").
#include <array>

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

}  // namespace sparsp::sim::nccl
