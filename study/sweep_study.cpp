// The `simulate` study runner as the evaluator of sweep and tune points, and small helpers.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sparsp/output_file.hpp"
#include "sparsp/pattern.hpp"
#include "sparsp/sweep.hpp"
#include "sparsp/topology.hpp"
#include "sweep_json.hpp"
#if __has_include("sparsp/study.hpp")
#include "internal.hpp"
#include "sparsp/study.hpp"
#endif

namespace sparsp::study {

using nlohmann::json;

Result<ScoreFn> score_from_evaluator(PointEvaluator evaluator, const std::string& column,
                                     size_t row) {
  size_t col = evaluator.columns.size();
  for (size_t c = 0; c < evaluator.columns.size(); ++c)
    if (evaluator.columns[c] == column) col = c;
  if (col == evaluator.columns.size()) {
    std::string known;
    for (const auto& c : evaluator.columns) known += (known.empty() ? "" : ", ") + c;
    return input_error("tune", "/objective",
                       "unknown metric \"" + column + "\" (known: " + known + ")");
  }
  auto eval = std::move(evaluator.evaluate);
  return ScoreFn([eval, col, row, column](const SweepPoint& p) {
    const PointOutcome o = eval(p);
    if (o.skipped) return Score{false, 0, o.reason, o.exit_code};
    if (row >= o.rows.size())
      return Score{false, 0, "no row " + std::to_string(row) + " in the result"};
    if (row < o.row_reasons.size() && !o.row_reasons[row].empty())
      return Score{false, 0, "left out: " + o.row_reasons[row]};
    const auto& cells = o.rows[row];
    if (col >= cells.size()) return Score{false, 0, "no " + column + " in the result"};
    try {
      const json v = json::parse(cells[col]);
      if (!v.is_number()) return Score{false, 0, column + " is not a number: " + cells[col]};
      return Score{true, v.get<double>(), ""};
    } catch (const json::exception&) {
      return Score{false, 0, column + " is not a number: " + cells[col]};
    }
  });
}

Status check_writable(const std::string& path_given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A device or FIFO is written in place, a symbolic link followed (sparsp/output_file.hpp).
  auto target = output_target(path_given);
  if (!target) return target.error();
  if (target->in_place) {
    const int fd = ::open(target->path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    // A FIFO without a reader yet (ENXIO) is fine: the reader may come later.
    if (fd < 0 && errno != ENXIO)
      return input_error(path_given, "", std::string("cannot write: ") + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return Ok{};
  }
  const std::string& path = target->path;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return input_error(path_given, "",
                       fs::exists(parent, ec)
                           ? "cannot write: " + parent.string() + " is not a folder"
                           : "cannot write: folder " + parent.string() + " does not exist");
  const std::string probe = path + ".tmp";  // the file write_text_atomic writes first
  const bool existed = fs::exists(probe, ec);
  {
    std::ofstream out(probe, std::ios::binary | std::ios::app);
    if (!out) return input_error(path_given, "", "cannot write: cannot create " + probe);
  }
  if (!existed) fs::remove(probe, ec);
  return Ok{};
}

Status write_text_atomic(const std::string& path_given, const std::string& text) {
  auto target = output_target(path_given);
  if (!target) return target.error();
  if (target->in_place) return write_in_place(target->path, text);
  const std::string& path = target->path;
  // A temporary of its own beside the output (mkstemp: O_EXCL, unique), so that two writers
  // never share one and a user's "<out>.tmp" is never taken (break-it 2026-12-03: a fixed
  // "<out>.tmp" was consumed, and two merges raced on it).
  std::string tmp = path + ".XXXXXX.tmp";
  const int fd = ::mkstemps(tmp.data(), 4);
  if (fd < 0)
    return input_error(path_given, "", std::string("cannot write: ") + std::strerror(errno));
  std::error_code ec;
  auto fail = [&](Error e) {
    ::close(fd);
    std::filesystem::remove(tmp, ec);  // no temporary left behind after an error
    return e;
  };
  if (::fchmod(fd, 0644) != 0)
    return fail(Error{path_given + ": cannot write: " + std::strerror(errno), 1});
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(Error{path_given + ": write failed: " + std::strerror(errno), 1});
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    std::filesystem::remove(tmp, ec);
    return Error{path_given + ": write failed: " + std::strerror(errno), 1};
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    return Error{path_given + ": cannot rename the finished temporary into place: " + why, 1};
  }
  return Ok{};
}

#if __has_include("sparsp/study.hpp")

namespace {

// Metric columns of a study row, as in `simulate --json` (PolicyResult), in this order.
const std::vector<std::string>& study_columns() {
  static const std::vector<std::string> kColumns = {
      "topology", "policy", "placement", "scheme", "runtime", "policy_params", "volume_bytes",
      "control_bytes", "attention_time_s", "other_time_s", "step_time_s", "e2e_time_s",
      "lower_bound_s", "lower_bound_binding", "speedup", "attention_speedup", "volume_vs_baseline",
      "compute_imbalance", "busiest_link", "busiest_utilization", "units", "simulated",
      // issue 14, appended (rename nothing)
      "denoise_time_s", "denoise_speedup", "not_modelled", "compute_source"};
  return kColumns;
}

// Folder for documents of a point that the study loader only takes as files (an inline topology
// or model object); created on first use in $TMPDIR (or /tmp where TMPDIR names no folder),
// removed with the evaluator.
class ScratchDir {
 public:
  ScratchDir() = default;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // A file holding `doc` (same content, same file; safe from several threads).
  Result<std::string> file_for(const json& doc) {
    auto dir = folder();
    if (!dir) return dir.error();
    const std::string text = doc.dump(2) + "\n";
    char name[40];
    std::snprintf(name, sizeof name, "doc-%016llx.json",
                  static_cast<unsigned long long>(detail::fnv1a(text)));
    std::error_code ec;
    const std::filesystem::path p = dir.value() / name;
    if (!std::filesystem::exists(p, ec)) {
      const std::filesystem::path tmp =
          dir.value() / (std::string(name) + "." +
                         std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())));
      auto st = write_text_atomic(tmp.string(), text);
      if (!st) return st.error();
      std::filesystem::rename(tmp, p, ec);
      if (ec) return Error{p.string() + ": " + ec.message(), 1};
    }
    return p.string();
  }

 private:
  Result<std::filesystem::path> folder() {
    std::lock_guard lk(mu_);
    if (!path_.empty()) return path_;
    static std::atomic<int> counter{0};
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec || !std::filesystem::is_directory(base, ec)) base = "/tmp";  // TMPDIR names no folder
    const std::filesystem::path p =
        base / ("sparsp-sweep-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(p, ec);
    if (ec)
      return Error{"cannot create the scratch folder " + p.string() + ": " + ec.message() +
                       " (set TMPDIR to a writable folder)",
                   1};
    path_ = p;
    return path_;
  }

  std::mutex mu_;
  std::filesystem::path path_;
};

// Documents of one point that the study loader only takes as files (an inline topology or
// model object), held as in-memory files (memfd) named /proc/self/fd/N: nothing is written to
// disk, so nothing is left behind whatever ends the process (SIGINT, SIGTERM, SIGKILL). Closed
// when the point is done. Where memfd or /proc is unavailable, the shared ScratchDir is used.
class PointDocs {
 public:
  explicit PointDocs(ScratchDir& fallback) : fallback_(fallback) {}
  ~PointDocs() {
    for (int fd : fds_) ::close(fd);
  }
  PointDocs(const PointDocs&) = delete;
  PointDocs& operator=(const PointDocs&) = delete;

