// CUDA backend (built when SPARSP_HAVE_CUDA). See include/sparsp/replay.hpp for the contract.
//
// Execution of one iteration of one layer plan:
//  1. receive regions are poisoned (cudaMemsetAsync 0xA5; host memories by memset);
//  2. a gate kernel spins on a pinned, mapped flag on every device used; an event recorded after
//     it on each device is the common time base (all gates open on the same host store);
//  3. activities are issued in topological order, interleaved chunk by chunk among the issuable
//     ones, each on its own stream(s), waiting on the end events of its dependencies (plan
//     `after` + FIFO predecessor on its named stream), bracketed by timing events;
//       - transfer GPU->GPU, route host_staged: D2H chunks on a stream of the source device into
//         pinned staging buffers, H2D chunks on a stream of the destination device, chunk k's H2D
//         waits for its D2H, chunk k's D2H waits for chunk k-B's H2D (B staging buffers);
//       - transfer GPU->GPU otherwise: cudaMemcpyPeerAsync on a copy-engine stream of the source
//         device (device-local cudaMemcpyAsync when both ranks share a GPU);
//       - Engine::sm between distinct GPUs, not host-staged, when NCCL is built in: grouped
//         ncclSend/ncclRecv on per-rank communicators (ncclCommInitAll, one process);
//       - Engine::sm otherwise: a copy kernel on comm_sms SMs instead of the copy engine (through
//         mapped pinned memory for host staging);
//       - GPU<->hostK: cudaMemcpyAsync to/from the pinned host memory;
//       - compute: a kernel of one block per SM (large shared-memory footprint) spinning on
//         %globaltimer for duration_s, on sm_count / (ranks on the device) SMs;
//  4. the gate opens after the first kGateOps issue steps (or when all are issued) so the host
//     never blocks on a full launch queue while the GPUs wait;
//  5. all devices synchronise; start/end come from cudaEventElapsedTime against the base event.
// Verification runs a kernel over the table of receive regions on each device.
#include <cuda_runtime.h>
#ifdef SPARSP_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "attention.cuh"
#include "cuda_check.hpp"
#include "exec_plan.hpp"

