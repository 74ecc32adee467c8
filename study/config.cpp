// Study JSON reader (schema: configs/studies/README.md). Errors: "<file>:<JSON pointer>: <what>".
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "sparsp/study.hpp"
#include "sparsp/units.hpp"

namespace sparsp::study {

namespace {

using nlohmann::json;

struct Reader {
  std::string file;
  Error err(const std::string& ptr, const std::string& what) const {
    return input_error(file, ptr, what);
  }
};

Status check_keys(const Reader& r, const json& j, const std::string& ptr,
                  std::initializer_list<const char*> keys) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : keys) ok = ok || it.key() == k;
    if (!ok) return r.err(ptr + "/" + it.key(), "unknown field");
  }
  return Ok{};
}

Result<int> get_int(const Reader& r, const json& j, const std::string& ptr, int lo, int hi) {
  if (!j.is_number_integer()) return r.err(ptr, "expected an integer");
  const auto v = j.get<int64_t>();
  if (v < lo || v > hi)
    return r.err(ptr, "expected " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                          std::to_string(v));
  return static_cast<int>(v);
}

Result<double> get_num(const Reader& r, const json& j, const std::string& ptr, double lo,
                       double hi) {
  if (!j.is_number()) return r.err(ptr, "expected a number");
  const double v = j.get<double>();
  if (!(v >= lo && v <= hi)) {
    std::ostringstream s;
    s << "expected " << lo << ".." << hi << ", got " << v;
    return r.err(ptr, s.str());
  }
  return v;
}

Result<std::string> get_str(const Reader& r, const json& j, const std::string& ptr) {
  if (!j.is_string()) return r.err(ptr, "expected a string");
  return j.get<std::string>();
}

Result<std::array<int, 3>> get_triple(const Reader& r, const json& j, const std::string& ptr) {
  if (!j.is_array() || j.size() != 3) return r.err(ptr, "expected [t, h, w]");
  std::array<int, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    auto v = get_int(r, j[i], ptr + "/" + std::to_string(i), 1, 1 << 20);
    if (!v) return v.error();
    out[i] = *v;
  }
  return out;
}

// "all" | [i, ...] | {"first": a, "count": n}
Result<std::vector<int>> get_selection(const Reader& r, const json& j, const std::string& ptr) {
  std::vector<int> out;
  if (j.is_string()) {
    if (j.get<std::string>() != "all")
      return r.err(ptr, "expected \"all\", a list or {first, count}");
    return out;
  }
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      auto v = get_int(r, j[i], ptr + "/" + std::to_string(i), 0, 1 << 20);
      if (!v) return v.error();
      // A repeated index would be simulated (and counted) twice: refuse it.
      if (auto d = std::find(out.begin(), out.end(), *v); d != out.end())
        return r.err(ptr + "/" + std::to_string(i), "duplicate " + std::to_string(*v) +
                                                        " (already at " + ptr + "/" +
                                                        std::to_string(d - out.begin()) + ")");
      out.push_back(*v);
    }
    if (out.empty()) return r.err(ptr, "empty selection");
    return out;
  }
  if (j.is_object()) {
    if (auto st = check_keys(r, j, ptr, {"first", "count"}); !st) return st.error();
    if (!j.contains("count")) return r.err(ptr + "/count", "missing");
    auto first =
        j.contains("first") ? get_int(r, j["first"], ptr + "/first", 0, 1 << 20) : Result<int>(0);
    if (!first) return first.error();
    auto count = get_int(r, j["count"], ptr + "/count", 1, 1 << 20);
    if (!count) return count.error();
    for (int i = 0; i < *count; ++i) out.push_back(*first + i);
    return out;
  }
  return r.err(ptr, "expected \"all\", a list or {first, count}");
}

