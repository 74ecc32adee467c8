// Sweep throughput: points per second of a 1,000-point sweep over the 8-GPU presets with STA
// (4 topologies x 10 policies x 25 STA windows, HunyuanVideo 720p, all steps and layers; STA is
// static, so each point simulates one workload per policy and reuses it), with 1 and 2 worker
// threads. Goal (issue 7): 2 threads >= 1.8x the 1-thread rate.
//
//   build/release/bench/bench_sweep --benchmark_counters_tabular=true
//
// Each iteration runs the whole sweep afresh (restart) into a temporary CSV.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "sparsp/sweep.hpp"

namespace {

std::string sweep_json() {
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
        ["dependency_aware/demand_direct/ce_decoupled"],
        ["dependency_aware/demand_hierarchical/ce_decoupled"]]},
      {"name": "window", "values": [)" +
         windows + R"(]}]})";
}

void BM_Sweep1000(benchmark::State& state) {
  auto spec = sparsp::sim::parse_sweep(sweep_json(), "<bench>", "");
  if (!spec) {
    state.SkipWithError(spec.error().message.c_str());
    return;
  }
  auto ev = sparsp::sim::study_point_evaluator();
  if (!ev) {
    state.SkipWithError(ev.error().message.c_str());
    return;
  }
  const auto out = std::filesystem::temp_directory_path() / "sparsp_bench_sweep.csv";
  sparsp::sim::SweepOptions o;
  o.output_path = out.string();
  o.threads = static_cast<int>(state.range(0));
  o.restart = true;
  o.progress = sparsp::sim::ProgressMode::off;
  int64_t points = 0, skipped = 0;
  for (auto _ : state) {
    auto sum = sparsp::sim::run_sweep(*spec, *ev, o);
    if (!sum) {
      state.SkipWithError(sum.error().message.c_str());
      return;
    }
    points += sum->evaluated_points;
    skipped += sum->skipped_points;
  }
  state.counters["points"] = static_cast<double>(num_points(*spec));
  state.counters["skipped"] = static_cast<double>(skipped) / static_cast<double>(state.iterations());
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
  std::filesystem::remove(out);
}
BENCHMARK(BM_Sweep1000)->Arg(1)->Arg(2)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
