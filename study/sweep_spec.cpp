// Sweep files: parsing, axis aliases, point enumeration and JSON-pointer patching of the study.
// Schema: docs/STUDIES.md. Public surface: include/sparsp/sweep.hpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sparsp/policy.hpp"
#include "sparsp/sweep.hpp"
#include "sweep_json.hpp"

namespace sparsp::study {

using nlohmann::json;

const std::vector<AxisAlias>& sweep_axis_aliases() {
  // Pointers follow the study schema of `sparsp simulate` (configs/studies/README.md).
  // Pointers follow the study schema of `sparsp simulate` (configs/studies/README.md) and the
  // topology template schema (configs/README.md); topology parameters address the first topology.
  static const std::vector<AxisAlias> kAliases = {
      {"topology", "/topologies/0", "topology preset name, file, or inline topology object"},
      {"topologies", "/topologies", "the list of topologies"},
      {"sockets", "/topologies/0/template/sockets", "topology template: CPU sockets"},
      {"switches_per_socket", "/topologies/0/template/switches_per_socket",
       "topology template: PCIe switches per socket"},
      {"gpus_per_switch", "/topologies/0/template/gpus_per_switch",
       "topology template: GPUs per PCIe switch"},
      {"pcie_gen", "/topologies/0/template/pcie_gen", "topology template: PCIe generation 1..6"},
      {"pcie_width", "/topologies/0/template/pcie_width", "topology template: lanes per link"},
      {"uplink_gen", "/topologies/0/template/uplink_gen", "topology template: switch uplink gen"},
      {"uplink_width", "/topologies/0/template/uplink_width",
       "topology template: switch uplink lanes"},
      {"p2p", "/topologies/0/template/p2p", "topology template: peer-to-peer allowed"},
      {"acs", "/topologies/0/template/acs_redirect", "topology template: ACS redirect on"},
      {"gpu_model", "/topologies/0/template/gpu_model", "topology template: GPU model"},
      {"model", "/model", "model preset name or file"},
      {"pattern", "/pattern", "pattern object (generator + parameters)"},
      {"pattern_kind", "/pattern/kind", "pattern generator (sta, radial, topk, random, ...)"},
      {"block", "/pattern/block", "block size in tokens"},
      {"window", "/pattern/window", "STA window (t, h, w) in tiles"},
      {"tile", "/pattern/tile", "tile shape (t, h, w)"},
      {"density", "/pattern/density", "random/topk: fraction of KV blocks kept"},
      {"sparsity", "/pattern/density", "1 - density: fraction of KV blocks dropped", true},
      {"top_k", "/pattern/topk", "topk: KV blocks kept per query block"},
      {"threshold", "/pattern/threshold", "cdf: softmax mass kept"},
      {"decay", "/pattern/decay", "radial: band decay factor"},
      {"seed", "/pattern/seed", "pattern RNG seed"},
      {"pattern_file", "/pattern/file", "recorded mask file"},
      {"gpus", "/gpus", "sequence-parallel degree (a count: the first N GPUs) or GPU list"},
      {"granularity", "/granularity", "demand granularity: block | head_block"},
      {"steps", "/steps", "selected denoising steps"},
      {"layers", "/layers", "selected layers"},
      {"policies", "/policies", "the list of policies compared"},
      {"policy", "/policies/0", "the first policy"},
      {"baseline", "/baseline", "baseline policy name"},
      {"placement", "/policies/0/placement", "placement of the first policy"},
      {"scheme", "/policies/0/scheme", "communication scheme of the first policy"},
      {"runtime", "/policies/0/runtime", "runtime of the first policy"},
      {"balance_tolerance", "/policies/0/params/tolerance",
       "balanced / dependency_aware placement: allowed load imbalance (1.03 = 3%)"},
      {"locality", "/policies/0/params/locality", "balanced placement: locality reward"},
      {"chunk_bytes", "/policies/0/params/chunk_bytes", "host-staged pipeline chunk, bytes"},
      {"staging_buffers", "/sim/staging_buffers", "host-staged buffers in flight (all policies)"},
      {"sim_chunk_bytes", "/sim/chunk_bytes", "host-staged pipeline chunk, bytes (all policies)"},
      {"staging_chunk_overhead_us", "/sim/staging_chunk_overhead_us",
       "host-staged per-chunk overhead, us (all policies)"},
      {"ulysses_degree", "/policies/0/params/ulysses_degree", "usp: Ulysses degree"},
      {"comm_sms", "/policies/0/params/comm_sms", "sm_overlap: SMs of the comm kernels"},
      {"high_priority_comm", "/policies/0/params/high_priority_comm",
       "sm_overlap: comm kernels ahead of attention (1, default) or behind it as PyTorch's "
       "default NCCL stream (0)"},
      {"skip_empty", "/policies/0/params/skip_empty", "ring: skip GPUs needing nothing (0/1)"},
      {"merge_bytes_per_element", "/policies/0/params/merge_bytes_per_element",
       "ring / usp: bytes per output element of each ring step's LSE merge (default 18.4)"},
      {"seq_a2a_copies", "/policies/0/params/seq_a2a_copies",
       "ring: xDiT/yunchang all_to_all_4D layout copies at Ulysses degree 1 (0/1)"},
      {"out_cast_bytes_per_element", "/policies/0/params/out_cast_bytes_per_element",
       "ring / usp / ulysses: the output's float32 cast and back, bytes per element (xDiT: 12)"},
      {"host_staged", "/policies/0/params/host_staged", "force host-staged transfers (0/1)"},
      {"attention_efficiency", "/compute/attention_efficiency",
       "fraction of peak bf16 FLOP/s reached by attention"},
      {"gemm_efficiency", "/compute/gemm_efficiency", "fraction of peak reached by GEMMs"},
      {"kernel", "/compute/kernel", "attention kernel (fa2, fa3, sta, ...; simulate --list)"},
  };
  return kAliases;
}

namespace {

std::string type_word(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "a value";
  }
}

bool same_kind(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return true;
  return a.type() == b.type();
}

Result<json> read_json_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_json<json>(*text, path);
}

