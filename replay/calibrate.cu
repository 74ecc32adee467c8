// calibrate (CUDA builds): discovery + nvbandwidth-style copy-engine microbenchmarks + fits.
//
// Tests (each a size sweep min_bytes..max_bytes in powers of two, median of `iterations` timed
// copies after one warm-up, CUDA events around each copy on its stream):
//   h2d:<d>      pinned host -> device d          d2h:<d>    device d -> pinned host
//   bidir:<d>    both at once on two streams (aggregate = 2 x size / time)
//   d2d:<d>      device-local cudaMemcpyAsync (bytes copied / time)
//   all_d2h      every device to host at once (aggregate), all_h2d likewise (more than one GPU)
//   p2p:<a>-><b> cudaMemcpyPeerAsync; p2p_bidir:<a><-><b> both ways at once (pairs with P2P)
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "calibrate_topology.hpp"
#include "cuda_check.hpp"
#include "exec_plan.hpp"

namespace sparsp::replay {

using Json = nlohmann::ordered_json;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

/// Measures `bytes` copies with `launch` (which issues the copies on the given streams), the
/// median over `iters` after one warm-up. Streams: s[0] records the events, s[1..] join.
template <class Launch>
Result<double> time_copies(const std::vector<cudaStream_t>& s, const std::vector<int>& devs,
                           int iters, Launch launch) {
  std::vector<double> t;
  cudaEvent_t e0, e1;
  SPARSP_CUDA_TRY(cudaSetDevice(devs[0]));
  SPARSP_CUDA_TRY(cudaEventCreate(&e0));
  SPARSP_CUDA_TRY(cudaEventCreate(&e1));
  std::vector<cudaEvent_t> joins(s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    SPARSP_CUDA_TRY(cudaSetDevice(devs[k]));
    SPARSP_CUDA_TRY(cudaEventCreateWithFlags(&joins[k], cudaEventDisableTiming));
  }
  for (int it = 0; it <= iters; ++it) {
    SPARSP_CUDA_TRY(cudaSetDevice(devs[0]));
    SPARSP_CUDA_TRY(cudaEventRecord(e0, s[0]));
    for (size_t k = 1; k < s.size(); ++k) {
      SPARSP_CUDA_TRY(cudaSetDevice(devs[k]));
      SPARSP_CUDA_TRY(cudaStreamWaitEvent(s[k], e0, 0));
    }
    SPARSP_TRY(launch());
    for (size_t k = 1; k < s.size(); ++k) {
      SPARSP_CUDA_TRY(cudaSetDevice(devs[k]));
      SPARSP_CUDA_TRY(cudaEventRecord(joins[k], s[k]));
      SPARSP_CUDA_TRY(cudaSetDevice(devs[0]));
      SPARSP_CUDA_TRY(cudaStreamWaitEvent(s[0], joins[k], 0));
    }
    SPARSP_CUDA_TRY(cudaSetDevice(devs[0]));
    SPARSP_CUDA_TRY(cudaEventRecord(e1, s[0]));
    SPARSP_CUDA_TRY(cudaEventSynchronize(e1));
    float ms = 0;
    SPARSP_CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
    if (it > 0) t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (auto j : joins) cudaEventDestroy(j);
  return detail::median(t);
}

Json fit_json(const PathFit& f) {
  Json j = Json::object();
  j["name"] = f.name;
  j["latency_us"] = f.latency_s * 1e6;
  j["bandwidth_GBps"] = f.bandwidth_Bps / 1e9;
  if (f.aggregate_Bps > 0) j["aggregate_GBps"] = f.aggregate_Bps / 1e9;
  Json pts = Json::array();
  const bool staged = f.name.rfind("staged:", 0) == 0;  // sizes are chunk sizes there
  if (staged)
    j["note"] =
        "latency_us = overhead per chunk; points: 256 MiB through 2 staging buffers of chunk_bytes";
  for (size_t i = 0; i < f.sizes_bytes.size(); ++i) {
    if (staged)
      pts.push_back({{"chunk_bytes", f.sizes_bytes[i]}, {"time_us", f.times_s[i] * 1e6}});
    else
      pts.push_back({{"bytes", f.sizes_bytes[i]},
                     {"time_us", f.times_s[i] * 1e6},
                     {"GBps", f.sizes_bytes[i] / f.times_s[i] / 1e9}});
  }
  j["points"] = std::move(pts);
  return j;
}

}  // namespace

Result<CalibrateResult> calibrate(const CalibrateOptions& opt) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int count = 0;
  SPARSP_CUDA_TRY(cudaGetDeviceCount(&count));
  std::vector<int> devs = opt.devices;
  if (devs.empty())
    for (int d = 0; d < count; ++d) devs.push_back(d);
  {
    std::set<int> uniq(devs.begin(), devs.end());
    if (uniq.size() != devs.size()) return Error{"calibrate: --devices lists a device twice", 2};
  }
  for (int d : devs)
    if (d >= count)
      return Error{"calibrate: device " + std::to_string(d) + " not present (" +
                       std::to_string(count) + " visible)",
                   2};
  if (devs.empty()) return Error{"calibrate: no CUDA device present", 1};
  if (!(opt.min_bytes >= 4) || opt.max_bytes < opt.min_bytes)
    return Error{"calibrate: bad size range", 2};

