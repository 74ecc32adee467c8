// Ranking validation against published sequence-parallel benchmarks (issue 19 item 4).
// File schema: configs/published/README.md. Errors: "<file>:<JSON pointer>: <what>" (exit 2).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "sparsp/study.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::study {

KendallTau kendall_tau_a(const std::vector<double>& x, const std::vector<double>& y) {
  KendallTau k;
  const size_t n = std::min(x.size(), y.size());
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      ++k.pairs;
      const double s = (x[i] - x[j]) * (y[i] - y[j]);
      if (s > 0) ++k.concordant;
      if (s < 0) ++k.discordant;
    }
  k.tau = k.pairs == 0 ? std::numeric_limits<double>::quiet_NaN()
                       : static_cast<double>(k.concordant - k.discordant) / k.pairs;
  return k;
}

namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

const std::set<std::string> kMetrics = {"attention_time_s", "step_time_s", "denoise_step_s",
                                        "e2e_time_s"};

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

Status check_keys(const std::string& file, const json& j, const std::string& ptr,
                  std::initializer_list<const char*> keys) {
  if (!j.is_object()) return input_error(file, ptr, "expected a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : keys) ok = ok || it.key() == k;
    if (!ok) return input_error(file, ptr + "/" + it.key(), "unknown field");
  }
  return Ok{};
}

// Free text ("notes", "description"), when present, is a string: `notes: 5` was accepted.
Status check_text(const std::string& file, const json& j, const std::string& ptr) {
  for (const char* key : {"notes", "description"})
    if (j.contains(key) && !j[key].is_string())
      return input_error(file, ptr + "/" + key, "expected a string");
  return Ok{};
}

Result<std::string> get_string(const std::string& file, const json& j, const std::string& key,
                               const std::string& ptr, bool required) {
  if (!j.contains(key)) {
    if (required) return input_error(file, ptr, "missing field \"" + key + "\"");
    return std::string();
  }
  if (!j[key].is_string() || j[key].get<std::string>().empty())
    return input_error(file, ptr + "/" + key, "expected a non-empty string");
  return j[key].get<std::string>();
}

Result<int> get_positive_int(const std::string& file, const json& v, const std::string& ptr,
                             int64_t hi) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > hi)
    return input_error(file, ptr, "expected an integer in 1.." + std::to_string(hi));
  return static_cast<int>(v.get<int64_t>());
}

Result<double> get_positive(const std::string& file, const json& v, const std::string& ptr) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    return input_error(file, ptr, "expected a positive finite number");
  return v.get<double>();
}

