// simulate(): validates a Workload against a Topology and compiles it into the engine's Problem
// (engine.hpp), runs it, and maps the Outcome back to ids and names. The steps, in order:
//  - compile_machine: the topology's resources and GPUs (copy engines, SMs);
//  - index_ids: every transfer's and compute task's id, unique, to a task index;
//  - compile_transfers: per transfer, its fields, endpoints, route legs, caps and chunking, the
//    engine that moves it (with the topology's NCCL figures for SM-driven GPU-to-GPU transfers)
//    and its dependencies;
//  - compile_compute: per compute task, its GPU, work and dependencies;
//  - compile_streams: stream names to FIFO stream ids;
//  - check_cycles: a dependency cycle (after or stream order) is an input error;
//  - collect_results: activities, resources and the critical path of the Outcome.
// Errors are reported in that order, and within a task in the order of its fields' checks.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine.hpp"
#include "host_reads.hpp"
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

// What the steps share while compiling one Workload: the inputs, the Problem being built and the
// maps from ids and names to the engine's indices. Task index: transfers 0..nt-1, then compute
// nt..nt+nc-1 (the Workload's order).
struct Compile {
  Compile(const topology::Topology& t, const Workload& w, const SimOptions& o)
      : topo(t),
        work(w),
        options(o),
        host_reads(t,
                   t.options().host_read_under_write >= 0 ? t.options().host_read_under_write
                                                          : o.host_read_under_write,
                   o.host_read_under_write_max_gen) {}

  const topology::Topology& topo;
  const Workload& work;
  const SimOptions& options;
  HostReadRule host_reads;  // copy-engine reads of host memory under writes (host_reads.hpp)
  const std::string& file = work.source;
  const int ngpu = topo.num_gpus();
  const size_t nt = work.transfers.size(), nc = work.compute.size();
  Problem p;
  std::map<std::string, int> index;    // activity id -> task index
  std::map<std::string, int> streams;  // stream name -> stream id
  // (lower GPU, higher GPU, host-staged) -> the pair's both-ways NCCL resource
  std::map<std::tuple<int, int, bool>, int> nccl_pair_resource;
  // per task: the GPU it is drawn under in traces (-1: host)
  std::vector<int> owner_gpu = std::vector<int>(nt + nc, -1);
  // the topology's measured collective points (nccl.collectives), per collective
  std::array<std::vector<nccl::CollectivePoint>, 5> points = collective_points(topo);

  static std::array<std::vector<nccl::CollectivePoint>, 5> collective_points(
      const topology::Topology& t) {
    std::array<std::vector<nccl::CollectivePoint>, 5> out;
    for (const auto& [name, list] : t.options().nccl.collectives) {
      nccl::Collective op;
      if (!nccl::parse_collective(name, &op)) continue;  // the topology parser checked the names
      for (const auto& q : list) {
        nccl::CollectivePoint pt{q.gpus, q.bytes, q.time_s, nccl::Transport::p2p};
        nccl::parse_transport(q.transport, &pt.transport);
        out[static_cast<size_t>(op)].push_back(pt);
      }
    }
    return out;
  }
};

// Both directions of GPU g's PCIe link to its parent together (2 * duplex * capacity), bytes/s;
// 0 when it has none (NVLink-C2C host link).
double gpu_pcie_bidir_Bps(const topology::Topology& t, int g) {
  const std::string& id = t.nodes()[t.gpu_node(g)].id;
  for (const auto& l : t.links())
    if (l.kind == topology::LinkKind::pcie && (l.b == id || l.a == id))
      return 2 * l.duplex_factor * l.capacity_Bps;
  return 0;
}

