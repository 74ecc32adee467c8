#pragma once
// Replay: run a transfer plan (include/sparsp/plan.hpp) on real hardware, time every transfer,
// verify every byte; validate a simulation against the measurement; calibrate a topology from
// microbenchmarks. No CUDA, Eigen or JSON headers here (STYLE habit 2).
//
// Backends (registry by name, `backend_names()`):
//  - "host": one thread per plan stream (dependency-driven), memcpy between per-rank host buffers.
//    Always built; lets CI run the whole replay path (integrity, trace, validate).
//  - "cuda": built when the CUDA language is found (SPARSP_HAVE_CUDA). Peer copies on dedicated
//    copy-engine streams, host staging through pinned buffers in pipelined chunks (device-to-host
//    and host-to-device on separate streams), a copy kernel for Engine::sm, NCCL grouped
//    send/recv for NCCL-based schemes when NCCL is found, and a compute-emulation kernel.
//
// Integrity: every source KV block is filled with content that is a function of
// (layer, block, head, owner rank); every received block is checked after every iteration (on the
// device for "cuda"). A mismatch is a run-time failure (exit code 1) naming the layer, the block,
// the rank and the first bad byte.
#include <cstdint>
#include <string>
#include <vector>

#include "sparsp/plan.hpp"
#include "sparsp/sim.hpp"
#include "sparsp/status.hpp"

