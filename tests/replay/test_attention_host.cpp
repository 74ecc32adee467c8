// Host-side parts of the sparsp attention kernel (replay/attention_host.cpp): layout checks,
// active FLOPs, the derived bf16 tolerance and the comparison with the reference. No GPU needed.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "../../replay/attention.cuh"

namespace at = sparsp::replay::attention;

namespace {

// Two query blocks (128, 77 tokens), three KV blocks (64, 64, 5), shared lists {0,2} and {1}.
at::BlockSparseLayout small() {
  at::BlockSparseLayout l;
  l.heads = 2;
  l.head_dim = 128;
  l.q_block_offsets = {0, 128, 205};
  l.kv_block_offsets = {0, 64, 128, 133};
  l.row_ptr = {0, 2, 3};
  l.kv_blocks = {0, 2, 1};
  return l;
}

}  // namespace

TEST_CASE("attention layout: FLOPs of the active triples") {
  // 2 heads x (4*128*(64+5)*128 + 4*77*64*128) = 2 x (4521984 + 2523136) = 14090240.
  CHECK(at::active_flops(small()) == doctest::Approx(14090240.0));
  at::BlockSparseLayout p = small();
  p.per_head = true;  // head 0: {0,2} and {1}; head 1: {} and {0,1,2}
  p.row_ptr = {0, 2, 3, 3, 6};
  p.kv_blocks = {0, 2, 1, 0, 1, 2};
  // head 0 as above (7045120) + head 1: 4*77*133*128 = 5243392 -> 12288512.
  CHECK(at::active_flops(p) == doctest::Approx(12288512.0));
  CHECK(at::check_layout(p).ok());
  CHECK(small().scale() == doctest::Approx(1.0 / std::sqrt(128.0)));
}

TEST_CASE("attention layout: bad layouts are refused with the place named") {
  auto msg = [](const at::BlockSparseLayout& l) {
    auto s = at::check_layout(l, "plan.json");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().exit_code == 2);
    return s.error().message;
  };
  at::BlockSparseLayout l = small();
  l.head_dim = 96;
  CHECK(
      msg(l) ==
      "plan.json:/head_dim: head_dim 96 is not supported by the sparsp attention kernel (64, 128)");
  l = small();
  l.kv_blocks[1] = 3;
  CHECK(msg(l) == "plan.json:/kv_blocks/1: KV block 3 out of range (3 blocks)");
  l = small();
  l.kv_blocks[1] = 0;
  CHECK(msg(l) == "plan.json:/kv_blocks/1: KV block 0 repeated in the list of row 0");
  l = small();
  l.q_block_offsets = {0, 128, 128};
  CHECK(msg(l) == "plan.json:/q_block_offsets/2: offsets must rise strictly (128 then 128)");
  l = small();
  l.per_head = true;  // needs 2*2+1 row_ptr entries
  CHECK(msg(l) == "plan.json:/row_ptr: has 3 entries, expected 5");
  CHECK(at::check_layout(small()).ok());
}

TEST_CASE("attention tolerance: the derived bf16 bound") {
  // head_dim 128, scale 1/sqrt(128), |Q|,|K| <= 2, |V| <= 1:
  // dS = 2 * 128 * 2^-24 * (1/sqrt(128)) * 128 * 2 * 2 = 131072 * 2^-24 / sqrt(128)
  //    = 0.0078125 * 0.0883883 = 6.9053e-4
  const double s = 1.0 / std::sqrt(128.0);
  const at::Tolerance t = at::derive_tolerance(128, s, 2, 2, 1);
  const double ds = 2.0 * 128 * 128 * 4 * s / 16777216.0;
  CHECK(t.lse_abs_base == doctest::Approx(ds));
  CHECK(ds == doctest::Approx(6.9053e-4).epsilon(1e-3));
  // output: 2^-7 + 2 dS = 0.0078125 + 0.0013811 = 0.0091936 (the GPU test prints 0.00919)
  CHECK(t.output_abs == doctest::Approx(0.0091936).epsilon(1e-4));
}

TEST_CASE("attention check: passes within tolerance, fails on a wrong, unwritten or -inf row") {
  // 1 head, 2 tokens, head_dim 2; reference rows (0.5, -0.25) lse 1.0 and an empty row.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> oref{0.5f, -0.25f, 0.0f, 0.0f}, lref{1.0f, -inf};
  const at::Tolerance tol{0.01, 1e-4};
  std::vector<uint16_t> o{at::float_to_bf16(0.5f), at::float_to_bf16(-0.25f), 0, 0};
  std::vector<float> lse{1.0f, -inf};
  auto r = at::compare_with_reference(1, 2, 2, o, lse, oref, lref, tol);
  CHECK(r.passed());
  CHECK(r.checked_rows == 2);
  CHECK(r.max_abs_error == 0.0);
  o[1] = at::float_to_bf16(-0.27f);  // off by ~0.02 > 0.01
  r = at::compare_with_reference(1, 2, 2, o, lse, oref, lref, tol);
  CHECK_FALSE(r.passed());
  CHECK(r.bad == 1);
  CHECK(r.worst_token == 0);
  CHECK(r.max_abs_error == doctest::Approx(0.02).epsilon(0.05));
  o[1] = 0xFFFF;  // NaN: the poisoned value of an unwritten element
  r = at::compare_with_reference(1, 2, 2, o, lse, oref, lref, tol);
  CHECK(r.unwritten == 1);
  CHECK_FALSE(r.passed());
  o[1] = at::float_to_bf16(-0.25f);
  lse[1] = 0.0f;  // a row with no KV blocks must keep lse = -inf
  r = at::compare_with_reference(1, 2, 2, o, lse, oref, lref, tol);
  CHECK_FALSE(r.passed());
  CHECK(r.bad == 1);
  // bf16 round trip (ulp at 1 is 2^-7): 1 + 2^-8 is a tie and rounds to even (1.0);
  // 1 + 3*2^-8 is a tie too and rounds to the even 1 + 2^-6 = 1.015625.
  CHECK(at::bf16_to_float(at::float_to_bf16(1.00390625f)) == 1.0f);
  CHECK(at::bf16_to_float(at::float_to_bf16(1.01171875f)) == 1.015625f);
}
