// sparsp's block-sparse attention forward and its reference (attention.cuh has the contract).
//
// Kernel (FlashAttention-2, Dao 2023, Algorithm 1, forward):
//   grid (query tiles, heads); a CTA of WARPS warps owns BM = 16 * MT * WARPS query rows of one
//   query block; warp w owns rows [16 MT w, 16 MT (w+1)). The KV tiles of the row's KV blocks
//   (BN tokens each; a block's last tile may be shorter and is masked) stream through two
//   shared-memory stages filled by cp.async (16-byte chunks, zero-filled past the end, XOR-
//   swizzled so ldmatrix reads are bank-conflict free). Per tile:
//     S = Q K^T            mma.sync m16n8k16 bf16 -> fp32, Q and K via ldmatrix (non-transposed)
//     m' = max(m, rowmax(S) scale log2 e); P = exp2(S scale log2 e - m'); l = l 2^(m-m') + rowsum P
//     O = O 2^(m-m') + P V  P re-packed from the S accumulators to bf16 A fragments (the C layout
//                          of two n8 tiles is the A layout of one k16 step), V via ldmatrix.trans
//   At the end O / l goes out in bf16 and lse = (m + log2 l) ln 2 in fp32.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "attention.cuh"
#include "cuda_check.hpp"

namespace sparsp::replay::attention {

namespace {

struct Params {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  __nv_bfloat16* o;
  float* lse;
  const int32_t* q_off;
  const int32_t* kv_off;
  const int32_t* row_ptr;
  const int32_t* kv_blocks;
  const int32_t* tiles;  // pairs (query block, first token)
  int n_q_blocks;
  int q_tokens;
  int kv_tokens;
  int per_head;
  float scale_log2;  // softmax scale * log2(e)
  const int64_t* kv_base;     // paged K/V (nullptr: contiguous)
  const int64_t* kv_hstride;  // paged: elements between KV heads of a block
  int head0;                  // first query head of the launch
  int kv_group;               // query heads per KV head
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;  // src-size 0: the 16 bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D (fp32, 16x8) += A (bf16 16x16, row) * B (bf16 16x8, col).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<uint32_t*>(&v);
}

// Element offset of (row, 16-byte chunk) in a swizzled [rows][D] bf16 tile.
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// Copies rows [t0, t0 + n) of g ([tokens][D]) into the swizzled tile s of R rows (rows >= n zero).
template <int D, int R, int THREADS>
__device__ __forceinline__ void load_tile(__nv_bfloat16* s, const __nv_bfloat16* g, int t0, int n,
                                          int tid) {
  constexpr int CH = D / 8;
  constexpr int TOTAL = R * CH;
  static_assert(TOTAL % THREADS == 0, "tile chunks must divide among the threads");
  const uint32_t base = smem_addr(s);
#pragma unroll
  for (int it = 0; it < TOTAL / THREADS; ++it) {
    const int i = it * THREADS + tid;
    const int r = i / CH, c = i % CH;
    const bool valid = r < n;
    const __nv_bfloat16* src = valid ? g + (size_t(t0) + r) * D + c * 8 : g;
    cp_async16(base + uint32_t(swz<D>(r, c)) * 2u, src, valid);
  }
}

__device__ __forceinline__ float ex2(float x) {  // 2^x; ex2.approx(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <int D, int MT, int WARPS, int BN, int MINB, int STAGES>
__global__ void __launch_bounds__(32 * WARPS, MINB) flash_fwd_kernel(const Params p) {
  constexpr int THREADS = 32 * WARPS;
  constexpr int BM = 16 * MT * WARPS;
  constexpr int NT = BN / 8;  // n8 tiles of S
  constexpr int DT = D / 8;   // n8 tiles of O
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sK = sQ + BM * D;           // STAGES stages of BN x D
  __nv_bfloat16* sV = sK + STAGES * BN * D;  // STAGES stages of BN x D

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h = blockIdx.y;
  const int qb = p.tiles[2 * blockIdx.x], row0 = p.tiles[2 * blockIdx.x + 1];
  const int qrows = min(BM, p.q_off[qb + 1] - row0);
  const int r = p.per_head ? h * p.n_q_blocks + qb : qb;
  const int li_beg = p.row_ptr[r], li_end = p.row_ptr[r + 1];
  const size_t q_head = size_t(h) * p.q_tokens;
  const __nv_bfloat16* qg = p.q + q_head * D;
  const int hkv = (p.head0 + h) / p.kv_group;
  const __nv_bfloat16* kg = p.k + size_t(hkv) * p.kv_tokens * D;
  const __nv_bfloat16* vg = p.v + size_t(hkv) * p.kv_tokens * D;
  const int wrow = warp * 16 * MT;  // first row of this warp in the tile
  const int g = lane >> 2, t4 = lane & 3;

  if (li_beg == li_end) {  // no active KV block: O = 0, lse = -inf
    for (int i = tid; i < qrows * D; i += THREADS)
      p.o[(q_head + row0) * D + i] = __float2bfloat16(0.0f);
    for (int i = tid; i < qrows; i += THREADS) p.lse[q_head + row0 + i] = -INFINITY;
    return;
  }

  // The KV tile iterator over the row's blocks: (list index, offset inside the block).
  int pli = li_beg, poff = 0;
  auto next_tile = [&](const __nv_bfloat16*& kp, const __nv_bfloat16*& vp, int& n) {
    const int b = p.kv_blocks[pli];
    const int s = p.kv_off[b], e = p.kv_off[b + 1];
    const int t0 = s + poff;
    n = min(BN, e - t0);
    if (p.kv_base) {  // paged: the block's own slot, K then V per KV head
      const __nv_bfloat16* kb = p.k + p.kv_base[b] + int64_t(hkv) * p.kv_hstride[b];
      kp = kb + size_t(poff) * D;
      vp = kb + size_t(e - s + poff) * D;
    } else {
      kp = kg + size_t(t0) * D;
      vp = vg + size_t(t0) * D;
    }
    poff += BN;
    if (s + poff >= e) {
      ++pli;
      poff = 0;
    }
  };

  // Pipeline: tile i sits in stage i % STAGES; STAGES - 1 tiles are in flight ahead of the one
  // being computed. One barrier per tile: after it, every warp has finished tile i - 1, whose
  // stage is the one the prefetch of tile i + STAGES - 1 overwrites.
  int tile_n[STAGES];  // valid rows of the tile in each stage
  int issued = 0, consumed = 0;
  auto issue = [&](int stage) {
    if (pli < li_end) {
      const __nv_bfloat16 *kp, *vp;
      int n;
      next_tile(kp, vp, n);
      load_tile<D, BN, THREADS>(sK + stage * BN * D, kp, 0, n, tid);
      load_tile<D, BN, THREADS>(sV + stage * BN * D, vp, 0, n, tid);
      tile_n[stage] = n;
      ++issued;
    }
    cp_async_commit();
  };
  load_tile<D, BM, THREADS>(sQ, qg, row0, qrows, tid);  // joins the first group
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) issue(st);

  float o[MT][DT][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int j = 0; j < DT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][j][e] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  const uint32_t sQa = smem_addr(sQ), sKa = smem_addr(sK), sVa = smem_addr(sV);
  int buf = 0;
  while (true) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    issue(buf == 0 ? STAGES - 1 : buf - 1);
    const int cur_n = tile_n[buf];

    const uint32_t kb = sKa + uint32_t(buf * BN * D) * 2u;
    const uint32_t vb = sVa + uint32_t(buf * BN * D) * 2u;

    // S = Q K^T
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int row = wrow + mt * 16 + (lane & 15);
        ldmatrix_x4(a[mt], sQa + uint32_t(swz<D>(row, kk * 2 + (lane >> 4))) * 2u);
      }
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) {
        uint32_t b[4];
        const int row = j * 16 + ((lane >> 4) << 3) + (lane & 7);
        ldmatrix_x4(b, kb + uint32_t(swz<D>(row, kk * 2 + ((lane >> 3) & 1))) * 2u);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(s[mt][2 * j], a[mt], b[0], b[1]);
          mma_bf16(s[mt][2 * j + 1], a[mt], b[2], b[3]);
        }
      }
    }

    if (cur_n < BN) {  // a block's short last tile: mask the columns past its end
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (j * 8 + 2 * t4 + (e & 1) >= cur_n) s[mt][j][e] = -INFINITY;
    }

    // Online softmax (each thread holds rows g and g+8 of each m16 tile; a row spans a quad).
    float alpha_[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < NT; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * hr], s[mt][j][2 * hr + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[mt][hr], mx * p.scale_log2);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = ex2(m[mt][hr] - m_use);
        m[mt][hr] = m_new;
        float rs = 0.0f;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          s[mt][j][2 * hr] = ex2(fmaf(s[mt][j][2 * hr], p.scale_log2, -m_use));
          s[mt][j][2 * hr + 1] = ex2(fmaf(s[mt][j][2 * hr + 1], p.scale_log2, -m_use));
          rs += s[mt][j][2 * hr] + s[mt][j][2 * hr + 1];
        }
        l[mt][hr] = l[mt][hr] * alpha + rs;
        alpha_[mt][hr] = alpha;
      }
    // O *= alpha, skipped when no row of the warp changed its max (alpha == 1 exactly).
    bool same = true;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) same = same && alpha_[mt][0] == 1.0f && alpha_[mt][1] == 1.0f;
    if (!__all_sync(0xffffffffu, same)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < DT; ++j) {
          o[mt][j][0] *= alpha_[mt][0];
          o[mt][j][1] *= alpha_[mt][0];
          o[mt][j][2] *= alpha_[mt][1];
          o[mt][j][3] *= alpha_[mt][1];
        }
    }

    // O += P V
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dj = 0; dj < D / 16; ++dj) {
        uint32_t b[4];
        const int row = kk * 16 + (((lane >> 3) & 1) << 3) + (lane & 7);
        ldmatrix_x4_trans(b, vb + uint32_t(swz<D>(row, dj * 2 + (lane >> 4))) * 2u);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(o[mt][2 * dj], a[mt], b[0], b[1]);
          mma_bf16(o[mt][2 * dj + 1], a[mt], b[2], b[3]);
        }
      }
    }
    if (++consumed == issued) break;
    buf = buf == STAGES - 1 ? 0 : buf + 1;
  }

  // O / l in bf16, lse = (m + log2 l) ln 2.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float lt = l[mt][hr];
      lt += __shfl_xor_sync(0xffffffffu, lt, 1);
      lt += __shfl_xor_sync(0xffffffffu, lt, 2);
      const int row = wrow + mt * 16 + g + 8 * hr;
      if (row >= qrows) continue;
      const float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
      __nv_bfloat16* orow = p.o + (q_head + row0 + row) * D;
