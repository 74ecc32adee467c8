#pragma once
// Studies: "on this server, for this model and sparse mask, which sequence-parallel scheme is
// fastest, how much data does each move, and why". A Study names topologies, a model, a pattern,
// the GPUs of the sequence-parallel group and the policies to compare; run_study() simulates
// every (step, layer) of the selection for every policy, reusing identical (step, layer)
// workloads exactly (Pattern::mask_group) and streaming dynamic patterns step by step.
//
// Study JSON schema: configs/studies/README.md. `sparsp simulate` is the CLI over this header.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sparsp/pattern.hpp"
#include "sparsp/plan.hpp"
#include "sparsp/policy.hpp"
#include "sparsp/sim.hpp"
#include "sparsp/status.hpp"

namespace sparsp::study {

struct Study {
  std::string source = "<study>";        ///< file name used in error messages
  std::string name;
  std::vector<std::string> topologies;   ///< presets or topology JSON paths (at least one)
  /// The key they came from: "topology" (one name) or "topologies" (a list), for error places
  /// ("/topologies/1" names the second entry).
  std::string topologies_key = "topology";
  std::string model = "hunyuanvideo-sta";
  /// A model JSON text (configs/README.md model schema) used instead of `model` when not empty
  /// (check_published builds models inline); `model` then only names it in errors.
  std::string model_json;
  patterns::PatternOptions pattern;      ///< kind "file": recorded mask in pattern.input
  std::vector<int> gpus;                 ///< GPU index of each rank; empty: all GPUs
  int num_gpus = 0;                      ///< > 0 and gpus empty: the first num_gpus GPUs
  policy::Granularity granularity = policy::Granularity::block;
  std::vector<policy::PolicySpec> policies;
  std::vector<std::string> policy_places;  ///< JSON pointer (or "--policy") of each policy
  std::string baseline;                  ///< a policy name(); empty: the first policy
  std::vector<int> steps;                ///< selected denoising steps; empty: all
  std::vector<int> layers;               ///< selected layers; empty: all
  double attention_efficiency = 0;       ///< 0: per-GPU default (compute_model_for)
  double gemm_efficiency = 0;            ///< 0: default
  /// Attention kernel (policy::kernels(); JSON /compute/kernel, `--kernel`); empty: none chosen
  /// (a measured_compute entry of any kernel, else `generic`). Precedence: policy::resolve_compute.
  std::string kernel;
  std::string kernel_place = "/compute/kernel";  ///< where it was given ("--kernel"), for errors
  /// Places set by a command-line flag, JSON pointer -> flag ("/pattern/block" -> "--block",
  /// "/model" -> "--model"): errors about them read "<command line>:--block: ..." instead of
  /// naming the study file (or the built-in default study) the flag overrode.
  std::map<std::string, std::string> flag_places;
  sim::SimOptions sim;
};

/// Reads a study JSON. Errors name the file and the JSON pointer (exit 2). `fill_json`, when not
/// empty, is a JSON object whose keys stand in for keys the file lacks (command-line overrides
/// that supply a field, e.g. `--topology` for a study without "topology"): a key present in the
/// file (or "topologies" for "topology") is kept.
Result<Study> load_study(const std::string& path, const std::string& fill_json = "");
Result<Study> parse_study(const std::string& text, const std::string& source_name);
/// The built-in default study (the same text as configs/studies/default.json).
Result<Study> default_study();
const char* default_study_json();

struct PolicyResult {
  std::string topology;
  policy::PolicySpec policy;
  double volume_bytes = 0;        ///< KV and Q/O payload between GPUs per step, all layers
  double control_bytes = 0;       ///< demand-discovery bytes per step, all layers
  double attention_time_s = 0;    ///< attention phase per layer (mean over layers and steps)
  double other_time_s = 0;        ///< non-attention work per layer (slowest rank)
  double step_time_s = 0;         ///< one denoising step, all layers
  double denoise_time_s = 0;      ///< the denoising loop: step_time_s x steps x CFG forwards
  /// The whole generation: denoise_time_s + text encoder + VAE decode (/ ranks when split) +
  /// scheduler overhead x steps (the model's "pipeline"; stages in not_modelled count 0 s).
  /// Before issue 14 this was the loop alone; a model without pipeline figures still gives that.
  double e2e_time_s = 0;
  std::vector<std::string> not_modelled;  ///< stages with no figure for this GPU (0 s)
  double lower_bound_s = 0;       ///< attention-phase lower bound per layer (mean)
  std::string lower_bound_binding;  ///< resource setting it (most frequent)
  double speedup = 1;             ///< baseline e2e / this e2e
  double denoise_speedup = 1;     ///< baseline denoise / this denoise
  double attention_speedup = 1;   ///< baseline attention / this attention
  double volume_vs_baseline = 1;  ///< this volume / baseline volume
  double compute_imbalance = 1;   ///< max over ranks of attention FLOPs / mean, averaged over layers
  std::string busiest_link;       ///< resource with the highest mean utilisation
  double busiest_utilization = 0; ///< its bytes / (capacity * attention time)
  int64_t units = 0;              ///< (step, layer) pairs covered
  int64_t simulated = 0;          ///< distinct workloads simulated
  /// Where the compute figures came from (policy::ResolvedCompute::source), e.g.
  /// "generic (hopper, 0.5 of peak)", "kernel fa3 (hopper, 0.654 of peak)",
  /// "measured_compute /measured_compute/0 (kernel sparsp)", "attention_efficiency given".
  std::string compute_source;
  // Optional payloads (RunOptions):
  std::shared_ptr<policy::Plan> plan;     ///< keep_plans
  std::string trace_json;                 ///< keep_trace: Chrome trace of the first layer
};

/// A policy of the study left out on one topology because it cannot run on that group's rank
/// count (policy::check_runnable: USP without a Ulysses x ring split, Ulysses with heads not
/// divisible by P).
struct SkippedPolicy {
  std::string topology;  ///< Topology::name()
  std::string policy;    ///< its label, "placement/scheme/runtime[:k=v,...]"
  std::string reason;    ///< one phrase, e.g. "no Ulysses x ring split of 3 ranks"
};

struct StudyResult {
  std::string name;
  std::string model;
  std::string pattern;            ///< Pattern::describe()
  int gpus = 0;                   ///< ranks on the first topology (see gpus_per_topology)
  /// Ranks per topology (Topology::name(), study order). Where topologies of different GPU
  /// counts are studied, the table's header and JSON name each count (`gpus` alone would be one
  /// wrong number).
  std::vector<std::pair<std::string, int>> gpus_per_topology;
  std::string baseline;
  bool dynamic = false;
  std::vector<PolicyResult> policies;   ///< topology-major, then study policy order
  std::vector<SkippedPolicy> skipped;   ///< topology-major, then study policy order
};

/// Default memory limit of a study (16 GiB): fixed, not a fraction of the machine's memory, so
/// refusals (and sweep skip rows) are the same on every machine.
inline constexpr double kDefaultMaxMemoryBytes = 16.0 * (1ull << 30);

struct RunOptions {
  /// A study whose estimated memory (kBytesPerBlockPair x blocks^2 for the block graph, demand
  /// and placement state) is above this is refused before anything is allocated (exit 2, naming
  /// the estimate and --block, the option that lowers it). `simulate --max-memory-gib` raises it.
  double max_memory_bytes = kDefaultMaxMemoryBytes;
  /// What that refusal tells the user to do: options of the command that runs the study
  /// (check-published has neither --block nor --max-memory-gib).
  std::string memory_remedy = "use a larger block (--block) or raise --max-memory-gib";
  bool keep_plans = false;
  bool keep_trace = false;
  /// Called after each (topology, step, layer) unit with the units done and the total
  /// (topologies x selected steps x selected layers), from the calling thread; empty: none.
  /// `sparsp simulate` draws its progress bar with it.
  std::function<void(int64_t done, int64_t total)> progress;
};

/// Runs the study. A policy that cannot run on a topology's rank count (policy::check_runnable)
/// is left out on that topology and listed in StudyResult::skipped. Errors (exit 2): unknown
/// preset, GPU not in the topology, pattern/block mismatch, unknown baseline, the baseline or
/// every policy left out on some topology, a policy parameter that does not fit the GPUs.
Result<StudyResult> run_study(const Study& study, const RunOptions& options = {});

/// Keys a study adds to an emitted plan's policy params so that retime_plan reproduces the
/// study's step and end-to-end times: non-attention work per layer on the slowest rank (seconds),
/// the model's layers per step and denoising steps the figures extrapolate to, and the compute
/// imbalance (not recoverable from the workload alone). retime_plan
/// removes them from the reported policy.
inline constexpr const char* kPlanOtherTimeKey = "other_time_s";
inline constexpr const char* kPlanLayersKey = "model_layers";
inline constexpr const char* kPlanStepsKey = "model_steps";
inline constexpr const char* kPlanImbalanceKey = "compute_imbalance";
/// Pipeline stages outside the loop (seconds, the not-modelled ones 0) and CFG forwards per step.
inline constexpr const char* kPlanPipelineKey = "pipeline_time_s";
inline constexpr const char* kPlanCfgKey = "cfg_forwards";
/// The stages with no figure (PolicyResult::not_modelled) as a bit set, so that a re-timed plan
/// marks them as the study did: cfg 1, text_encoder 2, vae_decode 4, scheduler 8 (an integer in
/// 0..15; absent: every stage modelled, as plans written before it).
inline constexpr const char* kPlanNotModelledKey = "not_modelled_stages";
inline constexpr const char* kPipelineStageNames[] = {"cfg", "text_encoder", "vae_decode",
                                                      "scheduler"};
/// Attention slowdown factors the study simulated with (sim::SimOptions::contention_*), written
/// only where a measured_compute entry gave them (policy::ResolvedCompute), so that re-timing
/// reproduces the study; a plan without them re-times with the defaults.
inline constexpr const char* kPlanContentionCeKey = "contention_ce_copy";
inline constexpr const char* kPlanContentionSmKey = "contention_sm_copy_per_sm";

/// The whole generation around a denoising loop (issue 14). `loop_s`: all steps, one forward
/// each. Text encoder / VAE decode: the measured time for `gpu.model` if the model gives one,
/// else flops / (gpu peak x efficiency), the stage's own `efficiency` where given, else
/// `gemm_efficiency`; else not modelled (0 s, listed). A split VAE
/// decode is divided by `ranks`.
struct PipelineTimes {
  int cfg_forwards = 1;
  double denoise_s = 0;  ///< loop_s x cfg_forwards
  double text_encoder_s = 0, vae_decode_s = 0, scheduler_s = 0;
  double e2e_s = 0;                       ///< the sum
  std::vector<std::string> not_modelled;  ///< "cfg", "text_encoder", "vae_decode", "scheduler"
};
PipelineTimes pipeline_times(const patterns::Pipeline& p, double loop_s, int steps,
                             const topology::GpuSpec& gpu, double gemm_efficiency, int ranks);

/// Re-times a plan (its topology, compute and transfers as written). Deterministic.
/// With keep_trace, the first policy result's trace_json holds a Chrome trace of the plan's first
/// layer (as run_study's).
Result<StudyResult> retime_plan(const policy::Plan& plan, const sim::SimOptions& options = {},
                                const RunOptions& run = {});

/// Whether the study's topologies had different rank counts (StudyResult::gpus_per_topology).
bool mixed_gpu_counts(const StudyResult& r);
/// "8 GPUs", or per topology where the counts differ: "2 GPUs on a, 8 GPUs on b".
std::string gpu_count_text(const StudyResult& r);
/// The text table. Header: model, pattern, gpu_count_text, baseline.
std::string format_table(const StudyResult& r);
/// JSON; "gpus_per_topology" ({name: ranks}) only where mixed_gpu_counts.
std::string to_json(const StudyResult& r);
/// One row per policy. Columns (fixed, appended to, never renamed): topology, policy, placement,
/// scheme, runtime, volume_bytes, control_bytes, volume_vs_baseline, attention_time_s,
/// step_time_s, e2e_time_s, speedup, attention_speedup, compute_imbalance, busiest_link,
/// busiest_utilization, lower_bound_s, name, params, other_time_s, lower_bound_binding, units,
/// simulated, then (issue 14) denoise_time_s, denoise_speedup, not_modelled (stage names joined
/// with ';', empty when all are modelled) and compute_source.
std::string to_csv(const StudyResult& r);

// ---- Ranking validation against published benchmarks (issue 19 item 4) ----
// A published-benchmark file (configs/published/README.md) names a source, a setup (topology,
// model, pattern, metric) and per problem size the measured time or throughput of each policy.
// check_published simulates every policy of every size and compares the orderings.

/// Kendall rank correlation tau-a of two equally long sequences: (C - D) / (n (n - 1) / 2), where
/// a pair (i, j) is concordant when x and y order it the same way, discordant when opposite, and
/// neither when x or y ties on it (so ties lower |tau|). n < 2: tau is NaN (no pair).
struct KendallTau {
  double tau = 0;
  int concordant = 0, discordant = 0, pairs = 0;  ///< pairs = n (n - 1) / 2
};
KendallTau kendall_tau_a(const std::vector<double>& x, const std::vector<double>& y);

struct PublishedRow {
  std::string policy;           ///< the policy spec as written
  double measured_time_s = 0;   ///< time_s, or 1 / throughput_per_s
  double predicted_time_s = 0;  ///< the simulated figure named by the file's metric
  /// |predicted throughput / measured throughput - 1| = |measured_time_s / predicted_time_s - 1|
  double throughput_error = 0;
};
struct PublishedSize {
  std::string name;  ///< e.g. "8K"
  int gpus = 0;
  std::vector<PublishedRow> rows;
  KendallTau tau;  ///< predicted vs measured time over rows
};
struct PublishedFile {
  std::string path, name, url, table, metric;
  std::vector<PublishedSize> sizes;
  double median_throughput_error = 0;  ///< over all rows of the file
};
struct PublishedCheck {
  std::vector<PublishedFile> files;
  double median_throughput_error = 0;  ///< over all rows of all files
  double min_tau = 0;                  ///< lowest tau over sizes with a pair (NaN: none)
};

/// Reads and simulates the published-benchmark files. Errors (exit 2, no result): unreadable or
/// malformed file, unknown field, unknown policy, a size without measurements, a time or
/// throughput that is not a positive finite number, a policy that cannot run on the size's GPUs;
/// each names the file and the JSON pointer.
Result<PublishedCheck> check_published(const std::vector<std::string>& paths,
                                       const RunOptions& options = {});
/// Text table per file and size: policy, measured and predicted time, throughput error, tau.
std::string format_published(const PublishedCheck& c);
/// JSON: {"schema_version": 1, "files": [{"path", "name", "url", "table", "metric", "sizes":
/// [{"name", "gpus", "kendall_tau", "concordant", "discordant", "pairs", "rows": [{"policy",
/// "measured_time_s", "predicted_time_s", "throughput_error"}]}], "median_throughput_error"}],
/// "median_throughput_error", "min_kendall_tau"} (NaN as null).
std::string published_to_json(const PublishedCheck& c);

}  // namespace sparsp::study
