// Sweeps spread over processes (issue 20, item 4), in one process: shards (`--shard K/N`) and
// their merge, and ranks (the MPI path) through an in-process SweepRanks over threads. Each
// result is byte-compared with the one-process output of the same closed-form fake evaluator.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../cli/cli_support.hpp"
#include "sparsp/sweep.hpp"

using nlohmann::json;
namespace fs = std::filesystem;
using namespace sparsp::study;
using sparsp::Ok;
using sparsp::Result;
using sparsp::Status;

namespace {

// Study {"x": int, "z": number} -> one row "x * z"; x == 3 is skipped (one row with the reason).
PointEvaluator product_evaluator() {
  PointEvaluator ev;
  ev.columns = {"value"};
  ev.evaluate = [](const SweepPoint& p) {
    const json s = json::parse(p.study_json);
    PointOutcome o;
    if (s["x"].get<int>() == 3) {
      o.skipped = true;
      o.reason = "x=3 is not allowed";
      return o;
    }
    o.rows.push_back({json(s["x"].get<int>() * s["z"].get<double>()).dump()});
    return o;
  };
  return ev;
}

// 7 x 2 = 14 points: x in 0..6, z in {0.5, 2}.
SweepSpec spec_with(const std::string& zs = "[0.5, 2]") {
  auto r = parse_sweep(R"({"study": {"x": 0, "z": 0.5}, "axes": [
      {"path": "/x", "name": "x", "range": {"start": 0, "stop": 6, "step": 1}},
      {"path": "/z", "name": "z", "values": )" +
                           zs + "}]}",
                       "s.json", "");
  REQUIRE(r.ok());
  return r.value();
}

using sparsp::test::slurp;

fs::path temp_dir(const std::string& name) {
  return sparsp::test::fresh_dir("sparsp_sweep_shard_test_" + name);
}

SweepOptions opts(const fs::path& out, int threads = 2) {
  SweepOptions o;
  o.output_path = out.string();
  o.threads = threads;
  o.progress = ProgressMode::off;
  return o;
}

// Ranks as threads of this process: a mailbox per sending rank, a broadcast slot.
struct Mailboxes {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<PointRows>> box;
  std::vector<int64_t> bcast;
  int bcast_round = 0;
  int abandoned = 0;
};

class ThreadRanks final : public SweepRanks {
 public:
  ThreadRanks(Mailboxes& m, int rank, int size) : m_(m), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void broadcast(std::vector<int64_t>& values) override {
    std::unique_lock lk(m_.mu);
    if (rank_ == 0) {
      m_.bcast = values;
      ++m_.bcast_round;
      m_.cv.notify_all();
    } else {
      m_.cv.wait(lk, [&] { return m_.bcast_round > round_; });
      values = m_.bcast;
    }
    ++round_;
  }
  Status send_to_root(const PointRows& r) override {
    std::lock_guard lk(m_.mu);
    m_.box[static_cast<size_t>(rank_)].push_back(r);
    m_.cv.notify_all();
    return Ok{};
  }
  Result<PointRows> receive_from(int from) override {
    std::unique_lock lk(m_.mu);
    auto& q = m_.box[static_cast<size_t>(from)];
    m_.cv.wait(lk, [&] { return !q.empty(); });
    PointRows r = std::move(q.front());
    q.pop_front();
    return r;
  }
  void abandon(int exit_code) override { m_.abandoned = exit_code; }

 private:
  Mailboxes& m_;
  int rank_, size_, round_ = 0;
};

// Runs the sweep on `size` ranks (threads); returns rank 0's summary.
Result<SweepSummary> run_on_ranks(const SweepSpec& spec, SweepOptions o, int size, Mailboxes& m) {
  m.box.resize(static_cast<size_t>(size));
  std::vector<std::unique_ptr<ThreadRanks>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<ThreadRanks>(m, r, size));
  std::vector<std::thread> others;
  for (int r = 1; r < size; ++r)
    others.emplace_back([&, r] {
      SweepOptions ro = o;
      ro.ranks = ranks[static_cast<size_t>(r)].get();
      (void)run_sweep(spec, product_evaluator(), ro);
    });
  o.ranks = ranks[0].get();
  auto sum = run_sweep(spec, product_evaluator(), o);
  for (auto& t : others) t.join();
  return sum;
}

}  // namespace

TEST_CASE("--shard K/N: parsing") {
  CHECK(parse_shard("3/4")->index == 3);
  CHECK(parse_shard("3/4")->count == 4);
  CHECK(parse_shard("1/1")->count == 1);
  for (const char* bad : {"0/4", "5/4", "1/0", "a/b", "1/2/3", "2", "/2", "1/", "-1/2", " 1/2"}) {
    CAPTURE(bad);
    auto r = parse_shard(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit_code == 2);
    CHECK(r.error().message == std::string("<command line>:--shard: expected K/N with 1 <= K <= "
                                           "N <= 1000000, got '") +
                                   bad + "'");
  }
}

