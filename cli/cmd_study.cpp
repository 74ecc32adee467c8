// Subcommands registered by add_study_commands (see commands.hpp): `sweep` and `tune`.
// Thin layer: parse options, call run_sweep / run_tune with the `simulate` study evaluator, map
// the result to an exit code. Schemas and methods: docs/STUDIES.md.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "sparsp/sweep.hpp"

namespace sparsp::cli {

namespace {

struct SweepArgs {
  std::string config;
  std::string output;
  int threads = 0;
  bool restart = false;
  std::string progress = "auto";
  double progress_interval_s = 10.0;
  double max_memory_gib = 0;  // 0: the study default (16 GiB)
  bool json = false;
  std::string shard;         // "K/N"
  bool shard_given = false;  // --shard was on the command line (an empty value is refused)
};

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string output;
  bool json = false;
};

struct TuneArgs {
  std::string config;
  std::string output;
  std::string study_output;
  int threads = 0;
  int64_t budget = -1;
  int64_t seed = -1;
  int top = -1;
  double max_memory_gib = 0;  // 0: the study default (16 GiB)
  bool json = false;
};

// The ranks of `mpirun -n N sparsp sweep`, or none. Errors (exit 2): started by an MPI launcher
// with several processes, but this build has no MPI.
Result<std::unique_ptr<study::SweepRanks>> sweep_ranks() {
  if (!study::mpi_launched()) return std::unique_ptr<study::SweepRanks>();
  if (!study::mpi_available())
    return Error{
        "sweep: started by an MPI launcher with several processes, but this sparsp was "
        "built without MPI (install libopenmpi-dev, reconfigure); or use --shard K/N "
        "and `sparsp sweep merge`",
        2};
  return study::mpi_sweep_ranks();
}

// Loads what every rank needs; with ranks, they agree on rank 0's outcome first, so that bad
// input is reported once, by rank 0, and no rank is left waiting.
Status load_sweep_inputs(const SweepArgs& a, study::SweepRanks* ranks,
                         Result<study::SweepSpec>& spec, Result<study::PointEvaluator>& evaluator,
                         std::optional<study::SweepShard>& shard) {
  Status st = distinct_files({{"--config", a.config}, {"--output", a.output}});
  if (st) spec = study::load_sweep(a.config);
  if (st && !spec) st = spec.error();
  if (st) evaluator = study::study_point_evaluator(a.max_memory_gib * (1ull << 30));
  if (st && !evaluator) st = evaluator.error();
  if (st && (a.shard_given || !a.shard.empty())) {
    auto sh = study::parse_shard(a.shard);
    if (sh)
      shard = sh.value();
    else
      st = sh.error();
  }
  if (!ranks || ranks->size() < 2) return st;
  std::vector<int64_t> rank0 = {st ? 0 : st.error().exit_code};
  ranks->broadcast(rank0);
  if (ranks->rank() != 0 && rank0[0] != 0) return Error{"", static_cast<int>(rank0[0])};
  if (ranks->rank() != 0 && !st) {
    // Only this rank failed (its files differ from rank 0's): say so and end the job.
    ranks->abandon(st.error().exit_code);
    return Error{"rank " + std::to_string(ranks->rank()) + ": " + st.error().message,
                 st.error().exit_code};
  }
  return st;
}

void print_sweep_summary(const SweepArgs& a, const study::SweepSummary& sum) {
  if (a.json) {
    nlohmann::ordered_json j;
    j["output"] = a.output;
    j["total_points"] = sum.total_points;
    j["resumed_points"] = sum.resumed_points;
    j["evaluated_points"] = sum.evaluated_points;
    j["skipped_points"] = sum.skipped_points;
    j["rows_written"] = sum.rows_written;
    j["wall_s"] = sum.wall_s;
    j["points_per_s"] = sum.wall_s > 0 ? static_cast<double>(sum.evaluated_points) / sum.wall_s : 0;
    j["complete"] = sum.complete;
    if (!a.shard.empty()) j["shard"] = a.shard;
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf(
        "sweep: %s%lld points (%lld resumed, %lld evaluated, %lld skipped), %lld rows -> %s"
        " in %.2f s\n",
        a.shard.empty() ? "" : ("shard " + a.shard + ": ").c_str(),
        static_cast<long long>(sum.total_points), static_cast<long long>(sum.resumed_points),
        static_cast<long long>(sum.evaluated_points), static_cast<long long>(sum.skipped_points),
        static_cast<long long>(sum.rows_written), a.output.c_str(), sum.wall_s);
  }
}

int run_sweep_command(const SweepArgs& a) {
  // `sweep` without `merge` needs both (CLI11's own message for a missing required option).
  if (a.config.empty()) throw CLI::RequiredError("--config");
  if (a.output.empty()) throw CLI::RequiredError("--output");
  auto ranks = sweep_ranks();
  if (!ranks) return report(ranks.error());
  study::SweepRanks* r = ranks->get();
  const bool root = !r || r->rank() == 0;
  Result<study::SweepSpec> spec = Error{"", 1};
  Result<study::PointEvaluator> evaluator = Error{"", 1};
  std::optional<study::SweepShard> shard;
  if (auto st = load_sweep_inputs(a, r, spec, evaluator, shard); !st)
    return st.error().message.empty() ? st.error().exit_code : report(st.error());
  study::SweepOptions o;
  o.output_path = a.output;
  o.threads = a.threads;
  o.restart = a.restart;
  o.shard = shard;
  o.ranks = r;
  // The memory limit decides which points are skipped: part of what a resume must match.
  o.row_options["--max-memory-gib"] =
      nlohmann::json(a.max_memory_gib > 0 ? a.max_memory_gib : 16.0).dump();
  o.progress_interval_s = a.progress_interval_s;
  o.progress = a.progress == "bar"     ? study::ProgressMode::bar
               : a.progress == "lines" ? study::ProgressMode::lines
               : a.progress == "off"   ? study::ProgressMode::off
                                       : study::ProgressMode::automatic;
  auto sum = study::run_sweep(*spec, *evaluator, o);
  if (!root) {
    if (sum || sum.error().message.empty()) return sum ? 0 : sum.error().exit_code;
    r->abandon(sum.error().exit_code);  // this rank failed: end the job, rank 0 waits for it
    return report(Error{"rank " + std::to_string(r->rank()) + ": " + sum.error().message,
                        sum.error().exit_code});
  }
  if (!sum) return report(sum.error());
  print_sweep_summary(a, *sum);
  if (!sum->complete) return 1;
  if (sum->total_points > 0 && sum->evaluated_points == sum->total_points &&
      sum->skipped_points == sum->total_points) {
    // Nothing was simulated: an output of reasons only is not a success.
    std::fflush(stdout);
    std::cerr << "sparsp: sweep: every one of the " << sum->total_points
              << " points was skipped (see the reason column in " << a.output << ")\n";
    return 1;
  }
  return 0;
}

int run_merge_command(const MergeArgs& a) {
  for (const auto& in : a.inputs) {
    // A missing input is named as missing, before its format is judged.
    if (std::error_code ec; !std::filesystem::exists(in, ec))
      return report(input_error(in, "", "cannot open file: no such file"));
    if (auto st = distinct_files({{"a shard output", in}, {"--output", a.output}}); !st)
      return report(st.error());
  }
  auto sum = study::merge_sweep_shards(a.inputs, a.output);
  if (!sum) return report(sum.error());
  if (a.json) {
    nlohmann::ordered_json j;
    j["output"] = a.output;
    j["shards"] = sum->shards;
    j["total_points"] = sum->total_points;
    j["rows_written"] = sum->rows_written;
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("sweep merge: %d shards, %lld points, %lld rows -> %s\n", sum->shards,
                static_cast<long long>(sum->total_points),
                static_cast<long long>(sum->rows_written), a.output.c_str());
  }
  return 0;
}

int run_tune_command(const TuneArgs& a) {
  if (auto st = distinct_files(
          {{"--config", a.config}, {"--output", a.output}, {"--study-output", a.study_output}});
      !st)
    return report(st.error());
  auto spec = study::load_tune(a.config);
  if (!spec) return report(spec.error());
  if (a.budget > 0) spec->budget = a.budget;
  if (a.seed >= 0) spec->seed = static_cast<uint64_t>(a.seed);
  if (a.top > 0) spec->top = a.top;
  // Outputs named on the command line replace the file's "output" and "study_output" as a set:
  // `tune -c F -o x.json` writes only x.json, never the (possibly committed) study_output the
  // file names. Without -o/--study-output, the file's paths are written.
  if (!a.output.empty() || !a.study_output.empty()) {
    spec->output_path = a.output;
    spec->study_output_path = a.study_output;
  }
  // Outputs are written after the (long) search: refuse unwritable paths now.
  for (const std::string* path : {&spec->output_path, &spec->study_output_path})
    if (!path->empty())
      if (auto st = study::check_writable(*path); !st) return report(st.error());
  auto score =
      study::study_score(spec->objective, spec->policy_pointer, a.max_memory_gib * (1ull << 30));
  if (!score) {
    // study_score does not know the file: "tune:/objective: ..." -> "<file>:/objective: ...".
    Error e = score.error();
    const std::string from = "tune:/";
    if (e.message.compare(0, from.size(), from) == 0)
      e.message = spec->space.source + ":" + e.message.substr(from.size() - 1);
    return report(e);
  }
  auto res = study::run_tune(*spec, *score, a.threads);
  if (!res) return report(res.error());
  if (!spec->output_path.empty()) {
    auto st = study::write_text_atomic(spec->output_path, res->tuned_policy_json);
    if (!st) return report(st.error());
  }
  if (!spec->study_output_path.empty()) {
    auto st = study::write_text_atomic(spec->study_output_path, res->tuned_study_json);
    if (!st) return report(st.error());
  }
  if (a.json) {
    nlohmann::ordered_json j;
    j["method"] =
        res->method_used == study::TuneMethod::exhaustive ? "exhaustive" : "coordinate_descent";
    j["space_size"] = res->space_size;
    j["evaluations"] = res->evaluations;
    j["objective"] = spec->objective;
    auto entry = [](const study::TuneEntry& e) {
      nlohmann::ordered_json o;
      for (const auto& s : e.point.settings)
        o["config"][s.name] = nlohmann::json::parse(s.value_json);
      o["value"] = e.score.value;
      return o;
    };
    j["best"] = entry(res->best);
    if (res->has_default) j["default"] = entry(res->default_entry);
    j["margin"] = res->margin;
    j["top"] = nlohmann::json::array();
    for (size_t i = 0; i < res->ranked.size() && i < static_cast<size_t>(spec->top); ++i)
      j["top"].push_back(entry(res->ranked[i]));
    j["tuned_policy"] = nlohmann::json::parse(res->tuned_policy_json);
    if (!spec->output_path.empty()) j["policy_written"] = spec->output_path;
    if (!spec->study_output_path.empty()) j["study_written"] = spec->study_output_path;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << study::format_tune_report(*spec, *res);
    if (!spec->output_path.empty()) std::cout << "tuned policy -> " << spec->output_path << "\n";
    if (!spec->study_output_path.empty())
      std::cout << "tuned study -> " << spec->study_output_path << "\n";
  }
  return 0;
}

}  // namespace

