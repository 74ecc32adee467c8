// Flow completions per second of the flow-level engine (sim/network.hpp, sim/engine.hpp).
//
// Networks: synthetic PCIe servers with 8 and 64 GPUs (sim/synthetic.hpp: per-link directions,
// duplex sums, root complexes, inter-socket links). Flow sets: random GPU pairs, 1-64 MB each
// (seeded, identical to what bench/simgrid/ feeds SimGrid).
//  - all_at_once: N flows start at t = 0; run until the last ends. Rate = N / wall time.
//  - streaming:   N flows start at t = 0; each completion starts a new random flow, keeping N
//                 concurrent; runs 20 N completions (at least 20,000). Rate = completions / wall.
//  - simulate_100: the whole engine (events, copy engines, pipeline) on 100 transfers.
// Rates are per CPU second (single-threaded; robust to other load on a shared machine).
// Memory (operator new accounting): bytes_per_gpu (resources and registered routes, per GPU),
// bytes_per_flow (flows started, with their classes and solver variables, per flow);
// allocs_per_completion: heap allocations per completion in streaming after the first N
// completions (0 = no per-event allocation on the hot path).
// 1,024 GPUs: syn::rail_cluster(128) with 10k and 100k flows, timed over the first 1,000
// completions (all at once) or 2,000 (streaming).
// Run: build/release/bench/bench_engine --benchmark_counters_tabular=true
// Figures: bench/RESULTS.md.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "../sim/engine.hpp"
#include "../sim/network.hpp"
#include "../sim/synthetic.hpp"
#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

// Heap accounting for the memory counters: every operator new / delete of this process counts
// (bytes as malloc_usable_size reports them; single-threaded benchmarks).
namespace heap {
std::atomic<int64_t> live_bytes{0}, allocations{0};
}  // namespace heap

void* operator new(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (!p) throw std::bad_alloc();
  heap::live_bytes += static_cast<int64_t>(malloc_usable_size(p));
  ++heap::allocations;
  return p;
}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // this operator new is malloc
void operator delete(void* p) noexcept {
  if (!p) return;
  heap::live_bytes -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}
#pragma GCC diagnostic pop
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

namespace {

using sparsp::sim::FlowNetwork;
namespace syn = sparsp::sim::synthetic;

const syn::Net& net_for(int gpus) {
  static const syn::Net n8 = syn::pcie_server(8);
  static const syn::Net n64 = syn::pcie_server(64);
  static const syn::Net n1024 = syn::rail_cluster(128);
  return gpus == 8 ? n8 : gpus == 64 ? n64 : n1024;
}

struct Loaded {
  FlowNetwork net;
  std::vector<int> route_ids;  // [src * hosts + dst], -1 where not registered
};

/// Registers the resources and the routes the flow set uses (every pair of a server; the used
/// pairs of a rail cluster, whose routes are computed on demand).
void load(const syn::Net& n, const std::vector<syn::FlowSpec>& specs, Loaded& l) {
  for (size_t c = 0; c < n.capacity_Bps.size(); ++c)
    l.net.add_resource(n.capacity_Bps[c], c >= n.never_binds.size() || !n.never_binds[c]);
  l.route_ids.assign(static_cast<size_t>(n.hosts) * n.hosts, -1);
  auto reg = [&](int a, int b) {
    int& id = l.route_ids[static_cast<size_t>(a) * n.hosts + b];
    if (id < 0) id = l.net.add_route(n.route(a, b));
  };
  if (n.gpus_per_node == 0) {
    for (int a = 0; a < n.hosts; ++a)
      for (int b = 0; b < n.hosts; ++b)
        if (a != b) reg(a, b);
  } else {
    for (const auto& f : specs) reg(f.src, f.dst);
  }
}

/// Completions timed: every flow's (all at once) or 20 N, at least 20,000 (streaming) on the
/// servers; on the 1,024-GPU cluster 1,000 (all at once) and 2,000 (streaming).
int64_t timed_completions(int gpus, int flows, bool streaming) {
  if (gpus >= 1024) return streaming ? 2000 : 1000;
  return streaming ? std::max<int64_t>(20000, 20LL * flows) : flows;
}

void BM_AllAtOnce(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int flows = static_cast<int>(state.range(1));
  const syn::Net& n = net_for(gpus);
  const int64_t target = timed_completions(gpus, flows, false);
  const auto specs = syn::random_flows(n, flows, 42, 1e6, 64e6, 0);
  int64_t completions = 0;
  std::vector<FlowNetwork::Completion> done;
  double per_gpu = 0, per_flow = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Loaded l;
    const int64_t before = heap::live_bytes;
    load(n, specs, l);
    const int64_t loaded = heap::live_bytes;
    state.ResumeTiming();
    for (const auto& f : specs)
      l.net.start_flow(l.route_ids[static_cast<size_t>(f.src) * n.hosts + f.dst], f.bytes, 0, 0);
    // Network and routes per GPU; flows (with their classes and solver variables) per flow.
    per_gpu = static_cast<double>(loaded - before) / gpus;
    per_flow = static_cast<double>(heap::live_bytes - loaded) / flows;
    for (int64_t here = 0; here < target;) {
      const double t = l.net.next_completion();
      if (t == sparsp::sim::lmm::kInf) break;
      done.clear();
      l.net.advance(t, done);
      completions += static_cast<int64_t>(done.size());
      here += static_cast<int64_t>(done.size());
    }
    state.PauseTiming();  // the network's destruction is not timed
    l = Loaded{};
    state.ResumeTiming();
  }
  state.counters["completions_per_s"] =
      benchmark::Counter(static_cast<double>(completions), benchmark::Counter::kIsRate);
  state.counters["bytes_per_gpu"] = per_gpu;
  state.counters["bytes_per_flow"] = per_flow;
}

