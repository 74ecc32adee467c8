#pragma once
// sparsp's own block-sparse attention forward (issue 15, items 2 and 7): FlashAttention-2 style
// (Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
// Algorithm 1): per (head, query tile) one CTA streams the tile's KV tiles through shared memory
// (cp.async, two stages), computes S = Q K^T and O += P V on the tensor cores (mma.sync
// m16n8k16 bf16 with ldmatrix), keeps the softmax online (running row max m and sum l, fp32),
// and writes O / l in bf16 and the row's log-sum-exp in fp32.
//
// Private header with a plain host API: no CUDA type appears here; device pointers are `void*`
// (bf16 elements as their 16-bit patterns), a stream is a `void*` holding a cudaStream_t.
// The host-side parts (layout checks, FLOP count, tolerance, comparison) are in
// attention_host.cpp and build without CUDA; the kernels (attention.cu) only with it.
//
// Shapes. Q is [heads, q_tokens, head_dim], K and V are [heads, kv_tokens, head_dim], all bf16,
// row-major and contiguous. O is [heads, q_tokens, head_dim] bf16; LSE is [heads, q_tokens] fp32,
// natural log: lse = log(sum_j exp(scale * q.k_j)) over the row's active keys (-inf where a row
// has none; its O is then 0). These are what ring attention merges partial outputs with:
// O = sum_i exp(lse_i - lse) O_i, lse = log sum_i exp(lse_i).
#include <cstdint>
#include <string>
#include <vector>

#include "sparsp/status.hpp"

namespace sparsp::replay::attention {

/// Which (query block, KV block, head) triples are active.
/// Blocks are token ranges given by offsets: block b of the queries is tokens
/// [q_block_offsets[b], q_block_offsets[b+1]). Any positive sizes work (the kernel masks partial
/// tiles); the patterns use full blocks of 64..384 tokens and a shorter last block.
/// The KV lists are CSR: query block qb (row r = qb when shared across heads, r = h * n_q_blocks
/// + qb when per_head) reads KV blocks kv_blocks[row_ptr[r] .. row_ptr[r+1]). A list may be empty
/// (that row's output is 0, its LSE -inf). A KV block may appear at most once per list.
struct BlockSparseLayout {
  int heads = 0;
  int head_dim = 0;                       ///< 64 or 128 (head_dim_supported)
  std::vector<int32_t> q_block_offsets;   ///< n_q_blocks + 1 entries, 0 first, strictly rising
  std::vector<int32_t> kv_block_offsets;  ///< n_kv_blocks + 1 entries, 0 first, strictly rising
  bool per_head = false;                  ///< lists per head (true) or shared by all heads
  std::vector<int32_t> row_ptr;           ///< n_q_blocks + 1 (shared) or heads*n_q_blocks + 1
  std::vector<int32_t> kv_blocks;         ///< row_ptr.back() entries, each < n_kv_blocks
  float softmax_scale = 0.0f;             ///< 0 means 1/sqrt(head_dim)
  /// Paged K/V (the replay's KV slots): when non-empty (n_kv_blocks entries each), KV block b's
  /// K for KV head g starts at element kv_block_base[b] + g * kv_head_stride[b] of the `k`
  /// pointer, its V right after it (kv_block_offsets[b+1] - kv_block_offsets[b] rows later), and
  /// `v` is unused; the 16-byte alignment of every start is the caller's. Empty: K and V are
  /// [kv_heads, kv_tokens, head_dim] as above.
  std::vector<int64_t> kv_block_base;
  std::vector<int64_t> kv_head_stride;
  /// Query head h of the launch (0 <= h < heads; Q, O and LSE are indexed by it) reads KV head
  /// (head0 + h) / kv_group: grouped-query attention with kv_group query heads per KV head,
  /// over a head range that starts at head0. Contiguous K/V then has heads / kv_group heads.
  int head0 = 0;
  int kv_group = 1;