// The machine: one engine resource per topology resource, and each GPU's copy engines, SMs and
// (peer concurrency on) its peer resource.
void compile_machine(Compile& c) {
  for (const auto& r : c.topo.resources()) {
    c.p.capacity_Bps.push_back(r.capacity_Bps);
    c.p.never_binds.push_back(r.never_binds ? 1 : 0);
  }
  for (int g = 0; g < c.ngpu; ++g) {
    const auto& spec = c.topo.gpu(g);
    GpuModel m{std::max(1, spec.copy_engines), std::max(1, spec.sm_count),
               c.options.contention_ce_copy, c.options.contention_sm_copy_per_sm};
    const double bidir = gpu_pcie_bidir_Bps(c.topo, g);
    // The GPU's switch chip's cost, else the machine's (topology "chips" / top-level
    // "peer_concurrency_cost"), replaces the default.
    const double topo_cost = c.topo.peer_concurrency_cost(g);
    const double cost = topo_cost >= 0 ? topo_cost : c.options.peer_concurrency_cost;
    if (cost > 0 && bidir > 0) {
      m.peer_resource = static_cast<int>(c.p.capacity_Bps.size());
      c.p.capacity_Bps.push_back(1e30);  // set by the engine as copies start and end
      m.peer_bidir_Bps = bidir;
      m.peer_cost = cost;
    }
    const auto& dev = c.options.compute_device;
    if (static_cast<size_t>(g) < dev.size())
      for (int h = 0; h < g; ++h)
        if (dev[static_cast<size_t>(h)] == dev[static_cast<size_t>(g)]) {
          m.compute_shared_with = h;
          break;
        }
    c.p.gpus.push_back(m);
  }
  c.p.tasks.reserve(c.nt + c.nc);
}

Status add_id(Compile& c, const std::string& id, const std::string& place) {
  if (id.empty()) return input_error(c.file, place, "empty id");
  // Ids are printed as they are in `sim run`'s table and in trace names (break-it 2026-12-04).
  if (const std::string u = unprintable_character(id); !u.empty())
    return input_error(c.file, place, "contains " + u + "; activity ids are printed in tables");
  if (!c.index.emplace(id, static_cast<int>(c.index.size())).second)
    return input_error(c.file, place, "duplicate id '" + id + "'");
  return Ok{};
}

// Every activity's id, to its task index: transfers first, then compute.
Status index_ids(Compile& c) {
  for (size_t i = 0; i < c.nt; ++i)
    if (auto s = add_id(c, c.work.transfers[i].id, ptr("transfers", i, "id")); !s) return s;
  for (size_t i = 0; i < c.nc; ++i)
    if (auto s = add_id(c, c.work.compute[i].id, ptr("compute", i, "id")); !s) return s;
  return Ok{};
}

// The task indices of the ids in `after` (of activity `i` of `array`), appended to `deps`.
Status resolve_deps(const Compile& c, const std::vector<std::string>& after, const char* array,
                    size_t i, std::vector<int>& deps) {
  for (size_t j = 0; j < after.size(); ++j) {
    auto it = c.index.find(after[j]);
    if (it == c.index.end())
      return input_error(c.file, ptr(array, i, "after") + "/" + std::to_string(j),
                         "dangling dependency '" + after[j] + "' (no activity has this id)");
    deps.push_back(it->second);
  }
  return Ok{};
}

// Transfer i's released_by_last_wave ids: each one of its `after` ids and a compute task.
Status resolve_last_wave(const Compile& c, size_t i, Task& k) {
  const auto& t = c.work.transfers[i];
  for (size_t j = 0; j < t.released_by_last_wave.size(); ++j) {
    const std::string& id = t.released_by_last_wave[j];
    const std::string place =
        ptr("transfers", i, "released_by_last_wave") + "/" + std::to_string(j);
    if (std::find(t.after.begin(), t.after.end(), id) == t.after.end())
      return input_error(c.file, place, "'" + id + "' is not in this transfer's after");
    const int x = c.index.at(id);
    if (x < static_cast<int>(c.nt))
      return input_error(c.file, place,
                         "'" + id + "' is a transfer; only a compute task has a last wave");
    k.at_last_wave.push_back(x);
  }
  return Ok{};
}

