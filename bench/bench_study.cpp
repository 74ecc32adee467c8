// Study throughput: the full HunyuanVideo 8-GPU study (50 steps x 60 layers) for one policy,
// (a) with a dynamic top-k pattern (every step and layer different: 3000 workloads generated,
// planned and simulated), goal < 60 s and < 1 GB on one core; (b) with STA (static: one workload
// simulated, reused 3000 times), goal < 1 s. Peak RSS is reported as a counter (getrusage).
// Figures go to study/RESULTS.md.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>

#include "sparsp/study.hpp"

namespace {

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;   // Linux: kilobytes
}

sparsp::study::Study study(const char* model, const char* kind) {
  sparsp::study::Study s;
  s.topologies = {"8x-l40s-gen4-4switch"};
  s.model = model;
  s.pattern.kind = kind;
  if (std::string(kind) == "sta") {
    s.pattern.block_tokens = 384;
    s.pattern.tile = {6, 8, 8};
    s.pattern.window = {3, 3, 3};
  } else {
    s.pattern.block_tokens = 128;
    s.pattern.density = 0.1;
    s.pattern.seed = 1;
  }
  auto p = sparsp::policy::parse_policy("dependency_aware/demand_direct/ce_decoupled");
  if (!p) std::abort();
  s.policies = {*p};
  s.policy_places = {"bench"};
  return s;
}

void run(benchmark::State& state, const sparsp::study::Study& s) {
  int64_t units = 0, simulated = 0;
  for (auto _ : state) {
    auto r = sparsp::study::run_study(s);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    units = r->policies[0].units;
    simulated = r->policies[0].simulated;
    benchmark::DoNotOptimize(r->policies[0].e2e_time_s);
  }
  state.counters["units"] = static_cast<double>(units);
  state.counters["simulated"] = static_cast<double>(simulated);
  state.counters["peak_rss_MB"] = peak_rss_bytes() / 1e6;
}

void BM_StudySta(benchmark::State& state) { run(state, study("hunyuanvideo-sta", "sta")); }
void BM_StudyTopkDynamic(benchmark::State& state) { run(state, study("hunyuanvideo-720p", "topk")); }

}  // namespace

BENCHMARK(BM_StudySta)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_StudyTopkDynamic)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_MAIN();
