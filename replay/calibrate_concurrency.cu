// Copy-engine concurrency tests of `sparsp calibrate` (issue 17): how N concurrent copies share a
// GPU's copy engines. The shape follows replay/tools/ce_concurrency.cu (the standalone probe of
// replay/RESULTS.md): each copy on its own stream, timed with its own end event against a common
// start. Equal ends mean fair share; ends in steps of one copy's time mean one copy at a time
// (per-engine FIFO); `concurrent_copies` = N x first end / last end says how many ran at once.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "calibrate_concurrency.hpp"
#include "calibrate_topology.hpp"
#include "cuda_check.hpp"

namespace sparsp::replay::detail {

using Json = nlohmann::ordered_json;

namespace {

/// One copy of a test: `bytes` from src (on src_dev; -1 host) to dst (dst_dev; -1 host), issued
/// on a stream of `issue_dev`.
struct Copy {
  int issue_dev = 0;
  void* dst = nullptr;
  int dst_dev = 0;
  const void* src = nullptr;
  int src_dev = 0;
};

struct DeviceBuffers {
  uint8_t* host = nullptr;  ///< pinned, `slices` x bytes
  uint8_t* src = nullptr;   ///< device, `slices` x bytes
  uint8_t* dst = nullptr;   ///< device, `slices` x bytes
  std::vector<cudaStream_t> streams;
};

class Runner {
 public:
  Runner(const std::vector<int>& devs, const ConcurrencyOptions& o) : devs_(devs), opt_(o) {}
  ~Runner() {
    for (auto& [d, b] : bufs_) {
      cudaSetDevice(d);
      for (auto s : b.streams) cudaStreamDestroy(s);
      cudaFree(b.src);
      cudaFree(b.dst);
      cudaFreeHost(b.host);
    }
  }

  Status allocate(size_t slices) {
    slices_ = slices;
    const size_t n = slices * bytes();
    for (int d : devs_) {
      DeviceBuffers& b = bufs_[d];
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaMalloc(&b.src, n));
      SPARSP_CUDA_TRY(cudaMalloc(&b.dst, n));
      SPARSP_CUDA_TRY(cudaMemset(b.src, 1, n));
      SPARSP_CUDA_TRY(cudaHostAlloc(&b.host, n, cudaHostAllocPortable));
      for (size_t k = 0; k < n; k += 4096) b.host[k] = static_cast<uint8_t>(k);
    }
    return Ok{};
  }

  size_t bytes() const { return static_cast<size_t>(opt_.bytes_per_copy); }
  DeviceBuffers& buf(int d) { return bufs_[d]; }
  uint8_t* slice(uint8_t* base, size_t k) const { return base + (k % slices_) * bytes(); }

