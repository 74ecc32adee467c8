// calibrate (CUDA builds): discovery + nvbandwidth-style copy-engine microbenchmarks + fits.
//
// Tests (each a size sweep min_bytes..max_bytes in powers of two, median of `iterations` timed
// copies after one warm-up, CUDA events around each copy on its stream):
//   h2d:<d>      pinned host -> device d          d2h:<d>    device d -> pinned host
//   bidir:<d>    both at once on two streams (aggregate = 2 x size / time)
//   d2d:<d>      device-local cudaMemcpyAsync (bytes copied / time)
//   all_d2h      every device to host at once (aggregate), all_h2d likewise (more than one GPU)
//   p2p:<a>-><b> cudaMemcpyPeerAsync; p2p_bidir:<a><-><b> both ways at once (pairs with P2P)
// Then the copy-engine concurrency tests (calibrate_concurrency.cu) into the machine JSON's
// "copy_engine_concurrency".
#include <cuda_runtime.h>
#ifdef SPARSP_HAVE_CUBLAS
#include <cublas_v2.h>
#endif
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "attention.cuh"
#include "calibrate_concurrency.hpp"
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

#ifdef SPARSP_HAVE_NCCL
/// NCCL send/recv between two devices in one process (ncclCommInitAll), nccl-tests' sendrecv
/// shape: `<prefix>:a->b`, `<prefix>:b->a` (one way) and `<prefix>_bidir:a<->b` (both ways in one
/// group; aggregate = 2 x bytes / time). Sizes from 64 KiB (NCCL's launch cost dominates below).
Result<std::vector<PathFit>> nccl_sweeps(const std::string& prefix, int a, int b,
                                         const std::vector<double>& all_sizes, int iters) {
  std::vector<double> sizes;
  for (double x : all_sizes)
    if (x >= 64 * 1024.0) sizes.push_back(x);
  if (sizes.size() < 2) return std::vector<PathFit>{};
  const size_t max_b = static_cast<size_t>(sizes.back());
  const int devs[2] = {a, b};
  ncclComm_t comms[2];
  SPARSP_NCCL_TRY(ncclCommInitAll(comms, 2, devs));
  uint8_t *send[2], *recv[2];
  cudaStream_t st[2];
  for (int k = 0; k < 2; ++k) {
    SPARSP_CUDA_TRY(cudaSetDevice(devs[k]));
    SPARSP_CUDA_TRY(cudaMalloc(&send[k], max_b));
    SPARSP_CUDA_TRY(cudaMalloc(&recv[k], max_b));
    SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
  }
  std::vector<PathFit> out;
  const std::string ab = std::to_string(a) + "->" + std::to_string(b),
                    ba = std::to_string(b) + "->" + std::to_string(a),
                    both = std::to_string(a) + "<->" + std::to_string(b);
  struct Case {
    std::string name;
    bool fwd, rev;
  };
  for (const Case& c : {Case{prefix + ":" + ab, true, false}, Case{prefix + ":" + ba, false, true},
                        Case{prefix + "_bidir:" + both, true, true}}) {
    std::vector<double> times;
    for (double sz : sizes) {
      const size_t n = static_cast<size_t>(sz);
      auto t = time_copies({st[0], st[1]}, {devs[0], devs[1]}, iters, [&]() -> Status {
        SPARSP_NCCL_TRY(ncclGroupStart());
        if (c.fwd) {
          SPARSP_NCCL_TRY(ncclSend(send[0], n, ncclUint8, 1, comms[0], st[0]));
          SPARSP_NCCL_TRY(ncclRecv(recv[1], n, ncclUint8, 0, comms[1], st[1]));
        }
        if (c.rev) {
          SPARSP_NCCL_TRY(ncclSend(send[1], n, ncclUint8, 0, comms[1], st[1]));
          SPARSP_NCCL_TRY(ncclRecv(recv[0], n, ncclUint8, 1, comms[0], st[0]));
        }
        SPARSP_NCCL_TRY(ncclGroupEnd());
        return Ok{};
      });
      if (!t) return t.error();
      times.push_back(*t);
    }
    PathFit f = fit_latency_bandwidth(c.name, sizes, times);
    if (c.fwd && c.rev) f.aggregate_Bps = 2 * f.bandwidth_Bps;
    out.push_back(f);
  }
  for (int k = 0; k < 2; ++k) {
    cudaSetDevice(devs[k]);
    cudaStreamSynchronize(st[k]);
    cudaFree(send[k]);
    cudaFree(recv[k]);
    cudaStreamDestroy(st[k]);
    ncclCommDestroy(comms[k]);
  }
  return out;
}