Result<PublishedFile> check_file(const std::string& path, const RunOptions& run_options) {
  // The memory guard's advice names what check-published has: the file's pattern block.
  RunOptions options = run_options;
  options.memory_remedy =
      "use a larger block (/setup/pattern/block; check-published has no "
      "memory option)";
  auto text = read_text_file(path, "published-benchmark file");
  if (!text) return text.error();
  auto parsed = parse_json<json>(*text, path);
  if (!parsed) return parsed.error();
  const json& j = *parsed;
  if (auto st = check_keys(
          path, j, "",
          {"schema_version", "name", "description", "source", "setup", "sizes", "notes"});
      !st)
    return st.error();
  if (!j.contains("schema_version") || j["schema_version"] != 1)
    return input_error(path, "/schema_version", "expected 1");
  if (auto st = check_text(path, j, ""); !st) return st.error();
  PublishedFile f;
  f.path = path;
  auto name = get_string(path, j, "name", "", true);
  if (!name) return name.error();
  f.name = *name;
  if (!j.contains("source")) return input_error(path, "", "missing field \"source\"");
  if (auto st = check_keys(path, j["source"], "/source", {"url", "table", "assumed", "notes"}); !st)
    return st.error();
  if (auto st = check_text(path, j["source"], "/source"); !st) return st.error();
  auto url = get_string(path, j["source"], "url", "/source", true);
  if (!url) return url.error();
  f.url = *url;
  auto table = get_string(path, j["source"], "table", "/source", true);
  if (!table) return table.error();
  f.table = *table;

  if (!j.contains("setup")) return input_error(path, "", "missing field \"setup\"");
  const json& setup = j["setup"];
  if (auto st = check_keys(
          path, setup, "/setup",
          {"topology", "gpus", "model", "pattern", "metric", "compute", "batch", "notes"});
      !st)
    return st.error();
  if (auto st = check_text(path, setup, "/setup"); !st) return st.error();
  auto topo = get_string(path, setup, "topology", "/setup", true);
  if (!topo) return topo.error();
  std::string topology = *topo;
  {
    const auto dir = std::filesystem::path(path).parent_path();
    const bool is_file =
        topology.find('/') != std::string::npos || topology.find(".json") != std::string::npos;
    if (is_file && !std::filesystem::path(topology).is_absolute() &&
        !std::filesystem::exists(topology) && std::filesystem::exists(dir / topology))
      topology = (dir / topology).string();
  }
  int setup_gpus = 0;
  if (setup.contains("gpus")) {
    auto g = get_positive_int(path, setup["gpus"], "/setup/gpus", 4096);
    if (!g) return g.error();
    setup_gpus = *g;
  }
  if (setup.contains("batch")) {
    auto b = get_positive_int(path, setup["batch"], "/setup/batch", 1);
    if (!b) return input_error(path, "/setup/batch", "only batch 1 can be simulated");
  }
  auto metric = get_string(path, setup, "metric", "/setup", true);
  if (!metric) return metric.error();
  if (!kMetrics.count(*metric))
    return input_error(path, "/setup/metric",
                       "unknown metric '" + *metric +
                           "' (attention_time_s, step_time_s, denoise_step_s, e2e_time_s)");
  f.metric = *metric;
  if (!setup.contains("model")) return input_error(path, "/setup", "missing field \"model\"");
  const json& model_j = setup["model"];
  if (!model_j.is_string() && !model_j.is_object())
    return input_error(path, "/setup/model", "expected a model preset, a model file or an object");
  std::string model_name = model_j.is_string() ? model_j.get<std::string>() : "";
  if (model_j.is_string() && model_name.find(".json") != std::string::npos &&
      !std::filesystem::exists(model_name)) {
    const auto p = std::filesystem::path(path).parent_path() / model_name;
    if (std::filesystem::exists(p)) model_name = p.string();
  }

  if (!j.contains("sizes") || !j["sizes"].is_array() || j["sizes"].empty())
    return input_error(path, "/sizes", "expected a non-empty list of problem sizes");
  // The setup's topology and model are checked once, at their pointers (an error in them was
  // reported at the first size, "/sizes/0").
  int topo_gpus = 0;
  {
    auto t = topology::Topology::load(topology);
    if (!t) return input_error(path, "/setup/topology", t.error().message);
    topo_gpus = t->num_gpus();
  }
  std::vector<double> all_errors;
  std::set<std::string> size_names;
  for (size_t i = 0; i < j["sizes"].size(); ++i) {
    const json& s = j["sizes"][i];
    const std::string sp = "/sizes/" + std::to_string(i);
    if (auto st =
            check_keys(path, s, sp, {"name", "tokens", "latent", "gpus", "measured", "notes"});
        !st)
      return st.error();
    PublishedSize size;
    auto sname = get_string(path, s, "name", sp, true);
    if (!sname) return sname.error();
    size.name = *sname;
    if (!size_names.insert(size.name).second)
      return input_error(path, sp + "/name", "size '" + size.name + "' twice in this file");
    if (auto st = check_text(path, s, sp); !st) return st.error();
    size.gpus = setup_gpus;
    if (s.contains("gpus")) {
      auto g = get_positive_int(path, s["gpus"], sp + "/gpus", 4096);
      if (!g) return g.error();
      size.gpus = *g;
    }
    if (size.gpus == 0) return input_error(path, sp, "missing field \"gpus\" (here or in /setup)");
    // More GPUs than the topology has: the place that set them (it was reported at the
    // generated study's "/sizes/0:/gpus").
    if (topo_gpus > 0 && size.gpus > topo_gpus)
      return input_error(path, s.contains("gpus") ? sp + "/gpus" : "/setup/gpus",
                         "asks for " + std::to_string(size.gpus) + " GPUs, but topology '" + *topo +
                             "' has " + std::to_string(topo_gpus));
    // The model of this size: a preset/file as given, or the inline object with its latent.
    std::string model_json;
    patterns::ModelSpec model;
    if (model_j.is_object()) {
      json m = model_j;
      if (s.contains("tokens") && s.contains("latent"))
        return input_error(path, sp + "/latent", "give tokens or latent, not both");
      if (s.contains("tokens")) {
        // The model's own bound (patterns/model.cpp: T x H x W <= 2^28, token counts are 32-bit),
        // here at the size's pointer (it was reported in the generated model, past 2^28).
        auto t = get_positive_int(path, s["tokens"], sp + "/tokens", int64_t{1} << 28);
        if (!t)
          return input_error(path, sp + "/tokens",
                             "expected an integer in 1..268435456 (2^28 video tokens: token "
                             "counts are 32-bit)");
        m["latent"] = json::array({1, 1, *t});
      } else if (s.contains("latent")) {
        m["latent"] = s["latent"];
      }
      model_json = m.dump();
      // Errors name /setup/model (the object given there), or the size's tokens / latent.
      const std::string marker = "\x1fpublished-model";
      auto pm = patterns::parse_model(model_json, marker);
      if (!pm) {
        std::string msg = pm.error().message;
        if (msg.rfind(marker, 0) == 0) msg = msg.substr(marker.size());
        if (msg.rfind(":/latent", 0) == 0 && (s.contains("tokens") || s.contains("latent")))
          return input_error(path, sp + (s.contains("tokens") ? "/tokens" : "/latent"),
                             msg.substr(msg.find(": ") + 2));
        if (msg.rfind(":/", 0) == 0) return Error{path + ":/setup/model" + msg.substr(1), 2};
        if (msg.rfind(": ", 0) == 0) return Error{path + ":/setup/model" + msg, 2};
        return Error{path + ":/setup/model: " + msg, 2};
      }
      model = *pm;
    } else {
      if (s.contains("tokens") || s.contains("latent"))
        return input_error(path, sp + (s.contains("tokens") ? "/tokens" : "/latent"),
                           "a size may set the tokens only of an inline model object");
      auto pm = patterns::load_model(model_name);
      if (!pm) return input_error(path, "/setup/model", pm.error().message);
      model = *pm;
    }
    if (!s.contains("measured") || !s["measured"].is_array() || s["measured"].empty())
      return input_error(path, sp + "/measured", "expected a non-empty list of measurements");
    json policies = json::array();
    std::set<std::string> labels;
    for (size_t k = 0; k < s["measured"].size(); ++k) {
      const json& mrow = s["measured"][k];
      const std::string mp = sp + "/measured/" + std::to_string(k);
      if (auto st = check_keys(path, mrow, mp, {"policy", "time_s", "throughput_per_s", "notes"});
          !st)
        return st.error();
      if (auto st = check_text(path, mrow, mp); !st) return st.error();
      auto pol = get_string(path, mrow, "policy", mp, true);
      if (!pol) return pol.error();
      auto spec = policy::parse_policy(*pol);
      if (!spec) return input_error(path, mp + "/policy", spec.error().message);
      if (auto st =
              policy::check_runnable(*spec, size.gpus, model.heads, model.kv_heads_or_heads());
          !st)
        return input_error(path, mp + "/policy", st.error().message);
      if (!labels.insert(*pol).second)
        return input_error(path, mp + "/policy", "policy '" + *pol + "' twice in this size");
      const bool has_t = mrow.contains("time_s"), has_x = mrow.contains("throughput_per_s");
      if (has_t == has_x)
        return input_error(path, mp, "expected exactly one of time_s and throughput_per_s");
      auto v = get_positive(path, has_t ? mrow["time_s"] : mrow["throughput_per_s"],
                            mp + (has_t ? "/time_s" : "/throughput_per_s"));
      // A published time or rate is within 1e-9..1e9 (s or 1/s): beyond it the figure is a typo,
      // and its error column would not fit the table (break-it 2026-12-03: time_s 1e308).
      if (v && (*v < 1e-9 || *v > 1e9))
        return input_error(path, mp + (has_t ? "/time_s" : "/throughput_per_s"),
                           "expected a number in 1e-9..1e9, got " + json(*v).dump());
      if (!v) return v.error();
      PublishedRow row;
      row.policy = *pol;
      row.measured_time_s = has_t ? *v : 1.0 / *v;
      size.rows.push_back(row);
      policies.push_back(*pol);
    }
    json study = {{"schema_version", 1},
                  {"name", f.name + " " + size.name},
                  {"topology", topology},
                  {"model", model_j.is_string() ? model_name : model.name},
                  {"gpus", size.gpus},
                  {"policies", policies},
                  {"steps", {{"first", 0}, {"count", 1}}},
                  {"layers", {{"first", 0}, {"count", 1}}}};
    if (setup.contains("pattern")) study["pattern"] = setup["pattern"];
    if (setup.contains("compute")) study["compute"] = setup["compute"];
    auto st = parse_study(study.dump(), path + ":" + sp);
    if (!st) return st.error();
    st->model_json = model_json;
    auto res = run_study(*st, options);
    if (!res) return res.error();
    if (res->policies.size() != size.rows.size())
      return input_error(path, sp, "a policy was left out on this topology");
    std::vector<double> pred, meas;
    for (size_t k = 0; k < size.rows.size(); ++k) {
      const PolicyResult& r = res->policies[k];
      double t = 0;
      if (f.metric == "attention_time_s") t = r.attention_time_s;
      if (f.metric == "step_time_s") t = r.step_time_s;
      if (f.metric == "denoise_step_s") t = r.denoise_time_s / std::max(1, model.steps);
      if (f.metric == "e2e_time_s") t = r.e2e_time_s;
      PublishedRow& row = size.rows[k];
      row.predicted_time_s = t;
      row.throughput_error = t > 0 ? std::fabs(row.measured_time_s / t - 1) : 0;
      all_errors.push_back(row.throughput_error);
      pred.push_back(t);
      meas.push_back(row.measured_time_s);
    }
    size.tau = kendall_tau_a(pred, meas);
    f.sizes.push_back(std::move(size));
  }
  f.median_throughput_error = median(all_errors);
  return f;
}