void add_study_commands(CLI::App& app, Context& ctx) {
  // Registered only where they work: they evaluate points with the `simulate` study runner.
  if (!study::study_runner_available()) return;
  {
    auto a = std::make_shared<SweepArgs>();
    CLI::App* c = app.add_subcommand(
        "sweep",
        "Run a what-if study: every point of a grid of study variants (topology template, model, "
        "pattern, degree, block size, policies and their parameters) through `simulate`, in "
        "parallel, streamed to CSV or JSON Lines; rerun with the same output to resume");
    c->footer(
        "Over many machines (docs/STUDIES.md):\n"
        "  MPI: mpirun -n N sparsp sweep -c C -o out.csv  (the points are spread over the ranks; "
        "rank 0 writes out.csv, byte-identical to one process; rerun to resume after any rank "
        "died)\n"
        "  job arrays (Slurm): sparsp sweep -c C --shard K/N -o part_K.csv  for K = 1..N, then\n"
        "    sparsp sweep merge part_1.csv ... part_N.csv -o out.csv  (byte-identical to one "
        "process; refuses shards of different sweeps, missing or repeated shards)");
    c->add_option("--config,-c", a->config,
                  "sweep JSON (schema: docs/STUDIES.md); required unless `merge`")
        ->check(existing_file());
    c->add_option("--output,-o", a->output, "results file: .csv or .jsonl");
    c->add_option("--shard", a->shard,
                  "run only shard K of N (1 <= K <= N): the points k with k % N == K - 1, for "
                  "job arrays; join the N outputs with `sparsp sweep merge`");
    c->add_option("--threads,-j", a->threads,
                  "oneTBB worker threads per process (default: every core this process may use)")
        ->check(at_least(0));
    c->add_flag("--restart", a->restart, "discard earlier output instead of resuming");
    c->add_option("--progress", a->progress,
                  "progress on stderr: auto (a bar on a terminal, else lines), bar, lines, off")
        ->check(CLI::IsMember({"auto", "bar", "lines", "off"}));
    c->add_option("--progress-interval", a->progress_interval_s,
                  "seconds between plain progress lines")
        ->check(at_least(0));
    c->add_option("--max-memory-gib", a->max_memory_gib,
                  "refuse (skip) a point estimated to need more memory than this (GiB; default "
                  "16)")
        ->check(above_up_to(0, 1e6));
    c->add_flag("--json", a->json, "print the run summary as JSON");
    auto m = std::make_shared<MergeArgs>();
    CLI::App* merge = c->add_subcommand(
        "merge",
        "Join the outputs of shards 1..N of one sweep (`sparsp sweep --shard K/N`) into the "
        "output one process would have written, byte for byte; no --config needed");
    merge->add_option("shards", m->inputs, "shard outputs (.csv or .jsonl), in any order")
        ->required();
    merge->add_option("--output,-o", m->output, "merged results file: .csv or .jsonl")->required();
    merge->add_flag("--json", m->json, "print the merge summary as JSON");
    merge->callback([m, &ctx] { ctx.exit_code = run_merge_command(*m); });
    c->callback([a, merge, c, &ctx] {
      a->shard_given = c->count("--shard") > 0;
      if (!merge->parsed()) ctx.exit_code = run_sweep_command(*a);
    });
  }
  {
    auto a = std::make_shared<TuneArgs>();
    CLI::App* c = app.add_subcommand(
        "tune",
        "Search policy parameters for the lowest simulated end-to-end time within an evaluation "
        "budget (exhaustive or coordinate descent, seeded); report the best configuration, its "
        "margin over the default, the top-N table; write the tuned policy JSON");
    c->footer(
        "Exit codes: 0 a best configuration was found; 2 bad input (the tune file, its study, "
        "an option), and also when no configuration is valid and every evaluated one failed on "
        "its input (the first such error is printed); 1 a run-time failure (out of memory, a "
        "write error), or no valid configuration where at least one failed at run time.");
    c->add_option("--config,-c", a->config, "tune JSON (schema: docs/STUDIES.md)")
        ->required()
        ->check(existing_file());
    c->add_option("--output,-o", a->output,
                  "tuned policy JSON; with -o or --study-output, only the paths given here are "
                  "written (the file's \"output\" and \"study_output\" are ignored)");
    c->add_option("--study-output", a->study_output,
                  "tuned study JSON (the whole study with the best parameters); see -o");
    c->add_option("--budget", a->budget, "maximum distinct evaluations (overrides the file)")
        ->check(at_least(1));
    c->add_option("--seed", a->seed, "search seed (overrides the file)")->check(at_least(0));
    c->add_option("--top", a->top, "rows of the top-N table")->check(at_least(1));
    c->add_option("--threads,-j", a->threads,
                  "oneTBB worker threads per process (default: every core this process may use)")
        ->check(at_least(0));
    c->add_option("--max-memory-gib", a->max_memory_gib,
                  "refuse a configuration estimated to need more memory than this (GiB; default "
                  "16)")
        ->check(above_up_to(0, 1e6));
    c->add_flag("--json", a->json, "print the result as JSON");
    c->callback([a, &ctx] { ctx.exit_code = run_tune_command(*a); });
  }
}

}  // namespace sparsp::cli
