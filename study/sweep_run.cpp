// Running a sweep: oneTBB pipeline, streamed CSV / JSON Lines output, resumption, progress,
// shards (job arrays) and ranks (MPI). Public surface: include/sparsp/sweep.hpp.
//
// Design: a tbb::parallel_pipeline of three stages: positions in point order (serial), point
// evaluation (parallel, on `threads` workers of a task_arena) and writing (serial, in order). At
// most kWindowPerThread * threads + 16 points are in flight, which bounds the memory of the
// reorder. The writer writes each point's rows with one fwrite and one fflush, so the file is
// always a prefix of the uninterrupted output, cut at most inside the last point (handled on
// resume). With several ranks, rank 0 runs the same pipeline over every position and receives
// the positions other ranks own instead of evaluating them; the other ranks run it over their own
// positions and send each point's rows to rank 0.
#include <fcntl.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "partial_lock.hpp"
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

// The points one output holds, in order: position i (0 <= i < count) is point first + i * step.
struct PointSequence {
  int64_t first = 0;
  int64_t step = 1;
  int64_t count = 0;
  int64_t at(int64_t i) const { return first + i * step; }
};

PointSequence sequence_of(const SweepShard& shard, int64_t total) {
  PointSequence q{shard.index - 1, shard.count, 0};
  if (q.first < total) q.count = (total - q.first - 1) / q.step + 1;
  return q;
}

// Reads an earlier output file; returns the byte length to keep and the first position to run.
struct ResumeState {
  bool fresh = true;      // nothing usable: write from scratch (preamble included)
  size_t keep_bytes = 0;  // bytes of the file to keep
  int64_t next_pos = 0;   // first position of the sequence to (re)evaluate
};

// A line before the rows (shard line, CSV header), without its newline, and what to say when an
// existing output has another line there.
struct PreambleLine {
  std::string text;
  std::string mismatch;
};

// The end of the record starting at `pos`: its newline, past newlines inside a quoted CSV field
// (RFC 4180: a quote inside a quoted field is doubled, so quotes toggle in pairs); npos when
// the record is cut short. JSON Lines rows hold no raw newline (JSON escapes it).
size_t record_end(const std::string& text, size_t pos, OutputFormat format) {
  if (format == OutputFormat::jsonl) return text.find('\n', pos);
  bool quoted = false;
  for (size_t i = pos; i < text.size(); ++i) {
    if (text[i] == '"')
      quoted = !quoted;
    else if (text[i] == '\n' && !quoted)
      return i;
  }
  return std::string::npos;
}

Result<ResumeState> scan_output(const std::string& path, const std::string& text,
                                const SweepSpec& spec, const PointSequence& seq,
                                OutputFormat format, const std::vector<PreambleLine>& preamble,
                                bool must_be_complete) {
  ResumeState st;
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return st;  // empty or a torn first line: start afresh
  size_t pos = 0;
  int line_no = 0;
  for (size_t p = 0; p < preamble.size(); ++p) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) return ResumeState{};  // a torn preamble: start afresh
    ++line_no;
    if (text.compare(pos, nl - pos, preamble[p].text) != 0)
      return input_error(path, std::to_string(line_no), preamble[p].mismatch);
    pos = nl + 1;
  }
  st.fresh = false;
  st.keep_bytes = pos;
  int64_t last_pos = -1;
  size_t last_point_start = pos;
  std::string expected_prefix;
  bool torn = false;
  while (pos <= end && pos < text.size()) {
    const size_t nl = record_end(text, pos, format);
    if (nl == std::string::npos) {  // a torn last row (an open quote): not kept below
      torn = true;
      break;
    }
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
    if (last_pos < 0 || k != seq.at(last_pos)) {
      if (last_pos + 1 >= seq.count || k != seq.at(last_pos + 1))
        return input_error(path, std::to_string(line_no),
                           "point " + std::to_string(k) + " out of order (after " +
                               std::to_string(last_pos < 0 ? -1 : seq.at(last_pos)) +
                               "); not this sweep's output: use another output file or --restart");
      auto p = make_point(spec, k);
      if (!p) return p.error();
      expected_prefix = row_prefix(format, p.value());
      ++last_pos;
      last_point_start = pos;
    }
    if (line.substr(0, expected_prefix.size()) != expected_prefix)
      return input_error(path, std::to_string(line_no),
                         "axis values of point " + std::to_string(k) +
                             " differ from this sweep's; use another output file or --restart");
    line_no += static_cast<int>(std::count(line.begin(), line.end(), '\n'));
    pos = nl + 1;
  }
  if (must_be_complete) {
    if (torn || last_pos != seq.count - 1 || end + 1 != text.size())
      return input_error(path, "",
                         "output has " + std::to_string(last_pos + 1) + " of " +
                             std::to_string(seq.count) +
                             " points but no .partial file; use another output or --restart");
    st.keep_bytes = text.size();
    st.next_pos = seq.count;
    return st;
  }
  // The last point present may be cut between its rows: evaluate it again.
  if (last_pos >= 0) {
    st.keep_bytes = last_point_start;
    st.next_pos = last_pos;
  }
  return st;
}