// Decimals of the shortest decimal form of x (0.02 -> 2, 5 -> 0); 17 at most.
int decimals_of(double x) {
  for (int d = 0; d < 17; ++d) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", d, x);
    if (std::strtod(buf, nullptr) == x) return d;
  }
  return 17;
}

// x rounded to `decimals` decimals, as the double nearest that decimal.
double round_to(double x, int decimals) {
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return std::strtod(buf, nullptr);
}

// Expands {"start","stop","step"} (inclusive stop, within 1e-9 relative) into values.
Result<json> expand_range(const json& r, const std::string& src, const std::string& where) {
  if (!r.is_object()) return input_error(src, where, "expected an object {start, stop, step}");
  for (const char* k : {"start", "stop", "step"})
    if (!r.contains(k) || !r[k].is_number())
      return input_error(src, where + "/" + k, "expected a number");
  for (auto it = r.begin(); it != r.end(); ++it)
    if (it.key() != "start" && it.key() != "stop" && it.key() != "step")
      return input_error(src, where + "/" + it.key(), "unknown key (expected start, stop, step)");
  const bool ints = r["start"].is_number_integer() && r["stop"].is_number_integer() &&
                    r["step"].is_number_integer();
  const double start = r["start"].get<double>(), stop = r["stop"].get<double>(),
               step = r["step"].get<double>();
  if (!(step > 0) || stop < start)
    return input_error(src, where, "need step > 0 and stop >= start");
  const double n = std::floor((stop - start) / step * (1 + 1e-12) + 1e-9) + 1;
  if (n > 1e6) return input_error(src, where, "range has more than 1e6 values");
  // start + i*step carries floating-point noise (0.3 + 2*0.02 = 0.33999999999999997): round to
  // the decimals start and step are written with, so that 0.34 reads 0.34.
  const int decimals = std::max(decimals_of(start), decimals_of(step));
  json out = json::array();
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
    if (ints)
      out.push_back(r["start"].get<int64_t>() + i * r["step"].get<int64_t>());
    else
      out.push_back(round_to(start + static_cast<double>(i) * step, decimals));
  }
  return out;
}

