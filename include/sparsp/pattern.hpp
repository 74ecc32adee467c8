#pragma once
// Block-sparse attention patterns of video DiTs: which KV blocks each query block attends to,
// per (denoising step, layer, head). Query and KV blocks share one block layout (self-attention).
//
// A Pattern is a *source* of masks: static patterns are stored once and shared across steps and
// layers; dynamic ones are produced one step at a time (steps must be visited in non-decreasing
// order), never all at once.
//
// Generators and their published rules are documented in patterns/README.md; file formats (.npy,
// .npz, native .spm) there too.
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
/// One stage of a generation outside the denoising loop (model JSON "pipeline", issue 14).
struct PipelineStage {
  bool given = false;  ///< the model describes this stage
  double flops = 0;    ///< its work, FLOP (0: not given); timed at the GPU's peak x efficiency
  /// Fraction of the GPU's dense bf16 peak at which `flops` run, in (0, 1]; 0 (not given): the
  /// study's gemm efficiency. Set from a measurement of the stage's own kernels (e.g. the
  /// CogVideoX VAE decoder on an H200, sim/RESULTS.md), carried to other GPUs as a fraction.
  double efficiency = 0;
  std::vector<std::pair<std::string, double>> time_s;  ///< measured seconds per GPU model name
  bool split = false;  ///< vae_decode: split evenly across the sequence-parallel group
  std::string source;
};

/// The whole generation around the denoising loop. `cfg`: "" (not given), "none", "distilled"
/// (guidance folded into one forward), "batch2" (cond + uncond in one batch of 2) or
/// "sequential" (two forwards per step); batch2 and sequential double the loop's work.
struct Pipeline {
  std::string cfg;
  std::string cfg_source;
  PipelineStage text_encoder, vae_decode;
  double scheduler_overhead_s = -1;  ///< per step; < 0: not given
  std::string scheduler_source;
  int cfg_forwards() const { return cfg == "batch2" || cfg == "sequential" ? 2 : 1; }
};

struct ModelSpec {
  std::string name;
  std::array<int, 3> latent{};  ///< [T, H, W] video tokens after VAE and patchify
  int text_tokens = 0;          ///< text tokens taking part in self-attention
  TextPosition text_position = TextPosition::none;
  int heads = 0;
  /// K and V heads (grouped-query attention, JSON "kv_heads"; divides heads). Default: heads.
  int kv_heads = 0;
  /// kv_heads, or heads where it is 0 (a spec built in code; the JSON parser always sets it).
  int kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int head_dim = 0;
  int layers = 0;
  int hidden = 0;      ///< model width
  int mlp_hidden = 0;  ///< MLP inner width (0: 4 * hidden)
  int dtype_bytes = 2;
  int steps = 0;  ///< denoising steps
  Pipeline pipeline;  ///< stages around the loop (JSON "pipeline"; all "not given" by default)
  /// Per-block work outside self-attention and the QKV/out/MLP GEMMs (JSON "block", issue 14;
  /// policy::ComputeModel::block_extra_time_s times it).
  /// Text tokens of a cross-attention in every block (Wan: umT5's text_len 512); 0: none. Adds
  /// its q/o GEMMs per video token, its k/v GEMMs on the text, and its attention FLOPs.
  int cross_attention_tokens = 0;
  /// Bytes read + written by the block's elementwise and norm kernels (norms, modulation, RoPE,
  /// gated residuals, dtype casts), per element of the tokens x hidden activation. Default 92:
  /// a bf16 adaLN DiT block with fused kernels (RMSNorm q,k 2 x 4; RoPE q,k via fp32 2 x 20;
  /// two LayerNorm + scale + shift 2 x 12; two gated residuals 2 x 10; configs/README.md).
  double elementwise_bytes_per_element = 92;
  /// Same, per element of the tokens x mlp_hidden activation (the MLP's GELU: read 2 + write 2).
  double elementwise_mlp_bytes_per_element = 4;
  int elementwise_kernels = 12;  ///< kernel launches of that work per block
  std::string block_source;      ///< where the figures come from (JSON block/source)
  int video_tokens() const { return latent[0] * latent[1] * latent[2]; }
  int tokens() const { return video_tokens() + text_tokens; }
};

/// Loads a preset ("hunyuanvideo-720p", "hunyuanvideo-sta", "wan2.1-14b-720p",
/// "wan2.1-1.3b-480p", "cogvideox-5b") or a model JSON file path. The presets are compiled into
/// the library (works from any working directory). Errors (exit 2) name the file and the JSON
/// pointer of the bad field.
Result<ModelSpec> load_model(const std::string& name_or_path);
/// Parses a model JSON text; `source_name` is used in error messages.
Result<ModelSpec> parse_model(const std::string& json_text, const std::string& source_name);
/// Names of the compiled-in presets, sorted.
std::vector<std::string> preset_names();

