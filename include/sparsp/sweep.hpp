#pragma once
// What-if studies from JSON: `sparsp sweep` (a grid of study variants, run in parallel, streamed
// to CSV / JSON Lines, resumable) and `sparsp tune` (search of policy parameters within a budget).
//
// A sweep is a base study document (the JSON `sparsp simulate --config` takes) plus axes. Each
// axis names a JSON pointer into the study and a list of values; a point of the sweep is the base
// study with one value of every axis written at its pointer (an RFC 6901 pointer, applied as an
// RFC 6902 "add"/"replace"). So any study, topology-template, pattern or policy field can be an
// axis without code; common axes also have friendly names (sweep_axis_aliases()).
//
// Axes combine as a Cartesian product; axes listed together in a {"zip": [...]} group advance
// together (equal lengths). The point order is fixed: the first group varies slowest, within a
// product the last axis fastest (row-major), as in numpy.ndindex.
//
// The evaluator that turns a point's study into metric rows is pluggable (PointEvaluator): the
// CLI plugs in the `simulate` study runner; tests plug in closed-form fakes. Schema of the sweep
// and tune files: docs/STUDIES.md.
//
// Thread safety: load/parse/make_point are pure. run_sweep calls evaluator.evaluate concurrently
// from `threads` oneTBB workers; the evaluator must be thread-safe (const and reentrant).
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparsp/status.hpp"