void BM_Streaming(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int flows = static_cast<int>(state.range(1));
  const int64_t target = timed_completions(gpus, flows, true);
  const syn::Net& n = net_for(gpus);
  const auto specs = syn::random_flows(n, static_cast<int>(flows + target), 7, 1e6, 64e6, 0);
  int64_t completions = 0;
  std::vector<FlowNetwork::Completion> done;
  for (auto _ : state) {
    state.PauseTiming();
    Loaded l;
    load(n, specs, l);
    state.ResumeTiming();
    size_t next = 0;
    for (; next < static_cast<size_t>(flows); ++next) {
      const auto& f = specs[next];
      l.net.start_flow(l.route_ids[static_cast<size_t>(f.src) * n.hosts + f.dst], f.bytes, 0, 0);
    }
    int64_t here = 0, allocs_at_warm = -1, warm_here = 0;
    while (here < target) {
      if (allocs_at_warm < 0 && here >= flows) {  // warm: every flow of the start has been replaced
        allocs_at_warm = heap::allocations;
        warm_here = here;
      }
      const double t = l.net.next_completion();
      done.clear();
      l.net.advance(t, done);
      here += static_cast<int64_t>(done.size());
      for (size_t k = 0; k < done.size() && next < specs.size(); ++k, ++next) {
        const auto& f = specs[next];
        l.net.start_flow(l.route_ids[static_cast<size_t>(f.src) * n.hosts + f.dst], f.bytes, 0, 0);
      }
    }
    completions += here;
    if (allocs_at_warm >= 0)
      state.counters["allocs_per_completion"] =
          static_cast<double>(heap::allocations - allocs_at_warm) /
          static_cast<double>(std::max<int64_t>(1, here - warm_here));
    state.counters["rounds_per_event"] =
        static_cast<double>(l.net.system().rounds_) / static_cast<double>(here);
    state.counters["bfs_per_event"] =
        static_cast<double>(l.net.system().bfs_) / static_cast<double>(here);
    state.PauseTiming();  // the network's destruction is not timed
    l = Loaded{};
    state.ResumeTiming();
  }
  state.counters["completions_per_s"] =
      benchmark::Counter(static_cast<double>(completions), benchmark::Counter::kIsRate);
}