#pragma unroll
      for (int j = 0; j < DT; ++j) {
        const __nv_bfloat162 v2 =
            __floats2bfloat162_rn(o[mt][j][2 * hr] * inv, o[mt][j][2 * hr + 1] * inv);
        *reinterpret_cast<__nv_bfloat162*>(orow + j * 8 + 2 * t4) = v2;
      }
      if (t4 == 0)
        p.lse[q_head + row0 + row] =
            lt > 0.0f ? (m[mt][hr] + log2f(lt)) * 0.69314718055994531f : -INFINITY;
    }
}

// Reference: one CTA per (query row, head); two passes over the row's active keys.
__global__ void reference_kernel(Params p, int head_dim, const int32_t* rows, float* o_ref,
                                 float* lse_ref) {
  extern __shared__ float sh[];  // q[head_dim], acc[head_dim], red[blockDim]
  float* qv = sh;
  float* acc = sh + head_dim;
  float* red = acc + head_dim;
  const int t = rows[blockIdx.x], h = blockIdx.y, tid = threadIdx.x, nth = blockDim.x;
  int qb = 0;
  while (p.q_off[qb + 1] <= t) ++qb;
  const int r = p.per_head ? h * p.n_q_blocks + qb : qb;
  const size_t qrow = size_t(h) * p.q_tokens + t;
  for (int d = tid; d < head_dim; d += nth) {
    qv[d] = __bfloat162float(p.q[qrow * head_dim + d]);
    acc[d] = 0.0f;
  }
  __syncthreads();
  const float scale = p.scale_log2 / 1.4426950408889634f;
  const int hkv = (p.head0 + h) / p.kv_group;
  auto score = [&](int j) {
    const __nv_bfloat16* kr = p.k + (size_t(hkv) * p.kv_tokens + j) * head_dim;
    float s = 0.0f;
    for (int d = 0; d < head_dim; ++d) s += qv[d] * __bfloat162float(kr[d]);
    return s * scale;
  };
  float mx = -INFINITY;
  for (int i = p.row_ptr[r]; i < p.row_ptr[r + 1]; ++i) {
    const int b = p.kv_blocks[i];
    for (int j = p.kv_off[b] + tid; j < p.kv_off[b + 1]; j += nth) mx = fmaxf(mx, score(j));
  }
  red[tid] = mx;
  __syncthreads();
  for (int w = nth / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] = fmaxf(red[tid], red[tid + w]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int i = p.row_ptr[r]; i < p.row_ptr[r + 1]; ++i) {
      const int b = p.kv_blocks[i];
      for (int j = p.kv_off[b] + tid; j < p.kv_off[b + 1]; j += nth) {
        const float e = expf(score(j) - mx);
        sum += e;
        const __nv_bfloat16* vr = p.v + (size_t(hkv) * p.kv_tokens + j) * head_dim;
        for (int d = 0; d < head_dim; ++d) atomicAdd(&acc[d], e * __bfloat162float(vr[d]));
      }
    }
  }
  red[tid] = sum;
  __syncthreads();
  for (int w = nth / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] += red[tid + w];
    __syncthreads();
  }
  sum = red[0];
  for (int d = tid; d < head_dim; d += nth)
    o_ref[qrow * head_dim + d] = sum > 0.0f ? acc[d] / sum : 0.0f;
  if (tid == 0) lse_ref[qrow] = sum > 0.0f ? mx + logf(sum) : -INFINITY;
}