  int n_q_blocks() const { return q_block_offsets.empty() ? 0 : int(q_block_offsets.size()) - 1; }
  int n_kv_blocks() const {
    return kv_block_offsets.empty() ? 0 : int(kv_block_offsets.size()) - 1;
  }
  int q_tokens() const { return q_block_offsets.empty() ? 0 : q_block_offsets.back(); }
  int kv_tokens() const { return kv_block_offsets.empty() ? 0 : kv_block_offsets.back(); }
  float scale() const;  ///< softmax_scale, or 1/sqrt(head_dim) when 0
};

/// head_dim values the kernel is built for: 64 and 128.
bool head_dim_supported(int head_dim);

/// Checks a layout. Errors (exit 2), naming `name` and the place:
///   "<name>:/head_dim: head_dim 96 is not supported by the sparsp attention kernel (64, 128)";
///   offsets not starting at 0 / not rising, row_ptr of the wrong size or not non-decreasing,
///   a KV block index out of range or repeated in one list, heads < 1.
Status check_layout(const BlockSparseLayout& layout, const std::string& name = "<attention>");

/// FLOPs of the active triples: sum over (head, query block, KV block) of 4 * Bq * Bk * head_dim
/// (2 for Q K^T, 2 for P V; softmax not counted), the convention of FlashAttention's benchmarks.
double active_flops(const BlockSparseLayout& layout);

/// One kernel configuration: `warps` warps per CTA, each owning `m_tiles` x 16 query rows
/// (query tile BM = 16 * m_tiles * warps rows: 64, 128 or 256), KV tiles of `kv_tile` tokens.
struct KernelConfig {
  int warps = 4;
  int m_tiles = 2;
  int kv_tile = 32;
  int min_blocks = 1;  ///< __launch_bounds__ CTAs per SM (caps registers at 64K / (threads * it))
  int stages = 3;      ///< shared-memory stages of K and V (2 or 3)
};
/// The default, 4 warps x 32 rows (BM 128), KV tiles of 32, 3 stages, was the fastest of
/// kernel_configs() on the H200 (bench/results/attention-h200.json, BM_attention_config: 313.6
/// TFLOP/s dense at block 128, 2 heads; the next, 4 warps x 16 rows with KV tiles of 64, 276.8).
/// The configurations instantiated in attention.cu (the default, KernelConfig{}, is first).
std::vector<KernelConfig> kernel_configs();
std::string to_string(const KernelConfig& c);

/// The layout's tables on the device (RAII; move-only). Created by upload_layout.
class DeviceLayout {
 public:
  DeviceLayout() = default;
  DeviceLayout(const DeviceLayout&) = delete;
  DeviceLayout& operator=(const DeviceLayout&) = delete;
  DeviceLayout(DeviceLayout&& o) noexcept;
  DeviceLayout& operator=(DeviceLayout&& o) noexcept;
  ~DeviceLayout();

  BlockSparseLayout host;        ///< the layout it was made from
  int32_t* q_offsets = nullptr;  ///< device copies of the tables
  int32_t* kv_offsets = nullptr;
  int32_t* row_ptr = nullptr;
  int32_t* kv_blocks = nullptr;
  int32_t* tiles64 = nullptr;   ///< (query block, first token) per 64-row query tile
  int32_t* tiles128 = nullptr;  ///< the same for 128-row query tiles
  int32_t* tiles256 = nullptr;  ///< the same for 256-row query tiles
  int64_t* kv_base = nullptr;   ///< paged K/V tables (nullptr: contiguous)
  int64_t* kv_hstride = nullptr;
  int n_tiles64 = 0;
  int n_tiles128 = 0;
  int n_tiles256 = 0;

