// BlockMask and BlockLayout.
#include <algorithm>
#include <bit>
#include <cassert>

#include "pattern_impl.hpp"
#include "sparsp/pattern.hpp"

namespace sparsp::patterns {

BlockMask::BlockMask(int rows, int cols)
    : rows_(rows),
      cols_(cols),
      words_per_row_((cols + 63) / 64),
      bits_(static_cast<size_t>(rows) * static_cast<size_t>((cols + 63) / 64), 0) {
  assert(rows >= 0 && cols >= 0);
}

void BlockMask::set(int q, int k, bool v) {
  assert(q >= 0 && q < rows_ && k >= 0 && k < cols_);
  uint64_t& w = bits_[static_cast<size_t>(q) * words_per_row_ + (k >> 6)];
  const uint64_t bit = uint64_t{1} << (k & 63);
  w = v ? (w | bit) : (w & ~bit);
}

int64_t BlockMask::count() const {
  int64_t n = 0;
  for (uint64_t w : bits_) n += popcount64(w);
  return n;
}

int BlockMask::row_count(int q) const {
  int n = 0;
  const uint64_t* r = row(q);
  for (int i = 0; i < words_per_row_; ++i) n += popcount64(r[i]);
  return n;
}

void BlockMask::fill(bool v) {
  if (!v) {
    std::fill(bits_.begin(), bits_.end(), 0);
    return;
  }
  for (int q = 0; q < rows_; ++q) set_row(q);
}

void BlockMask::set_row(int q) {
  uint64_t* r = row(q);
  for (int i = 0; i < words_per_row_; ++i) r[i] = ~uint64_t{0};
  if (cols_ & 63) r[words_per_row_ - 1] = (uint64_t{1} << (cols_ & 63)) - 1;
}

void BlockMask::set_col(int k) {
  const uint64_t bit = uint64_t{1} << (k & 63);
  for (int q = 0; q < rows_; ++q) row(q)[k >> 6] |= bit;
}

void BlockMask::or_with(const BlockMask& o) {
  assert(o.rows_ == rows_ && o.cols_ == cols_);
  for (size_t i = 0; i < bits_.size(); ++i) bits_[i] |= o.bits_[i];
}

uint64_t BlockMask::hash() const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(rows_));
  mix(static_cast<uint64_t>(cols_));
  for (uint64_t w : bits_) mix(w);
  return h;
}

Result<BlockLayout> make_layout(const ModelSpec& model, int block_tokens, TokenOrder order,
                                std::array<int, 3> tile, const std::string& source) {
  BlockLayout L;
  if (block_tokens < 1)
    return input_error(source, "block",
                       "block size must be >= 1, got " + std::to_string(block_tokens));
  for (int d = 0; d < 3; ++d) {
    if (model.latent[d] < 1) return input_error(source, "latent", "empty latent grid");
    if (order == TokenOrder::tile && tile[d] < 1)
      return input_error(source, "tile", "tile dimensions must be >= 1");
  }
  L.block_tokens = block_tokens;
  L.order = order;
  L.grid = model.latent;
  L.tokens_per_frame = model.latent[1] * model.latent[2];
  const int T = model.latent[0], H = model.latent[1], W = model.latent[2];
  if (order == TokenOrder::tile) {
    const int64_t vol = int64_t{tile[0]} * tile[1] * tile[2];
    if (vol % block_tokens != 0)
      return input_error(source, "block",
                         "block size " + std::to_string(block_tokens) +
                             " does not divide the tile volume " + std::to_string(tile[0]) + "x" +
                             std::to_string(tile[1]) + "x" + std::to_string(tile[2]) + " = " +
                             std::to_string(vol));
    L.tile = tile;
    for (int d = 0; d < 3; ++d) L.tile_grid[d] = (model.latent[d] + tile[d] - 1) / tile[d];
  } else {
    L.tile = {1, 1, 1};
    L.tile_grid = model.latent;
  }
  const int text_blocks = (model.text_tokens + block_tokens - 1) / block_tokens;
  L.num_text_blocks = text_blocks;
  std::vector<int> video_sizes;
  const int B = block_tokens;
  if (order == TokenOrder::raster) {
    const int V = model.video_tokens();
    for (int s = 0; s < V; s += B) {
      const int e = std::min(V, s + B);
      video_sizes.push_back(e - s);
      L.block_raster_range.push_back({s, e});
      double ct = 0, ch = 0, cw = 0;
      for (int i = s; i < e; ++i) {
        ct += i / (H * W);
        ch += (i / W) % H;
        cw += i % W;
      }
      const double n = e - s;
      L.block_center.push_back(
          {static_cast<float>(ct / n), static_cast<float>(ch / n), static_cast<float>(cw / n)});
      L.block_tile.push_back({s / (H * W), (s / W) % H, s % W});
    }
  } else {
    for (int it = 0; it < L.tile_grid[0]; ++it)
      for (int ih = 0; ih < L.tile_grid[1]; ++ih)
        for (int iw = 0; iw < L.tile_grid[2]; ++iw) {
          const int t0 = it * tile[0], h0 = ih * tile[1], w0 = iw * tile[2];
          const int et = std::min(tile[0], T - t0), eh = std::min(tile[1], H - h0),
                    ew = std::min(tile[2], W - w0);
          const int n = et * eh * ew;
          for (int s = 0; s < n; s += B) {
            const int e = std::min(n, s + B);
            video_sizes.push_back(e - s);
            double ct = 0, ch = 0, cw = 0;
            for (int i = s; i < e; ++i) {
              ct += t0 + i / (eh * ew);
              ch += h0 + (i / ew) % eh;
              cw += w0 + i % ew;
            }
            const double m = e - s;
            L.block_center.push_back({static_cast<float>(ct / m), static_cast<float>(ch / m),
                                      static_cast<float>(cw / m)});
            L.block_tile.push_back({it, ih, iw});
          }
        }
  }
  L.num_video_blocks = static_cast<int>(video_sizes.size());
  L.num_blocks = L.num_video_blocks + text_blocks;
  std::vector<int> text_sizes;
  for (int s = 0; s < model.text_tokens; s += B)
    text_sizes.push_back(std::min(B, model.text_tokens - s));
  if (model.text_position == TextPosition::start && text_blocks > 0) {
    L.first_text_block = 0;
    L.first_video_block = text_blocks;
    L.tokens_in_block = text_sizes;
    L.tokens_in_block.insert(L.tokens_in_block.end(), video_sizes.begin(), video_sizes.end());
  } else {
    L.first_video_block = 0;
    L.first_text_block = text_blocks > 0 ? L.num_video_blocks : -1;
    L.tokens_in_block = video_sizes;
    L.tokens_in_block.insert(L.tokens_in_block.end(), text_sizes.begin(), text_sizes.end());
  }
  return L;
}

}  // namespace sparsp::patterns
