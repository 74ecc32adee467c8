// Score-based selection (topk / cdf), the seeded synthetic score model and the random pattern.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "dynamic.hpp"

namespace sparsp::patterns {

void select_topk(const float* scores, int rows, int cols, int k, const int* rows_idx,
                 const int* cols_idx, BlockMask& out) {
  k = std::clamp(k, 0, cols);
  std::vector<int> idx(static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const float* s = scores + static_cast<size_t>(r) * cols;
    std::iota(idx.begin(), idx.end(), 0);
    auto better = [s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
    if (k < cols) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
    uint64_t* row = out.row(rows_idx[r]);
    for (int i = 0; i < k; ++i) {
      const int c = cols_idx[idx[static_cast<size_t>(i)]];
      row[c >> 6] |= uint64_t{1} << (c & 63);
    }
  }
}

void select_cdf(const float* scores, int rows, int cols, double threshold, const int* rows_idx,
                const int* cols_idx, BlockMask& out) {
  std::vector<int> idx(static_cast<size_t>(cols));
  std::vector<double> p(static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const float* s = scores + static_cast<size_t>(r) * cols;
    const float mx = *std::max_element(s, s + cols);
    double z = 0;
    for (int c = 0; c < cols; ++c) z += p[static_cast<size_t>(c)] = std::exp(static_cast<double>(s[c] - mx));
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    uint64_t* row = out.row(rows_idx[r]);
    double mass = 0;
    for (int i = 0; i < cols; ++i) {
      const int c = idx[static_cast<size_t>(i)];
      const int col = cols_idx[c];
      row[col >> 6] |= uint64_t{1} << (col & 63);
      mass += p[static_cast<size_t>(c)] / z;
      if (mass >= threshold - 1e-12) break;
    }
  }
}

// ---- random ----------------------------------------------------------------------------------

RandomPattern::RandomPattern(ModelSpec m, BlockLayout l, int steps, int layers, double density,
                             uint64_t seed)
    : LazyPattern(std::move(m), std::move(l), steps, layers, 0, true, ""), density_(density),
      seed_(seed) {
  heads_ = model_.heads;
}

std::string RandomPattern::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "random density %g seed %llu block %d", density_,
                static_cast<unsigned long long>(seed_), layout_.block_tokens);
  return buf;
}

void RandomPattern::generate(int /*step*/, int layer, std::vector<BlockMask>& out) {
  // Bit (q, k) of head h of layer l is set when U(mix64(seed, l, h, q, k)) < density: every bit
  // independent, the same for every step.
  const int nb = layout_.num_blocks;
  for (int h = 0; h < heads_; ++h) {
    const uint64_t base = mix64(seed_ ^ mix64((static_cast<uint64_t>(layer) << 32) | static_cast<uint64_t>(h)));
    BlockMask& m = out[static_cast<size_t>(h)];
    for (int q = 0; q < nb; ++q)
      for (int k = 0; k < nb; ++k)
        if (unit_from(mix64(base + static_cast<uint64_t>(q) * static_cast<uint64_t>(nb) + static_cast<uint64_t>(k))) < density_)
          m.set(q, k);
  }
}

// ---- synthetic scores -------------------------------------------------------------------------

SyntheticScorePattern::SyntheticScorePattern(ModelSpec m, BlockLayout l, int steps, int layers,
                                             bool cdf, int topk, double threshold, double noise,
                                             double length, uint64_t seed, bool text_dense)
    : LazyPattern(std::move(m), std::move(l), steps, layers, 0, false, ""), cdf_(cdf), topk_(topk),
      threshold_(threshold), noise_(noise), length_(length), seed_(seed), text_dense_(text_dense) {
  heads_ = model_.heads;
  const BlockLayout& L = layout_;
  if (L.order == TokenOrder::tile) {
    extent_ = {static_cast<float>(L.tile[0]), static_cast<float>(L.tile[1]), static_cast<float>(L.tile[2])};
  } else {
    const int W = L.grid[2], H = L.grid[1], B = L.block_tokens;
    extent_ = {1.0f, static_cast<float>(std::clamp(B / W, 1, H)), static_cast<float>(std::min(B, W))};
  }
  rows_.resize(static_cast<size_t>(L.num_video_blocks));
  std::iota(rows_.begin(), rows_.end(), L.first_video_block);
  scores_.resize(static_cast<size_t>(L.num_video_blocks) * L.num_video_blocks);
}

std::string SyntheticScorePattern::describe() const {
  char buf[200];
  if (cdf_)
    std::snprintf(buf, sizeof buf, "cdf threshold %g synthetic seed %llu block %d", threshold_,
                  static_cast<unsigned long long>(seed_), layout_.block_tokens);
  else
    std::snprintf(buf, sizeof buf, "topk %d synthetic seed %llu block %d", topk_,
                  static_cast<unsigned long long>(seed_), layout_.block_tokens);
  return buf;
}

void SyntheticScorePattern::generate(int step, int layer, std::vector<BlockMask>& out) {
  // score(q, k) = -sum_d |c_q,d - c_k,d| / l_d + noise * (2 U - 1), where c are block centres in
  // latent tokens, l_d = length * extent_d * exp(U(-0.5, 0.5)) per (layer, head, d) and U a
  // counter-based uniform of (seed, step, layer, head, q, k): local attention whose exact
  // support changes from step to step, as the VSA / SpargeAttn selections do.
  const BlockLayout& L = layout_;
  const int nv = L.num_video_blocks;
  for (int h = 0; h < heads_; ++h) {
    std::array<float, 3> inv{};
    for (int d = 0; d < 3; ++d) {
      const uint64_t r = mix64(seed_ ^ mix64((static_cast<uint64_t>(layer) << 40) ^ (static_cast<uint64_t>(h) << 8) ^ static_cast<uint64_t>(d) ^ 0xabcdefull));
      inv[d] = static_cast<float>(1.0 / (length_ * extent_[d] * std::exp(unit_from(r) - 0.5)));
    }
    const uint64_t base = mix64(seed_ ^ mix64((static_cast<uint64_t>(step) << 42) ^ (static_cast<uint64_t>(layer) << 21) ^ static_cast<uint64_t>(h)));
    const float amp = static_cast<float>(noise_);
    for (int q = 0; q < nv; ++q) {
      const auto& cq = L.block_center[static_cast<size_t>(q)];
      float* s = scores_.data() + static_cast<size_t>(q) * nv;
      for (int k = 0; k < nv; ++k) {
        const auto& ck = L.block_center[static_cast<size_t>(k)];
        const uint64_t r = mix64(base + static_cast<uint64_t>(q) * static_cast<uint64_t>(nv) + static_cast<uint64_t>(k));
        const float u = static_cast<float>(r >> 40) * 0x1.0p-24f;
        s[k] = -(std::fabs(cq[0] - ck[0]) * inv[0] + std::fabs(cq[1] - ck[1]) * inv[1] +
                 std::fabs(cq[2] - ck[2]) * inv[2]) +
               amp * (2 * u - 1);
      }
    }
    BlockMask& m = out[static_cast<size_t>(h)];
    if (cdf_) select_cdf(scores_.data(), nv, nv, threshold_, rows_.data(), rows_.data(), m);
    else select_topk(scores_.data(), nv, nv, topk_, rows_.data(), rows_.data(), m);
    if (text_dense_)
      for (int b = 0; b < L.num_blocks; ++b)
        if (L.is_text(b)) {
          m.set_row(b);
          m.set_col(b);
        }
  }
}

}  // namespace sparsp::patterns