enum class TokenOrder { raster, tile };

/// How tokens are grouped into blocks. Blocks are numbered in sequence order; text tokens form
/// their own blocks (at the start or the end, per the model).
///
/// raster: video tokens in (frame, row, column) order, cut into consecutive chunks of
///   block_tokens (the last video block may be partial).
/// tile: the latent grid is cut into tiles of `tile` (t, h, w) tokens, tiles visited in raster
///   order of the tile grid, tokens inside a tile in raster order; border tiles are partial
///   (fewer tokens). Each tile is cut into ceil(tile tokens / block_tokens) blocks, so a block
///   never spans two tiles (FastVideo STA/VSA layout; full tiles need block_tokens dividing the
///   tile volume).
struct BlockLayout {
  /// Tokens per block. 0 with kind "file": the file's own (a recording's sidecar; 128 for
  /// .npy/.npz masks).
  int block_tokens = 128;
  TokenOrder order = TokenOrder::raster;
  std::array<int, 3> tile{1, 1, 1};  ///< tile shape (t, h, w) for TokenOrder::tile
  int num_blocks = 0;
  int num_video_blocks = 0;
  int first_text_block = -1;         ///< -1 when there is no text block
  std::vector<int> tokens_in_block;  ///< [num_blocks]; the last blocks may be partial
  // --- added by the patterns module ---
  std::array<int, 3> grid{};              ///< latent [T, H, W]
  std::array<int, 3> tile_grid{1, 1, 1};  ///< tiles per dimension, ceil(grid / tile) (tile order)
  int first_video_block = 0;              ///< 0, or the number of text blocks when text is first
  int num_text_blocks = 0;
  int tokens_per_frame = 0;  ///< H * W
  /// [num_video_blocks] tile coordinate (tile order) of video block first_video_block + i.
  std::vector<std::array<int, 3>> block_tile;
  /// [num_video_blocks] mean latent coordinate (t, h, w) of the block's tokens.
  std::vector<std::array<float, 3>> block_center;
  /// [num_video_blocks] raster index (t*H*W + h*W + w) range of a raster-order block:
  /// first and one-past-last video token (raster order only; empty for tile order).
  std::vector<std::array<int, 2>> block_raster_range;

  bool is_text(int b) const {
    return b < first_video_block || b >= first_video_block + num_video_blocks;
  }
  bool is_video(int b) const { return !is_text(b); }
};

/// Builds the layout. Errors (exit 2, `source` names the origin in the message): block_tokens
/// < 1, tile not positive, block_tokens not dividing the tile volume (tile order), empty canvas.
Result<BlockLayout> make_layout(const ModelSpec& model, int block_tokens, TokenOrder order,
                                std::array<int, 3> tile, const std::string& source = "<layout>");

/// Bit-packed Qb x Kb boolean matrix, row-major, 64 bits per word. Bits past cols() in the last
/// word of a row are always zero.
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
  const uint64_t* row(int q) const {
    return bits_.data() + static_cast<size_t>(q) * words_per_row_;
  }
  uint64_t* row(int q) { return bits_.data() + static_cast<size_t>(q) * words_per_row_; }
  int64_t count() const;             ///< active (q, k) pairs
  int row_count(int q) const;        ///< active KV blocks of query block q
  void fill(bool v);                 ///< all bits to v
  void set_row(int q);               ///< row q all ones
  void set_col(int k);               ///< column k all ones
  void or_with(const BlockMask& o);  ///< REQUIRES: same shape
  const std::vector<uint64_t>& words() const { return bits_; }
  std::vector<uint64_t>& words() { return bits_; }
  uint64_t hash() const;  ///< content hash (FNV-1a over words and shape)
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
  /// Makes the masks of `layers` at `step` ready before mask() asks for them: a pattern that
  /// generates masks on demand generates them here, the layers in parallel (oneTBB) where its
  /// generator allows it. Afterwards, until a call with another step, mask(step, l, h) for those
  /// layers only reads, so several threads may call it at once. REQUIRES: the step order of
  /// mask(); layers valid. The default does nothing (masks held in memory already).
  virtual void prepare_step(int step, const std::vector<int>& layers) {
    (void)step;
    (void)layers;
  }
  /// Identity of the masks of (step, layer) over all heads: equal ids mean identical masks, so the
  /// simulator can reuse results exactly. Static patterns return the same id everywhere.
  virtual int64_t mask_group(int step, int layer) const = 0;
  /// Short description ("sta window 3,3,3 tile 6,8,8 block 384").
  virtual std::string describe() const = 0;
  /// True when mask() does not depend on the step (any step order allowed).
  virtual bool is_static() const { return false; }
  /// Number of distinct masks held in memory at once at most (for diagnostics).
  virtual int64_t stored_masks() const { return 0; }
};

