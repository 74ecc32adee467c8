// Issue 19 item 3: the causal generator, long sequences (2^20 tokens) and kv_heads in model JSON.
#include <doctest/doctest.h>

#include <string>

#include "sparsp/pattern.hpp"

using namespace sparsp::patterns;

TEST_CASE("causal: lower triangle with the diagonal, density (n + 1) / (2n)") {
  for (int n : {1, 7, 16, 100}) {
    CAPTURE(n);
    ModelSpec m;
    m.name = "llm";
    m.latent = {1, 1, n * 128};
    m.heads = 2;
    m.head_dim = 64;
    m.layers = 1;
    m.steps = 1;
    PatternOptions o;
    o.kind = "causal";
    o.block_tokens = 128;
    auto p = make_pattern(m, o);
    if (!p.ok()) FAIL(p.error().message);
    const BlockMask& mask = (*p)->mask(0, 0, 1);
    CHECK(mask.get(n - 1, 0));
    CHECK(mask.get(n - 1, n - 1));
    if (n > 1) CHECK_FALSE(mask.get(0, 1));
    // n (n + 1) / 2 active pairs of n^2.
    CHECK(mask.count() == static_cast<int64_t>(n) * (n + 1) / 2);
    auto st = compute_stats(**p);
    REQUIRE(st.ok());
    CHECK(st->density == doctest::Approx((n + 1.0) / (2.0 * n)));
  }
}

TEST_CASE("a 2^20-token latent loads, the limit is stated") {
  const std::string base = R"({"name": "llm", "heads": 8, "head_dim": 64, "layers": 1, "latent": )";
  auto m = parse_model(base + "[1, 1, 1048576]}", "m.json");
  REQUIRE(m.ok());
  CHECK(m->video_tokens() == 1048576);
  CHECK(m->kv_heads == 8);  // default: heads
  auto big = parse_model(base + "[1, 1, 268435457]}", "m.json");
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().message.find("m.json:/latent/2: expected an integer in 1..268435456 (2^28)") !=
        std::string::npos);
  auto vol = parse_model(base + "[2, 16384, 16384]}", "m.json");
  REQUIRE_FALSE(vol.ok());
  CHECK(vol.error().message.find("at most 268435456") != std::string::npos);
}

TEST_CASE("kv_heads must divide heads") {
  const std::string base = R"({"name": "g", "heads": 8, "head_dim": 64, "layers": 1,
      "latent": [1, 1, 1024], "kv_heads": )";
  auto ok = parse_model(base + "2}", "g.json");
  REQUIRE(ok.ok());
  CHECK(ok->kv_heads == 2);
  auto bad = parse_model(base + "3}", "g.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("g.json:/kv_heads: kv_heads (3) must divide heads (8)") !=
        std::string::npos);
}
