// Generators against hand-computed masks on tiny canvases, and known densities on real presets.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "../../patterns/generators.hpp"  // select_topk / select_cdf (module-private)
#include "sparsp/pattern.hpp"

using namespace sparsp::patterns;

namespace {

ModelSpec grid_model(int t, int h, int w, int text = 0, TextPosition pos = TextPosition::none,
                     int heads = 2, int layers = 2) {
  ModelSpec m;
  m.name = "grid";
  m.latent = {t, h, w};
  m.text_tokens = text;
  m.text_position = pos;
  m.heads = heads;
  m.head_dim = 4;
  m.layers = layers;
  m.steps = 3;
  return m;
}

std::unique_ptr<Pattern> make(const ModelSpec& m, const PatternOptions& o) {
  auto p = make_pattern(m, o);
  if (!p.ok()) FAIL(p.error().message);
  return std::move(p.value());
}

// Rows as strings of '0'/'1'.
std::vector<std::string> rows_of(const BlockMask& m) {
  std::vector<std::string> r;
  for (int q = 0; q < m.rows(); ++q) {
    std::string s;
    for (int k = 0; k < m.cols(); ++k) s += m.get(q, k) ? '1' : '0';
    r.push_back(s);
  }
  return r;
}

}  // namespace

TEST_CASE("dense") {
  auto p = make(grid_model(2, 4, 4, 3, TextPosition::end), {.kind = "dense", .block_tokens = 4});
  // 32 video tokens / 4 = 8 blocks + 1 text block = 9 -> 81 pairs.
  CHECK(p->mask(0, 0, 0).count() == 81);
  CHECK(p->mask_group(2, 1) == p->mask_group(0, 0));
  CHECK(p->is_static());
}

TEST_CASE("sta on a 1x1x4 canvas, window 3 in w: clamped window") {
  // Tiles 1x1x1, block 1: 4 tiles in a row. Window 3 centred and clamped inside 0..3:
  // q0: start clamp(0-1,0,1)=0 -> {0,1,2}; q1: 0 -> {0,1,2}; q2: 1 -> {1,2,3}; q3: 1 -> {1,2,3}.
  PatternOptions o{.kind = "sta", .block_tokens = 1, .tile = {1, 1, 1}, .window = {1, 1, 3}};
  auto p = make(grid_model(1, 1, 4), o);
  CHECK(rows_of(p->mask(0, 0, 0)) == std::vector<std::string>{"1110", "1110", "0111", "0111"});
}

TEST_CASE("sta on a 2x4x4 grid with 1x2x2 tiles") {
  // Tile grid 2x2x2, block 4 = one tile: block b = t*4 + h*2 + w.
  // Window (2,1,1): both frames, same (h, w) tile -> q attends k iff b%4 equal.
  PatternOptions o{.kind = "sta", .block_tokens = 4, .tile = {1, 2, 2}, .window = {2, 1, 1}};
  auto p = make(grid_model(2, 4, 4), o);
  const BlockMask& m = p->mask(0, 0, 0);
  for (int q = 0; q < 8; ++q)
    for (int k = 0; k < 8; ++k) CHECK(m.get(q, k) == (q % 4 == k % 4));
  // Window (1,2,2) covers the whole frame: q attends k iff same frame (q/4 == k/4).
  o.window = {1, 2, 2};
  auto p2 = make(grid_model(2, 4, 4), o);
  for (int q = 0; q < 8; ++q)
    for (int k = 0; k < 8; ++k) CHECK(p2->mask(0, 0, 0).get(q, k) == (q / 4 == k / 4));
  // Block 2 (half a tile): each tile is 2 blocks, so tile rule applies to block pairs (q/2, k/2).
  o.block_tokens = 2;
  o.window = {2, 1, 1};
  auto p3 = make(grid_model(2, 4, 4), o);
  for (int q = 0; q < 16; ++q)
    for (int k = 0; k < 16; ++k) CHECK(p3->mask(0, 0, 0).get(q, k) == ((q / 2) % 4 == (k / 2) % 4));
}

