// Model presets and block layouts.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "sparsp/pattern.hpp"

using namespace sparsp::patterns;

TEST_CASE("presets load with the published sizes") {
  auto h = load_model("hunyuanvideo-720p");
  REQUIRE(h.ok());
  // 33 x 45 x 80 = 118,800 video tokens (issue 3), 256 text tokens at the end.
  CHECK(h->video_tokens() == 118800);
  CHECK(h->text_tokens == 256);
  CHECK(h->text_position == TextPosition::end);
  CHECK(h->heads == 24);
  CHECK(h->head_dim == 128);
  CHECK(h->layers == 60);  // 20 double-stream + 40 single-stream
  CHECK(h->steps == 50);
  auto s = load_model("hunyuanvideo-sta");
  REQUIRE(s.ok());
  CHECK(s->latent == std::array<int, 3>{30, 48, 80});
  auto w = load_model("wan2.1-14b-720p");
  REQUIRE(w.ok());
  CHECK(w->video_tokens() == 75600);  // 21 x 45 x 80
  CHECK(w->text_tokens == 0);
  CHECK(w->heads == 40);
  CHECK(w->layers == 40);
  auto w1 = load_model("wan2.1-1.3b-480p");
  REQUIRE(w1.ok());
  CHECK(w1->latent == std::array<int, 3>{21, 30, 52});
  CHECK(w1->heads == 12);
  CHECK(w1->layers == 30);
  auto c = load_model("cogvideox-5b");
  REQUIRE(c.ok());
  CHECK(c->video_tokens() == 17550);  // 13 x 30 x 45
  CHECK(c->text_tokens == 226);
  CHECK(c->text_position == TextPosition::start);
  CHECK(c->heads == 48);
  CHECK(c->head_dim == 64);
  CHECK(c->layers == 42);
}

TEST_CASE("every preset number has a source") {
  for (const auto& name : preset_names()) {
    std::ifstream in(std::string(SPARSP_SOURCE_DIR) + "/configs/models/" + name + ".json");
    REQUIRE(in);
    auto j = nlohmann::json::parse(in);
    REQUIRE(j.contains("source"));
    for (auto& [key, value] : j.items()) {
      if (!value.is_number() && !value.is_array()) continue;
      if (key == "schema_version") continue;
      INFO(name << ": " << key);
      CHECK(j["source"].contains(key));
    }
  }
  CHECK(preset_names().size() == 6);
}

TEST_CASE("model from a path, errors name the file and the field") {
  const std::string tiny = std::string(SPARSP_TEST_DATA_DIR) + "/patterns/tiny_model.json";
  auto m = load_model(tiny);
  REQUIRE(m.ok());
  CHECK(m->name == "tiny");
  CHECK(m->tokens() == 8);

  auto bad = parse_model(R"({"name":"x","latent":[1,2,3],"head_dim":4,"layers":1})", "m.json");
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "m.json:/heads: missing required field");
  CHECK(bad.error().exit_code == 2);
  auto bad2 =
      parse_model(R"({"name":"x","latent":[1,0,3],"heads":1,"head_dim":4,"layers":1})", "m.json");
  REQUIRE(!bad2.ok());
  CHECK(bad2.error().message.find("m.json:/latent/1") == 0);
  auto none = load_model("no-such-model");
  REQUIRE(!none.ok());
  CHECK(none.error().message.find("no-such-model: no such model preset") == 0);
}

namespace {
ModelSpec grid_model(int t, int h, int w, int text = 0, TextPosition pos = TextPosition::none) {
  ModelSpec m;
  m.name = "grid";
  m.latent = {t, h, w};
  m.text_tokens = text;
  m.text_position = pos;
  m.heads = 2;
  m.head_dim = 4;
  m.layers = 1;
  m.steps = 1;
  return m;
}
}  // namespace

