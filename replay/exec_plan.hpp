#pragma once
// Lowered plan (private to replay/): per layer plan, the buffer layout of every holder (ranks,
// then host memories), the byte pieces each transfer copies, the regions to fill, poison and
// check, and a dependency-closed issue order. Both backends execute this, so the integrity logic
// is written once.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention.cuh"
#include "content.hpp"
#include "sparsp/plan.hpp"
#include "sparsp/replay.hpp"

namespace sparsp::replay::detail {

inline constexpr uint64_t kAlign = 256;  ///< slot alignment (bytes); vector loads need 16

/// A byte range of one holder's buffer with its expected content.
struct Region {
  int holder = 0;  ///< 0..ranks-1: rank; ranks + k: host memory k
  uint64_t offset = 0;
  uint64_t bytes = 0;
  ContentKey key;
  int block = -1;      ///< block id, or -1 for an opaque payload
  int transfer = -1;   ///< opaque payload: index of its transfer in the workload
  bool query = false;  ///< a block's Q for one head (key.owner = the head), not its K/V
};

/// One contiguous copy inside a transfer: src holder offset -> dst holder offset.
struct Piece {
  uint64_t src_offset = 0, dst_offset = 0, bytes = 0;
};

enum class ActKind { transfer, compute };

struct Activity {
  ActKind kind = ActKind::transfer;
  int index = 0;  ///< index in workload.transfers / workload.compute
  std::string id;
  int src = -1, dst = -1;  ///< holders (transfer); src = rank for compute
  const sim::Transfer* transfer = nullptr;
  const sim::ComputeTask* compute = nullptr;
  std::vector<Piece> pieces;  ///< in payload order
  uint64_t bytes = 0;         ///< sum of pieces
  uint64_t chunk_bytes = 0;   ///< host staging chunk (resolved default)
  int staging_buffers = 2;
  int comm_sms = 0;
  double duration_s = 0;  ///< compute
  /// Real compute of a `gemm` or `copy` task (ExecPlan::real): bytes of the rank's scratch it
  /// uses (gemm: bf16 A m x k, B k x n, C m x n; copy: its `bytes` read + written, half a source
  /// and half a destination); 0 for other activities.
  uint64_t scratch_bytes = 0;
  std::vector<int> deps;  ///< activity indices (plan deps + stream predecessor)
  bool skip = false;      ///< fault injection: not executed
};

/// Real compute of one attention activity (ReplayOptions::compute real): the rank's query
/// blocks (its Q buffer, heads [head_begin, head_end)) against KV blocks read in place from the
/// rank's KV slots (paged layout: kv_block_base are bf16 element offsets into the rank's holder
/// buffer). Output: O [heads of the task, q_tokens, head_dim] bf16 at byte o_offset and LSE
/// [heads of the task, q_tokens] fp32 at lse_offset of the rank's output arena.
struct AttnWork {
  int act = -1;  ///< index into ExecLayer::acts
  int rank = 0;
  int head_begin = 0, head_end = 0;
  uint64_t q_offset = 0;  ///< bytes into the rank's holder buffer: Q of head head_begin
  attention::BlockSparseLayout layout;
  std::vector<int> kv_block_ids;  ///< layout KV block -> plan block
  uint64_t o_offset = 0, lse_offset = 0;
  double flops = 0;  ///< active FLOPs (attention::active_flops)
};

/// A rank's queries: its own blocks in ascending order, then other ranks' blocks it computes
/// rows of; their token offsets in its Q array ([heads, q_tokens, head_dim] bf16, at q_offset of
/// the rank's holder buffer) and the reference's layout (the same query blocks against every KV
/// block of the original, never-transferred K/V, laid out [kv_heads, total tokens, head_dim]).
/// The Q of own blocks (all heads) is generated there (ExecLayer::fills); so is that of a text
/// block computed at a KV owner; a Ulysses head group's Q of other ranks' blocks is delivered by
/// the all-to-all (ExecLayer::checks, Region::query).
struct RankQueries {
  std::vector<int> blocks;  ///< own blocks (the first own_blocks), then others computed here
  int own_blocks = 0;
  uint64_t q_offset = 0;  ///< bytes into the rank's holder buffer
  uint64_t q_bytes = 0;
  uint64_t out_bytes = 0;  ///< output arena: every AttnWork's O and LSE
  attention::BlockSparseLayout reference;
  std::vector<int> check_blocks;  ///< indices into `blocks` the output check covers
};

struct ExecLayer {
  int plan_index = 0;
  std::vector<Activity> acts;  ///< transfers then compute, workload order
  std::vector<int> order;      ///< topological order (ties: lower index first)
  std::vector<Region> fills;   ///< source content, written once per layer
  std::vector<Region> checks;  ///< received content, poisoned before and checked after each run
  std::vector<uint64_t> holder_bytes;  ///< buffer size needed per holder
  uint64_t bytes_moved = 0;            ///< per iteration
  int corrupt_check = -1;  ///< fault injection: index into checks to corrupt after the run
  int corrupt_act = -1;    ///< fault injection: the transfer after which it is corrupted
  // Real compute (ExecPlan::real):
  std::vector<AttnWork> attn;
  std::vector<int> attn_of_act;              ///< per activity: index into attn, or -1
  std::vector<RankQueries> queries;          ///< per rank
  std::vector<ContentKey> block_keys;        ///< per plan block: its KV content (for the reference)
  std::vector<int32_t> block_token_offsets;  ///< num_blocks + 1: the sequence's token offsets
};

struct ExecPlan {
  int ranks = 0;
  int hosts = 0;
  bool real = false;         ///< attention runs for real (AttnWork); else emulated or none
  std::string compute_note;  ///< why real compute was not used where it was the default
  int heads = 0, kv_heads = 0, head_dim = 0;
  attention::Tolerance tolerance;  ///< of one output element (derive_tolerance, content < 2)
  std::vector<uint64_t> max_q_bytes, max_out_bytes;  ///< per rank, over layers (Q: inside the
                                                     ///< holder buffer; sizes the reference)
  std::vector<uint64_t> max_scratch_bytes;           ///< per rank: largest Activity::scratch_bytes
  uint64_t max_reference_kv_bytes = 0;               ///< K plus V, over layers
  std::vector<ExecLayer> layers;
  std::vector<uint64_t> max_holder_bytes;  ///< over layers
  int holders() const { return ranks + hosts; }
};

/// Holder index of an endpoint name: "gpuN" -> the rank on GPU N (N itself unless the plan has
/// rank_gpus), "hostK" -> plan.gpus + K; -1 for anything else.
int holder_of(const std::string& endpoint, const policy::Plan& plan);

/// Lowers the plan. Errors (exit 2): dependency cycle, a transfer sending a block its source
/// never holds, host endpoints beyond the plan's hosts.
Result<ExecPlan> lower(const policy::Plan& plan, const ReplayOptions& options);

/// Describes a region for messages: "layer 3 (step 0) block 17 (owner gpu1) at gpu2".
std::string describe(const policy::Plan& plan, const ExecLayer& layer, const Region& r, int ranks);

/// Host-side fill / check of a region inside a holder buffer `base` (its start).
void fill_region(uint8_t* base, const Region& r);
/// Returns the first mismatching byte offset within the region, or -1.
int64_t check_region(const uint8_t* base, const Region& r);

/// Fault injection: the byte span [offset, offset + bytes) of a region that corrupt() overwrites
/// with kCorruptByte (bf16 0x4747 = 50944, far above the content's |x| < 2): from the region's
/// middle (rounded down to an even byte), at most 4 KiB.
inline constexpr uint8_t kCorruptByte = 0x47;
std::pair<uint64_t, uint64_t> corrupt_span(const Region& r);

/// The token rows (in the rank's Q buffer) of query blocks `check` (indices into rq.blocks),
/// in order: the rows OutputRows holds.
std::vector<int> checked_rows(const RankQueries& rq, const std::vector<int>& check);

/// Appends p to a transfer's pieces, merged with the last one when both sides continue it (and
/// the last one is a whole number of kAlign bytes); a piece of 0 bytes is dropped.
void append_piece(std::vector<Piece>& pieces, const Piece& p);

/// Median of a non-empty vector (by copy).
double median(std::vector<double> v);

/// Per-backend execution of one lowered plan.
class Backend {
 public:
  virtual ~Backend() = default;
  /// Allocates buffers for `plan` and checks resources. No work is run on failure.
  virtual Status prepare(const policy::Plan& plan, const ExecPlan& exec,
                         const ReplayOptions& opt) = 0;
  /// Writes the source content of `layer`.
  virtual Status fill(const ExecLayer& layer) = 0;
  /// Poisons the receive regions, runs one iteration, returns start/end per activity (seconds
  /// from the common start; both 0 for skipped ones) in `starts`/`ends`.
  virtual Status run_once(const ExecLayer& layer, std::vector<double>& starts,
                          std::vector<double>& ends) = 0;
  /// Checks every receive region; on mismatch returns the index into layer.checks and the
  /// byte offset; {-1, -1} when all are good.
  virtual Result<std::pair<int64_t, int64_t>> verify(const ExecLayer& layer) = 0;
  /// Overwrites a span of a received region with values far outside the content's range
  /// (fault injection; corrupt_span).
  virtual Status corrupt(const ExecLayer& layer, const Region& r) = 0;
  /// Real compute: O and LSE of every AttnWork of `rank` for the tokens of its query blocks
  /// `check` (indices into RankQueries::blocks), and the reference for them. Shapes: o
  /// [works][heads of the work][rows][head_dim] as float, lse [works][heads][rows]; o_ref
  /// [heads][rows][head_dim], lse_ref [heads][rows]; rows = the checked tokens in order.
  struct OutputRows {
    std::vector<std::vector<float>> o, lse;
    std::vector<float> o_ref, lse_ref;
  };
  virtual Result<OutputRows> read_outputs(const ExecLayer& layer, int rank,
                                          const std::vector<int>& check) = 0;
  virtual std::string description() const = 0;
};

std::unique_ptr<Backend> make_host_backend();
/// nullptr when the build has no CUDA backend.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace sparsp::replay::detail
