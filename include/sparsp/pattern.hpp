#pragma once
// Block-sparse attention patterns of video DiTs: which KV blocks each query block attends to,
// per (denoising step, layer, head). Query and KV blocks share one block layout (self-attention).
//
// A Pattern is a *source* of masks: static patterns are stored once and shared across steps and
// layers; dynamic ones are produced one step at a time (steps must be visited in non-decreasing
// order), never all at once.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparsp/status.hpp"

namespace sparsp::patterns {

enum class TextPosition { none, start, end };

/// A video DiT as far as attention is concerned. Every number carries its source in the preset
/// JSON (configs/models/*.json, field "source").
struct ModelSpec {
  std::string name;
  std::array<int, 3> latent{};    ///< [T, H, W] video tokens after VAE and patchify
  int text_tokens = 0;            ///< text tokens taking part in self-attention
  TextPosition text_position = TextPosition::none;
  int heads = 0;
  int head_dim = 0;
  int layers = 0;
  int hidden = 0;                 ///< model width
  int mlp_hidden = 0;             ///< MLP inner width (0: 4 * hidden)
  int dtype_bytes = 2;
  int steps = 0;                  ///< denoising steps
  int video_tokens() const { return latent[0] * latent[1] * latent[2]; }
  int tokens() const { return video_tokens() + text_tokens; }
};

/// Loads a preset ("hunyuanvideo-720p", "hunyuanvideo-sta", "wan2.1-14b-720p",
/// "wan2.1-1.3b-480p", "cogvideox-5b") or a model JSON file path.
Result<ModelSpec> load_model(const std::string& name_or_path);

enum class TokenOrder { raster, tile };

/// How tokens are grouped into blocks. Blocks are numbered in sequence order; text tokens form
/// their own blocks (at the start or the end, per the model).
struct BlockLayout {
  int block_tokens = 128;
  TokenOrder order = TokenOrder::raster;
  std::array<int, 3> tile{1, 1, 1};      ///< tile shape (t, h, w) for TokenOrder::tile
  int num_blocks = 0;
  int num_video_blocks = 0;
  int first_text_block = -1;             ///< -1 when there is no text block
  std::vector<int> tokens_in_block;      ///< [num_blocks]; the last blocks may be partial
};

/// Bit-packed Qb x Kb boolean matrix, row-major, 64 bits per word.
class BlockMask {
 public:
  BlockMask() = default;
  BlockMask(int rows, int cols);
  int rows() const { return rows_; }
  int cols() const { return cols_; }
  int words_per_row() const { return words_per_row_; }
  bool get(int q, int k) const {
    return (bits_[static_cast<size_t>(q) * words_per_row_ + (k >> 6)] >> (k & 63)) & 1u;
  }
  void set(int q, int k, bool v = true);
  const uint64_t* row(int q) const { return bits_.data() + static_cast<size_t>(q) * words_per_row_; }
  uint64_t* row(int q) { return bits_.data() + static_cast<size_t>(q) * words_per_row_; }
  int64_t count() const;                 ///< active (q, k) pairs
  bool operator==(const BlockMask& o) const = default;

 private:
  int rows_ = 0, cols_ = 0, words_per_row_ = 0;
  std::vector<uint64_t> bits_;
};

/// A source of masks. Thread-compatible (not thread-safe).
class Pattern {
 public:
  virtual ~Pattern() = default;
  virtual const ModelSpec& model() const = 0;
  virtual const BlockLayout& layout() const = 0;
  virtual int steps() const = 0;
  virtual int layers() const = 0;
  virtual int heads() const = 0;
  /// Mask of (step, layer, head). The reference stays valid until the next call with a different
  /// step. REQUIRES: 0 <= step < steps() etc.; steps visited in non-decreasing order for dynamic
  /// patterns.
  virtual const BlockMask& mask(int step, int layer, int head) = 0;
  /// Identity of the masks of (step, layer) over all heads: equal ids mean identical masks, so the
  /// simulator can reuse results exactly. Static patterns return the same id everywhere.
  virtual int64_t mask_group(int step, int layer) const = 0;
  /// Short description ("sta window 3,3,3 tile 6,8,8 block 384").
  virtual std::string describe() const = 0;
};

}  // namespace sparsp::patterns