Status parse_pattern(const Reader& r, const json& j, const std::string& ptr,
                     patterns::PatternOptions& p) {
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s.find('/') != std::string::npos || s.find('.') != std::string::npos) {
      p.kind = "file";
      p.input = s;
      p.block_tokens = 0;  // the file's own
    } else {
      p.kind = s;
    }
    return Ok{};
  }
  if (!j.is_object()) return r.err(ptr, "expected a pattern kind, a file, or an object");
  if (auto st = check_keys(r, j, ptr,
                           {"kind", "file", "block", "order", "tile", "window", "density", "seed",
                            "topk", "threshold", "decay", "table"});
      !st)
    return st;
  if (j.contains("kind")) {
    auto v = get_str(r, j["kind"], ptr + "/kind");
    if (!v) return v.error();
    p.kind = *v;
  }
  if (j.contains("file")) {
    auto v = get_str(r, j["file"], ptr + "/file");
    if (!v) return v.error();
    p.kind = "file";
    p.input = *v;
    if (!j.contains("block")) p.block_tokens = 0;  // the file's own
  }
  if (j.contains("block")) {
    auto v = get_int(r, j["block"], ptr + "/block", 1, 1 << 20);
    if (!v) return v.error();
    p.block_tokens = *v;
  }
  if (j.contains("order")) {
    auto v = get_str(r, j["order"], ptr + "/order");
    if (!v) return v.error();
    if (*v != "raster" && *v != "tile") return r.err(ptr + "/order", "expected raster or tile");
    p.order = *v;
  }
  if (j.contains("tile")) {
    auto v = get_triple(r, j["tile"], ptr + "/tile");
    if (!v) return v.error();
    p.tile = *v;
  }
  if (j.contains("window")) {
    auto v = get_triple(r, j["window"], ptr + "/window");
    if (!v) return v.error();
    p.window = *v;
  }
  if (j.contains("density")) {
    auto v = get_num(r, j["density"], ptr + "/density", 0, 1);
    if (!v) return v.error();
    p.density = *v;
  }
  if (j.contains("seed")) {
    if (!j["seed"].is_number_unsigned() && !j["seed"].is_number_integer())
      return r.err(ptr + "/seed", "expected an integer");
    p.seed = j["seed"].get<uint64_t>();
  }
  if (j.contains("topk")) {
    auto v = get_int(r, j["topk"], ptr + "/topk", 0, 1 << 20);
    if (!v) return v.error();
    p.topk = *v;
  }
  if (j.contains("threshold")) {
    auto v = get_num(r, j["threshold"], ptr + "/threshold", 1e-9, 1);
    if (!v) return v.error();
    p.threshold = *v;
  }
  if (j.contains("decay")) {
    auto v = get_num(r, j["decay"], ptr + "/decay", 1e-9, 1e9);
    if (!v) return v.error();
    p.decay = *v;
  }
  if (j.contains("table")) {
    auto v = get_str(r, j["table"], ptr + "/table");
    if (!v) return v.error();
    p.table_path = *v;
  }
  return Ok{};
}

Result<policy::PolicySpec> parse_policy_json(const Reader& r, const json& j,
                                             const std::string& ptr) {
  if (j.is_string()) {
    auto p = policy::parse_policy(j.get<std::string>());
    if (!p) return r.err(ptr, p.error().message);
    return p;
  }
  if (!j.is_object()) return r.err(ptr, "expected \"PLACEMENT/SCHEME/RUNTIME\" or an object");
  if (auto st = check_keys(r, j, ptr, {"placement", "scheme", "runtime", "params", "route"}); !st)
    return st.error();
  policy::PolicySpec spec;
  for (const char* k : {"placement", "scheme", "runtime"}) {
    if (!j.contains(k)) return r.err(ptr + "/" + k, "missing");
    auto v = get_str(r, j[k], ptr + "/" + k);
    if (!v) return v.error();
    (k[0] == 'p' ? spec.placement : k[0] == 's' ? spec.scheme : spec.runtime) = *v;
  }
  if (j.contains("params")) {
    const auto& ps = j["params"];
    if (!ps.is_object()) return r.err(ptr + "/params", "expected an object of numbers");
    for (auto it = ps.begin(); it != ps.end(); ++it) {
      if (!it->is_number()) return r.err(ptr + "/params/" + it.key(), "expected a number");
      spec.params[it.key()] = it->get<double>();
      // A bad value at its own place, /policies/<i>/params/<name>.
      if (auto st = policy::check_policy_param(it.key(), spec.params[it.key()]); !st)
        return r.err(ptr + "/params/" + it.key(), st.error().message);
    }
  }
  if (j.contains("route")) {
    auto v = get_str(r, j["route"], ptr + "/route");
    if (!v) return v.error();
    if (*v == "host_staged")
      spec.params["host_staged"] = 1;
    else if (*v != "automatic")
      return r.err(ptr + "/route", "expected automatic or host_staged");
  }
  if (auto st = policy::check_policy(spec); !st) {
    // "policy parameter 'NAME' ..." about a parameter of the params object: its place.
    const std::string& m = st.error().message;
    const std::string lead = "policy parameter '";
    if (m.rfind(lead, 0) == 0 && j.contains("params")) {
      const std::string name = m.substr(lead.size(), m.find('\'', lead.size()) - lead.size());
      if (j["params"].contains(name)) return r.err(ptr + "/params/" + name, m);
    }
    return r.err(ptr, m);
  }
  return spec;
}

}  // namespace