// Transfer i's own fields: endpoints `se` and `de` known, numbers in range.
Status check_transfer(const Compile& c, size_t i, int se, int de) {
  const Transfer& t = c.work.transfers[i];
  const std::string& file = c.file;
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
  if (t.engine == Engine::ce && t.driver != Driver::automatic) {
    const bool src = t.driver == Driver::src;
    if ((src ? se : de) >= c.ngpu)
      return input_error(file, ptr("transfers", i, "driver"),
                         std::string("driver \"") + (src ? "src" : "dst") + "\" is " +
                             (src ? t.src : t.dst) + ", which has no copy engine");
  }
  if (t.comm_sms > 0 && t.engine != Engine::sm)
    return input_error(file, ptr("transfers", i, "comm_sms"),
                       "applies to engine \"sm\" only (this transfer runs on the copy engines)");
  return Ok{};
}

// Transfer i's route from endpoint `se` to `de` as k's legs (1 direct, 2 host-staged), each with
// its latency and the resources it uses.
Status compile_route(const Compile& c, size_t i, int se, int de, Task& k) {
  const Transfer& t = c.work.transfers[i];
  const Result<topology::Route>& rr = c.topo.route_ref(se, de, t.route);
  if (!rr)
    return input_error(c.file, ptr("transfers", i, ""),
                       "no route from " + t.src + " to " + t.dst + ": " + rr.error().message);
  const topology::Route& route = rr.value();
  const bool gpu_to_gpu =
      !route.host_staged && route.legs.size() == 1 && se < c.ngpu && de < c.ngpu && se != de;
  k.pcie_peer = gpu_to_gpu && route.path_class != topology::PathClass::nvlink;
  k.ce_shared = gpu_to_gpu && c.options.copy_engines_shared;
  if (route.legs.empty() || route.legs.size() > 2)
    return input_error(c.file, ptr("transfers", i, ""),
                       "no route from " + t.src + " to " + t.dst + " (route has no legs)");
  for (const auto& leg : route.legs) {
    NetLeg nl;
    nl.latency_s = leg.latency_s;
    for (const auto& u : leg.uses) nl.uses.push_back(lmm::Use{u.resource, u.coefficient});
    k.legs.push_back(std::move(nl));
  }
  return Ok{};
}

// Transfer i's bytes, rate cap and chunking: a host-staged transfer is a pipeline of chunks
// through staging buffers (defaults from the options), a direct one is chunked only if asked.
Status compile_chunking(const Compile& c, size_t i, Task& k) {
  const Transfer& t = c.work.transfers[i];
  k.bytes = t.bytes;
  k.cap_Bps = t.rate_cap_Bps;
  if (k.legs.size() == 2 && t.staging == Staging::driver) {
    k.chunk_bytes = c.options.driver_staging_chunk_bytes;
    k.buffers = 2;
    k.chunk_overhead_s = c.options.driver_staging_chunk_overhead_s;
  } else if (k.legs.size() == 2) {
    k.chunk_bytes = t.chunk_bytes > 0 ? t.chunk_bytes : c.options.default_chunk_bytes;
    k.buffers = t.staging_buffers > 0 ? t.staging_buffers : c.options.default_staging_buffers;
    k.chunk_overhead_s = c.options.staging_chunk_overhead_s;
  } else {
    k.chunk_bytes = t.chunk_bytes;
    k.buffers = 1;
  }
  if (k.chunk_bytes > 0 && k.bytes / k.chunk_bytes > kMaxChunksPerTransfer)
    return input_error(
        c.file, ptr("transfers", i, "chunk_bytes"),
        "more than 1e7 chunks (" + fmt_g(k.bytes / k.chunk_bytes) + "); raise chunk_bytes");
  return Ok{};
}

