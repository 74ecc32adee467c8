#pragma once
// Builds the topology JSON (full-graph form of topology/README.md) from calibration fits.
// Private to replay/; pure function so tests can run it without a GPU.
#include <string>
#include <vector>

#include "sparsp/replay.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::replay::detail {

struct CalibratedGpu {
  std::string model;  ///< cudaDeviceProp::name, e.g. "NVIDIA H200"
  int sm_count = 0;
  int copy_engines = 2;  ///< cudaDeviceProp::asyncEngineCount
  double memory_bytes = 0;
  int numa_node = 0;                  ///< from sysfs; -1 unknown -> 0
  int pcie_gen = 5, pcie_width = 16;  ///< from sysfs max_link_speed / max_link_width
  double h2d_Bps = 0, d2h_Bps = 0;    ///< fitted bandwidths
  double bidir_aggregate_Bps = 0;     ///< both directions at once, sum
  double latency_s = 0;               ///< fitted single-copy latency (h2d/d2h mean)
  double d2d_Bps = 0;                 ///< device-local copy (bytes copied / s)
  double staged_chunk_s = 0;          ///< per-chunk overhead of a host-staged pipeline (D2H and
                              ///< H2D streams, 2 pinned buffers, event hand-offs); 0: unknown
};

/// One ordered GPU pair a -> b (indices into the `gpus` vector, not CUDA ordinals).
struct CalibratedPeer {
  int a = 0, b = 0;
  double uni_Bps = 0;              ///< fitted cudaMemcpyPeerAsync bandwidth a -> b
  double bidir_aggregate_Bps = 0;  ///< both ways at once, sum (set on the a < b entry)
  double latency_s = 0;            ///< fitted single-copy latency a -> b
  bool p2p = false;                ///< cudaDeviceCanAccessPeer(a, b)
  int nvlink_count = 0;            ///< NV# of `nvidia-smi topo -m` for the pair; 0: none/unknown
};

/// The pair is joined by NVLink: nvidia-smi reports NV# for it, or (no NV# known) its measured
/// peer bandwidth exceeds 1.25x the faster of the two GPUs' PCIe links, which no PCIe path can.
bool peer_is_nvlink(const CalibratedPeer& p, const std::vector<CalibratedGpu>& gpus);

/// How many of N copies started together ran at once, from each copy's end time (seconds, any
/// order, against the common start): N x first end / last end. One copy at a time (per-engine
/// FIFO, one engine) gives 1 (ends at t, 2t, ..., Nt); fair share among all N gives N (every copy
/// ends at Nt); two engines FIFO, 2. 0 for an empty list or a non-positive first end.
double concurrent_copies(const std::vector<double>& ends_s);

/// The GPU link's latency is the fitted single-copy latency minus `launch_overhead_s` (the
/// simulator adds its own per transfer, SimOptions::launch_overhead_s). The host-staged pipeline's
/// per-chunk cost is the simulator's SimOptions::staging_chunk_overhead_s, not part of the link
/// (staged_chunk_s is recorded in the machine JSON only).
/// `virtual_ranks` > 1: one GPU is modelled as that many ranks behind a virtual switch whose uplink
/// is the GPU's measured PCIe link and whose downlinks carry device-local copies (the `--devices
/// 0,0,...` replay mapping).
/// NVLink pairs (peer_is_nvlink) get one `nvlink` link: `count` = NV# (else the measured bandwidth
/// over 25 GB/s x 0.88 per link, topology/README.md), `capacity_GBps` = mean of the two measured
/// directions, `duplex_factor` = both-ways aggregate / (2 x capacity), `latency_us` = fitted peer
/// latency less `launch_overhead_s`. Other P2P pairs route over PCIe through the CPU.
/// `nccl` (measured NCCL send/recv figures) goes to the topology's "nccl" object when any is set.
std::string calibrated_topology_json(const std::string& name,
                                     const std::vector<CalibratedGpu>& gpus,
                                     const std::vector<CalibratedPeer>& peers, int virtual_ranks,
                                     double launch_overhead_s,
                                     const topology::NcclFigures& nccl = {},
                                     const std::string& measured_compute_json = "");

}  // namespace sparsp::replay::detail

namespace sparsp::replay::detail {
/// Rebuilds the topology from a machine JSON written by `calibrate` (no GPU needed), e.g. to fold
/// N ranks onto GPU 0 after the fact. Errors name the file and JSON pointer.
Result<std::string> topology_from_machine(const std::string& machine_json,
                                          const std::string& source_name, int virtual_ranks,
                                          double launch_overhead_s);
}  // namespace sparsp::replay::detail
