// Model presets and model JSON parsing (schema in patterns/README.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
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

bool finite_nonneg(const json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
}

// "pipeline": {"cfg": {"mode", "source"}, "text_encoder" / "vae_decode": {"flops" | "time_s":
// {GPU model: s}, "efficiency" (of peak, for flops), "split" (vae only), "source"}, "scheduler":
// {"overhead_s", "source"}}.
Status parse_pipeline(const json& pj, const std::string& src, Pipeline& p) {
  const std::string at = "/pipeline";
  if (!pj.is_object()) return input_error(src, at, "expected an object");
  auto source_of = [&](const json& o, const std::string& place, std::string& dst) -> Status {
    auto it = o.find("source");
    if (it == o.end() || !it->is_string() || it->get<std::string>().empty())
      return input_error(src, place + "/source", "every stage names its source");
    dst = it->get<std::string>();
    return Ok{};
  };
  for (auto it = pj.begin(); it != pj.end(); ++it) {
    const std::string place = at + "/" + it.key();
    const json& o = it.value();
    if (!o.is_object()) return input_error(src, place, "expected an object");
    if (it.key() == "cfg") {
      for (auto k = o.begin(); k != o.end(); ++k)
        if (k.key() != "mode" && k.key() != "source")
          return input_error(src, place + "/" + k.key(), "unknown key (known: mode, source)");
      auto m = o.find("mode");
      static const char* const kModes[] = {"none", "distilled", "batch2", "sequential"};
      if (m == o.end() || !m->is_string() ||
          std::find(std::begin(kModes), std::end(kModes), m->get<std::string>()) ==
              std::end(kModes))
        return input_error(src, place + "/mode", "expected none, distilled, batch2 or sequential");
      p.cfg = m->get<std::string>();
      if (auto st = source_of(o, place, p.cfg_source); !st) return st;
    } else if (it.key() == "scheduler") {
      for (auto k = o.begin(); k != o.end(); ++k)
        if (k.key() != "overhead_s" && k.key() != "source")
          return input_error(src, place + "/" + k.key(), "unknown key (known: overhead_s, source)");
      auto v = o.find("overhead_s");
      if (v == o.end() || !finite_nonneg(*v) || v->get<double>() > 1e3)
        return input_error(src, place + "/overhead_s", "expected seconds per step in [0, 1e3]");
      p.scheduler_overhead_s = v->get<double>();
      if (auto st = source_of(o, place, p.scheduler_source); !st) return st;
    } else if (it.key() == "text_encoder" || it.key() == "vae_decode") {
      PipelineStage& s = it.key() == "text_encoder" ? p.text_encoder : p.vae_decode;
      const bool vae = it.key() == "vae_decode";
      s.given = true;
      for (auto k = o.begin(); k != o.end(); ++k) {
        const std::string kp = place + "/" + k.key();
        if (k.key() == "flops") {
          if (!finite_nonneg(k.value()) || k.value().get<double>() > 1e21)
            return input_error(src, kp, "expected FLOP in [0, 1e21]");
          s.flops = k.value().get<double>();
        } else if (k.key() == "efficiency") {
          if (!finite_nonneg(k.value()) || k.value().get<double>() <= 0 ||
              k.value().get<double>() > 1)
            return input_error(src, kp, "expected a fraction of peak in (0, 1]");
          s.efficiency = k.value().get<double>();
        } else if (k.key() == "time_s") {
          if (!k.value().is_object()) return input_error(src, kp, "expected {GPU model: seconds}");
          for (auto g = k.value().begin(); g != k.value().end(); ++g) {
            if (!finite_nonneg(g.value()) || g.value().get<double>() > 1e6)
              return input_error(src, kp + "/" + g.key(), "expected seconds in [0, 1e6]");
            s.time_s.emplace_back(g.key(), g.value().get<double>());
          }
        } else if (vae && k.key() == "split") {
          if (!k.value().is_boolean()) return input_error(src, kp, "expected true or false");
          s.split = k.value().get<bool>();
        } else if (k.key() != "source") {
          return input_error(src, kp,
                             std::string("unknown key (known: flops, efficiency, time_s, ") +
                                 (vae ? "split, " : "") + "source)");
        }
      }
      // An efficiency scales FLOPs only: without "flops" it would be silently ignored.
      if (o.contains("efficiency") && !o.contains("flops"))
        return input_error(src, place + "/efficiency",
                           "applies to \"flops\" only; give the stage's flops or drop it");
      if (auto st = source_of(o, place, s.source); !st) return st;
    } else {
      return input_error(
          src, place,
          "unknown stage '" + it.key() + "' (known: cfg, text_encoder, vae_decode, scheduler)");
    }
  }
  return Ok{};
}