struct AxisParse {
  json& base;
  const std::string& src;
  const std::string& base_dir;
  std::set<std::string> names;
};

// The JSON document a string in the study names, if any: a file (relative to the study's folder
// or absolute), or a preset configs/<kind>/<name>.json of the source tree.
std::optional<json> referenced_document(const std::string& name, const std::string& base_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  const fs::path p(name);
  if (p.is_relative() && !base_dir.empty()) candidates.push_back(fs::path(base_dir) / p);
  candidates.push_back(p);
#ifdef SPARSP_SOURCE_DIR
  for (const char* kind : {"topologies", "models", "patterns"})
    candidates.push_back(fs::path(SPARSP_SOURCE_DIR) / "configs" / kind / (name + ".json"));
#endif
  for (const auto& c : candidates) {
    std::error_code ec;
    if (!fs::is_regular_file(c, ec)) continue;
    std::ifstream in(c, std::ios::binary);
    try {
      json doc = json::parse(in);
      if (doc.is_object()) return doc;
    } catch (const json::exception&) {
    }
  }
  return std::nullopt;
}

// Where an axis pointer runs through a string that names a JSON document (e.g. a topology preset
// "8x-l40s-gen4-4switch" on the way to /topologies/0/template/gpus_per_switch), puts the document
// in the study in place of the string, so its fields can be swept like inline ones.
void inline_references(json& base, const std::string& pointer, const std::string& base_dir) {
  json::json_pointer rest(pointer);
  std::vector<std::string> tokens;
  while (!rest.empty()) {
    tokens.insert(tokens.begin(), rest.back());
    rest.pop_back();
  }
  // The study may name its one topology as "topology": the aliases address "/topologies/N".
  if (!tokens.empty() && tokens[0] == "topologies" && base.is_object() &&
      !base.contains("topologies") && base.contains("topology")) {
    json t = base["topology"];
    base.erase("topology");
    base["topologies"] = t.is_array() ? t : json::array({t});
  }
  json* node = &base;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    if (node->is_string() && i == 2 && tokens[0] == "policies") {
      // "PLACEMENT/SCHEME/RUNTIME[:k=v,...]" -> {placement, scheme, runtime, params}, the object
      // form of a policy in a study, so its parameters can be swept.
      auto spec = policy::parse_policy(node->get<std::string>());
      if (!spec) return;
      json params = json::object();
      for (const auto& [k, v] : spec->params) params[k] = v;
      *node = json{{"placement", spec->placement},
                   {"scheme", spec->scheme},
                   {"runtime", spec->runtime},
                   {"params", params}};
    } else if (node->is_string()) {
      auto doc = referenced_document(node->get<std::string>(), base_dir);
      if (!doc) return;
      *node = std::move(*doc);
    }
    if (node->is_object()) {
      if (!node->contains(tok)) {
        // A missing "params" object of a policy: create it so a parameter can be added.
        if (tok == "params" && tokens[0] == "policies" && i == 2 && i + 2 == tokens.size())
          (*node)["params"] = json::object();
        else
          return;
      }
      node = &(*node)[tok];
    } else if (node->is_array()) {
      if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos) return;
      const size_t k = std::stoull(tok);
      if (k >= node->size()) return;
      node = &(*node)[k];
    } else {
      return;
    }
  }
}