  Result<std::string> file_for(const json& doc) {
    static const bool proc_fd = std::filesystem::is_directory("/proc/self/fd");
    const int fd = proc_fd ? ::memfd_create("sparsp-sweep-doc", MFD_CLOEXEC) : -1;
    if (fd < 0) return fallback_.file_for(doc);
    fds_.push_back(fd);
    const std::string text = doc.dump(2) + "\n";
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Error{std::string("in-memory study document: ") + std::strerror(errno), 1};
      done += static_cast<size_t>(n);
    }
    return "/proc/self/fd/" + std::to_string(fd);
  }

 private:
  ScratchDir& fallback_;
  std::vector<int> fds_;
};

// A message about a point with the scratch files' names taken out, so that it names the place
// in the sweep, not a per-process temporary file: "<point 0>:/topology: /tmp/sparsp-sweep-7-0/
// doc-1.json:/template/x: what" -> "<point 0>:/topology/template/x: what".
std::string without_scratch_paths(std::string msg, std::vector<std::string> paths) {
  // Longest first: /proc/self/fd/12 must not eat the start of /proc/self/fd/123.
  std::stable_sort(paths.begin(), paths.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& p : paths) {
    for (size_t at; (at = msg.find(": " + p + ":/")) != std::string::npos;)
      msg.replace(at, p.size() + 3, "");
    for (size_t at; (at = msg.find(p)) != std::string::npos;) msg.replace(at, p.size(), "<inline>");
  }
  return msg;
}

