// GPU correctness test of sparsp's block-sparse attention kernel (replay/attention.cu) against
// its fp32 reference kernel, for every built kernel configuration and head_dim 64 and 128, on
// layouts with variable block sizes (64..384 and a partial last block), per-head and shared KV
// lists, an empty list, and non-multiple-of-64 KV blocks. Exit 77 (CTest skip) without a GPU.
//
// What must hold (attention.cuh, derive_tolerance): every output element within
// 2^-7 max|V| + 2 dS max|V| of the reference, every lse within dS + 2^-20 (1 + |lse|), every row
// written (outputs are poisoned with NaN first), rows without KV blocks O = 0 and lse = -inf.
// And the check must be able to fail: a kernel run on a K with one block overwritten far outside
// the content's range must be refused.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../../replay/attention.cuh"

namespace at = sparsp::replay::attention;

namespace {

int failures = 0;

#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    const auto& r_ = (expr);                                                    \
    if (!r_) {                                                                  \
      std::fprintf(stderr, "FAIL %s: %s\n", #expr, r_.error().message.c_str()); \
      ++failures;                                                               \
      return;                                                                   \
    }                                                                           \
  } while (0)
#define CHECK_CUDA(expr)                                                    \
  do {                                                                      \
    cudaError_t e_ = (expr);                                                \
    if (e_ != cudaSuccess) {                                                \
      std::fprintf(stderr, "FAIL %s: %s\n", #expr, cudaGetErrorString(e_)); \
      ++failures;                                                           \
      return;                                                               \
    }                                                                       \
  } while (0)

// Block offsets: `sizes` then a partial block of `tail` tokens (0: none).
std::vector<int32_t> offsets(const std::vector<int>& sizes, int tail) {
  std::vector<int32_t> o{0};
  for (int s : sizes) o.push_back(o.back() + s);
  if (tail > 0) o.push_back(o.back() + tail);
  return o;
}

// Random lists of about `density` of the KV blocks (always the diagonal-ish block qb % nkv),
// with row `empty_row` left empty.
at::BlockSparseLayout make_layout(int heads, int head_dim, std::vector<int32_t> qo,
                                  std::vector<int32_t> ko, bool per_head, double density,
                                  int empty_row, uint32_t seed) {
  at::BlockSparseLayout l;
  l.heads = heads;
  l.head_dim = head_dim;
  l.q_block_offsets = std::move(qo);
  l.kv_block_offsets = std::move(ko);
  l.per_head = per_head;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int nq = l.n_q_blocks(), nkv = l.n_kv_blocks();
  const int rows = (per_head ? heads : 1) * nq;
  l.row_ptr.push_back(0);
  for (int r = 0; r < rows; ++r) {
    if (r != empty_row)
      for (int b = 0; b < nkv; ++b)
        if (b == (r % nq) % nkv || u(rng) < density) l.kv_blocks.push_back(b);
    l.row_ptr.push_back(int32_t(l.kv_blocks.size()));
  }
  return l;
}

void run_case(const std::string& name, const at::BlockSparseLayout& l, bool corrupt) {
  const size_t nq = size_t(l.heads) * l.q_tokens() * l.head_dim;
  const size_t nk = size_t(l.heads) * l.kv_tokens() * l.head_dim;
  const size_t nrows = size_t(l.heads) * l.q_tokens();
  void *q, *k, *v, *o;
  float *lse, *oref, *lref;
  CHECK_CUDA(cudaMalloc(&q, nq * 2));
  CHECK_CUDA(cudaMalloc(&k, nk * 2));
  CHECK_CUDA(cudaMalloc(&v, nk * 2));
  CHECK_CUDA(cudaMalloc(&o, nq * 2));
  CHECK_CUDA(cudaMalloc(&lse, nrows * 4));
  CHECK_CUDA(cudaMalloc(&oref, nq * 4));
  CHECK_CUDA(cudaMalloc(&lref, nrows * 4));
  // Amplitudes: |Q|, |K| <= 2 make scores of several units (a peaked softmax), |V| <= 1.
  const double aq = 2.0, ak = 2.0, av = 1.0;
  CHECK_OK(at::fill_uniform_bf16(q, nq, 11, float(aq)));
  CHECK_OK(at::fill_uniform_bf16(k, nk, 12, float(ak)));
  CHECK_OK(at::fill_uniform_bf16(v, nk, 13, float(av)));
  auto dl = at::upload_layout(l);
  CHECK_OK(dl);
  CHECK_OK(at::attention_reference(*dl, q, k, v, oref, lref));
  std::vector<float> o_ref(nq), lse_ref(nrows);
  CHECK_CUDA(cudaMemcpy(o_ref.data(), oref, nq * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(lse_ref.data(), lref, nrows * 4, cudaMemcpyDeviceToHost));
  if (corrupt) {
    // K block 1 of head 0 overwritten with 60.0 (30x the content's range) in its first 32 rows.
    std::vector<uint16_t> big(size_t(32) * l.head_dim, at::float_to_bf16(60.0f));
    CHECK_CUDA(cudaMemcpy(static_cast<uint16_t*>(k) + size_t(l.kv_block_offsets[1]) * l.head_dim,
                          big.data(), big.size() * 2, cudaMemcpyHostToDevice));
  }
  const at::Tolerance tol = at::derive_tolerance(l.head_dim, l.scale(), aq, ak, av);
  for (const at::KernelConfig& c : at::kernel_configs()) {
    CHECK_CUDA(cudaMemset(o, 0xFF, nq * 2));  // bf16 0xFFFF is NaN
    CHECK_CUDA(cudaMemset(lse, 0xFF, nrows * 4));
    CHECK_OK(at::attention_forward(*dl, q, k, v, o, lse, nullptr, c));
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> oh(nq);
    std::vector<float> lh(nrows);
    CHECK_CUDA(cudaMemcpy(oh.data(), o, nq * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(lh.data(), lse, nrows * 4, cudaMemcpyDeviceToHost));
    const at::CheckResult r =
        at::compare_with_reference(l.heads, l.q_tokens(), l.head_dim, oh, lh, o_ref, lse_ref, tol);
    const bool ok = corrupt ? !r.passed() : r.passed();
    std::printf(
        "%s %-28s %-16s rows %zu max_abs_err %.3g (tol %.3g) max_lse_err %.3g bad %zu "
        "unwritten %zu%s\n",
        ok ? "ok  " : "FAIL", name.c_str(), at::to_string(c).c_str(), r.checked_rows,
        r.max_abs_error, tol.output_abs, r.max_lse_error, r.bad, r.unwritten,
        corrupt ? " (corrupted K: must fail)" : "");
    if (!ok) ++failures;
  }
  cudaFree(q);
  cudaFree(k);
  cudaFree(v);
  cudaFree(o);
  cudaFree(lse);
  cudaFree(oref);
  cudaFree(lref);
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  // Unsupported head_dim: an error value (exit 2) naming head_dim, never a launch.
  {
    at::BlockSparseLayout bad =
        make_layout(1, 96, offsets({64}, 0), offsets({64}, 0), false, 1, -1, 1);
    auto r = at::upload_layout(bad);
    const bool ok = !r && r.error().exit_code == 2 &&
                    r.error().message.find("head_dim 96 is not supported") != std::string::npos;
    std::printf("%s head_dim 96 refused: %s\n", ok ? "ok  " : "FAIL",
                r ? "(accepted)" : r.error().message.c_str());
    if (!ok) ++failures;
  }
  for (int hd : {64, 128}) {
    const std::string d = "d" + std::to_string(hd);
    // Blocks of 128 with a partial last block of 77 tokens; per-head lists, one empty.
    run_case(d + " b128+77 per-head 40%",
             make_layout(3, hd, offsets({128, 128, 128, 128, 128}, 77),
                         offsets({128, 128, 128, 128, 128}, 77), true, 0.4, 4, 7),
             false);
    // Blocks of 384 and a 1-token last query block; KV blocks of 96 and 100 tokens (masked
    // short tiles in every block) and a 5-token tail; shared lists.
    run_case(d + " q384+1 kv96/100+5 shared",
             make_layout(2, hd, offsets({384, 384}, 1), offsets({96, 100, 96, 100, 96, 100}, 5),
                         false, 0.5, -1, 8),
             false);
    // Dense, blocks of 64 with a 200-token query tail (a 128-row tile split across blocks).
    run_case(d + " b64 dense, q tail 200",
             make_layout(2, hd, offsets({64, 64, 64, 64}, 200), offsets({64, 64, 64, 64}, 0), false,
                         1.0, -1, 9),
             false);
    // The check must fail on a corrupted K block.
    run_case(d + " corrupted K block",
             make_layout(1, hd, offsets({128, 128, 128}, 0), offsets({128, 128, 128}, 0), false,
                         1.0, -1, 10),
             true);
  }
  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
