// Pattern files: .npy / .npz import and export, the native format, Q/K-derived patterns.
#include "io.hpp"

#include <zip.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "generators.hpp"
#include "npy.hpp"
#include "sparsp/output_file.hpp"

namespace sparsp::patterns {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kMagic[9] = "SPARSPM1";

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string shape_str(const MaskArrayInfo& i) {
  std::string s = "[";
  if (i.ndim == 5) s += std::to_string(i.steps) + ",";
  if (i.ndim >= 4) s += std::to_string(i.layers) + ",";
  return s + std::to_string(i.heads) + "," + std::to_string(i.rows) + "," + std::to_string(i.cols) +
         "]";
}

// A readable mask stream: a plain file or one entry of a .npz (ZIP) archive.
class MaskSource {
 public:
  ~MaskSource() {
    if (zf_) zip_fclose(zf_);
    if (za_) zip_discard(za_);
  }
  Status open(const std::string& path) {
    path_ = path;
    {
      // The same words as every other input ("not a .npy file (bad magic)" said nothing useful).
      std::error_code ec;
      if (fs::is_directory(path, ec)) return input_error(path, "", "is a directory, not a file");
    }
    if (ends_with(path, ".npz")) {
      int err = 0;
      za_ = zip_open(path.c_str(), ZIP_RDONLY, &err);
      if (!za_) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        std::string what = zip_error_strerror(&ze);
        zip_error_fini(&ze);
        return input_error(path, "", "cannot open .npz archive: " + what);
      }
      const zip_int64_t n = zip_get_num_entries(za_, 0);
      zip_int64_t pick = -1;
      std::string names;
      for (zip_int64_t i = 0; i < n; ++i) {
        const char* nm = zip_get_name(za_, static_cast<zip_uint64_t>(i), 0);
        const std::string name = nm ? nm : "";
        names += (names.empty() ? "" : ", ") + name;
        if (name == "mask.npy") pick = i;
        if (name == "step_00000.npy")
          return input_error(path, "",
                             "a sparsp recording (step_00000.npy) without its sidecar " + path +
                                 ".json (python/sparsp_torch writes both; patterns/README.md)");
      }
      if (pick < 0 && n == 1) pick = 0;
      if (pick < 0)
        return input_error(path, "",
                           "expected one array or an array named 'mask' (found: " +
                               (names.empty() ? std::string("none") : names) + ")");
      zip_stat_t st;
      if (zip_stat_index(za_, static_cast<zip_uint64_t>(pick), 0, &st) != 0 ||
          !(st.valid & ZIP_STAT_SIZE))
        return input_error(path, "", "cannot stat the archive entry");
      size_ = static_cast<size_t>(st.size);
      entry_ = zip_get_name(za_, static_cast<zip_uint64_t>(pick), 0);
      zf_ = zip_fopen_index(za_, static_cast<zip_uint64_t>(pick), 0);
      if (!zf_)
        return input_error(path, entry_, std::string("cannot read entry: ") + zip_strerror(za_));
      return Ok{};
    }
    in_.open(path, std::ios::binary);
    if (!in_) return input_error(path, "", "cannot open file");
    std::error_code ec;
    size_ = static_cast<size_t>(fs::file_size(path, ec));
    if (ec) size_ = SIZE_MAX;
    return Ok{};
  }
  ReadFn reader() {
    if (zf_)
      return [this](void* buf, size_t n) -> size_t {
        const zip_int64_t r = zip_fread(zf_, buf, n);
        return r < 0 ? 0 : static_cast<size_t>(r);
      };
    return [this](void* buf, size_t n) -> size_t {
      in_.read(static_cast<char*>(buf), static_cast<std::streamsize>(n));
      return static_cast<size_t>(in_.gcount());
    };
  }
  size_t size() const { return size_; }
  std::string name() const { return entry_.empty() ? path_ : path_ + "(" + entry_ + ")"; }

 private:
  std::string path_, entry_;
  std::ifstream in_;
  zip_t* za_ = nullptr;
  zip_file_t* zf_ = nullptr;
  size_t size_ = SIZE_MAX;
};

