// Score-based selection (topk / cdf), the seeded synthetic score model and the random pattern.
#include "dynamic.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace sparsp::patterns {

namespace {
// Order-preserving key of -score in the high half, the column in the low half: ascending keys are
// descending scores, ties to the lower column.
inline uint64_t topk_key(float score, int c) {
  const float neg = -score + 0.0f;  // + 0.0f folds -0 into +0
  uint32_t u;
  std::memcpy(&u, &neg, 4);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(u) << 32) | static_cast<uint32_t>(c);
}
}  // namespace

void select_topk(const float* scores, int rows, int cols, int k, const int* rows_idx,
                 const int* cols_idx, BlockMask& out) {
  k = std::clamp(k, 0, cols);
  std::vector<uint64_t> keys(static_cast<size_t>(cols));
  std::vector<float> sample;
  for (int r = 0; r < rows; ++r) {
    const float* s = scores + static_cast<size_t>(r) * cols;
    size_t n = 0;
    if (k > 0 && k < cols && cols >= 64) {
      // Threshold from every 4th score at a rank slightly past the expected k-th: every score
      // >= tau is a candidate. When at least k qualify, the exact top-k lies among them (the k-th
      // largest is >= tau); otherwise fall back to all columns. The result is exact either way.
      sample.clear();
      for (int c = 0; c < cols; c += 4) sample.push_back(s[c]);
      const double expect = static_cast<double>(k) * static_cast<double>(sample.size()) / cols;
      const size_t rank =
          std::min(sample.size() - 1, static_cast<size_t>(expect + 2.0 * std::sqrt(expect) + 2.0));
      std::nth_element(sample.begin(), sample.begin() + static_cast<ptrdiff_t>(rank), sample.end(),
                       std::greater<float>());
      const float tau = sample[rank];
      for (int c = 0; c < cols; ++c)
        if (s[c] >= tau) keys[n++] = topk_key(s[c], c);
      if (n < static_cast<size_t>(k)) n = 0;
    }
    if (n == 0)
      for (int c = 0; c < cols; ++c) keys[n++] = topk_key(s[c], c);
    if (static_cast<size_t>(k) < n)
      std::nth_element(keys.begin(), keys.begin() + k, keys.begin() + static_cast<ptrdiff_t>(n));
    uint64_t* row = out.row(rows_idx[r]);
    for (int i = 0; i < k; ++i) {
      const int c = cols_idx[static_cast<uint32_t>(keys[static_cast<size_t>(i)])];
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
    for (int c = 0; c < cols; ++c)
      z += p[static_cast<size_t>(c)] = std::exp(static_cast<double>(s[c] - mx));
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(),
              [s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
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
    : LazyPattern(std::move(m), std::move(l), steps, layers, 0, true, ""),
      density_(density),
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
    const uint64_t base =
        mix64(seed_ ^ mix64((static_cast<uint64_t>(layer) << 32) | static_cast<uint64_t>(h)));
    BlockMask& m = out[static_cast<size_t>(h)];
    for (int q = 0; q < nb; ++q)
      for (int k = 0; k < nb; ++k)
        if (unit_from(mix64(base + static_cast<uint64_t>(q) * static_cast<uint64_t>(nb) +
                            static_cast<uint64_t>(k))) < density_)
          m.set(q, k);
  }
}

// ---- synthetic scores -------------------------------------------------------------------------

SyntheticScorePattern::SyntheticScorePattern(ModelSpec m, BlockLayout l, int steps, int layers,
                                             bool cdf, int topk, double threshold, double noise,
                                             double length, uint64_t seed, bool text_dense)
    : LazyPattern(std::move(m), std::move(l), steps, layers, 0, false, ""),
      cdf_(cdf),
      topk_(topk),
      threshold_(threshold),
      noise_(noise),
      length_(length),
      seed_(seed),
      text_dense_(text_dense) {
  heads_ = model_.heads;
  const BlockLayout& L = layout_;
  if (L.order == TokenOrder::tile) {
    extent_ = {static_cast<float>(L.tile[0]), static_cast<float>(L.tile[1]),
               static_cast<float>(L.tile[2])};
  } else {
    const int W = L.grid[2], H = L.grid[1], B = L.block_tokens;
    extent_ = {1.0f, static_cast<float>(std::clamp(B / W, 1, H)),
               static_cast<float>(std::min(B, W))};
  }
  for (const auto& c : L.block_center) {
    ct_.push_back(c[0]);
    ch_.push_back(c[1]);
    cw_.push_back(c[2]);
  }
  rows_.resize(static_cast<size_t>(L.num_video_blocks));
  std::iota(rows_.begin(), rows_.end(), L.first_video_block);
  if (cdf_) scores_.resize(static_cast<size_t>(L.num_video_blocks) * L.num_video_blocks);
  cand_.resize(kMetricVariants);
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

std::array<float, 3> SyntheticScorePattern::metric(int variant) const {
  std::array<float, 3> inv{};
  for (int d = 0; d < 3; ++d) {
    const uint64_t r = mix64(seed_ ^ mix64((static_cast<uint64_t>(variant) << 8) ^
                                           static_cast<uint64_t>(d) ^ 0xabcdefull));
    inv[d] = static_cast<float>(1.0 / (length_ * extent_[d] * std::exp(unit_from(r) - 0.5)));
  }
  return inv;
}

const SyntheticScorePattern::Candidates& SyntheticScorePattern::candidates(int variant) {
  Candidates& c = cand_[static_cast<size_t>(variant)];
  if (!c.offset.empty()) return c;
  // Noise lies in (-amp, amp), so a column whose base score is below (k-th largest base) - 2 amp
  // scores below every one of the k best-base columns at any step: it can never be selected.
  // The remaining columns depend on the metric only, not on the step.
  const int nv = layout_.num_video_blocks;
  const auto inv = metric(variant);
  const float amp = static_cast<float>(noise_);
  std::vector<float> base(static_cast<size_t>(nv)), tmp(static_cast<size_t>(nv));
  c.offset.push_back(0);
  for (int q = 0; q < nv; ++q) {
    for (int k = 0; k < nv; ++k) base[static_cast<size_t>(k)] = base_score(q, k, inv);
    tmp = base;
    std::nth_element(tmp.begin(), tmp.begin() + (topk_ - 1), tmp.end(), std::greater<float>());
    const float kth = tmp[static_cast<size_t>(topk_ - 1)];
    const float cut = kth - 2 * amp - 1e-5f * (1 + std::fabs(kth) + 2 * amp);
    for (int k = 0; k < nv; ++k)
      if (base[static_cast<size_t>(k)] >= cut) c.cols.push_back(k);
    c.offset.push_back(static_cast<uint32_t>(c.cols.size()));
  }
  return c;
}

void SyntheticScorePattern::generate(int step, int layer, std::vector<BlockMask>& out) {
  // score(q, k) = -sum_d |c_q,d - c_k,d| / l_d + noise * (2 U - 1), where c are block centres in
  // latent tokens, l_d = length * extent_d * exp(U(-0.5, 0.5)) for one of kMetricVariants
  // metrics chosen per (layer, head), and U a counter-based uniform of (seed, step, layer, head,
  // q, k): local attention whose exact support changes from step to step, as the VSA /
  // SpargeAttn selections do. topk scores only the step-independent candidates of the metric.
  const BlockLayout& L = layout_;
  const int nv = L.num_video_blocks;
  for (int h = 0; h < heads_; ++h) {
    const int variant = static_cast<int>(
        mix64(seed_ ^ mix64((static_cast<uint64_t>(layer) << 40) ^
                            (static_cast<uint64_t>(h) << 8) ^ 0x5a5aull)) %
        kMetricVariants);
    const auto inv = metric(variant);
    const uint64_t base =
        mix64(seed_ ^ mix64((static_cast<uint64_t>(step) << 42) ^
                            (static_cast<uint64_t>(layer) << 21) ^ static_cast<uint64_t>(h)));
    // Noise: one 64-bit hash gives four 16-bit uniforms, u = (bits + 0.5) / 2^16.
    const float amp = static_cast<float>(noise_);
    const float nscale = 2.0f * amp / 65536.0f, noff = amp * (1.0f / 65536.0f - 1.0f);
    const uint64_t words_per_row = static_cast<uint64_t>((nv + 3) / 4);
    auto noise_of = [&](uint64_t row_base, int k) {
      const uint64_t r = mix64(row_base + static_cast<uint64_t>(k / 4)) >> (16 * (k % 4));
      return static_cast<float>(r & 0xffff) * nscale + noff;
    };
    BlockMask& m = out[static_cast<size_t>(h)];
    if (!cdf_) {
      const Candidates& cand = candidates(variant);
      for (int q = 0; q < nv; ++q) {
        const uint64_t row_base = base + static_cast<uint64_t>(q) * words_per_row;
        const uint32_t b0 = cand.offset[static_cast<size_t>(q)],
                       b1 = cand.offset[static_cast<size_t>(q) + 1];
        keys_.clear();
        for (uint32_t i = b0; i < b1; ++i) {
          const int k = cand.cols[i];
          float sc = base_score(q, k, inv);
          if (amp > 0) sc += noise_of(row_base, k);
          keys_.push_back(topk_key(sc, k));
        }
        std::nth_element(keys_.begin(), keys_.begin() + (topk_ - 1), keys_.end());
        uint64_t* row = m.row(rows_[static_cast<size_t>(q)]);
        for (int i = 0; i < topk_; ++i) {
          const int c = rows_[static_cast<uint32_t>(keys_[static_cast<size_t>(i)])];
          row[c >> 6] |= uint64_t{1} << (c & 63);
        }
      }
    } else {
      for (int q = 0; q < nv; ++q) {
        float* s = scores_.data() + static_cast<size_t>(q) * nv;
        const uint64_t row_base = base + static_cast<uint64_t>(q) * words_per_row;
        for (int k = 0; k < nv; ++k) {
          s[k] = base_score(q, k, inv);
          if (amp > 0) s[k] += noise_of(row_base, k);
        }
      }
      select_cdf(scores_.data(), nv, nv, threshold_, rows_.data(), rows_.data(), m);
    }
    if (text_dense_)
      for (int b = 0; b < L.num_blocks; ++b)
        if (L.is_text(b)) {
          m.set_row(b);
          m.set_col(b);
        }
  }
}

}  // namespace sparsp::patterns
