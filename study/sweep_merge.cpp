// Shards of a sweep for job arrays: `--shard K/N` parsing and `sparsp sweep merge`, which joins
// the shard outputs into the output one process would have written. Public surface:
// include/sparsp/sweep.hpp; the shard line is written by sweep_run.cpp (shard_line).
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "partial_lock.hpp"
#include "sparsp/output_file.hpp"
#include "sparsp/sweep.hpp"

namespace sparsp::study {

using nlohmann::json;

namespace {

constexpr int kMaxShards = 1'000'000;

// One shard output, read whole: its shard line's fields, its CSV header, and where each point's
// rows are in `text`.
struct ShardFile {
  std::string path;
  std::string text;
  int index = 0, count = 0;
  int64_t points = 0;
  std::string sweep;   // fingerprint hash (hex)
  std::string header;  // CSV header line with its newline ("" for JSON Lines)
  std::vector<std::pair<size_t, size_t>> point_rows;  // [begin, end) of point i of the shard
};

// The shard line: "#sparsp-shard {...}" (CSV) or {"sparsp_shard":{...}} (JSON Lines), parsed
// strictly (parse_json: duplicate keys, syntax and number errors name the line; break-it
// 2026-12-03: a duplicate key was taken, last one winning, and 2^64 points printed as negative).
Status parse_shard_line(const std::string& line, OutputFormat format, ShardFile& f) {
  const std::string not_shard =
      "not the output of a shard (no shard line; write shards with `sparsp sweep --shard K/N`)";
  const std::string lead = "#sparsp-shard ";
  const bool csv = format == OutputFormat::csv;
  if (csv ? line.rfind(lead, 0) != 0 : line.rfind("{\"sparsp_shard\":", 0) != 0)
    return input_error(f.path, "1", not_shard);
  auto parsed = parse_json<json>(csv ? std::string_view(line).substr(lead.size()) : line, f.path);
  if (!parsed) return parsed.error();
  const json& doc = csv ? parsed.value() : parsed.value()["sparsp_shard"];
  auto bad = [&](const std::string& what) {
    return input_error(f.path, "1",
                       "shard line: " + what + " (write shards with `sparsp sweep --shard K/N`)");
  };
  if (!doc.is_object()) return bad("expected an object");
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "shard" && it.key() != "of" && it.key() != "points" && it.key() != "sweep")
      return bad("unknown key '" + it.key() + "'");
  auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t& out) -> bool {
    const auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_integer()) return false;
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) return false;
    out = it->get<int64_t>();
    return out >= lo && out <= hi;
  };
  int64_t index = 0, count = 0;
  if (!integer("of", 1, kMaxShards, count)) return bad("/of: expected an integer in 1..1000000");
  if (!integer("shard", 1, count, index))
    return bad("/shard: expected an integer in 1.." + std::to_string(count));
  if (!integer("points", 0, int64_t{1} << 53, f.points))
    return bad("/points: expected an integer in 0..2^53");
  const auto sw = doc.find("sweep");
  if (sw == doc.end() || !sw->is_string()) return bad("/sweep: expected a string");
  f.index = static_cast<int>(index);
  f.count = static_cast<int>(count);
  f.sweep = sw->get<std::string>();
  return Ok{};
}

// End of the record starting at `pos` (one past its newline): CSV fields in double quotes may
// hold newlines (a topology name with one is written as a quoted field); JSON Lines records are
// one line. npos when the record is not finished.
size_t record_end(const std::string& t, size_t pos, OutputFormat format) {
  if (format == OutputFormat::jsonl) {
    const size_t nl = t.find('\n', pos);
    return nl == std::string::npos ? nl : nl + 1;
  }
  bool quoted = false;
  for (size_t i = pos; i < t.size(); ++i) {
    if (t[i] == '"')
      quoted = !quoted;  // "" inside a quoted field toggles twice
    else if (t[i] == '\n' && !quoted)
      return i + 1;
  }
  return std::string::npos;
}

// Fields of one CSV record (commas outside double quotes, plus one).
size_t csv_fields(std::string_view rec) {
  size_t n = 1;
  bool quoted = false;
  for (char c : rec) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      ++n;
  }
  return n;
}

