// `sparsp tune`: search of policy parameters within an evaluation budget.
//
// Method (documented in docs/STUDIES.md):
//  - exhaustive when the whole grid fits the budget (every point evaluated, in parallel);
//  - otherwise coordinate descent (cyclic coordinate search over a discrete grid; e.g. Wright,
//    "Coordinate descent algorithms", Math. Programming 151, 2015): from the default
//    configuration, evaluate every value of one parameter with the others fixed, move to the best,
//    next parameter (in a seeded random order per pass); stop a descent when a full pass does not
//    improve, then restart from a seeded random grid point while budget is left. Every value of a
//    line is evaluated in parallel. Results are cached, so the budget counts distinct points.
// Successive halving (Jamieson & Talwalkar 2016) needs a cheap low-fidelity evaluation with noise
// to average out; a simulated point is exact and deterministic, so it buys nothing here.
// Determinism: the only randomness is one std::mt19937_64 seeded from the file; picks use
// `rng() % n` (not std::uniform_int_distribution, whose output differs between libraries);
// parallel evaluation writes into fixed slots, so the result does not depend on `threads`.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sparsp/policy.hpp"
#include "sparsp/sweep.hpp"
#include "sweep_json.hpp"

namespace sparsp::study {

using nlohmann::json;

namespace {

bool json_equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

}  // namespace

Result<TuneSpec> parse_tune(const std::string& text, const std::string& source_name,
                            const std::string& base_dir) {
  auto d = parse_json<json>(text, source_name);
  if (!d) return d.error();
  json doc = std::move(d.value());
  if (!doc.is_object()) return input_error(source_name, "", "expected a JSON object");
  if (doc.contains("axes"))
    return input_error(source_name, "/axes", "a tune file lists \"parameters\", not \"axes\"");
  if (!doc.contains("parameters"))
    return input_error(source_name, "/parameters", "missing (the parameters to search)");
  // Parse the parameters as sweep axes; rewrite error pointers /axes -> /parameters.
  json as_sweep = doc;
  as_sweep["axes"] = doc["parameters"];
  as_sweep.erase("parameters");
  const std::vector<std::string> extra = {"objective", "method", "budget", "seed",
                                          "top",       "policy", "output", "study_output"};
  auto sp = detail::parse_sweep_object(as_sweep, source_name, base_dir, extra, true);
  if (!sp) {
    Error e = sp.error();
    const std::string from = source_name + ":/axes", to = source_name + ":/parameters";
    if (e.message.compare(0, from.size(), from) == 0)
      e.message = to + e.message.substr(from.size());
    return e;
  }
  TuneSpec t;
  t.space = std::move(sp.value());
  const std::string& src = source_name;
  // Values of policy parameters out of their range would make every point invalid and the run
  // fail after the search (exit 1): refuse them now, at their place in this file (exit 2).
  {
    std::vector<std::string> places;  // file place of each axis, in axis order
    const json& ps = doc["parameters"];
    if (ps.is_array())
      for (size_t i = 0; i < ps.size(); ++i) {
        const std::string at = "/parameters/" + std::to_string(i);
        if (ps[i].is_object() && ps[i].contains("zip") && ps[i]["zip"].is_array())
          for (size_t j = 0; j < ps[i]["zip"].size(); ++j)
            places.push_back(at + "/zip/" + std::to_string(j));
        else
          places.push_back(at);
      }
    for (size_t ai = 0; ai < t.space.axes.size() && places.size() == t.space.axes.size(); ++ai) {
      const SweepAxis& a = t.space.axes[ai];
      const std::string prefix = "/policies/";
      const size_t params = a.pointer.find("/params/");
      if (a.pointer.compare(0, prefix.size(), prefix) != 0 || params == std::string::npos) continue;
      const std::string key = a.pointer.substr(params + 8);
      if (key.empty() || key.find('/') != std::string::npos) continue;
      const json::json_pointer entry_ptr(places[ai]);
      const json& entry = doc.at(entry_ptr);
      for (size_t k = 0; k < a.values_json.size(); ++k) {
        const std::string where = entry.contains("values")
                                      ? places[ai] + "/values/" + std::to_string(k)
                                      : places[ai] + "/range";
        const json v = json::parse(a.values_json[k]);
        if (!v.is_number())
          return input_error(src, where, "policy parameter '" + key + "' expects a number");
        if (auto st = policy::check_policy_param(key, v.get<double>()); !st)
          return input_error(src, where, st.error().message);
      }
    }
  }
  if (doc.contains("objective")) {
    if (!doc["objective"].is_string()) return input_error(src, "/objective", "expected a string");
    t.objective = doc["objective"].get<std::string>();
  }
  if (doc.contains("method")) {
    const json& m = doc["method"];
    if (m == "auto")
      t.method = TuneMethod::automatic;
    else if (m == "exhaustive")
      t.method = TuneMethod::exhaustive;
    else if (m == "coordinate_descent")
      t.method = TuneMethod::coordinate_descent;
    else
      return input_error(src, "/method",
                         "expected \"auto\", \"exhaustive\" or \"coordinate_descent\"");
  }
  if (doc.contains("budget")) {
    if (!doc["budget"].is_number_integer() || doc["budget"].get<int64_t>() < 1)
      return input_error(src, "/budget", "expected an integer >= 1");
    t.budget = doc["budget"].get<int64_t>();
  }
  if (doc.contains("seed")) {
    if (!doc["seed"].is_number_unsigned())
      return input_error(src, "/seed", "expected a non-negative integer");
    t.seed = doc["seed"].get<uint64_t>();
  }
  if (doc.contains("top")) {
    if (!doc["top"].is_number_integer() || doc["top"].get<int>() < 1)
      return input_error(src, "/top", "expected an integer >= 1");
    t.top = doc["top"].get<int>();
  }
  if (doc.contains("output")) {
    if (!doc["output"].is_string()) return input_error(src, "/output", "expected a file path");
    std::filesystem::path p(doc["output"].get<std::string>());
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    t.output_path = p.string();
  }
  if (doc.contains("study_output")) {
    if (!doc["study_output"].is_string())
      return input_error(src, "/study_output", "expected a file path");
    std::filesystem::path p(doc["study_output"].get<std::string>());
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    t.study_output_path = p.string();
  }
  json base = json::parse(t.space.base_study_json);
  if (doc.contains("policy")) {
    if (!doc["policy"].is_string()) return input_error(src, "/policy", "expected a JSON pointer");
    t.policy_pointer = doc["policy"].get<std::string>();
  }
  try {
    const json::json_pointer pp(t.policy_pointer);
    // A policy given as a string ("a/b/c:k=v") becomes its object form, which is what the tuned
    // policy JSON holds (a parameter axis into the policy does the same in parse_sweep).
    if (base.contains(pp) && base.at(pp).is_string()) {
      auto spec = policy::parse_policy(base.at(pp).get<std::string>());
      if (!spec) return input_error(src, "/policy", spec.error().message);
      json params = json::object();
      for (const auto& [k, v] : spec->params) params[k] = v;
      base[pp] = json{{"placement", spec->placement},
                      {"scheme", spec->scheme},
                      {"runtime", spec->runtime},
                      {"params", params}};
      t.space.base_study_json = base.dump();
    }
    if (!base.contains(pp) || !base.at(pp).is_object())
      return input_error(src, "/policy", "the study has no policy object at " + t.policy_pointer);
  } catch (const json::exception&) {
    return input_error(src, "/policy", "not a JSON pointer: \"" + t.policy_pointer + "\"");
  }
  for (const SweepAxis& a : t.space.axes) {
    int idx = -1;
    const json::json_pointer ptr(a.pointer);
    if (base.contains(ptr))
      for (size_t j = 0; j < a.values_json.size() && idx < 0; ++j)
        if (json_equal(base.at(ptr), json::parse(a.values_json[j]))) idx = static_cast<int>(j);
    t.default_coords.push_back(idx);
  }
  return t;
}

Result<TuneSpec> load_tune(const std::string& path) {
  auto text = read_text_file(path, "tune file");
  if (!text) return text.error();
  return parse_tune(*text, path, std::filesystem::path(path).parent_path().string());
}

namespace {

bool better(const TuneEntry& a, const TuneEntry& b) {
  if (a.score.ok != b.score.ok) return a.score.ok;
  if (!a.score.ok) return a.point.index < b.point.index;
  if (a.score.value != b.score.value) return a.score.value < b.score.value;
  return a.point.index < b.point.index;
}

class Searcher {
 public:
  Searcher(const TuneSpec& spec, const ScoreFn& score, int threads)
      // 0: every core this process may use (it used to be one worker, although `tune --help`
      // says the default is all cores).
      : spec_(spec),
        score_(score),
        threads_(threads > 0 ? threads : tbb::info::default_concurrency()) {}