__global__ void fill_kernel(__nv_bfloat16* d, size_t n, uint64_t seed, float amp) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xD1B54A32D192ED03ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    const float u = float(x & 0xFFFFFFu) / float(0xFFFFFF);  // [0, 1]
    d[i] = __float2bfloat16(amp * (2.0f * u - 1.0f));
  }
}

std::vector<int32_t> build_tiles(const BlockSparseLayout& l, int bm) {
  // Query tiles in decreasing order of work (KV tokens summed over heads) so the long rows start
  // first; ties keep token order.
  const int nq = l.n_q_blocks();
  std::vector<double> work(size_t(nq), 0.0);
  for (int hh = 0; hh < (l.per_head ? l.heads : 1); ++hh)
    for (int qb = 0; qb < nq; ++qb) {
      const size_t r = size_t(hh) * size_t(nq) + size_t(qb);
      for (int32_t i = l.row_ptr[r]; i < l.row_ptr[r + 1]; ++i) {
        const int32_t b = l.kv_blocks[size_t(i)];
        work[size_t(qb)] += l.kv_block_offsets[size_t(b) + 1] - l.kv_block_offsets[size_t(b)];
      }
    }
  std::vector<int> order(static_cast<size_t>(nq));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return work[size_t(a)] > work[size_t(b)]; });
  std::vector<int32_t> t;
  for (int qb : order)
    for (int32_t r0 = l.q_block_offsets[size_t(qb)]; r0 < l.q_block_offsets[size_t(qb) + 1];
         r0 += bm) {
      t.push_back(qb);
      t.push_back(r0);
    }
  return t;
}

