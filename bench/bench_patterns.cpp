// Pattern generation, KV demand and streaming speed / peak memory (issue 3 goals):
//  * HunyuanVideo 720p STA, 60 layers x 24 heads, block 128, plus the per-GPU demand matrix for
//    8 GPUs of every layer: goal < 1 s and < 256 MB peak on one core;
//  * streaming a 50-step dynamic topk pattern for Wan2.1-14B: goal < 512 MB peak.
// Peak memory is the process's getrusage max RSS (run one benchmark per process with
// --benchmark_filter to attribute it), reported as the counter peak_rss_MiB.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "sparsp/pattern.hpp"

namespace pt = sparsp::patterns;

namespace {

double peak_rss_MiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux: KiB
}

std::vector<int> contiguous_owner(int blocks, int gpus) {
  std::vector<int> o(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b)
    o[static_cast<size_t>(b)] = static_cast<int>(int64_t{b} * gpus / blocks);
  return o;
}

// Full STA pattern + 8-GPU demand matrix of all 60 layers. Arg 0: one window everywhere;
// arg 1: per-(layer, head) windows from 6 choices (as STA's per-head window search produces).
void BM_HunyuanStaDemand8(benchmark::State& state) {
  auto model = pt::load_model("hunyuanvideo-720p").value();
  double bytes = 0;
  int64_t masks = 0;
  double blocks = 0;
  for (auto _ : state) {
    pt::PatternOptions o;
    o.kind = "sta";
    o.block_tokens = 128;
    o.tile = {6, 8, 8};
    o.window = {3, 3, 3};
    if (state.range(0) == 1) {
      const std::array<int, 3> choices[6] = {{3, 3, 3}, {3, 5, 5}, {5, 3, 3},
                                             {1, 5, 5}, {3, 3, 5}, {5, 5, 5}};
      for (int l = 0; l < model.layers; ++l)
        for (int h = 0; h < model.heads; ++h)
          o.head_windows.push_back(choices[(l * 7 + h * 3) % 6]);
    }
    auto p = pt::make_pattern(model, o).value();
    const auto owner = contiguous_owner(p->layout().num_blocks, 8);
    for (int l = 0; l < p->layers(); ++l) {
      auto d = pt::demand_matrix(*p, 0, l, owner, 8, pt::DemandGranularity::block_head, 0).value();
      for (double v : d) bytes += v;
    }
    masks = p->stored_masks();
    blocks = p->layout().num_blocks;
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["blocks"] = blocks;
  state.counters["distinct_masks"] = static_cast<double>(masks);
  state.counters["peak_rss_MiB"] = peak_rss_MiB();
}
BENCHMARK(BM_HunyuanStaDemand8)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

// Streams every step of a dynamic topk pattern (synthetic scores, ~10% density) through the 8-GPU
// demand matrix. Arg: number of steps (50 = the whole run).
void BM_WanTopkStream(benchmark::State& state) {
  auto model = pt::load_model("wan2.1-14b-720p").value();
  const int steps = static_cast<int>(state.range(0));
  double bytes = 0;
  for (auto _ : state) {
    pt::PatternOptions o;
    o.kind = "topk";
    o.block_tokens = 128;
    o.density = 0.1;
    o.steps = steps;
    auto p = pt::make_pattern(model, o).value();
    const auto owner = contiguous_owner(p->layout().num_blocks, 8);
    for (int s = 0; s < steps; ++s)
      for (int l = 0; l < p->layers(); ++l) {
        auto d = pt::demand_matrix(*p, s, l, owner, 8, pt::DemandGranularity::block, 0).value();
        for (double v : d) bytes += v;
      }
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["masks"] = static_cast<double>(steps) * model.layers * model.heads;
  state.counters["peak_rss_MiB"] = peak_rss_MiB();
}
BENCHMARK(BM_WanTopkStream)->Arg(2)->Arg(50)->Unit(benchmark::kMillisecond)->Iterations(1);

// Generation only, cdf (synthetic scores, threshold 0.9) of Wan2.1-14B: every row scores all
// 591 video blocks. Arg: number of steps.
void BM_WanCdfGen(benchmark::State& state) {
  auto model = pt::load_model("wan2.1-14b-720p").value();
  const int steps = static_cast<int>(state.range(0));
  int64_t active = 0;
  for (auto _ : state) {
    pt::PatternOptions o;
    o.kind = "cdf";
    o.block_tokens = 128;
    o.threshold = 0.9;
    o.steps = steps;
    auto p = pt::make_pattern(model, o).value();
    for (int s = 0; s < steps; ++s)
      for (int l = 0; l < p->layers(); ++l)
        for (int h = 0; h < p->heads(); ++h) active += p->mask(s, l, h).row_count(0);
    benchmark::DoNotOptimize(active);
  }
  state.counters["masks"] = static_cast<double>(steps) * model.layers * model.heads;
}
BENCHMARK(BM_WanCdfGen)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

// Statistics of the whole HunyuanVideo STA pattern (50 steps x 60 layers x 24 heads).
void BM_HunyuanStaStats(benchmark::State& state) {
  auto model = pt::load_model("hunyuanvideo-720p").value();
  pt::PatternOptions o;
  o.kind = "sta";
  o.block_tokens = 128;
  auto p = pt::make_pattern(model, o).value();
  for (auto _ : state) {
    auto s = pt::compute_stats(*p).value();
    benchmark::DoNotOptimize(s.density);
  }
  state.counters["peak_rss_MiB"] = peak_rss_MiB();
}
BENCHMARK(BM_HunyuanStaStats)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