// Measured NCCL throughput (topology "nccl"), for SM-driven GPU-to-GPU transfers: a per-flow
// cap (one direction alone) and, per GPU pair and transport, one extra resource holding both
// directions' sum (both ways at once). A host-staged transfer's two legs each carry its bytes,
// so each leg uses that resource with coefficient 1/2: two opposite transfers at rate r load
// it with 2r, as the measurement does. The measured send/recv latency replaces the launch
// overhead.
void apply_nccl(Compile& c, Task& k, int a, int b) {
  const topology::NcclFigures& nccl = c.topo.options().nccl;
  const bool host = k.legs.size() == 2;
  const double cap = host ? nccl.host_Bps : nccl.p2p_Bps;
  const double bidir = host ? nccl.host_bidir_Bps : nccl.p2p_bidir_Bps;
  if (cap > 0) k.cap_Bps = k.cap_Bps > 0 ? std::min(k.cap_Bps, cap) : cap;
  const double latency = host ? nccl.host_latency_s : nccl.p2p_latency_s;
  if (latency > 0) k.launch_s = latency;  // measured send/recv latency, launch included
  if (bidir <= 0) return;
  const auto key = std::make_tuple(std::min(a, b), std::max(a, b), host);
  auto [it, fresh] =
      c.nccl_pair_resource.try_emplace(key, static_cast<int>(c.p.capacity_Bps.size()));
  if (fresh) c.p.capacity_Bps.push_back(bidir);
  for (NetLeg& leg : k.legs) leg.uses.push_back(lmm::Use{it->second, host ? 0.5 : 1.0});
}

// Peer concurrency of a direct GPU-to-GPU PCIe transfer: its single leg uses both GPUs' peer
// resources (those that exist) with coefficient `coef`, and the engine counts it at both ends.
void add_peer_uses(Compile& c, Task& k, int src_gpu, int dst_gpu, double coef) {
  bool any = false;
  for (const int g : {src_gpu, dst_gpu})
    if (c.p.gpus[g].peer_resource >= 0) {
      k.legs[0].uses.push_back(lmm::Use{c.p.gpus[g].peer_resource, coef});
      any = true;
    }
  if (any) {
    k.peer_gpus[0] = src_gpu;
    k.peer_gpus[1] = dst_gpu;
  }
}

// The architecture row of NCCL's tuning tables for GPU g (Ampere / Ada when unknown).
nccl::Arch nccl_arch(const topology::GpuSpec& gpu) {
  const std::string& a = gpu.architecture;
  if (a == "volta" || (gpu.sm_version >= 70 && gpu.sm_version < 80)) return nccl::Arch::volta;
  if (a == "hopper" || (gpu.sm_version >= 90 && gpu.sm_version < 100)) return nccl::Arch::hopper;
  if (a == "blackwell" || gpu.sm_version >= 100) return nccl::Arch::blackwell;
  return nccl::Arch::ampere;
}

// Single-flow rate of a route: the least capacity / coefficient over its legs' resources.
double route_rate_Bps(const Compile& c, const Task& k) {
  double r = 0;
  for (const NetLeg& leg : k.legs)
    for (const lmm::Use& u : leg.uses)
      if (u.coefficient > 0) {
        const double x = c.p.capacity_Bps[static_cast<size_t>(u.constraint)] / u.coefficient;
        r = r > 0 ? std::min(r, x) : x;
      }
  return r;
}

// Transfer i is one message of an NCCL collective (SM-driven, GPU to GPU): its latency and rate
// cap from NCCL's model or the topology's measured points (nccl::transfer_timing), and on a
// host-staged route NCCL's SHM pipeline (p2pChunkSize chunks, NCCL_STEPS slots per channel, no
// per-chunk launch). The links stay shared by max-min (sim/README.md "NCCL collectives").
void apply_collective(Compile& c, size_t i, int a, int b, Task& k) {
  const Transfer& t = c.work.transfers[i];
  const auto& route = c.topo.route_ref(a, b, t.route);
  nccl::TransferContext x;
  x.op = t.collective.op;
  x.ranks = t.collective.ranks;
  x.collective_bytes = t.collective.bytes;
  x.transfer_bytes = t.bytes;
  x.transport = k.legs.size() == 2 ? nccl::Transport::shm : nccl::Transport::p2p;
  x.hw = route && route->path_class == topology::PathClass::nvlink ? nccl::HwClass::nvlink
                                                                   : nccl::HwClass::pci;
  x.arch = nccl_arch(c.topo.gpu(a));
  x.path_Bps = route_rate_Bps(c, k);
  if (!(x.path_Bps > 0)) return;
  const nccl::TransferTiming tm = nccl::transfer_timing(x, c.points[static_cast<size_t>(x.op)]);
  // A measured send/recv latency (apply_nccl) stands unless measured points set the time.
  const topology::NcclFigures& f = c.topo.options().nccl;
  const double measured_s =
      x.transport == nccl::Transport::shm ? f.host_latency_s : f.p2p_latency_s;
  if (tm.from_points || measured_s <= 0) k.launch_s = tm.latency_s;
  if (tm.cap_Bps > 0) k.cap_Bps = k.cap_Bps > 0 ? std::min(k.cap_Bps, tm.cap_Bps) : tm.cap_Bps;
  if (x.transport == nccl::Transport::shm && t.chunk_bytes <= 0 && t.staging_buffers <= 0 &&
      t.staging == Staging::pipelined &&
      t.bytes / nccl::kP2pPciChunkBytes <= kMaxChunksPerTransfer) {
    const int channels = nccl::p2p_channels_per_peer(nccl::HwClass::pci, x.path_Bps, x.arch);
    k.chunk_bytes = nccl::kP2pPciChunkBytes;
    k.buffers = nccl::kNcclSteps * channels;
    k.chunk_overhead_s = 0;
  }
}