// ------------------------------------------------------------------------------------------------
// Generators and loaders
// ------------------------------------------------------------------------------------------------

/// Options of make_pattern. Zero / empty means "the kind's default" where noted.
struct PatternOptions {
  /// dense | sta | radial | svg | topk | cdf | random | file (see pattern_kinds()).
  std::string kind = "dense";
  int block_tokens = 128;
  /// "" (kind default: tile for sta, raster otherwise), "raster" or "tile".
  std::string order{};
  /// Tile shape (t, h, w); {0,0,0}: kind default (sta: 6,8,8 as in STA; tile order otherwise:
  /// 4,4,4 as in VSA; raster: unused).
  std::array<int, 3> tile{0, 0, 0};
  /// STA window in tiles (t, h, w), odd or even, centred and clamped inside the tile grid.
  std::array<int, 3> window{3, 3, 3};
  /// Per-(layer, head) STA windows, [layers * heads] (layer-major); empty: `window` everywhere.
  std::vector<std::array<int, 3>> head_windows{};
  /// JSON table file for per-layer/per-head settings (sta: {"windows": [[[t,h,w] per head] per
  /// layer]}; svg: {"heads": ["s"|"t" strings per layer]}). Empty: none.
  std::string table_path{};
  double density = 0.1;    ///< random: keep probability; topk with topk == 0: k = ceil(density*Kb)
  uint64_t seed = 0;       ///< the one RNG seed (random, svg ratio assignment, synthetic scores)
  int topk = 0;            ///< topk: KV blocks kept per query block (0: from density)
  double threshold = 0.9;  ///< cdf: softmax mass to reach (SpargeAttn-style), in (0, 1]
  double decay = 1.0;      ///< radial: decay factor of the band width (Radial Attention)
  double svg_band_frames = 1.5;    ///< svg: total band width in frames (half each side)
  double svg_spatial_ratio = 0.5;  ///< svg: fraction of heads that are spatial (no table)
  std::vector<char> svg_spatial{};   ///< svg: [layers * heads] 1 = spatial head, 0 = temporal
  bool sink = true;                ///< radial/svg: first-frame attention sink
  bool text_dense = true;          ///< generators: text rows and columns dense
  double score_noise = 0.5;        ///< synthetic scores: noise amplitude (per step)
  double score_length = 1.5;       ///< synthetic scores: decay length in tiles/blocks (mean)
  int steps = 0;                   ///< 0: model steps
  int layers = 0;                  ///< 0: model layers
  std::string input{};               ///< kind "file": recorded mask (.npy/.npz/.spm)
  /// Generators: refuse (exit 2) a layout whose masks would need more than this many bytes, as
  /// estimated by pattern_memory_bytes(); 0 = no check (the study has its own, RunOptions).
  double max_memory_bytes = 0;
  std::string q_path{}, k_path{};      ///< topk/cdf from real Q/K dumps (.npy [H, tokens, head_dim])
};

/// Upper bound of a generator's memory for `blocks` blocks: the masks of one step (layers x
/// heads x blocks^2 / 8 bytes: all distinct in the worst case) plus 4 bytes per block pair of
/// scores (topk/cdf). Hand arithmetic from the data structures (BlockMask bit rows, float score
/// rows), not measured: hunyuanvideo-720p at block 1 (119,056 blocks) needs 2.4 TiB.
double pattern_memory_bytes(double blocks, int layers, int heads);

/// Registered kinds with a one-line description each, sorted by name.
std::vector<std::pair<std::string, std::string>> pattern_kinds();

/// Builds a pattern. Errors (exit 2): unknown kind, bad parameter (window larger than the tile
/// grid, block not dividing the tile, density outside [0, 1], ...), unreadable / malformed input
/// files (message names the file and the problem).
Result<std::unique_ptr<Pattern>> make_pattern(const ModelSpec& model,
                                              const PatternOptions& options);

/// Loads a recorded pattern: .spm (native; self-describing, `model` may be null), .npy / .npz
/// (bool or uint8, shapes [H,Qb,Kb], [L,H,Qb,Kb] or [S,L,H,Qb,Kb]; needs `model` for the layout,
/// or, if null, a text-free layout of Qb blocks is assumed). Layout options come from `options`
/// (block_tokens, order, tile).
Result<std::unique_ptr<Pattern>> load_pattern(const std::string& path, const ModelSpec* model,
                                              const PatternOptions& options);

/// The model preset a PyTorch-bridge recording (`<path>` .npz with a `<path>.json` sidecar)
/// was made with; "" when `path` is not a recording or its sidecar names no preset. Errors: an
/// unreadable or malformed sidecar (file and JSON pointer).
Result<std::string> recording_model(const std::string& path);

