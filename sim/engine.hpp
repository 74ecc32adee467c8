#pragma once
// The discrete-event engine over abstract resources (no Topology): what simulate() compiles a
// Workload into, and what the closed-form tests and benchmarks drive directly.
//
// Time: seconds as double. Event order: (time, sequence number); flow completions at a time are
// handled before timers at the same time, in flow creation order. Same Problem, same Outcome bit
// for bit.
//
// Activities ("tasks"):
//  - transfer: `bytes` over 1 leg (direct) or 2 legs (host-staged: src->host, host->dst). It is
//    carried as a pipeline of chunks; a chunk on a leg is one flow that first waits the leg's
//    latency, then loads the leg's resources. Stage s of chunk i starts when stage s is idle and
//    chunk i has left stage s-1; stage 0 of chunk i also needs a free staging buffer (chunk
//    i - buffers has left the last stage). A direct transfer with chunk_bytes = 0 is one chunk.
//    The transfer pays `launch_s` once before its first chunk. With `chunk_overhead_s` > 0, every
//    chunk holds stage 0 that much longer before its latency (the per-chunk cost of a host-staged
//    pipeline: copy launches and the event hand-off; SimOptions::staging_chunk_overhead_s).
//  - compute: `work_s` seconds of work at full GPU capacity, a flow on its GPU's compute resource
//    (capacity 1 work-second per second, times the fraction of SMs not taken by SM-driven
//    communication). Kernels of one device (a GPU, or the GPUs sharing it through
//    GpuModel::compute_shared_with) are served first come first served: the one that became
//    ready first holds the whole capacity until it ends, later ones wait (their start_s is when
//    they became ready, as a CUDA event recorded before the launch reads it). This is how the
//    hardware's block scheduler serves kernels that each fill the GPU: the H200 ran four ranks'
//    attention kernels launched together on four streams one after another, 21.5 ms apart
//    (replay/RESULTS.md, "Kernels of folded ranks"). Tasks of zero work do not queue.
// Lanes: a transfer with ce_gpu >= 0 is driven by that GPU's copy engines. Task::ce_shared
// picks how it shares them:
//  - false (per-engine FIFO): it holds one copy engine from start to end; a GPU's copy engines
//    serve waiting transfers in the order they became ready (a transfer pinned to a CE waits for
//    that CE);
//  - true (shared; simulate() sets it for direct GPU-to-GPU copies by default): it starts as
//    soon as it is ready, whatever else runs, and shares the links max-min; the lane it is drawn
//    on is the GPU's CE with the fewest shared copies at its start (lowest index on ties), or its
//    pinned CE. Shared copies do not hold the FIFO engines.
// Peer concurrency (GpuModel::peer_resource >= 0): tasks with peer_gpus set count, per GPU, the
// copies it sends (n_out) and receives (n_in) from start to end; the GPU's peer resource has
// capacity peer_bidir_Bps / (1 + peer_cost * (m - 1)) with m = min(n_in, n_out) >= 2, and is
// unbounded while m <= 1 (derivation and source: sim/README.md, "Many concurrent flows").
// Switched resources (Problem::switched): a resource whose capacity is on_Bps while at least one
// running task lists it in Task::switches (from start to end) and unbounded otherwise (host reads
// under writes, sim/host_reads.hpp).
// Streams are FIFO: a task starts after its stream predecessor ends.
// Last waves: a compute task with last_wave_work_s > 0 enters its last wave when its remaining
// work falls to last_wave_work_s (its kernel then runs as two flows, work_s - last_wave_work_s
// and last_wave_work_s, at whatever capacity the GPU has, so contention slows both); a task that
// lists a dependency in Task::at_last_wave is released at that moment instead of at the
// dependency's end (at its end when last_wave_work_s is 0). The moment is an ordinary flow
// completion, ordered by (time, sequence) as every other (sim::ComputeTask::last_wave_fraction).
// SM-driven transfers take comm_sms SMs on each GPU in sm_gpus from start to end.
#include <cstdint>
#include <string>
#include <vector>

#include "lmm.hpp"

