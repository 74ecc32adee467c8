// make_pattern: the name-keyed registry of pattern kinds.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "dynamic.hpp"
#include "io.hpp"
#include "npy.hpp"

namespace sparsp::patterns {
namespace {

using nlohmann::json;

struct Kind {
  const char* name;
  const char* description;
};
constexpr Kind kKinds[] = {
    {"cdf",
     "smallest KV set reaching a softmax-mass threshold (SpargeAttn), synthetic or Q/K scores"},
    {"causal", "causal (LLM) attention: KV blocks up to and including the query block"},
    {"dense", "full attention"},
    {"file", "recorded masks (.npy/.npz/.spm)"},
    {"radial", "Radial Attention: band halving with frame distance, first-frame sink"},
    {"random", "independent Bernoulli(density) blocks per layer/head (stress tests)"},
    {"sta", "Sliding Tile Attention: window of tiles centred and clamped in the tile grid"},
    {"svg", "Sparse VideoGen spatial/temporal heads"},
    {"topk", "top-k KV blocks per query block (VSA), synthetic or Q/K scores"},
};

std::string src_of(const ModelSpec& m) { return "<pattern:" + m.name + ">"; }

// A --table file: a JSON object with `key` (and optionally schema_version, description,
// source); any other key is an error (a typo never passes silently).
Result<json> read_json_file(const std::string& path, const char* key) {
  auto text = read_text_file(path, "table file");
  if (!text) return text.error();
  auto j = parse_json<json>(*text, path);
  if (!j) return j.error();
  if (!j->is_object()) return input_error(path, "", "expected a JSON object");
  for (auto it = j->begin(); it != j->end(); ++it)
    if (it.key() != key && it.key() != "schema_version" && it.key() != "description" &&
        it.key() != "source")
      return input_error(path, "/" + it.key(),
                         "unknown key '" + it.key() + "' (known: " + key +
                             ", schema_version, description, source)");
  return j;
}

// {"windows": [[[t,h,w] x heads] x layers]} or a single [t,h,w] per layer.
Result<std::vector<std::array<int, 3>>> load_window_table(const std::string& path, int layers,
                                                          int heads) {
  auto j = read_json_file(path, "windows");
  if (!j) return j.error();
  auto it = j->find("windows");
  if (it == j->end() || !it->is_array() || static_cast<int>(it->size()) != layers)
    return input_error(path, "/windows",
                       "expected an array of " + std::to_string(layers) + " layers");
  std::vector<std::array<int, 3>> out;
  auto triple = [&](const json& v, const std::string& ptr) -> Result<std::array<int, 3>> {
    if (!v.is_array() || v.size() != 3) return input_error(path, ptr, "expected [t, h, w]");
    std::array<int, 3> w{};
    for (size_t d = 0; d < 3; ++d) {
      if (!v[d].is_number_integer() || v[d].get<int64_t>() < 1 || v[d].get<int64_t>() > 100000)
        return input_error(path, ptr + "/" + std::to_string(d), "expected a positive integer");
      w[d] = v[d].get<int>();
    }
    return w;
  };
  for (int l = 0; l < layers; ++l) {
    const json& lv = (*it)[static_cast<size_t>(l)];
    const std::string ptr = "/windows/" + std::to_string(l);
    if (lv.is_array() && lv.size() == 3 && lv[0].is_number()) {
      auto w = triple(lv, ptr);
      if (!w) return w.error();
      for (int h = 0; h < heads; ++h) out.push_back(*w);
    } else if (lv.is_array() && static_cast<int>(lv.size()) == heads) {
      for (int h = 0; h < heads; ++h) {
        auto w = triple(lv[static_cast<size_t>(h)], ptr + "/" + std::to_string(h));
        if (!w) return w.error();
        out.push_back(*w);
      }
    } else {
      return input_error(path, ptr, "expected [t,h,w] or " + std::to_string(heads) + " of them");
    }
  }
  return out;
}

// {"heads": ["ssttst..." per layer]} with 's' spatial, 't' temporal.
Result<std::vector<char>> load_svg_table(const std::string& path, int layers, int heads) {
  auto j = read_json_file(path, "heads");
  if (!j) return j.error();
  auto it = j->find("heads");
  if (it == j->end() || !it->is_array() || static_cast<int>(it->size()) != layers)
    return input_error(path, "/heads",
                       "expected an array of " + std::to_string(layers) + " strings");
  std::vector<char> out;
  for (int l = 0; l < layers; ++l) {
    const json& v = (*it)[static_cast<size_t>(l)];
    const std::string ptr = "/heads/" + std::to_string(l);
    if (!v.is_string() || static_cast<int>(v.get<std::string>().size()) != heads)
      return input_error(path, ptr, "expected a string of " + std::to_string(heads) + " 's'/'t'");
    for (char c : v.get<std::string>()) {
      if (c != 's' && c != 't') return input_error(path, ptr, "expected only 's' or 't'");
      out.push_back(c == 's' ? 1 : 0);
    }
  }
  return out;
}

Result<BlockLayout> layout_for(const ModelSpec& m, const PatternOptions& o,
                               const std::string& kind_default_order) {
  const std::string order_s = o.order.empty() ? kind_default_order : o.order;
  TokenOrder order;
  if (order_s == "raster")
    order = TokenOrder::raster;
  else if (order_s == "tile")
    order = TokenOrder::tile;
  else
    return input_error(src_of(m), "order", "expected raster or tile, got '" + order_s + "'");
  std::array<int, 3> tile = o.tile;
  if (tile == std::array<int, 3>{0, 0, 0})
    tile = o.kind == "sta" ? std::array<int, 3>{6, 8, 8} : std::array<int, 3>{4, 4, 4};
  return make_layout(m, o.block_tokens, order, tile, src_of(m));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> pattern_kinds() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const Kind& k : kKinds) v.emplace_back(k.name, k.description);
  return v;
}

double pattern_memory_bytes(double blocks, int layers, int heads) {
  return blocks * blocks * (static_cast<double>(layers) * heads / 8.0 + 4.0);
}

Result<std::unique_ptr<Pattern>> make_pattern(const ModelSpec& model, const PatternOptions& o) {
  const std::string src = src_of(model);
  if (o.kind == "file") {
    if (o.input.empty()) return input_error(src, "input", "kind 'file' needs an input file");
    return load_pattern(o.input, &model, o);
  }
  bool known = false;
  for (const Kind& k : kKinds) known = known || o.kind == k.name;
  if (!known) {
    std::string names;
    for (const Kind& k : kKinds) names += std::string(names.empty() ? "" : ", ") + k.name;
    return input_error(src, "kind", "unknown pattern kind '" + o.kind + "' (known: " + names + ")");
  }
  const int steps = o.steps > 0 ? o.steps : std::max(1, model.steps);
  const int layers = o.layers > 0 ? o.layers : model.layers;
  const int heads = model.heads;
  if (o.steps < 0 || o.layers < 0) return input_error(src, "steps", "steps/layers must be >= 0");
  auto lr = layout_for(model, o, o.kind == "sta" ? "tile" : "raster");
  if (!lr) return lr.error();
  BlockLayout L = std::move(*lr);
  char buf[320];
  // `--block 1` ran for minutes or ended in bad_alloc (exit 1): refuse it up front.
  if (const double need = pattern_memory_bytes(L.num_blocks, layers, heads);
      o.max_memory_bytes > 0 && need > o.max_memory_bytes) {
    std::snprintf(buf, sizeof buf,
                  "block %d gives %d blocks: an estimated %.3g GiB for one step's masks (%d "
                  "layers x %d heads), over the limit of %.3g GiB; use a larger block (--block, "
                  "or /pattern/block in a study file) or raise --max-memory-gib",
                  L.block_tokens, L.num_blocks, need / (1ull << 30), layers, heads,
                  o.max_memory_bytes / (1ull << 30));
    return input_error(src, "block", buf);
  }

  if (o.kind == "dense" || o.kind == "causal") {
    std::snprintf(buf, sizeof buf, "%s block %d", o.kind.c_str(), L.block_tokens);
    auto p = std::make_unique<StoredPattern>(model, L, steps, layers, heads, false, buf);
    const int id = p->intern(o.kind == "dense" ? dense_mask(L) : causal_mask(L));
    for (int l = 0; l < layers; ++l)
      for (int h = 0; h < heads; ++h) p->assign(0, l, h, id);
    p->finalize();
    return std::unique_ptr<Pattern>(std::move(p));
  }
  if (o.kind == "sta") {
    std::vector<std::array<int, 3>> windows = o.head_windows;
    if (!o.table_path.empty()) {
      auto t = load_window_table(o.table_path, layers, heads);
      if (!t) return t.error();
      windows = std::move(*t);
    }
    if (!windows.empty() && static_cast<int>(windows.size()) != layers * heads)
      return input_error(src, "head_windows", "expected layers x heads entries");
    if (windows.empty()) windows.assign(static_cast<size_t>(layers) * heads, o.window);
    std::snprintf(buf, sizeof buf, "sta window %s tile %s block %d%s", join3(o.window).c_str(),
                  join3(L.tile).c_str(), L.block_tokens,
                  o.table_path.empty() && o.head_windows.empty() ? "" : " (per-head table)");
    auto p = std::make_unique<StoredPattern>(model, L, steps, layers, heads, false, buf);
    std::map<std::array<int, 3>, int> ids;
    for (int l = 0; l < layers; ++l)
      for (int h = 0; h < heads; ++h) {
        const auto& w = windows[static_cast<size_t>(l) * heads + h];
        auto it = ids.find(w);
        if (it == ids.end()) {
          auto m = sta_mask(L, w, o.text_dense, src);
          if (!m) return m.error();
          it = ids.emplace(w, p->intern(std::move(*m))).first;
        }
        p->assign(0, l, h, it->second);
      }
    p->finalize();
    return std::unique_ptr<Pattern>(std::move(p));
  }
  if (o.kind == "radial") {
    const bool wan = model.name.find("wan") != std::string::npos;
    auto m = radial_mask(L, o.decay, wan, o.sink, o.text_dense, src);
    if (!m) return m.error();
    std::snprintf(buf, sizeof buf, "radial decay %g (%s rule) block %d", o.decay,
                  wan ? "wan" : "hunyuan", L.block_tokens);
    auto p = std::make_unique<StoredPattern>(model, L, steps, layers, heads, false, buf);
    const int id = p->intern(std::move(*m));
    for (int l = 0; l < layers; ++l)
      for (int h = 0; h < heads; ++h) p->assign(0, l, h, id);
    p->finalize();
    return std::unique_ptr<Pattern>(std::move(p));
  }
  if (o.kind == "svg") {
    std::vector<char> spatial = o.svg_spatial;
    if (!o.table_path.empty()) {
      auto t = load_svg_table(o.table_path, layers, heads);
      if (!t) return t.error();
      spatial = std::move(*t);
    }
    if (!spatial.empty() && static_cast<int>(spatial.size()) != layers * heads)
      return input_error(src, "svg_spatial", "expected layers x heads entries");
    if (spatial.empty()) {
      if (!(o.svg_spatial_ratio >= 0 && o.svg_spatial_ratio <= 1))
        return input_error(src, "svg_spatial_ratio", "expected 0..1");
      // Per layer, a seeded permutation of the heads; the first round(ratio * H) are spatial.
      const int ns = static_cast<int>(std::lround(o.svg_spatial_ratio * heads));
      for (int l = 0; l < layers; ++l) {
        std::vector<std::pair<uint64_t, int>> perm;
        for (int h = 0; h < heads; ++h)
          perm.emplace_back(
              mix64(o.seed ^ mix64((static_cast<uint64_t>(l) << 20) | static_cast<uint64_t>(h))),
              h);
        std::sort(perm.begin(), perm.end());
        std::vector<char> row(static_cast<size_t>(heads), 0);
        for (int i = 0; i < ns; ++i)
          row[static_cast<size_t>(perm[static_cast<size_t>(i)].second)] = 1;
        spatial.insert(spatial.end(), row.begin(), row.end());
      }
    }
    auto ms = svg_mask(L, true, o.svg_band_frames, o.sink, o.text_dense, src);
    if (!ms) return ms.error();
    auto mt = svg_mask(L, false, o.svg_band_frames, o.sink, o.text_dense, src);
    if (!mt) return mt.error();
    std::snprintf(
        buf, sizeof buf, "svg band %g frames, %s block %d", o.svg_band_frames,
        o.table_path.empty() && o.svg_spatial.empty()
            ? ("spatial ratio " + std::to_string(o.svg_spatial_ratio).substr(0, 4)).c_str()
            : "head table",
        L.block_tokens);
    auto p = std::make_unique<StoredPattern>(model, L, steps, layers, heads, false, buf);
    const int ids = p->intern(std::move(*ms)), idt = p->intern(std::move(*mt));
    for (int l = 0; l < layers; ++l)
      for (int h = 0; h < heads; ++h)
        p->assign(0, l, h, spatial[static_cast<size_t>(l) * heads + h] ? ids : idt);
    p->finalize();
    return std::unique_ptr<Pattern>(std::move(p));
  }
  if (o.kind == "random") {
    if (!(o.density >= 0 && o.density <= 1))
      return input_error(src, "density", "expected 0..1, got " + std::to_string(o.density));
    return std::unique_ptr<Pattern>(
        std::make_unique<RandomPattern>(model, L, steps, layers, o.density, o.seed));
  }
  // topk / cdf
  const bool cdf = o.kind == "cdf";
  if (cdf && !(o.threshold > 0 && o.threshold <= 1))
    return input_error(src, "threshold", "expected 0 < threshold <= 1");
  if (!cdf && o.topk < 0) return input_error(src, "topk", "expected >= 0");
  if (!cdf && o.topk == 0 && !(o.density > 0 && o.density <= 1))
    return input_error(src, "density", "topk 0 takes k from density, expected 0 < density <= 1");
  if (!o.q_path.empty() || !o.k_path.empty()) {
    if (o.q_path.empty() || o.k_path.empty())
      return input_error(src, "qk", "both a Q and a K dump are needed");
    return qk_pattern(model, L, o, steps, layers);
  }
  int k = o.topk;
  if (!cdf && k == 0) k = static_cast<int>(std::ceil(o.density * L.num_video_blocks - 1e-9));
  if (!cdf && k > L.num_video_blocks)
    return input_error(
        src, "topk",
        std::to_string(k) + " exceeds the " + std::to_string(L.num_video_blocks) + " video blocks");
  if (!(o.score_noise >= 0) || !(o.score_length > 0))
    return input_error(src, "score", "score_noise must be >= 0 and score_length > 0");
  return std::unique_ptr<Pattern>(
      std::make_unique<SyntheticScorePattern>(model, L, steps, layers, cdf, k, o.threshold,
                                              o.score_noise, o.score_length, o.seed, o.text_dense));
}

}  // namespace sparsp::patterns