// What moves transfer i's bytes: a copy engine of its owning GPU, the SMs of its GPUs (src_gpu,
// dst_gpu: -1 for a host end) with the NCCL figures between two GPUs, or the host.
Status compile_engine(Compile& c, size_t i, int src_gpu, int dst_gpu, Task& k) {
  const Transfer& t = c.work.transfers[i];
  switch (t.engine) {
    case Engine::ce:
      if (t.driver == Driver::src) c.owner_gpu[i] = src_gpu;
      if (t.driver == Driver::dst) c.owner_gpu[i] = dst_gpu;
      k.ce_gpu = c.owner_gpu[i];
      if (k.pcie_peer) {
        // Peer concurrency: counted at both ends; a pull costs 1 / read efficiency there.
        const bool pull = k.ce_gpu == dst_gpu;
        add_peer_uses(c, k, src_gpu, dst_gpu,
                      pull ? 1.0 / c.options.contended_read_efficiency : 1.0);
      }
      k.copy_engine = t.copy_engine;
      if (k.ce_gpu >= 0 && t.copy_engine >= c.p.gpus[k.ce_gpu].copy_engines)
        return input_error(c.file, ptr("transfers", i, "copy_engine"),
                           "copy engine " + std::to_string(t.copy_engine) + " but " + t.src +
                               " has " + std::to_string(c.p.gpus[k.ce_gpu].copy_engines));
      break;
    case Engine::sm:
      k.sm_gpus[0] = src_gpu;
      k.sm_gpus[1] = dst_gpu == src_gpu ? -1 : dst_gpu;
      k.comm_sms = t.comm_sms;
      for (const int g : {src_gpu, dst_gpu})
        if (g >= 0 && c.topo.gpu(g).sm_count > 0 && t.comm_sms > c.topo.gpu(g).sm_count)
          return input_error(c.file, ptr("transfers", i, "comm_sms"),
                             std::to_string(t.comm_sms) + " SMs but " +
                                 (g == src_gpu ? t.src : t.dst) + " has " +
                                 std::to_string(c.topo.gpu(g).sm_count));
      if (src_gpu >= 0 && dst_gpu >= 0 && src_gpu != dst_gpu) {
        apply_nccl(c, k, src_gpu, dst_gpu);
        if (t.collective.set) apply_collective(c, i, src_gpu, dst_gpu, k);
        // NCCL's P2P transport on a direct PCIe route: SM stores into the peer's memory are
        // PCIe peer writes like a copy engine's push, so they count in the peer concurrency of
        // both GPUs (sim/README.md "NCCL P2P through the CPU"). Host-staged (SHM) routes do not.
        if (k.pcie_peer && k.legs.size() == 1) add_peer_uses(c, k, src_gpu, dst_gpu, 1.0);
      }
      break;
    case Engine::host:
      break;
  }
  return Ok{};
}