ojson number_or_null(double v) { return std::isfinite(v) ? ojson(v) : ojson(nullptr); }

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

Result<PublishedCheck> check_published(const std::vector<std::string>& paths,
                                       const RunOptions& options) {
  PublishedCheck c;
  if (paths.empty()) return input_error("<command line>", "", "no published-benchmark file");
  std::vector<double> errors;
  double min_tau = std::numeric_limits<double>::quiet_NaN();
  // The same file twice would count its sizes twice in the medians: refused before any run.
  std::set<std::string> seen;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto canon = std::filesystem::weakly_canonical(p, ec);
    if (!seen.insert(ec ? p : canon.string()).second)
      return input_error("<command line>", "", p + " is given twice");
  }
  for (const auto& p : paths) {
    auto f = check_file(p, options);
    if (!f) return f.error();
    for (const auto& s : f->sizes) {
      for (const auto& r : s.rows) errors.push_back(r.throughput_error);
      if (std::isfinite(s.tau.tau) && !(s.tau.tau >= min_tau)) min_tau = s.tau.tau;
    }
    c.files.push_back(std::move(*f));
  }
  c.median_throughput_error = median(errors);
  c.min_tau = min_tau;
  return c;
}

std::string format_published(const PublishedCheck& c) {
  std::ostringstream o;
  for (const auto& f : c.files) {
    o << f.name << " (" << f.path << ")\n  source: " << f.url << ", " << f.table
      << "\n  metric: " << f.metric << "\n";
    for (const auto& s : f.sizes) {
      // A size whose name ends in its GPU count ("2 GPUs", "1280x720, 2 GPUs") is not told it
      // twice ("size 2 GPUs, 2 GPUs").
      const std::string gpus_text = std::to_string(s.gpus) + " GPUs";
      const bool told =
          s.name.size() >= gpus_text.size() &&
          s.name.compare(s.name.size() - gpus_text.size(), gpus_text.size(), gpus_text) == 0;
      o << "  size " << s.name << (told ? "" : ", " + gpus_text) << ": Kendall tau "
        << (std::isfinite(s.tau.tau) ? fmt("%.3f", s.tau.tau) : std::string("-")) << " ("
        << s.tau.concordant << " concordant, " << s.tau.discordant << " discordant of "
        << s.tau.pairs << " pairs)\n";
      char line[256];
      std::snprintf(line, sizeof line, "    %-44s %14s %14s %10s\n", "policy", "measured_s",
                    "predicted_s", "thr_err");
      o << line;
      for (const auto& r : s.rows) {
        std::snprintf(line, sizeof line, "    %-44s %14.6g %14.6g %9.1f%%\n", r.policy.c_str(),
                      r.measured_time_s, r.predicted_time_s, 100 * r.throughput_error);
        o << line;
      }
    }
    o << "  median |throughput error|: " << fmt("%.1f%%", 100 * f.median_throughput_error)
      << "\n\n";
  }
  o << "overall: median |throughput error| " << fmt("%.1f%%", 100 * c.median_throughput_error)
    << ", lowest Kendall tau "
    << (std::isfinite(c.min_tau) ? fmt("%.3f", c.min_tau) : std::string("-")) << "\n";
  return o.str();
}