/// Writes all masks as .npy (uint8 0/1... written as NumPy bool '|b1'), shape [S, L, H, Qb, Kb]
/// reduced to [L, H, Qb, Kb] when static. Written to a temp file and renamed.
Status write_npy(Pattern& pattern, const std::string& path);
/// Native format: "SPARSPM1", u64 header length, JSON header, 8-byte aligned bit-packed payload
/// of the distinct masks (see patterns/README.md). Streams dynamic patterns step by step.
Status write_native(Pattern& pattern, const std::string& path);
/// Chooses by extension (.npy, .spm).
Status write_pattern(Pattern& pattern, const std::string& path);

// ------------------------------------------------------------------------------------------------
// Statistics (used by the policies and the simulator)
// ------------------------------------------------------------------------------------------------

struct StatsOptions {
  int max_steps = 0;           ///< 0: all steps
  bool per_layer_head = true;  ///< fill layer_head_density
};

/// Densities are fractions of (query block, KV block) pairs, each (step, layer, head) weighted
/// equally.
struct PatternStats {
  int steps = 0, layers = 0, heads = 0, num_blocks = 0, num_video_blocks = 0;
  double density = 0;         ///< whole mask, averaged over steps, layers, heads
  double video_density = 0;   ///< video-query x video-KV part only
  double union_density = 0;   ///< OR over heads per (step, layer), averaged
  double mean_kv_blocks = 0;  ///< active KV blocks per query block, averaged
  /// Mean |q - k| in video block index over active video-video pairs (a locality measure: small
  /// for STA/radial, ~Qb/3 for random).
  double mean_block_distance = 0;
  std::vector<double> step_density;        ///< [steps]
  std::vector<double> layer_density;       ///< [layers]
  std::vector<double> head_density;        ///< [heads]
  std::vector<double> layer_head_density;  ///< [layers * heads], averaged over steps
  int64_t distinct_groups = 0;             ///< distinct mask_group values visited
};

/// Walks the pattern (steps in order; (step, layer) with an already seen mask_group are reused).
Result<PatternStats> compute_stats(Pattern& pattern, const StatsOptions& options = {});

/// OR over heads of (step, layer).
BlockMask union_mask(Pattern& pattern, int step, int layer);

/// [rows] active KV blocks per query block.
std::vector<int> active_kv_counts(const BlockMask& mask);

/// db-SP sparse imbalance ratio of a head-group x block-group split: GPU (g_h, g_b) computes the
/// heads with head_group[h] == g_h for the query blocks with block_group[q] == g_b; its work is
/// the number of active (q, k) pairs it holds. Ratio = max work / mean work (1 = balanced; db-SP,
/// "Dual-balanced sequence parallelism for sparse attention in visual generative models", 2025,
/// defines it as the max-over-mean of per-device non-zero blocks). Returns 1 when no work.
/// REQUIRES: head_group.size() == heads, block_group.size() == num_blocks, ids in range.
double sparse_imbalance_ratio(Pattern& pattern, int step, int layer,
                              const std::vector<int>& head_group, int head_groups,
                              const std::vector<int>& block_group, int block_groups);

enum class DemandGranularity {
  block,       ///< a KV block moves with all heads when any head needs it
  block_head,  ///< per (KV block, head): moved only for the heads that need it
};

struct DemandOptions {
  int gpus = 0;                  ///< sequence-parallel degree P
  std::vector<int> block_owner;  ///< [num_blocks] owning GPU of each query/KV block
  DemandGranularity granularity = DemandGranularity::block;
  /// Bytes of K and V of one full block for one head (2 * block_tokens * head_dim * dtype_bytes);
  /// partial blocks are scaled by tokens_in_block / block_tokens. 0: from the model.
  double bytes_per_block_head = 0;
  bool list_blocks = false;  ///< fill KvDemand::blocks
};

/// What each GPU needs from each other GPU for one (step, layer). A GPU fetches a KV block once
/// however many of its query blocks need it.
struct KvDemand {
  int gpus = 0;
  /// [P * P] row-major: bytes GPU i (row) needs from GPU j (column); diagonal = 0 (local).
  std::vector<double> bytes;
  /// [P * P] sorted KV block ids GPU i needs from GPU j (only with list_blocks).
  std::vector<std::vector<int32_t>> blocks;
  /// [P * P] parallel to blocks: number of heads needing each listed block (block_head mode;
  /// in block mode all heads).
  std::vector<std::vector<int32_t>> block_heads;
};

/// Errors (exit 2): gpus < 1, owner size != num_blocks, owner id out of range.
Result<KvDemand> kv_demand(Pattern& pattern, int step, int layer, const DemandOptions& options);

/// Convenience: just the [P * P] byte matrix of kv_demand.
Result<std::vector<double>> demand_matrix(Pattern& pattern, int step, int layer,
                                          const std::vector<int>& block_owner, int gpus,
                                          DemandGranularity granularity,
                                          double bytes_per_block_head);

}  // namespace sparsp::patterns
