// Running a sweep: worker threads, reorder buffer, streamed CSV / JSON Lines output, resumption
// and progress. Public surface: include/sparsp/sweep.hpp.
//
// Design: `threads` std::jthread workers take point indices from a shared counter; a worker may
// run ahead of the writer by at most kWindowPerThread * threads points (bounds the reorder buffer).
// Finished outcomes go into an ordered map; the calling thread writes them strictly in index
// order, each point's rows with one fwrite and one fflush, so the file is always a prefix of the
// uninterrupted output, cut at most inside the last point (handled on resume).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "sparsp/output_file.hpp"
#include "sparsp/sweep.hpp"
#include "sweep_json.hpp"

namespace sparsp::study {

using nlohmann::json;

namespace {

constexpr int64_t kWindowPerThread = 8;
constexpr int64_t kMaxThreads = 256;

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// A cell of a CSV row from a compact JSON scalar text: strings unquoted, null empty, others as is.
std::string csv_cell(const std::string& json_text) {
  if (json_text.empty() || json_text == "null") return "";
  if (json_text.front() == '"') {
    try {
      return csv_escape(json::parse(json_text).get<std::string>());
    } catch (const json::exception&) {
      return csv_escape(json_text);
    }
  }
  return csv_escape(json_text);
}

std::string json_key(const std::string& k) { return json(k).dump(); }

// The part every row of a point starts with: point index and axis values, then a separator.
std::string row_prefix(OutputFormat format, const SweepPoint& point) {
  std::string s;
  if (format == OutputFormat::csv) {
    s = std::to_string(point.index);
    for (const auto& st : point.settings) s += "," + csv_cell(st.value_json);
    s += ",";
  } else {
    s = "{\"point\":" + std::to_string(point.index);
    for (const auto& st : point.settings) s += "," + json_key(st.name) + ":" + st.value_json;
    s += ",";
  }
  return s;
}

// Reads an earlier output file; returns the byte length to keep and the first point to run.
struct ResumeState {
  bool fresh = true;        // nothing usable: write from scratch (header included)
  size_t keep_bytes = 0;    // bytes of the file to keep
  int64_t next_point = 0;   // first point to (re)evaluate
  int64_t points_seen = 0;  // distinct points present (last one possibly incomplete)
};

Result<ResumeState> scan_output(const std::string& path, const std::string& text,
                                const SweepSpec& spec, OutputFormat format,
                                const std::string& header, bool must_be_complete) {
  ResumeState st;
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return st;  // empty or a torn first line: start afresh
  size_t pos = 0;
  int line_no = 0;
  if (format == OutputFormat::csv) {
    const size_t nl = text.find('\n');
    ++line_no;
    if (text.compare(0, nl, header) != 0)
      return input_error(path, "1",
                         "existing output has other columns than this sweep; use another output "
                         "file or --restart");
    pos = nl + 1;
  }
  st.fresh = false;
  st.keep_bytes = pos;
  const int64_t total = num_points(spec);
  int64_t last_point = -1;
  size_t last_point_start = pos;
  std::string expected_prefix;
  while (pos <= end && pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string_view line(text.data() + pos, nl - pos);
    ++line_no;
    // Point index: leading digits (CSV) or after {"point": (JSON Lines).
    size_t i = 0;
    if (format == OutputFormat::jsonl) {
      const std::string_view head = "{\"point\":";
      if (line.substr(0, head.size()) != head)
        return input_error(path, std::to_string(line_no), "not a row of a sweep (no \"point\")");
      i = head.size();
    }
    const size_t d0 = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    if (i == d0 || i - d0 > 18)
      return input_error(path, std::to_string(line_no), "not a row of a sweep (no point index)");
    const int64_t k = std::stoll(std::string(line.substr(d0, i - d0)));
    if (k != last_point) {
      if (k != last_point + 1 || k >= total)
        return input_error(path, std::to_string(line_no),
                           "point " + std::to_string(k) + " out of order (after " +
                               std::to_string(last_point) +
                               "); not this sweep's output: use another output file or --restart");
      auto p = make_point(spec, k);
      if (!p) return p.error();
      expected_prefix = row_prefix(format, p.value());
      last_point = k;
      last_point_start = pos;
    }
    if (line.substr(0, expected_prefix.size()) != expected_prefix)
      return input_error(path, std::to_string(line_no),
                         "axis values of point " + std::to_string(k) +
                             " differ from this sweep's; use another output file or --restart");
    pos = nl + 1;
  }
  st.points_seen = last_point + 1;
  if (must_be_complete) {
    if (last_point != total - 1 || end + 1 != text.size())
      return input_error(path, "",
                         "output has " + std::to_string(last_point + 1) + " of " +
                             std::to_string(total) +
                             " points but no .partial file; use another output or --restart");
    st.keep_bytes = text.size();
    st.next_point = total;
    return st;
  }
  // The last point present may be cut between its rows: evaluate it again.
  if (last_point >= 0) {
    st.keep_bytes = last_point_start;
    st.next_point = last_point;
  }
  return st;
}

Result<std::string> read_all(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return Error{path + ": cannot read", 1};  // our own output file: a run-time failure
  return text;
}

// An exclusive advisory lock (flock) on <output>.partial, held for the whole run, so that a
// second sweep on the same output is refused instead of interleaving its rows. Removes the
// .partial it created itself if nothing was written to it.
class PartialLock {
 public:
  ~PartialLock() {
    if (fd_ < 0) return;
    struct stat st {};
    if (created_ && ::fstat(fd_, &st) == 0 && st.st_size == 0) ::unlink(path_.c_str());
    ::close(fd_);
  }
  Status acquire(const std::string& partial, const std::string& output) {
    path_ = partial;
    for (int attempt = 0; attempt < 8; ++attempt) {
      struct stat before {};
      created_ = ::stat(partial.c_str(), &before) != 0;
      fd_ = ::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd_ < 0)
        return input_error(partial, "",
                           std::string("cannot open for writing: ") + std::strerror(errno));
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd_);
        fd_ = -1;
        created_ = false;
        return input_error(output, "",
                           "in use by another sweep (" + partial +
                               " is locked); wait for it to finish or use another output");
      }
      // The file may have been renamed to the output between open and flock: lock the new one.
      struct stat locked {
      }, now{};
      if (::fstat(fd_, &locked) == 0 && ::stat(partial.c_str(), &now) == 0 &&
          locked.st_ino == now.st_ino && locked.st_dev == now.st_dev)
        return Ok{};
      ::close(fd_);
      fd_ = -1;
    }
    return Error{partial + ": cannot lock (it keeps being replaced)", 1};
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool created_ = false;
};