  /// Runs the copies at once (one warm-up, then `iterations` rounds) and returns the test's JSON.
  Result<Json> run(const std::string& name, const std::vector<Copy>& copies) {
    std::set<int> issuing;
    std::map<int, size_t> per_dev;
    for (const Copy& c : copies) issuing.insert(c.issue_dev);
    // Streams: one per copy on its issuing device.
    std::vector<cudaStream_t> st(copies.size());
    for (size_t k = 0; k < copies.size(); ++k) {
      const int d = copies[k].issue_dev;
      auto& pool = bufs_[d].streams;
      const size_t i = per_dev[d]++;
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      while (pool.size() <= i + 1) {  // pool[0]: the device's lead stream
        cudaStream_t s;
        SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        pool.push_back(s);
      }
      st[k] = pool[i + 1];
    }
    std::map<int, cudaEvent_t> start;
    std::vector<cudaEvent_t> end(copies.size());
    cudaEvent_t common;
    const int lead = *issuing.begin();
    SPARSP_CUDA_TRY(cudaSetDevice(lead));
    SPARSP_CUDA_TRY(cudaEventCreateWithFlags(&common, cudaEventDisableTiming));
    for (int d : issuing) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaEventCreate(&start[d]));
    }
    for (size_t k = 0; k < copies.size(); ++k) {
      SPARSP_CUDA_TRY(cudaSetDevice(copies[k].issue_dev));
      SPARSP_CUDA_TRY(cudaEventCreate(&end[k]));
    }
    std::vector<std::vector<double>> rounds;
    for (int it = 0; it <= opt_.iterations; ++it) {
      for (int d : issuing) {
        SPARSP_CUDA_TRY(cudaSetDevice(d));
        SPARSP_CUDA_TRY(cudaDeviceSynchronize());
      }
      // The common start: the lead device records it, every device's lead stream waits for it
      // and records that device's start, every copy stream waits for its device's start.
      SPARSP_CUDA_TRY(cudaSetDevice(lead));
      SPARSP_CUDA_TRY(cudaEventRecord(common, bufs_[lead].streams[0]));
      for (int d : issuing) {
        SPARSP_CUDA_TRY(cudaSetDevice(d));
        SPARSP_CUDA_TRY(cudaStreamWaitEvent(bufs_[d].streams[0], common, 0));
        SPARSP_CUDA_TRY(cudaEventRecord(start[d], bufs_[d].streams[0]));
      }
      for (size_t k = 0; k < copies.size(); ++k) {
        const Copy& c = copies[k];
        SPARSP_CUDA_TRY(cudaSetDevice(c.issue_dev));
        SPARSP_CUDA_TRY(cudaStreamWaitEvent(st[k], start[c.issue_dev], 0));
        if (c.src_dev >= 0 && c.dst_dev >= 0 && c.src_dev != c.dst_dev)
          SPARSP_CUDA_TRY(cudaMemcpyPeerAsync(c.dst, c.dst_dev, c.src, c.src_dev, bytes(), st[k]));
        else
          SPARSP_CUDA_TRY(cudaMemcpyAsync(c.dst, c.src, bytes(), cudaMemcpyDefault, st[k]));
        SPARSP_CUDA_TRY(cudaEventRecord(end[k], st[k]));
      }
      for (int d : issuing) {
        SPARSP_CUDA_TRY(cudaSetDevice(d));
        SPARSP_CUDA_TRY(cudaDeviceSynchronize());
      }
      if (it == 0) continue;  // warm-up
      std::vector<double> ends(copies.size());
      for (size_t k = 0; k < copies.size(); ++k) {
        float ms = 0;
        SPARSP_CUDA_TRY(cudaSetDevice(copies[k].issue_dev));
        SPARSP_CUDA_TRY(cudaEventElapsedTime(&ms, start[copies[k].issue_dev], end[k]));
        ends[k] = ms * 1e-3;
      }
      rounds.push_back(std::move(ends));
    }
    cudaEventDestroy(common);
    for (auto& [d, e] : start) cudaEventDestroy(e);
    for (auto e : end) cudaEventDestroy(e);
    // The round whose last end is the median of the rounds'.
    std::sort(rounds.begin(), rounds.end(), [](const auto& a, const auto& b) {
      return *std::max_element(a.begin(), a.end()) < *std::max_element(b.begin(), b.end());
    });
    const std::vector<double>& ends = rounds[rounds.size() / 2];
    const double last = *std::max_element(ends.begin(), ends.end());
    Json j = Json::object();
    j["name"] = name;
    j["copies"] = copies.size();
    Json issued = Json::array(), ends_us = Json::array();
    for (size_t k = 0; k < copies.size(); ++k) {
      issued.push_back(copies[k].issue_dev);
      ends_us.push_back(ends[k] * 1e6);
    }
    j["issued_on"] = std::move(issued);
    j["copy_end_us"] = std::move(ends_us);
    j["aggregate_GBps"] = static_cast<double>(copies.size()) * opt_.bytes_per_copy / last / 1e9;
    j["concurrent_copies"] = concurrent_copies(ends);
    return j;
  }

 private:
  std::vector<int> devs_;
  ConcurrencyOptions opt_;
  size_t slices_ = 1;
  std::map<int, DeviceBuffers> bufs_;
};

}  // namespace

