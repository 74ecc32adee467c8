// Static generators: dense, sta, radial, svg. The published rule of each is in its comment and in
// patterns/README.md.
#include "generators.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>

namespace sparsp::patterns {
namespace {

void make_text_dense(const BlockLayout& L, BlockMask& m) {
  for (int b = 0; b < L.num_blocks; ++b)
    if (L.is_text(b)) {
      m.set_row(b);
      m.set_col(b);
    }
}

int bit_length(int64_t v) { return v <= 0 ? 0 : 64 - std::countl_zero(static_cast<uint64_t>(v)); }

}  // namespace

BlockMask dense_mask(const BlockLayout& L) {
  BlockMask m(L.num_blocks, L.num_blocks);
  m.fill(true);
  return m;
}

BlockMask causal_mask(const BlockLayout& L) {
  BlockMask m(L.num_blocks, L.num_blocks);
  for (int q = 0; q < L.num_blocks; ++q)
    for (int k = 0; k <= q; ++k) m.set(q, k, true);
  return m;
}

// Sliding Tile Attention (Zhang et al., "Fast Video Generation with Sliding Tile Attention",
// arXiv:2502.04507, Sec. 3): tokens are grouped into tiles; a query tile attends to the
// kt x kh x kw tiles of a window centred on it, the window shifted to stay inside the tile grid
// (start = clamp(i - k/2, 0, n - k) per dimension, NATTEN-style). Every block of an attended tile
// is attended. Text rows and columns are dense (FastVideo STA keeps text-video attention full).
Result<BlockMask> sta_mask(const BlockLayout& L, std::array<int, 3> window, bool text_dense,
                           const std::string& src) {
  if (L.order != TokenOrder::tile) return input_error(src, "order", "sta needs tile token order");
  for (int d = 0; d < 3; ++d) {
    if (window[d] < 1) return input_error(src, "window", "window sizes must be >= 1");
    if (window[d] > L.tile_grid[d])
      return input_error(src, "window",
                         "window " + join3(window) + " larger than the tile grid " +
                             join3(L.tile_grid) + " (canvas " + join3(L.grid) + " / tile " +
                             join3(L.tile) + ")");
  }
  // Blocks of each tile: tiles are visited in raster order, blocks of a tile are consecutive.
  const int ntiles = L.tile_grid[0] * L.tile_grid[1] * L.tile_grid[2];
  std::vector<int> tile_first(static_cast<size_t>(ntiles) + 1, 0);
  for (int v = 0; v < L.num_video_blocks; ++v) {
    const auto& t = L.block_tile[static_cast<size_t>(v)];
    const int id = (t[0] * L.tile_grid[1] + t[1]) * L.tile_grid[2] + t[2];
    tile_first[static_cast<size_t>(id) + 1]++;
  }
  std::partial_sum(tile_first.begin(), tile_first.end(), tile_first.begin());
  BlockMask m(L.num_blocks, L.num_blocks);
  auto start_of = [&](int i, int d) {
    return std::clamp(i - window[d] / 2, 0, L.tile_grid[d] - window[d]);
  };
  const int v0 = L.first_video_block;
  for (int v = 0; v < L.num_video_blocks; ++v) {
    const auto& t = L.block_tile[static_cast<size_t>(v)];
    const int s0 = start_of(t[0], 0), s1 = start_of(t[1], 1), s2 = start_of(t[2], 2);
    uint64_t* row = m.row(v0 + v);
    for (int a = s0; a < s0 + window[0]; ++a)
      for (int b = s1; b < s1 + window[1]; ++b) {
        // Tiles (a, b, s2 .. s2+kw-1) are consecutive in raster order: one block range.
        const int first = (a * L.tile_grid[1] + b) * L.tile_grid[2] + s2;
        set_range(row, v0 + tile_first[static_cast<size_t>(first)],
                  v0 + tile_first[static_cast<size_t>(first + window[2])]);
      }
  }
  if (text_dense) make_text_dense(L, m);
  return m;
}

// Radial Attention (Li et al., "Radial Attention: O(n log n) Sparse Attention with Energy Decay
// for Long Video Generation", arXiv:2506.19852; mit-han-lab/radial-attention attn_mask.py).
// Token rule for query frame i, key frame j, d = |i - j|, S tokens per frame, token positions
// x, y inside their frames:
//   * j == 0: attention sink, all pairs kept;
//   * hunyuan variant: d <= 1 full; wan variant: d == 0 full, d == 1 band width S/2;
//   * otherwise width w = max(2^bitlen(S) / 2^bitlen(d) * decay, B): keep |x - y| <= w;
//   * far frames: if 2^bitlen(S) / 2^bitlen(d) < B the frame pair is kept only when
//     d % floor(B / (2^bitlen(S) / 2^bitlen(d))) == 0 (diagonal "split").
// Block rule (shrinkMaskStrict), applied per frame pair and OR-ed: within a block pair, a key
// column is "dense" when more than 1/3 of the block's B query rows hit it; the block is kept when
// more than 60% of the non-empty columns are dense. Text rows and columns dense.
Result<BlockMask> radial_mask(const BlockLayout& L, double decay, bool wan_variant, bool sink,
                              bool text_dense, const std::string& src) {
  if (L.order != TokenOrder::raster) return input_error(src, "order", "radial needs raster order");
  if (!(decay > 0) || !std::isfinite(decay))
    return input_error(src, "decay", "decay factor must be > 0");
  const int S = L.tokens_per_frame, F = L.grid[0], B = L.block_tokens;
  const int v0 = L.first_video_block;
  BlockMask m(L.num_blocks, L.num_blocks);
  const double pow_s = std::ldexp(1.0, bit_length(S));
  for (int i = 0; i < F; ++i)
    for (int j = 0; j < F; ++j) {
      const int d = std::abs(i - j);
      double w;  // band half-width in tokens; >= S means the whole frame pair
      if (sink && j == 0) {
        w = S;
      } else {
        const int group = bit_length(d);
        const double base = pow_s / std::ldexp(1.0, group);
        if (base < B) {
          const int split = static_cast<int>(B / base);
          if (d % split != 0) continue;  // frame pair dropped
        }
        if (!wan_variant && d <= 1)
          w = S;
        else if (wan_variant && d == 0)
          w = S;
        else if (wan_variant && d == 1)
          w = S / 2;
        else
          w = std::max(base * decay, static_cast<double>(B));
      }
      const int64_t wi = static_cast<int64_t>(std::floor(w));
      // Blocks overlapping frame i (rows) and frame j (columns).
      const int64_t fi0 = int64_t{i} * S, fj0 = int64_t{j} * S;
      const int r0 = static_cast<int>(fi0 / B), r1 = static_cast<int>((fi0 + S - 1) / B);
      const int c0 = static_cast<int>(fj0 / B), c1 = static_cast<int>((fj0 + S - 1) / B);
      for (int r = r0; r <= r1; ++r) {
        const int64_t ylo = std::max<int64_t>(int64_t{r} * B, fi0) - fi0;
        const int64_t yhi = std::min<int64_t>(int64_t{r + 1} * B, fi0 + S) - fi0;  // exclusive
        uint64_t* row = m.row(v0 + r);
        for (int c = c0; c <= c1; ++c) {
          if ((row[(v0 + c) >> 6] >> ((v0 + c) & 63)) & 1u) continue;
          const int64_t xlo = std::max<int64_t>(int64_t{c} * B, fj0) - fj0;
          const int64_t xhi = std::min<int64_t>(int64_t{c + 1} * B, fj0 + S) - fj0;
          int64_t nonzero = 0, dense = 0;
          for (int64_t x = xlo; x < xhi; ++x) {
            const int64_t cnt =
                std::max<int64_t>(0, std::min(yhi, x + wi + 1) - std::max(ylo, x - wi));
            if (cnt > 0) ++nonzero;
            if (3 * cnt > B) ++dense;  // column density cnt / B > 1/3
          }
          if (nonzero > 0 && 10 * dense > 6 * nonzero) m.set(v0 + r, v0 + c);
        }
      }
    }
  if (text_dense) make_text_dense(L, m);
  return m;
}

// Sparse VideoGen (Xi et al., "Sparse VideoGen: Accelerating Video Diffusion Transformers with
// Spatial-Temporal Sparsity", arXiv:2502.01776; mask_mod form in pytorch-labs/attention-gym
// sparse_videogen). With half-width h = band_frames / 2 frames and S tokens per frame:
//   spatial head: |q - k| < round_down(h * S, B) over video token indices (frame-major), plus the
//     first frame as attention sink (k < S);
//   temporal head: |q mod S - k mod S| < max(1, floor(h * S / F)), i.e. the same band in
//     token-major order (SVG's layout transformation), no sink.
// A block pair is kept when any token pair is (block-sparse kernels compute whole blocks). Text
// rows and columns dense.
Result<BlockMask> svg_mask(const BlockLayout& L, bool spatial, double band_frames, bool sink,
                           bool text_dense, const std::string& src) {
  if (L.order != TokenOrder::raster) return input_error(src, "order", "svg needs raster order");
  if (!(band_frames > 0) || !std::isfinite(band_frames))
    return input_error(src, "svg_band_frames", "band width must be > 0");
  const int S = L.tokens_per_frame, F = L.grid[0], B = L.block_tokens;
  const int v0 = L.first_video_block, nv = L.num_video_blocks;
  const double h = band_frames / 2;
  BlockMask m(L.num_blocks, L.num_blocks);
  if (spatial) {
    const int64_t width = std::max<int64_t>(
        B, static_cast<int64_t>(std::floor(h * S / B)) * B);  // round_down(h*S, B), at least B
    for (int q = 0; q < nv; ++q) {
      const auto& rq = L.block_raster_range[static_cast<size_t>(q)];
      for (int k = 0; k < nv; ++k) {
        const auto& rk = L.block_raster_range[static_cast<size_t>(k)];
        const int64_t gap =
            std::max<int64_t>({0, int64_t{rk[0]} - (rq[1] - 1), int64_t{rq[0]} - (rk[1] - 1)});
        if (gap < width || (sink && rk[0] < S)) m.set(v0 + q, v0 + k);
      }
    }
  } else {
    const int64_t width = std::max<int64_t>(1, static_cast<int64_t>(std::floor(h * S / F)));
    // Positions inside the frame covered by a block: up to two intervals.
    auto intervals = [&](const std::array<int, 2>& r) {
      std::vector<std::array<int64_t, 2>> iv;  // inclusive
      if (r[1] - r[0] >= S) return std::vector<std::array<int64_t, 2>>{{0, S - 1}};
      const int64_t a = r[0] % S, b = (r[1] - 1) % S;
      if (a <= b)
        iv.push_back({a, b});
      else {
        iv.push_back({a, S - 1});
        iv.push_back({0, b});
      }
      return iv;
    };
    std::vector<std::vector<std::array<int64_t, 2>>> ivs;
    for (int q = 0; q < nv; ++q)
      ivs.push_back(intervals(L.block_raster_range[static_cast<size_t>(q)]));
    for (int q = 0; q < nv; ++q)
      for (int k = 0; k < nv; ++k) {
        int64_t best = INT64_MAX;
        for (const auto& a : ivs[static_cast<size_t>(q)])
          for (const auto& b : ivs[static_cast<size_t>(k)])
            best = std::min(best, std::max<int64_t>({0, b[0] - a[1], a[0] - b[1]}));
        if (best < width) m.set(v0 + q, v0 + k);
      }
  }
  if (text_dense) make_text_dense(L, m);
  return m;
}

}  // namespace sparsp::patterns