TEST_CASE("sta with text at the end: text rows and columns dense") {
  PatternOptions o{.kind = "sta", .block_tokens = 4, .tile = {1, 2, 2}, .window = {1, 1, 1}};
  auto p = make(grid_model(2, 4, 4, 3, TextPosition::end), o);
  // 8 tile blocks on the diagonal + text row (9) + text column (9) - shared corner = 8 + 17.
  CHECK(p->mask(0, 0, 0).count() == 25);
  CHECK(p->mask(0, 0, 0).get(8, 3));
  CHECK(p->mask(0, 0, 0).get(3, 8));
}

TEST_CASE(
    "sta window (3,3,3) on the 30x48x80 HunyuanVideo STA canvas: density by counting tile pairs") {
  // Tile grid 30/6 x 48/8 x 80/8 = 5 x 6 x 10 = 300 tiles. Count, independently of the library,
  // the (query tile, key tile) pairs where the key lies in the query's clamped window.
  const int n[3] = {5, 6, 10}, w[3] = {3, 3, 3};
  long pairs = 0;
  for (int a = 0; a < n[0]; ++a)
    for (int b = 0; b < n[1]; ++b)
      for (int c = 0; c < n[2]; ++c)
        for (int x = 0; x < n[0]; ++x)
          for (int y = 0; y < n[1]; ++y)
            for (int z = 0; z < n[2]; ++z) {
              const int q[3] = {a, b, c}, k[3] = {x, y, z};
              bool in = true;
              for (int d = 0; d < 3; ++d) {
                int s = q[d] - w[d] / 2;
                s = std::max(0, std::min(s, n[d] - w[d]));
                in = in && k[d] >= s && k[d] < s + w[d];
              }
              pairs += in;
            }
  // Per dimension the clamped window holds exactly w tiles, so pairs = 300 * 27 = 8100 and the
  // video density is (3/5)(3/6)(3/10) = 0.09.
  CHECK(pairs == 8100);
  auto model = load_model("hunyuanvideo-sta");
  REQUIRE(model.ok());
  for (int block : {384, 128}) {
    auto p = make(*model, {.kind = "sta", .block_tokens = block, .window = {3, 3, 3}});
    StatsOptions so;
    so.max_steps = 2;
    auto st = compute_stats(*p, so);
    REQUIRE(st.ok());
    CHECK(st->video_density == doctest::Approx(static_cast<double>(pairs) / 90000.0).epsilon(1e-12));
    if (block == 384) {
      // 300 video blocks + 1 text block (256 tokens): (8100 + 301 + 301 - 1) / 301^2.
      CHECK(st->density == doctest::Approx(8701.0 / (301.0 * 301.0)).epsilon(1e-12));
      CHECK(st->distinct_groups == 1);
    }
  }
}

TEST_CASE("sta per-head windows give distinct groups only where the head tuples differ") {
  ModelSpec m = grid_model(1, 1, 4, 0, TextPosition::none, 2, 3);
  PatternOptions o{.kind = "sta", .block_tokens = 1, .tile = {1, 1, 1}};
  // Layer 0 and 2 identical, layer 1 different.
  o.head_windows = {{1, 1, 1}, {1, 1, 3}, {1, 1, 3}, {1, 1, 3}, {1, 1, 1}, {1, 1, 3}};
  auto p = make(m, o);
  CHECK(p->mask_group(0, 0) == p->mask_group(0, 2));
  CHECK(p->mask_group(0, 0) != p->mask_group(0, 1));
  CHECK(p->stored_masks() == 2);
  CHECK(p->mask(0, 0, 0).count() == 4);   // window 1: identity
  CHECK(p->mask(0, 0, 1).count() == 12);  // window 3: 4 rows x 3
}

TEST_CASE("sta errors: window larger than the canvas, block not dividing the tile") {
  auto m = load_model("hunyuanvideo-sta");
  REQUIRE(m.ok());
  auto p = make_pattern(*m, {.kind = "sta", .block_tokens = 384, .window = {7, 3, 3}});
  REQUIRE(!p.ok());
  CHECK(p.error().message.find("window 7,3,3 larger than the tile grid 5,6,10") !=
        std::string::npos);
  auto p2 = make_pattern(*m, {.kind = "sta", .block_tokens = 100});
  REQUIRE(!p2.ok());
  CHECK(p2.error().message.find("does not divide the tile volume 6x8x8 = 384") !=
        std::string::npos);
}