TEST_CASE("raster layout: consecutive chunks, partial last block, text at the end") {
  // 2x4x4 = 32 video tokens, block 8 -> 4 blocks of two rows each; 5 text tokens -> 1 block.
  auto L = make_layout(grid_model(2, 4, 4, 5, TextPosition::end), 8, TokenOrder::raster, {1, 1, 1});
  REQUIRE(L.ok());
  CHECK(L->num_video_blocks == 4);
  CHECK(L->num_blocks == 5);
  CHECK(L->first_video_block == 0);
  CHECK(L->first_text_block == 4);
  CHECK(L->tokens_in_block == std::vector<int>{8, 8, 8, 8, 5});
  // Block 1 = frame 0 rows 2,3: centre (t, h, w) = (0, 2.5, 1.5).
  CHECK(L->block_center[1][0] == doctest::Approx(0));
  CHECK(L->block_center[1][1] == doctest::Approx(2.5));
  CHECK(L->block_center[1][2] == doctest::Approx(1.5));
  CHECK(L->is_text(4));
  CHECK(L->is_video(3));
}

TEST_CASE("raster layout with text at the start and a partial video block") {
  // 1x3x3 = 9 video tokens, block 4 -> 3 video blocks (4,4,1); 5 text tokens first -> 2 blocks.
  auto L =
      make_layout(grid_model(1, 3, 3, 5, TextPosition::start), 4, TokenOrder::raster, {1, 1, 1});
  REQUIRE(L.ok());
  CHECK(L->num_blocks == 5);
  CHECK(L->first_text_block == 0);
  CHECK(L->first_video_block == 2);
  CHECK(L->tokens_in_block == std::vector<int>{4, 1, 4, 4, 1});
  CHECK(L->block_raster_range[2] == std::array<int, 2>{8, 9});
}

TEST_CASE("tile layout: tiles in raster order, one block per tile when block == tile volume") {
  // 2x4x4 grid, tiles 1x2x2, block 4: tile grid 2x2x2 = 8 tiles, block b is tile b.
  auto L = make_layout(grid_model(2, 4, 4), 4, TokenOrder::tile, {1, 2, 2});
  REQUIRE(L.ok());
  CHECK(L->tile_grid == std::array<int, 3>{2, 2, 2});
  CHECK(L->num_blocks == 8);
  CHECK(L->block_tile[1] == std::array<int, 3>{0, 0, 1});
  CHECK(L->block_tile[2] == std::array<int, 3>{0, 1, 0});
  CHECK(L->block_tile[5] == std::array<int, 3>{1, 0, 1});
  // Tile (0,1,1) covers h 2..3, w 2..3: centre (0, 2.5, 2.5).
  CHECK(L->block_center[3][1] == doctest::Approx(2.5));
  CHECK(L->block_center[3][2] == doctest::Approx(2.5));
}

TEST_CASE("tile layout: partial border tiles") {
  // 1x3x3 grid, tiles 1x2x2, block 2. Tiles: (0,0,0) 2x2 = 4 tokens -> 2 blocks; (0,0,1) 2x1 -> 1;
  // (0,1,0) 1x2 -> 1; (0,1,1) 1x1 -> 1 partial block.
  auto L = make_layout(grid_model(1, 3, 3), 2, TokenOrder::tile, {1, 2, 2});
  REQUIRE(L.ok());
  CHECK(L->tokens_in_block == std::vector<int>{2, 2, 2, 2, 1});
  CHECK(L->block_tile[4] == std::array<int, 3>{0, 1, 1});
  CHECK(L->block_center[4][1] == doctest::Approx(2));
  CHECK(L->block_center[4][2] == doctest::Approx(2));
}

TEST_CASE("layout errors") {
  auto L = make_layout(grid_model(6, 8, 8), 100, TokenOrder::tile, {6, 8, 8}, "x");
  REQUIRE(!L.ok());
  CHECK(L.error().message == "x:block: block size 100 does not divide the tile volume 6x8x8 = 384");
  auto L2 = make_layout(grid_model(6, 8, 8), 0, TokenOrder::raster, {1, 1, 1}, "x");
  REQUIRE(!L2.ok());
  CHECK(L2.error().exit_code == 2);
}

TEST_CASE("BlockMask word operations") {
  BlockMask m(3, 70);
  m.set_row(1);
  CHECK(m.row_count(1) == 70);
  CHECK(m.count() == 70);
  m.set_col(69);
  CHECK(m.count() == 72);  // + rows 0 and 2 of column 69
  CHECK(m.get(0, 69));
  CHECK(!m.get(0, 68));
  m.set(0, 69, false);
  CHECK(m.count() == 71);
  BlockMask o(3, 70);
  o.set(2, 3);
  m.or_with(o);
  CHECK(m.get(2, 3));
  CHECK(m.hash() != o.hash());
}