Result<SweepAxis> parse_axis(const json& a, const std::string& where, AxisParse& ctx) {
  if (!a.is_object()) return input_error(ctx.src, where, "expected an axis object");
  for (auto it = a.begin(); it != a.end(); ++it) {
    const std::string& k = it.key();
    if (k != "name" && k != "path" && k != "values" && k != "range" && k != "description")
      return input_error(ctx.src, where + "/" + k,
                         "unknown key (expected name, path, values, range, description)");
  }
  SweepAxis axis;
  axis.values_place = where + (a.contains("values") ? "/values" : "/range");
  if (a.contains("name")) {
    if (!a["name"].is_string() || a["name"].get<std::string>().empty())
      return input_error(ctx.src, where + "/name", "expected a non-empty string");
    axis.name = a["name"].get<std::string>();
  }
  if (a.contains("path")) {
    if (!a["path"].is_string())
      return input_error(ctx.src, where + "/path", "expected a JSON pointer string");
    axis.pointer = a["path"].get<std::string>();
    try {
      (void)json::json_pointer(axis.pointer);
    } catch (const json::exception& e) {
      return input_error(ctx.src, where + "/path",
                         "not a JSON pointer (RFC 6901): \"" + axis.pointer + "\"");
    }
    if (axis.pointer.empty())
      return input_error(ctx.src, where + "/path",
                         "the empty pointer (whole study) is not an axis");
    if (axis.name.empty()) axis.name = axis.pointer.substr(1);
    // A label that is another field's alias would put that field's name over this column
    // (break-it 2026-12-03: name "gpus" with path /pattern/block wrote gpus=128); the field's
    // own name is fine (staging_buffers for /policies/0/staging_buffers).
    const std::string last = json::json_pointer(axis.pointer).back();
    for (const AxisAlias& al : sweep_axis_aliases())
      if (al.name == axis.name && al.pointer != axis.pointer && last != axis.name)
        return input_error(ctx.src, where + "/name",
                           "\"" + axis.name + "\" is the axis name of " + al.pointer +
                               ", not of the path " + axis.pointer +
                               "; give another name or leave it out");
  } else {
    if (axis.name.empty())
      return input_error(ctx.src, where, "an axis needs a \"name\" (friendly) or a \"path\"");
    for (const AxisAlias& al : sweep_axis_aliases())
      if (al.name == axis.name) {
        axis.pointer = al.pointer;
        axis.complement = al.complement;
      }
    if (axis.pointer.empty()) {
      std::string known;
      for (const AxisAlias& al : sweep_axis_aliases())
        known += (known.empty() ? "" : ", ") + al.name;
      return input_error(ctx.src, where + "/name",
                         "unknown axis \"" + axis.name + "\" (known: " + known +
                             "; or give a JSON pointer as \"path\")");
    }
  }
  if (!ctx.names.insert(axis.name).second)
    return input_error(ctx.src, where + "/name", "duplicate axis name \"" + axis.name + "\"");

  json values;
  std::string vwhere = where + "/values";
  if (a.contains("values") == a.contains("range"))
    return input_error(ctx.src, where, "give exactly one of \"values\" or \"range\"");
  if (a.contains("values")) {
    values = a["values"];
    if (!values.is_array()) return input_error(ctx.src, vwhere, "expected an array of values");
  } else {
    vwhere = where + "/range";
    auto r = expand_range(a["range"], ctx.src, vwhere);
    if (!r) return r.error();
    values = std::move(r.value());
  }
  if (values.empty()) return input_error(ctx.src, vwhere, "empty axis (no values)");

  inline_references(ctx.base, axis.pointer, ctx.base_dir);
  if (!a.contains("path")) {
    // A friendly name stands for a valid study field: create missing parent objects (e.g. /sim
    // for staging_buffers). Raw paths are not extended, so a typo is still an error here.
    const json::json_pointer parent_ptr = json::json_pointer(axis.pointer).parent_pointer();
    std::vector<std::string> toks;
    for (json::json_pointer q = parent_ptr; !q.empty(); q.pop_back())
      toks.insert(toks.begin(), q.back());
    json* node = &ctx.base;
    for (const auto& t : toks) {
      if (!node->is_object()) break;
      if (!node->contains(t)) (*node)[t] = json::object();
      node = &(*node)[t];
    }
  }
  // The pointer must land in the base study: its parent must exist and be a container; where the
  // study already has a value there, every axis value must be of the same JSON type.
  const json::json_pointer ptr(axis.pointer);
  const json::json_pointer parent = ptr.parent_pointer();
  const std::string place = a.contains("path") ? where + "/path" : where + "/name";
  if (!ctx.base.contains(parent) ||
      !(ctx.base.at(parent).is_object() || ctx.base.at(parent).is_array()))
    return input_error(ctx.src, place,
                       "the study has no object at " +
                           (parent.to_string().empty() ? std::string("/") : parent.to_string()) +
                           " to hold " + axis.pointer +
                           (ctx.base.contains(parent)
                                ? " (it is " + type_word(ctx.base.at(parent)) +
                                      "; inline that part of the study as an object to sweep "
                                      "its fields)"
                                : ""));
  if (ctx.base.at(parent).is_array()) {
    const std::string last = ptr.back();
    const bool digits = !last.empty() && last.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoull(last) >= ctx.base.at(parent).size())
      return input_error(ctx.src, place, axis.pointer + " is not an element of the study's array");
  }
  const bool has_base = ctx.base.contains(ptr);
  for (size_t j = 0; j < values.size(); ++j) {
    if (has_base && !same_kind(ctx.base.at(ptr), values[j]))
      return input_error(ctx.src, vwhere + "/" + std::to_string(j),
                         "type mismatch: expected " + type_word(ctx.base.at(ptr)) + " (as " +
                             axis.pointer + " in the study), got " + type_word(values[j]));
    if (!has_base && j > 0 && !same_kind(values[0], values[j]))
      return input_error(ctx.src, vwhere + "/" + std::to_string(j),
                         "type mismatch: expected " + type_word(values[0]) +
                             " (as the axis's first value), got " + type_word(values[j]));
    if (axis.complement && !values[j].is_number())
      return input_error(ctx.src, vwhere + "/" + std::to_string(j),
                         "type mismatch: expected a number, got " + type_word(values[j]));
    axis.values_json.push_back(values[j].dump());
  }
  return axis;
}

}  // namespace