// The whole effective sweep (base study with referenced documents inlined, axes, groups), kept
// in <output>.partial.study beside a .partial so that a resume of a changed sweep is refused.
std::string sweep_fingerprint(const SweepSpec& spec,
                              const std::map<std::string, std::string>& row_options) {
  json axes = json::array();
  for (const auto& a : spec.axes) {
    json v = json::array();
    for (const auto& x : a.values_json) v.push_back(json::parse(x));
    axes.push_back({{"name", a.name},
                    {"pointer", a.pointer},
                    {"values", v},
                    {"group", a.group},
                    {"complement", a.complement}});
  }
  json doc = {{"study", json::parse(spec.base_study_json)}, {"axes", axes}};
  if (!row_options.empty()) {
    json opts = json::object();
    for (const auto& [k, v] : row_options) opts[k] = json::parse(v);
    doc["options"] = opts;
  }
  return doc.dump() + "\n";
}

// What differs between the recorded sweep `old_text` and this one: "/policies, /axes".
std::string fingerprint_difference(const std::string& old_text, const std::string& now_text) {
  json a, b;
  try {
    a = json::parse(old_text);
    b = json::parse(now_text);
  } catch (const json::exception&) {
    return "unreadable record";
  }
  std::string diff;
  auto add = [&](const std::string& k) { diff += (diff.empty() ? "" : ", ") + k; };
  if (a.value("axes", json()) != b["axes"]) add("the axes");
  {
    // Options that change rows: "--max-memory-gib (was 16, now 0.5)".
    const json oa = a.value("options", json::object()), ob = b.value("options", json::object());
    std::set<std::string> names;
    if (oa.is_object())
      for (const auto& [k, v] : oa.items()) names.insert(k);
    for (const auto& [k, v] : ob.items()) names.insert(k);
    for (const auto& k : names) {
      const json va = oa.is_object() ? oa.value(k, json()) : json(), vb = ob.value(k, json());
      if (va != vb)
        add(k + " (was " + (va.is_null() ? std::string("not recorded") : va.dump()) + ", now " +
            (vb.is_null() ? std::string("not given") : vb.dump()) + ")");
    }
  }
  const json sa = a.value("study", json::object()), sb = b["study"];
  if (!sa.is_object()) return diff.empty() ? "the study" : diff + ", the study";
  std::set<std::string> keys;
  for (const auto& [k, v] : sa.items()) keys.insert(k);
  for (const auto& [k, v] : sb.items()) keys.insert(k);
  for (const auto& k : keys)
    if (sa.value(k, json()) != sb.value(k, json())) add("/" + k);
  return diff.empty() ? "nothing visible" : diff;
}

}  // namespace