// Writes `path` through a temp file renamed at the end (no partial output left behind). `path`
// is an output_target(): a regular file (or none yet), or a device/FIFO written in place.
class AtomicFile {
 public:
  explicit AtomicFile(const OutputTarget& target)
      : path_(target.path),
        tmp_(target.in_place ? path_ : path_ + ".tmp"),
        in_place_(target.in_place) {
    out_.open(tmp_, in_place_ ? std::ios::binary | std::ios::out
                              : std::ios::binary | std::ios::trunc | std::ios::out);
  }
  ~AtomicFile() {
    if (!done_ && !in_place_) {
      out_.close();
      std::error_code ec;
      fs::remove(tmp_, ec);
    }
  }
  bool ok() const { return static_cast<bool>(out_); }
  std::ofstream& out() { return out_; }
  Status commit() {
    out_.flush();
    if (!out_) return Error{path_ + ": write failed", 1};
    out_.close();
    if (!out_) return Error{path_ + ": write failed", 1};
    done_ = true;
    if (in_place_) return Ok{};
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) return Error{path_ + ": cannot rename temp file: " + ec.message(), 2};
    return Ok{};
  }

 private:
  std::string path_, tmp_;
  bool in_place_ = false;
  std::ofstream out_;
  bool done_ = false;
};

void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

const char* order_name(TokenOrder o) { return o == TokenOrder::tile ? "tile" : "raster"; }

}  // namespace

std::string model_to_json(const ModelSpec& m) {
  json j;
  j["schema_version"] = 1;
  j["name"] = m.name;
  j["latent"] = {m.latent[0], m.latent[1], m.latent[2]};
  j["text_tokens"] = m.text_tokens;
  j["text_position"] = m.text_position == TextPosition::start ? "start"
                       : m.text_position == TextPosition::end ? "end"
                                                              : "none";
  j["heads"] = m.heads;
  j["head_dim"] = m.head_dim;
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["mlp_hidden"] = m.mlp_hidden;
  j["dtype_bytes"] = m.dtype_bytes;
  j["steps"] = m.steps;
  return j.dump();
}

// ---- import of .npy / .npz masks --------------------------------------------------------------