namespace detail {

Result<SweepSpec> parse_sweep_object(const json& doc, const std::string& src,
                                     const std::string& base_dir,
                                     const std::vector<std::string>& extra_keys, bool all_product) {
  if (!doc.is_object()) return input_error(src, "", "expected a JSON object");
  const std::vector<std::string> own = {"schema_version", "study", "combine", "axes",
                                        "description"};
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    bool known = false;
    for (const auto& k : own) known = known || k == it.key();
    for (const auto& k : extra_keys) known = known || k == it.key();
    if (!known) return input_error(src, "/" + it.key(), "unknown key");
  }
  if (doc.contains("schema_version") &&
      !(doc["schema_version"].is_number_integer() && doc["schema_version"].get<int>() == 1))
    return input_error(src, "/schema_version", "unsupported schema_version (expected 1)");
  if (!doc.contains("study")) return input_error(src, "/study", "missing (path or inline study)");

  SweepSpec spec;
  spec.source = src;
  json base;
  const json& st = doc["study"];
  if (st.is_string()) {
    std::filesystem::path p(st.get<std::string>());
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    auto b = read_json_file(p.string());
    if (!b) return input_error(src, "/study", b.error().message);
    base = std::move(b.value());
    spec.base_dir = p.parent_path().string();
  } else if (st.is_object()) {
    base = st;
    spec.base_dir = base_dir;
  } else {
    return input_error(src, "/study", "expected a study file path or an inline study object");
  }
  if (!base.is_object()) return input_error(src, "/study", "the study is not a JSON object");
  bool zip_all = false;
  if (doc.contains("combine")) {
    const json& c = doc["combine"];
    if (!c.is_string() || (c != "product" && c != "zip"))
      return input_error(src, "/combine", "expected \"product\" or \"zip\"");
    zip_all = c == "zip";
  }
  if (!doc.contains("axes") || !doc["axes"].is_array() || doc["axes"].empty())
    return input_error(src, "/axes", "expected a non-empty array of axes");