namespace sparsp::replay::detail {
namespace {

constexpr int kGateOps = 512;
constexpr int kComputeThreads = 128;

struct DevRegion {
  uint8_t* ptr;
  uint64_t bytes;
  ContentKey key;
};

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gate_kernel(const volatile int* flag) {
  while (*flag == 0) __nanosleep(200);
}

__global__ void spin_kernel(uint64_t ns) {
  extern __shared__ unsigned char claim[];  // footprint only: one block per SM
  if (threadIdx.x == 0) {
    claim[0] = 0;
    const uint64_t t0 = globaltimer_ns();
    while (globaltimer_ns() - t0 < ns) {
    }
  }
  __syncthreads();
}

/// Grid-stride copy, 16 bytes per thread step where aligned, bytes for the tail.
__global__ void copy_kernel(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src,
                            uint64_t bytes) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0;
  uint64_t done = 0;
  if (aligned) {
    const uint64_t n16 = bytes / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (uint64_t i = tid; i < n16; i += stride) d[i] = s[i];
    done = n16 * 16;
  }
  for (uint64_t i = done + tid; i < bytes; i += stride) dst[i] = src[i];
}

__global__ void fill_kernel(const DevRegion* regions) {
  const DevRegion r = regions[blockIdx.y];
  const uint64_t words = r.bytes / 4;
  uint32_t* p = reinterpret_cast<uint32_t*>(r.ptr);
  for (uint64_t w = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    p[w] = content_word(r.key, w);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (uint64_t i = words * 4; i < r.bytes; ++i) r.ptr[i] = content_byte(r.key, i);
}

__global__ void verify_kernel(const DevRegion* regions, unsigned long long* first_bad) {
  const DevRegion r = regions[blockIdx.y];
  const uint64_t words = r.bytes / 4;
  const uint32_t* p = reinterpret_cast<const uint32_t*>(r.ptr);
  for (uint64_t w = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    if (p[w] != content_word(r.key, w)) {
      uint64_t i = 4 * w;
      while (r.ptr[i] == content_byte(r.key, i)) ++i;
      atomicMin(first_bad + blockIdx.y, static_cast<unsigned long long>(i));
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (uint64_t i = words * 4; i < r.bytes; ++i)
      if (r.ptr[i] != content_byte(r.key, i))
        atomicMin(first_bad + blockIdx.y, static_cast<unsigned long long>(i));
}

/// The original K and V of a layer plan, contiguous [kv_heads][tokens][head_dim] bf16, from the
/// blocks' content keys (never transferred): the output check's reference reads them.
__global__ void reference_kv_kernel(const ContentKey* keys, const int32_t* tok_off, int blocks,
                                    int kv_heads, int head_dim, uint16_t* k, uint16_t* v) {
  const int T = tok_off[blocks];
  const uint64_t n = uint64_t(kv_heads) * T * head_dim;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const int d = int(i % head_dim);
    const int t = int((i / head_dim) % T);
    const int g = int(i / (uint64_t(head_dim) * T));
    int lo = 0, hi = blocks - 1;  // the block holding token t
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (tok_off[mid] <= t)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int nb = tok_off[lo + 1] - tok_off[lo], j = t - tok_off[lo];
    const uint64_t e = uint64_t(g) * 2 * nb * head_dim + uint64_t(j) * head_dim + d;
    k[i] = content_bf16(keys[lo], e);
    v[i] = content_bf16(keys[lo], e + uint64_t(nb) * head_dim);
  }
}

/// Per-device state.
struct Device {
  int ordinal = 0;
  cudaDeviceProp prop{};
  std::vector<cudaStream_t> streams;  ///< pool: activity slots
  cudaStream_t gate = nullptr;
  cudaStream_t aux = nullptr;       ///< fill / verify / poison
  cudaEvent_t base = nullptr;       ///< common time base
  std::vector<cudaEvent_t> timing;  ///< pool of timing events
  std::vector<cudaEvent_t> sync;    ///< pool of sync-only events
  size_t timing_used = 0, sync_used = 0;
  int ranks_here = 0;
  DevRegion* d_regions = nullptr;  ///< region table (fills or checks)
  size_t d_regions_cap = 0;
  unsigned long long* d_bad = nullptr;
  size_t d_bad_cap = 0;
  // Real compute: the output check's reference (one set per device, reused by its ranks).
  uint16_t* ref_k = nullptr;
  uint16_t* ref_v = nullptr;
  float* o_ref = nullptr;
  float* lse_ref = nullptr;
  const ExecLayer* ref_layer = nullptr;  ///< the layer plan whose K/V ref_k/ref_v hold
};

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override { release(); }

  Status prepare(const policy::Plan& plan, const ExecPlan& exec,
                 const ReplayOptions& opt) override {
    ranks_ = exec.ranks;
    hosts_ = exec.hosts;
    emulate_compute_ = opt.emulate_compute && opt.compute != ComputeMode::none;
    // More hardware queues than the default 8, so that concurrent streams do not alias onto one
    // queue and serialise (must precede the first CUDA call; an explicit setting wins).
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    // Every kernel loaded up front: with lazy loading (the CUDA 12+ default) the first launch of
    // the attention kernel loads its module while the gate kernel spins, and the host waits for
    // the device forever.
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    int count = 0;
    SPARSP_CUDA_TRY(cudaGetDeviceCount(&count));
    rank_dev_ = opt.devices;
    if (rank_dev_.empty()) {
      if (plan.gpus > count)
        return Error{"replay: the plan needs " + std::to_string(plan.gpus) + " GPUs, " +
                         std::to_string(count) +
                         " present; map ranks onto fewer GPUs with --devices (e.g. --devices " +
                         std::string("0") + std::string(plan.gpus > 1 ? ",0" : "") + "...)",
                     2};
      for (int r = 0; r < plan.gpus; ++r) rank_dev_.push_back(r);
    }
    for (size_t r = 0; r < rank_dev_.size(); ++r)
      if (rank_dev_[r] >= count)
        return Error{"replay: --devices maps rank " + std::to_string(r) + " to device " +
                         std::to_string(rank_dev_[r]) + ", but only " + std::to_string(count) +
                         " CUDA devices are present",
                     2};
    std::set<int> used(rank_dev_.begin(), rank_dev_.end());
    for (int d : used) {
      Device dv;
      dv.ordinal = d;
      SPARSP_CUDA_TRY(cudaGetDeviceProperties(&dv.prop, d));
      for (int r : rank_dev_) dv.ranks_here += r == d ? 1 : 0;
      devs_[d] = dv;
    }
    // P2P: needed for route p2p between different devices, and for SM copies across devices.
    std::set<std::pair<int, int>> peer_pairs;
    for (const auto& L : exec.layers)
      for (const auto& a : L.acts) {
        if (a.kind != ActKind::transfer) continue;
        if (a.src >= ranks_ && a.dst >= ranks_)
          return Error{"replay: transfer \"" + a.id +
                           "\" copies host memory to host memory; the cuda backend "
                           "moves data to or from GPUs only",
                       2};
        if (a.src >= ranks_ || a.dst >= ranks_) continue;
        const int ds = rank_dev_[a.src], dd = rank_dev_[a.dst];
        if (ds == dd) continue;
        const bool staged = a.transfer->route == topology::RouteMode::host_staged;
        if (staged) continue;
        int can = 0;
        SPARSP_CUDA_TRY(cudaDeviceCanAccessPeer(&can, ds, dd));
        if (!can && (a.transfer->route == topology::RouteMode::p2p ||
                     a.transfer->engine == sim::Engine::sm))
          return Error{"replay: transfer \"" + a.id + "\" (" + a.transfer->src + "->" +
                           a.transfer->dst + ") needs peer access from device " +
                           std::to_string(ds) + " to " + std::to_string(dd) +
                           ", which this machine does not allow; use route host_staged",
                       2};
        if (can) peer_pairs.insert({ds, dd});
      }
    // Memory: all holder buffers of the ranks on each device (with real compute their Q too),
    // plus 256 MiB headroom; with real compute also every rank's outputs and the device's
    // reference buffers.
    exec_ = &exec;
    uint64_t max_q = 0;
    for (uint64_t q : exec.max_q_bytes) max_q = std::max(max_q, q);
    const uint64_t ref_bytes =
        exec.real ? exec.max_reference_kv_bytes + 2 * max_q + max_q / exec.head_dim * 2 : 0;
    for (auto& [d, dv] : devs_) {
      uint64_t need = (256ull << 20) + ref_bytes;
      for (int r = 0; r < ranks_; ++r)
        if (rank_dev_[r] == d)
          need +=
              exec.max_holder_bytes[r] +
              (exec.real ? exec.max_out_bytes[r] + exec.max_scratch_bytes[static_cast<size_t>(r)]
                         : 0);
      size_t free_b = 0, total_b = 0;
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
      if (need > free_b)
        return Error{"replay: device " + std::to_string(d) + " needs " +
                         std::to_string(need >> 20) + " MiB for " + std::to_string(dv.ranks_here) +
                         " rank(s), only " + std::to_string(free_b >> 20) +
                         " MiB free (try --payload-scale or fewer ranks per device)",
                     2};
    }
    // NCCL for SM-driven (NCCL-style) transfers between distinct GPUs: one communicator per
    // rank, all in this process (ncclCommInitAll). Not possible when ranks share a GPU.
#ifdef SPARSP_HAVE_NCCL
    use_nccl_ = opt.use_nccl && used.size() == rank_dev_.size() && rank_dev_.size() > 1;
    if (use_nccl_) {
      bool any = false;
      for (const auto& L : exec.layers)
        for (const auto& a : L.acts) any = any || uses_nccl(a);
      if (any) {
        comms_.resize(rank_dev_.size());
        SPARSP_NCCL_TRY(
            ncclCommInitAll(comms_.data(), static_cast<int>(rank_dev_.size()), rank_dev_.data()));
      } else {
        use_nccl_ = false;
      }
    }
#endif
#ifndef SPARSP_HAVE_CUBLAS
    if (exec.real)
      for (const auto& L : exec.layers)
        for (const auto& a : L.acts)
          if (a.kind == ActKind::compute && a.scratch_bytes > 0 &&
              a.compute->what.kind == sim::TaskKind::gemm)
            return Error{"replay: compute task \"" + a.id +
                             "\" is a gemm, and this build has no cuBLAS (use --compute emulated)",
                         2};
#endif
    // Everything checked: allocate.
    for (auto [a, b] : peer_pairs) {
      SPARSP_CUDA_TRY(cudaSetDevice(a));
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        SPARSP_CUDA_TRY(e);
    }
    for (auto& [d, dv] : devs_) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&dv.gate, cudaStreamNonBlocking));
      SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&dv.aux, cudaStreamNonBlocking));
      SPARSP_CUDA_TRY(cudaEventCreate(&dv.base));
      SPARSP_CUDA_TRY(cudaFuncSetAttribute(spin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(spin_smem(dv))));
    }
    bufs_.assign(exec.holders(), nullptr);
    for (int r = 0; r < ranks_; ++r) {
      SPARSP_CUDA_TRY(cudaSetDevice(rank_dev_[r]));
      SPARSP_CUDA_TRY(cudaMalloc(&bufs_[r], std::max<uint64_t>(exec.max_holder_bytes[r], 256)));
    }
    for (int h = ranks_; h < exec.holders(); ++h) {
      SPARSP_CUDA_TRY(cudaHostAlloc(&bufs_[h], std::max<uint64_t>(exec.max_holder_bytes[h], 256),
                                    cudaHostAllocPortable | cudaHostAllocMapped));
    }
    out_bufs_.assign(static_cast<size_t>(ranks_), nullptr);
    scratch_bufs_.assign(static_cast<size_t>(ranks_), nullptr);
    if (exec.real) {
      for (int r = 0; r < ranks_; ++r) {
        SPARSP_CUDA_TRY(cudaSetDevice(rank_dev_[r]));
        SPARSP_CUDA_TRY(cudaMalloc(&out_bufs_[r], std::max<uint64_t>(exec.max_out_bytes[r], 256)));
        // GEMM operands and copy buffers (gemm / copy tasks): finite bf16 values, never checked.
        const uint64_t sb = exec.max_scratch_bytes[static_cast<size_t>(r)];
        if (sb > 0) {
          SPARSP_CUDA_TRY(cudaMalloc(&scratch_bufs_[r], sb));
          SPARSP_TRY(attention::fill_uniform_bf16(scratch_bufs_[r], sb / 2, 7 + r, 1.0f, nullptr));
          SPARSP_CUDA_TRY(cudaDeviceSynchronize());  // the activity streams are non-blocking
        }
      }
      for (auto& [d, dv] : devs_) {
        SPARSP_CUDA_TRY(cudaSetDevice(d));
        const uint64_t kv = std::max<uint64_t>(exec.max_reference_kv_bytes / 2, 256);
        SPARSP_CUDA_TRY(cudaMalloc(&dv.ref_k, kv));
        SPARSP_CUDA_TRY(cudaMalloc(&dv.ref_v, kv));
        SPARSP_CUDA_TRY(cudaMalloc(&dv.o_ref, std::max<uint64_t>(2 * max_q, 256)));
        SPARSP_CUDA_TRY(
            cudaMalloc(&dv.lse_ref, std::max<uint64_t>(max_q / exec.head_dim * 2, 256)));
      }
    }
    SPARSP_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&gate_flag_), sizeof(int),
                                  cudaHostAllocPortable | cudaHostAllocMapped));
    *gate_flag_ = 0;
