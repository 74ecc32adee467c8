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
// Run: build/release/bench/bench_engine --benchmark_counters_tabular=true
// Figures: bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "../sim/engine.hpp"
#include "../sim/network.hpp"
#include "../sim/synthetic.hpp"
#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

namespace {

using sparsp::sim::FlowNetwork;
namespace syn = sparsp::sim::synthetic;

const syn::Net& net_for(int gpus) {
  static const syn::Net n8 = syn::pcie_server(8);
  static const syn::Net n64 = syn::pcie_server(64);
  return gpus == 8 ? n8 : n64;
}

struct Loaded {
  FlowNetwork net;
  std::vector<int> route_ids;
};

void load(const syn::Net& n, Loaded& l) {
  for (double c : n.capacity_Bps) l.net.add_resource(c);
  l.route_ids.assign(n.routes.size(), -1);
  for (size_t r = 0; r < n.routes.size(); ++r)
    if (!n.routes[r].empty()) l.route_ids[r] = l.net.add_route(n.routes[r]);
}

void BM_AllAtOnce(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int flows = static_cast<int>(state.range(1));
  const syn::Net& n = net_for(gpus);
  const auto specs = syn::random_flows(n, flows, 42, 1e6, 64e6, 0);
  int64_t completions = 0;
  std::vector<FlowNetwork::Completion> done;
  for (auto _ : state) {
    Loaded l;
    load(n, l);
    for (const auto& f : specs)
      l.net.start_flow(l.route_ids[static_cast<size_t>(f.src) * n.hosts + f.dst], f.bytes, 0, 0);
    while (true) {
      const double t = l.net.next_completion();
      if (t == sparsp::sim::lmm::kInf) break;
      done.clear();
      l.net.advance(t, done);
      completions += static_cast<int64_t>(done.size());
    }
  }
  state.counters["completions_per_s"] =
      benchmark::Counter(static_cast<double>(completions), benchmark::Counter::kIsRate);
}

void BM_Streaming(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int flows = static_cast<int>(state.range(1));
  const int64_t target = std::max<int64_t>(20000, 20LL * flows);
  const syn::Net& n = net_for(gpus);
  const auto specs = syn::random_flows(n, static_cast<int>(flows + target), 7, 1e6, 64e6, 0);
  int64_t completions = 0;
  std::vector<FlowNetwork::Completion> done;
  for (auto _ : state) {
    Loaded l;
    load(n, l);
    size_t next = 0;
    for (; next < static_cast<size_t>(flows); ++next) {
      const auto& f = specs[next];
      l.net.start_flow(l.route_ids[static_cast<size_t>(f.src) * n.hosts + f.dst], f.bytes, 0, 0);
    }
    int64_t here = 0;
    while (here < target) {
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
    state.counters["rounds_per_event"] =
        static_cast<double>(l.net.system().rounds_) / static_cast<double>(here);
    state.counters["bfs_per_event"] =
        static_cast<double>(l.net.system().bfs_) / static_cast<double>(here);
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
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(points) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_AllAtOnce)
    ->ArgsProduct({{8, 64}, {100, 1000, 10000}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Streaming)
    ->ArgsProduct({{8, 64}, {100, 1000, 10000}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Engine100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Simulate100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChromeTrace)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