// Point index at the start of a row, or -1.
int64_t row_point(std::string_view line, OutputFormat format) {
  size_t i = 0;
  if (format == OutputFormat::jsonl) {
    const std::string_view head = "{\"point\":";
    if (line.substr(0, head.size()) != head) return -1;
    i = head.size();
  }
  int64_t k = -1;
  const auto [end, ec] = std::from_chars(line.data() + i, line.data() + line.size(), k);
  return ec == std::errc() && end != line.data() + i ? k : -1;
}

// Reads one shard output: its shard line, header and the rows of each of its points, which
// must be exactly points index-1, index-1+count, ... below `points`, in order.
Result<ShardFile> read_shard(const std::string& path, OutputFormat format) {
  ShardFile f;
  f.path = path;
  auto text = read_text_file(path);
  if (!text) return text.error();
  f.text = std::move(text.value());
  const std::string& t = f.text;
  if (!t.empty() && t.back() != '\n')
    return input_error(path, "", "last line is cut (not a finished shard output)");
  size_t pos = t.find('\n');
  if (pos == std::string::npos) return input_error(path, "1", "empty (not a shard output)");
  if (auto st = parse_shard_line(t.substr(0, pos), format, f); !st) return st.error();
  ++pos;
  int line_no = 1;
  if (format == OutputFormat::csv) {
    const size_t nl = t.find('\n', pos);
    if (nl == std::string::npos) return input_error(path, "2", "no CSV header");
    f.header = t.substr(pos, nl + 1 - pos);
    pos = nl + 1;
    ++line_no;
  }
  // Every row is checked whole: a well-formed record (CSV: the header's field count; JSON Lines:
  // one JSON object), a point index that follows the shard's order, and no row given twice
  // within its point (break-it 2026-12-03: cut, duplicated and damaged rows were merged, exit 0).
  const size_t header_fields = format == OutputFormat::csv ? csv_fields(f.header) : 0;
  int64_t expected = f.index - 1;
  bool in_point = false;
  int64_t current = 0;
  std::vector<std::string_view> point_records;
  while (pos < t.size()) {
    ++line_no;
    const size_t end = record_end(t, pos, format);
    if (end == std::string::npos)
      return input_error(path, std::to_string(line_no), "row is cut (an unclosed quote)");
    const std::string_view rec = std::string_view(t).substr(pos, end - 1 - pos);
    const int64_t k = row_point(rec, format);
    if (k < 0)
      return input_error(path, std::to_string(line_no), "not a row of a sweep (no point index)");
    if (format == OutputFormat::csv ? csv_fields(rec) != header_fields
                                    : !json::accept(rec) || rec.back() != '}')
      return input_error(path, std::to_string(line_no),
                         format == OutputFormat::csv
                             ? "row has " + std::to_string(csv_fields(rec)) +
                                   " fields, the header " + std::to_string(header_fields)
                             : std::string("row is not one JSON object"));
    if (!in_point || k != current) {
      if (k != expected || k >= f.points)
        return input_error(path, std::to_string(line_no),
                           "point " + std::to_string(k) + " where point " +
                               std::to_string(expected) + " of shard " + std::to_string(f.index) +
                               "/" + std::to_string(f.count) + " belongs");
      if (!f.point_rows.empty()) f.point_rows.back().second = pos;
      f.point_rows.push_back({pos, t.size()});
      point_records.clear();
      current = k;
      in_point = true;
      expected += f.count;
    }
    for (const auto& other : point_records)
      if (other == rec)
        return input_error(path, std::to_string(line_no),
                           "row given twice in point " + std::to_string(k));
    point_records.push_back(rec);
    line_no += static_cast<int>(std::count(rec.begin(), rec.end(), '\n'));
    pos = end;
  }
  if (expected < f.points)
    return input_error(path, "",
                       "shard " + std::to_string(f.index) + "/" + std::to_string(f.count) +
                           " is incomplete: point " + std::to_string(expected) +
                           " missing (rerun its sweep command to finish it)");
  return f;
}