template <class T>
Result<T*> to_device(const std::vector<T>& h) {
  T* d = nullptr;
  const size_t bytes = std::max<size_t>(1, h.size()) * sizeof(T);
  SPARSP_CUDA_TRY(cudaMalloc(&d, bytes));
  if (!h.empty()) {
    const cudaError_t e = cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      (void)cudaFree(d);
      return detail::cuda_error("cudaMemcpy(layout table)", e, __FILE__, __LINE__);
    }
  }
  return d;
}

Params make_params(const DeviceLayout& dl, const void* q, const void* k, const void* v, void* o,
                   float* lse) {
  Params p{};
  p.q = static_cast<const __nv_bfloat16*>(q);
  p.k = static_cast<const __nv_bfloat16*>(k);
  p.v = static_cast<const __nv_bfloat16*>(v);
  p.o = static_cast<__nv_bfloat16*>(o);
  p.lse = lse;
  p.q_off = dl.q_offsets;
  p.kv_off = dl.kv_offsets;
  p.row_ptr = dl.row_ptr;
  p.kv_blocks = dl.kv_blocks;
  p.n_q_blocks = dl.host.n_q_blocks();
  p.q_tokens = dl.host.q_tokens();
  p.kv_tokens = dl.host.kv_tokens();
  p.per_head = dl.host.per_head ? 1 : 0;
  p.scale_log2 = dl.host.scale() * 1.4426950408889634f;
  p.kv_base = dl.kv_base;
  p.kv_hstride = dl.kv_hstride;
  p.head0 = dl.host.head0;
  p.kv_group = std::max(1, dl.host.kv_group);
  return p;
}