Result<std::unique_ptr<Pattern>> load_pattern(const std::string& path, const ModelSpec* model,
                                              const PatternOptions& o) {
  // A missing file is named as missing before its type is judged (break-it pass 2026-12-02:
  // `pattern stats missing.json` said "unknown pattern file type").
  if (std::error_code ec; !std::filesystem::exists(path, ec))
    return input_error(path, "", "cannot open file: no such file");
  if (std::error_code ec; std::filesystem::is_directory(path, ec))  // not "system error"
    return input_error(path, "", "is a directory, not a file");
  if (ends_with(path, ".spm")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return input_error(path, "", "cannot open file");
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    return parse_native(data.data(), data.size(), path);
  }
  if (is_recording(path)) return load_recording(path, model, o);
  if (o.block_tokens == 0) {  // "the file's own": 128 for plain mask arrays
    PatternOptions with_block = o;
    with_block.block_tokens = 128;
    return load_pattern(path, model, with_block);
  }
  if (!ends_with(path, ".npy") && !ends_with(path, ".npz"))
    return input_error(path, "", "unknown pattern file type (expected .npy, .npz or .spm)");
  // Pass 1: the header only, to build and check the layout.
  MaskArrayInfo info;
  {
    MaskSource src;
    if (auto s = src.open(path); !s) return s.error();
    auto reader = src.reader();
    auto h = read_npy_header(reader, src.name());
    if (!h) return h.error();
    // Reuse the mask reader's checks on dtype and rank by reading nothing but the header:
    const auto& sh = h->shape;
    if (!((h->kind == 'b' || h->kind == 'u') && h->item_bytes == 1))
      return input_error(src.name(), "header",
                         "mask dtype must be bool or uint8, got '" + h->descr + "'");
    if (h->fortran_order)
      return input_error(src.name(), "header",
                         "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
    if (sh.size() < 3 || sh.size() > 5)
      return input_error(src.name(), "header",
                         "mask shape must be [H,Qb,Kb], [L,H,Qb,Kb] or [S,L,H,Qb,Kb], got " +
                             std::to_string(sh.size()) + " dimensions");
    for (int64_t d : sh)
      if (d < 1 || d > (1 << 20)) return input_error(src.name(), "header", "bad mask dimension");
    const size_t n = sh.size();
    info.ndim = static_cast<int>(n);
    info.cols = static_cast<int>(sh[n - 1]);
    info.rows = static_cast<int>(sh[n - 2]);
    info.heads = static_cast<int>(sh[n - 3]);
    info.layers = n >= 4 ? static_cast<int>(sh[n - 4]) : 1;
    info.steps = n == 5 ? static_cast<int>(sh[0]) : 1;
  }
  ModelSpec m;
  BlockLayout L;
  if (model) {
    m = *model;
    TokenOrder order = o.order == "tile" ? TokenOrder::tile : TokenOrder::raster;
    std::array<int, 3> tile =
        o.tile == std::array<int, 3>{0, 0, 0} ? std::array<int, 3>{4, 4, 4} : o.tile;
    auto lr = make_layout(m, o.block_tokens, order, tile, path);
    if (!lr) return lr.error();
    L = std::move(*lr);
  } else {
    // No model: a text-free, one-frame layout with exactly Qb blocks.
    m.name = "recorded";
    m.latent = {1, 1, info.rows * o.block_tokens};
    m.heads = info.heads;
    m.head_dim = 128;
    m.layers = info.layers;
    m.hidden = m.heads * m.head_dim;
    m.steps = info.steps;
    auto lr = make_layout(m, o.block_tokens, TokenOrder::raster, {1, 1, 1}, path);
    if (!lr) return lr.error();
    L = std::move(*lr);
  }
  if (info.rows != L.num_blocks || info.cols != L.num_blocks)
    return input_error(path, "header",
                       "shape " + shape_str(info) + " does not match the layout of " + m.name +
                           " (block " + std::to_string(L.block_tokens) + ", " +
                           order_name(L.order) + " order): " + std::to_string(L.num_blocks) +
                           " x " + std::to_string(L.num_blocks) + " blocks expected");
  if (info.heads != m.heads)
    return input_error(path, "header",
                       "shape " + shape_str(info) + ": " + std::to_string(info.heads) +
                           " heads, model " + m.name + " has " + std::to_string(m.heads));
  if (info.ndim >= 4 && info.layers != m.layers)
    return input_error(path, "header",
                       "shape " + shape_str(info) + ": " + std::to_string(info.layers) +
                           " layers, model " + m.name + " has " + std::to_string(m.layers));
  const int layers = m.layers;
  const int steps = info.ndim == 5 ? info.steps : std::max(1, o.steps > 0 ? o.steps : m.steps);
  const bool per_step = info.ndim == 5;
  auto p = std::make_unique<StoredPattern>(
      m, L, steps, layers, m.heads, per_step,
      "recorded " + fs::path(path).filename().string() + " " + shape_str(info));
  MaskSource src;
  if (auto s = src.open(path); !s) return s.error();
  auto sink = [&](int st, int l, int h, BlockMask&& mk) -> Status {
    const int id = p->intern(std::move(mk));
    if (info.ndim == 3) {
      for (int ll = 0; ll < layers; ++ll) p->assign(0, ll, h, id);
    } else {
      p->assign(st, l, h, id);
    }
    return Ok{};
  };
  auto r = read_npy_masks(src.reader(), src.name(), sink, src.size());
  if (!r) return r.error();
  p->finalize();
  return std::unique_ptr<Pattern>(std::move(p));
}

// ---- export ------------------------------------------------------------------------------------

Status write_npy_to(Pattern& p, const OutputTarget& target, const std::string& path) {
  const BlockLayout& L = p.layout();
  const int nb = L.num_blocks;
  const bool stat = p.is_static();
  std::vector<int64_t> shape;
  if (!stat) shape.push_back(p.steps());
  shape.insert(shape.end(), {p.layers(), p.heads(), nb, nb});
  AtomicFile f(target);
  if (!f.ok()) return Error{path + ": cannot create file", 2};
  const std::string hdr = make_npy_header("|b1", shape);
  f.out().write(hdr.data(), static_cast<std::streamsize>(hdr.size()));
  std::vector<char> row(static_cast<size_t>(nb));
  const int steps = stat ? 1 : p.steps();
  for (int s = 0; s < steps; ++s)
    for (int l = 0; l < p.layers(); ++l)
      for (int h = 0; h < p.heads(); ++h) {
        const BlockMask& m = p.mask(s, l, h);
        for (int q = 0; q < nb; ++q) {
          for (int k = 0; k < nb; ++k) row[static_cast<size_t>(k)] = m.get(q, k) ? 1 : 0;
          f.out().write(row.data(), nb);
        }
      }
  return f.commit();
}

Status write_native_to(Pattern& p, const OutputTarget& target, const std::string& path) {
  if (target.in_place)
    return input_error(path, "",
                       "cannot write a .spm to a device or pipe (it is assembled from a temporary "
                       "payload file); write a regular file");
  const BlockLayout& L = p.layout();
  const int nb = L.num_blocks;
  const int wpr = (nb + 63) / 64;
  const bool stat = p.is_static();
  const int steps_idx = stat ? 1 : p.steps();
  // Payload first into a temp file (dynamic patterns stream step by step), index in memory.
  const std::string payload_path = target.path + ".payload.tmp";
  // Removed on every return, failures included (a full disk left 64 KiB of it behind).
  struct RemoveOnExit {
    const std::string& path;
    ~RemoveOnExit() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } payload_guard{payload_path};
  std::vector<int> index(static_cast<size_t>(steps_idx) * p.layers() * p.heads());
  int64_t masks = 0;
  auto write_mask = [](std::ofstream& out, const BlockMask& m, std::vector<char>& buf) {
    const auto& w = m.words();
    for (size_t i = 0; i < w.size(); ++i)
      for (int b = 0; b < 8; ++b)
        buf[i * 8 + static_cast<size_t>(b)] = static_cast<char>((w[i] >> (8 * b)) & 0xff);
    out.write(buf.data(), static_cast<std::streamsize>(w.size() * 8));
  };
  if (auto* sp = dynamic_cast<StoredPattern*>(&p)) {
    // Stored patterns: their distinct masks and index as they are.
    std::ofstream pay(payload_path, std::ios::binary | std::ios::trunc);
    if (!pay) return Error{path + ": cannot create file", 2};
    std::vector<char> buf(static_cast<size_t>(nb) * wpr * 8);
    for (const BlockMask& m : sp->unique_masks()) write_mask(pay, m, buf);
    masks = static_cast<int64_t>(sp->unique_masks().size());
    size_t slot = 0;
    for (int s = 0; s < steps_idx; ++s)
      for (int l = 0; l < p.layers(); ++l)
        for (int hh = 0; hh < p.heads(); ++hh) index[slot++] = sp->mask_id(s, l, hh);
    if (!pay) return Error{path + ": write failed", 1};
  } else {
    std::ofstream pay(payload_path, std::ios::binary | std::ios::trunc);
    if (!pay) return Error{path + ": cannot create file", 2};
    std::map<int64_t, std::vector<int>> group_ids;  // mask_group -> head ids
    std::vector<char> buf(static_cast<size_t>(nb) * wpr * 8);
    for (int s = 0; s < steps_idx; ++s)
      for (int l = 0; l < p.layers(); ++l) {
        const int64_t g = p.mask_group(s, l);
        auto it = group_ids.find(g);
        if (it == group_ids.end()) {
          std::vector<int> ids(static_cast<size_t>(p.heads()));
          std::unordered_map<uint64_t, std::vector<std::pair<int, int>>>
              local;  // hash -> (head, id)
          for (int h = 0; h < p.heads(); ++h) {
            const BlockMask& m = p.mask(s, l, h);
            const uint64_t hs = m.hash();
            int found = -1;
            for (auto& [hh, id] : local[hs])
              if (p.mask(s, l, hh) == m) found = id;
            if (found < 0) {
              found = static_cast<int>(masks++);
              local[hs].emplace_back(h, found);
              write_mask(pay, m, buf);
            }
            ids[static_cast<size_t>(h)] = found;
          }
          it = group_ids.emplace(g, std::move(ids)).first;
          if (!stat) {
            // Groups of dynamic patterns do not recur across steps; keep memory bounded.
            if (group_ids.size() > 4096) group_ids.erase(group_ids.begin());
          }
        }
        std::copy(it->second.begin(), it->second.end(),
                  index.begin() + static_cast<ptrdiff_t>((static_cast<size_t>(s) * p.layers() + l) *
                                                         p.heads()));
      }
    if (!pay) return Error{path + ": write failed", 1};
  }
  json h;
  h["format"] = "sparsp-pattern";
  h["schema_version"] = 1;
  h["model"] = json::parse(model_to_json(p.model()));
  h["layout"] = {{"block_tokens", L.block_tokens},
                 {"order", order_name(L.order)},
                 {"tile", {L.tile[0], L.tile[1], L.tile[2]}}};
  h["steps"] = p.steps();
  h["layers"] = p.layers();
  h["heads"] = p.heads();
  h["blocks"] = nb;
  h["words_per_row"] = wpr;
  h["masks"] = masks;
  h["per_step"] = !stat;
  h["description"] = p.describe();
  h["index"] = index;
  std::string text = h.dump();
  while ((16 + text.size()) % 8) text += ' ';
  std::string head(kMagic, 8);
  put_u64(head, text.size());
  head += text;
  AtomicFile f(target);
  if (!f.ok()) return Error{path + ": cannot create file", 2};
  f.out().write(head.data(), static_cast<std::streamsize>(head.size()));
  {
    std::ifstream pay(payload_path, std::ios::binary);
    f.out() << pay.rdbuf();
  }
  std::error_code ec;
  fs::remove(payload_path, ec);
  return f.commit();
}

// A symbolic link is followed (the link stays), a device or FIFO written in place, never renamed
// over (sparsp/output_file.hpp).
Status write_npy(Pattern& p, const std::string& path) {
  auto target = output_target(path);
  if (!target) return target.error();
  return write_npy_to(p, *target, path);
}

Status write_native(Pattern& p, const std::string& path) {
  auto target = output_target(path);
  if (!target) return target.error();
  return write_native_to(p, *target, path);
}

Status write_pattern(Pattern& p, const std::string& path) {
  if (ends_with(path, ".npy")) return write_npy(p, path);
  if (ends_with(path, ".spm")) return write_native(p, path);
  return input_error(path, "", "unknown output type (expected .npy or .spm)");
}

// ---- native reader -----------------------------------------------------------------------------

Result<std::unique_ptr<Pattern>> parse_native(const uint8_t* data, size_t size,
                                              const std::string& src) {
  if (size >= 8 && size < 16 && std::memcmp(data, kMagic, 8) == 0)
    return input_error(src, "8", "truncated file (" + std::to_string(size) + " bytes; no header)");
  if (size < 16 || std::memcmp(data, kMagic, 8) != 0)
    return input_error(src, "0", "not a sparsp pattern file (bad magic)");
  const uint64_t hlen = get_u64(data + 8);
  if (hlen > size - 16)
    return input_error(src, "8", "truncated header (length " + std::to_string(hlen) + ")");
  // The header's JSON errors as every file's (line, no exception text or raw bytes), duplicate
  // keys included; then unknown keys.
  auto parsed = parse_json<json>(
      std::string_view(reinterpret_cast<const char*>(data) + 16, static_cast<size_t>(hlen)),
      src + " header");
  if (!parsed) return parsed.error();
  const json h = std::move(parsed.value());
  if (!h.is_object()) return input_error(src, "header", "header is not a JSON object");
  static const char* const kHeaderKeys[] = {
      "format", "schema_version", "model", "layout",   "steps",       "layers", "heads",
      "blocks", "words_per_row",  "masks", "per_step", "description", "index"};
  for (auto it = h.begin(); it != h.end(); ++it)
    if (std::find(std::begin(kHeaderKeys), std::end(kHeaderKeys), it.key()) ==
        std::end(kHeaderKeys))
      return input_error(src, "/" + it.key(), "unknown key '" + it.key() + "' in the header");
  auto get_int = [&](const char* key, int64_t lo, int64_t hi) -> Result<int64_t> {
    auto it = h.find(key);
    if (it == h.end() || !it->is_number_integer())
      return input_error(src, std::string("/") + key, "missing or not an integer");
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) return input_error(src, std::string("/") + key, "out of range");
    return v;
  };
  // json::value() throws on a key of another type: check the type (fuzz_pattern_native found it).
  if (auto f = h.find("format"); f == h.end() || !f->is_string() || *f != "sparsp-pattern")
    return input_error(src, "/format", "expected \"sparsp-pattern\"");
  auto ver = get_int("schema_version", 1, 1);
  if (!ver) return ver.error();
  auto mit = h.find("model");
  if (mit == h.end() || !mit->is_object()) return input_error(src, "/model", "missing model");
  auto m = parse_model(mit->dump(), src + ":/model");
  if (!m) return m.error();
  auto lit = h.find("layout");
  if (lit == h.end() || !lit->is_object()) return input_error(src, "/layout", "missing layout");
  const json& lj = *lit;
  if (!lj.contains("block_tokens") || !lj["block_tokens"].is_number_integer() ||
      !lj.contains("order") || !lj["order"].is_string() || !lj.contains("tile") ||
      !lj["tile"].is_array() || lj["tile"].size() != 3)
    return input_error(src, "/layout", "expected block_tokens, order, tile");
  std::array<int, 3> tile{};
  for (size_t d = 0; d < 3; ++d) {
    if (!lj["tile"][d].is_number_integer() || lj["tile"][d].get<int64_t>() < 1 ||
        lj["tile"][d].get<int64_t>() > 100000)
      return input_error(src, "/layout/tile", "bad tile");
    tile[d] = lj["tile"][d].get<int>();
  }
  const std::string order_s = lj["order"].get<std::string>();
  if (order_s != "raster" && order_s != "tile")
    return input_error(src, "/layout/order", "expected raster or tile");
  const int64_t bt = lj["block_tokens"].get<int64_t>();
  if (bt < 1 || bt > (1 << 24)) return input_error(src, "/layout/block_tokens", "out of range");
  if (static_cast<int64_t>(m->video_tokens()) / bt > 32768)
    return input_error(src, "/layout/block_tokens", "too many blocks");
  auto L = make_layout(*m, static_cast<int>(bt),
                       order_s == "tile" ? TokenOrder::tile : TokenOrder::raster, tile, src);
  if (!L) return L.error();
  auto steps = get_int("steps", 1, 1000000);
  auto layers = get_int("layers", 1, 100000);
  auto heads = get_int("heads", 1, 65536);
  auto blocks = get_int("blocks", 1, 32768);
  auto wpr = get_int("words_per_row", 1, 512);
  auto masks = get_int("masks", 1, int64_t{1} << 40);
  for (auto* r : {&steps, &layers, &heads, &blocks, &wpr, &masks})
    if (!*r) return r->error();
  if (*blocks != L->num_blocks)
    return input_error(src, "/blocks",
                       "header says " + std::to_string(*blocks) + " blocks, layout has " +
                           std::to_string(L->num_blocks));
  if (*wpr != (*blocks + 63) / 64)
    return input_error(src, "/words_per_row", "inconsistent with blocks");
  if (*heads != m->heads) return input_error(src, "/heads", "does not match the model");
  auto ps = h.find("per_step");
  if (ps == h.end() || !ps->is_boolean()) return input_error(src, "/per_step", "missing boolean");
  const bool per_step = ps->get<bool>();
  auto ix = h.find("index");
  const int64_t nidx = (per_step ? *steps : 1) * *layers * *heads;
  if (ix == h.end() || !ix->is_array() || static_cast<int64_t>(ix->size()) != nidx)
    return input_error(src, "/index", "expected " + std::to_string(nidx) + " mask ids");
  const uint64_t mask_bytes = static_cast<uint64_t>(*blocks) * static_cast<uint64_t>(*wpr) * 8;
  const uint64_t payload = size - 16 - hlen;
  if (static_cast<uint64_t>(*masks) > payload / mask_bytes ||
      payload != static_cast<uint64_t>(*masks) * mask_bytes)
    return input_error(src, "payload",
                       "payload is " + std::to_string(payload) + " bytes, header needs " +
                           std::to_string(*masks) + " x " + std::to_string(mask_bytes));
  auto d = h.find("description");
  if (d != h.end() && !d->is_string()) return input_error(src, "/description", "expected a string");
  const std::string desc = d != h.end() ? d->get<std::string>() : std::string("native");
  auto p =
      std::make_unique<StoredPattern>(*m, *L, static_cast<int>(*steps), static_cast<int>(*layers),
                                      static_cast<int>(*heads), per_step, desc);
  const int nb = static_cast<int>(*blocks), w = static_cast<int>(*wpr);
  const uint64_t tail_mask = (nb & 63) ? ~((uint64_t{1} << (nb & 63)) - 1) : 0;
  std::vector<int> id_map(static_cast<size_t>(*masks));
  const uint8_t* pay = data + 16 + hlen;
  for (int64_t i = 0; i < *masks; ++i) {
    BlockMask mk(nb, nb);
    auto& words = mk.words();
    const uint8_t* base = pay + static_cast<uint64_t>(i) * mask_bytes;
    for (size_t k = 0; k < words.size(); ++k) words[k] = get_u64(base + 8 * k);
    for (int q = 0; q < nb; ++q)
      if (mk.row(q)[w - 1] & tail_mask)
        return input_error(src,
                           "payload[mask=" + std::to_string(i) + ",Qb=" + std::to_string(q) + "]",
                           "bits set past the last block");
    id_map[static_cast<size_t>(i)] = p->intern(std::move(mk));
  }
  int64_t slot = 0;
  for (int64_t s = 0; s < (per_step ? *steps : 1); ++s)
    for (int64_t l = 0; l < *layers; ++l)
      for (int64_t hh = 0; hh < *heads; ++hh, ++slot) {
        const json& v = (*ix)[static_cast<size_t>(slot)];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= *masks)
          return input_error(src, "/index/" + std::to_string(slot), "mask id out of range");
        p->assign(static_cast<int>(s), static_cast<int>(l), static_cast<int>(hh),
                  id_map[static_cast<size_t>(v.get<int64_t>())]);
      }
  p->finalize();
  return std::unique_ptr<Pattern>(std::move(p));
}