Result<OutputFormat> output_format_for(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".csv") return OutputFormat::csv;
  if (ext == ".jsonl" || ext == ".ndjson" || ext == ".json") return OutputFormat::jsonl;
  return input_error(path, "", "output must end in .csv or .jsonl");
}

std::string render_header(OutputFormat format, const SweepSpec& spec,
                          const std::vector<std::string>& columns) {
  if (format != OutputFormat::csv) return "";
  std::string s = "point";
  for (const auto& a : spec.axes) s += "," + csv_escape(a.name);
  s += ",status,reason";
  for (const auto& c : columns) s += "," + csv_escape(c);
  return s;
}

std::string render_row(OutputFormat format, const SweepPoint& point,
                       const std::vector<std::string>& columns, const PointOutcome& outcome,
                       size_t row) {
  std::string s = row_prefix(format, point);
  const bool left_out =
      !outcome.skipped && row < outcome.row_reasons.size() && !outcome.row_reasons[row].empty();
  const bool skipped = outcome.skipped || row >= outcome.rows.size() || left_out;
  const std::string reason = one_line(left_out  ? outcome.row_reasons[row]
                                      : skipped ? outcome.reason
                                                : "");
  const std::vector<std::string>* cells = skipped && !left_out ? nullptr : &outcome.rows[row];
  if (format == OutputFormat::csv) {
    s += std::string(skipped ? "skipped" : "ok") + "," + csv_escape(reason);
    for (size_t c = 0; c < columns.size(); ++c)
      s += "," + (cells && c < cells->size() ? csv_cell((*cells)[c]) : std::string());
  } else {
    s += std::string("\"status\":") + (skipped ? "\"skipped\"" : "\"ok\"") +
         ",\"reason\":" + json(reason).dump();
    for (size_t c = 0; c < columns.size(); ++c)
      s += "," + json_key(columns[c]) + ":" +
           (cells && c < cells->size() && !(*cells)[c].empty() ? (*cells)[c] : std::string("null"));
    s += "}";
  }
  return s;
}

// Every value of every axis, the other groups at their first value, through evaluator.check:
// a value the point's documents refuse is the sweep file's error at the value's place
// ("<sweep>:/axes/0/values/1: pcie_gen = 4.5: /topology/template/pcie_gen: expected an
// integer, got number"), before any output; it used to become a skipped point, exit 0.
static Status check_axis_values(const SweepSpec& spec, const PointEvaluator& evaluator) {
  if (!evaluator.check) return Ok{};
  for (const auto& group : spec.groups) {
    const size_t n = spec.axes[static_cast<size_t>(group[0])].values_json.size();
    for (size_t j = 0; j < n; ++j) {
      std::vector<int> coords(spec.axes.size(), 0);
      for (int a : group) coords[static_cast<size_t>(a)] = static_cast<int>(j);
      auto p = make_point_at(spec, coords);
      if (!p) return p.error();
      auto st = evaluator.check(*p);
      if (st || st.error().exit_code != 2) continue;
      // The study's place after "<point N>:", and the group member whose pointer leads to it.
      std::string what = st.error().message;
      const std::string lead = "<point " + std::to_string(p->index) + ">:";
      if (what.rfind(lead, 0) == 0) what = what.substr(lead.size());
      const SweepAxis* axis = &spec.axes[static_cast<size_t>(group[0])];
      for (int a : group) {
        const SweepAxis& ax = spec.axes[static_cast<size_t>(a)];
        if (what.rfind(ax.pointer, 0) == 0 &&
            (what.size() == ax.pointer.size() || what[ax.pointer.size()] == '/' ||
             what[ax.pointer.size()] == ':'))
          axis = &ax;
      }
      const bool listed =
          axis->values_place.size() >= 7 &&
          axis->values_place.compare(axis->values_place.size() - 7, 7, "/values") == 0;
      return input_error(spec.source,
                         listed ? axis->values_place + "/" + std::to_string(j) : axis->values_place,
                         axis->name + " = " + axis->values_json[j] + ": " + what);
    }
  }
  return Ok{};
}