template <int D, int MT, int WARPS, int BN, int MINB, int STAGES>
Status launch(const DeviceLayout& dl, Params p, cudaStream_t st) {
  constexpr int BM = 16 * MT * WARPS;
  static_assert(BM == 64 || BM == 128 || BM == 256, "tile tables exist for 64, 128, 256 rows");
  constexpr size_t smem = size_t(BM * D + 2 * STAGES * BN * D) * 2;
  auto kern = flash_fwd_kernel<D, MT, WARPS, BN, MINB, STAGES>;
  SPARSP_CUDA_TRY(
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int n_tiles = BM == 64 ? dl.n_tiles64 : BM == 128 ? dl.n_tiles128 : dl.n_tiles256;
  p.tiles = BM == 64 ? dl.tiles64 : BM == 128 ? dl.tiles128 : dl.tiles256;
  if (n_tiles == 0) return Ok{};
  const dim3 grid(unsigned(n_tiles), unsigned(dl.host.heads));
  kern<<<grid, 32 * WARPS, smem, st>>>(p);
  SPARSP_CUDA_TRY_LAUNCH("flash_fwd_kernel");
  return Ok{};
}

template <int D>
Status dispatch(const DeviceLayout& dl, const Params& p, cudaStream_t st, const KernelConfig& c) {
#define SPARSP_ATTN_CFG(W, M, N, B, S)                                                        \
  if (c.warps == W && c.m_tiles == M && c.kv_tile == N && c.min_blocks == B && c.stages == S) \
    return launch<D, M, W, N, B, S>(dl, p, st);
  SPARSP_ATTN_CFG(4, 2, 32, 1, 3)
  SPARSP_ATTN_CFG(4, 2, 32, 1, 2)
  SPARSP_ATTN_CFG(8, 1, 64, 1, 2)
  SPARSP_ATTN_CFG(8, 1, 64, 1, 3)
  SPARSP_ATTN_CFG(4, 1, 64, 1, 2)
  SPARSP_ATTN_CFG(4, 1, 64, 1, 3)
  SPARSP_ATTN_CFG(8, 1, 32, 2, 3)
  SPARSP_ATTN_CFG(4, 2, 16, 1, 3)
  SPARSP_ATTN_CFG(8, 2, 32, 1, 3)
  SPARSP_ATTN_CFG(4, 2, 64, 1, 3)
#undef SPARSP_ATTN_CFG
  return Error{"attention: kernel configuration " + to_string(c) + " is not built", 2};
}

}  // namespace