namespace sparsp::study {

/// One axis of a sweep (or one parameter of a tune search).
struct SweepAxis {
  std::string name;                      ///< column name in the output (unique)
  std::string pointer;                   ///< RFC 6901 JSON pointer into the study, e.g. "/block"
  std::vector<std::string> values_json;  ///< compact JSON text of each value, in file order
  int group = 0;                         ///< index into SweepSpec::groups
  bool complement = false;               ///< write 1 - value (e.g. "sparsity" -> /pattern/density)
  /// Where the values are in the sweep file, for errors: "/axes/0/values" (value j at
  /// "/axes/0/values/j") or "/axes/0/range" (a range: no per-value place).
  std::string values_place;
};

/// A parsed sweep file.
struct SweepSpec {
  std::string source;           ///< file name used in error messages
  std::string base_dir;         ///< directory relative paths of the study resolve against
  std::string base_study_json;  ///< the base study document (compact JSON text)
  /// The files the base study and the axis values name by path (models, topologies, a cluster's
  /// server file, recorded patterns), as compact JSON `{"<pointer>": "<FNV-1a 64 of the bytes,
  /// hex>"}`; empty when none. Part of the sweep's fingerprint, so a resume or a merge refuses a
  /// sweep whose named files changed.
  std::string named_file_hashes_json;
  std::vector<SweepAxis> axes;  ///< in file order (zip members in place)
  /// Product over groups; inside a group of several axes, the values are zipped. Each group lists
  /// axis indices; every axis is in exactly one group.
  std::vector<std::vector<int>> groups;
};

/// A friendly axis name and the study pointer it stands for.
struct AxisAlias {
  std::string name;
  std::string pointer;
  std::string description;
  bool complement = false;  ///< the study field holds 1 - the axis value
};

/// The friendly axis names accepted in place of "path" (see docs/STUDIES.md), in a fixed order.
const std::vector<AxisAlias>& sweep_axis_aliases();

/// Reads a sweep JSON. Errors (exit 2) name the file and the JSON pointer: missing/unknown keys,
/// unknown axis name, empty axis, duplicate axis name, value type not matching the base study's
/// value at that pointer (e.g. a string for a number), pointer whose parent is not in the base
/// study, zip members of different lengths, unreadable base study.
Result<SweepSpec> load_sweep(const std::string& path);
/// `base_dir` resolves a relative "study" path; `source_name` stands for the file in errors.
Result<SweepSpec> parse_sweep(const std::string& text, const std::string& source_name,
                              const std::string& base_dir);

/// Number of points (product over groups of the group length). Saturates at INT64_MAX.
int64_t num_points(const SweepSpec& spec);

/// The value index of every axis at point `index` (0 <= index < num_points), in axis order.
std::vector<int> point_coordinates(const SweepSpec& spec, int64_t index);

struct AxisSetting {
  std::string name;
  std::string value_json;  ///< compact JSON text
};

/// One variant of the base study.
struct SweepPoint {
  int64_t index = 0;
  std::vector<AxisSetting> settings;  ///< one per axis, in axis order
  std::string study_json;             ///< base study with every setting applied
  std::string base_dir;               ///< where relative paths in study_json resolve
};

/// Builds point `index`. Errors only for a patch that cannot apply (checked at parse time for
/// every value, so this does not fail for a spec that parse_sweep returned).
Result<SweepPoint> make_point(const SweepSpec& spec, int64_t index);
/// Builds the point whose value index of axis a is coords[a] (index = its position in the order).
Result<SweepPoint> make_point_at(const SweepSpec& spec, const std::vector<int>& coords);

/// What an evaluator says about one point.
struct PointOutcome {
  bool skipped = false;  ///< the point is invalid (e.g. heads not divisible)
  std::string reason;    ///< why it was skipped (one line)
  /// Rows of values aligned with PointEvaluator::columns, each a compact JSON scalar text
  /// ("1.5", "\"ring\"", "true", "null"). A point may give several rows (one per policy).
  std::vector<std::vector<std::string>> rows;
  /// Per row: empty when it ran, else why its policy was left out at this point (written with
  /// status "skipped" and this reason; the row's metric cells are "null"). Shorter than `rows`
  /// means the remaining rows ran.
  std::vector<std::string> row_reasons;
  /// When skipped: 2 when the point's own input is at fault (its study fails to load or a
  /// parameter is out of range), 1 for a failure at run time (out of memory, a write error); as
  /// Error::exit_code. tune exits 2 when every evaluated point failed with 2.
  int exit_code = 2;
};

/// The pluggable point evaluator.
struct PointEvaluator {
  std::vector<std::string> columns;  ///< metric column names, fixed for the sweep
  /// Thread-safe; must not throw. Same point, same outcome (determinism of the output).
  std::function<PointOutcome(const SweepPoint&)> evaluate;
  /// Optional, thread-safe, must not throw: checks a point's documents without running it (the
  /// study parses, its topologies and model load). run_sweep calls it for every value of every
  /// axis (the others at their first value) before it writes anything, so that a value the
  /// documents refuse (`pcie_gen: 4.5`) is an input error at its place in the sweep file (exit
  /// 2), not a skipped point.
  std::function<Status(const SweepPoint&)> check;
};

enum class OutputFormat { csv, jsonl };
enum class ProgressMode { automatic, bar, lines, off };

/// `automatic` resolved: a bar when stderr is a terminal and no explicit stream is given, else
/// `otherwise` (sweep: lines; simulate: off, so that piped output and logs stay unchanged).
ProgressMode resolve_progress_mode(ProgressMode mode, bool explicit_stream, ProgressMode otherwise);

/// Progress of a long run, shared by `sparsp sweep` (points) and `sparsp simulate` (layers):
///  - bar: "[####....] 123/1000 points, 41.0 points/s, ETA 21s", redrawn in place at most every
///    0.1 s, ended with a newline by the final update;
///  - lines: "<prefix>: 123/1000 points, 41.0 points/s, ETA 21s" at most every interval_s;
///  - off (and an unresolved automatic): nothing.
/// `already` units were done before this run (resumed) and do not count towards the rate. The rate
/// and the ETA are left out ("123/1000 points") until 0.2 s have passed (a rate over a shorter
/// time is noise); rates are written with SI suffixes (format_rate).
/// Not thread-safe: call update from one thread.
/// A rate for people: 3 significant digits, SI suffix from 1000 on ("41.0", "999", "1.20k",
/// "25.4M", "3.00G"); "?" for a negative or non-finite rate.
std::string format_rate(double per_s);

class ProgressMeter {
 public:
  ProgressMeter(ProgressMode mode, int64_t total, int64_t already = 0, std::string unit = "points",
                std::string prefix = "sweep", double interval_s = 10.0,
                std::ostream* out = nullptr);  ///< out: nullptr = std::cerr
  /// `done` units of `total` are done; `final` prints regardless of the period.
  void update(int64_t done, bool final = false);

