// .npy / .npz import (NumPy-written fixtures from scripts/make_pattern_fixtures.py), native
// format round trips, Q/K-derived masks, bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../../patterns/io.hpp"
#include "sparsp/pattern.hpp"

using namespace sparsp::patterns;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(SPARSP_TEST_DATA_DIR) + "/patterns/";

ModelSpec tiny() {
  auto m = load_model(kDir + "tiny_model.json");
  REQUIRE(m.ok());
  return *m;
}

PatternOptions block2() {
  PatternOptions o;
  o.block_tokens = 2;  // 8 tokens -> 4 blocks
  return o;
}

std::unique_ptr<Pattern> load_ok(const std::string& file, const ModelSpec* m,
                                 const PatternOptions& o) {
  auto p = load_pattern(file, m, o);
  if (!p.ok()) FAIL(p.error().message);
  return std::move(p.value());
}

std::string load_err(const std::string& file, const ModelSpec* m, const PatternOptions& o) {
  auto p = load_pattern(file, m, o);
  REQUIRE(!p.ok());
  CHECK(p.error().exit_code == 2);
  return p.error().message;
}

bool same_masks(Pattern& a, Pattern& b) {
  if (a.steps() != b.steps() || a.layers() != b.layers() || a.heads() != b.heads()) return false;
  for (int s = 0; s < a.steps(); ++s)
    for (int l = 0; l < a.layers(); ++l)
      for (int h = 0; h < a.heads(); ++h)
        if (!(a.mask(s, l, h) == b.mask(s, l, h))) return false;
  return true;
}

