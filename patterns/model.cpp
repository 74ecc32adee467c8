// Model presets and model JSON parsing (schema in patterns/README.md).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "presets.hpp"
#include "sparsp/pattern.hpp"

namespace sparsp::patterns {
namespace {

using nlohmann::json;

Result<int> get_int(const json& j, const char* key, const std::string& src, int lo, int hi,
                    bool required, int fallback) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return input_error(src, std::string("/") + key, "missing required field");
    return fallback;
  }
  if (!it->is_number_integer())
    return input_error(src, std::string("/") + key, "expected an integer");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return input_error(src, std::string("/") + key,
                       "expected " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                           std::to_string(v));
  return static_cast<int>(v);
}

}  // namespace

Result<ModelSpec> parse_model(const std::string& text, const std::string& src) {
  auto parsed = parse_json<json>(text, src);
  if (!parsed) return parsed.error();
  const json& j = *parsed;
  if (!j.is_object()) return input_error(src, "", "expected a JSON object");
  // Unknown keys are errors: a typo ("mlp_hiden") would silently take the default.
  static const char* const kKeys[] = {
      "schema_version", "name",        "description", "source",       "latent",
      "text_tokens",    "heads",       "head_dim",    "layers",       "hidden",
      "mlp_hidden",     "dtype_bytes", "steps",       "text_position"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(std::begin(kKeys), std::end(kKeys), it.key()) == std::end(kKeys))
      return input_error(src, "/" + it.key(),
                         "unknown key '" + it.key() +
                             "' (known: schema_version, name, description, source, latent, "
                             "text_tokens, heads, head_dim, layers, hidden, mlp_hidden, "
                             "dtype_bytes, steps, text_position)");
  if (auto it = j.find("schema_version"); it != j.end() && !(it->is_number_integer() && *it == 1))
    return input_error(src, "/schema_version", "unsupported schema version (expected 1)");
  ModelSpec m;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return input_error(src, "/name", "missing or empty string");
  m.name = name->get<std::string>();
  auto lat = j.find("latent");
  if (lat == j.end() || !lat->is_array() || lat->size() != 3)
    return input_error(src, "/latent", "expected [T, H, W]");
  int64_t vol = 1;
  for (int d = 0; d < 3; ++d) {
    const json& v = (*lat)[static_cast<size_t>(d)];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 100000)
      return input_error(src, "/latent/" + std::to_string(d), "expected a positive integer");
    m.latent[static_cast<size_t>(d)] = v.get<int>();
    vol *= m.latent[static_cast<size_t>(d)];
  }
  if (vol > (int64_t{1} << 28)) return input_error(src, "/latent", "too many video tokens");
  struct Field {
    const char* key;
    int* dst;
    int lo, hi;
    bool required;
    int fallback;
  };
  const Field fields[] = {
      {"text_tokens", &m.text_tokens, 0, 1 << 20, false, 0},
      {"heads", &m.heads, 1, 4096, true, 0},
      {"head_dim", &m.head_dim, 1, 4096, true, 0},
      {"layers", &m.layers, 1, 10000, true, 0},
      {"hidden", &m.hidden, 0, 1 << 20, false, 0},
      {"mlp_hidden", &m.mlp_hidden, 0, 1 << 22, false, 0},
      {"dtype_bytes", &m.dtype_bytes, 1, 8, false, 2},
      {"steps", &m.steps, 1, 100000, false, 50},
  };
  for (const Field& f : fields) {
    auto r = get_int(j, f.key, src, f.lo, f.hi, f.required, f.fallback);
    if (!r) return r.error();
    *f.dst = *r;
  }
  if (m.hidden == 0) m.hidden = m.heads * m.head_dim;
  std::string pos = "none";
  if (auto it = j.find("text_position"); it != j.end()) {
    if (!it->is_string()) return input_error(src, "/text_position", "expected start|end|none");
    pos = it->get<std::string>();
  } else if (m.text_tokens > 0) {
    return input_error(src, "/text_position", "missing (text_tokens > 0): expected start|end");
  }
  if (pos == "start")
    m.text_position = TextPosition::start;
  else if (pos == "end")
    m.text_position = TextPosition::end;
  else if (pos == "none")
    m.text_position = TextPosition::none;
  else
    return input_error(src, "/text_position", "expected start|end|none, got '" + pos + "'");
  if (m.text_tokens > 0 && m.text_position == TextPosition::none)
    return input_error(src, "/text_position", "text_tokens > 0 needs start or end");
  if (m.text_tokens == 0) m.text_position = TextPosition::none;
  return m;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : embedded_presets()) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

Result<ModelSpec> load_model(const std::string& name_or_path) {
  for (const auto& p : embedded_presets())
    if (name_or_path == p.name) return parse_model(p.json, "<preset:" + name_or_path + ">");
  auto text = read_text_file(name_or_path, "model file");
  if (!text) {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    return input_error(name_or_path, "",
                       "no such model preset or readable file (presets: " + names + ")");
  }
  return parse_model(*text, name_or_path);
}

}  // namespace sparsp::patterns