Result<Study> parse_study(const std::string& text, const std::string& source_name) {
  Reader r{source_name};
  auto parsed = parse_json<json>(text, source_name);
  if (!parsed) return parsed.error();
  json j = std::move(parsed).value();
  if (!j.is_object()) return r.err("", "expected a JSON object");
  if (auto st = check_keys(
          r, j, "",
          {"schema_version", "name", "description", "topology", "topologies", "model", "pattern",
           "gpus", "granularity", "policies", "baseline", "steps", "layers", "compute", "sim"});
      !st)
    return st.error();
  Study s;
  s.source = source_name;
  if (!j.contains("schema_version")) return r.err("/schema_version", "missing");
  if (auto v = get_int(r, j["schema_version"], "/schema_version", 1, 1); !v) return v.error();
  if (j.contains("name")) {
    auto v = get_str(r, j["name"], "/name");
    if (!v) return v.error();
    s.name = *v;
  }
  // One of the two: both used to run their union (the same topology twice ran twice).
  if (j.contains("topology") && j.contains("topologies"))
    return r.err("/topologies", "give either /topology or /topologies, not both");
  for (const char* key : {"topology", "topologies"}) {
    if (!j.contains(key)) continue;
    const auto& t = j[key];
    const std::string ptr = std::string("/") + key;
    s.topologies_key = key;
    if (t.is_string()) {
      s.topologies.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (size_t i = 0; i < t.size(); ++i) {
        auto v = get_str(r, t[i], ptr + "/" + std::to_string(i));
        if (!v) return v.error();
        if (std::find(s.topologies.begin(), s.topologies.end(), *v) != s.topologies.end())
          return r.err(ptr + "/" + std::to_string(i), "\"" + *v + "\" is listed twice");
        s.topologies.push_back(*v);
      }
    } else {
      return r.err(ptr, "expected a preset name, a file, or a non-empty list of them");
    }
  }
  if (s.topologies.empty()) return r.err("/topology", "missing");
  if (j.contains("model")) {
    auto v = get_str(r, j["model"], "/model");
    if (!v) return v.error();
    s.model = *v;
  }
  if (!j.contains("pattern")) return r.err("/pattern", "missing");
  if (auto st = parse_pattern(r, j["pattern"], "/pattern", s.pattern); !st) return st.error();
  if (j.contains("gpus")) {
    const auto& g = j["gpus"];
    if (g.is_number_integer()) {
      auto v = get_int(r, g, "/gpus", 1, 1024);
      if (!v) return v.error();
      s.num_gpus = *v;
    } else if (g.is_array() && !g.empty()) {
      std::set<int> seen;
      for (size_t i = 0; i < g.size(); ++i) {
        const std::string ptr = "/gpus/" + std::to_string(i);
        int idx = -1;
        if (g[i].is_string() && g[i].get<std::string>().rfind("gpu", 0) == 0) {
          try {
            idx = std::stoi(g[i].get<std::string>().substr(3));
          } catch (...) {
            return r.err(ptr, "expected gpuN or an index");
          }
        } else {
          auto v = get_int(r, g[i], ptr, 0, 1 << 16);
          if (!v) return v.error();
          idx = *v;
        }
        if (!seen.insert(idx).second) return r.err(ptr, "GPU listed twice");
        s.gpus.push_back(idx);
      }
    } else {
      return r.err("/gpus", "expected a count or a list of GPU indices");
    }
  }
  if (j.contains("granularity")) {
    auto v = get_str(r, j["granularity"], "/granularity");
    if (!v) return v.error();
    if (*v == "block")
      s.granularity = policy::Granularity::block;
    else if (*v == "head_block")
      s.granularity = policy::Granularity::head_block;
    else
      return r.err("/granularity", "expected block or head_block");
  }
  if (!j.contains("policies") || !j["policies"].is_array() || j["policies"].empty())
    return r.err("/policies", "expected a non-empty list");
  for (size_t i = 0; i < j["policies"].size(); ++i) {
    const std::string ptr = "/policies/" + std::to_string(i);
    auto p = parse_policy_json(r, j["policies"][i], ptr);
    if (!p) return p.error();
    s.policies.push_back(*p);
    s.policy_places.push_back(ptr);
  }
  if (j.contains("baseline")) {
    auto v = get_str(r, j["baseline"], "/baseline");
    if (!v) return v.error();
    s.baseline = *v;
  }
  if (j.contains("steps")) {
    auto v = get_selection(r, j["steps"], "/steps");
    if (!v) return v.error();
    s.steps = *v;
  }
  if (j.contains("layers")) {
    auto v = get_selection(r, j["layers"], "/layers");
    if (!v) return v.error();
    s.layers = *v;
  }
  if (j.contains("compute")) {
    const auto& c = j["compute"];
    if (!c.is_object()) return r.err("/compute", "expected an object");
    if (auto st =
            check_keys(r, c, "/compute",
                       {"attention_efficiency", "gemm_efficiency", "launch_overhead_us", "kernel"});
        !st)
      return st.error();
    if (c.contains("attention_efficiency")) {
      auto v = get_num(r, c["attention_efficiency"], "/compute/attention_efficiency", 1e-6, 1);
      if (!v) return v.error();
      s.attention_efficiency = *v;
    }
    if (c.contains("kernel")) {
      if (!c["kernel"].is_string())
        return r.err("/compute/kernel", "expected a kernel name (`sparsp simulate --list`)");
      s.kernel = c["kernel"].get<std::string>();
      if (auto k = policy::find_kernel(s.kernel, s.source, "/compute/kernel"); !k) return k.error();
    }
    if (c.contains("gemm_efficiency")) {
      auto v = get_num(r, c["gemm_efficiency"], "/compute/gemm_efficiency", 1e-6, 1);
      if (!v) return v.error();
      s.gemm_efficiency = *v;
    }
    if (c.contains("launch_overhead_us")) {
      auto v = get_num(r, c["launch_overhead_us"], "/compute/launch_overhead_us", 0, 1e6);
      if (!v) return v.error();
      s.sim.launch_overhead_s = units::us_to_s(*v);
    }
  }
  if (j.contains("sim")) {
    const auto& c = j["sim"];
    if (!c.is_object()) return r.err("/sim", "expected an object");
    if (auto st = check_keys(r, c, "/sim",
                             {"chunk_bytes", "staging_buffers", "staging_chunk_overhead_us"});
        !st)
      return st.error();
    if (c.contains("chunk_bytes")) {
      auto v = get_num(r, c["chunk_bytes"], "/sim/chunk_bytes", 4096, 1e12);
      if (!v) return v.error();
      s.sim.default_chunk_bytes = *v;
    }
    if (c.contains("staging_buffers")) {
      auto v = get_int(r, c["staging_buffers"], "/sim/staging_buffers", 1, 1024);
      if (!v) return v.error();
      s.sim.default_staging_buffers = *v;
    }
    if (c.contains("staging_chunk_overhead_us")) {
      auto v = get_num(r, c["staging_chunk_overhead_us"], "/sim/staging_chunk_overhead_us", 0, 1e6);
      if (!v) return v.error();
      s.sim.staging_chunk_overhead_s = units::us_to_s(*v);
    }
  }
  return s;
}