TEST_CASE("radial: band halving with frame distance (S=16, B=4, 8 frames)") {
  // 8 frames of 1x4x4 = 16 tokens, block 4: 4 blocks per frame, block id = 4*frame + r.
  // 2^bitlen(16) = 32; base(d) = 32 / 2^bitlen(d): d=2,3 -> 8, d=4..7 -> 4 (never < B=4: no
  // frame pair is dropped). Hunyuan rule: d <= 1 full; else w = max(base * decay, B) with decay 1:
  // d=2,3 -> w = 8, d=4..7 -> w = 4. Block rule for rows r (tokens 4r..4r+3) and columns c:
  //   w = 8: |r - c| = 2, e.g. r=0, c=2: column x=8..11 gets 4,3,2,1 rows hit -> dense (> 4/3)
  //          3 of 4 non-empty columns -> 75% > 60% kept; |r - c| = 3: no token within 8 -> dropped.
  //   w = 4: |r - c| = 1 kept (same 4,3,2,1 profile); |r - c| = 2: no token within 4 -> dropped.
  // Column frame 0 is the attention sink (all kept).
  ModelSpec m = grid_model(8, 4, 4);
  auto p = make(m, {.kind = "radial", .block_tokens = 4, .decay = 1.0});
  const BlockMask& mk = p->mask(0, 0, 0);
  for (int q = 0; q < 32; ++q)
    for (int k = 0; k < 32; ++k) {
      const int i = q / 4, j = k / 4, d = std::abs(i - j), dr = std::abs(q % 4 - k % 4);
      bool expect;
      if (j == 0 || d <= 1)
        expect = true;
      else if (d <= 3)
        expect = dr <= 2;
      else
        expect = dr <= 1;
      INFO("q=" << q << " k=" << k);
      CHECK(mk.get(q, k) == expect);
    }
}

TEST_CASE("radial: far frame pairs kept only every k-th frame (S=4, B=4)") {
  // 8 frames of 1x1x4 tokens, block 4 = one frame. 2^bitlen(4) = 8: base(1) = 4, base(2..3) = 2,
  // base(4..7) = 1. base < B=4 -> keep only if d % floor(4 / base) == 0: d=2 kept (2 % 2), d=3
  // dropped, d=4 kept (4 % 4), d=5,6,7 dropped. Kept pairs have w >= B: the whole frame -> dense.
  ModelSpec m = grid_model(8, 1, 4);
  auto p = make(m, {.kind = "radial", .block_tokens = 4, .decay = 1.0});
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      const int d = std::abs(i - j);
      const bool expect = j == 0 || d <= 2 || d == 4;
      CHECK(p->mask(0, 0, 0).get(i, j) == expect);
    }
}

TEST_CASE("svg spatial and temporal heads (4 frames of 8 tokens, block 4)") {
  // S = 8, F = 4, band 1.5 frames -> half-width 0.75 frames.
  // Spatial: |q - k| < round_down(0.75 * 8 = 6, 4) = 4 tokens; blocks a, b are 4 tokens apart per
  // index step, nearest tokens 4|a-b| - 3 apart -> kept iff |a - b| <= 1; plus the sink frame 0
  // (blocks 0, 1).
  // Temporal: |pos_q - pos_k| < max(1, floor(0.75 * 8 / 4)) = 1: same position in the frame.
  // Block a covers positions 4(a%2)..4(a%2)+3 -> kept iff a%2 == b%2.
  ModelSpec m = grid_model(4, 1, 8, 0, TextPosition::none, 2, 1);
  PatternOptions o{.kind = "svg", .block_tokens = 4, .svg_band_frames = 1.5};
  o.svg_spatial = {1, 0};  // head 0 spatial, head 1 temporal
  auto p = make(m, o);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      CHECK(p->mask(0, 0, 0).get(a, b) == (std::abs(a - b) <= 1 || b <= 1));
      CHECK(p->mask(0, 0, 1).get(a, b) == (a % 2 == b % 2));
    }
  // Ratio assignment: with ratio 0.5 and 2 heads, exactly one spatial head per layer.
  PatternOptions r{.kind = "svg", .block_tokens = 4, .seed = 7};
  auto pr = make(m, r);
  CHECK((pr->mask(0, 0, 0) == p->mask(0, 0, 0)) != (pr->mask(0, 0, 1) == p->mask(0, 0, 0)));
}

