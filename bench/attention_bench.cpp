// Google Benchmark of sparsp's block-sparse attention kernel (replay/attention.cu), CUDA builds.
// Shapes: HunyuanVideo (24 heads x head_dim 128; 115200 tokens = 300 blocks of 384 = 900 of
// 128, about the 720p 129-frame latent's 118800), blocks 128 and 384, densities 10%, 30%, 100%:
// each query block reads round(density * n_blocks) KV blocks (its own block and others drawn by
// a seeded std::mt19937, shared across heads). Counter TFLOPs = active FLOPs (4 Bq Bk head_dim
// per active (query block, KV block, head)) / median kernel time (CUDA events), 1e12 FLOP/s.
// BM_attention_config first runs every kernel configuration on 2 heads, block 128.
// Run: bench/attention_bench --benchmark_format=json > bench/results/attention-h200.json
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "../replay/attention.cuh"

namespace at = sparsp::replay::attention;

namespace {

constexpr int kTokens = 115200;

at::BlockSparseLayout make_layout(int heads, int block, double density, uint32_t seed) {
  at::BlockSparseLayout l;
  l.heads = heads;
  l.head_dim = 128;
  for (int t = 0; t <= kTokens; t += block) l.q_block_offsets.push_back(t);
  if (l.q_block_offsets.back() != kTokens) l.q_block_offsets.push_back(kTokens);
  l.kv_block_offsets = l.q_block_offsets;
  const int n = l.n_q_blocks();
  const int per_row = std::max(1, int(density * n + 0.5));
  std::mt19937 rng(seed);
  std::vector<int> all(static_cast<size_t>(n));
  l.row_ptr.push_back(0);
  for (int qb = 0; qb < n; ++qb) {
    for (int b = 0; b < n; ++b) all[size_t(b)] = b;
    std::swap(all[0], all[size_t(qb)]);
    std::shuffle(all.begin() + 1, all.end(), rng);
    std::vector<int> row(all.begin(), all.begin() + per_row);
    std::sort(row.begin(), row.end());
    l.kv_blocks.insert(l.kv_blocks.end(), row.begin(), row.end());
    l.row_ptr.push_back(int32_t(l.kv_blocks.size()));
  }
  return l;
}

struct Buffers {
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float* lse = nullptr;
  int heads = 0;
  bool ok = false;
  bool alloc(int h) {
    if (heads == h && ok) return true;
    free();
    const size_t n = size_t(h) * kTokens * 128;
    ok = cudaMalloc(&q, n * 2) == cudaSuccess && cudaMalloc(&k, n * 2) == cudaSuccess &&
         cudaMalloc(&v, n * 2) == cudaSuccess && cudaMalloc(&o, n * 2) == cudaSuccess &&
         cudaMalloc(&lse, size_t(h) * kTokens * 4) == cudaSuccess &&
         at::fill_uniform_bf16(q, n, 1, 2.0f) && at::fill_uniform_bf16(k, n, 2, 2.0f) &&
         at::fill_uniform_bf16(v, n, 3, 1.0f) && cudaDeviceSynchronize() == cudaSuccess;
    heads = h;
    return ok;
  }
  void free() {
    for (void* p : {q, k, v, o, static_cast<void*>(lse)})
      if (p) cudaFree(p);
    q = k = v = o = nullptr;
    lse = nullptr;
    ok = false;
  }
};
Buffers g_buf;

at::KernelConfig g_best{};
double g_best_tflops = 0;

// Returns the TFLOPs counter (0 on error).
double run(benchmark::State& state, int heads, int block, double density,
           const at::KernelConfig& c) {
  if (!g_buf.alloc(heads)) {
    state.SkipWithError("allocation/fill failed (no GPU?)");
    return 0;
  }
  const at::BlockSparseLayout l = make_layout(heads, block, density, 42);
  auto dl = at::upload_layout(l);
  if (!dl) {
    state.SkipWithError(dl.error().message.c_str());
    return 0;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto st = at::attention_forward(*dl, g_buf.q, g_buf.k, g_buf.v, g_buf.o, g_buf.lse, nullptr, c);
  if (!st || cudaDeviceSynchronize() != cudaSuccess) {
    state.SkipWithError(st ? "kernel failed" : st.error().message.c_str());
    return 0;
  }
  std::vector<double> times;
  for (auto _ : state) {
    cudaEventRecord(e0);
    (void)at::attention_forward(*dl, g_buf.q, g_buf.k, g_buf.v, g_buf.o, g_buf.lse, nullptr, c);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    state.SetIterationTime(ms * 1e-3);
    times.push_back(ms * 1e-3);
  }
  if (cudaGetLastError() != cudaSuccess) state.SkipWithError("CUDA error during timing");
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  const double flops = at::active_flops(l);
  state.counters["TFLOPs"] = flops / med / 1e12;
  state.counters["median_ms"] = med * 1e3;
  state.counters["active_triples"] = double(l.kv_blocks.size()) * heads;
  state.counters["density"] =
      double(l.kv_blocks.size()) / (double(l.n_q_blocks()) * l.n_kv_blocks());
  state.SetLabel(at::to_string(c));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return flops / med / 1e12;
}

// args: config index, block, density in percent; 2 heads. Runs first: the fastest dense
// configuration is the one the HunyuanVideo cases use (their label names it).
void BM_attention_config(benchmark::State& state) {
  const auto cs = at::kernel_configs();
  const double tf = run(state, 2, int(state.range(1)), double(state.range(2)) / 100.0,
                        cs[size_t(state.range(0))]);
  if (state.range(2) == 100 && tf > g_best_tflops) {
    g_best_tflops = tf;
    g_best = cs[size_t(state.range(0))];
  }
}
BENCHMARK(BM_attention_config)
    ->ArgNames({"config", "block", "density_pct"})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {128}, {10, 100}})
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

// args: block, density in percent
void BM_attention_hunyuan(benchmark::State& state) {
  run(state, 24, int(state.range(0)), double(state.range(1)) / 100.0, g_best);
}
BENCHMARK(BM_attention_hunyuan)
    ->ArgNames({"block", "density_pct"})
    ->ArgsProduct({{128, 384}, {10, 30, 100}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