  AxisParse ctx{base, src, spec.base_dir, {}};
  const json& axes = doc["axes"];
  for (size_t i = 0; i < axes.size(); ++i) {
    const std::string where = "/axes/" + std::to_string(i);
    const json& a = axes[i];
    if (a.is_object() && a.contains("zip")) {
      if (all_product) return input_error(src, where + "/zip", "zip groups are not allowed here");
      if (a.size() != 1) return input_error(src, where, "a zip group has only the key \"zip\"");
      if (!a["zip"].is_array() || a["zip"].empty())
        return input_error(src, where + "/zip", "expected a non-empty array of axes");
      std::vector<int> group;
      for (size_t j = 0; j < a["zip"].size(); ++j) {
        auto ax = parse_axis(a["zip"][j], where + "/zip/" + std::to_string(j), ctx);
        if (!ax) return ax.error();
        if (!group.empty() &&
            ax->values_json.size() != spec.axes[static_cast<size_t>(group[0])].values_json.size())
          return input_error(
              src, where + "/zip/" + std::to_string(j),
              "zipped axes need equal lengths: " + std::to_string(ax->values_json.size()) +
                  " values vs " +
                  std::to_string(spec.axes[static_cast<size_t>(group[0])].values_json.size()));
        ax->group = static_cast<int>(spec.groups.size());
        group.push_back(static_cast<int>(spec.axes.size()));
        spec.axes.push_back(std::move(ax.value()));
      }
      spec.groups.push_back(group);
    } else {
      auto ax = parse_axis(a, where, ctx);
      if (!ax) return ax.error();
      if (zip_all && !spec.axes.empty()) {
        if (ax->values_json.size() != spec.axes[0].values_json.size())
          return input_error(src, where,
                             "\"combine\": \"zip\" needs equal lengths: " +
                                 std::to_string(ax->values_json.size()) + " values vs " +
                                 std::to_string(spec.axes[0].values_json.size()));
        ax->group = 0;
        spec.groups[0].push_back(static_cast<int>(spec.axes.size()));
      } else {
        ax->group = static_cast<int>(spec.groups.size());
        spec.groups.push_back({static_cast<int>(spec.axes.size())});
      }
      spec.axes.push_back(std::move(ax.value()));
    }
  }
  spec.base_study_json = base.dump();  // with referenced documents inlined
  // Every file the base study or an axis value names by path (not preset names): a hash of its
  // bytes joins the fingerprint, and so does a cluster's server file it names in turn
  // (break-it 2026-12-03: editing a model, a cluster's server or a recorded pattern between a
  // stop and its resume, or between two shards, mixed old and new rows, exit 0).
  json named = json::object();
  std::function<void(const json&, const std::string&, const std::string&, int)> walk;
  walk = [&](const json& v, const std::string& ptr, const std::string& dir, int depth) {
    if (v.is_object()) {
      for (const auto& [k, x] : v.items()) walk(x, ptr + "/" + k, dir, depth);
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) walk(v[i], ptr + "/" + std::to_string(i), dir, depth);
    } else if (v.is_string() && depth < 3) {
      const std::string name = v.get<std::string>();
      auto ends = [&](const char* e) {
        const size_t n = std::char_traits<char>::length(e);
        return name.size() > n && name.compare(name.size() - n, n, e) == 0;
      };
      const bool is_path = name.find('/') != std::string::npos || ends(".json") || ends(".spm") ||
                           ends(".npz") || ends(".npy");
      if (!is_path || name.size() > 4096) return;
      namespace fs = std::filesystem;
      fs::path f(name);
      if (f.is_relative() && !dir.empty() && fs::is_regular_file(fs::path(dir) / f))
        f = fs::path(dir) / f;
      std::error_code ec;
      if (!fs::is_regular_file(f, ec)) return;
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx",
                    static_cast<unsigned long long>(detail::fnv1a(bytes)));
      named[ptr] = hex;
      if (ends(".json")) {  // a cluster names its server file relative to its own folder
        try {
          const json named_doc = json::parse(bytes);
          if (named_doc.is_object() && named_doc.contains("cluster") &&
              named_doc["cluster"].is_object() && named_doc["cluster"].contains("server"))
            walk(named_doc["cluster"]["server"], ptr + "/cluster/server", f.parent_path().string(),
                 depth + 1);
        } catch (const json::exception&) {
        }
      }
    }
  };
  walk(base, "", spec.base_dir, 0);
  for (size_t i = 0; i < spec.axes.size(); ++i)
    for (size_t j = 0; j < spec.axes[i].values_json.size(); ++j)
      walk(json::parse(spec.axes[i].values_json[j]),
           "/axes/" + std::to_string(i) + "/values/" + std::to_string(j), spec.base_dir, 0);
  if (!named.empty()) spec.named_file_hashes_json = named.dump();
  // Two axes writing the same pointer (or one inside the other) would make the result depend on
  // the axis order: refuse.
  for (size_t i = 0; i < spec.axes.size(); ++i)
    for (size_t j = 0; j < spec.axes.size(); ++j) {
      if (i == j) continue;
      const std::string& a = spec.axes[i].pointer;
      const std::string& b = spec.axes[j].pointer;
      if (a == b || (b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '/'))
        return input_error(src, "/axes",
                           "axes \"" + spec.axes[i].name + "\" and \"" + spec.axes[j].name +
                               "\" overlap (" + a + " contains " + b + ")");
    }
  return spec;
}

}  // namespace detail