// All shards 1..N of one sweep, each once: indexed by shard number - 1.
Result<std::vector<ShardFile>> collect_shards(const std::vector<std::string>& inputs,
                                              OutputFormat format) {
  std::vector<ShardFile> by_index;
  std::map<int, std::string> seen;
  ShardFile first;
  for (const auto& path : inputs) {
    auto f = read_shard(path, format);
    if (!f) return f.error();
    if (by_index.empty()) {
      by_index.resize(static_cast<size_t>(f->count));
      first = *f;  // what every other shard must match (its text is not needed)
      first.text.clear();
      first.point_rows.clear();
    }
    if (f->sweep != first.sweep || f->points != first.points)
      return input_error(path, "1",
                         "a shard of another sweep than " + first.path + " (sweep " + f->sweep +
                             " of " + std::to_string(f->points) + " points, not " + first.sweep +
                             " of " + std::to_string(first.points) + ")");
    if (f->count != first.count || f->header != first.header)
      return input_error(path, f->count != first.count ? "1" : "2",
                         f->count != first.count
                             ? "shard " + std::to_string(f->index) + "/" +
                                   std::to_string(f->count) + ", but " + first.path + " is of " +
                                   std::to_string(first.count) + " shards"
                             : "other columns than " + first.path);
    if (auto [it, fresh] = seen.emplace(f->index, path); !fresh)
      return input_error(path, "1",
                         "shard " + std::to_string(f->index) + "/" + std::to_string(f->count) +
                             " given twice (also " + it->second + ")");
    by_index[static_cast<size_t>(f->index - 1)] = std::move(f.value());
  }
  std::string missing;
  for (size_t i = 0; i < by_index.size(); ++i)
    if (!seen.count(static_cast<int>(i + 1)))
      missing += (missing.empty() ? "" : ", ") + std::to_string(i + 1) + "/" +
                 std::to_string(by_index.size());
  if (!missing.empty())
    return input_error("<command line>", "merge", "shard " + missing + " missing");
  return by_index;
}

}  // namespace

Result<SweepShard> parse_shard(const std::string& text, const std::string& flag) {
  SweepShard s;
  const size_t slash = text.find('/');
  auto number = [](std::string_view v, int& out) {
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && end == v.data() + v.size() && !v.empty();
  };
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), s.index) ||
      !number(std::string_view(text).substr(slash + 1), s.count) || s.index < 1 ||
      s.index > s.count || s.count > kMaxShards)
    return input_error("<command line>", flag,
                       "expected K/N with 1 <= K <= N <= 1000000, got '" + text + "'");
  return s;
}

Result<MergeSummary> merge_sweep_shards(const std::vector<std::string>& inputs,
                                        const std::string& output_path) {
  auto format = output_format_for(output_path);
  if (!format) return input_error("<command line>", "--output", format.error().message);
  if (inputs.empty()) return input_error("<command line>", "merge", "no shard outputs given");
  for (const auto& in : inputs) {
    auto f = output_format_for(in);
    if (!f || *f != *format)
      return input_error(in, "",
                         std::string("not a shard output of the output's format (") +
                             (*format == OutputFormat::csv ? ".csv" : ".jsonl") + ")");
  }
  auto shards = collect_shards(inputs, *format);
  if (!shards) return shards.error();
  const auto& s = shards.value();
  MergeSummary sum;
  sum.shards = static_cast<int>(s.size());
  sum.total_points = s[0].points;
  std::string out = s[0].header;
  for (int64_t k = 0; k < sum.total_points; ++k) {
    const ShardFile& f = s[static_cast<size_t>(k % sum.shards)];
    const auto [b, e] = f.point_rows[static_cast<size_t>(k / sum.shards)];
    out.append(f.text, b, e - b);
    // Records, not lines: a CSV field may hold a quoted newline (read_shard checked each).
    for (size_t i = b; i < e; i = record_end(f.text, i, *format)) ++sum.rows_written;
  }
  auto target = output_target(output_path);
  if (!target) return target.error();
  // The lock a sweep holds on this output: a sweep still writing it, or another merge, refuses
  // this one (break-it 2026-12-03: a merge wrote over a running sweep's output, exit 0).
  PartialLock lock;
  if (!target->in_place)
    if (auto l = lock.acquire(target->path + ".partial", output_path); !l) return l.error();
  auto st =
      target->in_place ? write_in_place(target->path, out) : write_text_atomic(target->path, out);
  if (!st) return st.error();
  return sum;
}

}  // namespace sparsp::study