// Study fields that name files: inline objects become scratch files; relative paths resolve
// against the point's base folder (where they exist there).
Status materialize(json& study, const std::string& base_dir, PointDocs& scratch,
                   std::vector<std::string>& scratch_files) {
  auto fix = [&](json& v) -> Status {
    if (v.is_object()) {
      auto f = scratch.file_for(v);
      if (!f) return f.error();
      v = f.value();
      scratch_files.push_back(f.value());
    } else if (v.is_string() && !base_dir.empty()) {
      const std::filesystem::path p(v.get<std::string>());
      std::error_code ec;
      if (p.is_relative() && std::filesystem::is_regular_file(base_dir / p, ec))
        v = (base_dir / p).string();
    }
    return Ok{};
  };
  for (const char* key : {"topology", "model"})
    if (study.contains(key)) {
      auto st = fix(study[key]);
      if (!st) return st;
    }
  if (study.contains("topologies") && study["topologies"].is_array())
    for (json& t : study["topologies"]) {
      auto st = fix(t);
      if (!st) return st;
    }
  if (study.contains("pattern") && study["pattern"].is_object())
    for (const char* key : {"input", "table_path", "table", "q_path", "k_path"})
      if (study["pattern"].contains(key) && study["pattern"][key].is_string()) {
        auto st = fix(study["pattern"][key]);
        if (!st) return st;
      }
  return Ok{};
}

std::string cell(const std::string& s) { return json(s).dump(); }
std::string cell(double v) { return std::isfinite(v) ? json(v).dump() : "null"; }
std::string cell(int64_t v) { return std::to_string(v); }

}  // namespace

bool study_runner_available() { return true; }

