// Statistics, union, db-SP imbalance and KV demand on hand-worked masks.
#include <doctest/doctest.h>

#include "sparsp/pattern.hpp"

using namespace sparsp::patterns;

namespace {

// 4 blocks, 2 heads, 1 layer, 1 step. Block 3 is partial (1 of 2 tokens).
class FakePattern : public Pattern {
 public:
  FakePattern() {
    model_.name = "fake";
    model_.latent = {1, 1, 7};
    model_.heads = 2;
    model_.head_dim = 4;
    model_.layers = 1;
    model_.steps = 1;
    layout_ = make_layout(model_, 2, TokenOrder::raster, {1, 1, 1}).value();
    masks_[0] = BlockMask(4, 4);
    masks_[1] = BlockMask(4, 4);
    // head 0: q0 -> {0,2}, q1 -> {1}, q2 -> {2,3}, q3 -> {0}; head 1: q1 -> {3}.
    for (auto [q, k] : {std::pair{0, 0}, {0, 2}, {1, 1}, {2, 2}, {2, 3}, {3, 0}})
      masks_[0].set(q, k);
    masks_[1].set(1, 3);
  }
  const ModelSpec& model() const override { return model_; }
  const BlockLayout& layout() const override { return layout_; }
  int steps() const override { return 1; }
  int layers() const override { return 1; }
  int heads() const override { return 2; }
  const BlockMask& mask(int, int, int h) override { return masks_[h]; }
  int64_t mask_group(int, int) const override { return 0; }
  std::string describe() const override { return "fake"; }

 private:
  ModelSpec model_;
  BlockLayout layout_;
  BlockMask masks_[2];
};

}  // namespace

TEST_CASE("stats of the hand-made pattern") {
  FakePattern p;
  CHECK(p.layout().tokens_in_block == std::vector<int>{2, 2, 2, 1});
  auto s = compute_stats(p);
  REQUIRE(s.ok());
  // head 0: 6 of 16, head 1: 1 of 16 -> mean 7/32.
  CHECK(s->density == doctest::Approx(7.0 / 32));
  CHECK(s->video_density == doctest::Approx(7.0 / 32));
  CHECK(s->head_density[0] == doctest::Approx(6.0 / 16));
  // Union: 7 distinct pairs of 16.
  CHECK(s->union_density == doctest::Approx(7.0 / 16));
  // |q-k|: head 0: 0+2+0+0+1+3 = 6, head 1: 2 -> 8 over 7 pairs.
  CHECK(s->mean_block_distance == doctest::Approx(8.0 / 7));
  BlockMask u = union_mask(p, 0, 0);
  CHECK(active_kv_counts(u) == std::vector<int>{2, 2, 2, 1});
}

TEST_CASE("db-SP sparse imbalance ratio") {
  FakePattern p;
  // Head groups {h0}, {h1}; block groups {q0,q1}, {q2,q3}. Work: (h0, g0) = 2+1 = 3,
  // (h0, g1) = 2+1 = 3, (h1, g0) = 1, (h1, g1) = 0 -> mean 7/4, max 3 -> 12/7.
  CHECK(sparse_imbalance_ratio(p, 0, 0, {0, 1}, 2, {0, 0, 1, 1}, 2) == doctest::Approx(12.0 / 7));
  // One group: balanced.
  CHECK(sparse_imbalance_ratio(p, 0, 0, {0, 0}, 1, {0, 0, 0, 0}, 1) == doctest::Approx(1.0));
}

TEST_CASE("KV demand, block and per-head granularity") {
  FakePattern p;
  DemandOptions o;
  o.gpus = 2;
  o.block_owner = {0, 0, 1, 1};
  o.bytes_per_block_head = 100;
  o.list_blocks = true;
  // Block mode. GPU 0 holds q0, q1: union rows {0,2} | {1,3} -> needs 2 (full, 100 B/head) and 3
  // (1 of 2 tokens: 50 B/head) from GPU 1, with both heads: (100 + 50) * 2 = 300.
  // GPU 1 holds q2, q3: {2,3} | {0} -> needs block 0 from GPU 0: 100 * 2 = 200.
  auto d = kv_demand(p, 0, 0, o);
  REQUIRE(d.ok());
  CHECK(d->bytes == std::vector<double>{0, 300, 200, 0});
  CHECK(d->blocks[1] == std::vector<int32_t>{2, 3});
  CHECK(d->blocks[2] == std::vector<int32_t>{0});
  // Per head: GPU 0 head 0 rows {0,2},{1} -> block 2 (100); head 1 row {3} -> block 3 (50): 150.
  // GPU 1 head 0 rows {2,3},{0} -> block 0 (100); head 1 nothing: 100.
  o.granularity = DemandGranularity::block_head;
  auto dh = kv_demand(p, 0, 0, o);
  REQUIRE(dh.ok());
  CHECK(dh->bytes == std::vector<double>{0, 150, 100, 0});
  CHECK(dh->block_heads[1] == std::vector<int32_t>{1, 1});
  auto m = demand_matrix(p, 0, 0, {0, 0, 1, 1}, 2, DemandGranularity::block, 100);
  REQUIRE(m.ok());
  CHECK(*m == std::vector<double>{0, 300, 200, 0});
  // Errors.
  o.block_owner = {0, 0, 2, 1};
  auto e = kv_demand(p, 0, 0, o);
  REQUIRE(!e.ok());
  CHECK(e.error().message == "<demand>:block_owner[2]: GPU 2 out of range 0..1");
  o.block_owner = {0, 0};
  CHECK(!kv_demand(p, 0, 0, o).ok());
}

TEST_CASE("dense HunyuanVideo demand for 8 GPUs: every GPU needs every block it does not own") {
  auto m = load_model("hunyuanvideo-720p");
  REQUIRE(m.ok());
  PatternOptions po;
  po.kind = "dense";
  po.block_tokens = 128;
  auto p = make_pattern(*m, po);
  REQUIRE(p.ok());
  const BlockLayout& L = (*p)->layout();
  // 118,800 / 128 = 928.125 -> 929 video blocks; 256 text tokens -> 2 blocks: 931.
  REQUIRE(L.num_blocks == 931);
  std::vector<int> owner(931);
  for (int b = 0; b < 931; ++b) owner[b] = b * 8 / 931;
  auto d = demand_matrix(**p, 0, 0, owner, 8, DemandGranularity::block, 0);
  REQUIRE(d.ok());
  // Bytes of GPU j's blocks: tokens owned * 2 (K,V) * 128 (head_dim) * 2 (bf16) * 24 heads.
  std::vector<double> owned(8, 0);
  for (int b = 0; b < 931; ++b) owned[owner[b]] += L.tokens_in_block[b] * 2.0 * 128 * 2 * 24;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) CHECK((*d)[i * 8 + j] == doctest::Approx(i == j ? 0 : owned[j]));
}