TEST_CASE("random: density 0 and 1 exact, 0.3 within 5 sigma, deterministic per seed") {
  ModelSpec m = grid_model(4, 16, 16);  // 1024 tokens, block 4 -> 256 blocks, 65536 pairs
  auto p0 = make(m, {.kind = "random", .block_tokens = 4, .density = 0.0});
  CHECK(p0->mask(0, 0, 0).count() == 0);
  auto p1 = make(m, {.kind = "random", .block_tokens = 4, .density = 1.0});
  CHECK(p1->mask(0, 1, 1).count() == 65536);
  auto a = make(m, {.kind = "random", .block_tokens = 4, .density = 0.3, .seed = 1});
  auto b = make(m, {.kind = "random", .block_tokens = 4, .density = 0.3, .seed = 1});
  auto c = make(m, {.kind = "random", .block_tokens = 4, .density = 0.3, .seed = 2});
  // Binomial(65536, 0.3): mean 19660.8, sd sqrt(65536 * 0.21) = 117.3 -> +-5 sd = +-587.
  CHECK(std::abs(static_cast<double>(a->mask(0, 0, 0).count()) - 19660.8) < 587);
  CHECK(a->mask(2, 1, 1) == b->mask(2, 1, 1));
  CHECK(!(a->mask(0, 0, 0) == c->mask(0, 0, 0)));
  CHECK(!(a->mask(0, 0, 0) == a->mask(0, 0, 1)));
}

TEST_CASE("topk synthetic: k per row, nearest blocks without noise, varies by step with noise") {
  // 1x1x8 grid, block 1: 8 blocks on a line. Without noise the score is -|dw| / l: the k best
  // are the k nearest (ties to the lower index).
  ModelSpec m = grid_model(1, 1, 8);
  PatternOptions o{.kind = "topk", .block_tokens = 1, .topk = 1, .score_noise = 0};
  auto p1 = make(m, o);
  CHECK(rows_of(p1->mask(0, 0, 0)) == std::vector<std::string>{"10000000", "01000000", "00100000",
                                                               "00010000", "00001000", "00000100",
                                                               "00000010", "00000001"});
  o.topk = 3;
  auto p3 = make(m, o);
  // q0: {0,1,2}; q7: {5,6,7}; q3: {2,3,4}.
  CHECK(rows_of(p3->mask(0, 0, 0))[0] == "11100000");
  CHECK(rows_of(p3->mask(0, 0, 0))[3] == "00111000");
  CHECK(rows_of(p3->mask(0, 0, 0))[7] == "00000111");

  ModelSpec big = grid_model(4, 16, 16, 128, TextPosition::end);
  PatternOptions d{.kind = "topk", .block_tokens = 16, .seed = 3, .topk = 5, .score_noise = 2.0};
  auto p = make(big, d);
  CHECK(!p->is_static());
  const BlockLayout& L = p->layout();  // 64 video blocks + 8 text blocks
  CHECK(L.num_video_blocks == 64);
  BlockMask s0 = p->mask(0, 0, 0);
  for (int q = 0; q < L.num_video_blocks; ++q) {
    int video = 0;
    for (int k = 0; k < L.num_video_blocks; ++k) video += s0.get(q, k);
    CHECK(video == 5);
  }
  CHECK(s0.get(70, 3));  // text rows dense
  CHECK(p->mask_group(0, 0) != p->mask_group(1, 0));
  const BlockMask& s1 = p->mask(1, 0, 0);
  CHECK(!(s0 == s1));
  // Same seed, same masks.
  auto q = make(big, d);
  CHECK(q->mask(0, 0, 0) == s0);
}