Result<PointEvaluator> study_point_evaluator(double max_memory_bytes) {
  auto scratch = std::make_shared<ScratchDir>();
  PointEvaluator ev;
  ev.columns = study_columns();
  RunOptions run_options;
  if (max_memory_bytes > 0) run_options.max_memory_bytes = max_memory_bytes;
  ev.check = [scratch](const SweepPoint& p) -> Status {
    try {
      json doc = json::parse(p.study_json);
      std::vector<std::string> files;
      PointDocs docs(*scratch);
      auto st = materialize(doc, p.base_dir, docs, files);
      if (!st) return st;
      auto study = parse_study(doc.dump(), "<point " + std::to_string(p.index) + ">");
      if (!study) return Error{without_scratch_paths(study.error().message, files), 2};
      for (size_t i = 0; i < study->topologies.size(); ++i)
        if (auto t = topology::Topology::load(study->topologies[i]); !t) {
          const std::string place =
              study->topologies.size() > 1 && study->topologies_key == "topologies"
                  ? "/topologies/" + std::to_string(i)
                  : "/topology";
          return Error{
              without_scratch_paths(study->source + ":" + place + ": " + t.error().message, files),
              t.error().exit_code};
        }
      if (auto m = patterns::load_model(study->model); !m)
        return Error{without_scratch_paths(study->source + ":/model: " + m.error().message, files),
                     m.error().exit_code};
      return Ok{};
    } catch (const std::exception& e) {
      return Error{std::string("cannot check the point: ") + e.what(), 1};
    }
  };
  ev.evaluate = [scratch, run_options](const SweepPoint& p) -> PointOutcome {
    PointOutcome out;
    json doc;
    try {
      doc = json::parse(p.study_json);
    } catch (const json::exception& e) {
      return PointOutcome{true, e.what(), {}, {}, 2};
    }
    std::vector<std::string> files;
    PointDocs docs(*scratch);
    auto st = materialize(doc, p.base_dir, docs, files);
    if (!st) return PointOutcome{true, st.error().message, {}, {}, st.error().exit_code};
    auto study = parse_study(doc.dump(), "<point " + std::to_string(p.index) + ">");
    if (!study)
      return PointOutcome{true,
                          without_scratch_paths(study.error().message, files),
                          {},
                          {},
                          study.error().exit_code};
    auto res = run_study(*study, run_options);
    if (!res)
      return PointOutcome{
          true, without_scratch_paths(res.error().message, files), {}, {}, res.error().exit_code};
    // One row per (topology, study policy), in study order: results and left-out policies are
    // both topology-major in study order, so they merge back into place.
    size_t ran = 0, left = 0;
    const auto& skipped = res->skipped;
    while (ran < res->policies.size() || left < skipped.size()) {
      const std::string topo =
          ran < res->policies.size() ? res->policies[ran].topology : skipped[left].topology;
      for (const auto& spec : study->policies) {
        if (left < skipped.size() && skipped[left].topology == topo &&
            skipped[left].policy == policy_label(spec)) {
          json params = json::object();
          for (const auto& [k, v] : spec.params) params[k] = v;
          std::vector<std::string> cells(study_columns().size(), "null");
          cells[0] = cell(topo);
          cells[1] = cell(spec.name());
          cells[2] = cell(spec.placement);
          cells[3] = cell(spec.scheme);
          cells[4] = cell(spec.runtime);
          cells[5] = cell(params.dump());
          out.rows.push_back(std::move(cells));
          out.row_reasons.resize(out.rows.size());
          out.row_reasons.back() = "left out: " + skipped[left].reason;
          ++left;
          continue;
        }
        if (ran >= res->policies.size())
          break;  // (cannot happen: every policy ran or was left out)
        const PolicyResult& r = res->policies[ran++];
        json params = json::object();
        for (const auto& [k, v] : r.policy.params) params[k] = v;
        out.rows.push_back({cell(r.topology),
                            cell(r.policy.name()),
                            cell(r.policy.placement),
                            cell(r.policy.scheme),
                            cell(r.policy.runtime),
                            cell(params.dump()),
                            cell(whole_bytes(r.volume_bytes)),
                            cell(whole_bytes(r.control_bytes)),
                            cell(r.attention_time_s),
                            cell(r.other_time_s),
                            cell(r.step_time_s),
                            cell(r.e2e_time_s),
                            cell(r.lower_bound_s),
                            cell(r.lower_bound_binding),
                            cell(r.speedup),
                            cell(r.attention_speedup),
                            cell(r.volume_vs_baseline),
                            cell(r.compute_imbalance),
                            r.busiest_link.empty() ? std::string("null") : cell(r.busiest_link),
                            cell(r.busiest_utilization),
                            cell(r.units),
                            cell(r.simulated),
                            cell(r.denoise_time_s),
                            cell(r.denoise_speedup),
                            cell(join_not_modelled(r.not_modelled)),
                            cell(r.compute_source)});
      }
    }
    return out;
  };
  return ev;
}

Result<ScoreFn> study_score(const std::string& objective, const std::string& policy_pointer,
                            double max_memory_bytes) {
  size_t row = 0;
  const std::string prefix = "/policies/";
  if (policy_pointer.compare(0, prefix.size(), prefix) == 0 &&
      policy_pointer.find_first_not_of("0123456789", prefix.size()) == std::string::npos &&
      policy_pointer.size() > prefix.size())
    row = std::stoull(policy_pointer.substr(prefix.size()));
  // tune minimises a number: text columns fail at run time, and for a "higher is better" ratio
  // it would pick the slowest configuration.
  for (const char* text : {"topology", "policy", "placement", "scheme", "runtime", "policy_params",
                           "lower_bound_binding", "busiest_link", "not_modelled", "compute_source"})
    if (objective == text)
      return input_error("tune", "/objective",
                         "\"" + objective + "\" is a text column, not a metric to minimise");
  for (const char* higher : {"speedup", "attention_speedup", "denoise_speedup"})
    if (objective == higher)
      return input_error("tune", "/objective",
                         "\"" + objective +
                             "\" is higher-is-better and tune minimises; use e2e_time_s, "
                             "denoise_time_s or attention_time_s");
  auto ev = study_point_evaluator(max_memory_bytes);
  if (!ev) return ev.error();
  return score_from_evaluator(std::move(ev.value()), objective, row);
}

#else
bool study_runner_available() { return false; }
Result<PointEvaluator> study_point_evaluator(double) {
  return Error{"sweep: this build has no `simulate` study runner", 1};
}
Result<ScoreFn> study_score(const std::string&, const std::string&, double) {
  return Error{"tune: this build has no `simulate` study runner", 1};
}
#endif

}  // namespace sparsp::study