  int64_t evaluations() const { return static_cast<int64_t>(cache_.size()); }
  bool budget_left() const { return evaluations() < spec_.budget; }
  const std::map<int64_t, TuneEntry>& cache() const { return cache_; }

  // Evaluates the given grid points (skipping cached ones, and those beyond the budget, taken in
  // the given order), in parallel. Returns their entries where evaluated.
  void evaluate(const std::vector<std::vector<int>>& coords) {
    std::vector<TuneEntry> todo;
    for (const auto& c : coords) {
      const int64_t idx = detail::point_index(spec_.space, c);
      bool dup = cache_.count(idx) > 0;
      for (const auto& t : todo) dup = dup || t.point.index == idx;
      if (dup) continue;
      if (evaluations() + static_cast<int64_t>(todo.size()) >= spec_.budget) break;
      TuneEntry e;
      e.coords = c;
      auto p = make_point_at(spec_.space, c);
      if (p)
        e.point = std::move(p.value());
      else {
        e.point.index = idx;
        e.score = Score{false, 0, p.error().message, p.error().exit_code};
      }
      todo.push_back(std::move(e));
    }
    run_parallel(todo);
    for (auto& e : todo) cache_.emplace(e.point.index, std::move(e));
  }

  // Scores the entries of `todo` on threads_ oneTBB workers (each entry written by one task).
  void run_parallel(std::vector<TuneEntry>& todo) const {
    auto work = [&](size_t i) {
      if (todo[i].point.study_json.empty()) return;
      try {
        todo[i].score = score_(todo[i].point);
      } catch (const std::exception& e) {  // e.g. std::bad_alloc: the point fails, not tune
        todo[i].score = Score{false, 0, std::string("evaluator failed: ") + e.what(), 1};
      }
    };
    const int n = std::clamp<int>(static_cast<int>(todo.size()), 1, std::min(threads_, 256));
    tbb::global_control parallelism(
        tbb::global_control::max_allowed_parallelism,
        static_cast<size_t>(std::max(n, tbb::info::default_concurrency())));
    tbb::task_arena arena(n);
    arena.execute([&] { tbb::parallel_for(size_t{0}, todo.size(), work); });
  }