TEST_CASE("cdf selection: smallest set reaching the softmax mass") {
  // Scores log(0.5), log(0.3), log(0.2): probabilities 0.5, 0.3, 0.2.
  const float s[3] = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const int idx[3] = {0, 1, 2};
  BlockMask m(1, 3);
  select_cdf(s, 1, 3, 0.75, idx, idx, m);  // 0.5 + 0.3 = 0.8 >= 0.75
  CHECK(rows_of(m)[0] == "110");
  BlockMask m2(1, 3);
  select_cdf(s, 1, 3, 0.5, idx, idx, m2);  // 0.5 reaches 0.5
  CHECK(rows_of(m2)[0] == "100");
  BlockMask m3(1, 3);
  const float tie[3] = {1, 1, 1};
  select_topk(tie, 1, 3, 2, idx, idx, m3);  // ties: lower column first
  CHECK(rows_of(m3)[0] == "110");
}

TEST_CASE("kind errors") {
  ModelSpec m = grid_model(1, 1, 8);
  auto p = make_pattern(m, {.kind = "nope"});
  REQUIRE(!p.ok());
  CHECK(p.error().message.find("unknown pattern kind 'nope'") != std::string::npos);
  auto r = make_pattern(m, {.kind = "random", .block_tokens = 1, .density = 1.5});
  REQUIRE(!r.ok());
  auto c = make_pattern(m, {.kind = "cdf", .block_tokens = 1, .threshold = 0});
  REQUIRE(!c.ok());
  auto k = make_pattern(m, {.kind = "topk", .block_tokens = 1, .topk = 9});
  REQUIRE(!k.ok());
  CHECK(k.error().message.find("exceeds the 8 video blocks") != std::string::npos);
  auto rad = make_pattern(m, {.kind = "radial", .block_tokens = 1, .order = "tile"});
  REQUIRE(!rad.ok());
}

namespace {

// The synthetic score model exactly as patterns/README.md documents it, scored over full rows
// (no candidate pruning) and selected with select_topk: score(q, k) = -sum_d |c_q,d - c_k,d| *
// inv_d + noise, inv_d = 1 / (length * extent_d * exp(U - 0.5)) for the metric variant of
// (layer, head), noise = amp * (2 u - 1) with u = (16 hash bits + 0.5) / 2^16 from splitmix64 of
// (seed, step, layer, head, q, k). Its hash constants are the generator's definition (the same
// since the generator was written); this test checks that the pruned generator (candidates, the
// [tau, tau_hi) band, the fallback) selects exactly the top k of the full rows.
BlockMask reference_topk(const BlockLayout& L, const PatternOptions& o, int k, int step,
                         int layer, int head) {
  const int nv = L.num_video_blocks;
  std::array<float, 3> extent{};
  if (L.order == TokenOrder::tile) {
    for (int d = 0; d < 3; ++d) extent[static_cast<size_t>(d)] = static_cast<float>(L.tile[static_cast<size_t>(d)]);
  } else {
    const int W = L.grid[2], H = L.grid[1], B = L.block_tokens;
    extent = {1.0f, static_cast<float>(std::clamp(B / W, 1, H)), static_cast<float>(std::min(B, W))};
  }
  const uint64_t seed = o.seed;
  const int variant = static_cast<int>(
      mix64(seed ^ mix64((static_cast<uint64_t>(layer) << 40) ^
                         (static_cast<uint64_t>(head) << 8) ^ 0x5a5aull)) % 8);
  std::array<float, 3> inv{};
  for (int d = 0; d < 3; ++d) {
    const uint64_t r = mix64(seed ^ mix64((static_cast<uint64_t>(variant) << 8) ^
                                          static_cast<uint64_t>(d) ^ 0xabcdefull));
    inv[static_cast<size_t>(d)] = static_cast<float>(
        1.0 / (o.score_length * extent[static_cast<size_t>(d)] * std::exp(unit_from(r) - 0.5)));
  }
  const uint64_t base =
      mix64(seed ^ mix64((static_cast<uint64_t>(step) << 42) ^
                         (static_cast<uint64_t>(layer) << 21) ^ static_cast<uint64_t>(head)));
  const float amp = static_cast<float>(o.score_noise);
  const float nscale = 2.0f * amp / 65536.0f, noff = amp * (1.0f / 65536.0f - 1.0f);
  std::vector<float> s(static_cast<size_t>(nv) * static_cast<size_t>(nv));
  for (int q = 0; q < nv; ++q)
    for (int c = 0; c < nv; ++c) {
      const auto& a = L.block_center[static_cast<size_t>(q)];
      const auto& b = L.block_center[static_cast<size_t>(c)];
      float v = -(std::fabs(a[0] - b[0]) * inv[0] + std::fabs(a[1] - b[1]) * inv[1] +
                  std::fabs(a[2] - b[2]) * inv[2]);
      if (amp > 0) {
        const uint64_t r = mix64(base + static_cast<uint64_t>(q) * static_cast<uint64_t>((nv + 3) / 4) +
                                 static_cast<uint64_t>(c / 4)) >> (16 * (c % 4));
        v += static_cast<float>(r & 0xffff) * nscale + noff;
      }
      s[static_cast<size_t>(q) * static_cast<size_t>(nv) + static_cast<size_t>(c)] = v;
    }
  std::vector<int> idx(static_cast<size_t>(nv));
  for (int i = 0; i < nv; ++i) idx[static_cast<size_t>(i)] = L.first_video_block + i;
  BlockMask m(L.num_blocks, L.num_blocks);
  select_topk(s.data(), nv, nv, k, idx.data(), idx.data(), m);
  return m;
}

}  // namespace