  Json machine = Json::object();
  machine["schema"] = "sparsp.machine";
  machine["schema_version"] = 1;
  int drv = 0, rt = 0;
  SPARSP_CUDA_TRY(cudaDriverGetVersion(&drv));
  SPARSP_CUDA_TRY(cudaRuntimeGetVersion(&rt));
  machine["cuda_driver"] = drv;
  machine["cuda_runtime"] = rt;
  Json jdevs = Json::array();
  for (size_t i = 0; i < devs.size(); ++i) {
    cudaDeviceProp p{};
    SPARSP_CUDA_TRY(cudaGetDeviceProperties(&p, devs[i]));
    char bus[64] = {0};
    SPARSP_CUDA_TRY(cudaDeviceGetPCIBusId(bus, sizeof bus, devs[i]));
    std::string busid(bus);
    std::transform(busid.begin(), busid.end(), busid.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    // sysfs wants a 4-hex-digit domain: "00000000:1b:00.0" -> "0000:1b:00.0".
    if (busid.size() > 12 && busid.find(':') == 8) busid = busid.substr(4);
    const std::string sys = "/sys/bus/pci/devices/" + busid;
    std::error_code ec;
    const std::string tree = std::filesystem::canonical(sys, ec).string();
    Json d = Json::object();
    d["ordinal"] = devs[i];
    d["name"] = p.name;
    d["pci_bus_id"] = bus;
    d["sm_count"] = p.multiProcessorCount;
    d["async_engine_count"] = p.asyncEngineCount;
    d["memory_bytes"] = static_cast<double>(p.totalGlobalMem);
    d["sysfs_path"] = ec ? "" : tree;
    d["current_link_speed"] = read_text(sys + "/current_link_speed");
    d["current_link_width"] = read_text(sys + "/current_link_width");
    d["max_link_speed"] = read_text(sys + "/max_link_speed");
    d["max_link_width"] = read_text(sys + "/max_link_width");
    d["numa_node"] = read_text(sys + "/numa_node");
    jdevs.push_back(d);
  }
  machine["devices"] = jdevs;
  machine["nvidia_smi_topo"] =
      run_command("command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m 2>&1");
  Json p2p = Json::array();
  for (int a : devs)
    for (int b : devs)
      if (a != b) {
        int can = 0;
        SPARSP_CUDA_TRY(cudaDeviceCanAccessPeer(&can, a, b));
        p2p.push_back({{"from", a}, {"to", b}, {"access", can != 0}});
      }
  machine["p2p_access"] = p2p;

  // Buffers: per device two device buffers and two pinned host buffers of max_bytes.
  const size_t max_b = static_cast<size_t>(opt.max_bytes);
  struct Bufs {
    uint8_t *d0 = nullptr, *d1 = nullptr, *h0 = nullptr, *h1 = nullptr;
    cudaStream_t s0 = nullptr, s1 = nullptr;
  };
  std::vector<Bufs> bufs(devs.size());
  for (size_t i = 0; i < devs.size(); ++i) {
    SPARSP_CUDA_TRY(cudaSetDevice(devs[i]));
    SPARSP_CUDA_TRY(cudaMalloc(&bufs[i].d0, max_b));
    SPARSP_CUDA_TRY(cudaMalloc(&bufs[i].d1, max_b));
    SPARSP_CUDA_TRY(cudaMemset(bufs[i].d0, 1, max_b));
    SPARSP_CUDA_TRY(cudaHostAlloc(&bufs[i].h0, max_b, cudaHostAllocPortable));
    SPARSP_CUDA_TRY(cudaHostAlloc(&bufs[i].h1, max_b, cudaHostAllocPortable));
    std::memset(bufs[i].h0, 1, max_b);
    std::memset(bufs[i].h1, 2, max_b);
    SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&bufs[i].s0, cudaStreamNonBlocking));
    SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&bufs[i].s1, cudaStreamNonBlocking));
  }
  std::vector<double> sizes;
  for (double s = opt.min_bytes; s <= opt.max_bytes * 1.0000001; s *= 2) sizes.push_back(s);
  CalibrateResult res;
  auto sweep = [&](const std::string& name, const std::vector<cudaStream_t>& st,
                   const std::vector<int>& sd, double flows, auto issue) -> Result<PathFit> {
    std::vector<double> times;
    for (double s : sizes) {
      const size_t n = static_cast<size_t>(s);
      const int iters = s <= 1 << 20 ? std::max(opt.iterations, 20) : opt.iterations;
      auto t = time_copies(st, sd, iters, [&]() -> Status { return issue(n); });
      if (!t) return t.error();
      times.push_back(*t);
    }
    PathFit f = fit_latency_bandwidth(name, sizes, times);
    if (flows > 1) {
      f.aggregate_Bps = f.bandwidth_Bps * flows;  // fit on per-flow bytes; aggregate = flows x
    }
    return f;
  };
  for (size_t i = 0; i < devs.size(); ++i) {
    Bufs& b = bufs[i];
    const int d = devs[i];
    const std::string dk = std::to_string(d);
    auto h2d = sweep("h2d:" + dk, {b.s0}, {d}, 1, [&](size_t n) -> Status {
      SPARSP_CUDA_TRY(cudaMemcpyAsync(b.d0, b.h0, n, cudaMemcpyHostToDevice, b.s0));
      return Ok{};
    });
    if (!h2d) return h2d.error();
    auto d2h = sweep("d2h:" + dk, {b.s0}, {d}, 1, [&](size_t n) -> Status {
      SPARSP_CUDA_TRY(cudaMemcpyAsync(b.h1, b.d1, n, cudaMemcpyDeviceToHost, b.s0));
      return Ok{};
    });
    if (!d2h) return d2h.error();
    auto bid = sweep("bidir:" + dk, {b.s0, b.s1}, {d, d}, 2, [&](size_t n) -> Status {
      SPARSP_CUDA_TRY(cudaMemcpyAsync(b.d0, b.h0, n, cudaMemcpyHostToDevice, b.s0));
      SPARSP_CUDA_TRY(cudaMemcpyAsync(b.h1, b.d1, n, cudaMemcpyDeviceToHost, b.s1));
      return Ok{};
    });
    if (!bid) return bid.error();
    auto d2d = sweep("d2d:" + dk, {b.s0}, {d}, 1, [&](size_t n) -> Status {
      SPARSP_CUDA_TRY(cudaMemcpyAsync(b.d1, b.d0, n, cudaMemcpyDeviceToDevice, b.s0));
      return Ok{};
    });
    if (!d2d) return d2d.error();
    // Host-staged pipeline (as the replay runs it): total bytes through 2 pinned buffers of C
    // bytes, D2H on s0, H2D on s1, event hand-offs; t = bytes / bw + chunks * overhead, fitted
    // by least squares over C = 1..16 MiB.
    {
      const size_t total = std::min<size_t>(max_b, 256u << 20);
      std::vector<double> chunk_sizes, times, nchunks;
      for (size_t C = 1u << 20; C <= (16u << 20) && 2 * C <= max_b; C *= 2) {
        const size_t nch = (total + C - 1) / C;
        std::vector<cudaEvent_t> d2h(nch), h2d(nch);
        for (size_t k = 0; k < nch; ++k) {
          SPARSP_CUDA_TRY(cudaEventCreateWithFlags(&d2h[k], cudaEventDisableTiming));
          SPARSP_CUDA_TRY(cudaEventCreateWithFlags(&h2d[k], cudaEventDisableTiming));
        }
        auto t = time_copies({b.s0, b.s1}, {d, d}, opt.iterations, [&]() -> Status {
          for (size_t k = 0; k < nch; ++k) {
            const size_t off = k * C, len = std::min(C, total - off);
            uint8_t* stage = b.h0 + (k % 2) * C;
            if (k >= 2) SPARSP_CUDA_TRY(cudaStreamWaitEvent(b.s0, h2d[k - 2], 0));
            SPARSP_CUDA_TRY(cudaMemcpyAsync(stage, b.d0 + off, len, cudaMemcpyDeviceToHost, b.s0));
            SPARSP_CUDA_TRY(cudaEventRecord(d2h[k], b.s0));
            SPARSP_CUDA_TRY(cudaStreamWaitEvent(b.s1, d2h[k], 0));
            SPARSP_CUDA_TRY(cudaMemcpyAsync(b.d1 + off, stage, len, cudaMemcpyHostToDevice, b.s1));
            SPARSP_CUDA_TRY(cudaEventRecord(h2d[k], b.s1));
          }
          return Ok{};
        });
        for (size_t k = 0; k < nch; ++k) {
          cudaEventDestroy(d2h[k]);
          cudaEventDestroy(h2d[k]);
        }
        if (!t) return t.error();
        chunk_sizes.push_back(static_cast<double>(C));
        times.push_back(*t);
        nchunks.push_back(static_cast<double>(nch));
      }
      if (chunk_sizes.size() >= 2) {
        // Unknowns: seconds per byte s, overhead per chunk c: t_i = total * s + n_i * c.
        double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
        const double T = static_cast<double>(total);
        for (size_t k = 0; k < times.size(); ++k) {
          a11 += T * T;
          a12 += T * nchunks[k];
          a22 += nchunks[k] * nchunks[k];
          b1 += T * times[k];
          b2 += nchunks[k] * times[k];
        }
        const double det = a11 * a22 - a12 * a12;
        PathFit f;
        f.name = "staged:" + dk;
        f.sizes_bytes = chunk_sizes;  // here: chunk sizes; times for `total` bytes
        f.times_s = times;
        if (det != 0) {
          const double sb = (b1 * a22 - b2 * a12) / det, c = (a11 * b2 - a12 * b1) / det;
          f.bandwidth_Bps = sb > 0 ? 1.0 / sb : 0;
          f.latency_s = std::max(0.0, c);
        }
        res.fits.push_back(f);
      }
    }
    for (auto* f : {&*h2d, &*d2h, &*bid, &*d2d}) res.fits.push_back(*f);
  }
  if (devs.size() > 1) {
    std::vector<cudaStream_t> st;
    for (auto& b : bufs) st.push_back(b.s0);
    for (int dir = 0; dir < 2; ++dir) {
      auto f = sweep(dir == 0 ? "all_d2h" : "all_h2d", st, devs, static_cast<double>(devs.size()),
                     [&](size_t n) -> Status {
                       for (size_t i = 0; i < devs.size(); ++i) {
                         SPARSP_CUDA_TRY(cudaSetDevice(devs[i]));
                         if (dir == 0)
                           SPARSP_CUDA_TRY(cudaMemcpyAsync(bufs[i].h1, bufs[i].d1, n,
                                                           cudaMemcpyDeviceToHost, bufs[i].s0));
                         else
                           SPARSP_CUDA_TRY(cudaMemcpyAsync(bufs[i].d0, bufs[i].h0, n,
                                                           cudaMemcpyHostToDevice, bufs[i].s0));
                       }
                       return Ok{};
                     });
      if (!f) return f.error();
      res.fits.push_back(*f);
    }
  }
  // Peer access in both directions of every pair before any peer measurement: a copy whose
  // reverse direction is not yet enabled takes a slower path (the first two-GPU run measured
  // 394 GB/s for both directions together, the same as one, because of that).
  for (size_t i = 0; i < devs.size(); ++i)
    for (size_t j = 0; j < devs.size(); ++j) {
      int can = 0;
      if (i == j) continue;
      SPARSP_CUDA_TRY(cudaDeviceCanAccessPeer(&can, devs[i], devs[j]));
      if (!can) continue;
      SPARSP_CUDA_TRY(cudaSetDevice(devs[i]));
      const cudaError_t e = cudaDeviceEnablePeerAccess(devs[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        SPARSP_CUDA_TRY(e);
    }
  for (size_t i = 0; i < devs.size(); ++i)
    for (size_t j = 0; j < devs.size(); ++j) {
      if (i == j) continue;
      const std::string name = std::to_string(devs[i]) + "->" + std::to_string(devs[j]);
      auto uni = sweep("p2p:" + name, {bufs[i].s0}, {devs[i]}, 1, [&](size_t n) -> Status {
        SPARSP_CUDA_TRY(
            cudaMemcpyPeerAsync(bufs[j].d1, devs[j], bufs[i].d0, devs[i], n, bufs[i].s0));
        return Ok{};
      });
      if (!uni) return uni.error();
      res.fits.push_back(*uni);
      if (i < j) {
        auto bi = sweep("p2p_bidir:" + std::to_string(devs[i]) + "<->" + std::to_string(devs[j]),
                        {bufs[i].s0, bufs[j].s0}, {devs[i], devs[j]}, 2, [&](size_t n) -> Status {
                          SPARSP_CUDA_TRY(cudaMemcpyPeerAsync(bufs[j].d1, devs[j], bufs[i].d0,
                                                              devs[i], n, bufs[i].s0));
                          SPARSP_CUDA_TRY(cudaMemcpyPeerAsync(bufs[i].d1, devs[i], bufs[j].d0,
                                                              devs[j], n, bufs[j].s0));
                          return Ok{};
                        });
        if (!bi) return bi.error();
        res.fits.push_back(*bi);
      }
    }
  for (auto& b : bufs) {
    cudaFree(b.d0);
    cudaFree(b.d1);
    cudaFreeHost(b.h0);
    cudaFreeHost(b.h1);
    cudaStreamDestroy(b.s0);
    cudaStreamDestroy(b.s1);
  }
  Json fits = Json::array();
  for (const auto& f : res.fits) fits.push_back(fit_json(f));
  machine["fits"] = std::move(fits);
  // One path from measurements to topology: the same function `calibrate --from machine.json`
  // uses, so a recorded machine file always rebuilds the topology written here.
  const sim::SimOptions defaults;
  auto topo = detail::topology_from_machine(machine.dump(), "calibrate", opt.virtual_ranks,
                                            defaults.launch_overhead_s);
  if (!topo) return topo.error();
  res.topology_json = *topo;
  machine["topology"] = Json::parse(res.topology_json);
  res.machine_json = machine.dump(1) + "\n";
  return res;
}

}  // namespace sparsp::replay
