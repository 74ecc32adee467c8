#pragma once
// A small in-memory Pattern for the policy tests: one static mask per head, 1D token sequence.
#include <functional>
#include <string>
#include <vector>

#include "sparsp/pattern.hpp"
#include "sparsp/policy.hpp"

namespace sparsp::testing {

class TestPattern : public patterns::Pattern {
 public:
  /// `blocks` blocks of `block_tokens` tokens (last one `last_tokens` if > 0), `heads` heads,
  /// mask(h, q, k) from `fn`.
  TestPattern(int blocks, int block_tokens, int heads, int head_dim,
              const std::function<bool(int, int, int)>& fn, int last_tokens = 0, int layers = 1,
              int text_blocks_at_end = 0) {
    model_.name = "test";
    model_.heads = heads;
    model_.head_dim = head_dim;
    model_.layers = layers;
    model_.hidden = heads * head_dim;
    model_.dtype_bytes = 2;
    model_.steps = 1;
    layout_.block_tokens = block_tokens;
    layout_.num_blocks = blocks;
    layout_.num_video_blocks = blocks - text_blocks_at_end;
    layout_.num_text_blocks = text_blocks_at_end;
    layout_.first_text_block = text_blocks_at_end > 0 ? blocks - text_blocks_at_end : -1;
    for (int b = 0; b < blocks; ++b)
      layout_.tokens_in_block.push_back(b == blocks - 1 && last_tokens > 0 ? last_tokens
                                                                           : block_tokens);
    model_.latent = {1, 1, 0};
    for (int t : layout_.tokens_in_block) model_.latent[2] += t;
    for (int h = 0; h < heads; ++h) {
      patterns::BlockMask m(blocks, blocks);
      for (int q = 0; q < blocks; ++q)
        for (int k = 0; k < blocks; ++k)
          if (fn(h, q, k)) m.set(q, k);
      masks_.push_back(std::move(m));
    }
  }
  const patterns::ModelSpec& model() const override { return model_; }
  /// K/V heads of the model (grouped-query attention; 0: heads).
  void set_kv_heads(int kv_heads) { model_.kv_heads = kv_heads; }
  /// Classifier-free guidance of the model JSON's pipeline ("batch2": cond and uncond batched).
  void set_cfg(const std::string& cfg) { model_.pipeline.cfg = cfg; }
  const patterns::BlockLayout& layout() const override { return layout_; }
  int steps() const override { return 1; }
  int layers() const override { return model_.layers; }
  int heads() const override { return model_.heads; }
  const patterns::BlockMask& mask(int, int, int head) override {
    return masks_[static_cast<size_t>(head)];
  }
  int64_t mask_group(int, int) const override { return 0; }
  std::string describe() const override { return "test"; }

  /// LayerInput for (step 0, layer 0) with the given placement.
  policy::LayerInput input(const policy::Placement& pl, const policy::RankTopology& rt,
                           policy::Granularity g = policy::Granularity::block) {
    policy::LayerInput in;
    in.model = &model_;
    in.layout = &layout_;
    for (auto& m : masks_) in.masks.push_back(&m);
    in.placement = &pl;
    in.ranks = &rt;
    in.granularity = g;
    return in;
  }

 private:
  patterns::ModelSpec model_;
  patterns::BlockLayout layout_;
  std::vector<patterns::BlockMask> masks_;
};

/// The plan's tasks tagged `tag` (on `rank`; -1: any), in plan order.
inline std::vector<const policy::AttentionTask*> tasks_tagged(const policy::CommPlan& p,
                                                              const std::string& tag,
                                                              int rank = -1) {
  std::vector<const policy::AttentionTask*> v;
  for (const auto& t : p.tasks)
    if (t.tag == tag && (rank < 0 || t.rank == rank)) v.push_back(&t);
  return v;
}
/// The index of `t` (a pointer into p.tasks) in the plan.
inline int index_of(const policy::CommPlan& p, const policy::AttentionTask* t) {
  return static_cast<int>(t - p.tasks.data());
}

/// Contiguous placement of `blocks` blocks on P ranks, blocks / P each (REQUIRES divisibility).
inline policy::Placement contiguous(int blocks, int P) {
  policy::Placement pl{"contiguous", P, {}};
  for (int b = 0; b < blocks; ++b) pl.block_owner.push_back(b / (blocks / P));
  return pl;
}

}  // namespace sparsp::testing
