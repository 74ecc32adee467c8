#pragma once
// Real-compute lowering (private to replay/; lower_compute.cpp).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "exec_plan.hpp"

namespace sparsp::replay::detail {

/// (holder, block) -> byte offset of the holder's KV slot of the block (allocated on first use).
using SlotFn = std::function<uint64_t(int, int)>;

/// Why `plan` cannot be replayed with real attention (empty: it can).
std::string real_compute_obstacle(const policy::Plan& plan, const ReplayOptions& opt);

/// Fills el.queries, el.attn, el.attn_of_act, el.block_keys and el.block_token_offsets for layer
/// plan `li` (block_bytes: each block's K and V bytes), and the ExecPlan maxima. Errors (exit 2):
/// a block that is not a whole number of tokens, a head range outside the plan's heads.
Status lower_attention(const policy::Plan& plan, const ReplayOptions& opt, int li,
                       const std::vector<double>& block_bytes, const SlotFn& slot_of, ExecLayer& el,
                       ExecPlan& ex);

}  // namespace sparsp::replay::detail