Result<std::string> read_all(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return Error{path + ": cannot read", 1};  // our own output file: a run-time failure
  return text;
}

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
  if (!spec.named_file_hashes_json.empty())
    doc["named_files"] = json::parse(spec.named_file_hashes_json);
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
  {
    // Files the study names by path: "the file /model names".
    const json na = a.value("named_files", json::object()),
               nb = b.value("named_files", json::object());
    std::set<std::string> ptrs;
    if (na.is_object())
      for (const auto& [k, v] : na.items()) ptrs.insert(k);
    if (nb.is_object())
      for (const auto& [k, v] : nb.items()) ptrs.insert(k);
    for (const auto& k : ptrs)
      if ((na.is_object() ? na.value(k, json()) : json()) != nb.value(k, json()))
        add("the file " + k + " names");
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

namespace {

// The output columns: the evaluator's, renamed "result.<name>" where an axis has the name.
Result<std::vector<std::string>> output_columns(const SweepSpec& spec,
                                                const PointEvaluator& evaluator) {
  std::vector<std::string> columns = evaluator.columns;
  std::set<std::string> names = {"point", "status", "reason"};
  for (const auto& a : spec.axes)
    if (!names.insert(a.name).second)
      return input_error(spec.source, "/axes", "axis name \"" + a.name + "\" is reserved");
  for (auto& c : columns) {
    if (names.count(c)) c = "result." + c;
    if (!names.insert(c).second)
      return input_error(spec.source, "/axes", "axis name \"" + c + "\" is used twice");
  }
  return columns;
}

// The shard line a shard output starts with: {"shard":K,"of":N,"points":P,"sweep":"<hex>"}
// (P: points of the whole sweep; <hex>: FNV-1a 64 of the sweep's fingerprint), after
// "#sparsp-shard " in CSV, as {"sparsp_shard":{...}} in JSON Lines.
std::string shard_line(OutputFormat format, const SweepShard& shard, int64_t points,
                       const std::string& fingerprint) {
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(detail::fnv1a(fingerprint)));
  const std::string body = "{\"shard\":" + std::to_string(shard.index) +
                           ",\"of\":" + std::to_string(shard.count) +
                           ",\"points\":" + std::to_string(points) + ",\"sweep\":\"" + hex + "\"}";
  return format == OutputFormat::csv ? "#sparsp-shard " + body : "{\"sparsp_shard\":" + body + "}";
}

// A point evaluated and rendered. A throwing or row-less evaluator makes the point skipped.
PointRows evaluate_point(const SweepSpec& spec, const PointEvaluator& evaluator,
                         OutputFormat format, const std::vector<std::string>& columns, int64_t k) {
  SweepPoint point;
  PointOutcome outcome;
  auto p = make_point(spec, k);
  if (!p) {
    point.index = k;
    outcome.skipped = true;
    outcome.reason = p.error().message;
  } else {
    point = std::move(p.value());
    try {
      outcome = evaluator.evaluate(point);
    } catch (const std::exception& e) {
      outcome = PointOutcome{true, std::string("evaluator failed: ") + e.what(), {}, {}, 1};
    } catch (...) {
      outcome = PointOutcome{true, "evaluator failed: unknown exception", {}, {}, 1};
    }
    if (!outcome.skipped && outcome.rows.empty())
      outcome = PointOutcome{true, "evaluator returned no rows", {}, {}, 1};
  }
  PointRows r;
  r.point = k;
  r.skipped = outcome.skipped;
  r.rows = outcome.skipped ? 1 : static_cast<int64_t>(outcome.rows.size());
  for (int64_t row = 0; row < r.rows; ++row)
    r.text += render_row(format, point, columns, outcome, static_cast<size_t>(row)) + "\n";
  return r;
}

// What rank 0 settled before the run: the output, where to start, what to write.
struct Prepared {
  SweepSummary sum;
  PointSequence seq;
  std::string final_path, partial_path, study_path;
  std::vector<std::string> columns;
  OutputFormat format = OutputFormat::csv;
  ResumeState resume;
};

// Continues <output>.partial (or finds <output> whole, or starts afresh): pr.resume, and the
// .partial's preamble written when fresh.
Status resume_output(const SweepSpec& spec, const SweepOptions& options,
                     const std::vector<PreambleLine>& preamble, const std::string& fingerprint,
                     Prepared& pr) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (options.restart) {
    fs::remove(pr.final_path, ec);
    fs::resize_file(pr.partial_path, 0, ec);
    fs::remove(pr.study_path, ec);
  }
  const auto final_status = fs::status(pr.final_path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return input_error(pr.final_path, "", "cannot use this output: " + ec.message());
  // An empty file (`: > out.csv`) is no finished sweep: it was "resumed" as complete with no
  // rows, exit 0. It is replaced as a fresh output would be.
  const bool empty_final =
      fs::is_regular_file(final_status) && fs::file_size(pr.final_path, ec) == 0 && !ec;
  if (fs::exists(final_status) && !empty_final) {
    auto text = read_all(pr.final_path);
    if (!text) return text.error();
    auto st = scan_output(pr.final_path, text.value(), spec, pr.seq, pr.format, preamble, true);
    if (!st) return st.error();
    pr.sum.resumed_points = pr.sum.total_points;
    pr.sum.complete = true;
    return Ok{};
  }
  if (fs::file_size(pr.partial_path, ec) > 0 && !ec) {
    // A record of the sweep that wrote it (absent for a .partial of an older sparsp).
    if (fs::exists(pr.study_path, ec)) {
      auto old = read_all(pr.study_path);
      if (!old) return old.error();
      if (old.value() != fingerprint)
        return input_error(pr.partial_path, "",
                           "written by a different sweep (" +
                               fingerprint_difference(old.value(), fingerprint) +
                               " changed); use another output file or --restart");
    }
    auto text = read_all(pr.partial_path);
    if (!text) return text.error();
    auto s = scan_output(pr.partial_path, text.value(), spec, pr.seq, pr.format, preamble, false);
    if (!s) return s.error();
    pr.resume = s.value();
  }
  if (!pr.resume.fresh) {
    fs::resize_file(pr.partial_path, pr.resume.keep_bytes, ec);
    if (ec) return Error{pr.partial_path + ": cannot truncate: " + ec.message(), 1};
  }
  if (pr.resume.fresh || !fs::exists(pr.study_path, ec)) {
    std::ofstream rec(pr.study_path, std::ios::binary | std::ios::trunc);
    rec << fingerprint;
    rec.flush();
    if (!rec) return Error{pr.study_path + ": cannot write", 1};
  }
  if (pr.resume.fresh) {
    std::string text;
    for (const auto& line : preamble) text += line.text + "\n";
    std::ofstream out(pr.partial_path, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Error{pr.partial_path + ": cannot write", 1};
  }
  pr.sum.resumed_points = pr.resume.next_pos;
  return Ok{};
}

// Workers for `requested` threads (0: every core this process may use), never more than the
// points left nor kMaxThreads (`-j 100000`).
int worker_count(int requested, int64_t points_left) {
  const int threads = requested > 0 ? requested : tbb::info::default_concurrency();
  return static_cast<int>(
      std::clamp<int64_t>(std::min<int64_t>(threads, points_left), 1, kMaxThreads));
}

// Runs `stages` (a parallel_pipeline over positions from `first`, every `stride`-th) on `threads`
// workers. `next` returns false when no position is left or the run stops.
template <typename Evaluate, typename Consume>
void run_pipeline(int threads, int64_t first, int64_t stride, int64_t count,
                  const std::atomic<bool>& stop, Evaluate evaluate, Consume consume) {
  // More workers than cores (`-j 4` on 2 cores) only when asked; the arena caps the rest.
  tbb::global_control parallelism(
      tbb::global_control::max_allowed_parallelism,
      static_cast<size_t>(std::max(threads, tbb::info::default_concurrency())));
  tbb::task_arena arena(threads);
  const size_t window = static_cast<size_t>(kWindowPerThread * threads + 16);
  int64_t next = first;
  arena.execute([&] {
    tbb::parallel_pipeline(
        window, tbb::make_filter<void, int64_t>(tbb::filter_mode::serial_in_order,
                                                [&](tbb::flow_control& fc) -> int64_t {
                                                  if (stop.load() || next >= count) {
                                                    fc.stop();
                                                    return 0;
                                                  }
                                                  const int64_t i = next;
                                                  next += stride;
                                                  return i;
                                                }) &
                    tbb::make_filter<int64_t, PointRows>(tbb::filter_mode::parallel, evaluate) &
                    tbb::make_filter<PointRows, void>(tbb::filter_mode::serial_in_order, consume));
  });
}

// Rank 0 (or the only process): every position from pr.resume.next_pos, in order; the ones other
// ranks own are received. Appends to <output>.partial and renames it when whole.
Result<SweepSummary> write_points(const SweepSpec& spec, const PointEvaluator& evaluator,
                                  const SweepOptions& options, SweepRanks* ranks, Prepared& pr) {
  namespace fs = std::filesystem;
  SweepSummary sum = pr.sum;
  std::FILE* f = std::fopen(pr.partial_path.c_str(), "ab");
  if (!f) {
    if (ranks) ranks->abandon(2);  // the other ranks were told to run: end them
    return Error{pr.partial_path + ": cannot open for writing", 2};
  }
  const int64_t start = pr.resume.next_pos, size = ranks ? ranks->size() : 1;
  const int threads = worker_count(options.threads, (pr.seq.count - start + size - 1) / size);
  ProgressMeter progress(resolve_progress_mode(options.progress, options.progress_stream != nullptr,
                                               ProgressMode::lines),
                         pr.seq.count, start, "points", "sweep", options.progress_interval_s,
                         options.progress_stream);
  std::atomic<bool> stop{false};
  bool write_failed = false;
  std::string transport_error;
  int64_t next_write = start, written_this_run = 0;
  auto evaluate = [&](int64_t i) {
    if ((i - start) % size != 0) return PointRows{pr.seq.at(i), 0, false, {}};  // another rank's
    return evaluate_point(spec, evaluator, pr.format, pr.columns, pr.seq.at(i));
  };
  auto consume = [&](PointRows r) {
    if (stop.load()) return;
    const int64_t owner = (next_write - start) % size;
    if (owner != 0) {
      auto got = ranks->receive_from(static_cast<int>(owner));
      if (!got || got->point != r.point) {
        transport_error = got ? "rank " + std::to_string(owner) + " sent point " +
                                    std::to_string(got->point) + " for point " +
                                    std::to_string(r.point)
                              : got.error().message;
        stop = true;
        return;
      }
      r = std::move(got.value());
    }
    if (std::fwrite(r.text.data(), 1, r.text.size(), f) != r.text.size() || std::fflush(f) != 0)
      write_failed = true;
    sum.rows_written += r.rows;
    ++sum.evaluated_points;
    if (r.skipped) ++sum.skipped_points;
    ++next_write;
    ++written_this_run;
    if (write_failed ||
        (options.stop_after_points >= 0 && written_this_run >= options.stop_after_points))
      stop = true;
    progress.update(next_write, false);
  };
  run_pipeline(threads, start, 1, pr.seq.count, stop, evaluate, consume);
  progress.update(next_write, true);
  if (ranks && next_write < pr.seq.count) ranks->abandon(1);
  if (write_failed || !transport_error.empty()) {
    std::fclose(f);
    return Error{write_failed ? pr.partial_path + ": write failed (disk full?)"
                              : "sweep: " + transport_error,
                 1};
  }
  ::fsync(fileno(f));
  std::fclose(f);
  if (next_write >= pr.seq.count) {
    std::error_code ec;
    fs::rename(pr.partial_path, pr.final_path, ec);
    if (ec) return Error{pr.final_path + ": cannot rename from .partial: " + ec.message(), 2};
    fs::remove(pr.study_path, ec);
    sum.complete = true;
  }
  return sum;
}

// A rank other than 0: waits for rank 0's go, evaluates its positions and sends their rows.
Result<SweepSummary> run_sweep_rank(const SweepSpec& spec, const PointEvaluator& evaluator,
                                    const SweepOptions& options, SweepRanks& ranks) {
  std::vector<int64_t> go = {0, 0};
  ranks.broadcast(go);
  SweepSummary sum;
  if (go[0] > 0) return Error{"", static_cast<int>(go[0])};  // rank 0 reported it
  if (go[0] < 0) {
    sum.complete = true;
    return sum;
  }
  auto fmt = output_format_for(options.output_path);
  auto columns = output_columns(spec, evaluator);
  if (!fmt || !columns)
    return Error{"rank " + std::to_string(ranks.rank()) + ": " +
                     (!fmt ? fmt.error() : columns.error()).message,
                 2};
  const PointSequence seq = sequence_of(options.shard.value_or(SweepShard{}), num_points(spec));
  const int64_t start = go[1], size = ranks.size(), first = start + ranks.rank();
  sum.total_points = seq.count;
  const int threads = worker_count(options.threads, (seq.count - first + size - 1) / size);
  std::atomic<bool> stop{false};
  Status failed = Ok{};
  run_pipeline(
      threads, first, size, seq.count, stop,
      [&](int64_t i) { return evaluate_point(spec, evaluator, *fmt, *columns, seq.at(i)); },
      [&](PointRows r) {
        if (stop.load()) return;
        ++sum.evaluated_points;
        if (r.skipped) ++sum.skipped_points;
        sum.rows_written += r.rows;
        if (auto st = ranks.send_to_root(r); !st) {
          failed = st;
          stop = true;
        }
      });
  if (!failed) return failed.error();
  sum.complete = true;
  return sum;
}

// Checks the columns and axis values, locks <output>.partial, resumes or starts it, records the
// sweep's fingerprint. sum.complete: the output is already whole (nothing to run).
Result<Prepared> prepare_output(const SweepSpec& spec, const PointEvaluator& evaluator,
                                const SweepOptions& options, PartialLock& lock) {
  Prepared pr;
  auto fmt = output_format_for(options.output_path);
  if (!fmt) return fmt.error();
  pr.format = fmt.value();
  auto cols = output_columns(spec, evaluator);
  if (!cols) return cols.error();
  pr.columns = std::move(cols.value());
  if (auto st = check_axis_values(spec, evaluator); !st) return st.error();
  pr.seq = sequence_of(options.shard.value_or(SweepShard{}), num_points(spec));
  pr.sum.total_points = pr.seq.count;
  // A symbolic link is followed (the link stays); a device or FIFO cannot take the resumable
  // .partial beside it, and is never removed or renamed over (sparsp/output_file.hpp).
  auto target = output_target(options.output_path);
  if (!target) return target.error();
  if (target->in_place)
    return input_error(options.output_path, "",
                       "cannot write a sweep to a device or pipe (a sweep writes <output>.partial "
                       "beside its output, then renames it); give a regular file");
  pr.final_path = target->path;
  pr.partial_path = pr.final_path + ".partial";
  pr.study_path = pr.partial_path + ".study";
  std::vector<PreambleLine> preamble;
  // The shard line names the sweep without the shard (the same in every shard); the .partial's
  // record names the shard too, so that a resume as another shard is refused.
  std::map<std::string, std::string> record_options = options.row_options;
  if (options.shard) {
    const std::string kn =
        std::to_string(options.shard->index) + "/" + std::to_string(options.shard->count);
    preamble.push_back({shard_line(pr.format, *options.shard, num_points(spec),
                                   sweep_fingerprint(spec, options.row_options)),
                        "existing output is not shard " + kn +
                            " of this sweep; use another output file or --restart"});
    record_options["--shard"] = json(kn).dump();
  }
  if (pr.format == OutputFormat::csv)
    preamble.push_back({render_header(pr.format, spec, pr.columns),
                        "existing output has other columns than this sweep; use another output "
                        "file or --restart"});
  if (auto l = lock.acquire(pr.partial_path, pr.final_path); !l) return l.error();
  auto resumed =
      resume_output(spec, options, preamble, sweep_fingerprint(spec, record_options), pr);
  if (!resumed) return resumed.error();
  return pr;
}

}  // namespace

Result<SweepSummary> run_sweep(const SweepSpec& spec, const PointEvaluator& evaluator,
                               const SweepOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  SweepRanks* ranks = options.ranks && options.ranks->size() > 1 ? options.ranks : nullptr;
  if (ranks && ranks->rank() != 0) return run_sweep_rank(spec, evaluator, options, *ranks);
  PartialLock lock;
  auto pr = prepare_output(spec, evaluator, options, lock);
  if (ranks) {
    // Tell the other ranks whether to run (0), that the output is whole (-1), or the exit code.
    std::vector<int64_t> go = {!pr                ? pr.error().exit_code
                               : pr->sum.complete ? -1
                                                  : 0,
                               pr ? pr->resume.next_pos : 0};
    ranks->broadcast(go);
  }
  if (!pr) return pr.error();
  if (pr->sum.complete) return pr->sum;
  auto sum = write_points(spec, evaluator, options, ranks, pr.value());
  if (!sum) return sum.error();
  sum->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace sparsp::study
