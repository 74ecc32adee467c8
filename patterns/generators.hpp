#pragma once
// Mask generators (private). Rules and sources in generators.cpp and patterns/README.md.
#include <array>
#include <string>

#include "pattern_impl.hpp"

namespace sparsp::patterns {

BlockMask dense_mask(const BlockLayout& L);
/// Causal (LLM-style) block mask: query block q attends to KV blocks k <= q (lower triangle with
/// the diagonal; the diagonal block is itself masked token by token inside the kernel, as
/// FlashAttention's causal=True). Density (n + 1) / (2n) for n blocks.
BlockMask causal_mask(const BlockLayout& L);
Result<BlockMask> sta_mask(const BlockLayout& L, std::array<int, 3> window, bool text_dense,
                           const std::string& src);
Result<BlockMask> radial_mask(const BlockLayout& L, double decay, bool wan_variant, bool sink,
                              bool text_dense, const std::string& src);
Result<BlockMask> svg_mask(const BlockLayout& L, bool spatial, double band_frames, bool sink,
                           bool text_dense, const std::string& src);

/// Keeps, per row of `scores` ([rows x cols] row-major over the columns `cols_idx`), the top-k
/// (ties: lower column first) into `out` row `rows_idx[r]`.
void select_topk(const float* scores, int rows, int cols, int k, const int* rows_idx,
                 const int* cols_idx, BlockMask& out);
/// Keeps per row the smallest set of highest-probability columns whose softmax mass reaches
/// `threshold` (SpargeAttn-style cumulative selection).
void select_cdf(const float* scores, int rows, int cols, double threshold, const int* rows_idx,
                const int* cols_idx, BlockMask& out);

}  // namespace sparsp::patterns
