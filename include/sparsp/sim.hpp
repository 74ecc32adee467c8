#pragma once
// Discrete-event, flow-level simulation of transfers and compute on a Topology.
//
// Input: a Workload (transfers and compute tasks with dependencies and streams). Output: when each
// activity starts and ends, per-resource bytes and utilisation, the makespan and the critical path.
// The sharing model (max-min fairness over linear constraints, SimGrid's LMM formulation) is
// documented at the top of sim/lmm.hpp; this header is the public surface.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sparsp/nccl_model.hpp"
#include "sparsp/status.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::sim {

/// What drives a transfer.
enum class Engine {
  ce,    ///< a copy engine of the driving GPU (Transfer::driver; default the source GPU,
         ///< the destination for host->GPU); no SMs taken. Demand-directed schemes'
         ///< messages go from the block's owner, so by default the owner pushes
  sm,    ///< an SM-driven copy kernel (NCCL-style); takes `comm_sms` SMs while it runs
  host,  ///< host-driven memcpy (CPU threads); no GPU resources
};

/// Which GPU's copy engine drives a copy-engine transfer (Engine::ce only; sm and host ignore it).
enum class Driver {
  automatic,  ///< today's rule: the source GPU, or the destination for host->GPU
  src,        ///< push: the source GPU's engine writes to the destination
  dst,        ///< pull: the destination GPU's engine reads from the source
};

/// How a host-staged GPU-to-GPU transfer runs.
enum class Staging {
  pipelined,  ///< sparsp's own staging: chunks through pinned buffers, both legs overlapped
  driver,     ///< the CUDA driver's cudaMemcpyPeer fallback without peer access (what
           ///< p2pBandwidthLatencyTest's P2P=Disabled rows measure); SimOptions::driver_staging_*
};

/// The NCCL collective a transfer is one message of (JSON "collective": {"op", "ranks",
/// "bytes"}). Applied to SM-driven GPU-to-GPU transfers only: their latency and rate cap come
/// from nccl::transfer_timing (the topology's nccl.collectives points where they cover the case,
/// else NCCL's model), the links they cross still shared by max-min; host-staged ones run as
/// NCCL's SHM pipeline (128 KiB chunks, 8 slots per channel). sim/README.md "NCCL collectives".
struct CollectiveTag {
  bool set = false;  ///< false: not part of a collective
  nccl::Collective op = nccl::Collective::all_to_all;
  int ranks = 0;     ///< communicator size, >= 2
  double bytes = 0;  ///< nccl-tests size of the collective (per
                     ///< rank: all-to-all send buffer, all-gather
                     ///< output), > 0
};

struct Transfer {
  std::string id;        ///< unique within the workload
  std::string src, dst;  ///< endpoints "gpuN" / "hostK"
  double bytes = 0;
  std::vector<std::string> after;  ///< ids of activities that must end first
  /// Of the ids in `after`, compute tasks whose last wave's start (ComputeTask::
  /// last_wave_fraction), not their end, releases this transfer: a comm kernel at the attention
  /// stream's priority gets SMs as the attention kernel's last wave drains (sim/README.md "Last
  /// waves"; measured on an H200, sim/RESULTS.md). Each must also be in `after` and name a
  /// compute task (else an input error at /transfers/N/released_by_last_wave/K).
  std::vector<std::string> released_by_last_wave;
  Engine engine = Engine::ce;
  std::string stream;  ///< FIFO stream name (empty: its own stream)
  topology::RouteMode route = topology::RouteMode::automatic;
  double rate_cap_Bps = 0;               ///< 0 = uncapped
  double chunk_bytes = 0;                ///< host-staged pipeline chunk (0 = default 4 MiB)
  int staging_buffers = 0;               ///< host-staged buffers in flight (0 = default 2)
  int comm_sms = 0;                      ///< SMs taken while it runs, for Engine::sm (on the
                                         ///< source and destination GPU)
  int copy_engine = -1;                  ///< pin to this copy engine (-1: first free one)
  Driver driver = Driver::automatic;     ///< JSON "driver": "src" | "dst" (absent: automatic)
  Staging staging = Staging::pipelined;  ///< JSON "staging": "pipelined" | "driver"
  CollectiveTag collective;              ///< JSON "collective" (absent: none)
  // Plan metadata (carried, not interpreted by the engine):
  int layer = -1;
  std::vector<int32_t> kv_blocks;  ///< KV block ids carried
};

/// What a compute task computes (plan schema 2, policy/PLAN.md "Compute kinds"). Carried, not
/// interpreted by the engine: its time is `duration_s` (or `flops`) as before.
enum class TaskKind { attention, gemm, copy, other };

/// What a `copy` task's kernel does to its bytes, which sets its rate (plan key `copy_kind`,
/// policy/PLAN.md; policy::ComputeModel::copy_time_s): `plain` a contiguous copy or an
/// elementwise kernel streaming its operands (the default: every copy before copy_kind existed),
/// `transpose` a strided layout transpose (`.contiguous()` of a permuted view), `cast` a dtype
/// cast pair (widening + narrowing).
enum class CopyKind { plain, transpose, cast };