namespace sparsp::sim {

struct NetLeg {
  std::vector<lmm::Use> uses;  ///< resources and coefficients (resource = index in Problem)
  double latency_s = 0;        ///< paid by every chunk on this leg before it loads the resources
};

struct Task {
  enum class Kind { transfer, compute };
  Kind kind = Kind::transfer;
  // transfer
  std::vector<NetLeg> legs;  ///< 1 (direct) or 2 (host-staged)
  double bytes = 0;
  double cap_Bps = 0;           ///< per-flow rate cap, 0 = none
  double chunk_bytes = 0;       ///< 0 = one chunk (direct only; staged needs > 0)
  int buffers = 2;              ///< staging buffers (2-leg pipelines)
  double launch_s = 0;          ///< issue overhead before the first chunk
  double chunk_overhead_s = 0;  ///< per chunk: stage 0 is held this long before the chunk's
                                ///< latency (host-staged pipelines; 0 for direct transfers)
  int ce_gpu = -1;              ///< GPU whose copy engines carry it; -1 = none
  int copy_engine = -1;         ///< pinned CE index, -1 = any free one
  int sm_gpus[2] = {-1, -1};    ///< GPUs whose SMs it takes (Engine::sm)
  int comm_sms = 0;
  int peer_gpus[2] = {-1, -1};  ///< (sender, receiver) counted for peer concurrency; -1 none
  bool pcie_peer = false;       ///< compile-time note: a direct GPU-to-GPU route over PCIe
  bool ce_shared = false;       ///< shares the copy engines (true) or holds one, FIFO (false)
  std::vector<int> switches;    ///< Problem::switched indices it turns on while it runs
  // compute
  int gpu = -1;
  double work_s = 0;
  double last_wave_work_s = 0;  ///< work of its last wave, <= work_s; 0: the moment is its end
  // both
  std::vector<int> deps;  ///< indices of tasks that must end first
  /// Of `deps`, the compute tasks that release this one when they enter their last wave (see
  /// "Last waves" above), not when they end.
  std::vector<int> at_last_wave;
  double release_s = 0;  ///< earliest time it may become ready (0: no constraint)
  int stream = -1;       ///< FIFO stream id (-1: none); order = task index order
};

/// Contention of attention with transfers on one GPU (issue 14; defaults: today's model).
/// Compute capacity = sm_share * 1 / (1 + ce_copy * [a copy-engine transfer of this GPU runs]),
/// sm_share = (sm - taken) / sm when sm_copy_per_sm < 0 (SMs only), else
/// 1 / (1 + sm_copy_per_sm * taken) (SMs and the HBM share of SM-driven copies, measured).
struct GpuModel {
  int copy_engines = 2;
  int sm_count = 1;
  double ce_copy = 0;            ///< attention time ratio - 1 beside copy-engine copies
  double sm_copy_per_sm = -1;    ///< attention time ratio - 1 per SM taken; < 0: SM share only
  int compute_shared_with = -1;  ///< GPU index whose compute capacity this one shares; -1: own
  int peer_resource = -1;        ///< Problem resource capped by peer concurrency; -1: none
  double peer_bidir_Bps = 0;     ///< that resource's capacity at m = 1 (both directions summed)
  double peer_cost = 0;          ///< capacity divisor growth per concurrent peer pair beyond one
};

/// A resource with capacity on_Bps while a task listing it in Task::switches runs, else unbounded.
struct SwitchedResource {
  int resource = -1;  ///< index in Problem::capacity_Bps
  double on_Bps = 0;  ///< capacity while switched on
};

struct Problem {
  std::vector<double> capacity_Bps;  ///< one per resource
  /// Per resource (empty: none): 1 where it can never be a bottleneck (a non-blocking spine,
  /// lmm.hpp "Constraints that never bind"); same results, smaller sharing problems.
  std::vector<uint8_t> never_binds;
  std::vector<SwitchedResource> switched;
  std::vector<GpuModel> gpus;
  std::vector<Task> tasks;
};

struct TaskOutcome {
  double start_s = 0;  ///< began (dependencies met and copy engine acquired)
  double end_s = 0;
  int copy_engine = -1;  ///< CE index used, -1 none
  int pred = -1;         ///< task whose end released it (critical-path predecessor), -1 none
};

struct Outcome {
  std::vector<TaskOutcome> tasks;
  double makespan_s = 0;
  std::vector<double> bytes, busy_s, peak_load;                  ///< per resource of the Problem
  std::vector<std::vector<std::pair<double, double>>> timeline;  ///< per resource (t, load)
  std::vector<int> critical_path;                                ///< task indices, first to last
  int64_t events = 0;
};

/// Index of a task on a dependency cycle (deps + stream order), or -1 if the graph is a DAG.
/// `cycle` receives the cycle's tasks in order when found.
int find_cycle(const Problem& problem, std::vector<int>* cycle = nullptr);

/// Runs the simulation. REQUIRES: find_cycle(problem) == -1, valid indices, capacities > 0.
Outcome run(const Problem& problem, bool record_timeline = false);

}  // namespace sparsp::sim
