// Sweep throughput: points per second of a 1,000-point sweep over the 8-GPU presets with STA
// (4 topologies x 10 policies x 25 STA windows, HunyuanVideo 720p, all steps and layers; STA is
// static, so each point simulates one workload per policy and reuses it), with 1 and 2 worker
// threads, with and without the METIS-based placement. Goal (issue 7): both cores busy and
// 2 threads >= 1.8x the 1-thread rate.
//
//   build/release/bench/bench_sweep --benchmark_counters_tabular=true
//
// Each iteration runs the whole sweep afresh (restart) into a temporary CSV.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>

#include "sparsp/sweep.hpp"

namespace {

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// metis=1: the ten policies of the default study, two of them dependency_aware (METIS; their
// studies run one at a time, see study/sweep_study.cpp). metis=0: those two replaced by
// balanced/demand_direct/sync and contiguous/demand_direct/sm_overlap.
std::string sweep_json(bool with_metis) {
  std::string windows;
  for (int t = 1; t <= 5; ++t)
    for (int h = 1; h <= 5; ++h)
      windows += std::string(windows.empty() ? "" : ", ") + "[" + std::to_string(t) + ", " +
                 std::to_string(h) + ", 3]";
  return R"({"schema_version": 1,
    "study": {"schema_version": 1, "topologies": ["8x-l40s-gen4-4switch"],
              "model": "hunyuanvideo-sta",
              "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
              "gpus": 8, "policies": ["contiguous/ring/sm_overlap"]},
    "axes": [
      {"name": "topology", "values": ["8x-l40s-gen4-4switch", "8x-rtx4090-epyc-nop2p",
                                      "8x-gen5-2switch-per-socket", "8x-h100-sxm-nvswitch"]},
      {"name": "policies", "values": [
        ["contiguous/ring/sm_overlap"], ["contiguous/ring/sm_overlap:skip_empty=1"],
        ["contiguous/allgather/sync"], ["head_parallel/ulysses/sync"],
        ["contiguous/usp/sm_overlap"], ["contiguous/demand_alltoall/sync"],
        ["contiguous/demand_direct/ce_decoupled"], ["balanced/demand_direct/ce_decoupled"],
        )" +
         std::string(with_metis ? R"(["dependency_aware/demand_direct/ce_decoupled"],
        ["dependency_aware/demand_hierarchical/ce_decoupled"])"
                                : R"(["balanced/demand_direct/sync"],
        ["contiguous/demand_direct/sm_overlap"])") +
         R"(]},
      {"name": "window", "values": [)" +
         windows + R"(]}]})";
}

void BM_Sweep1000(benchmark::State& state) {
  auto spec = sparsp::study::parse_sweep(sweep_json(state.range(1) != 0), "<bench>", "");
  if (!spec) {
    state.SkipWithError(spec.error().message.c_str());
    return;
  }
  auto ev = sparsp::study::study_point_evaluator();
  if (!ev) {
    state.SkipWithError(ev.error().message.c_str());
    return;
  }
  const auto out = std::filesystem::temp_directory_path() / "sparsp_bench_sweep.csv";
  sparsp::study::SweepOptions o;
  o.output_path = out.string();
  o.threads = static_cast<int>(state.range(0));
  o.restart = true;
  o.progress = sparsp::study::ProgressMode::off;
  int64_t points = 0, skipped = 0;
  double cpu_s = 0, wall_s = 0;
  for (auto _ : state) {
    const double cpu0 = process_cpu_s();
    auto sum = sparsp::study::run_sweep(*spec, *ev, o);
    if (!sum) {
      state.SkipWithError(sum.error().message.c_str());
      return;
    }
    cpu_s += process_cpu_s() - cpu0;
    wall_s += sum->wall_s;
    points += sum->evaluated_points;
    skipped += sum->skipped_points;
  }
  state.counters["points"] = static_cast<double>(num_points(*spec));
  state.counters["skipped"] =
      static_cast<double>(skipped) / static_cast<double>(state.iterations());
  // Cores kept busy: process CPU time / wall time (2.0 = both cores of this machine).
  state.counters["cores_busy"] = wall_s > 0 ? cpu_s / wall_s : 0;
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
  std::filesystem::remove(out);
}
BENCHMARK(BM_Sweep1000)
    ->ArgNames({"threads", "metis"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