/// The compute a task describes. attention: the (query block, KV block, head) triples with the
/// query block owned by a rank in `q_ranks`, the KV block owned by a rank in `kv_ranks` (the
/// plan's block_owner), the head in [head_begin, head_end), and active in the layer's mask; so
/// one KV set per query block, shared across the heads of the range wherever the pattern's masks
/// are. `partial`: the output is a partial one (with its log-sum-exp) to be merged with the
/// rank's other pieces for the same queries. gemm: `count` GEMMs of m x n x k. copy: a
/// memory-bound transpose or contiguous copy moving `bytes` (read + written).
struct TaskCompute {
  TaskKind kind = TaskKind::attention;
  std::vector<int> q_ranks;                ///< attention; empty: the task's own rank
  std::vector<int> kv_ranks;               ///< attention; empty: unknown (plans of schema 1)
  int head_begin = 0, head_end = 0;        ///< attention; [0, 0): all heads
  bool partial = false;                    ///< attention
  int64_t m = 0, n = 0, k = 0, count = 0;  ///< gemm
  double bytes = 0;                        ///< copy: bytes read + written
  CopyKind copy_kind = CopyKind::plain;    ///< copy: what the kernel does (sets its rate)
};

const char* task_kind_name(TaskKind k);
/// "plain", "transpose", "cast".
const char* copy_kind_name(CopyKind k);

struct ComputeTask {
  std::string id;
  std::string gpu;        ///< "gpuN"
  double duration_s = 0;  ///< at full compute capacity (no SMs taken away)
  double flops = 0;       ///< alternative to duration_s (uses the GPU's FLOP/s)
  std::vector<std::string> after;
  std::string stream;
  int layer = -1;
  /// Fraction of its work in its last wave, in [0, 1]: a transfer that lists it in
  /// Transfer::released_by_last_wave starts when its remaining work falls to this fraction (1:
  /// at its start, one wave; 0: at its end, no wave term). Progress, so contention counts.
  double last_wave_fraction = 0;
  TaskCompute what;  ///< plan metadata (carried, not interpreted)
};

struct Workload {
  std::vector<Transfer> transfers;
  std::vector<ComputeTask> compute;
  /// Name used in error messages ("<file>:/transfers/3/src: ..."); parse_workload sets it.
  std::string source = "<workload>";
};

struct SimOptions {
  double launch_overhead_s = 2e-6;  ///< per transfer/kernel issue; source in sim/README
  double default_chunk_bytes = 4.0 * 1024 * 1024;
  int default_staging_buffers = 2;
  /// Per chunk of a host-staged transfer: the D2H stage of every chunk is held this long before
  /// the chunk's path latency and bytes (copy launches + event hand-off of the chunk; once per
  /// chunk, not per leg). Default 6.25 us: the per-chunk term of the H200 host-staged pipeline
  /// fit t = bytes / 50.03 GB/s + chunks * 6.25 us (256 MiB through 2 pinned buffers, chunks of
  /// 1-16 MiB, `sparsp calibrate`, replay/RESULTS.md "staged:0"). Model and derivation: sim/README.
  double staging_chunk_overhead_s = 6.25e-6;
  double compute_efficiency = 0.6;  ///< fraction of peak bf16 FLOP/s reached by attention
  /// Staging "driver" (the driver's cudaMemcpyPeer fallback without peer access): chunks of
  /// driver_staging_chunk_bytes through 2 buffers, each chunk holding its first leg
  /// driver_staging_chunk_overhead_s longer. 32 us per 4 MiB: fitted to p2pBandwidthLatencyTest's
  /// P2P=Disabled unidirectional means of the H100 SXM (37.1 GB/s, 34 us) and RTX 4090 SYS pairs
  /// (22.3 GB/s, 30 us) cases (sim/README.md "Driver staging").
  double driver_staging_chunk_bytes = 4.0 * 1024 * 1024;
  double driver_staging_chunk_overhead_s = 32e-6;
  /// How concurrent direct GPU-to-GPU copies (P2P, NVLink) share the driving GPU's copy
  /// engines. true (default): all run at once and share the links (the RTX PRO 6000 many-flow
  /// rows, sim/README.md "Many concurrent flows"); false: each holds one of the GPU's
  /// copy_engines, first come first served. Host copies (H2D, D2H, host-staged legs) always hold
  /// one engine each, FIFO: the H200 serves same-direction host copies one at a time
  /// (replay/RESULTS.md, "Copy-engine concurrency").
  bool copy_engines_shared = true;
  /// Ranks folded onto one physical GPU (replay --devices 0,0,...): per topology GPU index, the
  /// device it runs on. GPUs with the same device share one compute capacity (their concurrent
  /// compute tasks split it max-min fairly, as kernels of several streams share the SMs).
  /// Empty: every GPU computes on its own.
  std::vector<int> compute_device;
  /// Peer concurrency cost: a GPU that sends and receives m >= 2 PCIe peer copies at once moves
  /// at most 2 * duplex * link / (1 + cost * (m - 1)) in and out together. 0.2: fitted to the
  /// two-switch RTX PRO 6000 case's 12- and 56-flow rows (../shared/cases, sim/README.md);
  /// 0 turns it off.
  double peer_concurrency_cost = 0.2;
  /// Pull (driver "dst") copies under peer contention: each byte costs 1 / this of the peer
  /// capacity. Fitted to p2pmark's 4-GPU all-read-all (121 GB/s) against the same set written
  /// (148.9 GB/s) on the two-switch case (sim/README.md); 1 turns it off.
  double contended_read_efficiency = 0.9;
  /// Host reads under writes: while a copy-engine write to host memory (D2H, a host-staged
  /// copy's first leg) crosses a PCIe link of Gen <= host_read_under_write_max_gen toward the
  /// host, the copy-engine reads of host memory (H2D, a staged copy's second leg) crossing it
  /// toward the device share this fraction of its one-direction capacity. 0.49: nvbandwidth's
  /// host_to_device_bidirectional_memcpy_ce on an A100 PCIe Gen4 (H2D 12-13 GB/s beside a D2H,
  /// 25-26 alone; NVIDIA/nvbandwidth issue 11); an 8x RTX 4090 Gen4 run shows 0.44-0.67
  /// (issue 15). Gen5 links keep both directions (the H200: H2D and D2H at ~50 GB/s each at once,
  /// replay/RESULTS.md "Copy-engine concurrency"). sim/README.md "Host reads under writes";
  /// >= 1 turns it off.
  double host_read_under_write = 0.49;
  int host_read_under_write_max_gen = 4;
  bool record_resource_timeline = false;  ///< per-resource utilisation over time (for traces)
  /// Attention slowdown beside transfers, on every GPU (sim/engine.hpp GpuModel): time ratio - 1
  /// while a copy-engine transfer of the GPU runs (0: none, today's model), and per SM taken by
  /// SM-driven transfers (< 0: the SM share only, (sm - taken) / sm, today's model). Set from a
  /// topology measured_compute entry's `contention` (study/run.cpp).
  double contention_ce_copy = 0;
  double contention_sm_copy_per_sm = -1;
};