#ifdef SPARSP_HAVE_NCCL
    if (use_nccl_) SPARSP_TRY(warm_up_nccl());
#endif
    return Ok{};
  }

  Status fill(const ExecLayer& layer) override {
    // Staging buffers of this layer's staged transfers.
    uint64_t need = 0;
    staging_off_.assign(layer.acts.size(), 0);
    for (size_t i = 0; i < layer.acts.size(); ++i)
      if (is_staged(layer.acts[i])) {
        staging_off_[i] = need;
        need += static_cast<uint64_t>(layer.acts[i].staging_buffers) * layer.acts[i].chunk_bytes;
      }
    if (need > staging_cap_) {
      if (staging_) SPARSP_CUDA_TRY(cudaFreeHost(staging_));
      staging_ = nullptr;
      SPARSP_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&staging_), need,
                                    cudaHostAllocPortable | cudaHostAllocMapped));
      staging_cap_ = need;
    }
    // Stream slots: activities on one named plan stream share a slot (they are FIFO through
    // their dependencies anyway); unnamed ones get their own. Slot k = streams 2k and 2k+1
    // (the second for the H2D half of a staged transfer) on every device.
    slot_.assign(layer.acts.size(), 0);
    {
      std::map<std::string, int> by_name;
      int next = 0;
      for (size_t i = 0; i < layer.acts.size(); ++i) {
        const Activity& a = layer.acts[i];
        const std::string& name =
            a.kind == ActKind::transfer ? a.transfer->stream : a.compute->stream;
        if (name.empty())
          slot_[i] = next++;
        else {
          auto [it, fresh] = by_name.try_emplace(name, next);
          if (fresh) ++next;
          slot_[i] = it->second;
        }
      }
      slots_ = static_cast<size_t>(next);
    }
    for (auto& [d, dv] : devs_) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      while (dv.streams.size() < 2 * slots_) {
        cudaStream_t s;
        SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        dv.streams.push_back(s);
      }
    }
    SPARSP_TRY(run_region_kernel(layer.fills, /*verify=*/false, nullptr));
    layouts_.clear();
    if (exec_->real) {
      for (const AttnWork& w : layer.attn) {
        SPARSP_CUDA_TRY(cudaSetDevice(rank_dev_[w.rank]));
        auto dl = attention::upload_layout(w.layout);
        if (!dl) return dl.error();
        layouts_.push_back(std::move(*dl));
      }
      // One launch of each work's kernel outside the gated iterations (module loading, smem
      // attribute), into its own output (overwritten by every run).
      for (size_t k = 0; k < layer.attn.size(); ++k) {
        const AttnWork& aw = layer.attn[k];
        SPARSP_CUDA_TRY(cudaSetDevice(rank_dev_[aw.rank]));
        SPARSP_TRY(attention::attention_forward(
            layouts_[k], bufs_[aw.rank] + aw.q_offset, bufs_[aw.rank], nullptr,
            out_bufs_[aw.rank] + aw.o_offset,
            reinterpret_cast<float*>(out_bufs_[aw.rank] + aw.lse_offset),
            devs_[rank_dev_[aw.rank]].aux));
        break;  // one launch loads the (shared) kernel instance
      }
    }
    // GEMM and copy tasks: cuBLAS handles (cublasCreate allocates and synchronises: never
    // behind the gate) and one run of each outside the gated iterations, on its own stream
    // (kernel selection and loading happen on the first call).
    if (exec_->real)
      for (size_t i = 0; i < layer.acts.size(); ++i) {
        const Activity& a = layer.acts[i];
        if (a.kind != ActKind::compute || a.scratch_bytes == 0) continue;
        const int d = rank_dev_[a.src];
        SPARSP_CUDA_TRY(cudaSetDevice(d));
        SPARSP_TRY(issue_scratch_task(a, d, devs_[d].streams[2 * slot_[i]], /*warm_up=*/true));
      }
    for (const Region& r : layer.fills)
      if (r.holder >= ranks_) fill_region(bufs_[r.holder], r);
    for (auto& [d, dv] : devs_) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaDeviceSynchronize());
    }
    return Ok{};
  }

  Status run_once(const ExecLayer& layer, std::vector<double>& starts,
                  std::vector<double>& ends) override {
    const size_t n = layer.acts.size();
    starts.assign(n, 0);
    ends.assign(n, 0);
    // 1. Poison.
    for (const Region& r : layer.checks) {
      if (r.holder >= ranks_) {
        std::memset(bufs_[r.holder] + r.offset, static_cast<int>(kPoisonByte), r.bytes);
      } else {
        SPARSP_CUDA_TRY(cudaSetDevice(rank_dev_[r.holder]));
        SPARSP_CUDA_TRY(cudaMemsetAsync(bufs_[r.holder] + r.offset, static_cast<int>(kPoisonByte),
                                        r.bytes, devs_[rank_dev_[r.holder]].aux));
      }
    }
    for (auto& [d, dv] : devs_) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaDeviceSynchronize());
      dv.timing_used = dv.sync_used = 0;
    }
    // 2. Gates and time base. The guard opens the gates on every exit path, so an error while
    // issuing never leaves a gate kernel spinning.
    struct GateGuard {
      CudaBackend* self;
      ~GateGuard() { self->open_gate(); }
    };
    *reinterpret_cast<volatile int*>(gate_flag_) = 0;
    GateGuard guard{this};
    for (auto& [d, dv] : devs_) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      gate_kernel<<<1, 1, 0, dv.gate>>>(gate_flag_);
      SPARSP_CUDA_TRY_LAUNCH("gate_kernel");
      SPARSP_CUDA_TRY(cudaEventRecord(dv.base, dv.gate));
    }
    // 3. Issue.
    std::vector<Issue> st(n);
    std::vector<int> pending(n, 0);
    std::vector<std::vector<int>> out(n);
    for (size_t i = 0; i < n; ++i)
      for (int d : layer.acts[i].deps) {
        ++pending[i];
        out[d].push_back(static_cast<int>(i));
      }
    std::vector<int> active;  // issuable, not yet fully issued; in topological order
    std::vector<int> topo_pos(n);
    for (size_t k = 0; k < layer.order.size(); ++k) topo_pos[layer.order[k]] = static_cast<int>(k);
    for (int i : layer.order)
      if (pending[i] == 0) active.push_back(i);
    size_t finished = 0;
    int ops = 0;
    bool gate_open = false;
    while (finished < n) {
      if (active.empty()) break;  // unreachable: the order is a topological order
      std::vector<int> next;
      std::vector<int> completed;
      std::vector<int> nccl_ready;  // NCCL transfers issuable in this round
      for (int i : active) {
        const Activity& a = layer.acts[static_cast<size_t>(i)];
        if (use_nccl_ && !a.skip && uses_nccl(a)) {
          nccl_ready.push_back(i);
          continue;
        }
        bool done = false;
        SPARSP_TRY(issue_step(layer, static_cast<size_t>(i), st, done));
        ++ops;
        if (done)
          completed.push_back(i);
        else
          next.push_back(i);
      }
      if (!nccl_ready.empty()) {
        // NCCL's host-side launch path may wait for device work of its communicator (stream
        // joins, proxy set-up); behind a closed gate that wait never ends. So the gate opens
        // before the first NCCL call: the NCCL baseline is issued as frameworks issue it,
        // with the GPUs already running.
        if (!gate_open) {
          open_gate();
          gate_open = true;
        }
        // NCCL transfers released in the same round (none depends on another) form one
        // collective: one ncclGroupStart/End after all their dependencies, as a framework
        // issues an all-gather or all-to-all. Issued one group per transfer, NCCL would
        // serialise them on each communicator (its kernels of one communicator run in issue
        // order), e.g. the two directions of a two-rank all-to-all one after the other.
        std::sort(nccl_ready.begin(), nccl_ready.end(),
                  [&](int x, int y) { return topo_pos[x] < topo_pos[y]; });
        SPARSP_TRY(issue_nccl_group(layer, nccl_ready, st));
        ops += static_cast<int>(nccl_ready.size());
        completed.insert(completed.end(), nccl_ready.begin(), nccl_ready.end());
      }
      for (int i : completed) {
        ++finished;
        for (int j : out[i])
          if (--pending[j] == 0) next.push_back(j);
      }
      std::sort(next.begin(), next.end(), [&](int a, int b) { return topo_pos[a] < topo_pos[b]; });
      active.swap(next);
      if (!gate_open && ops >= kGateOps) {
        open_gate();
        gate_open = true;
      }
    }
    if (!gate_open) open_gate();
    // 5. Synchronise and read the events.
    for (auto& [d, dv] : devs_) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaDeviceSynchronize());
    }
    for (size_t i = 0; i < n; ++i) {
      if (layer.acts[i].skip) continue;
      float ms = 0;
      SPARSP_CUDA_TRY(cudaEventElapsedTime(&ms, devs_[st[i].start_dev].base, st[i].start));
      starts[i] = ms * 1e-3;
      SPARSP_CUDA_TRY(cudaEventElapsedTime(&ms, devs_[st[i].end_dev].base, st[i].end));
      ends[i] = ms * 1e-3;
    }
    return Ok{};
  }

  Result<std::pair<int64_t, int64_t>> verify(const ExecLayer& layer) override {
    std::vector<int64_t> bad(layer.checks.size(), -1);
    SPARSP_TRY(run_region_kernel(layer.checks, /*verify=*/true, &bad));
    for (size_t c = 0; c < layer.checks.size(); ++c) {
      const Region& r = layer.checks[c];
      if (r.holder >= ranks_) bad[c] = check_region(bufs_[r.holder], r);
      if (bad[c] >= 0) return std::pair<int64_t, int64_t>{static_cast<int64_t>(c), bad[c]};
    }
    return std::pair<int64_t, int64_t>{-1, -1};
  }

  Status corrupt(const ExecLayer& /*layer*/, const Region& r) override {
    if (r.bytes == 0) return Ok{};
    const auto [off, len] = corrupt_span(r);
    if (r.holder >= ranks_) {
      std::memset(bufs_[r.holder] + off, kCorruptByte, len);
      return Ok{};
    }
    SPARSP_CUDA_TRY(cudaSetDevice(rank_dev_[r.holder]));
    SPARSP_CUDA_TRY(cudaMemset(bufs_[r.holder] + off, kCorruptByte, len));
    return Ok{};
  }

  Result<OutputRows> read_outputs(const ExecLayer& layer, int rank,
                                  const std::vector<int>& check) override {
    const RankQueries& rq = layer.queries[static_cast<size_t>(rank)];
    const int d = rank_dev_[rank];
    Device& dv = devs_[d];
    const int H = exec_->heads, D = exec_->head_dim;
    SPARSP_CUDA_TRY(cudaSetDevice(d));
    SPARSP_CUDA_TRY(cudaDeviceSynchronize());
    if (dv.ref_layer != &layer) {  // the layer's original K/V, once per layer plan and device
      const int nb = static_cast<int>(layer.block_keys.size());
      auto keys = device_copy(layer.block_keys);
      if (!keys) return keys.error();
      auto toks = device_copy(layer.block_token_offsets);
      if (!toks) return toks.error();
      reference_kv_kernel<<<dv.prop.multiProcessorCount * 4, 256>>>(
          *keys, *toks, nb, exec_->kv_heads, D, dv.ref_k, dv.ref_v);
      const cudaError_t le = cudaGetLastError();
      const cudaError_t se = cudaDeviceSynchronize();
      (void)cudaFree(*keys);
      (void)cudaFree(*toks);
      SPARSP_CUDA_TRY(le);
      SPARSP_CUDA_TRY(se);
      dv.ref_layer = &layer;
    }
    // The reference depends only on the layer plan's content: computed once per rank.
    const bool cached = ref_cache_.count({&layer, rank}) > 0;
    if (!cached) {
      auto ref = attention::upload_layout(rq.reference);
      if (!ref) return ref.error();
      std::vector<int> own;  // own blocks only: their Q is the original (never transferred)
      for (int i : check)
        if (i < rq.own_blocks) own.push_back(i);
      if (!own.empty())
        SPARSP_TRY(attention::attention_reference(*ref, bufs_[rank] + rq.q_offset, dv.ref_k,
                                                  dv.ref_v, dv.o_ref, dv.lse_ref, own, nullptr));
    }
    const int qt = rq.reference.q_tokens();
    const std::vector<int> rows = checked_rows(rq, check);
    // Row runs (one per checked query block) to copy per head.
    std::vector<std::pair<int, int>> runs;
    for (int i : check)
      runs.push_back({rq.reference.q_block_offsets[static_cast<size_t>(i)],
                      rq.reference.q_block_offsets[static_cast<size_t>(i) + 1]});
    auto gather = [&](const void* base, size_t elem, int heads, std::vector<uint8_t>& out,
                      int width) -> Status {
      out.resize(size_t(heads) * rows.size() * width * elem);
      size_t at = 0;
      for (int h = 0; h < heads; ++h)
        for (auto [a, b] : runs) {
          const size_t n = size_t(b - a) * width * elem;
          SPARSP_CUDA_TRY(
              cudaMemcpy(out.data() + at,
                         static_cast<const uint8_t*>(base) + (size_t(h) * qt + a) * width * elem, n,
                         cudaMemcpyDeviceToHost));
          at += n;
        }
      return Ok{};
    };
    OutputRows out;
    std::vector<uint8_t> raw;
    for (const AttnWork& w : layer.attn) {
      if (w.rank != rank) continue;
      const int th = w.head_end - w.head_begin;
      SPARSP_TRY(gather(out_bufs_[rank] + w.o_offset, 2, th, raw, D));
      std::vector<float> ov(raw.size() / 2);
      for (size_t k = 0; k < ov.size(); ++k) {
        uint16_t b;
        std::memcpy(&b, raw.data() + 2 * k, 2);
        ov[k] = attention::bf16_to_float(b);
      }
      SPARSP_TRY(gather(out_bufs_[rank] + w.lse_offset, 4, th, raw, 1));
      std::vector<float> lv(raw.size() / 4);
      std::memcpy(lv.data(), raw.data(), raw.size());
      out.o.push_back(std::move(ov));
      out.lse.push_back(std::move(lv));
    }
    auto& ref = ref_cache_[{&layer, rank}];
    if (!cached) {
      SPARSP_TRY(gather(dv.o_ref, 4, H, raw, D));
      ref.first.resize(raw.size() / 4);
      std::memcpy(ref.first.data(), raw.data(), raw.size());
      SPARSP_TRY(gather(dv.lse_ref, 4, H, raw, 1));
      ref.second.resize(raw.size() / 4);
      std::memcpy(ref.second.data(), raw.data(), raw.size());
    }
    out.o_ref = ref.first;
    out.lse_ref = ref.second;
    return out;
  }

  std::string description() const override {
    std::string s;
    for (const auto& [d, dv] : devs_) {
      if (!s.empty()) s += ", ";
      s += std::string(dv.prop.name) + " (device " + std::to_string(d) + ", ranks";
      for (int r = 0; r < ranks_; ++r)
        if (rank_dev_[r] == d) s += " " + std::to_string(r);
      s += ")";
    }
    return s;
  }

 private:
  /// Issue state of one activity.
  struct Issue {
    bool begun = false;
    cudaStream_t s1 = nullptr, s2 = nullptr;
    int start_dev = 0, end_dev = 0;
    cudaEvent_t start = nullptr, end = nullptr;
    uint64_t next_chunk = 0, chunks = 0;
    std::vector<cudaEvent_t> d2h_done, h2d_done;  // staged: per chunk
  };

  static size_t spin_smem(const Device& dv) {
    // More than half of an SM's shared memory: at most one spin block per SM.
    return std::min<size_t>(dv.prop.sharedMemPerBlockOptin,
                            dv.prop.sharedMemPerMultiprocessor / 2 + 1024);
  }

  bool is_staged(const Activity& a) const {
    return a.kind == ActKind::transfer && a.src < ranks_ && a.dst < ranks_ &&
           a.transfer->route == topology::RouteMode::host_staged;
  }

  int dev_of(int holder) const { return holder < ranks_ ? rank_dev_[holder] : -1; }

  /// NCCL-style transfer: SM-driven, GPU to GPU, not host-staged.
  bool uses_nccl(const Activity& a) const {
    return a.kind == ActKind::transfer && a.transfer->engine == sim::Engine::sm && a.src < ranks_ &&
           a.dst < ranks_ && a.transfer->route != topology::RouteMode::host_staged;
  }

  Result<cudaEvent_t> event(int d, bool timing) {
    Device& dv = devs_[d];
    auto& pool = timing ? dv.timing : dv.sync;
    size_t& used = timing ? dv.timing_used : dv.sync_used;
    if (used == pool.size()) {
      cudaEvent_t e;
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(
          cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
      pool.push_back(e);
    }
    return pool[used++];
  }

  /// Makes `s` (on device d) wait for the dependencies of activity i (or the gate).
  Status wait_deps(const ExecLayer& layer, size_t i, const std::vector<Issue>& st, int d,
                   cudaStream_t s) {
    SPARSP_CUDA_TRY(cudaSetDevice(d));
    SPARSP_CUDA_TRY(cudaStreamWaitEvent(s, devs_[d].base, 0));
    for (int j : layer.acts[i].deps)
      if (!layer.acts[j].skip) SPARSP_CUDA_TRY(cudaStreamWaitEvent(s, st[j].end, 0));
    return Ok{};
  }

  /// Copies payload bytes [off, off + len) of activity a between the given base pointers (the
  /// staging side is contiguous), on stream s with the copy engine or a copy kernel.
  Status copy_range(const Activity& a, uint64_t off, uint64_t len, uint8_t* stage, bool to_stage,
                    cudaStream_t s, bool sm) {
    uint64_t pos = 0;
    for (const Piece& p : a.pieces) {
      const uint64_t lo = std::max(off, pos), hi = std::min(off + len, pos + p.bytes);
      if (lo < hi) {
        uint8_t* dst = to_stage ? stage + (lo - off) : bufs_[a.dst] + p.dst_offset + (lo - pos);
        const uint8_t* src =
            to_stage ? bufs_[a.src] + p.src_offset + (lo - pos) : stage + (lo - off);
        SPARSP_TRY(copy(dst, src, hi - lo, s, sm, a.comm_sms));
      }
      pos += p.bytes;
      if (pos >= off + len) break;
    }
    return Ok{};
  }

  Status copy(uint8_t* dst, const uint8_t* src, uint64_t bytes, cudaStream_t s, bool sm, int sms) {
    if (sm) {
      copy_kernel<<<std::max(1, sms), 512, 0, s>>>(dst, src, bytes);
      SPARSP_CUDA_TRY_LAUNCH("copy_kernel");
    } else {
      SPARSP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    }
    return Ok{};
  }

  /// Issues NCCL transfers as one group: every piece sent on the source rank's communicator and
  /// received on the destination's. One stream per device involved (the first member's slot);
  /// each waits for the dependencies of all members; the start
  /// event is recorded on every device before the group, the end after all devices' parts of
  /// the group finished (the collective completes as a whole). Members share those events.
  Status issue_nccl_group(const ExecLayer& layer, const std::vector<int>& members,
                          std::vector<Issue>& st) {
#ifdef SPARSP_HAVE_NCCL
    std::map<int, cudaStream_t> stream;  // device -> stream
    const int slot = slot_[static_cast<size_t>(members.front())];
    for (int i : members) {
      const Activity& a = layer.acts[static_cast<size_t>(i)];
      for (int d : {dev_of(a.src), dev_of(a.dst)}) stream.emplace(d, devs_[d].streams[2 * slot]);
    }
    std::map<int, cudaEvent_t> start, done, end;
    for (auto& [d, s] : stream) {
      for (int i : members) SPARSP_TRY(wait_deps(layer, static_cast<size_t>(i), st, d, s));
      auto e = event(d, true);
      if (!e) return e.error();
      start[d] = *e;
      SPARSP_CUDA_TRY(cudaEventRecord(*e, s));
    }
    SPARSP_NCCL_TRY(ncclGroupStart());
    for (int i : members) {
      const Activity& a = layer.acts[static_cast<size_t>(i)];
      for (const Piece& p : a.pieces) {
        SPARSP_NCCL_TRY(ncclSend(bufs_[a.src] + p.src_offset, p.bytes, ncclUint8, a.dst,
                                 comms_[a.src], stream[dev_of(a.src)]));
        SPARSP_NCCL_TRY(ncclRecv(bufs_[a.dst] + p.dst_offset, p.bytes, ncclUint8, a.src,
                                 comms_[a.dst], stream[dev_of(a.dst)]));
      }
    }
    SPARSP_NCCL_TRY(ncclGroupEnd());
    for (int i : members) {
      const Activity& a = layer.acts[static_cast<size_t>(i)];
      SPARSP_CUDA_TRY(cudaSetDevice(dev_of(a.dst)));
      SPARSP_TRY(corrupt_after(layer, static_cast<size_t>(i), stream[dev_of(a.dst)]));
    }
    for (auto& [d, s] : stream) {
      auto e = event(d, false);
      if (!e) return e.error();
      done[d] = *e;
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaEventRecord(*e, s));
    }
    for (auto& [d, s] : stream) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      for (auto& [d2, e2] : done)
        if (d2 != d) SPARSP_CUDA_TRY(cudaStreamWaitEvent(s, e2, 0));
      auto e = event(d, true);
      if (!e) return e.error();
      end[d] = *e;
      SPARSP_CUDA_TRY(cudaEventRecord(*e, s));
    }
    for (int i : members) {
      const Activity& a = layer.acts[static_cast<size_t>(i)];
      Issue& is = st[static_cast<size_t>(i)];
      is.start_dev = dev_of(a.src);
      is.end_dev = dev_of(a.dst);
      is.start = start[is.start_dev];
      is.end = end[is.end_dev];
      is.s1 = stream[is.start_dev];
      is.s2 = stream[is.end_dev];
    }
    return Ok{};