// ---- Q/K-derived patterns
// ------------------------------------------------------------------------

namespace {

// Mean of each block's token vectors, per head: [H, nb, D].
Result<std::vector<double>> pool_blocks(const std::string& path, const ModelSpec& m,
                                        const BlockLayout& L) {
  MaskSource src;
  if (auto s = src.open(path); !s) return s.error();
  auto reader = src.reader();
  auto hr = read_npy_header(reader, path);
  if (!hr) return hr.error();
  const NpyHeader& h = *hr;
  const bool ok_dtype =
      (h.kind == 'f' && (h.item_bytes == 2 || h.item_bytes == 4 || h.item_bytes == 8)) ||
      (h.kind == 'u' && h.item_bytes == 2);
  if (!ok_dtype)
    return input_error(
        path, "header",
        "Q/K dtype must be float16, float32, float64 or bfloat16 stored as uint16, got '" +
            h.descr + "'");
  if (h.fortran_order)
    return input_error(path, "header",
                       "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  if (h.shape.size() != 3 || h.shape[0] != m.heads || h.shape[1] != m.tokens() ||
      h.shape[2] != m.head_dim)
    return input_error(path, "header",
                       "Q/K shape must be [heads=" + std::to_string(m.heads) +
                           ", tokens=" + std::to_string(m.tokens()) +
                           ", head_dim=" + std::to_string(m.head_dim) + "] for " + m.name);
  const size_t need = static_cast<size_t>(h.elements()) * static_cast<size_t>(h.item_bytes);
  if (src.size() != SIZE_MAX && src.size() - std::min(src.size(), h.header_bytes) < need)
    return input_error(path, "data",
                       "truncated: the shape needs " + std::to_string(need) + " data bytes");
  const int H = m.heads, D = m.head_dim, nb = L.num_blocks;
  std::vector<double> pooled(static_cast<size_t>(H) * nb * D, 0.0);
  std::vector<uint8_t> raw(static_cast<size_t>(D) * static_cast<size_t>(h.item_bytes));
  std::vector<float> vals(static_cast<size_t>(D));
  for (int hh = 0; hh < H; ++hh) {
    int b = 0, left = L.tokens_in_block[0];
    for (int t = 0; t < m.tokens(); ++t) {
      while (left == 0) left = L.tokens_in_block[static_cast<size_t>(++b)];
      size_t got = 0;
      while (got < raw.size()) {
        const size_t r = reader(raw.data() + got, raw.size() - got);
        if (r == 0) break;
        got += r;
      }
      if (got < raw.size()) return input_error(path, "data", "truncated data");
      convert_to_float(h, raw.data(), static_cast<size_t>(D), vals.data());
      double* acc = pooled.data() + (static_cast<size_t>(hh) * nb + b) * D;
      for (int d = 0; d < D; ++d) acc[d] += vals[static_cast<size_t>(d)];
      --left;
    }
  }
  for (int hh = 0; hh < H; ++hh)
    for (int b = 0; b < nb; ++b)
      for (int d = 0; d < D; ++d) {
        double& v = pooled[(static_cast<size_t>(hh) * nb + b) * D + d];
        v /= L.tokens_in_block[static_cast<size_t>(b)];
        if (!std::isfinite(v))
          return input_error(path, "[H=" + std::to_string(hh) + ",block=" + std::to_string(b) + "]",
                             "NaN or infinite values in the pooled block");
      }
  return pooled;
}

}  // namespace