// Transfer i as a task: checked, routed, chunked, given its engine and its dependencies.
Status compile_transfer(Compile& c, size_t i) {
  const Transfer& t = c.work.transfers[i];
  Task k;
  k.kind = Task::Kind::transfer;
  const int se = c.topo.endpoint_index(t.src), de = c.topo.endpoint_index(t.dst);
  if (auto s = check_transfer(c, i, se, de); !s) return s;
  if (auto s = compile_route(c, i, se, de, k); !s) return s;
  if (auto s = compile_chunking(c, i, k); !s) return s;
  k.launch_s = c.options.launch_overhead_s;
  const int src_gpu = se < c.ngpu ? se : -1, dst_gpu = de < c.ngpu ? de : -1;
  c.owner_gpu[i] = src_gpu >= 0 ? src_gpu : dst_gpu;
  if (auto s = compile_engine(c, i, src_gpu, dst_gpu, k); !s) return s;
  if (t.engine == Engine::ce) c.host_reads.apply(c.topo.route_ref(se, de, t.route).value(), k, c.p);
  if (auto s = resolve_deps(c, t.after, "transfers", i, k.deps); !s) return s;
  if (auto s = resolve_last_wave(c, i, k); !s) return s;
  c.p.tasks.push_back(std::move(k));
  return Ok{};
}

// step(i) for i = 0..n-1, up to the first error.
template <class Step>
Status for_each_index(size_t n, const Step& step) {
  for (size_t i = 0; i < n; ++i)
    if (auto s = step(i); !s) return s;
  return Ok{};
}

Status compile_transfers(Compile& c) {
  return for_each_index(c.nt, [&](size_t i) { return compile_transfer(c, i); });
}

// Compute task i as a task on its GPU: its duration, or its FLOPs at the GPU's peak bf16 rate
// times the compute efficiency.
Status compile_compute_task(Compile& c, size_t i) {
  const ComputeTask& ct = c.work.compute[i];
  const std::string& file = c.file;
  Task k;
  k.kind = Task::Kind::compute;
  const int gi = c.topo.endpoint_index(ct.gpu);
  if (gi < 0 || gi >= c.ngpu)
    return input_error(file, ptr("compute", i, "gpu"), "unknown GPU '" + ct.gpu + "'");
  if (bad_number(ct.duration_s))
    return input_error(file, ptr("compute", i, "duration_s"), "duration must be >= 0");
  if (bad_number(ct.flops)) return input_error(file, ptr("compute", i, "flops"), "must be >= 0");
  k.gpu = gi;
  if (ct.duration_s > 0 || ct.flops == 0) {
    k.work_s = ct.duration_s;
  } else {
    const double rate = c.topo.gpu(gi).peak_bf16_flops * c.options.compute_efficiency;
    if (!(rate > 0))
      return input_error(file, ptr("compute", i, "flops"),
                         "flops given but " + ct.gpu + " has no peak FLOP/s in the topology");
    k.work_s = ct.flops / rate;
  }
  if (!(ct.last_wave_fraction >= 0 && ct.last_wave_fraction <= 1))
    return input_error(file, ptr("compute", i, "last_wave_fraction"),
                       "expected a fraction in 0..1, got " + std::to_string(ct.last_wave_fraction));
  k.last_wave_work_s = k.work_s * ct.last_wave_fraction;
  if (auto s = resolve_deps(c, ct.after, "compute", i, k.deps); !s) return s;
  c.owner_gpu[c.nt + i] = gi;
  c.p.tasks.push_back(std::move(k));
  return Ok{};
}

Status compile_compute(Compile& c) {
  return for_each_index(c.nc, [&](size_t i) { return compile_compute_task(c, i); });
}

// Every task's stream id (-1: none), numbered by first use in task order.
void compile_streams(Compile& c) {
  auto stream_id = [&](const std::string& name) {
    if (name.empty()) return -1;
    return c.streams.emplace(name, static_cast<int>(c.streams.size())).first->second;
  };
  for (size_t i = 0; i < c.nt; ++i) c.p.tasks[i].stream = stream_id(c.work.transfers[i].stream);
  for (size_t i = 0; i < c.nc; ++i)
    c.p.tasks[c.nt + i].stream = stream_id(c.work.compute[i].stream);
}