/// NCCL's host-memory path (what P2P-less PCIe servers get) needs NCCL_P2P_DISABLE=1 at
/// communicator creation, and NCCL reads it once per process; so it is measured in a child
/// forked before this process touches CUDA. Returns the child's fits as JSON text (an array of
/// fit_json objects), or an error naming what failed. The child gets `timeout_s` in all.
Result<std::string> nccl_host_path_in_child(int a, int b, const std::vector<double>& sizes,
                                            int iters, double timeout_s) {
  int fd[2];
  if (pipe(fd) != 0) return Error{"calibrate: pipe() failed", 1};
  const pid_t pid = fork();
  if (pid < 0) return Error{"calibrate: fork() failed", 1};
  if (pid == 0) {
    close(fd[0]);
    setenv("NCCL_P2P_DISABLE", "1", 1);
    auto fits = nccl_sweeps("nccl_shm", a, b, sizes, iters);
    std::string text;
    if (fits) {
      Json arr = Json::array();
      for (const auto& f : *fits) arr.push_back(fit_json(f));
      text = arr.dump();
    } else {
      text = "!" + fits.error().message;
    }
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t w = write(fd[1], text.data() + off, text.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fd[1]);
    _exit(fits ? 0 : 1);
  }
  close(fd[1]);
  std::string text;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fd[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0) break;
    if (r == 0) continue;
    const ssize_t n = read(fd[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out)
    return Error{"calibrate: NCCL host-path measurement (NCCL_P2P_DISABLE=1) did not finish in " +
                     std::to_string(static_cast<int>(timeout_s)) + " s",
                 1};
  if (!text.empty() && text[0] == '!') return Error{text.substr(1), 1};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.empty())
    return Error{"calibrate: NCCL host-path measurement child failed", 1};
  return text;
}
#endif

}  // namespace