  const TuneEntry* get(const std::vector<int>& c) const {
    auto it = cache_.find(detail::point_index(spec_.space, c));
    return it == cache_.end() ? nullptr : &it->second;
  }

 private:
  const TuneSpec& spec_;
  const ScoreFn& score_;
  int threads_;
  std::map<int64_t, TuneEntry> cache_;
};

std::vector<int> random_coords(const SweepSpec& s, std::mt19937_64& rng) {
  std::vector<int> c;
  for (const auto& a : s.axes) c.push_back(static_cast<int>(rng() % a.values_json.size()));
  return c;
}

}  // namespace

Result<TuneResult> run_tune(const TuneSpec& spec, const ScoreFn& score, int threads) {
  TuneResult res;
  res.space_size = num_points(spec.space);
  Searcher s(spec, score, threads);
  std::mt19937_64 rng(spec.seed);
  const auto& axes = spec.space.axes;

  TuneMethod m = spec.method;
  if (m == TuneMethod::automatic)
    m = res.space_size <= spec.budget ? TuneMethod::exhaustive : TuneMethod::coordinate_descent;
  res.method_used = m;
  if (m == TuneMethod::exhaustive && spec.budget < res.space_size)
    // Evaluating the first `budget` points in grid order and calling it exhaustive would claim a
    // search that did not happen.
    return input_error(spec.space.source, "/method",
                       "\"exhaustive\" evaluates every one of the " +
                           std::to_string(res.space_size) + " configurations, but the budget is " +
                           std::to_string(spec.budget) + " (raise /budget or --budget, or use " +
                           "\"auto\" or \"coordinate_descent\")");

  if (m == TuneMethod::exhaustive) {
    std::vector<std::vector<int>> all;
    const int64_t n = std::min(res.space_size, spec.budget);
    for (int64_t i = 0; i < n; ++i) all.push_back(point_coordinates(spec.space, i));
    s.evaluate(all);
  } else {
    std::vector<int> cur = spec.default_coords;
    for (size_t a = 0; a < cur.size(); ++a)
      if (cur[a] < 0) cur[a] = static_cast<int>(rng() % axes[a].values_json.size());
    s.evaluate({cur});
    int restarts_without_new = 0;
    while (s.budget_left()) {
      const int64_t before = s.evaluations();
      bool improved = true;
      while (improved && s.budget_left()) {
        improved = false;
        std::vector<size_t> order(axes.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
        for (size_t a : order) {
          std::vector<std::vector<int>> line;
          for (size_t v = 0; v < axes[a].values_json.size(); ++v) {
            auto c = cur;
            c[a] = static_cast<int>(v);
            line.push_back(c);
          }
          s.evaluate(line);
          const TuneEntry* best_line = s.get(cur);
          std::vector<int> best_c = cur;
          for (const auto& c : line) {
            const TuneEntry* e = s.get(c);
            if (e && (!best_line || better(*e, *best_line))) {
              best_line = e;
              best_c = c;
            }
          }
          if (best_c != cur) {
            cur = best_c;
            improved = true;
          }
          if (!s.budget_left()) break;
        }
      }
      // Restart from a random point not yet evaluated.
      bool found = false;
      for (int tries = 0; tries < 256 && !found; ++tries) {
        auto c = random_coords(spec.space, rng);
        if (!s.get(c)) {
          cur = c;
          found = true;
        }
      }
      if (!found) break;
      if (s.evaluations() == before && ++restarts_without_new > 4) break;
      s.evaluate({cur});
    }
  }

  res.evaluations = s.evaluations();
  for (const auto& [idx, e] : s.cache())
    if (e.score.ok) res.ranked.push_back(e);
  std::sort(res.ranked.begin(), res.ranked.end(), better);
  if (res.ranked.empty()) {
    // Every point failed. When each failure came from the points' input (a study that does not
    // load, a parameter out of range), the tune file is at fault: exit 2 with the first such
    // error. Any run-time failure (out of memory, ...) makes it exit 1, naming the first of those.
    std::string first_input, first_run;
    for (const auto& [idx, e] : s.cache()) {
      std::string& slot = e.score.exit_code == 2 ? first_input : first_run;
      if (slot.empty()) slot = e.score.reason.empty() ? "(no reason given)" : e.score.reason;
    }
    const bool input = first_run.empty();
    const std::string& why = input ? first_input : first_run;
    return Error{spec.space.source + ": no valid configuration among " +
                     std::to_string(res.evaluations) + " evaluated" +
                     (input ? ", each failed on its input" : "") +
                     (why.empty() ? std::string() : " (first: " + why + ")"),
                 input ? 2 : 1};
  }
  res.best = res.ranked.front();

  // The default configuration is the base study itself (it may lie outside the grid).
  TuneEntry def;
  def.coords = spec.default_coords;
  def.point.index = -1;
  def.point.study_json = spec.space.base_study_json;
  def.point.base_dir = spec.space.base_dir;
  const json base = json::parse(spec.space.base_study_json);
  for (const auto& a : axes) {
    const json::json_pointer ptr(a.pointer);
    def.point.settings.push_back({a.name, base.contains(ptr) ? base.at(ptr).dump() : "null"});
  }
  def.score = score(def.point);
  res.has_default = def.score.ok;
  res.default_entry = def;
  if (res.has_default && res.best.score.value > 0)
    res.margin = def.score.value / res.best.score.value - 1.0;

  const json best_study = json::parse(res.best.point.study_json);
  res.tuned_policy_json = best_study.at(json::json_pointer(spec.policy_pointer)).dump(2) + "\n";
  res.tuned_study_json = best_study.dump(2) + "\n";
  return res;
}

std::string format_tune_report(const TuneSpec& spec, const TuneResult& r) {
  std::ostringstream o;
  const char* method =
      r.method_used == TuneMethod::exhaustive ? "exhaustive" : "coordinate descent";
  o << "tune: " << method << ", " << r.evaluations << " of " << r.space_size
    << " configurations evaluated (budget " << spec.budget << ", seed " << spec.seed << ")\n";
  auto settings = [](const SweepPoint& p) {
    std::string s;
    // A setting the base study leaves out (the default configuration) is the scheme's default.
    for (const auto& st : p.settings)
      s += (s.empty() ? "" : " ") + st.name + "=" +
           (st.value_json == "null" ? std::string("(unset: default)") : st.value_json);
    return s;
  };
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.6g", r.best.score.value);
  o << "best:    " << settings(r.best.point) << "  " << spec.objective << " " << buf << "\n";
  if (r.has_default) {
    std::snprintf(buf, sizeof buf, "%.6g", r.default_entry.score.value);
    o << "default: " << settings(r.default_entry.point) << "  " << spec.objective << " " << buf
      << "\n";
    std::snprintf(buf, sizeof buf, "%+.2f%%", r.margin * 100.0);
    o << "margin:  default is " << buf << " vs best\n";
  } else {
    o << "default: invalid (" << r.default_entry.score.reason << ")\n";
  }
  // Top-N table, columns sized to content.
  std::vector<std::string> head = {"rank"};
  for (const auto& a : spec.space.axes) head.push_back(a.name);
  head.push_back(spec.objective);
  head.push_back("vs best");
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < r.ranked.size() && i < static_cast<size_t>(spec.top); ++i) {
    const auto& e = r.ranked[i];
    std::vector<std::string> row = {std::to_string(i + 1)};
    for (const auto& st : e.point.settings) row.push_back(st.value_json);
    std::snprintf(buf, sizeof buf, "%.6g", e.score.value);
    row.push_back(buf);
    std::snprintf(buf, sizeof buf, "%+.2f%%", (e.score.value / r.best.score.value - 1.0) * 100);
    row.push_back(buf);
    rows.push_back(row);
  }
  std::vector<size_t> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& row : rows) w[c] = std::max(w[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c)
      o << (c ? "  " : "") << cells[c] << std::string(w[c] - cells[c].size(), ' ');
    o << "\n";
  };
  line(head);
  for (const auto& row : rows) line(row);
  return o.str();
}

}  // namespace sparsp::study