TEST_CASE("shards hold every N-th point, start with the shard line, and merge to one process") {
  const fs::path d = temp_dir("merge");
  const SweepSpec spec = spec_with();
  for (const char* ext : {".csv", ".jsonl"}) {
    CAPTURE(ext);
    REQUIRE(run_sweep(spec, product_evaluator(), opts(d / (std::string("ref") + ext))).ok());
    std::vector<std::string> parts;
    for (int k = 3; k >= 1; --k) {  // any order
      SweepOptions o = opts(d / ("part_" + std::to_string(k) + ext), k);
      o.shard = SweepShard{k, 3};
      auto sum = run_sweep(spec, product_evaluator(), o);
      REQUIRE(sum.ok());
      // 14 points over 3 shards: points k-1, k+2, ... -> 5, 5, 4 points.
      CHECK(sum->total_points == (k == 3 ? 4 : 5));
      parts.push_back(o.output_path);
    }
    const std::string p1 = slurp(d / (std::string("part_1") + ext));
    if (std::string(ext) == ".csv") {
      // Shard line, header, then point 0 (x=0, z=0.5: 0 * 0.5 = 0) and point 3 (x=1, z=2: 2).
      CHECK(p1.rfind("#sparsp-shard {\"shard\":1,\"of\":3,\"points\":14,\"sweep\":\"", 0) == 0);
      CHECK(p1.find("\npoint,x,z,status,reason,value\n0,0,0.5,ok,,0.0\n3,1,2,ok,,2.0\n") !=
            std::string::npos);
    } else {
      CHECK(p1.rfind("{\"sparsp_shard\":{\"shard\":1,\"of\":3,\"points\":14,\"sweep\":\"", 0) == 0);
    }
    const fs::path merged = d / (std::string("merged") + ext);
    auto m = merge_sweep_shards(parts, merged.string());
    REQUIRE(m.ok());
    CHECK(m->shards == 3);
    CHECK(m->total_points == 14);
    CHECK(m->rows_written == 14);  // one row per point, skipped ones included
    CHECK(slurp(merged) == slurp(d / (std::string("ref") + ext)));
  }
}

TEST_CASE("a stopped shard resumes as that shard, and as another shard it is refused") {
  const fs::path d = temp_dir("shard_resume");
  const SweepSpec spec = spec_with();
  SweepOptions ref = opts(d / "ref.csv");
  ref.shard = SweepShard{2, 3};
  REQUIRE(run_sweep(spec, product_evaluator(), ref).ok());
  SweepOptions o = opts(d / "p.csv");
  o.shard = SweepShard{2, 3};
  o.stop_after_points = 2;
  auto first = run_sweep(spec, product_evaluator(), o);
  REQUIRE(first.ok());
  CHECK_FALSE(first->complete);
  SweepOptions other = opts(d / "p.csv");
  other.shard = SweepShard{1, 3};
  auto refused = run_sweep(spec, product_evaluator(), other);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().exit_code == 2);
  CHECK(refused.error().message.find("--shard (was \"2/3\", now \"1/3\")") != std::string::npos);
  o.stop_after_points = -1;
  auto second = run_sweep(spec, product_evaluator(), o);
  REQUIRE(second.ok());
  CHECK(second->complete);
  // Points 1 and 4 were written; 4, the last present, is run again: 1 resumed of 5.
  CHECK(second->resumed_points == 1);
  CHECK(slurp(d / "p.csv") == slurp(d / "ref.csv"));
}