std::string tmp(const std::string& name) {
  return (fs::temp_directory_path() / ("sparsp_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST_CASE("npy [H,Qb,Kb] bool: identity and lower triangle, shared by all layers and steps") {
  ModelSpec m = tiny();
  auto p = load_ok(kDir + "mask_h.npy", &m, block2());
  CHECK(p->is_static());
  CHECK(p->layers() == 3);
  for (int l = 0; l < 3; ++l)
    for (int q = 0; q < 4; ++q)
      for (int k = 0; k < 4; ++k) {
        CHECK(p->mask(1, l, 0).get(q, k) == (q == k));
        CHECK(p->mask(1, l, 1).get(q, k) == (q >= k));
      }
  CHECK(p->stored_masks() == 2);
}

TEST_CASE("npy [L,H,Qb,Kb] uint8 and npz [S,L,H,Qb,Kb] bool") {
  ModelSpec m = tiny();
  auto p = load_ok(kDir + "mask_lh.npy", &m, block2());
  // Layer l head h = identity rolled by l + h columns: (q, (q + l + h) % 4).
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 2; ++h)
      for (int q = 0; q < 4; ++q)
        for (int k = 0; k < 4; ++k) CHECK(p->mask(0, l, h).get(q, k) == (k == (q + l + h) % 4));
  // Rolls by 0..3: 4 distinct masks; layers (l, h): (0,1) == (1,0) -> shared.
  CHECK(p->stored_masks() == 4);
  auto z = load_ok(kDir + "mask_slh.npz", &m, block2());
  CHECK(!z->is_static());
  CHECK(z->steps() == 2);
  // Step s adds column s to every row.
  for (int s = 0; s < 2; ++s)
    for (int q = 0; q < 4; ++q)
      for (int k = 0; k < 4; ++k) CHECK(z->mask(s, 2, 1).get(q, k) == (k == (q + 3) % 4 || k == s));
  CHECK(z->mask_group(0, 0) != z->mask_group(1, 0));
}

TEST_CASE("round trips: npy -> native -> npy") {
  ModelSpec m = tiny();
  auto z = load_ok(kDir + "mask_slh.npz", &m, block2());
  const std::string spm = tmp("a.spm"), npy = tmp("a.npy");
  REQUIRE(write_native(*z, spm).ok());
  auto n = load_ok(spm, nullptr, {});
  CHECK(n->model().name == "tiny");
  CHECK(n->layout().block_tokens == 2);
  CHECK(same_masks(*z, *n));
  CHECK(!fs::exists(spm + ".tmp"));
  REQUIRE(write_npy(*n, npy).ok());
  auto back = load_ok(npy, &m, block2());
  CHECK(same_masks(*z, *back));
  // Static patterns export as [L, H, Qb, Kb].
  auto s = load_ok(kDir + "mask_h.npy", &m, block2());
  REQUIRE(write_npy(*s, npy).ok());
  std::ifstream in(npy, std::ios::binary);
  std::string head(128, '\0');
  in.read(head.data(), 128);
  CHECK(head.find("'shape': (3, 2, 4, 4)") != std::string::npos);
  CHECK(head.find("'descr': '|b1'") != std::string::npos);
  // A generated dynamic pattern through the native format.
  auto big = load_model("wan2.1-1.3b-480p");
  REQUIRE(big.ok());
  PatternOptions o;
  o.kind = "topk";
  o.block_tokens = 1024;
  o.topk = 4;
  o.steps = 3;
  o.layers = 2;
  auto t1 = make_pattern(*big, o);
  auto t2 = make_pattern(*big, o);
  REQUIRE(t1.ok());
  REQUIRE(write_native(**t1, spm).ok());
  auto tn = load_ok(spm, nullptr, {});
  CHECK(same_masks(**t2, *tn));
  fs::remove(spm);
  fs::remove(npy);
}

TEST_CASE("bad npy/npz input: message names the file and the problem") {
  ModelSpec m = tiny();
  CHECK(load_err(kDir + "mask_fortran.npy", &m, block2())
            .find("Fortran-order arrays are not supported") != std::string::npos);
  CHECK(load_err(kDir + "mask_f32.npy", &m, block2())
            .find("mask dtype must be bool or uint8, got '<f4'") != std::string::npos);
  const std::string shape = load_err(kDir + "mask_badshape.npy", &m, block2());
  CHECK(shape.find(kDir +
                   "mask_badshape.npy:header: shape [2,5,5] does not match the layout of tiny") ==
        0);
  CHECK(shape.find("4 x 4 blocks expected") != std::string::npos);
  CHECK(load_err(kDir + "mask_value2.npy", &m, block2())
            .find("[L=1,H=0,Qb=2,Kb=3]: mask value 2 is not 0 or 1") != std::string::npos);
  CHECK(load_err(kDir + "mask_truncated.npy", &m, block2())
            .find("mask_truncated.npy:data: truncated") != std::string::npos);
  CHECK(load_err(kDir + "mask_badheader.npy", &m, block2())
            .find("mask_badheader.npy:header: unknown header key 'shapf'") != std::string::npos);
  CHECK(load_err(kDir + "mask_two.npz", &m, block2())
            .find("expected one array or an array named 'mask'") != std::string::npos);
  CHECK(load_err(kDir + "missing.npy", &m, block2()).find("missing.npy: cannot open file") !=
        std::string::npos);
  CHECK(load_err(kDir + "tiny_model.json", &m, block2()).find("unknown pattern file type") !=
        std::string::npos);
  // A missing file of an unknown type is named as missing, not as a type error.
  CHECK(load_err(kDir + "missing.json", &m, block2()).find("missing.json: cannot open file") !=
        std::string::npos);
}

TEST_CASE("bad native input") {
  ModelSpec m = tiny();
  auto s = load_ok(kDir + "mask_h.npy", &m, block2());
  const std::string spm = tmp("b.spm");
  REQUIRE(write_native(*s, spm).ok());
  std::ifstream in(spm, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto parse = [](const std::string& d) {
    return parse_native(reinterpret_cast<const uint8_t*>(d.data()), d.size(), "x.spm");
  };
  REQUIRE(parse(data).ok());
  auto cut = parse(data.substr(0, data.size() - 3));
  REQUIRE(!cut.ok());
  CHECK(cut.error().message.find("x.spm:payload: payload is") == 0);
  std::string bad = data;
  bad[0] = 'X';
  CHECK(parse(bad).error().message == "x.spm:0: not a sparsp pattern file (bad magic)");
  std::string flipped = data;
  // A bit past the last of the 4 blocks in the last word of the payload's first row.
  const size_t payload = data.size() - 2 * 4 * 8;
  flipped[payload] = static_cast<char>(flipped[payload] | 0x80);
  CHECK(parse(flipped).error().message.find("bits set past the last block") != std::string::npos);
  // A key of the wrong JSON type is an error, not an exception (found by fuzz_pattern_native):
  // "format": "sparsp-pattern" becomes "format": 1 padded with spaces (same header length).
  std::string typed = data;
  const size_t f = typed.find("\"sparsp-pattern\"");
  REQUIRE(f != std::string::npos);
  typed.replace(f, 16, "1               ");
  CHECK(parse(typed).error().message == "x.spm:/format: expected \"sparsp-pattern\"");
  fs::remove(spm);
}

TEST_CASE("topk / cdf from Q and K dumps (float32, float16, bfloat16, big-endian)") {
  ModelSpec m = tiny();
  // Pooled block means are unit vectors e_{(b + h) % 4} (the +-0.5 e_3 perturbations cancel), so
  // the score of (a, b) is 1/sqrt(4) = 0.5 when a == b and 0 otherwise.
  PatternOptions o = block2();
  o.kind = "topk";
  o.topk = 1;
  o.q_path = kDir + "q_f32.npy";
  o.k_path = kDir + "k_f32.npy";
  auto p = make_pattern(m, o);
  REQUIRE(p.ok());
  for (int h = 0; h < 2; ++h)
    for (int q = 0; q < 4; ++q)
      for (int k = 0; k < 4; ++k) CHECK((*p)->mask(0, 1, h).get(q, k) == (q == k));
  for (const char* q : {"q_f16.npy", "q_bf16.npy", "q_f32_be.npy"}) {
    o.q_path = kDir + q;
    auto p2 = make_pattern(m, o);
    REQUIRE(p2.ok());
    CHECK((*p2)->mask(0, 0, 1) == (*p)->mask(0, 0, 1));
  }
  // Softmax of a row: self e^0.5 / (e^0.5 + 3) = 0.3547, others 0.2151 each.
  // cdf 0.3 -> self only; 0.5 -> self + lowest other; 0.6 (0.5698 < 0.6) -> self + two others.
  o.kind = "cdf";
  o.q_path = kDir + "q_f32.npy";
  for (auto [thr, expect_row2] : {std::pair{0.3, 1}, std::pair{0.5, 2}, std::pair{0.6, 3}}) {
    o.threshold = thr;
    auto c = make_pattern(m, o);
    REQUIRE(c.ok());
    CHECK((*c)->mask(0, 0, 0).row_count(2) == expect_row2);
    CHECK((*c)->mask(0, 0, 0).get(2, 2));
  }
  o.threshold = 0.5;
  auto c = make_pattern(m, o);
  CHECK((*c)->mask(0, 0, 0).get(2, 0));  // tie among the others -> lowest index
}

TEST_CASE("bad Q/K input") {
  ModelSpec m = tiny();
  PatternOptions o = block2();
  o.kind = "topk";
  o.topk = 1;
  o.k_path = kDir + "k_f32.npy";
  auto err = [&](const char* q) {
    o.q_path = kDir + q;
    auto p = make_pattern(m, o);
    REQUIRE(!p.ok());
    CHECK(p.error().exit_code == 2);
    return p.error().message;
  };
  CHECK(err("q_nan.npy").find("q_nan.npy:[H=1,block=2]: NaN or infinite values") !=
        std::string::npos);
  CHECK(err("q_badshape.npy").find("Q/K shape must be [heads=2, tokens=8, head_dim=4] for tiny") !=
        std::string::npos);
  CHECK(err("q_fortran.npy").find("Fortran-order") != std::string::npos);
  CHECK(err("mask_h.npy").find("Q/K dtype must be") != std::string::npos);
}
