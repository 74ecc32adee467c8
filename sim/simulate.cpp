// simulate(): validates a Workload against a Topology and compiles it into the engine's Problem
// (engine.hpp); maps the Outcome back to ids and names.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "engine.hpp"
#include "sparsp/sim.hpp"

namespace sparsp::sim {
namespace {

std::string ptr(const char* array, size_t i, const char* field) {
  return std::string("/") + array + "/" + std::to_string(i) + (field[0] ? "/" : "") + field;
}

bool bad_number(double x) { return !std::isfinite(x) || x < 0; }

// Sanity limits on one transfer: 1 PiB is far above any GPU's memory (an H200 has 141 GB), so
// a larger figure is a unit mistake; 1e7 chunks bound the events one pipelined transfer creates
// (and keep byte counts exact in double precision).
constexpr double kMaxTransferBytes = 1125899906842624.0;  // 2^50 B = 1 PiB
constexpr double kMaxChunksPerTransfer = 1e7;

std::string fmt_g(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

Result<SimResult> simulate(const topology::Topology& topo, const Workload& work,
                           const SimOptions& options) {
  const std::string& file = work.source;
  const int ngpu = topo.num_gpus();
  const size_t nt = work.transfers.size(), nc = work.compute.size();
  Problem p;
  for (const auto& r : topo.resources()) p.capacity_Bps.push_back(r.capacity_Bps);
  for (int g = 0; g < ngpu; ++g) {
    const auto& spec = topo.gpu(g);
    p.gpus.push_back(GpuModel{std::max(1, spec.copy_engines), std::max(1, spec.sm_count)});
  }
  // Measured NCCL throughput (topology "nccl"), for SM-driven GPU-to-GPU transfers: a per-flow
  // cap (one direction alone) and, per GPU pair and transport, one extra resource holding both
  // directions' sum (both ways at once). A host-staged transfer's two legs each carry its bytes,
  // so each leg uses that resource with coefficient 1/2: two opposite transfers at rate r load
  // it with 2r, as the measurement does. The measured send/recv latency replaces the launch
  // overhead.
  const topology::NcclFigures& nccl = topo.options().nccl;
  std::map<std::tuple<int, int, bool>, int> nccl_pair_resource;
  auto apply_nccl = [&](Task& k, int a, int b) {
    const bool host = k.legs.size() == 2;
    const double cap = host ? nccl.host_Bps : nccl.p2p_Bps;
    const double bidir = host ? nccl.host_bidir_Bps : nccl.p2p_bidir_Bps;
    if (cap > 0) k.cap_Bps = k.cap_Bps > 0 ? std::min(k.cap_Bps, cap) : cap;
    const double latency = host ? nccl.host_latency_s : nccl.p2p_latency_s;
    if (latency > 0) k.launch_s = latency;  // measured send/recv latency, launch included
    if (bidir <= 0) return;
    const auto key = std::make_tuple(std::min(a, b), std::max(a, b), host);
    auto [it, fresh] = nccl_pair_resource.try_emplace(key, static_cast<int>(p.capacity_Bps.size()));
    if (fresh) p.capacity_Bps.push_back(bidir);
    for (NetLeg& leg : k.legs) leg.uses.push_back(lmm::Use{it->second, host ? 0.5 : 1.0});
  };
  // Ids.
  std::map<std::string, int> index;
  auto add_id = [&](const std::string& id, const std::string& place) -> Status {
    if (id.empty()) return input_error(file, place, "empty id");
    if (!index.emplace(id, static_cast<int>(index.size())).second)
      return input_error(file, place, "duplicate id '" + id + "'");
    return Ok{};
  };
  for (size_t i = 0; i < nt; ++i)
    if (auto s = add_id(work.transfers[i].id, ptr("transfers", i, "id")); !s) return s.error();
  for (size_t i = 0; i < nc; ++i)
    if (auto s = add_id(work.compute[i].id, ptr("compute", i, "id")); !s) return s.error();
  std::map<std::string, int> streams;
  auto stream_id = [&](const std::string& name) {
    if (name.empty()) return -1;
    return streams.emplace(name, static_cast<int>(streams.size())).first->second;
  };
  auto resolve_deps = [&](const std::vector<std::string>& after, const char* array, size_t i,
                          std::vector<int>& deps) -> Status {
    for (size_t j = 0; j < after.size(); ++j) {
      auto it = index.find(after[j]);
      if (it == index.end())
        return input_error(file, ptr(array, i, "after") + "/" + std::to_string(j),
                           "dangling dependency '" + after[j] + "' (no activity has this id)");
      deps.push_back(it->second);
    }
    return Ok{};
  };
  std::vector<int> owner_gpu(nt + nc, -1);
  p.tasks.reserve(nt + nc);
  for (size_t i = 0; i < nt; ++i) {
    const Transfer& t = work.transfers[i];
    Task k;
    k.kind = Task::Kind::transfer;
    const int se = topo.endpoint_index(t.src), de = topo.endpoint_index(t.dst);
    if (se < 0)
      return input_error(file, ptr("transfers", i, "src"), "unknown endpoint '" + t.src + "'");
    if (de < 0)
      return input_error(file, ptr("transfers", i, "dst"), "unknown endpoint '" + t.dst + "'");
    if (bad_number(t.bytes))
      return input_error(file, ptr("transfers", i, "bytes"), "bytes must be a number >= 0");
    if (bad_number(t.rate_cap_Bps) || (t.rate_cap_Bps > 0 && t.rate_cap_Bps < 1))
      return input_error(file, ptr("transfers", i, "rate_cap_GBps"),
                         "rate cap must be 0 (none) or at least 1 B/s");
    if (bad_number(t.chunk_bytes))
      return input_error(file, ptr("transfers", i, "chunk_bytes"), "chunk_bytes must be >= 0");
    if (t.staging_buffers < 0)
      return input_error(file, ptr("transfers", i, "staging_buffers"), "must be >= 0");
    if (t.bytes > kMaxTransferBytes)
      return input_error(file, ptr("transfers", i, "bytes"),
                         "bytes must be at most 2^50 (1 PiB), got " + fmt_g(t.bytes));
    if (t.comm_sms < 0) return input_error(file, ptr("transfers", i, "comm_sms"), "must be >= 0");
    const Result<topology::Route>& rr = topo.route_ref(se, de, t.route);
    if (!rr)
      return input_error(file, ptr("transfers", i, ""),
                         "no route from " + t.src + " to " + t.dst + ": " + rr.error().message);
    const topology::Route& route = rr.value();
    if (route.legs.empty() || route.legs.size() > 2)
      return input_error(file, ptr("transfers", i, ""),
                         "no route from " + t.src + " to " + t.dst + " (route has no legs)");
    for (const auto& leg : route.legs) {
      NetLeg nl;
      nl.latency_s = leg.latency_s;
      for (const auto& u : leg.uses) nl.uses.push_back(lmm::Use{u.resource, u.coefficient});
      k.legs.push_back(std::move(nl));
    }
    k.bytes = t.bytes;
    k.cap_Bps = t.rate_cap_Bps;
    if (route.legs.size() == 2) {
      k.chunk_bytes = t.chunk_bytes > 0 ? t.chunk_bytes : options.default_chunk_bytes;
      k.buffers = t.staging_buffers > 0 ? t.staging_buffers : options.default_staging_buffers;
      k.chunk_overhead_s = options.staging_chunk_overhead_s;
    } else {
      k.chunk_bytes = t.chunk_bytes;
      k.buffers = 1;
    }
    if (k.chunk_bytes > 0 && k.bytes / k.chunk_bytes > kMaxChunksPerTransfer)
      return input_error(file, ptr("transfers", i, "chunk_bytes"),
                         "more than 1e7 chunks (" + fmt_g(k.bytes / k.chunk_bytes) +
                             "); raise chunk_bytes");
    k.launch_s = options.launch_overhead_s;
    const int src_gpu = se < ngpu ? se : -1, dst_gpu = de < ngpu ? de : -1;
    owner_gpu[i] = src_gpu >= 0 ? src_gpu : dst_gpu;
    switch (t.engine) {
      case Engine::ce:
        k.ce_gpu = owner_gpu[i];
        k.copy_engine = t.copy_engine;
        if (k.ce_gpu >= 0 && t.copy_engine >= p.gpus[k.ce_gpu].copy_engines)
          return input_error(file, ptr("transfers", i, "copy_engine"),
                             "copy engine " + std::to_string(t.copy_engine) + " but " + t.src +
                                 " has " + std::to_string(p.gpus[k.ce_gpu].copy_engines));
        break;
      case Engine::sm:
        k.sm_gpus[0] = src_gpu;
        k.sm_gpus[1] = dst_gpu == src_gpu ? -1 : dst_gpu;
        k.comm_sms = t.comm_sms;
        for (const int g : {src_gpu, dst_gpu})
          if (g >= 0 && topo.gpu(g).sm_count > 0 && t.comm_sms > topo.gpu(g).sm_count)
            return input_error(file, ptr("transfers", i, "comm_sms"),
                               std::to_string(t.comm_sms) + " SMs but " +
                                   (g == src_gpu ? t.src : t.dst) + " has " +
                                   std::to_string(topo.gpu(g).sm_count));
        if (src_gpu >= 0 && dst_gpu >= 0 && src_gpu != dst_gpu) apply_nccl(k, src_gpu, dst_gpu);
        break;
      case Engine::host:
        break;
    }
    if (auto s = resolve_deps(t.after, "transfers", i, k.deps); !s) return s.error();
    k.stream = stream_id(t.stream);
    p.tasks.push_back(std::move(k));
  }
  for (size_t i = 0; i < nc; ++i) {
    const ComputeTask& c = work.compute[i];
    Task k;
    k.kind = Task::Kind::compute;
    const int gi = topo.endpoint_index(c.gpu);
    if (gi < 0 || gi >= ngpu)
      return input_error(file, ptr("compute", i, "gpu"), "unknown GPU '" + c.gpu + "'");
    if (bad_number(c.duration_s))
      return input_error(file, ptr("compute", i, "duration_s"), "duration must be >= 0");
    if (bad_number(c.flops)) return input_error(file, ptr("compute", i, "flops"), "must be >= 0");
    k.gpu = gi;
    if (c.duration_s > 0 || c.flops == 0) {
      k.work_s = c.duration_s;
    } else {
      const double rate = topo.gpu(gi).peak_bf16_flops * options.compute_efficiency;
      if (!(rate > 0))
        return input_error(file, ptr("compute", i, "flops"),
                           "flops given but " + c.gpu + " has no peak FLOP/s in the topology");
      k.work_s = c.flops / rate;
    }
    if (auto s = resolve_deps(c.after, "compute", i, k.deps); !s) return s.error();
    k.stream = stream_id(c.stream);
    owner_gpu[nt + i] = gi;
    p.tasks.push_back(std::move(k));
  }
  std::vector<int> cycle;
  if (const int at = find_cycle(p, &cycle); at >= 0) {
    auto id_of = [&](int x) {
      return x < static_cast<int>(nt) ? work.transfers[x].id : work.compute[x - nt].id;
    };
    std::string chain;
    for (auto it = cycle.rbegin(); it != cycle.rend(); ++it) chain += id_of(*it) + " -> ";
    chain += id_of(cycle.back());
    const std::string place = at < static_cast<int>(nt) ? ptr("transfers", at, "after")
                                                        : ptr("compute", at - nt, "after");
    return input_error(file, place,
                       "dependency cycle (each waits for the next, through after or stream order): " +
                           chain);
  }

  const Outcome o = run(p, options.record_resource_timeline);

  SimResult r;
  r.makespan_s = o.makespan_s;
  r.events = o.events;
  r.activities.reserve(nt + nc);
  std::vector<std::string> stream_names(streams.size());
  for (const auto& [name, id] : streams) stream_names[id] = name;
  for (size_t i = 0; i < nt + nc; ++i) {
    ActivityResult a;
    const TaskOutcome& to = o.tasks[i];
    a.start_s = to.start_s;
    a.end_s = to.end_s;
    a.gpu = owner_gpu[i];
    if (i < nt) {
      const Transfer& t = work.transfers[i];
      a.id = t.id;
      a.is_transfer = true;
      a.where = t.src + "->" + t.dst;
      a.bytes = t.bytes;
      if (to.copy_engine >= 0)
        a.lane = "ce" + std::to_string(to.copy_engine);
      else if (!t.stream.empty())
        a.lane = t.stream;
      else
        a.lane = t.engine == Engine::sm ? "sm" : "host";
    } else {
      const ComputeTask& c = work.compute[i - nt];
      a.id = c.id;
      a.is_transfer = false;
      a.where = c.gpu;
      a.lane = c.stream.empty() ? "compute" : c.stream;
    }
    r.activities.push_back(std::move(a));
  }
  const auto& res = topo.resources();
  r.resources.reserve(res.size());
  for (size_t i = 0; i < res.size(); ++i) {
    ResourceStats s;
    s.name = res[i].name;
    s.capacity_Bps = res[i].capacity_Bps;
    s.bytes = o.bytes[i];
    s.busy_s = o.busy_s[i];
    s.peak_utilization = res[i].capacity_Bps > 0 ? o.peak_load[i] / res[i].capacity_Bps : 0;
    if (options.record_resource_timeline) s.timeline = o.timeline[i];
    r.resources.push_back(std::move(s));
  }
  for (int x : o.critical_path) r.critical_path.push_back(r.activities[x].id);
  return r;
}

}  // namespace sparsp::sim
