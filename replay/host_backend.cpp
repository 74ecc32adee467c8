// Host backend: per-holder host buffers, a pool of worker threads executing activities as their
// dependencies complete, memcpy for transfers (host staging: through a bounce buffer in chunks,
// as the CUDA backend does), sleep for compute tasks. Timings are steady_clock seconds from the
// iteration start. Used by CI to exercise the whole replay path without a GPU.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "exec_plan.hpp"

namespace sparsp::replay::detail {
namespace {

class HostBackend final : public Backend {
 public:
  Status prepare(const policy::Plan& /*plan*/, const ExecPlan& exec,
                 const ReplayOptions& opt) override {
    buffers_.clear();
    for (int h = 0; h < exec.holders(); ++h) {
      try {
        buffers_.emplace_back(exec.max_holder_bytes[h]);
      } catch (const std::bad_alloc&) {
        return Error{"replay: host backend cannot allocate " +
                         std::to_string(exec.max_holder_bytes[h]) + " bytes for holder " +
                         std::to_string(h) + " (try --payload-scale)",
                     2};
      }
    }
    emulate_compute_ = opt.emulate_compute;
    threads_ = std::max(2u, std::min(8u, std::thread::hardware_concurrency()));
    return Ok{};
  }

  Status fill(const ExecLayer& layer) override {
    for (const Region& r : layer.fills) fill_region(buffers_[r.holder].data(), r);
    return Ok{};
  }

  Status run_once(const ExecLayer& layer, std::vector<double>& starts,
                  std::vector<double>& ends) override {
    for (const Region& r : layer.checks)
      std::memset(buffers_[r.holder].data() + r.offset, static_cast<int>(kPoisonByte), r.bytes);
    const size_t n = layer.acts.size();
    starts.assign(n, 0);
    ends.assign(n, 0);
    std::vector<int> pending(n, 0);
    std::vector<std::vector<int>> out(n);
    for (size_t i = 0; i < n; ++i)
      for (int d : layer.acts[i].deps) {
        ++pending[i];
        out[d].push_back(static_cast<int>(i));
      }
    std::mutex mu;
    std::condition_variable cv;
    std::deque<int> ready;
    // Ready in topological order so equal-time work is started deterministically.
    for (int i : layer.order)
      if (pending[i] == 0) ready.push_back(i);
    size_t done = 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto now_s = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    auto worker = [&] {
      std::vector<uint8_t> bounce;
      std::unique_lock<std::mutex> lk(mu);
      for (;;) {
        cv.wait(lk, [&] { return !ready.empty() || done == n; });
        if (done == n) return;
        const int i = ready.front();
        ready.pop_front();
        lk.unlock();
        const Activity& a = layer.acts[i];
        const double s = now_s();
        if (!a.skip) execute(a, bounce);
        const double e = now_s();
        lk.lock();
        starts[i] = a.skip ? 0 : s;
        ends[i] = a.skip ? 0 : e;
        ++done;
        for (int j : out[i])
          if (--pending[j] == 0) ready.push_back(j);
        cv.notify_all();
      }
    };
    std::vector<std::thread> pool;
    for (unsigned k = 0; k < threads_; ++k) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    return Ok{};
  }

  Result<std::pair<int64_t, int64_t>> verify(const ExecLayer& layer) override {
    for (size_t c = 0; c < layer.checks.size(); ++c) {
      const Region& r = layer.checks[c];
      const int64_t bad = check_region(buffers_[r.holder].data(), r);
      if (bad >= 0) return std::pair<int64_t, int64_t>{static_cast<int64_t>(c), bad};
    }
    return std::pair<int64_t, int64_t>{-1, -1};
  }

  Status corrupt(const ExecLayer& /*layer*/, const Region& r) override {
    if (r.bytes > 0) buffers_[r.holder][r.offset + r.bytes / 2] ^= 0x01;
    return Ok{};
  }

  std::string description() const override {
    return "host memory (" + std::to_string(threads_) + " worker threads)";
  }

 private:
  void execute(const Activity& a, std::vector<uint8_t>& bounce) {
    if (a.kind == ActKind::compute) {
      if (emulate_compute_ && a.duration_s > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(a.duration_s));
      return;
    }
    uint8_t* src = buffers_[a.src].data();
    uint8_t* dst = buffers_[a.dst].data();
    const bool staged = a.transfer->route == topology::RouteMode::host_staged;
    for (const Piece& p : a.pieces) {
      if (!staged) {
        std::memcpy(dst + p.dst_offset, src + p.src_offset, p.bytes);
        continue;
      }
      // GPU -> staging buffer -> GPU in chunks, as the CUDA backend pipelines it.
      bounce.resize(std::min<uint64_t>(a.chunk_bytes, p.bytes));
      for (uint64_t off = 0; off < p.bytes; off += a.chunk_bytes) {
        const uint64_t m = std::min<uint64_t>(a.chunk_bytes, p.bytes - off);
        std::memcpy(bounce.data(), src + p.src_offset + off, m);
        std::memcpy(dst + p.dst_offset + off, bounce.data(), m);
      }
    }
  }

  std::vector<std::vector<uint8_t>> buffers_;
  bool emulate_compute_ = true;
  unsigned threads_ = 2;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace sparsp::replay::detail