TEST_CASE("topk synthetic equals the top k of fully scored rows (pruning is exact)") {
  // Text first (226 tokens / block 8 = 29 text blocks: video columns start at block 29, not a
  // multiple of 4 or 64) and text last; raster and tile order; noise from none to larger than
  // the whole distance range (then every column is a candidate and the band rarely holds).
  struct Case {
    ModelSpec m;
    std::string order;
    int block, k;
    double noise;
  };
  const std::vector<Case> cases = {
      {grid_model(3, 12, 16, 226, TextPosition::start), "raster", 8, 7, 0.5},
      {grid_model(3, 12, 16, 226, TextPosition::start), "raster", 8, 20, 0.05},
      {grid_model(3, 12, 16, 226, TextPosition::start), "raster", 8, 5, 0.0},
      {grid_model(4, 8, 8, 64, TextPosition::end), "tile", 16, 9, 0.5},
      {grid_model(4, 8, 8, 64, TextPosition::end), "tile", 16, 12, 8.0},
      {grid_model(5, 9, 10), "raster", 3, 40, 1.5},
  };
  for (const Case& c : cases) {
    PatternOptions o{.kind = "topk", .block_tokens = c.block, .order = c.order, .seed = 11,
                     .topk = c.k, .text_dense = false, .score_noise = c.noise};
    if (c.order == "tile") o.tile = {2, 4, 4};
    auto p = make(c.m, o);
    const BlockLayout& L = p->layout();
    REQUIRE(static_cast<int>(L.block_center.size()) == L.num_video_blocks);
    for (int step = 0; step < 2; ++step)
      for (int layer = 0; layer < 2; ++layer)
        for (int h = 0; h < p->heads(); ++h) {
          CAPTURE(c.order);
          CAPTURE(c.k);
          CAPTURE(c.noise);
          const BlockMask ref = reference_topk(L, o, c.k, step, layer, h);
          CHECK(p->mask(step, layer, h) == ref);
        }
  }
}

TEST_CASE("generators refuse a layout whose masks would not fit the memory limit") {
  // One step of masks, all distinct at worst: layers x heads x blocks^2 / 8 bytes, plus 4 bytes
  // of float scores per block pair. 1000 blocks, 60 layers x 24 heads: 1e6 x (180 + 4).
  CHECK(pattern_memory_bytes(1000, 60, 24) == doctest::Approx(1.84e8));
  auto m = load_model("hunyuanvideo-sta");
  REQUIRE(m.ok());
  PatternOptions o;
  o.kind = "random";
  o.block_tokens = 384;  // 301 blocks: 90,601 pairs x (60 x 24 / 8 + 4) = 16.67 MB
  o.max_memory_bytes = 16e6;
  auto p = make_pattern(*m, o);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().exit_code == 2);
  CHECK(p.error().message.find("block 384 gives 301 blocks") != std::string::npos);
  o.max_memory_bytes = 17e6;
  CHECK(make_pattern(*m, o).ok());
  o.max_memory_bytes = 0;  // no check (the study path has its own)
  CHECK(make_pattern(*m, o).ok());
}