Result<std::unique_ptr<Pattern>> qk_pattern(const ModelSpec& m, const BlockLayout& L,
                                            const PatternOptions& o, int steps, int layers) {
  auto q = pool_blocks(o.q_path, m, L);
  if (!q) return q.error();
  auto k = pool_blocks(o.k_path, m, L);
  if (!k) return k.error();
  const bool cdf = o.kind == "cdf";
  const int H = m.heads, D = m.head_dim, nb = L.num_blocks;
  int topk = o.topk > 0 ? o.topk : static_cast<int>(std::ceil(o.density * nb - 1e-9));
  if (!cdf && topk > nb)
    return input_error(o.q_path, "topk",
                       std::to_string(topk) + " exceeds the " + std::to_string(nb) + " blocks");
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "%s %s from Q/K %s block %d", cdf ? "cdf threshold" : "topk",
      cdf ? std::to_string(o.threshold).substr(0, 5).c_str() : std::to_string(topk).c_str(),
      fs::path(o.q_path).filename().string().c_str(), L.block_tokens);
  auto p = std::make_unique<StoredPattern>(m, L, steps, layers, H, false, buf);
  std::vector<float> scores(static_cast<size_t>(nb) * nb);
  std::vector<int> idx(static_cast<size_t>(nb));
  for (int b = 0; b < nb; ++b) idx[static_cast<size_t>(b)] = b;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int hh = 0; hh < H; ++hh) {
    for (int a = 0; a < nb; ++a) {
      const double* qa = q->data() + (static_cast<size_t>(hh) * nb + a) * D;
      for (int b = 0; b < nb; ++b) {
        const double* kb = k->data() + (static_cast<size_t>(hh) * nb + b) * D;
        double s = 0;
        for (int d = 0; d < D; ++d) s += qa[d] * kb[d];
        s *= scale;
        if (!std::isfinite(s) || std::fabs(s) > 3e38)
          return input_error(o.q_path,
                             "[H=" + std::to_string(hh) + ",Qb=" + std::to_string(a) +
                                 ",Kb=" + std::to_string(b) + "]",
                             "score is NaN or infinite");
        scores[static_cast<size_t>(a) * nb + b] = static_cast<float>(s);
      }
    }
    BlockMask mk(nb, nb);
    if (cdf)
      select_cdf(scores.data(), nb, nb, o.threshold, idx.data(), idx.data(), mk);
    else
      select_topk(scores.data(), nb, nb, topk, idx.data(), idx.data(), mk);
    const int id = p->intern(std::move(mk));
    for (int l = 0; l < layers; ++l) p->assign(0, l, hh, id);
  }
  p->finalize();
  return std::unique_ptr<Pattern>(std::move(p));
}

}  // namespace sparsp::patterns