// The whole engine on a policy-sized workload: 100 copy-engine transfers with dependencies
// (10 rounds of 10 random transfers, each round after the previous one on the same source).
void BM_Engine100(benchmark::State& state) {
  const syn::Net& n = net_for(8);
  const auto specs = syn::random_flows(n, 100, 3, 1e6, 64e6, 0);
  sparsp::sim::Problem p;
  p.capacity_Bps = n.capacity_Bps;
  p.never_binds = n.never_binds;
  p.gpus.assign(8, sparsp::sim::GpuModel{2, 128});
  for (size_t i = 0; i < specs.size(); ++i) {
    sparsp::sim::Task t;
    const size_t r = static_cast<size_t>(specs[i].src) * n.hosts + specs[i].dst;
    t.legs.push_back({n.routes[r], n.latency_s[r]});
    t.bytes = specs[i].bytes;
    t.launch_s = 2e-6;
    t.ce_gpu = specs[i].src;
    if (i >= 10) t.deps.push_back(static_cast<int>(i - 10));
    p.tasks.push_back(std::move(t));
  }
  for (auto _ : state) {
    auto o = sparsp::sim::run(p);
    benchmark::DoNotOptimize(o.makespan_s);
  }
  state.counters["simulations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// simulate() end to end on a real preset (8 GPUs, two switches per socket, P2P): 100 copy-engine
// transfers in 10 dependent rounds plus 8 compute tasks, as the policy studies build per layer.
void BM_Simulate100(benchmark::State& state) {
  auto topo = sparsp::topology::Topology::load("8x-gen5-2switch-per-socket");
  if (!topo) {
    state.SkipWithError(topo.error().message.c_str());
    return;
  }
  uint64_t seed = 11;
  sparsp::sim::Workload w;
  for (int i = 0; i < 100; ++i) {
    sparsp::sim::Transfer t;
    t.id = "t" + std::to_string(i);
    const int s = static_cast<int>(syn::splitmix64(seed) % 8);
    int d = static_cast<int>(syn::splitmix64(seed) % 7);
    if (d >= s) ++d;
    t.src = "gpu" + std::to_string(s);
    t.dst = "gpu" + std::to_string(d);
    t.bytes = 1e6 + static_cast<double>(syn::splitmix64(seed) % 63000000);
    if (i >= 10) t.after.push_back("t" + std::to_string(i - 10));
    w.transfers.push_back(std::move(t));
  }
  for (int g = 0; g < 8; ++g) {
    sparsp::sim::ComputeTask c;
    c.id = "c" + std::to_string(g);
    c.gpu = "gpu" + std::to_string(g);
    c.duration_s = 1e-3;
    w.compute.push_back(std::move(c));
  }
  for (auto _ : state) {
    auto r = sparsp::sim::simulate(*topo, w);
    benchmark::DoNotOptimize(r.ok());
  }
  state.counters["simulations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// to_chrome_trace (sim/trace.cpp) on a host-staged layer: the workload of BM_Simulate100 on the
// 8x RTX 4090 preset without P2P, so every copy is a 4 MiB chunk pipeline through host memory and
// the resources' load timelines hold tens of thousands of points. Simulated once; the loop times
// the trace text alone.
void BM_ChromeTrace(benchmark::State& state) {
  auto topo = sparsp::topology::Topology::load("8x-rtx4090-epyc-nop2p");
  if (!topo) {
    state.SkipWithError(topo.error().message.c_str());
    return;
  }
  uint64_t seed = 11;
  sparsp::sim::Workload w;
  for (int i = 0; i < 100; ++i) {
    sparsp::sim::Transfer t;
    t.id = "t" + std::to_string(i);
    const int s = static_cast<int>(syn::splitmix64(seed) % 8);
    int d = static_cast<int>(syn::splitmix64(seed) % 7);
    if (d >= s) ++d;
    t.src = "gpu" + std::to_string(s);
    t.dst = "gpu" + std::to_string(d);
    t.bytes = 1e6 + static_cast<double>(syn::splitmix64(seed) % 63000000);
    if (i >= 10) t.after.push_back("t" + std::to_string(i - 10));
    w.transfers.push_back(std::move(t));
  }
  sparsp::sim::SimOptions so;
  so.record_resource_timeline = true;
  auto r = sparsp::sim::simulate(*topo, w, so);
  if (!r) {
    state.SkipWithError(r.error().message.c_str());
    return;
  }
  size_t points = r->activities.size(), bytes = 0;
  for (const auto& res : r->resources) points += res.timeline.size();
  for (auto _ : state) {
    const std::string text = sparsp::sim::to_chrome_trace(w, *r);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["trace_events"] = static_cast<double>(points);
  state.counters["trace_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(points) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_AllAtOnce)
    ->ArgsProduct({{8, 64}, {100, 1000, 10000}})
    ->Args({1024, 10000})
    ->Args({1024, 100000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Streaming)
    ->ArgsProduct({{8, 64}, {100, 1000, 10000}})
    ->Args({1024, 10000})
    ->Args({1024, 100000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Engine100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Simulate100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChromeTrace)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