std::vector<KernelConfig> kernel_configs() {
  return {KernelConfig{4, 2, 32, 1, 3}, KernelConfig{4, 2, 32, 1, 2}, KernelConfig{8, 1, 64, 1, 2},
          KernelConfig{8, 1, 64, 1, 3}, KernelConfig{4, 1, 64, 1, 2}, KernelConfig{4, 1, 64, 1, 3},
          KernelConfig{8, 1, 32, 2, 3}, KernelConfig{4, 2, 16, 1, 3}, KernelConfig{8, 2, 32, 1, 3},
          KernelConfig{4, 2, 64, 1, 3}};
}

DeviceLayout::DeviceLayout(DeviceLayout&& o) noexcept { *this = std::move(o); }

DeviceLayout& DeviceLayout::operator=(DeviceLayout&& o) noexcept {
  if (this != &o) {
    release();
    host = std::move(o.host);
    q_offsets = o.q_offsets;
    kv_offsets = o.kv_offsets;
    row_ptr = o.row_ptr;
    kv_blocks = o.kv_blocks;
    tiles64 = o.tiles64;
    tiles128 = o.tiles128;
    tiles256 = o.tiles256;
    n_tiles64 = o.n_tiles64;
    n_tiles128 = o.n_tiles128;
    n_tiles256 = o.n_tiles256;
    kv_base = o.kv_base;
    kv_hstride = o.kv_hstride;
    o.kv_base = o.kv_hstride = nullptr;
    o.q_offsets = o.kv_offsets = o.row_ptr = o.kv_blocks = nullptr;
    o.tiles64 = o.tiles128 = o.tiles256 = nullptr;
    o.n_tiles64 = o.n_tiles128 = o.n_tiles256 = 0;
  }
  return *this;
}

DeviceLayout::~DeviceLayout() { release(); }

void DeviceLayout::release() {
  // Destructor path: a failing cudaFree cannot be reported; the pointers are dropped either way.
  for (int32_t* p : {q_offsets, kv_offsets, row_ptr, kv_blocks, tiles64, tiles128, tiles256})
    if (p) (void)cudaFree(p);
  q_offsets = kv_offsets = row_ptr = kv_blocks = tiles64 = tiles128 = tiles256 = nullptr;
  for (int64_t* p : {kv_base, kv_hstride})
    if (p) (void)cudaFree(p);
  kv_base = kv_hstride = nullptr;
}

Result<DeviceLayout> upload_layout(const BlockSparseLayout& layout) {
  SPARSP_TRY(check_layout(layout));
  DeviceLayout d;
  d.host = layout;
  auto put = [&](const std::vector<int32_t>& v, int32_t*& dst) -> Status {
    auto r = to_device(v);
    if (!r) return r.error();
    dst = *r;
    return Ok{};
  };
  SPARSP_TRY(put(layout.q_block_offsets, d.q_offsets));
  SPARSP_TRY(put(layout.kv_block_offsets, d.kv_offsets));
  SPARSP_TRY(put(layout.row_ptr, d.row_ptr));
  SPARSP_TRY(put(layout.kv_blocks, d.kv_blocks));
  const auto t64 = build_tiles(layout, 64), t128 = build_tiles(layout, 128),
             t256 = build_tiles(layout, 256);
  SPARSP_TRY(put(t64, d.tiles64));
  SPARSP_TRY(put(t128, d.tiles128));
  SPARSP_TRY(put(t256, d.tiles256));
  d.n_tiles64 = int(t64.size() / 2);
  d.n_tiles128 = int(t128.size() / 2);
  d.n_tiles256 = int(t256.size() / 2);
  if (!layout.kv_block_base.empty()) {
    auto b = to_device(layout.kv_block_base);
    if (!b) return b.error();
    d.kv_base = *b;
    auto hs = to_device(layout.kv_head_stride);
    if (!hs) return hs.error();
    d.kv_hstride = *hs;
  }
  return Result<DeviceLayout>(std::move(d));
}

