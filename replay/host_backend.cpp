// Host backend: per-holder host buffers, activities run on oneTBB (an arena of worker threads)
// as their dependencies complete, memcpy for transfers (host staging: through a bounce buffer in
// chunks, as the CUDA backend does), sleep for emulated compute tasks; real compute: the CPU
// attention kernel, Eigen fp32 GEMMs for `gemm` tasks (operands in fp32: twice the bf16 bytes the
// bound counts) and memcpy for `copy` tasks, each on its own scratch. Timings are steady_clock
// seconds from the iteration start. Used by CI to exercise the whole replay path without a GPU.
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for_each.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
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
    emulate_compute_ = opt.emulate_compute && opt.compute != ComputeMode::none;
    exec_ = &exec;
    out_bufs_.assign(static_cast<size_t>(exec.ranks), {});
    if (exec.real)
      for (int r = 0; r < exec.ranks; ++r)
        out_bufs_[static_cast<size_t>(r)].assign(exec.max_out_bytes[static_cast<size_t>(r)], 0);
    threads_ = std::max(2u, std::min(8u, std::thread::hardware_concurrency()));
    return Ok{};
  }

  Status fill(const ExecLayer& layer) override {
    for (const Region& r : layer.fills) fill_region(buffers_[r.holder].data(), r);
    // GEMM operands and copy buffers of this layer plan, one set per task (tasks of one rank
    // run at once on different threads). Values are finite and small; nothing checks them.
    scratch_.assign(layer.acts.size(), {});
    for (size_t i = 0; i < layer.acts.size(); ++i) {
      const Activity& a = layer.acts[i];
      if (a.scratch_bytes == 0) continue;
      const bool gemm = a.compute->what.kind == sim::TaskKind::gemm;
      try {
        scratch_[i].assign(gemm ? a.scratch_bytes / 2 : a.scratch_bytes / 4 + 1, 0.01f);
      } catch (const std::bad_alloc&) {
        return Error{"replay: host backend cannot allocate " + std::to_string(a.scratch_bytes) +
                         " bytes of scratch for compute task \"" + a.id + "\"",
                     1};
      }
    }
    return Ok{};
  }

  Result<OutputRows> read_outputs(const ExecLayer& layer, int rank,
                                  const std::vector<int>& check) override {
    const RankQueries& rq = layer.queries[static_cast<size_t>(rank)];
    const int H = exec_->heads, D = exec_->head_dim, kvh = exec_->kv_heads;
    const std::vector<int> rows = checked_rows(rq, check);
    const int qt = rq.reference.q_tokens();
    OutputRows out;
    for (const AttnWork& w : layer.attn) {
      if (w.rank != rank) continue;
      const int th = w.head_end - w.head_begin;
      const auto* o = reinterpret_cast<const uint16_t*>(
          out_bufs_[static_cast<size_t>(rank)].data() + w.o_offset);
      const auto* lse = reinterpret_cast<const float*>(out_bufs_[static_cast<size_t>(rank)].data() +
                                                       w.lse_offset);
      std::vector<float> ov, lv;
      for (int h = 0; h < th; ++h)
        for (int t : rows) {
          for (int d = 0; d < D; ++d)
            ov.push_back(attention::bf16_to_float(o[(size_t(h) * qt + t) * D + d]));
          lv.push_back(lse[size_t(h) * qt + t]);
        }
      out.o.push_back(std::move(ov));
      out.lse.push_back(std::move(lv));
    }
    // The reference, from K/V generated afresh (never transferred) and the rank's Q.
    const int T = layer.block_token_offsets.back();
    std::vector<uint16_t> k(size_t(kvh) * T * D), v(k.size());
    for (size_t b = 0; b + 1 < layer.block_token_offsets.size(); ++b) {
      const int s = layer.block_token_offsets[b], n = layer.block_token_offsets[b + 1] - s;
      for (int g = 0; g < kvh; ++g)
        for (int j = 0; j < n; ++j)
          for (int d = 0; d < D; ++d) {
            const uint64_t e = uint64_t(g) * 2 * n * D + uint64_t(j) * D + d;
            const size_t at = (size_t(g) * T + s + j) * D + d;
            k[at] = content_bf16(layer.block_keys[b], e);
            v[at] = content_bf16(layer.block_keys[b], e + uint64_t(n) * D);
          }
    }
    std::vector<float> o_ref(size_t(H) * qt * D, 0.0f), lse_ref(size_t(H) * qt, 0.0f);
    std::vector<int> qblocks;  // own blocks only: their Q is the original (never transferred)
    for (int i : check)
      if (i < rq.own_blocks) qblocks.push_back(i);
    attention::attention_reference_host(rq.reference, q_of(rank, rq.q_offset), k.data(), v.data(),
                                        o_ref.data(), lse_ref.data(), qblocks);
    for (int h = 0; h < H; ++h)
      for (int t : rows) {
        for (int d = 0; d < D; ++d) out.o_ref.push_back(o_ref[(size_t(h) * qt + t) * D + d]);
        out.lse_ref.push_back(lse_ref[size_t(h) * qt + t]);
      }
    return out;
  }

  Status run_once(const ExecLayer& layer, std::vector<double>& starts,
                  std::vector<double>& ends) override {
    for (const Region& r : layer.checks)
      std::memset(buffers_[r.holder].data() + r.offset, static_cast<int>(kPoisonByte), r.bytes);
    const size_t n = layer.acts.size();
    starts.assign(n, 0);
    ends.assign(n, 0);
    // Each activity runs once its dependencies have ended: a counter of unfinished dependencies
    // per activity; the one that brings a counter to zero hands that activity to the pool.
    std::vector<std::atomic<int>> pending(n);
    std::vector<std::vector<int>> out(n);
    for (size_t i = 0; i < n; ++i)
      for (int d : layer.acts[i].deps) {
        pending[i].fetch_add(1, std::memory_order_relaxed);
        out[static_cast<size_t>(d)].push_back(static_cast<int>(i));
      }
    std::vector<int> ready;  // in topological order: equal-time work is offered in plan order
    for (int i : layer.order)
      if (pending[static_cast<size_t>(i)].load(std::memory_order_relaxed) == 0) ready.push_back(i);
    const auto t0 = std::chrono::steady_clock::now();
    auto now_s = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    tbb::enumerable_thread_specific<std::vector<uint8_t>> bounce;  // one staging buffer a thread
    // threads_ workers, as many activities in flight as the hardware the backend stands for
    // (copy engines and streams); emulated compute sleeps on its worker.
    tbb::task_arena arena(static_cast<int>(threads_));
    arena.execute([&] {
      tbb::parallel_for_each(ready.begin(), ready.end(), [&](int i, tbb::feeder<int>& feeder) {
        const Activity& a = layer.acts[static_cast<size_t>(i)];
        if (!a.skip) {
          starts[static_cast<size_t>(i)] = now_s();
          execute(layer, i, bounce.local());
          ends[static_cast<size_t>(i)] = now_s();
        }
        for (int j : out[static_cast<size_t>(i)])
          if (pending[static_cast<size_t>(j)].fetch_sub(1, std::memory_order_acq_rel) == 1)
            feeder.add(j);
      });
    });
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
    if (r.bytes == 0) return Ok{};
    const auto [off, len] = corrupt_span(r);
    std::memset(buffers_[r.holder].data() + off, kCorruptByte, len);
    return Ok{};
  }

  std::string description() const override {
    return "host memory (" + std::to_string(threads_) + " worker threads)";
  }

 private:
  void execute(const ExecLayer& layer, int i, std::vector<uint8_t>& bounce) {
    const Activity& a = layer.acts[static_cast<size_t>(i)];
    if (a.kind == ActKind::compute) {
      const int w = exec_->real && !layer.attn_of_act.empty()
                        ? layer.attn_of_act[static_cast<size_t>(i)]
                        : -1;
      if (w >= 0) {
        const AttnWork& aw = layer.attn[static_cast<size_t>(w)];
        const size_t r = static_cast<size_t>(aw.rank);
        const auto* kv = reinterpret_cast<const uint16_t*>(buffers_[r].data());
        attention::attention_forward_host(
            aw.layout, q_of(aw.rank, aw.q_offset), kv, nullptr,
            reinterpret_cast<uint16_t*>(out_bufs_[r].data() + aw.o_offset),
            reinterpret_cast<float*>(out_bufs_[r].data() + aw.lse_offset));
      } else if (exec_->real && a.scratch_bytes > 0) {
        run_scratch_task(a, scratch_[static_cast<size_t>(i)]);
      } else if (emulate_compute_ && a.duration_s > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(a.duration_s));
      }
      return;
    }
    execute_transfer(a, bounce);
    if (i == layer.corrupt_act)
      (void)corrupt(layer, layer.checks[static_cast<size_t>(layer.corrupt_check)]);
  }

  /// A rank's Q (bf16) at byte `offset` of its holder buffer (RankQueries::q_offset).
  const uint16_t* q_of(int rank, uint64_t offset) const {
    return reinterpret_cast<const uint16_t*>(buffers_[static_cast<size_t>(rank)].data() + offset);
  }

  // A real `gemm` task: count products C = A B of fp32 m x k by k x n (Eigen); a `copy` task:
  // bytes / 2 copied from the first half of its scratch to the second.
  static void run_scratch_task(const Activity& a, std::vector<float>& buf) {
    const sim::TaskCompute& w = a.compute->what;
    if (w.kind == sim::TaskKind::gemm) {
      const Eigen::Index m = w.m, n = w.n, k = w.k;
      float* p = buf.data();
      Eigen::Map<Eigen::MatrixXf> A(p, m, k), B(p + m * k, k, n), C(p + m * k + k * n, m, n);
      for (int64_t c = 0; c < w.count; ++c) C.noalias() = A * B;
      return;
    }
    const uint64_t half = a.scratch_bytes / 2;
    auto* bytes = reinterpret_cast<uint8_t*>(buf.data());
    std::memcpy(bytes + half, bytes, half);
  }

  void execute_transfer(const Activity& a, std::vector<uint8_t>& bounce) {
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
  std::vector<std::vector<uint8_t>> out_bufs_;  ///< per rank: every AttnWork's O and LSE
  std::vector<std::vector<float>> scratch_;     ///< per activity of the layer: gemm/copy buffers
  const ExecPlan* exec_ = nullptr;
  bool emulate_compute_ = true;
  unsigned threads_ = 2;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace sparsp::replay::detail
