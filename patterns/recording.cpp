// Recordings written by the PyTorch bridge (python/sparsp_torch): a .npz with one bit-packed
// entry per denoising step and a JSON sidecar `<file>.npz.json` (format in patterns/README.md).
#include <zip.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "io.hpp"
#include "npy.hpp"
#include "pattern_impl.hpp"
#include "sparsp/status.hpp"

namespace sparsp::patterns {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string entry_name(int step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%05d.npy", step);
  return buf;
}

// Owns the open archive; reads one step's entry at a time.
class Archive {
 public:
  ~Archive() {
    if (za_) zip_discard(za_);
  }
  Status open(const std::string& path) {
    path_ = path;
    int err = 0;
    za_ = zip_open(path.c_str(), ZIP_RDONLY, &err);
    if (za_) return Ok{};
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string what = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    return input_error(path, "", "cannot open .npz archive: " + what);
  }
  bool has(const std::string& entry) const { return zip_name_locate(za_, entry.c_str(), 0) >= 0; }
  // Reads the entry's .npy header; `size` gets the entry's uncompressed size.
  Result<NpyHeader> header(const std::string& entry, size_t& size) {
    zip_stat_t st;
    if (zip_stat(za_, entry.c_str(), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
      return input_error(path_, entry, "missing entry (the sidecar promises it)");
    size = static_cast<size_t>(st.size);
    zip_file_t* f = zip_fopen(za_, entry.c_str(), 0);
    if (!f)
      return input_error(path_, entry, std::string("cannot read entry: ") + zip_strerror(za_));
    ReadFn rd = [f](void* b, size_t n) -> size_t {
      const zip_int64_t r = zip_fread(f, b, n);
      return r < 0 ? 0 : static_cast<size_t>(r);
    };
    auto h = read_npy_header(rd, path_ + "(" + entry + ")");
    zip_fclose(f);
    return h;
  }
  // The entry's data bytes after `skip` header bytes; throws on a corrupt archive (reported by
  // the CLI's error barrier: the pattern interface has no error channel once loaded).
  void read(const std::string& entry, size_t skip, std::vector<uint8_t>& out) {
    zip_file_t* f = zip_fopen(za_, entry.c_str(), 0);
    if (!f) throw std::runtime_error(path_ + "(" + entry + "): cannot read entry");
    std::vector<uint8_t> head(skip);
    size_t got = 0;
    auto fill = [&](uint8_t* p, size_t n) {
      size_t g = 0;
      while (g < n) {
        const zip_int64_t r = zip_fread(f, p + g, n - g);
        if (r <= 0) break;
        g += static_cast<size_t>(r);
      }
      return g;
    };
    got = fill(head.data(), skip);
    if (got == skip) got = fill(out.data(), out.size());
    zip_fclose(f);
    if (got != out.size())
      throw std::runtime_error(path_ + "(" + entry + "): truncated or corrupt entry");
  }

 private:
  std::string path_;
  zip_t* za_ = nullptr;
};

class RecordingPattern final : public LazyPattern {
 public:
  RecordingPattern(ModelSpec m, BlockLayout l, int steps, int layers, std::string desc,
                   std::unique_ptr<Archive> za, std::vector<size_t> header_bytes)
      : LazyPattern(std::move(m), std::move(l), steps, layers, 0, false, std::move(desc)),
        za_(std::move(za)),
        header_bytes_(std::move(header_bytes)) {
    heads_ = model_.heads;
  }

 protected:
  void generate(int step, int layer, std::vector<BlockMask>& out) override {
    const int nb = layout_.num_blocks;
    const size_t row_bytes = static_cast<size_t>((nb + 7) / 8);
    const size_t per_layer = static_cast<size_t>(heads_) * nb * row_bytes;
    if (step != loaded_step_) {
      buf_.resize(per_layer * static_cast<size_t>(layers_));
      za_->read(entry_name(step), header_bytes_[static_cast<size_t>(step)], buf_);
      loaded_step_ = step;
    }
    const uint8_t* base = buf_.data() + per_layer * static_cast<size_t>(layer);
    for (int h = 0; h < heads_; ++h)
      for (int q = 0; q < nb; ++q) {
        const uint8_t* src = base + (static_cast<size_t>(h) * nb + q) * row_bytes;
        uint64_t* row = out[static_cast<size_t>(h)].row(q);
        for (size_t b = 0; b < row_bytes; ++b)
          row[b / 8] |= static_cast<uint64_t>(src[b]) << (8 * (b % 8));
        if (nb % 64) row[(nb - 1) / 64] &= (uint64_t{1} << (nb % 64)) - 1;  // padding bits
      }
  }

 private:
  std::unique_ptr<Archive> za_;
  std::vector<size_t> header_bytes_;
  std::vector<uint8_t> buf_;
  int loaded_step_ = -1;
};

Result<int> get_int(const json& j, const std::string& side, const char* key, int lo, int hi) {
  auto it = j.find(key);
  if (it == j.end()) return input_error(side, std::string("/") + key, "missing required field");
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    return input_error(side, std::string("/") + key,
                       "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return static_cast<int>(it->get<int64_t>());
}

Result<std::array<int, 3>> get_triple(const json& j, const std::string& side, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 3)
    return input_error(side, std::string("/") + key, "expected [t, h, w]");
  std::array<int, 3> v{};
  for (size_t d = 0; d < 3; ++d) {
    if (!(*it)[d].is_number_integer() || (*it)[d].get<int64_t>() < 1 ||
        (*it)[d].get<int64_t>() > (1 << 20))
      return input_error(side, std::string("/") + key + "/" + std::to_string(d),
                         "expected a positive integer");
    v[d] = static_cast<int>((*it)[d].get<int64_t>());
  }
  return v;
}

}  // namespace

Result<std::string> recording_model(const std::string& path) {
  if (!is_recording(path)) return std::string();
  const std::string side = path + ".json";
  auto text = read_text_file(side, "recording sidecar");
  if (!text) return text.error();
  auto j = parse_json<json>(*text, side);
  if (!j) return j.error();
  if (!j->is_object()) return input_error(side, "", "expected a JSON object");
  auto it = j->find("model");
  if (it == j->end() || it->is_null()) return std::string();
  if (!it->is_string()) return input_error(side, "/model", "expected a model preset name or null");
  return it->get<std::string>();
}

bool is_recording(const std::string& path) {
  std::error_code ec;
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0 &&
         fs::is_regular_file(path + ".json", ec);
}

Result<std::unique_ptr<Pattern>> load_recording(const std::string& path, const ModelSpec* model,
                                                const PatternOptions& o) {
  const std::string side = path + ".json";
  auto text = read_text_file(side, "recording sidecar");
  if (!text) return text.error();
  auto jr = parse_json<json>(*text, side);
  if (!jr) return jr.error();
  const json& j = *jr;
  if (!j.is_object()) return input_error(side, "", "expected a JSON object");
  static const char* kKeys[] = {
      "format",      "schema_version", "steps",        "layers", "heads",     "blocks",
      "head_dim",    "packing",        "block_tokens", "order",  "tile",      "tokens",
      "text_tokens", "text_position",  "latent",       "model",  "selection", "description"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find_if(std::begin(kKeys), std::end(kKeys),
                     [&](const char* k) { return it.key() == k; }) == std::end(kKeys))
      return input_error(side, "/" + it.key(), "unknown key '" + it.key() + "'");
  if (j.value("format", "") != "sparsp-recording")
    return input_error(side, "/format", "expected \"sparsp-recording\"");
  if (!j.contains("schema_version") || j["schema_version"] != 1)
    return input_error(side, "/schema_version", "expected 1");
  if (j.value("packing", "") != "bits-little")
    return input_error(side, "/packing", "expected \"bits-little\"");
  auto steps = get_int(j, side, "steps", 1, 1 << 20);
  if (!steps) return steps.error();
  auto layers = get_int(j, side, "layers", 1, 1 << 16);
  if (!layers) return layers.error();
  auto heads = get_int(j, side, "heads", 1, 1 << 12);
  if (!heads) return heads.error();
  auto blocks = get_int(j, side, "blocks", 1, 1 << 20);
  if (!blocks) return blocks.error();
  auto block = get_int(j, side, "block_tokens", 1, 1 << 20);
  if (!block) return block.error();
  const std::string order_s = j.value("order", "raster");
  if (order_s != "raster" && order_s != "tile")
    return input_error(side, "/order", "expected \"raster\" or \"tile\"");

  ModelSpec m;
  const std::string side_model =
      j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  if (model) {
    m = *model;  // --model overrides the sidecar
  } else if (!side_model.empty()) {
    auto mr = load_model(side_model);
    if (!mr) return input_error(side, "/model", mr.error().message);
    m = *mr;
  } else {
    auto lat = get_triple(j, side, "latent");
    if (!lat) return lat.error();
    auto tt = get_int(j, side, "text_tokens", 0, 1 << 24);
    if (!tt) return tt.error();
    auto hd = get_int(j, side, "head_dim", 1, 1 << 12);
    if (!hd) return hd.error();
    const std::string tp = j.value("text_position", "none");
    m.name = "recorded";
    m.latent = *lat;
    m.text_tokens = *tt;
    m.text_position = tp == "start" ? TextPosition::start
                      : tp == "end" ? TextPosition::end
                                    : TextPosition::none;
    m.heads = *heads;
    m.head_dim = *hd;
    m.layers = *layers;
    m.hidden = m.heads * m.head_dim;
    m.mlp_hidden = 4 * m.hidden;
    m.dtype_bytes = 2;
    m.steps = *steps;
  }
  // Layout: the sidecar's, unless the pattern options name another.
  const int block_tokens = o.block_tokens > 0 ? o.block_tokens : *block;
  const std::string order = !o.order.empty() ? o.order : order_s;
  std::array<int, 3> tile = o.tile;
  if (tile == std::array<int, 3>{0, 0, 0}) {
    if (order == "tile") {
      auto t = get_triple(j, side, "tile");
      if (!t) return t.error();
      tile = *t;
    } else {
      tile = {1, 1, 1};
    }
  }
  auto lr = make_layout(m, block_tokens, order == "tile" ? TokenOrder::tile : TokenOrder::raster,
                        tile, side);
  if (!lr) return lr.error();
  const std::string who = side_model.empty() ? "" : " (recorded with " + side_model + ")";
  if (lr->num_blocks != *blocks)
    return input_error(side, "/blocks",
                       std::to_string(*blocks) + " blocks recorded, the layout of " + m.name +
                           " at block " + std::to_string(block_tokens) + " (" + order +
                           " order) has " + std::to_string(lr->num_blocks) + who +
                           "; pass the recording's --model and layout");
  if (*heads != m.heads)
    return input_error(side, "/heads",
                       std::to_string(*heads) + " heads recorded, model " + m.name + " has " +
                           std::to_string(m.heads) + who);
  if (*layers > m.layers)
    return input_error(side, "/layers",
                       std::to_string(*layers) + " layers recorded, model " + m.name + " has " +
                           std::to_string(m.layers) + who);
  if (j.contains("tokens") && (!j["tokens"].is_number_integer() ||
                               j["tokens"].get<int64_t>() != static_cast<int64_t>(m.tokens())))
    return input_error(side, "/tokens",
                       "expected " + std::to_string(m.tokens()) + " (the tokens of " + m.name +
                           "'s layout), got " + j["tokens"].dump());
  std::string desc = "recording " + fs::path(path).filename().string();
  if (*layers < m.layers)
    desc += " (" + std::to_string(*layers) + " of " + std::to_string(m.layers) + " layers)";
  m.layers = *layers;
  m.steps = *steps;
  // Every step's entry: present, uint8, [L, H, Qb, ceil(Kb/8)], the size the shape implies.
  auto za = std::make_unique<Archive>();
  if (auto s = za->open(path); !s) return s.error();
  const int64_t row_bytes = (*blocks + 7) / 8;
  const std::vector<int64_t> want = {*layers, *heads, *blocks, row_bytes};
  std::vector<size_t> header_bytes;
  for (int s = 0; s < *steps; ++s) {
    const std::string e = entry_name(s);
    size_t size = 0;
    auto h = za->header(e, size);
    if (!h) return h.error();
    if (h->kind != 'u' || h->item_bytes != 1 || h->fortran_order || h->shape != want)
      return input_error(path, e,
                         "expected uint8 bit-packed masks [" + std::to_string(*layers) + "," +
                             std::to_string(*heads) + "," + std::to_string(*blocks) + "," +
                             std::to_string(row_bytes) + "], got '" + h->descr + "' of rank " +
                             std::to_string(h->shape.size()));
    const size_t data = static_cast<size_t>(*layers) * static_cast<size_t>(*heads) *
                        static_cast<size_t>(*blocks) * static_cast<size_t>(row_bytes);
    if (size != h->header_bytes + data)
      return input_error(path, e,
                         "entry holds " + std::to_string(size - std::min(size, h->header_bytes)) +
                             " data bytes, the shape needs " + std::to_string(data));
    header_bytes.push_back(h->header_bytes);
  }
  if (za->has(entry_name(*steps)))
    return input_error(path, entry_name(*steps),
                       "an entry beyond the sidecar's " + std::to_string(*steps) +
                           " steps (the sidecar and the archive disagree)");
  return std::unique_ptr<Pattern>(std::make_unique<RecordingPattern>(
      std::move(m), std::move(*lr), *steps, *layers, desc, std::move(za), std::move(header_bytes)));
}

}  // namespace sparsp::patterns