std::string published_to_json(const PublishedCheck& c) {
  ojson j;
  j["schema_version"] = 1;
  j["files"] = ojson::array();
  for (const auto& f : c.files) {
    ojson fj;
    fj["path"] = f.path;
    fj["name"] = f.name;
    fj["url"] = f.url;
    fj["table"] = f.table;
    fj["metric"] = f.metric;
    fj["sizes"] = ojson::array();
    for (const auto& s : f.sizes) {
      ojson sj;
      sj["name"] = s.name;
      sj["gpus"] = s.gpus;
      sj["kendall_tau"] = number_or_null(s.tau.tau);
      sj["concordant"] = s.tau.concordant;
      sj["discordant"] = s.tau.discordant;
      sj["pairs"] = s.tau.pairs;
      sj["rows"] = ojson::array();
      for (const auto& r : s.rows)
        sj["rows"].push_back({{"policy", r.policy},
                              {"measured_time_s", r.measured_time_s},
                              {"predicted_time_s", r.predicted_time_s},
                              {"throughput_error", r.throughput_error}});
      fj["sizes"].push_back(sj);
    }
    fj["median_throughput_error"] = number_or_null(f.median_throughput_error);
    j["files"].push_back(fj);
  }
  j["median_throughput_error"] = number_or_null(c.median_throughput_error);
  j["min_kendall_tau"] = number_or_null(c.min_tau);
  return j.dump(2) + "\n";
}

}  // namespace sparsp::study
