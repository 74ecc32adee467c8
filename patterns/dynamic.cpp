// Score-based selection (topk / cdf), the seeded synthetic score model and the random pattern.
#include "dynamic.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
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
    auto before = [s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
    uint64_t* row = out.row(rows_idx[r]);
    double mass = 0;
    // The columns in descending order, sorted a chunk at a time (doubling) until the mass is
    // reached: the same order as a full sort (strict total order), without sorting the tail.
    bool done = false;
    for (size_t pos = 0, chunk = 32; pos < idx.size() && !done; pos += chunk, chunk *= 2) {
      chunk = std::min(chunk, idx.size() - pos);
      const auto b = idx.begin() + static_cast<ptrdiff_t>(pos);
      const auto e = b + static_cast<ptrdiff_t>(chunk);
      if (e != idx.end()) std::nth_element(b, e - 1, idx.end(), before);
      std::sort(b, e, before);
      for (auto it = b; it != e; ++it) {
        const int c = *it;
        const int col = cols_idx[c];
        row[col >> 6] |= uint64_t{1} << (col & 63);
        mass += p[static_cast<size_t>(c)] / z;
        if (mass >= threshold - 1e-12) {
          done = true;
          break;
        }
      }
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
  std::call_once(cand_once_[static_cast<size_t>(variant)], [&] { build_candidates(variant, c); });
  return c;
}

void SyntheticScorePattern::build_candidates(int variant, Candidates& c) const {
  // Noise lies in (-amp, amp), so a column whose base score is below (k-th largest base) - 2 amp
  // scores below every one of the k best-base columns at any step: it can never be selected.
  // The remaining columns depend on the metric only, not on the step. They are kept as groups of
  // four (one noise hash each); extra columns of a group are harmless (never selected), padding
  // past the last block scores -inf.
  //
  // Per row, [tau, tau_hi) is a step-independent band that holds the k-th best noisy score with
  // high probability: with uniform noise, column j scores >= t with probability
  // p_j(t) = clamp((b_j + amp - t) / (2 amp), 0, 1); tau solves sum p_j = k + 2.5 sigma + 1
  // and tau_hi solves sum p_j = k - 2.5 sigma - 1 (sigma^2 = sum p_j (1 - p_j)). Groups whose best
  // column cannot reach tau (b_j + amp < tau) are stored after the others (`mid`) and scored
  // only in the rare fallback.
  const int nv = layout_.num_video_blocks;
  const int ng = (nv + 3) / 4;
  const auto inv = metric(variant);
  const float amp = static_cast<float>(noise_);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> base(static_cast<size_t>(ng) * 4, -kInf), tmp;
  std::vector<uint32_t> early, late;
  c.offset.push_back(0);
  for (int q = 0; q < nv; ++q) {
    for (int k = 0; k < nv; ++k) base[static_cast<size_t>(k)] = base_score(q, k, inv);
    tmp.assign(base.begin(), base.begin() + nv);
    std::nth_element(tmp.begin(), tmp.begin() + (topk_ - 1), tmp.end(), std::greater<float>());
    const float kth = tmp[static_cast<size_t>(topk_ - 1)];
    const float cut = kth - 2 * amp - 1e-5f * (1 + std::fabs(kth) + 2 * amp);
    std::vector<uint32_t> groups;
    for (int g = 0; g < ng; ++g) {
      const float* b4 = base.data() + 4 * g;
      if (std::max({b4[0], b4[1], b4[2], b4[3]}) >= cut) groups.push_back(static_cast<uint32_t>(g));
    }
    float tau = -kInf, tau_hi = kInf;
    if (amp > 0) {
      // sum_j p_j(t) - k - sign (2.5 sigma(t) + 1): decreasing in t.
      auto excess = [&](double t, double sign) {
        double e = 0, v = 0;
        for (uint32_t g : groups)
          for (int j = 0; j < 4; ++j) {
            const double pj = std::clamp(
                (base[4 * g + static_cast<uint32_t>(j)] + amp - t) / (2.0 * amp), 0.0, 1.0);
            e += pj;
            v += pj * (1 - pj);
          }
        return e - topk_ - sign * (2.5 * std::sqrt(v) + 1);
      };
      // Largest t in [kth - 3 amp, kth + 2 amp] with excess(t, sign) >= 0; nullopt when none.
      auto solve = [&](double sign) -> std::optional<double> {
        double lo = kth - 3.0 * amp, hi = kth + 2.0 * amp;
        if (excess(lo, sign) < 0) return std::nullopt;
        for (int it = 0; it < 40; ++it) {
          const double mid = 0.5 * (lo + hi);
          (excess(mid, sign) >= 0 ? lo : hi) = mid;
        }
        return lo;
      };
      if (auto t = solve(+1)) tau = static_cast<float>(*t);
      if (auto t = solve(-1); t && static_cast<float>(*t) > tau) tau_hi = static_cast<float>(*t);
    }
    // Groups that may reach tau (float rounding margin as for `cut`) first, then the rest.
    const float reach = tau - amp - 1e-5f * (1 + std::fabs(tau) + 2 * amp);
    early.clear();
    late.clear();
    for (uint32_t g : groups) {
      const float* b4 = base.data() + 4 * g;
      (std::max({b4[0], b4[1], b4[2], b4[3]}) >= reach ? early : late).push_back(g);
    }
    for (const auto* part : {&early, &late})
      for (uint32_t g : *part) {
        c.group.push_back(g);
        c.base.insert(c.base.end(), base.begin() + 4 * g, base.begin() + 4 * g + 4);
      }
    c.mid.push_back(static_cast<uint32_t>(c.offset.back() + early.size()));
    c.offset.push_back(static_cast<uint32_t>(c.group.size()));
    c.tau.push_back(tau);
    c.tau_hi.push_back(tau_hi);
  }
}

namespace {

// The noise of a group of four columns: one 64-bit hash gives four 16-bit uniforms,
// u = (bits + 0.5) / 2^16, scaled to (-amp, amp): noise_j = bits_j * nscale + noff.
struct NoiseScale {
  float nscale, noff;
  explicit NoiseScale(float amp)
      : nscale(2.0f * amp / 65536.0f), noff(amp * (1.0f / 65536.0f - 1.0f)) {}
};

}  // namespace

void SyntheticScorePattern::generate(int step, int layer, std::vector<BlockMask>& out) {
  // score(q, k) = -sum_d |c_q,d - c_k,d| / l_d + noise * (2 U - 1), where c are block centres in
  // latent tokens, l_d = length * extent_d * exp(U(-0.5, 0.5)) for one of kMetricVariants
  // metrics chosen per (layer, head), and U a counter-based uniform of (seed, step, layer, head,
  // q, k): local attention whose exact support changes from step to step, as the VSA /
  // SpargeAttn selections do. topk scores only the step-independent candidates of the metric.
  // Every (head, row) is computed on its own from the hash, so the order of the loops (and the
  // thread that runs them) does not change the masks.
  std::vector<int> variant(static_cast<size_t>(heads_));
  std::vector<uint64_t> head_base(static_cast<size_t>(heads_));
  for (int h = 0; h < heads_; ++h) {
    variant[static_cast<size_t>(h)] =
        static_cast<int>(mix64(seed_ ^ mix64((static_cast<uint64_t>(layer) << 40) ^
                                             (static_cast<uint64_t>(h) << 8) ^ 0x5a5aull)) %
                         kMetricVariants);
    head_base[static_cast<size_t>(h)] =
        mix64(seed_ ^ mix64((static_cast<uint64_t>(step) << 42) ^
                            (static_cast<uint64_t>(layer) << 21) ^ static_cast<uint64_t>(h)));
  }
  if (cdf_)
    generate_cdf(variant, head_base, out);
  else
    generate_topk(variant, head_base, out);
  const BlockLayout& L = layout_;
  if (text_dense_)
    for (auto& m : out)
      for (int b = 0; b < L.num_blocks; ++b)
        if (L.is_text(b)) {
          m.set_row(b);
          m.set_col(b);
        }
}

void SyntheticScorePattern::generate_cdf(const std::vector<int>& variant,
                                         const std::vector<uint64_t>& head_base,
                                         std::vector<BlockMask>& out) const {
  const int nv = layout_.num_video_blocks;
  const uint64_t words_per_row = static_cast<uint64_t>((nv + 3) / 4);
  const float amp = static_cast<float>(noise_);
  const NoiseScale ns(amp);
  std::vector<float> scores(static_cast<size_t>(nv) * static_cast<size_t>(nv));
  for (int h = 0; h < heads_; ++h) {
    const auto inv = metric(variant[static_cast<size_t>(h)]);
    for (int q = 0; q < nv; ++q) {
      float* s = scores.data() + static_cast<size_t>(q) * nv;
      const uint64_t row_base =
          head_base[static_cast<size_t>(h)] + static_cast<uint64_t>(q) * words_per_row;
      for (int k = 0; k < nv; ++k) s[k] = base_score(q, k, inv);
      if (amp > 0)
        for (int g = 0; 4 * g < nv; ++g) {  // one hash per four columns
          const uint64_t r = mix64(row_base + static_cast<uint64_t>(g));
          for (int j = 0; j < 4 && 4 * g + j < nv; ++j)
            s[4 * g + j] += static_cast<float>((r >> (16 * j)) & 0xffff) * ns.nscale + ns.noff;
        }
    }
    select_cdf(scores.data(), nv, nv, threshold_, rows_.data(), rows_.data(),
               out[static_cast<size_t>(h)]);
  }
}

void SyntheticScorePattern::generate_topk(const std::vector<int>& variant,
                                          const std::vector<uint64_t>& head_base,
                                          std::vector<BlockMask>& out) {
  const BlockLayout& L = layout_;
  const int nv = L.num_video_blocks;
  const uint64_t words_per_row = static_cast<uint64_t>((nv + 3) / 4);
  const float amp = static_cast<float>(noise_);
  const NoiseScale nsc(amp);
  const float nscale = nsc.nscale, noff = nsc.noff;
  const int first = L.first_video_block;
  uint64_t* hit_gm = nullptr;  // pass-1 scratch of score() (SSE path), set per row
  uint32_t* hit_ord = nullptr;
  std::vector<const Candidates*> cand_of(static_cast<size_t>(heads_));
  for (int h = 0; h < heads_; ++h)
    cand_of[static_cast<size_t>(h)] = &candidates(variant[static_cast<size_t>(h)]);
  // Noisy scores of the candidate groups [e0, e1): columns scoring >= hi set their bit in
  // `row` at once, those in [lo, hi) go to `band` as top-k keys (branch-free). Returns the
  // two counts.
  auto score = [&](const Candidates& cand, uint64_t row_base, uint32_t e0, uint32_t e1, float lo,
                   float hi, uint64_t* row, uint64_t* band) {
    uint32_t ns = 0, nb = 0;
#if defined(__SSE2__)
    // The four columns of a group in one SSE register: the same IEEE float operations in
    // the same order as the scalar code below, so the same scores.
    const __m128 vscale = _mm_set1_ps(nscale), voff = _mm_set1_ps(noff);
    const __m128 vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
    const __m128i zero = _mm_setzero_si128(), sign = _mm_set1_epi32(INT32_MIN);
    const __m128 negzero = _mm_set1_ps(-0.0f), pzero = _mm_setzero_ps();
    // Pass 1: per group, the sure bits go into the row at once; a group with band columns
    // keeps its four keys and band mask (branch-free append), about one group in four.
    uint32_t nh = 0;
    for (uint32_t e = e0; e < e1; ++e) {
      const uint32_t g = cand.group[e];
      const uint64_t r = mix64(row_base + g);
      const __m128i u16 = _mm_unpacklo_epi16(_mm_cvtsi64_si128(static_cast<long long>(r)), zero);
      const __m128 noise = _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(u16), vscale), voff);
      const __m128 sc =
          _mm_add_ps(_mm_loadu_ps(cand.base.data() + 4 * static_cast<size_t>(e)), noise);
      const unsigned sure = static_cast<unsigned>(_mm_movemask_ps(_mm_cmpge_ps(sc, vhi)));
      const unsigned in_band =
          static_cast<unsigned>(_mm_movemask_ps(_mm_cmpge_ps(sc, vlo))) & ~sure;
      // topk_key's order-preserving transform of -score, four at a time.
      const __m128i u = _mm_castps_si128(_mm_add_ps(_mm_xor_ps(sc, negzero), pzero));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hit_ord + 4 * static_cast<size_t>(nh)),
                       _mm_xor_si128(u, _mm_or_si128(_mm_srai_epi32(u, 31), sign)));
      hit_gm[nh] = (static_cast<uint64_t>(g) << 4) | in_band;
      nh += in_band != 0 ? 1u : 0u;
      ns += static_cast<uint32_t>((0x4332322132212110ull >> (4 * sure)) & 15);  // popcount of 4
      // Padding past the last block scores -inf, so sure bits are real columns.
      const int col = first + static_cast<int>(4 * g);
      const int sh = col & 63;
      uint64_t* w = row + (col >> 6);
      w[0] |= static_cast<uint64_t>(sure) << sh;
      if (sh > 60 && sure >> (64 - sh)) w[1] |= static_cast<uint64_t>(sure) >> (64 - sh);
    }
    // Pass 2: the band keys of the kept groups (the order of the keys does not matter: the
    // selection below depends on the set of keys only).
    for (uint32_t i = 0; i < nh; ++i) {
      const uint64_t k0 = 4 * (hit_gm[i] >> 4);
      for (unsigned m = static_cast<unsigned>(hit_gm[i] & 15); m; m &= m - 1) {
        const unsigned j = static_cast<unsigned>(std::countr_zero(m));
        band[nb++] =
            (static_cast<uint64_t>(hit_ord[4 * static_cast<size_t>(i) + j]) << 32) | (k0 + j);
      }
    }