Result<Json> copy_engine_concurrency(const std::vector<int>& devs, const ConcurrencyOptions& o) {
  Json out = Json::object();
  out["bytes_per_copy"] = o.bytes_per_copy;
  out["iterations"] = o.iterations;
  out["timing"] =
      "each copy on its own non-blocking stream with its own end event; copy_end_us against its "
      "issuing device's start event, recorded behind one common start event that every stream "
      "waits for; the round with the median last end of `iterations` after one warm-up";
  Json tests = Json::array();
  if (devs.empty() || o.copies.empty()) {
    out["tests"] = std::move(tests);
    return out;
  }
  const int max_n = *std::max_element(o.copies.begin(), o.copies.end());
  Runner r(devs, o);
  SPARSP_TRY(r.allocate(static_cast<size_t>(std::max<int>(max_n, static_cast<int>(devs.size())))));
  auto add = [&](const std::string& name, const std::vector<Copy>& copies) -> Status {
    auto j = r.run(name, copies);
    if (!j) return j.error();
    tests.push_back(std::move(*j));
    return Ok{};
  };
  // Host and device-local copies, per device.
  for (int d : devs) {
    DeviceBuffers& b = r.buf(d);
    const std::string dk = std::to_string(d);
    for (int n : o.copies) {
      std::vector<Copy> h2d, d2h, mixed, d2d;
      for (int k = 0; k < n; ++k) {
        const Copy in{d, r.slice(b.dst, k), d, r.slice(b.host, k), -1};
        const Copy out_{d, r.slice(b.host, k), -1, r.slice(b.src, k), d};
        h2d.push_back(in);
        d2h.push_back(out_);
        mixed.push_back(k % 2 == 0 ? in : out_);
        d2d.push_back(Copy{d, r.slice(b.dst, k), d, r.slice(b.src, k), d});
      }
      SPARSP_TRY(add("h2d:" + dk, h2d));
      SPARSP_TRY(add("d2h:" + dk, d2h));
      if (n >= 2) SPARSP_TRY(add("mixed:" + dk, mixed));
      SPARSP_TRY(add("d2d:" + dk, d2d));
    }
  }
  // Peer copies: push and pull between the first pair, then all-to-all.
  std::vector<std::pair<int, int>> pairs;
  Json no_access = Json::array();
  for (int a : devs)
    for (int b : devs) {
      if (a == b) continue;
      int can = 0;
      SPARSP_CUDA_TRY(cudaDeviceCanAccessPeer(&can, a, b));
      if (can)
        pairs.emplace_back(a, b);
      else
        no_access.push_back(std::to_string(a) + "->" + std::to_string(b));
    }
  if (!no_access.empty()) out["p2p_left_out"] = std::move(no_access);
  if (devs.size() >= 2 && !pairs.empty()) {
    const auto [a, b] = pairs.front();
    const std::string ab = std::to_string(a) + "->" + std::to_string(b);
    for (int n : o.copies) {
      std::vector<Copy> push, pull;
      for (int k = 0; k < n; ++k) {
        Copy c{a, r.slice(r.buf(b).dst, k), b, r.slice(r.buf(a).src, k), a};
        push.push_back(c);
        c.issue_dev = b;
        pull.push_back(c);
      }
      SPARSP_TRY(add("p2p_push:" + ab, push));
      SPARSP_TRY(add("p2p_pull:" + ab, pull));
    }
    std::vector<Copy> push, pull;
    for (size_t i = 0; i < devs.size(); ++i)
      for (size_t j = 0; j < devs.size(); ++j) {
        const int s = devs[i], d = devs[j];
        if (std::find(pairs.begin(), pairs.end(), std::make_pair(s, d)) == pairs.end()) continue;
        Copy c{s, r.slice(r.buf(d).dst, i), d, r.slice(r.buf(s).src, j), s};
        push.push_back(c);
        c.issue_dev = d;
        pull.push_back(c);
      }
    SPARSP_TRY(add("p2p_all_to_all_push", push));
    SPARSP_TRY(add("p2p_all_to_all_pull", pull));
  }
  out["tests"] = std::move(tests);
  return out;
}

}  // namespace sparsp::replay::detail