Status attention_forward(const DeviceLayout& dl, const void* q, const void* k, const void* v,
                         void* o, float* lse, void* stream, const KernelConfig& config) {
  const Params p = make_params(dl, q, k, v, o, lse);
  const auto st = static_cast<cudaStream_t>(stream);
  switch (dl.host.head_dim) {
    case 64:
      return dispatch<64>(dl, p, st, config);
    case 128:
      return dispatch<128>(dl, p, st, config);
    default:
      return Error{"attention: head_dim " + std::to_string(dl.host.head_dim) +
                       " is not supported by the sparsp attention kernel (64, 128)",
                   2};
  }
}

Status attention_reference(const DeviceLayout& dl, const void* q, const void* k, const void* v,
                           float* o_ref, float* lse_ref, const std::vector<int>& q_blocks,
                           void* stream) {
  const int hd = dl.host.head_dim;
  if (hd < 1 || hd > 256) return Error{"attention reference: head_dim outside 1..256", 2};
  std::vector<int32_t> rows;
  const int nq = dl.host.n_q_blocks();
  auto add = [&](int qb) {
    for (int32_t t = dl.host.q_block_offsets[size_t(qb)];
         t < dl.host.q_block_offsets[size_t(qb) + 1]; ++t)
      rows.push_back(t);
  };
  if (q_blocks.empty())
    for (int qb = 0; qb < nq; ++qb) add(qb);
  else
    for (int qb : q_blocks) {
      if (qb < 0 || qb >= nq)
        return Error{"attention reference: query block " + std::to_string(qb) + " out of range", 2};
      add(qb);
    }
  if (rows.empty()) return Ok{};
  auto dr = to_device(rows);
  if (!dr) return dr.error();
  const Params p = make_params(dl, q, k, v, nullptr, nullptr);
  const auto st = static_cast<cudaStream_t>(stream);
  constexpr int kThreads = 128;
  const size_t smem = (2 * size_t(hd) + kThreads) * sizeof(float);
  reference_kernel<<<dim3(unsigned(rows.size()), unsigned(dl.host.heads)), kThreads, smem, st>>>(
      p, hd, *dr, o_ref, lse_ref);
  const cudaError_t le = cudaGetLastError();
  const cudaError_t se = le == cudaSuccess ? cudaStreamSynchronize(st) : le;
  (void)cudaFree(*dr);
  if (le != cudaSuccess)
    return detail::cuda_error("launch of reference_kernel", le, __FILE__, __LINE__);
  if (se != cudaSuccess)
    return detail::cuda_error("cudaStreamSynchronize(reference)", se, __FILE__, __LINE__);
  return Ok{};
}

Status fill_uniform_bf16(void* data, size_t n, uint64_t seed, float amplitude, void* stream) {
  if (n == 0) return Ok{};
  const size_t blocks = std::min<size_t>((n + 255) / 256, 65536);
  fill_kernel<<<unsigned(blocks), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<__nv_bfloat16*>(data), n, seed, amplitude);
  SPARSP_CUDA_TRY_LAUNCH("fill_kernel");
  return Ok{};
}

}  // namespace sparsp::replay::attention