TEST_CASE("merge refuses other sweeps, missing, repeated and incomplete shards") {
  const fs::path d = temp_dir("merge_bad");
  auto shard = [&](const SweepSpec& spec, int k, int n, const std::string& name) {
    SweepOptions o = opts(d / name);
    o.shard = SweepShard{k, n};
    REQUIRE(run_sweep(spec, product_evaluator(), o).ok());
    return (d / name).string();
  };
  const std::string a1 = shard(spec_with(), 1, 2, "a1.csv"),
                    a2 = shard(spec_with(), 2, 2, "a2.csv");
  const std::string b2 = shard(spec_with("[0.5, 3]"), 2, 2, "b2.csv");
  const std::string c3 = shard(spec_with(), 3, 3, "c3.csv");
  const std::string out = (d / "out.csv").string();
  auto err = [&](const std::vector<std::string>& in, const std::string& o = "") {
    auto r = merge_sweep_shards(in, o.empty() ? out : o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  };
  CHECK(err({a1, b2}).rfind(b2 + ":1: a shard of another sweep than " + a1 + " (sweep ", 0) == 0);
  CHECK(err({a1, c3}) == c3 + ":1: shard 3/3, but " + a1 + " is of 2 shards");
  CHECK(err({a1, a1}) == a1 + ":1: shard 1/2 given twice (also " + a1 + ")");
  CHECK(err({a2}) == "<command line>:merge: shard 1/2 missing");
  CHECK(err({a1, a2}, (d / "out.jsonl").string()) ==
        a1 + ": not a shard output of the output's format (.jsonl)");
  // A whole-sweep output is no shard.
  REQUIRE(run_sweep(spec_with(), product_evaluator(), opts(d / "whole.csv")).ok());
  CHECK(err({(d / "whole.csv").string()}) ==
        (d / "whole.csv").string() +
            ":1: not the output of a shard (no shard line; write shards with `sparsp sweep "
            "--shard K/N`)");
  // A shard cut after its first point (a .partial passed off as whole): point 2 missing.
  const std::string text = slurp(a1);
  const std::string cut = (d / "cut.csv").string();
  std::ofstream(cut, std::ios::binary) << text.substr(0, text.find("\n2,") + 1);
  CHECK(err({cut, a2}) ==
        cut + ": shard 1/2 is incomplete: point 2 missing (rerun its sweep command to finish it)");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("merge checks every row whole, and refuses an output another writer holds") {
  // Break-it pass 2026-12-03: a shard with a row repeated, cut short, or whose first row's
  // point index did not parse was merged with exit 0; a merge overwrote a running sweep's output.
  const fs::path d = temp_dir("merge_rows");
  auto shard = [&](int k, const std::string& name) {
    SweepOptions o = opts(d / name);
    o.shard = SweepShard{k, 2};
    REQUIRE(run_sweep(spec_with(), product_evaluator(), o).ok());
    return (d / name).string();
  };
  const std::string a1 = shard(1, "a1.csv"), a2 = shard(2, "a2.csv");
  const std::string out = (d / "out.csv").string();
  // a1.csv: line 1 the shard line, line 2 the header, line 3 point 0's row, line 4 point 2's.
  const std::string text = slurp(a1);
  const size_t row3 = text.find('\n', text.find('\n') + 1) + 1;  // start of line 3
  const size_t row4 = text.find('\n', row3) + 1;
  auto with = [&](const std::string& name, const std::string& body) {
    std::ofstream(d / name, std::ios::binary) << body;
    auto r = merge_sweep_shards({(d / name).string(), a2}, out);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit_code == 2);
    return r.error().message;
  };
  const std::string p = (d / "x.csv").string();
  // Point 0's row given twice.
  CHECK(with("x.csv", text.substr(0, row4) + text.substr(row3)) ==
        p + ":4: row given twice in point 0");
  // The first row's point index unparsable: it used to be skipped silently.
  CHECK(with("x.csv", text.substr(0, row3) + "x" + text.substr(row3)) ==
        p + ":3: not a row of a sweep (no point index)");
  // A row with a field cut off (the header has one more).
  const std::string line3 = text.substr(row3, row4 - row3 - 1);
  const size_t fields = static_cast<size_t>(std::count(line3.begin(), line3.end(), ',')) + 1;
  CHECK(with("x.csv",
             text.substr(0, row3) + line3.substr(0, line3.rfind(',')) + "\n" + text.substr(row4)) ==
        p + ":3: row has " + std::to_string(fields - 1) + " fields, the header " +
            std::to_string(fields));
  // An unclosed quote runs to the end of the file.
  CHECK(with("x.csv", text + "4,\"open\n") ==
        p + ":" + std::to_string(std::count(text.begin(), text.end(), '\n') + 1) +
            ": row is cut (an unclosed quote)");
  // The shard line is strict JSON: a key given twice, or points past 2^53.
  const std::string line1 = text.substr(0, text.find('\n'));
  std::string dup = line1;
  dup.insert(dup.find("\"of\""), "\"of\":7,");
  CHECK(with("x.csv", dup + text.substr(line1.size())) ==
        p + ":/of: duplicate key \"of\" (each key may appear once)");
  std::string big = line1;
  const size_t at = big.find("\"points\":") + 9;
  big.replace(at, big.find(',', at) - at, "18446744073709551617");
  CHECK(with("x.csv", big + text.substr(line1.size())) ==
        p + ":1: shard line: /points: expected an integer in 0..2^53 (write shards with `sparsp "
            "sweep --shard K/N`)");
  // Another writer holds the output's lock (as a running sweep does): refused, nothing written.
  const int fd = ::open((out + ".partial").c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  auto busy = merge_sweep_shards({a1, a2}, out);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().message ==
        out + ": in use by another sweep (" + out +
            ".partial is locked); wait for it to finish or use another output");
  ::close(fd);
  CHECK_FALSE(fs::exists(out));
  // Free again: the merge writes, and leaves no temporary beside the output.
  REQUIRE(merge_sweep_shards({a1, a2}, out).ok());
  for (const auto& e : fs::directory_iterator(d))
    CHECK(e.path().string().find(".tmp") == std::string::npos);
}

TEST_CASE("ranks: rank 0 writes every rank's points in order, byte-identical to one process") {
  const fs::path d = temp_dir("ranks");
  const SweepSpec spec = spec_with();
  REQUIRE(run_sweep(spec, product_evaluator(), opts(d / "ref.csv")).ok());
  REQUIRE(run_sweep(spec, product_evaluator(), opts(d / "ref.jsonl")).ok());
  for (int size : {2, 3, 5}) {
    CAPTURE(size);
    Mailboxes m;
    const fs::path out = d / ("r" + std::to_string(size) + ".csv");
    auto sum = run_on_ranks(spec, opts(out, 1), size, m);
    REQUIRE(sum.ok());
    CHECK(sum->complete);
    CHECK(sum->evaluated_points == 14);
    CHECK(m.abandoned == 0);
    CHECK(slurp(out) == slurp(d / "ref.csv"));
    Mailboxes mj;
    const fs::path jsonl = d / ("r" + std::to_string(size) + ".jsonl");
    REQUIRE(run_on_ranks(spec, opts(jsonl, 1), size, mj).ok());
    CHECK(slurp(jsonl) == slurp(d / "ref.jsonl"));
  }
  // A shard on ranks: the shard's output of one process.
  SweepOptions one = opts(d / "s1.csv");
  one.shard = SweepShard{2, 2};
  REQUIRE(run_sweep(spec, product_evaluator(), one).ok());
  Mailboxes m;
  SweepOptions on_ranks = opts(d / "s2.csv", 1);
  on_ranks.shard = SweepShard{2, 2};
  REQUIRE(run_on_ranks(spec, on_ranks, 2, m).ok());
  CHECK(slurp(d / "s2.csv") == slurp(d / "s1.csv"));
}

TEST_CASE("ranks: rank 0 stopped part-way abandons the others, and the rerun resumes") {
  const fs::path d = temp_dir("ranks_stop");
  const SweepSpec spec = spec_with();
  REQUIRE(run_sweep(spec, product_evaluator(), opts(d / "ref.csv")).ok());
  Mailboxes m;
  SweepOptions o = opts(d / "r.csv", 1);
  o.stop_after_points = 5;
  auto first = run_on_ranks(spec, o, 2, m);
  REQUIRE(first.ok());
  CHECK_FALSE(first->complete);
  CHECK(m.abandoned == 1);
  Mailboxes again;
  o.stop_after_points = -1;
  auto second = run_on_ranks(spec, o, 2, again);
  REQUIRE(second.ok());
  CHECK(second->resumed_points == 4);  // points 0..3 kept, 4 (the last present) run again
  CHECK(slurp(d / "r.csv") == slurp(d / "ref.csv"));
}

TEST_CASE("merge counts rows, not lines, when a field holds a quoted newline") {
  // Break-it pass 2026-12-03: `sweep merge` reported one row per line, so a field holding a
  // newline counted its row twice. The two x == 4 points (z 0.5 and 2) write a two-line value
  // here (CSV-quoted): 14 points, one row each -> 14 rows, where a line count gives 16.
  const fs::path d = temp_dir("merge_newline");
  PointEvaluator ev = product_evaluator();
  const auto inner = ev.evaluate;
  ev.evaluate = [inner](const SweepPoint& p) {
    PointOutcome o = inner(p);
    if (json::parse(p.study_json)["x"].get<int>() == 4) o.rows[0][0] = "first line\nsecond line";
    return o;
  };
  std::vector<std::string> shards;
  for (int k = 1; k <= 2; ++k) {
    SweepOptions o = opts(d / ("s" + std::to_string(k) + ".csv"));
    o.shard = SweepShard{k, 2};
    REQUIRE(run_sweep(spec_with(), ev, o).ok());
    shards.push_back((d / ("s" + std::to_string(k) + ".csv")).string());
  }
  auto m = merge_sweep_shards(shards, (d / "out.csv").string());
  REQUIRE(m.ok());
  CHECK(m->rows_written == 14);
  const std::string merged = slurp((d / "out.csv").string());
  CHECK(std::count(merged.begin(), merged.end(), '\n') == 1 + 14 + 2);  // header, rows, 2 inner
}