Result<SweepSummary> run_sweep(const SweepSpec& spec, const PointEvaluator& evaluator,
                               const SweepOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto fmt = output_format_for(options.output_path);
  if (!fmt) return fmt.error();
  const OutputFormat format = fmt.value();
  // An axis named like a metric column (e.g. "topology", "policy") keeps its name; the metric
  // column is then written as "result.<name>".
  std::vector<std::string> columns = evaluator.columns;
  {
    std::set<std::string> names = {"point", "status", "reason"};
    for (const auto& a : spec.axes)
      if (!names.insert(a.name).second)
        return input_error(spec.source, "/axes", "axis name \"" + a.name + "\" is reserved");
    for (auto& c : columns) {
      if (names.count(c)) c = "result." + c;
      if (!names.insert(c).second)
        return input_error(spec.source, "/axes", "axis name \"" + c + "\" is used twice");
    }
  }
  if (auto st = check_axis_values(spec, evaluator); !st) return st.error();
  SweepSummary sum;
  sum.total_points = num_points(spec);
  // A symbolic link is followed (the link stays); a device or FIFO cannot take the resumable
  // .partial beside it, and is never removed or renamed over (sparsp/output_file.hpp).
  auto target = output_target(options.output_path);
  if (!target) return target.error();
  if (target->in_place)
    return input_error(options.output_path, "",
                       "cannot write a sweep to a device or pipe (a sweep writes <output>.partial "
                       "beside its output, then renames it); give a regular file");
  const std::string final_path = target->path;
  const std::string partial_path = final_path + ".partial";
  const std::string header = render_header(format, spec, columns);
  namespace fs = std::filesystem;
  std::error_code ec;

  const std::string study_path = partial_path + ".study";
  const std::string fingerprint = sweep_fingerprint(spec, options.row_options);
  PartialLock lock;
  if (auto l = lock.acquire(partial_path, final_path); !l) return l.error();
  if (options.restart) {
    fs::remove(final_path, ec);
    fs::resize_file(partial_path, 0, ec);
    fs::remove(study_path, ec);
  }
  const auto final_status = fs::status(final_path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return input_error(final_path, "", "cannot use this output: " + ec.message());
  // An empty file (`: > out.csv`) is no finished sweep: it was "resumed" as complete with no
  // rows, exit 0. It is replaced as a fresh output would be.
  const bool empty_final =
      fs::is_regular_file(final_status) && fs::file_size(final_path, ec) == 0 && !ec;
  if (fs::exists(final_status) && !empty_final) {
    auto text = read_all(final_path);
    if (!text) return text.error();
    auto st = scan_output(final_path, text.value(), spec, format, header, true);
    if (!st) return st.error();
    sum.resumed_points = sum.total_points;
    sum.complete = true;
    return sum;
  }
  ResumeState st;
  if (fs::file_size(partial_path, ec) > 0 && !ec) {
    // A record of the sweep that wrote it (absent for a .partial of an older sparsp).
    if (fs::exists(study_path, ec)) {
      auto old = read_all(study_path);
      if (!old) return old.error();
      if (old.value() != fingerprint)
        return input_error(partial_path, "",
                           "written by a different sweep (" +
                               fingerprint_difference(old.value(), fingerprint) +
                               " changed); use another output file or --restart");
    }
    auto text = read_all(partial_path);
    if (!text) return text.error();
    auto s = scan_output(partial_path, text.value(), spec, format, header, false);
    if (!s) return s.error();
    st = s.value();
  }
  if (!st.fresh) {
    fs::resize_file(partial_path, st.keep_bytes, ec);
    if (ec) return Error{partial_path + ": cannot truncate: " + ec.message(), 1};
  }
  if (st.fresh || !fs::exists(study_path, ec)) {
    std::ofstream rec(study_path, std::ios::binary | std::ios::trunc);
    rec << fingerprint;
    rec.flush();
    if (!rec) return Error{study_path + ": cannot write", 1};
  }
  std::FILE* f = std::fopen(partial_path.c_str(), st.fresh ? "wb" : "ab");
  if (!f) return Error{partial_path + ": cannot open for writing", 2};
  if (st.fresh && format == OutputFormat::csv) {
    const std::string h = header + "\n";
    std::fwrite(h.data(), 1, h.size(), f);
    std::fflush(f);
  }
  sum.resumed_points = st.next_point;

  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  // Never more workers than points left, nor than kMaxThreads (`-j 100000` would fail to start
  // its threads).
  threads = static_cast<int>(std::clamp<int64_t>(
      std::min<int64_t>(threads, sum.total_points - st.next_point), 1, kMaxThreads));
  const int64_t window = kWindowPerThread * threads + 16;

  std::mutex mu;
  std::condition_variable cv_done, cv_room;
  std::map<int64_t, std::pair<SweepPoint, PointOutcome>> ready;
  int64_t next_take = st.next_point;
  int64_t next_write = st.next_point;
  bool stop = false;
  const int64_t total = sum.total_points;

  auto worker = [&](std::stop_token) {
    for (;;) {
      int64_t k;
      {
        std::unique_lock lk(mu);
        cv_room.wait(lk,
                     [&] { return stop || next_take >= total || next_take < next_write + window; });
        if (stop || next_take >= total) return;
        k = next_take++;
      }
      std::pair<SweepPoint, PointOutcome> item;
      auto p = make_point(spec, k);
      if (!p) {
        item.first.index = k;
        item.second.skipped = true;
        item.second.reason = p.error().message;
      } else {
        item.first = std::move(p.value());
        try {
          item.second = evaluator.evaluate(item.first);
        } catch (const std::exception& e) {
          item.second = PointOutcome{true, std::string("evaluator failed: ") + e.what(), {}, {}, 1};
        } catch (...) {
          item.second = PointOutcome{true, "evaluator failed: unknown exception", {}, {}, 1};
        }
        if (!item.second.skipped && item.second.rows.empty())
          item.second = PointOutcome{true, "evaluator returned no rows", {}, {}, 1};
      }
      {
        std::lock_guard lk(mu);
        ready.emplace(k, std::move(item));
      }
      cv_done.notify_all();
    }
  };

  ProgressMeter progress(resolve_progress_mode(options.progress, options.progress_stream != nullptr,
                                               ProgressMode::lines),
                         total, st.next_point, "points", "sweep", options.progress_interval_s,
                         options.progress_stream);
  bool write_failed = false;
  {
    std::vector<std::jthread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      try {
        pool.emplace_back(worker);
      } catch (const std::system_error&) {
        if (pool.empty()) throw;
        break;  // the system gives fewer threads: run with those started
      }
    }
    int64_t written_this_run = 0;
    while (next_write < total) {
      std::pair<SweepPoint, PointOutcome> item;
      {
        std::unique_lock lk(mu);
        cv_done.wait(lk, [&] { return ready.count(next_write) > 0; });
        auto it = ready.find(next_write);
        item = std::move(it->second);
        ready.erase(it);
      }
      std::string block;
      const size_t nrows = item.second.skipped ? 1 : item.second.rows.size();
      for (size_t r = 0; r < nrows; ++r)
        block += render_row(format, item.first, columns, item.second, r) + "\n";
      if (std::fwrite(block.data(), 1, block.size(), f) != block.size() || std::fflush(f) != 0)
        write_failed = true;
      sum.rows_written += static_cast<int64_t>(nrows);
      ++sum.evaluated_points;
      if (item.second.skipped) ++sum.skipped_points;
      ++written_this_run;
      {
        std::lock_guard lk(mu);
        ++next_write;
        if (write_failed ||
            (options.stop_after_points >= 0 && written_this_run >= options.stop_after_points))
          stop = true;
      }
      cv_room.notify_all();
      progress.update(next_write, false);
      if (stop) break;
    }
    {
      std::lock_guard lk(mu);
      stop = true;
    }
    cv_room.notify_all();
  }  // joins the workers
  progress.update(next_write, true);
  if (write_failed) {
    std::fclose(f);
    return Error{partial_path + ": write failed (disk full?)", 1};
  }
  ::fsync(fileno(f));
  std::fclose(f);
  if (next_write >= total) {
    fs::rename(partial_path, final_path, ec);
    if (ec) return Error{final_path + ": cannot rename from .partial: " + ec.message(), 2};
    fs::remove(study_path, ec);
    sum.complete = true;
  }
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace sparsp::study