// A dependency cycle (through after or stream order), named by its ids, at the task found on it.
Status check_cycles(const Compile& c) {
  const size_t nt = c.nt;
  std::vector<int> cycle;
  const int at = find_cycle(c.p, &cycle);
  if (at < 0) return Ok{};
  auto id_of = [&](int x) {
    return x < static_cast<int>(nt) ? c.work.transfers[x].id : c.work.compute[x - nt].id;
  };
  // A long cycle (300k transfers gave a 3.2 MB line) names its first and last 5 members.
  constexpr size_t kShown = 5;
  std::string chain;
  const size_t n = cycle.size();
  size_t k = 0;
  for (auto it = cycle.rbegin(); it != cycle.rend(); ++it, ++k) {
    if (n > 2 * kShown && k == kShown) {
      chain += "... (" + std::to_string(n - 2 * kShown) + " more) -> ";
      it += static_cast<std::ptrdiff_t>(n - 2 * kShown - 1);
      k += n - 2 * kShown - 1;
      continue;
    }
    chain += id_of(*it) + " -> ";
  }
  chain += id_of(cycle.back());
  if (n > 2 * kShown) chain += " (a cycle of " + std::to_string(n) + ")";
  const std::string place =
      at < static_cast<int>(nt) ? ptr("transfers", at, "after") : ptr("compute", at - nt, "after");
  return input_error(
      c.file, place,
      "dependency cycle (each waits for the next, through after or stream order): " + chain);
}

// Every activity's times, GPU, id, place and lane (copy engine, stream or engine kind).
void collect_activities(const Compile& c, const Outcome& o, SimResult& r) {
  r.activities.reserve(c.nt + c.nc);
  for (size_t i = 0; i < c.nt + c.nc; ++i) {
    ActivityResult a;
    const TaskOutcome& to = o.tasks[i];
    a.start_s = to.start_s;
    a.end_s = to.end_s;
    a.gpu = c.owner_gpu[i];
    if (i < c.nt) {
      const Transfer& t = c.work.transfers[i];
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
      const ComputeTask& ct = c.work.compute[i - c.nt];
      a.id = ct.id;
      a.is_transfer = false;
      a.where = ct.gpu;
      a.lane = ct.stream.empty() ? "compute" : ct.stream;
    }
    r.activities.push_back(std::move(a));
  }
}

// Every topology resource's bytes, busy time, peak utilisation and (if recorded) timeline; the
// NCCL pair resources the compile added are not reported.
void collect_resources(const Compile& c, const Outcome& o, SimResult& r) {
  const auto& res = c.topo.resources();
  r.resources.reserve(res.size());
  for (size_t i = 0; i < res.size(); ++i) {
    ResourceStats s;
    s.name = res[i].name;
    s.capacity_Bps = res[i].capacity_Bps;
    s.bytes = o.bytes[i];
    s.busy_s = o.busy_s[i];
    s.peak_utilization = res[i].capacity_Bps > 0 ? o.peak_load[i] / res[i].capacity_Bps : 0;
    if (c.options.record_resource_timeline) s.timeline = o.timeline[i];
    r.resources.push_back(std::move(s));
  }
}

SimResult collect_results(const Compile& c, const Outcome& o) {
  SimResult r;
  r.makespan_s = o.makespan_s;
  r.events = o.events;
  collect_activities(c, o, r);
  collect_resources(c, o, r);
  for (int x : o.critical_path) r.critical_path.push_back(r.activities[x].id);
  return r;
}

}  // namespace

Result<SimResult> simulate(const topology::Topology& topo, const Workload& work,
                           const SimOptions& options) {
  Compile c(topo, work, options);
  compile_machine(c);
  if (auto s = index_ids(c); !s) return s.error();
  if (auto s = compile_transfers(c); !s) return s.error();
  if (auto s = compile_compute(c); !s) return s.error();
  compile_streams(c);
  if (auto s = check_cycles(c); !s) return s.error();
  const Outcome o = run(c.p, options.record_resource_timeline);
  return collect_results(c, o);
}

}  // namespace sparsp::sim