// "block": the per-block work outside self-attention and the GEMMs (ModelSpec, issue 14).
Status parse_block(const json& b, const std::string& src, ModelSpec& m) {
  if (!b.is_object())
    return input_error(src, "/block", std::string("expected an object, got ") + b.type_name());
  // ", got 2.5" / ", got string": a wrong type reads as one.
  auto got = [](const json& v) {
    return ", got " + (v.is_number() ? v.dump() : std::string(v.type_name()));
  };
  for (auto k = b.begin(); k != b.end(); ++k) {
    const std::string kp = "/block/" + k.key();
    const json& v = k.value();
    if (k.key() == "cross_attention_tokens" || k.key() == "elementwise_kernels") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 20))
        return input_error(src, kp, "expected an integer in 0..1048576" + got(v));
      (k.key() == "cross_attention_tokens" ? m.cross_attention_tokens : m.elementwise_kernels) =
          v.get<int>();
    } else if (k.key() == "elementwise_bytes_per_element" ||
               k.key() == "elementwise_mlp_bytes_per_element") {
      if (!finite_nonneg(v) || v.get<double>() > 1e4)
        return input_error(src, kp, "expected bytes per element in [0, 1e4]" + got(v));
      (k.key() == "elementwise_bytes_per_element" ? m.elementwise_bytes_per_element
                                                  : m.elementwise_mlp_bytes_per_element) =
          v.get<double>();
    } else if (k.key() == "source") {
      if (!v.is_string() && !v.is_object())
        return input_error(src, kp, "expected a string or an object of strings");
      m.block_source = v.dump();
    } else {
      return input_error(src, kp,
                         "unknown key (known: cross_attention_tokens, "
                         "elementwise_bytes_per_element, elementwise_mlp_bytes_per_element, "
                         "elementwise_kernels, source)");
    }
  }
  return Ok{};
}

}  // namespace

Result<ModelSpec> parse_model(const std::string& text, const std::string& src) {
  auto parsed = parse_json<json>(text, src);
  if (!parsed) return parsed.error();
  const json& j = *parsed;
  if (!j.is_object()) return input_error(src, "", "expected a JSON object");
  // Unknown keys are errors: a typo ("mlp_hiden") would silently take the default.
  static const char* const kKeys[] = {
      "schema_version", "name",     "description",   "source",   "latent", "text_tokens",
      "heads",          "kv_heads", "head_dim",      "layers",   "hidden", "mlp_hidden",
      "dtype_bytes",    "steps",    "text_position", "pipeline", "block"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(std::begin(kKeys), std::end(kKeys), it.key()) == std::end(kKeys))
      return input_error(src, "/" + it.key(),
                         "unknown key '" + it.key() +
                             "' (known: schema_version, name, description, source, latent, "
                             "text_tokens, heads, kv_heads, head_dim, layers, hidden, mlp_hidden, "
                             "dtype_bytes, steps, text_position, pipeline, block)");
  if (auto it = j.find("schema_version"); it != j.end() && !(it->is_number_integer() && *it == 1))
    return input_error(src, "/schema_version", "unsupported schema version (expected 1)");
  ModelSpec m;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return input_error(src, "/name", "missing or empty string");
  m.name = name->get<std::string>();
  // Printed as it is in headings: a control character would reach the terminal raw.
  if (const std::string bad = unprintable_character(m.name); !bad.empty())
    return input_error(src, "/name", "contains " + bad + "; a model name is printed in headings");
  auto lat = j.find("latent");
  if (lat == j.end() || !lat->is_array() || lat->size() != 3)
    return input_error(src, "/latent", "expected [T, H, W]");
  int64_t vol = 1;
  for (int d = 0; d < 3; ++d) {
    const json& v = (*lat)[static_cast<size_t>(d)];
    // Each dimension up to 2^28, like the volume (token counts are int; the masks' own limit is
    // pattern_memory_bytes, checked by the pattern generators against --max-memory-gib).
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 28))
      return input_error(src, "/latent/" + std::to_string(d),
                         "expected an integer in 1..268435456 (2^28)");
    m.latent[static_cast<size_t>(d)] = v.get<int>();
    vol *= m.latent[static_cast<size_t>(d)];
    if (vol > (int64_t{1} << 28))
      return input_error(src, "/latent",
                         "too many video tokens: T x H x W must be at most 268435456 (2^28; token "
                         "counts are 32-bit)");
  }
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
      {"kv_heads", &m.kv_heads, 1, 4096, false, 0},
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
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  if (m.heads % m.kv_heads != 0)
    return input_error(src, "/kv_heads",
                       "kv_heads (" + std::to_string(m.kv_heads) + ") must divide heads (" +
                           std::to_string(m.heads) + ")");
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
  if (auto it = j.find("pipeline"); it != j.end())
    if (auto st = parse_pipeline(*it, src, m.pipeline); !st) return st.error();
  if (auto it = j.find("block"); it != j.end())
    if (auto st = parse_block(*it, src, m); !st) return st.error();
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