Result<Study> load_study(const std::string& path, const std::string& fill_json) {
  auto text = read_text_file(path, "study file");
  if (!text) return text.error();
  if (!fill_json.empty()) {
    auto doc = parse_json<json>(*text, path);
    if (!doc) return doc.error();
    auto fill = parse_json<json>(fill_json, "<command line>");
    if (!fill) return fill.error();
    bool filled = false;
    if (doc->is_object() && fill->is_object())
      for (auto it = fill->begin(); it != fill->end(); ++it) {
        const bool has =
            doc->contains(it.key()) || (it.key() == "topology" && doc->contains("topologies"));
        if (!has) {
          (*doc)[it.key()] = it.value();
          filled = true;
        }
      }
    if (filled) *text = doc->dump(2);  // pointers as in the file; lines may differ
  }
  auto s = parse_study(*text, path);
  if (!s) return s;
  // File references (topology JSON, recorded pattern, table) are relative to the study file
  // when they do not exist relative to the working directory.
  const auto dir = std::filesystem::path(path).parent_path();
  auto resolve = [&](std::string& f) {
    if (f.empty() || std::filesystem::path(f).is_absolute() || std::filesystem::exists(f)) return;
    const bool is_file = f.find('/') != std::string::npos || f.find(".json") != std::string::npos;
    if (is_file && std::filesystem::exists(dir / f)) f = (dir / f).string();
  };
  for (auto& t : s->topologies) resolve(t);
  resolve(s->pattern.input);
  resolve(s->pattern.table_path);
  return s;
}

Result<Study> default_study() {
  return parse_study(default_study_json(), "<preset:default-study>");
}

}  // namespace sparsp::study