namespace {
__global__ void empty_kernel() {}

/// The layout calibrate times: `tokens` / `block` query and KV blocks of `block` tokens, `heads`
/// heads sharing one mask; each query block reads its own block and a seeded random rest
/// (xorshift64), round(density x blocks) in all, at least 1. Density 1: every block.
attention::BlockSparseLayout calibration_layout(int heads, int hd, int tokens, int block,
                                                double density) {
  attention::BlockSparseLayout l;
  l.heads = heads;
  l.head_dim = hd;
  const int nb = tokens / block;
  for (int b = 0; b <= nb; ++b) l.q_block_offsets.push_back(b * block);
  l.kv_block_offsets = l.q_block_offsets;
  const int per_row = std::max(1, int(std::lround(density * nb)));
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  l.row_ptr.push_back(0);
  for (int qb = 0; qb < nb; ++qb) {
    std::vector<int> row{qb};
    std::vector<char> used(size_t(nb), 0);
    used[size_t(qb)] = 1;
    while (int(row.size()) < per_row) {
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      const int b = int(rng % uint64_t(nb));
      if (!used[size_t(b)]) {
        used[size_t(b)] = 1;
        row.push_back(b);
      }
    }
    std::sort(row.begin(), row.end());
    l.kv_blocks.insert(l.kv_blocks.end(), row.begin(), row.end());
    l.row_ptr.push_back(int32_t(l.kv_blocks.size()));
  }
  return l;
}

/// The median of 3 timed runs after one warm-up, seconds: each run calls `prepare` (untimed:
/// synchronisation, background work), then `run` between CUDA events e0 and e1 on `st`. Both
/// return a Status.
template <class Prepare, class Run>
Result<double> median_of_3(cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1, Prepare&& prepare,
                           Run&& run) {
  std::vector<double> times;
  for (int it = 0; it < 4; ++it) {
    SPARSP_TRY(prepare());
    SPARSP_CUDA_TRY(cudaEventRecord(e0, st));
    SPARSP_TRY(run());
    SPARSP_CUDA_TRY(cudaEventRecord(e1, st));
    SPARSP_CUDA_TRY(cudaEventSynchronize(e1));
    float ms = 0;
    SPARSP_CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
    if (it > 0) times.push_back(ms * 1e-3);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// An SM-driven copy, as NCCL's kernels do over PCIe: every thread copies 16-byte words from
/// mapped pinned host memory to device memory (loads cross PCIe, stores go to HBM), looping over
/// the buffer until `duration_ns` of %globaltimer have passed. Launched with one block per SM and
/// the SM's whole opt-in shared memory, so no other kernel's block can share its SMs.
__global__ void sm_copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t words,
                               unsigned long long duration_ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  do {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
      dst[i] = src[i];
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < duration_ns);
}

#ifdef SPARSP_HAVE_CUBLAS
/// cuBLAS bf16 GEMMs (fp32 accumulation, cublasGemmEx, default algorithm) of a DiT block's
/// shapes on `device`: m = `tokens` rows by (n, k) = (3072, 3072) (QKV/projection at hidden 3072)
/// and (12288, 3072) (MLP up, 4x). Each time is the median of 3 runs after a warm-up (CUDA
/// events); returns (points, mean TFLOP/s = 2 m n k / time over the shapes).
Result<std::pair<Json, double>> measure_gemm(int tokens, cudaStream_t st, cudaEvent_t e0,
                                             cudaEvent_t e1) {
  namespace at = attention;
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return Error{"calibrate: cublasCreate failed", 1};
  struct HandleGuard {
    cublasHandle_t h;
    ~HandleGuard() { cublasDestroy(h); }
  } hg{h};
  if (cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS)
    return Error{"calibrate: cublasSetStream failed", 1};
  Json points = Json::array();
  double sum = 0;
  int count = 0;
  for (const auto& nk : {std::pair<int, int>{3072, 3072}, std::pair<int, int>{12288, 3072}}) {
    const int n = nk.first, k = nk.second;
    const int m = tokens;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    SPARSP_CUDA_TRY(cudaMalloc(&a, size_t(m) * k * 2));
    SPARSP_CUDA_TRY(cudaMalloc(&b, size_t(k) * n * 2));
    SPARSP_CUDA_TRY(cudaMalloc(&c, size_t(m) * n * 2));
    struct BufGuard {
      void *a, *b, *c;
      ~BufGuard() {
        cudaFree(a);
        cudaFree(b);
        cudaFree(c);
      }
    } bg{a, b, c};
    SPARSP_TRY(at::fill_uniform_bf16(a, size_t(m) * k, 4, 1.0f, st));
    SPARSP_TRY(at::fill_uniform_bf16(b, size_t(k) * n, 5, 1.0f, st));
    const float alpha = 1, beta = 0;
    auto t = median_of_3(
        st, e0, e1, [] { return Status{Ok{}}; },
        [&]() -> Status {
          // Column-major C(n x m) = B(n x k) A(k x m): the row-major m x n product.
          const cublasStatus_t s = cublasGemmEx(
              h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, n, a, CUDA_R_16BF, k,
              &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          if (s != CUBLAS_STATUS_SUCCESS)
            return Error{"calibrate: cublasGemmEx failed (status " + std::to_string(int(s)) + ")",
                         1};
          return Ok{};
        });
    if (!t) return t.error();
    const double tflops = 2.0 * m * n * k / *t / 1e12;
    points.push_back(
        {{"gemm", {{"m", m}, {"n", n}, {"k", k}}}, {"time_ms", *t * 1e3}, {"TFLOPs", tflops}});
    sum += tflops;
    ++count;
  }
  return std::pair<Json, double>{std::move(points), sum / count};
}
#endif

/// Attention beside copies on `device` (measured_compute "contention"; replay/README.md
/// "calibrate"). Dense attention, head_dim 128, blocks of 128, 24 heads x `tokens`: its time
/// alone (t0), then
///  - beside copy-engine copies: a 256 MiB pinned H2D and a 256 MiB D2H copy looping on two
///    other streams for the whole kernel: ce_copy = t / t0 - 1;
///  - beside `sm_copy_kernel` on N = 8, 16 and 32 SMs for the whole kernel:
///    sm_copy_per_sm = least squares through the origin of (t / t0 - 1) against N, written only
///    where that line beats the simulator's default SM-share model (t / t0 = SMs / (SMs - N)).
/// Each time is the median of 3 runs after a warm-up (CUDA events on the attention's stream).
/// Returns (points, {"ce_copy", "sm_copy_per_sm"}).
Result<std::pair<Json, Json>> measure_contention(int device, int tokens, cudaStream_t st,
                                                 cudaEvent_t e0, cudaEvent_t e1) {
  namespace at = attention;
  cudaDeviceProp prop{};
  SPARSP_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  const int heads = 24, hd = 128, block = 128;
  tokens = tokens / block * block;
  const size_t n = size_t(heads) * tokens * hd;
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dbuf = nullptr;
  void *h_src = nullptr, *h_dst = nullptr, *h_map = nullptr, *d_map = nullptr;
  float* lse = nullptr;
  const size_t copy_bytes = size_t(256) << 20;
  cudaStream_t s_h2d = nullptr, s_d2h = nullptr, s_sm = nullptr;
  auto release = [&] {
    for (void* p : {q, k, v, o, dbuf, d_map, static_cast<void*>(lse)}) cudaFree(p);
    for (void* p : {h_src, h_dst, h_map}) cudaFreeHost(p);
    for (cudaStream_t s : {s_h2d, s_d2h, s_sm}) cudaStreamDestroy(s);
  };
  struct Guard {
    decltype(release)& f;
    ~Guard() { f(); }
  } guard{release};
  SPARSP_CUDA_TRY(cudaMalloc(&q, n * 2));
  SPARSP_CUDA_TRY(cudaMalloc(&k, n * 2));
  SPARSP_CUDA_TRY(cudaMalloc(&v, n * 2));
  SPARSP_CUDA_TRY(cudaMalloc(&o, n * 2));
  SPARSP_CUDA_TRY(cudaMalloc(&lse, size_t(heads) * tokens * 4));
  SPARSP_CUDA_TRY(cudaMalloc(&dbuf, copy_bytes));
  SPARSP_CUDA_TRY(cudaMalloc(&d_map, copy_bytes));
  SPARSP_CUDA_TRY(cudaHostAlloc(&h_src, copy_bytes, cudaHostAllocDefault));
  SPARSP_CUDA_TRY(cudaHostAlloc(&h_dst, copy_bytes, cudaHostAllocDefault));
  SPARSP_CUDA_TRY(cudaHostAlloc(&h_map, copy_bytes, cudaHostAllocMapped));
  std::memset(h_map, 0, copy_bytes);
  void* h_map_dev = nullptr;
  SPARSP_CUDA_TRY(cudaHostGetDevicePointer(&h_map_dev, h_map, 0));
  SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&s_h2d, cudaStreamNonBlocking));
  SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&s_d2h, cudaStreamNonBlocking));
  SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&s_sm, cudaStreamNonBlocking));
  SPARSP_TRY(at::fill_uniform_bf16(q, n, 1, 2.0f, st));
  SPARSP_TRY(at::fill_uniform_bf16(k, n, 2, 2.0f, st));
  SPARSP_TRY(at::fill_uniform_bf16(v, n, 3, 1.0f, st));
  const at::BlockSparseLayout l = calibration_layout(heads, hd, tokens, block, 1.0);
  auto dl = at::upload_layout(l);
  if (!dl) return dl.error();
  const int smem = int(prop.sharedMemPerBlockOptin);
  SPARSP_CUDA_TRY(
      cudaFuncSetAttribute(sm_copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  // beside: 0 alone, -1 copy-engine copies, N > 0 the SM copy kernel on N SMs.
  auto time_attention = [&](int beside, double t_alone) -> Result<double> {
    auto r = median_of_3(
        st, e0, e1,
        [&]() -> Status {
          SPARSP_CUDA_TRY(cudaDeviceSynchronize());
          if (beside < 0) {
            const int reps = 1 + int(std::ceil(3 * t_alone / (copy_bytes / 50e9)));
            for (int i = 0; i < reps; ++i) {
              SPARSP_CUDA_TRY(
                  cudaMemcpyAsync(dbuf, h_src, copy_bytes, cudaMemcpyHostToDevice, s_h2d));
              SPARSP_CUDA_TRY(
                  cudaMemcpyAsync(h_dst, d_map, copy_bytes, cudaMemcpyDeviceToHost, s_d2h));
            }
          } else if (beside > 0) {
            sm_copy_kernel<<<beside, 512, size_t(smem), s_sm>>>(
                static_cast<const int4*>(h_map_dev), static_cast<int4*>(d_map), copy_bytes / 16,
                static_cast<unsigned long long>(3 * t_alone * 1e9));
            SPARSP_CUDA_TRY(cudaGetLastError());
            // Let the copier's blocks take their SMs before the attention's are dispatched.
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
          return Ok{};
        },
        [&] { return at::attention_forward(*dl, q, k, v, o, lse, st); });
    if (!r) return r.error();
    SPARSP_CUDA_TRY(cudaDeviceSynchronize());
    return *r;
  };
  Json points = Json::array();
  auto t0 = time_attention(0, 0);
  if (!t0) return t0.error();
  points.push_back({{"beside", "nothing"}, {"time_ms", *t0 * 1e3}});
  auto tce = time_attention(-1, *t0);
  if (!tce) return tce.error();
  const double ce_copy = std::max(0.0, *tce / *t0 - 1);
  points.push_back({{"beside", "ce_copy h2d+d2h 256 MiB"}, {"time_ms", *tce * 1e3}});
  double sxy = 0, sxx = 0;
  const int sm_total = prop.multiProcessorCount;
  std::vector<std::pair<int, double>> ratios;  // (SMs taken, t / t0)
  for (int sms : {8, 16, 32}) {
    if (sms >= sm_total) continue;
    auto t = time_attention(sms, *t0);
    if (!t) return t.error();
    ratios.emplace_back(sms, *t / *t0);
    sxy += sms * (*t / *t0 - 1);
    sxx += double(sms) * sms;
  }
  const double per_sm = sxx > 0 ? std::max(0.0, sxy / sxx) : 0;
  // Two models of the slowdown beside N taken SMs: the simulator's default, the SM share alone
  // (t / t0 = SMs / (SMs - N)), and the fitted line 1 + per_sm N. The line is written only where
  // it predicts the measurement better (smaller worst relative error); otherwise the default
  // stands and the topology gets no sm_copy_per_sm.
  double err_share = 0, err_line = 0;
  for (const auto& [sms, r] : ratios) {
    const double share = double(sm_total) / (sm_total - sms), line = 1 + per_sm * sms;
    err_share = std::max(err_share, std::abs(share - r) / r);
    err_line = std::max(err_line, std::abs(line - r) / r);
    points.push_back({{"beside", "sm_copy"},
                      {"sms", sms},
                      {"time_ms", r * *t0 * 1e3},
                      {"ratio", r},
                      {"sm_share_model_ratio", share},
                      {"linear_model_ratio", line}});
  }
  Json c = {{"ce_copy", ce_copy}};
  if (!ratios.empty() && err_line < err_share) c["sm_copy_per_sm"] = per_sm;
  points.push_back({{"contention_fit",
                     {{"sm_copy_per_sm", per_sm},
                      {"sm_share_max_error", err_share},
                      {"linear_max_error", err_line},
                      {"chosen", c.contains("sm_copy_per_sm") ? "linear" : "sm_share"}}}});
  return std::pair<Json, Json>{std::move(points), std::move(c)};
}

/// sparsp's attention kernel on `device` (CalibrateOptions::compute): per head_dim and block,
/// the mean TFLOP/s over densities 10%, 30%, 100% (active FLOPs 4 Bq Bk head_dim per triple /
/// median of 3 timed runs after a warm-up, CUDA events); each query block reads its own block and
/// a seeded random rest, shared across 24 heads; Q, K in [-2, 2], V in [-1, 1]. Launch overhead:
/// 1000 back-to-back empty kernels on one stream, time / 1000. Returns (points, entries of the
/// topology's measured_compute).
Result<std::pair<Json, Json>> measure_compute(int device, const CalibrateOptions& opt) {
  namespace at = attention;
  SPARSP_CUDA_TRY(cudaSetDevice(device));
  cudaDeviceProp prop{};
  SPARSP_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  cudaStream_t st = nullptr;
  SPARSP_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  SPARSP_CUDA_TRY(cudaEventCreate(&e0));
  SPARSP_CUDA_TRY(cudaEventCreate(&e1));
  Json points = Json::array(), entries = Json::array();
  const int heads = 24, tokens = std::max(1536, opt.compute_tokens / 384 * 384);
  double launch_s = 0;
  {
    empty_kernel<<<1, 32, 0, st>>>();
    SPARSP_CUDA_TRY(cudaStreamSynchronize(st));
    SPARSP_CUDA_TRY(cudaEventRecord(e0, st));
    for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 32, 0, st>>>();
    SPARSP_CUDA_TRY(cudaEventRecord(e1, st));
    SPARSP_CUDA_TRY(cudaEventSynchronize(e1));
    float ms = 0;
    SPARSP_CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
    launch_s = ms * 1e-3 / 1000;
  }
  Json contention_points = Json::array(), contention = Json::object();
  if (opt.compute_contention) {
    auto c = measure_contention(device, tokens, st, e0, e1);
    if (!c) return c.error();
    contention_points = std::move(c->first);
    contention = std::move(c->second);
  }
  double gemm_tflops = 0;
#ifdef SPARSP_HAVE_CUBLAS
  {
    auto g = measure_gemm(tokens, st, e0, e1);
    if (!g) return g.error();
    for (Json& x : g->first) contention_points.push_back(std::move(x));
    gemm_tflops = g->second;
  }
#endif
  for (int hd : {128, 64}) {
    const size_t n = size_t(heads) * tokens * hd;
    void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
    float* lse = nullptr;
    SPARSP_CUDA_TRY(cudaMalloc(&q, n * 2));
    SPARSP_CUDA_TRY(cudaMalloc(&k, n * 2));
    SPARSP_CUDA_TRY(cudaMalloc(&v, n * 2));
    SPARSP_CUDA_TRY(cudaMalloc(&o, n * 2));
    SPARSP_CUDA_TRY(cudaMalloc(&lse, size_t(heads) * tokens * 4));
    SPARSP_TRY(at::fill_uniform_bf16(q, n, 1, 2.0f, st));
    SPARSP_TRY(at::fill_uniform_bf16(k, n, 2, 2.0f, st));
    SPARSP_TRY(at::fill_uniform_bf16(v, n, 3, 1.0f, st));
    Json by_block = Json::object();
    for (int block : {128, 384}) {
      double sum_tflops = 0;
      int count = 0;
      for (double density : {0.1, 0.3, 1.0}) {
        const at::BlockSparseLayout l = calibration_layout(heads, hd, tokens, block, density);
        auto dl = at::upload_layout(l);
        if (!dl) return dl.error();
        auto tr = median_of_3(
            st, e0, e1, [] { return Status{Ok{}}; },
            [&] { return at::attention_forward(*dl, q, k, v, o, lse, st); });
        if (!tr) return tr.error();
        const double t = *tr;
        const double tflops = at::active_flops(l) / t / 1e12;
        points.push_back({{"head_dim", hd},
                          {"block", block},
                          {"density", density},
                          {"heads", heads},
                          {"tokens", tokens},
                          {"time_ms", t * 1e3},
                          {"TFLOPs", tflops}});
        sum_tflops += tflops;
        ++count;
      }
      by_block[std::to_string(block)] = sum_tflops / count;
    }
    for (void* p : {q, k, v, o, static_cast<void*>(lse)}) cudaFree(p);
    entries.push_back({{"gpu_model", std::string(prop.name)},
                       {"kernel", "sparsp"},
                       {"head_dim", hd},
                       {"attention_TFLOPs", by_block},
                       {"launch_overhead_us", launch_s * 1e6}});
    if (gemm_tflops > 0) entries.back()["gemm_TFLOPs"] = gemm_tflops;
    if (!contention.empty()) entries.back()["contention"] = contention;
    entries.back()["conditions"] =
        "sparsp calibrate: " + std::to_string(heads) + " heads x " + std::to_string(tokens) +
        " tokens, mean over densities 0.1/0.3/1.0, median of 3 runs; one GPU, nothing else "
        "running" +
        (contention.empty() ? std::string()
                            : std::string("; contention: dense head_dim 128, block 128, beside "
                                          "H2D+D2H copy-engine copies and an SM copy kernel "
                                          "(mapped host -> device) on 8/16/32 SMs")) +
        (gemm_tflops > 0
             ? "; GEMMs: cuBLAS bf16 " + std::to_string(tokens) + " x (3072, 12288) x 3072, mean"
             : std::string());
  }
  for (Json& c : contention_points) points.push_back(std::move(c));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(st);
  return std::pair<Json, Json>{std::move(points), std::move(entries)};
}
}  // namespace

Result<CalibrateResult> calibrate(const CalibrateOptions& opt) {
  // NCCL's host path first, in a child forked before any CUDA call of this process (see
  // nccl_host_path_in_child). Its failure is reported in the machine JSON, not fatal.
  std::string nccl_host_json, nccl_host_error;
#ifdef SPARSP_HAVE_NCCL
  if (opt.nccl && opt.devices.size() != 1) {
    std::vector<double> sz;
    for (double x = opt.min_bytes; x <= opt.max_bytes * 1.0000001; x *= 2) sz.push_back(x);
    const int a = opt.devices.size() >= 2 ? opt.devices[0] : 0;
    const int b = opt.devices.size() >= 2 ? opt.devices[1] : 1;
    auto r = nccl_host_path_in_child(a, b, sz, opt.iterations, 300);
    if (r)
      nccl_host_json = *r;
    else
      nccl_host_error = r.error().message;
  }
#endif
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
  // Copy-engine concurrency (issue 17): N copies at once per direction, mixed directions,
  // device-local, P2P push / pull and all-to-all; peer access is enabled above.
  if (opt.concurrency_copies > 0) {
    detail::ConcurrencyOptions co;
    co.copies.clear();
    for (int n = 1; n <= opt.concurrency_copies; n *= 2) co.copies.push_back(n);
    if (co.copies.back() != opt.concurrency_copies) co.copies.push_back(opt.concurrency_copies);
    co.bytes_per_copy = opt.concurrency_bytes;
    co.iterations = std::max(1, std::min(opt.iterations, 3));
    auto cc = detail::copy_engine_concurrency(devs, co);
    if (!cc) return cc.error();
    machine["copy_engine_concurrency"] = std::move(*cc);
  }
#ifdef SPARSP_HAVE_NCCL
  // NCCL send/recv between the first two devices: default transports (P2P over NVLink or PCIe
  // where allowed), then the host path measured by the child (NCCL_P2P_DISABLE=1).
  Json nccl_note = Json::object();
  if (opt.nccl && devs.size() >= 2) {
    auto f = nccl_sweeps("nccl", devs[0], devs[1], sizes, opt.iterations);
    if (f)
      for (const auto& x : *f) res.fits.push_back(x);
    else
      nccl_note["p2p_error"] = f.error().message;
    if (!nccl_host_json.empty()) {
      for (const Json& j : Json::parse(nccl_host_json)) {
        PathFit x;
        x.name = j.at("name").get<std::string>();
        x.latency_s = j.at("latency_us").get<double>() * 1e-6;
        x.bandwidth_Bps = j.at("bandwidth_GBps").get<double>() * 1e9;
        x.aggregate_Bps = j.value("aggregate_GBps", 0.0) * 1e9;
        for (const Json& p : j.at("points")) {
          x.sizes_bytes.push_back(p.at("bytes").get<double>());
          x.times_s.push_back(p.at("time_us").get<double>() * 1e-6);
        }
        res.fits.push_back(x);
      }
    }
    if (!nccl_host_error.empty()) nccl_note["host_path_error"] = nccl_host_error;
  }
  if (!nccl_note.empty()) machine["nccl"] = nccl_note;
#endif
  if (opt.compute) {
    auto mc = measure_compute(devs[0], opt);
    if (!mc) return mc.error();
    machine["compute_points"] = std::move(mc->first);
    machine["measured_compute"] = std::move(mc->second);
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