#else
    (void)layer;
    (void)members;
    (void)st;
    return Error{"replay: NCCL transfers without NCCL in this build", 1};
#endif
  }

  /// Fault injection: after transfer i (the one delivering the corrupted block), on its stream.
  Status corrupt_after(const ExecLayer& layer, size_t i, cudaStream_t s) {
    if (static_cast<int>(i) != layer.corrupt_act || layer.corrupt_check < 0) return Ok{};
    const Region& r = layer.checks[static_cast<size_t>(layer.corrupt_check)];
    if (r.holder >= ranks_ || r.bytes == 0) return corrupt(layer, r);
    const auto [off, len] = corrupt_span(r);
    SPARSP_CUDA_TRY(cudaMemsetAsync(bufs_[r.holder] + off, kCorruptByte, len, s));
    return Ok{};
  }

  template <class T>
  static Result<T*> device_copy(const std::vector<T>& h) {
    T* d = nullptr;
    SPARSP_CUDA_TRY(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(T)));
    if (!h.empty())
      SPARSP_CUDA_TRY(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
  }

  /// Issues the next step of activity i; `done` when it is fully issued (end event recorded).
  // A real `gemm` task: `count` cuBLAS bf16 GEMMs (fp32 accumulation, default algorithm, as
  // calibrate times them) of m x n x k on the rank's scratch; a `copy` task: bytes / 2 copied
  // device to device within it. One cuBLAS handle per stream, so that tasks on different streams
  // do not share a workspace.
  Status issue_scratch_task(const Activity& a, int d, cudaStream_t s, bool warm_up = false) {
    uint8_t* base = scratch_bufs_[static_cast<size_t>(a.src)];
    const sim::TaskCompute& w = a.compute->what;
    if (w.kind == sim::TaskKind::copy) {
      const uint64_t half = a.scratch_bytes / 2;
      SPARSP_CUDA_TRY(cudaMemcpyAsync(base + half, base, half, cudaMemcpyDeviceToDevice, s));
      return Ok{};
    }
#ifdef SPARSP_HAVE_CUBLAS
    auto it = blas_.find(s);
    if (it == blas_.end()) {
      if (!warm_up)  // fill() creates every handle; creating one behind the gate would hang
        return Error{"replay: internal: no cuBLAS handle for the stream of \"" + a.id + "\"", 1};
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      cublasHandle_t h = nullptr;
      if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return Error{"replay: cublasCreate failed on device " + std::to_string(d), 1};
      it = blas_.emplace(s, h).first;
      if (cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS)
        return Error{"replay: cublasSetStream failed on device " + std::to_string(d), 1};
      // Its own workspace (32 MiB, NVIDIA's advice for Hopper), allocated here rather than by
      // cuBLAS on first use.
      void* ws = nullptr;
      SPARSP_CUDA_TRY(cudaMalloc(&ws, kBlasWorkspaceBytes));
      blas_workspaces_.push_back(ws);
      if (cublasSetWorkspace(h, ws, kBlasWorkspaceBytes) != CUBLAS_STATUS_SUCCESS)
        return Error{"replay: cublasSetWorkspace failed on device " + std::to_string(d), 1};
    }
    const int64_t m = w.m, n = w.n, k = w.k;
    const uint8_t* A = base;
    const uint8_t* B = base + 2 * m * k;
    uint8_t* C = base + 2 * (m * k + k * n);
    const float alpha = 1, beta = 0;
    for (int64_t c = 0; c < (warm_up ? 1 : w.count); ++c) {
      // Column-major C(n x m) = B(n x k) A(k x m): the row-major m x n product.
      const cublasStatus_t st =
          cublasGemmEx(it->second, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                       static_cast<int>(m), static_cast<int>(k), &alpha, B, CUDA_R_16BF,
                       static_cast<int>(n), A, CUDA_R_16BF, static_cast<int>(k), &beta, C,
                       CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (st != CUBLAS_STATUS_SUCCESS)
        return Error{"replay: cublasGemmEx of compute task \"" + a.id + "\" (" + std::to_string(m) +
                         " x " + std::to_string(n) + " x " + std::to_string(k) +
                         ") failed with status " + std::to_string(static_cast<int>(st)),
                     1};
    }
    return Ok{};
#else
    (void)d;
    (void)warm_up;
    return Error{"replay: gemm task \"" + a.id + "\" needs cuBLAS, which this build lacks", 2};
#endif
  }

  Status issue_step(const ExecLayer& layer, size_t i, std::vector<Issue>& st, bool& done) {
    const Activity& a = layer.acts[i];
    Issue& is = st[i];
    done = false;
    if (a.skip) {
      done = true;
      return Ok{};
    }
    if (a.kind == ActKind::compute) {
      const int d = rank_dev_[a.src];
      Device& dv = devs_[d];
      is.s1 = dv.streams[2 * slot_[i]];
      is.start_dev = is.end_dev = d;
      SPARSP_TRY(wait_deps(layer, i, st, d, is.s1));
      auto e0 = event(d, true);
      if (!e0) return e0.error();
      auto e1 = event(d, true);
      if (!e1) return e1.error();
      is.start = *e0;
      is.end = *e1;
      SPARSP_CUDA_TRY(cudaEventRecord(is.start, is.s1));
      const int w = exec_->real && !layer.attn_of_act.empty() ? layer.attn_of_act[i] : -1;
      if (exec_->real && a.scratch_bytes > 0) {
        SPARSP_TRY(issue_scratch_task(a, d, is.s1));
      } else if (w >= 0) {
        const AttnWork& aw = layer.attn[static_cast<size_t>(w)];
        SPARSP_TRY(attention::attention_forward(
            layouts_[static_cast<size_t>(w)], bufs_[aw.rank] + aw.q_offset, bufs_[aw.rank], nullptr,
            out_bufs_[aw.rank] + aw.o_offset,
            reinterpret_cast<float*>(out_bufs_[aw.rank] + aw.lse_offset), is.s1));
      } else if (emulate_compute_ && a.duration_s > 0) {
        const int sms = compute_sms_ > 0
                            ? std::min(compute_sms_, dv.prop.multiProcessorCount)
                            : std::max(1, dv.prop.multiProcessorCount / std::max(1, dv.ranks_here));
        spin_kernel<<<sms, kComputeThreads, spin_smem(dv), is.s1>>>(
            static_cast<uint64_t>(a.duration_s * 1e9));
        SPARSP_CUDA_TRY_LAUNCH("spin_kernel");
      }
      SPARSP_CUDA_TRY(cudaEventRecord(is.end, is.s1));
      done = true;
      return Ok{};
    }
    const bool sm = a.transfer->engine == sim::Engine::sm;
    const int ds = dev_of(a.src), dd = dev_of(a.dst);
    const int d_issue = ds >= 0 ? ds : dd;  // the GPU side drives the copy
    if (!is_staged(a)) {
      Device& dv = devs_[d_issue];
      is.s1 = dv.streams[2 * slot_[i]];
      is.start_dev = is.end_dev = d_issue;
      SPARSP_TRY(wait_deps(layer, i, st, d_issue, is.s1));
      auto e0 = event(d_issue, true);
      if (!e0) return e0.error();
      auto e1 = event(d_issue, true);
      if (!e1) return e1.error();
      is.start = *e0;
      is.end = *e1;
      SPARSP_CUDA_TRY(cudaEventRecord(is.start, is.s1));
      for (const Piece& p : a.pieces) {
        uint8_t* dst = bufs_[a.dst] + p.dst_offset;
        const uint8_t* src = bufs_[a.src] + p.src_offset;
        if (!sm && ds >= 0 && dd >= 0 && ds != dd)
          SPARSP_CUDA_TRY(cudaMemcpyPeerAsync(dst, dd, src, ds, p.bytes, is.s1));
        else
          SPARSP_TRY(copy(dst, src, p.bytes, is.s1, sm, a.comm_sms));
      }
      SPARSP_TRY(corrupt_after(layer, i, is.s1));
      SPARSP_CUDA_TRY(cudaEventRecord(is.end, is.s1));
      done = true;
      return Ok{};
    }
    // Host-staged pipeline: one chunk per step.
    const uint64_t C = a.chunk_bytes;
    const uint64_t B = static_cast<uint64_t>(std::max(1, a.staging_buffers));
    if (!is.begun) {
      is.begun = true;
      is.s1 = devs_[ds].streams[2 * slot_[i]];
      is.s2 = devs_[dd].streams[2 * slot_[i] + 1];
      is.start_dev = ds;
      is.end_dev = dd;
      is.chunks = (a.bytes + C - 1) / C;
      is.next_chunk = 0;
      is.d2h_done.assign(is.chunks, nullptr);
      is.h2d_done.assign(is.chunks, nullptr);
      SPARSP_TRY(wait_deps(layer, i, st, ds, is.s1));
      auto e0 = event(ds, true);
      if (!e0) return e0.error();
      is.start = *e0;
      SPARSP_CUDA_TRY(cudaSetDevice(ds));
      SPARSP_CUDA_TRY(cudaEventRecord(is.start, is.s1));
      // The H2D stream starts with the transfer.
      SPARSP_CUDA_TRY(cudaSetDevice(dd));
      SPARSP_CUDA_TRY(cudaStreamWaitEvent(is.s2, is.start, 0));
    }
    if (is.next_chunk < is.chunks) {
      const uint64_t k = is.next_chunk++;
      const uint64_t off = k * C, len = std::min(C, a.bytes - off);
      uint8_t* stage = staging_ + staging_off_[i] + (k % B) * C;
      // D2H of chunk k, after the H2D of chunk k - B freed its buffer.
      SPARSP_CUDA_TRY(cudaSetDevice(ds));
      if (k >= B) SPARSP_CUDA_TRY(cudaStreamWaitEvent(is.s1, is.h2d_done[k - B], 0));
      SPARSP_TRY(copy_range(a, off, len, stage, /*to_stage=*/true, is.s1, sm));
      auto ev = event(ds, false);
      if (!ev) return ev.error();
      is.d2h_done[k] = *ev;
      SPARSP_CUDA_TRY(cudaEventRecord(is.d2h_done[k], is.s1));
      // H2D of chunk k after its D2H.
      SPARSP_CUDA_TRY(cudaSetDevice(dd));
      SPARSP_CUDA_TRY(cudaStreamWaitEvent(is.s2, is.d2h_done[k], 0));
      SPARSP_TRY(copy_range(a, off, len, stage, /*to_stage=*/false, is.s2, sm));
      auto ev2 = event(dd, false);
      if (!ev2) return ev2.error();
      is.h2d_done[k] = *ev2;
      SPARSP_CUDA_TRY(cudaEventRecord(is.h2d_done[k], is.s2));
    }
    if (is.next_chunk >= is.chunks) {
      auto e1 = event(dd, true);
      if (!e1) return e1.error();
      is.end = *e1;
      SPARSP_CUDA_TRY(cudaSetDevice(dd));
      SPARSP_TRY(corrupt_after(layer, i, is.s2));
      SPARSP_CUDA_TRY(cudaEventRecord(is.end, is.s2));
      done = true;
    }
    return Ok{};
  }

#ifdef SPARSP_HAVE_NCCL
  /// One small grouped send/recv between every ordered pair of ranks, then a full synchronise:
  /// NCCL connects peers lazily on first use (NCCL_RUNTIME_CONNECT), which must happen outside
  /// the timed, gated iterations.
  Status warm_up_nccl() {
    const int P = static_cast<int>(rank_dev_.size());
    SPARSP_NCCL_TRY(ncclGroupStart());
    for (int a = 0; a < P; ++a)
      for (int b = 0; b < P; ++b) {
        if (a == b) continue;
        const cudaStream_t sa = devs_[rank_dev_[a]].aux, sb = devs_[rank_dev_[b]].aux;
        SPARSP_NCCL_TRY(ncclSend(bufs_[a], 64, ncclUint8, b, comms_[a], sa));
        SPARSP_NCCL_TRY(ncclRecv(bufs_[b] + 128, 64, ncclUint8, a, comms_[b], sb));
      }
    SPARSP_NCCL_TRY(ncclGroupEnd());
    for (auto& [d, dv] : devs_) {
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      SPARSP_CUDA_TRY(cudaDeviceSynchronize());
    }
    return Ok{};
  }
#endif

  void open_gate() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *reinterpret_cast<volatile int*>(gate_flag_) = 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  /// Fill (verify=false) or check the device regions of `regions` (offsets into the holder
  /// buffers); bad[c] = first bad byte.
  Status run_region_kernel(const std::vector<Region>& regions, bool verify,
                           std::vector<int64_t>* bad) {
    const std::vector<uint8_t*>& base = bufs_;
    for (auto& [d, dv] : devs_) {
      std::vector<DevRegion> table;
      std::vector<size_t> index;
      for (size_t c = 0; c < regions.size(); ++c) {
        const Region& r = regions[c];
        if (r.holder < ranks_ && rank_dev_[r.holder] == d && r.bytes > 0) {
          table.push_back(DevRegion{base[r.holder] + r.offset, r.bytes, r.key});
          index.push_back(c);
        }
      }
      if (table.empty()) continue;
      SPARSP_CUDA_TRY(cudaSetDevice(d));
      if (table.size() > dv.d_regions_cap) {
        if (dv.d_regions) SPARSP_CUDA_TRY(cudaFree(dv.d_regions));
        SPARSP_CUDA_TRY(cudaMalloc(&dv.d_regions, table.size() * sizeof(DevRegion)));
        dv.d_regions_cap = table.size();
      }
      if (table.size() > dv.d_bad_cap) {
        if (dv.d_bad) SPARSP_CUDA_TRY(cudaFree(dv.d_bad));
        SPARSP_CUDA_TRY(cudaMalloc(&dv.d_bad, table.size() * sizeof(unsigned long long)));
        dv.d_bad_cap = table.size();
      }
      SPARSP_CUDA_TRY(cudaMemcpy(dv.d_regions, table.data(), table.size() * sizeof(DevRegion),
                                 cudaMemcpyHostToDevice));
      // Regions in chunks of 65535 (grid y limit).
      for (size_t first = 0; first < table.size(); first += 65535) {
        const unsigned ny = static_cast<unsigned>(std::min<size_t>(65535, table.size() - first));
        const dim3 grid(static_cast<unsigned>(std::max(1, dv.prop.multiProcessorCount / 2)), ny);
        if (verify) {
          SPARSP_CUDA_TRY(cudaMemset(dv.d_bad + first, 0xFF, ny * sizeof(unsigned long long)));
          verify_kernel<<<grid, 256, 0, dv.aux>>>(dv.d_regions + first, dv.d_bad + first);
          SPARSP_CUDA_TRY_LAUNCH("verify_kernel");
        } else {
          fill_kernel<<<grid, 256, 0, dv.aux>>>(dv.d_regions + first);
          SPARSP_CUDA_TRY_LAUNCH("fill_kernel");
        }
      }
      SPARSP_CUDA_TRY(cudaStreamSynchronize(dv.aux));
      if (verify) {
        std::vector<unsigned long long> h(table.size());
        SPARSP_CUDA_TRY(cudaMemcpy(h.data(), dv.d_bad, h.size() * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < h.size(); ++k)
          if (h[k] != ULLONG_MAX) (*bad)[index[k]] = static_cast<int64_t>(h[k]);
      }
    }
    return Ok{};
  }

  void release() {
    for (auto& [d, dv] : devs_) {
      cudaSetDevice(d);
      cudaDeviceSynchronize();
      for (auto s : dv.streams) cudaStreamDestroy(s);
      for (auto e : dv.timing) cudaEventDestroy(e);
      for (auto e : dv.sync) cudaEventDestroy(e);
      if (dv.gate) cudaStreamDestroy(dv.gate);
      if (dv.aux) cudaStreamDestroy(dv.aux);
      if (dv.base) cudaEventDestroy(dv.base);
      if (dv.d_regions) cudaFree(dv.d_regions);
      if (dv.d_bad) cudaFree(dv.d_bad);
      for (void* p : {static_cast<void*>(dv.ref_k), static_cast<void*>(dv.ref_v),
                      static_cast<void*>(dv.o_ref), static_cast<void*>(dv.lse_ref)})
        if (p) cudaFree(p);
    }
    for (int h = 0; h < static_cast<int>(bufs_.size()); ++h) {
      if (!bufs_[h]) continue;
      if (h < ranks_) {
        cudaSetDevice(rank_dev_[h]);
        cudaFree(bufs_[h]);
      } else {
        cudaFreeHost(bufs_[h]);
      }
    }
    layouts_.clear();
    for (int r = 0; r < static_cast<int>(out_bufs_.size()); ++r) {
      cudaSetDevice(rank_dev_[r]);
      if (out_bufs_[r]) cudaFree(out_bufs_[r]);
      if (r < static_cast<int>(scratch_bufs_.size()) && scratch_bufs_[r])
        cudaFree(scratch_bufs_[r]);
    }
#ifdef SPARSP_HAVE_CUBLAS
    for (auto& [st, h] : blas_) cublasDestroy(h);
    blas_.clear();
    for (void* p : blas_workspaces_) cudaFree(p);
    blas_workspaces_.clear();
#endif
    scratch_bufs_.clear();
    out_bufs_.clear();
    if (staging_) cudaFreeHost(staging_);
    if (gate_flag_) cudaFreeHost(gate_flag_);
#ifdef SPARSP_HAVE_NCCL
    for (auto c : comms_) ncclCommDestroy(c);
    comms_.clear();
#endif
    devs_.clear();
    bufs_.clear();
  }

  int ranks_ = 0, hosts_ = 0;
  bool emulate_compute_ = true;
  const ExecPlan* exec_ = nullptr;
  std::vector<uint8_t*> out_bufs_;      ///< per rank (real compute)
  std::vector<uint8_t*> scratch_bufs_;  ///< per rank: gemm operands, copy buffers
#ifdef SPARSP_HAVE_CUBLAS
  std::map<cudaStream_t, cublasHandle_t> blas_;  ///< one cuBLAS handle per stream used
  std::vector<void*> blas_workspaces_;           ///< one per handle
  static constexpr size_t kBlasWorkspaceBytes = 32ull << 20;
#endif
  std::vector<attention::DeviceLayout> layouts_;  ///< per AttnWork of the filled layer
  /// (layer plan, rank) -> the reference's checked rows (o_ref, lse_ref).
  std::map<std::pair<const ExecLayer*, int>, std::pair<std::vector<float>, std::vector<float>>>
      ref_cache_;
  std::vector<int> rank_dev_;
  std::map<int, Device> devs_;
  std::vector<uint8_t*> bufs_;
  uint8_t* staging_ = nullptr;
  uint64_t staging_cap_ = 0;
  std::vector<uint64_t> staging_off_;
  std::vector<int> slot_;
  size_t slots_ = 0;
  int* gate_flag_ = nullptr;
  bool use_nccl_ = false;
  int compute_sms_ = 0;
#ifdef SPARSP_HAVE_NCCL
  std::vector<ncclComm_t> comms_;
#endif
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace sparsp::replay::detail