#else
    for (uint32_t e = e0; e < e1; ++e) {
      const uint32_t g = cand.group[e];
      const float* b4 = cand.base.data() + 4 * static_cast<size_t>(e);
      const uint64_t r = mix64(row_base + g);
      for (int j = 0; j < 4; ++j) {
        const int k = static_cast<int>(4 * g) + j;
        const float sc = b4[j] + (static_cast<float>((r >> (16 * j)) & 0xffff) * nscale + noff);
        band[nb] = topk_key(sc, k);
        const bool in_sure = sc >= hi;
        ns += in_sure ? 1u : 0u;
        nb += (!in_sure && sc >= lo) ? 1u : 0u;
        const int col = first + std::min(k, nv - 1);  // padding never scores >= hi
        row[col >> 6] |= static_cast<uint64_t>(in_sure) << (col & 63);
      }
    }
#endif
    return std::pair{ns, nb};
  };
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const uint32_t kk = static_cast<uint32_t>(topk_);
  auto set_cols = [first](uint64_t* row, const uint64_t* keys, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      const int col = first + static_cast<int>(static_cast<uint32_t>(keys[i]));
      row[col >> 6] |= uint64_t{1} << (col & 63);
    }
  };
  std::vector<uint64_t> keys;       // top-k scratch
  std::vector<uint64_t> hit_gm_v;   // groups with band columns: group << 4 | band mask
  std::vector<uint32_t> hit_ord_v;  // their four order keys
  // Row by row, every head: a row's candidates of all metric variants stay in cache (head by
  // head, each variant's candidates, about 0.8 MB at HunyuanVideo 720p block 128, were read
  // from memory once per head).
  for (int q = 0; q < nv; ++q) {
    const size_t qi = static_cast<size_t>(q);
    for (int h = 0; h < heads_; ++h) {
      const Candidates& cand = *cand_of[static_cast<size_t>(h)];
      BlockMask& m = out[static_cast<size_t>(h)];
      const uint64_t row_base =
          head_base[static_cast<size_t>(h)] + static_cast<uint64_t>(q) * words_per_row;
      const uint32_t e0 = cand.offset[qi], mid = cand.mid[qi], e1 = cand.offset[qi + 1];
      if (keys.size() < 4 * static_cast<size_t>(e1 - e0)) {
        keys.resize(4 * static_cast<size_t>(e1 - e0));
        hit_gm_v.resize(static_cast<size_t>(e1 - e0));
        hit_ord_v.resize(4 * static_cast<size_t>(e1 - e0));
      }
      hit_gm = hit_gm_v.data();
      hit_ord = hit_ord_v.data();
      uint64_t* band = keys.data();
      uint64_t* row = m.row(rows_[qi]);
      // Every score >= tau_hi beats every other; the rest of the top k lies in [tau, tau_hi)
      // when enough scores reach tau. Otherwise (rare) select among all candidates.
      auto [ns, nb] = score(cand, row_base, e0, mid, cand.tau[qi], cand.tau_hi[qi], row, band);
      if (ns > kk || ns + nb < kk) {
        std::fill(row, row + m.words_per_row(), uint64_t{0});
        std::tie(ns, nb) =
            score(cand, row_base, e0, e1, std::numeric_limits<float>::lowest(), kInf, row, band);
      }
      const uint32_t rest = kk - ns;
      if (rest >= nb) {
        set_cols(row, band, nb);
      } else if (nb <= 32) {
        // Small band: key i is selected when fewer than `rest` keys are smaller (keys are
        // distinct), branch-free.
        for (uint32_t i = 0; i < nb; ++i) {
          uint32_t rank = 0;
          for (uint32_t j = 0; j < nb; ++j) rank += band[j] < band[i] ? 1u : 0u;
          const int col = first + static_cast<int>(static_cast<uint32_t>(band[i]));
          row[col >> 6] |= static_cast<uint64_t>(rank < rest) << (col & 63);
        }
      } else if (rest > 0) {
        std::nth_element(band, band + (rest - 1), band + nb);
        set_cols(row, band, rest);
      }
    }
  }
}

}  // namespace sparsp::patterns