namespace sparsp::replay {

/// What the replay does for a plan's compute tasks (`--compute`, replay/README.md "Real
/// compute").
///  - automatic (the CLI default, `--compute` not given): real where the plan allows it, else
///    emulated, with ReplayResult::compute_note saying why;
///  - real: each attention task runs sparsp's block-sparse attention kernel (host: the CPU
///    version) over exactly its (query block, KV block, head) triples, reading the KV the plan's
///    transfers delivered; outputs are merged by log-sum-exp and checked against a reference.
///    `gemm` tasks run `count` bf16 GEMMs of m x n x k (CUDA: cuBLAS, fp32 accumulation; host:
///    Eigen in fp32) on the rank's scratch operands, `copy` tasks copy bytes / 2 within the
///    rank's memory (CUDA: device to device; host: memcpy); neither is checked, both are timed.
///    Refused (exit 2) where impossible: payload_scale < 1, a plan with attention but without
///    masks, head_dim other than 64 / 128, Ulysses-style tasks, a gemm task without a shape, a
///    host-backend plan over kHostRealComputeMaxFlops or kHostRealScratchMaxBytes;
///  - emulated: busy SMs (host: sleep) for the task's duration_s, as before;
///  - none: no compute tasks (transfers only; `--no-compute`).
enum class ComputeMode { automatic, real, emulated, none };
const char* compute_mode_name(ComputeMode m);

/// Largest active attention FLOPs of one layer plan that the host backend computes for real:
/// 4e9, about 0.2 s per iteration for the CPU kernel (one thread per task, -O3) at the ~20
/// GFLOP/s per core measured on the 2-core CI machine (a 2-rank, 2088-token test plan of 9e8
/// FLOPs ran in a 41 ms makespan).
inline constexpr double kHostRealComputeMaxFlops = 4e9;
/// Largest sum of GEMM operands (bf16 A, B, C) and copy buffers of one layer plan that the host
/// backend allocates for real `gemm` and `copy` tasks: 1 GiB.
inline constexpr double kHostRealScratchMaxBytes = 1024.0 * 1024 * 1024;

/// Options of one replay. Defaults are the CLI's defaults.
struct ReplayOptions {
  ComputeMode compute = ComputeMode::automatic;
  bool check_all = false;           ///< output check over every query block (default: a sample)
  std::string backend = "host";     ///< "host" | "cuda"
  std::vector<int> devices;         ///< rank -> CUDA device ordinal; empty: rank r on device r.
                                    ///< Repeats allowed ("0,0": both ranks on GPU 0; peer
                                    ///< transfers become device-local copies, host-staged ones
                                    ///< still cross PCIe both ways).
  int warmup = 1;                   ///< untimed iterations per layer plan
  int iterations = 5;               ///< timed iterations per layer plan (medians reported)
  bool emulate_compute = true;      ///< run compute tasks (busy SMs / host sleep) for duration_s
  double compute_efficiency = 0.6;  ///< for tasks given in FLOP: duration = flops / (peak * eff)
  double peak_flops = 0;            ///< FLOP/s per GPU for such tasks; 0: from the plan topology
  double default_chunk_bytes = 4.0 * 1024 * 1024;  ///< host-staging chunk (sim default)
  int default_staging_buffers = 2;                 ///< host-staging buffers in flight (sim default)
  int default_comm_sms = 16;  ///< SMs of an Engine::sm copy when the plan says 0
  int compute_sms = 0;        ///< SMs a compute task keeps busy; 0: the device's SMs divided by the
                              ///< ranks mapped onto it
  double payload_scale = 1.0;  ///< (0, 1]: shrink every payload by this factor (CI use
                               ///< on small machines; bytes reported are the scaled ones)
  int max_layers = 0;          ///< replay only the first N layer plans (0: all)
  bool use_nccl = true;        ///< NCCL for NCCL-based schemes when available
  double timeout_s = 300;      ///< watchdog: a backend call (set-up, one iteration, a check)
                               ///< that makes no progress for this long ends the process with
                               ///< exit 1 and a message naming the layer and iteration (a hung
                               ///< collective cannot be cancelled from the host); 0: off
  std::string plan_source = "<plan>";  ///< file name that plan-shape errors cite
  // Fault injection (tests of the integrity check):
  std::string skip_transfer;   ///< id of a transfer not to execute
  int corrupt_block = -1;      ///< overwrite a span of this block as it is received
  bool corrupt_query = false;  ///< corrupt the block's delivered Q (one head of it, as a Ulysses
                               ///< / USP all-to-all delivers it) instead of its K/V
};

/// The output check of a real-compute replay (`replay --json` "output_check").
struct OutputCheck {
  bool ran = false;
  int64_t checked_blocks = 0;  ///< (rank, query block) pairs compared, all layer plans
  double max_abs_error = 0;    ///< max |O - O_ref| over them
  double tolerance = 0;        ///< per element (attention::derive_tolerance)
  bool passed = true;
};

/// Timing of one layer plan: makespan_s is the median over the timed iterations; activities (in
/// workload order: transfers, then compute) are those of the representative iteration (the one
/// with the lower-median makespan), times in seconds from the layer's common start (the gate
/// opening, all GPUs).
struct LayerReplay {
  int step = 0;
  int layer = 0;
  int64_t repeat = 1;
  double makespan_s = 0;                   ///< median over iterations
  std::vector<double> makespan_samples_s;  ///< one per timed iteration
  std::vector<sim::ActivityResult> activities;
};

struct ReplayResult {
  std::string backend;
  std::string device_description;  ///< e.g. "NVIDIA H200 (ranks 0,1 -> device 0)"
  std::vector<int> devices;
  int warmup = 0, iterations = 0;
  std::vector<LayerReplay> layers;
  double bytes_moved = 0;        ///< payload bytes moved, all layers and iterations
  double bytes_verified = 0;     ///< received bytes checked against expected content
  int64_t blocks_verified = 0;   ///< received block regions checked (K/V slots; with real
                                 ///< compute of a ulysses / usp plan also each delivered Q slice)
  double total_s = 0;            ///< sum over layer plans of makespan_s * repeat
  bool compute_emulated = true;  ///< compute tasks ran (false: --no-compute; transfers only)
  std::string compute = "emulated";  ///< "real" | "emulated" | "none"
  bool compute_recorded = true;      ///< the trace said how compute ran ("compute" key; false:
                                     ///< a trace written before it, `compute` inferred)
  std::string compute_note;          ///< why a default replay did not compute for real
  OutputCheck output_check;
  bool nccl_p2p_disabled = false;  ///< NCCL carried SM-driven transfers with NCCL_P2P_DISABLE
                                   ///< set (its host-memory path); validate models them staged
  double payload_scale = 1;        ///< ReplayOptions::payload_scale of the run (validate scales the
                                   ///< plan's bytes by it)
  // Identity of the plan replayed (trace "gpus", "model", "policy"; 0 / empty: not recorded).
  int gpus = 0;
  std::string model, policy;
};

/// Names of the backends compiled into this build ("host", and "cuda" when built).
std::vector<std::string> backend_names();

/// Runs the plan. Errors (exit 2) before any work: unknown backend, more ranks than devices
/// listed, device index out of range, more memory than free, P2P required where unavailable,
/// a transfer sending a block its source never holds. Run-time failures (exit 1): integrity
/// mismatch (message names layer, block, rank), CUDA/NCCL errors (message names the call, file
/// and line).
Result<ReplayResult> run(const policy::Plan& plan, const ReplayOptions& options);

/// Trace JSON of a replay (schema "sparsp.trace" v1, shared with the simulator's per-layer
/// activity list; see replay/README.md).
std::string trace_json(const policy::Plan& plan, const ReplayResult& result);
/// Reads a trace JSON written by trace_json.
Result<ReplayResult> parse_trace(const std::string& text, const std::string& source_name);
Result<ReplayResult> load_trace(const std::string& path);
/// Perfetto / Chrome trace JSON: one process per rank, one track per lane, layers one after
/// another.
std::string perfetto_json(const policy::Plan& plan, const ReplayResult& result);
/// JSON summary (`--json`): bytes_moved, bytes_verified, per-layer makespans.
std::string summary_json(const ReplayResult& result);

// ---- validate ------------------------------------------------------------------------------

struct ValidateOptions {
  std::string topology_path;  ///< empty: the plan's embedded topology
  /// File names that errors cite ("<plan_source>:/layers/3/transfers/2/src: ...",
  /// "<trace_source>:/layers/0/activities/5/id: ..."): the paths the plan and trace were read
  /// from (the CLI passes --plan and --trace).
  std::string plan_source = "<plan>";
  std::string trace_source = "<trace>";
  sim::SimOptions sim;  ///< simulator options
  int top_outliers = 10;
  /// The model follows how the trace was run (ReplayResult::compute_emulated,
  /// nccl_p2p_disabled); these force it for traces that do not record it.
  bool no_compute = false;        ///< simulate without compute tasks (durations 0)
  bool nccl_p2p_disable = false;  ///< SM-driven GPU-to-GPU transfers go host-staged
};

struct TransferError {
  int layer_index = 0;  ///< index into plan.layers
  std::string id;
  double measured_s = 0, simulated_s = 0;
  double error = 0;  ///< |simulated - measured| / measured
};

struct LayerError {
  int step = 0, layer = 0;
  double measured_s = 0, simulated_s = 0;
  double error = 0;          ///< |simulated - measured| / measured
  double staged_bytes = 0;   ///< host-staged payload bytes of the layer plan
  double staged_span_s = 0;  ///< measured: length of the union of staged intervals
};

/// Errors are fractions (0.05 = 5%). Statistics over transfers with measured duration > 0.
struct ValidateReport {
  std::string topology_name;
  int transfers = 0;
  double mape = 0, p50 = 0, p90 = 0, max_error = 0;  ///< per-transfer duration errors
  double makespan_mape = 0, makespan_max_error = 0;  ///< per-layer makespan errors
  double makespan_p50 = 0, makespan_p90 = 0;
  int compute_tasks = 0;  ///< compute tasks with a measured duration > 0
  double compute_mape = 0, compute_p50 = 0, compute_p90 = 0, compute_max_error = 0;
  /// Where the modelled compute durations came from: "plan" (the plan's duration_s), or for a
  /// real-compute trace "measured_compute <pointer> (kernel sparsp)" of the topology.
  std::string compute_source = "plan";
  double host_staged_achieved_Bps = 0;   ///< bytes / duration, best single staged
                                         ///< transfer (measured)
  double host_staged_aggregate_Bps = 0;  ///< max over layer plans of all staged
                                         ///< bytes / time any staged transfer runs
  std::vector<LayerError> layers;
  std::vector<TransferError> outliers;  ///< largest errors first
  std::vector<LayerReplay> simulated;   ///< the simulation, per layer plan
};

/// Re-simulates every layer plan of `plan` and compares it with `trace`. Errors (exit 2), each
/// "<file>:<JSON pointer>: <what>" with file = options.plan_source, options.trace_source or the
/// topology path: trace and plan disagree (layer count, (step, layer) of a layer plan, activity
/// ids), no embedded topology, topology unreadable or with too few GPUs, simulation errors (the
/// pointer then names the plan's transfer, e.g. /layers/3/transfers/2/src).
Result<ValidateReport> validate(const policy::Plan& plan, const ReplayResult& trace,
                                const ValidateOptions& options);
std::string validate_json(const ValidateReport& report);
/// One Perfetto / Chrome trace with the measurement and the simulation side by side: processes
/// "replay gpuN" and "sim gpuN", layer plans one after another on a common time axis.
std::string side_by_side_perfetto(const policy::Plan& plan, const ReplayResult& trace,
                                  const ValidateReport& report);
std::string validate_table(const ValidateReport& report);

// ---- calibrate -----------------------------------------------------------------------------

struct CalibrateOptions {
  std::vector<int> devices;       ///< empty: all visible devices
  double min_bytes = 4 * 1024.0;  ///< size sweep, powers of two
  double max_bytes = 256 * 1024.0 * 1024;
  int iterations = 5;     ///< per size (median)
  int virtual_ranks = 0;  ///< > 1: the topology also gets gpu0..N-1 folded onto
                          ///< device 0 (for validating `--devices 0,0,...`)
  bool nccl = true;       ///< with NCCL built in and >= 2 devices: also time NCCL send/recv
                          ///< between the first two (default transports, and the host path
                          ///< with NCCL_P2P_DISABLE=1 in a child process)
  /// Copy-engine concurrency tests (machine JSON "copy_engine_concurrency", replay/README.md):
  /// N = 1, 2, 4, ... up to this many concurrent copies per test; 0 skips them.
  int concurrency_copies = 8;
  double concurrency_bytes = 64 * 1024.0 * 1024;  ///< bytes of each concurrent copy
  /// Time sparsp's attention kernel on the first device (machine and topology JSON
  /// "measured_compute", kernel "sparsp"): head_dim 64 and 128, 24 heads x compute_tokens
  /// tokens, blocks of 128 and 384 tokens, densities 10%, 30% and 100%; and the launch overhead
  /// of an empty kernel. Off: no measured_compute.
  bool compute = true;
  int compute_tokens = 36864;  ///< sequence length of the attention timing (96 blocks of 384)
  /// With `compute`: also time dense attention (head_dim 128, blocks of 128) beside copy-engine
  /// copies (a looping 256 MiB H2D and D2H) and beside an SM copy kernel (mapped pinned host ->
  /// device, one block per SM) on 8, 16 and 32 SMs, into measured_compute "contention":
  /// ce_copy = t / t_alone - 1; sm_copy_per_sm = least-squares slope of (t / t_alone - 1) in SMs,
  /// written only where it predicts better than the default SM-share model (replay/README.md).
  bool compute_contention = true;
};

/// One fitted path: time(bytes) = latency_s + bytes / bandwidth_Bps (least squares, Eigen).
struct PathFit {
  std::string name;  ///< "h2d:0", "d2h:0", "bidir:0", "p2p:0->1", "d2d:0", "nccl:0->1",
                     ///< "nccl_bidir:0<->1", "nccl_shm:0->1" (NCCL_P2P_DISABLE=1), ...
  double latency_s = 0;
  double bandwidth_Bps = 0;
  double aggregate_Bps = 0;  ///< for concurrent tests: sum over flows
  std::vector<double> sizes_bytes;
  std::vector<double> times_s;  ///< median per size
};

struct CalibrateResult {
  std::string machine_json;   ///< discovery + measurements + fits
  std::string topology_json;  ///< the topology the simulator loads
  std::vector<PathFit> fits;
};

/// Runs the microbenchmarks (CUDA builds only; otherwise an error, exit 1).
Result<CalibrateResult> calibrate(const CalibrateOptions& options);

/// Topology JSON rebuilt from a machine JSON that `calibrate` wrote (no GPU needed), with
/// `virtual_ranks` > 1 folding that many ranks onto GPU 0. Errors name the file and pointer.
Result<std::string> topology_from_machine_file(const std::string& machine_path, int virtual_ranks);

/// Least-squares fit of t = a + x / bandwidth (x bytes, t seconds). Two regimes, so that neither
/// the ramp of mid sizes nor the latency of small ones biases the other: the bandwidth is the
/// least-squares slope over the sizes >= 1/32 of the largest (at least the 3 largest points);
/// the latency is the least-squares intercept with that slope fixed over the sizes <= 256 KiB
/// (at least the 3 smallest), i.e. the mean of t - x / bandwidth there. Fewer than 2 points:
/// zeros.
PathFit fit_latency_bandwidth(const std::string& name, const std::vector<double>& sizes_bytes,
                              const std::vector<double>& times_s);

}  // namespace sparsp::replay