 private:
  std::ostream& out_;
  ProgressMode mode_;
  int64_t total_, already_;
  double interval_s_;
  std::string unit_, prefix_;
  std::chrono::steady_clock::time_point start_, last_;
};

/// One shard of a sweep for job arrays (`sparsp sweep --shard K/N`, Slurm array jobs): shard
/// `index` of `count` (1-based) holds the points k with k % count == index - 1, so that
/// neighbouring points, which tend to cost alike, are spread over the shards.
struct SweepShard {
  int index = 1;
  int count = 1;
};

/// Parses "K/N" (decimal, 1 <= K <= N <= 1,000,000). Errors (exit 2), naming `flag`:
/// "<command line>:--shard: expected K/N with 1 <= K <= N, got '0/4'".
Result<SweepShard> parse_shard(const std::string& text, const std::string& flag = "--shard");

/// The rendered rows of one point, as a process that evaluated it sends them to rank 0.
struct PointRows {
  int64_t point = 0;     ///< point index in the sweep
  int64_t rows = 0;      ///< lines in `text`
  bool skipped = false;  ///< the point was skipped (one row with the reason)
  std::string text;      ///< the point's output lines, each ending in '\n'
};

/// The processes one sweep runs on (MPI ranks, `mpirun -n N sparsp sweep`). Every rank calls
/// run_sweep with the same spec and options. Rank 0 owns the output (lock, resume, writing);
/// position i of the points left to run is evaluated by rank i % size() and its rows are sent
/// to rank 0, which writes them in point order. An implementation over MPI is
/// mpi_sweep_ranks(); tests plug in an in-process one.
class SweepRanks {
 public:
  virtual ~SweepRanks() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Collective: every rank gets rank 0's `values` (same length on every rank).
  virtual void broadcast(std::vector<int64_t>& values) = 0;
  /// Rank != 0: sends one point's rows to rank 0; a rank sends its points in increasing order.
  /// Errors (exit 1): the transport failed.
  virtual Status send_to_root(const PointRows& rows) = 0;
  /// Rank 0: the next PointRows rank `from` sent (waits for it). Errors (exit 1).
  virtual Result<PointRows> receive_from(int from) = 0;
  /// Rank 0: the run stopped before every point was written (write error, stop); the other
  /// ranks, still evaluating, are ended (exit `exit_code`) when this object is destroyed, after
  /// the caller has reported why.
  virtual void abandon(int exit_code) = 0;
};

/// Whether this build runs sweeps over MPI (Open MPI found at configure time, SPARSP_ENABLE_MPI).
bool mpi_available();
/// Whether this process was started by an MPI launcher with more than one process
/// (OMPI_COMM_WORLD_SIZE or PMI_SIZE > 1 in the environment); works in any build.
bool mpi_launched();
/// The ranks of MPI_COMM_WORLD: initialises MPI (thread level serialized) and finalises it when
/// the returned object is destroyed (MPI_Abort instead after abandon()). Call once per process.
/// Errors (exit 1): no MPI in this build, or MPI cannot start.
Result<std::unique_ptr<SweepRanks>> mpi_sweep_ranks();

struct SweepOptions {
  std::string output_path;  ///< final file; ".csv" or ".jsonl"/".json" picks format
  int threads = 0;          ///< workers; 0 = every core this process may use (oneTBB default)
  /// Write only this shard's points (`--shard K/N`); the file then starts with a shard line
  /// (docs/STUDIES.md) that merge_sweep_shards checks. None: the whole sweep, no shard line.
  std::optional<SweepShard> shard;
  /// The ranks to spread the points over; nullptr: this process alone. Not owned.
  SweepRanks* ranks = nullptr;
  bool restart = false;  ///< ignore (overwrite) earlier output instead of resuming
  ProgressMode progress = ProgressMode::automatic;  ///< automatic: bar iff stderr is a terminal
  double progress_interval_s = 10.0;                ///< period of the plain progress lines
  std::ostream* progress_stream = nullptr;          ///< nullptr: std::cerr
  /// Command-line options that change the rows (name -> compact JSON value, e.g.
  /// {"--max-memory-gib", "16.0"}), recorded with the sweep's fingerprint in
  /// `<output>.partial.study`: a resume with a different value is refused, naming the option and
  /// both values. Give the effective value (the default when the option is not given), so that
  /// leaving it out and giving the default are the same sweep.
  std::map<std::string, std::string> row_options;
  /// Testing aid: stop (as if killed) after this many points were written in this run; -1 = off.
  int64_t stop_after_points = -1;
};

struct SweepSummary {
  int64_t total_points = 0;
  int64_t resumed_points = 0;    ///< found complete in earlier output, not re-run
  int64_t evaluated_points = 0;  ///< evaluated in this run
  int64_t skipped_points = 0;    ///< evaluated in this run and recorded as skipped
  int64_t rows_written = 0;
  double wall_s = 0;
  bool complete = false;  ///< all points are in output_path
};

/// Output format from the file name: ".csv" -> csv; ".jsonl", ".ndjson", ".json" -> jsonl.
Result<OutputFormat> output_format_for(const std::string& path);

/// Runs every point (of options.shard, when given) and streams one row per evaluator row (one
/// per skipped point) to the output, in point order whatever the thread timing (an in-order
/// oneTBB pipeline), each point's rows flushed whole. With options.ranks, every rank calls it
/// (SweepRanks); rank 0 returns the summary, the others a summary of their own points, or an
/// Error with an empty message for an error rank 0 reports.
/// Columns: point, the axis names, status ("ok" | "skipped"), reason, the evaluator columns (one
/// named like an axis is written "result.<name>").
///
/// Resumption: while running, rows go to `<output>.partial`, renamed to `<output>` when every
/// point is written. Rerunning with the same output continues the `.partial` file: a torn last
/// line is dropped, the last point present is evaluated again (its rows may be incomplete), the
/// points before it are kept. A complete `<output>` is checked and left as is. Rows whose axis
/// values do not match this sweep's points make it an error (exit 2), so a changed sweep never
/// mixes with old output; `restart` starts afresh.
/// Errors: unwritable output (exit 1), earlier output from a different sweep (exit 2).
Result<SweepSummary> run_sweep(const SweepSpec& spec, const PointEvaluator& evaluator,
                               const SweepOptions& options);

/// What merge_sweep_shards did.
struct MergeSummary {
  int64_t total_points = 0;
  int64_t rows_written = 0;
  int shards = 0;
};

/// `sparsp sweep merge`: joins the complete outputs of shards 1..N of one sweep (written with
/// SweepOptions::shard) into `output_path`, byte-identical to the output of one process running
/// the whole sweep. Written through a temporary file and a rename (sparsp/output_file.hpp).
/// Errors (exit 2), naming the file and line: an input that is not a shard output, shards of
/// different sweeps (fingerprint of the effective sweep, its row options, its point count),
/// different shard counts, a shard given twice, a shard missing ("<command line>:merge: ..."),
/// an incomplete shard (a point missing), the output's format (.csv / .jsonl) not the shards'.
Result<MergeSummary> merge_sweep_shards(const std::vector<std::string>& inputs,
                                        const std::string& output_path);

/// Renders one output line (no newline) for point `point` and evaluator row `row`
/// (empty row: skipped point). Exposed for tests and for `tune`'s table.
std::string render_row(OutputFormat format, const SweepPoint& point,
                       const std::vector<std::string>& columns, const PointOutcome& outcome,
                       size_t row);
/// Header line of a CSV file (JSON Lines has none: returns "").
std::string render_header(OutputFormat format, const SweepSpec& spec,
                          const std::vector<std::string>& columns);

// ---- tune -----------------------------------------------------------------------------------

enum class TuneMethod { automatic, exhaustive, coordinate_descent };

/// A parsed tune file: a sweep whose axes are the parameters searched.
struct TuneSpec {
  SweepSpec space;                  ///< base study + parameter axes (each its own group)
  std::vector<int> default_coords;  ///< value index per parameter of the default config
                                    ///< (the base study's value; -1 if not among values)
  TuneMethod method = TuneMethod::automatic;
  int64_t budget = 64;                         ///< at most this many distinct evaluations
  uint64_t seed = 1;                           ///< orders coordinates and picks restart points
  int top = 10;                                ///< rows of the top-N table
  std::string objective = "e2e_time_s";        ///< metric minimised
  std::string policy_pointer = "/policies/0";  ///< the policy written as the tuned policy JSON
  std::string output_path;                     ///< where the tuned policy JSON goes ("" = none)
  std::string study_output_path;               ///< where the tuned study JSON goes ("" = none); use
                                  ///< it when parameters lie outside the policy (/sim/...)
};

/// Reads a tune JSON (schema in docs/STUDIES.md). Errors as load_sweep, plus budget < 1, unknown
/// method, policy pointer not in the study.
Result<TuneSpec> load_tune(const std::string& path);
Result<TuneSpec> parse_tune(const std::string& text, const std::string& source_name,
                            const std::string& base_dir);

/// Objective of one point: ok with a value (lower is better), or invalid with a reason.
struct Score {
  bool ok = false;
  double value = 0;
  std::string reason;
  /// When !ok: 2 when the point's input is at fault, 1 for a run-time failure (PointOutcome).
  int exit_code = 2;
};
/// Thread-safe; deterministic.
using ScoreFn = std::function<Score(const SweepPoint&)>;

struct TuneEntry {
  std::vector<int> coords;
  SweepPoint point;
  Score score;
};

struct TuneResult {
  TuneMethod method_used = TuneMethod::exhaustive;
  int64_t space_size = 0;
  int64_t evaluations = 0;   ///< distinct points evaluated (<= budget, + default)
  bool has_default = false;  ///< default config evaluated and valid
  TuneEntry best;            ///< lowest valid score; ties to the lower point index
  TuneEntry default_entry;
  double margin = 0;              ///< default / best - 1 (0.12 = default 12% slower)
  std::vector<TuneEntry> ranked;  ///< every valid evaluation, best first (ties by index)
  std::string tuned_policy_json;  ///< pretty JSON at policy_pointer of best's study
  std::string tuned_study_json;   ///< best's whole study, pretty JSON
};

/// Searches the space. Exhaustive when the space fits the budget (method automatic), otherwise
/// coordinate descent: start at the default (or a seeded random point), sweep each parameter in a
/// seeded order with the others fixed, move to the best, repeat until a full pass does not
/// improve, then restart from seeded random points while budget is left. Points of one line are
/// evaluated in parallel on `threads` oneTBB workers (0: every core this process may use).
/// Deterministic for a given seed whatever `threads`. Errors: no valid point found: exit 2 with the
/// first point's input error when every failure came from the points' input (Score::exit_code 2),
/// else exit 1 with the first run-time failure.
Result<TuneResult> run_tune(const TuneSpec& spec, const ScoreFn& score, int threads);

/// A ScoreFn from any evaluator: the value of `column` in row `row` of the point's outcome
/// (row r is the study's r-th policy for the study evaluator). A skipped point, a missing row
/// or a non-numeric cell is an invalid score with the reason. Errors (exit 2): `column` not
/// among evaluator.columns.
Result<ScoreFn> score_from_evaluator(PointEvaluator evaluator, const std::string& column,
                                     size_t row);

// ---- the `simulate` study as evaluator ----------------------------------------------------------

/// Whether this build has the `simulate` study runner (study/run.cpp) to evaluate points with.
bool study_runner_available();
/// The `simulate` study runner as a sweep evaluator: the point's study JSON is loaded as
/// `sparsp simulate --config` loads a file (relative paths against the point's base_dir) and
/// run; one row per policy with every metric of `simulate --json`. A study that fails to load or
/// run (e.g. Ulysses degree not dividing the heads) is a skipped point with the error as reason.
/// `max_memory_bytes` > 0 replaces each point's memory limit (RunOptions::max_memory_bytes,
/// `--max-memory-gib`); 0 keeps the fixed default (16 GiB), so skip rows match on every machine.
/// Errors (exit 1): no study runner in this build.
Result<PointEvaluator> study_point_evaluator(double max_memory_bytes = 0);
/// The score tune minimises: metric `objective` of the policy at `policy_pointer`
/// ("/policies/N" -> row N; other pointers -> row 0), points run with `max_memory_bytes` as in
/// study_point_evaluator. Errors: unknown metric (exit 2).
Result<ScoreFn> study_score(const std::string& objective, const std::string& policy_pointer,
                            double max_memory_bytes = 0);

/// Writes `text` to `path` through a temporary file of its own in the same folder
/// (`<path>.XXXXXX.tmp`, created exclusively) and a rename, so the path never holds partial
/// content and no temporary is left behind. Errors: the temporary cannot be created (exit 2,
/// "<path>: cannot write: <why>"); writing or renaming it fails (exit 1).
Status write_text_atomic(const std::string& path, const std::string& text);

/// Checks, before a long run, that `path` can be written the way write_text_atomic writes it:
/// `path` is not a folder, its folder exists, and a file can be created there (`<path>.tmp` is
/// created and removed again; an existing one is left as it was). Writes nothing else.
/// Errors (exit 2): "<path>: cannot write: <why>".
Status check_writable(const std::string& path);

/// Human-readable report: best configuration, margin over the default, top-N table.
std::string format_tune_report(const TuneSpec& spec, const TuneResult& result);

}  // namespace sparsp::study