 private:
  void release();
};

/// Checks `layout` (check_layout) and copies its tables to the current device.
/// Errors: check_layout's (exit 2); a CUDA error (exit 1).
Result<DeviceLayout> upload_layout(const BlockSparseLayout& layout);

/// O, LSE = block-sparse attention(Q, K, V) over layout's active triples, on `stream`
/// (a cudaStream_t, nullptr for the default stream); asynchronous.
/// q, k, v, o: device bf16 arrays of the shapes above; lse: device fp32 [heads, q_tokens].
/// Every row of every query block is written. REQUIRES: no aliasing of o/lse with q/k/v.
/// Errors: unsupported head_dim or config (exit 2, never a launch); a CUDA error (exit 1).
Status attention_forward(const DeviceLayout& layout, const void* q, const void* k, const void* v,
                         void* o, float* lse, void* stream = nullptr,
                         const KernelConfig& config = {});

/// The reference: a separate, simple kernel (one CTA per query row; fp32 dot products from the
/// bf16 inputs, a two-pass masked softmax with expf, fp32 P V, no rounding to bf16 anywhere).
/// Writes o_ref [heads, q_tokens, head_dim] fp32 and lse_ref [heads, q_tokens] for the rows of
/// `q_blocks` (all query blocks when empty); other rows are left untouched.
/// Any head_dim from 1 to 256. Errors: a CUDA error (exit 1); head_dim outside 1..256 (exit 2).
Status attention_reference(const DeviceLayout& layout, const void* q, const void* k, const void* v,
                           float* o_ref, float* lse_ref, const std::vector<int>& q_blocks = {},
                           void* stream = nullptr);

/// Device: fills n bf16 values with deterministic pseudo-random values uniform in
/// [-amplitude, amplitude] (a hash of (seed, index); never NaN or Inf), rounded to bf16.
Status fill_uniform_bf16(void* data, size_t n, uint64_t seed, float amplitude,
                         void* stream = nullptr);

/// The tolerance of the kernel's bf16 output against the fp32 reference, per element:
///   |O - O_ref| <= 2^-7 * max|V| + 2 * dS * max|V|,   |lse - lse_ref| <= dS + 2^-20 (1 + |lse|),
/// where dS = 2 * head_dim * 2^-24 * scale * head_dim * max|Q| * max|K|.
/// Derivation (u = 2^-8, the unit roundoff of bf16's 8-bit significand, round to nearest):
///  - the kernel rounds P to bf16 before P V: |dP_j| <= u P_j, so |dO| <= u sum_j P_j |V_j| / l
///    <= u max|V| (the normalizer l is summed from the unrounded fp32 P);
///  - it rounds O to bf16: another u |O| <= u max|V|; together 2u = 2^-7;
///  - scores: both sides sum head_dim products in fp32 in different orders; each is within
///    gamma_D sum_i |q_i k_i| scale <= head_dim 2^-24 head_dim max|Q| max|K| scale of the exact
///    score (Higham, Accuracy and Stability, Thm 3.1, gamma_n ~ n 2^-24), so two differ by dS;
///    a score shift dS changes each P_j/l by at most a factor exp(2 dS) ~ 1 + 2 dS, hence O by
///    2 dS max|V|, and lse by dS; ex2.approx, the log2(e) product and the final log add a few
///    fp32 ulps of |lse| (2^-20 (1 + |lse|)).
/// fp32 accumulation of P V (<= 2^-24 per add of terms of size <= max|V|/l) is far below these.
struct Tolerance {
  double output_abs = 0;
  double lse_abs_base = 0;  ///< dS; the lse bound is lse_abs_base + 2^-20 (1 + |lse_ref|)
};
Tolerance derive_tolerance(int head_dim, double scale, double max_abs_q, double max_abs_k,
                           double max_abs_v);

/// The outcome of comparing one run with the reference over some rows.
struct CheckResult {
  size_t checked_rows = 0;
  double max_abs_error = 0;  ///< over O
  double max_lse_error = 0;
  size_t bad = 0;        ///< elements over tolerance, NaN included
  size_t unwritten = 0;  ///< NaN/Inf outputs (from the poisoned buffer) in checked rows
  int worst_head = -1, worst_token = -1;
  bool passed() const { return bad == 0 && unwritten == 0; }
};

/// Host: compares o (bf16 bits, [heads, q_tokens, head_dim]) and lse with o_ref / lse_ref over
/// the given token rows of every head (`rows`: token indices; all rows when empty).
/// A row whose lse_ref is -inf must have O == 0 and lse == -inf.
CheckResult compare_with_reference(int heads, int q_tokens, int head_dim,
                                   const std::vector<uint16_t>& o, const std::vector<float>& lse,
                                   const std::vector<float>& o_ref,
                                   const std::vector<float>& lse_ref, const Tolerance& tol,
                                   const std::vector<int>& rows = {});

/// Host versions for the host backend (same contract as attention_forward / _reference, arrays
/// in host memory, bf16 as 16-bit patterns): the forward keeps FlashAttention's recurrence (one
/// KV block at a time, online max and sum in fp32, P rounded to bf16 before P V, O rounded to
/// bf16); the reference is two-pass in double. Single-threaded; the replay bounds the work it
/// hands them (replay/README.md, "Real compute").
void attention_forward_host(const BlockSparseLayout& layout, const uint16_t* q, const uint16_t* k,
                            const uint16_t* v, uint16_t* o, float* lse);
void attention_reference_host(const BlockSparseLayout& layout, const uint16_t* q, const uint16_t* k,
                              const uint16_t* v, float* o_ref, float* lse_ref,
                              const std::vector<int>& q_blocks = {});

/// bf16 <-> float on the host (round to nearest even; NaN stays NaN).
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace sparsp::replay::attention