Result<SweepSpec> parse_sweep(const std::string& text, const std::string& source_name,
                              const std::string& base_dir) {
  auto doc = parse_json<json>(text, source_name);
  if (!doc) return doc.error();
  return detail::parse_sweep_object(doc.value(), source_name, base_dir, {}, false);
}

Result<SweepSpec> load_sweep(const std::string& path) {
  auto text = read_text_file(path, "sweep file");
  if (!text) return text.error();
  return parse_sweep(*text, path, std::filesystem::path(path).parent_path().string());
}

int64_t num_points(const SweepSpec& spec) {
  int64_t n = 1;
  for (const auto& g : spec.groups) {
    const auto len = static_cast<int64_t>(spec.axes[static_cast<size_t>(g[0])].values_json.size());
    if (n > std::numeric_limits<int64_t>::max() / len) return std::numeric_limits<int64_t>::max();
    n *= len;
  }
  return n;
}

std::vector<int> point_coordinates(const SweepSpec& spec, int64_t index) {
  std::vector<int> coords(spec.axes.size(), 0);
  // Row-major: the last group varies fastest.
  for (size_t gi = spec.groups.size(); gi-- > 0;) {
    const auto& g = spec.groups[gi];
    const auto len = static_cast<int64_t>(spec.axes[static_cast<size_t>(g[0])].values_json.size());
    const int v = static_cast<int>(index % len);
    index /= len;
    for (int a : g) coords[static_cast<size_t>(a)] = v;
  }
  return coords;
}

namespace detail {
int64_t point_index(const SweepSpec& spec, const std::vector<int>& coords) {
  int64_t idx = 0;
  for (const auto& g : spec.groups) {
    const auto len = static_cast<int64_t>(spec.axes[static_cast<size_t>(g[0])].values_json.size());
    idx = idx * len + coords[static_cast<size_t>(g[0])];
  }
  return idx;
}
}  // namespace detail

Result<SweepPoint> make_point_at(const SweepSpec& spec, const std::vector<int>& coords) {
  SweepPoint p;
  p.index = detail::point_index(spec, coords);
  p.base_dir = spec.base_dir;
  json doc = json::parse(spec.base_study_json);
  for (size_t a = 0; a < spec.axes.size(); ++a) {
    const SweepAxis& axis = spec.axes[a];
    const std::string& v = axis.values_json[static_cast<size_t>(coords[a])];
    p.settings.push_back({axis.name, v});
    try {
      const json::json_pointer ptr(axis.pointer);
      json& parent = doc[ptr.parent_pointer()];
      json value = json::parse(v);
      if (axis.complement) value = 1.0 - value.get<double>();
      if (parent.is_array())
        parent[std::stoull(ptr.back())] = std::move(value);
      else if (parent.is_object())
        parent[ptr.back()] = std::move(value);
      else
        return input_error(spec.source, "/axes/" + std::to_string(a),
                           "cannot write " + axis.pointer + " in the study");
    } catch (const json::exception& e) {
      return input_error(spec.source, "/axes/" + std::to_string(a),
                         "cannot write " + axis.pointer + ": " + e.what());
    }
  }
  p.study_json = doc.dump();
  return p;
}

Result<SweepPoint> make_point(const SweepSpec& spec, int64_t index) {
  return make_point_at(spec, point_coordinates(spec, index));
}

}  // namespace sparsp::study