struct ActivityResult {
  std::string id;
  bool is_transfer = true;
  std::string where;   ///< "gpu0" / "gpu0->gpu1"
  std::string lane;    ///< stream or copy engine it ran on, e.g. "ce1"
  int gpu = -1;        ///< GPU it is drawn under in traces (-1: host)
  double start_s = 0;  ///< when it began (dependencies met, engine free)
  double end_s = 0;
  double bytes = 0;
};

struct ResourceStats {
  std::string name;
  double capacity_Bps = 0;
  double bytes = 0;             ///< coefficient-weighted bytes that crossed it
  double busy_s = 0;            ///< time with non-zero load
  double peak_utilization = 0;  ///< max over time of load / capacity
  /// (time_s, load_Bps) at every change, when SimOptions::record_resource_timeline.
  std::vector<std::pair<double, double>> timeline;
};

struct SimResult {
  double makespan_s = 0;
  std::vector<ActivityResult> activities;  ///< in workload order: transfers, then compute
  std::vector<ResourceStats> resources;    ///< in Topology::resources() order
  std::vector<std::string> critical_path;  ///< activity ids, first to last
  int64_t events = 0;
};

/// Validates and simulates. Errors (exit 2): unknown endpoint, no route, negative bytes or
/// duration, duplicate id, dangling dependency, dependency cycle. Deterministic: same input,
/// same output bit for bit.
Result<SimResult> simulate(const topology::Topology& topo, const Workload& work,
                           const SimOptions& options = {});

/// Reads a workload JSON (schema in sim/README.md). Errors name the file and JSON pointer.
Result<Workload> load_workload(const std::string& path);
Result<Workload> parse_workload(const std::string& text, const std::string& source_name);

/// A transfer's "collective" object ({"op", "ranks", "bytes"}, all required; op a
/// nccl::collective_name, ranks >= 2, bytes > 0) from its JSON text; errors at `file`:`place`.
/// Shared by the workload and plan readers. collective_tag_json writes it (one line).
Result<CollectiveTag> parse_collective_tag_json(const std::string& text, const std::string& file,
                                                const std::string& place);
std::string collective_tag_json(const CollectiveTag& tag);

/// Perfetto / Chrome trace JSON: one process per GPU, one track per stream and copy engine,
/// counter tracks for busy resources.
std::string to_chrome_trace(const Workload& work, const SimResult& result);

/// Lower bound of a workload's makespan: max over shared resources of (coefficient-weighted
/// bytes crossing it) / capacity, and over GPUs of their compute time. Latencies ignored.
struct LowerBound {
  double bound_s = 0;
  std::string binding;  ///< resource or "gpuN compute" that sets it
};
Result<LowerBound> lower_bound(const topology::Topology& topo, const Workload& work);

}  // namespace sparsp::sim
