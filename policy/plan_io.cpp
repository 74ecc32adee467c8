// Plan JSON load/save (schema in policy/PLAN.md). Deterministic output: keys in a fixed order,
// numbers printed by nlohmann_json (shortest round-trip form), topology embedded verbatim as
// parsed (insertion order kept).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "sparsp/plan.hpp"
#include "sparsp/policy.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::policy {
namespace {

// Range of the parameters a study adds to an emitted plan (study::kPlan*Key in sparsp/study.hpp:
// other_time_s, model_layers, model_steps, compute_imbalance, pipeline_time_s, cfg_forwards,
// not_modelled_stages,
// contention_ce_copy, contention_sm_copy_per_sm); ""
// when `x` fits, else the message. Other keys are policy parameters, checked against the policy's
// registry later.
std::string check_study_param(const std::string& key, double x) {
  char buf[96];
  if ((key == "other_time_s" || key == "pipeline_time_s") && !(x >= 0 && x <= 1e6)) {
    std::snprintf(buf, sizeof buf, "expected seconds in [0, 1e6], got %.10g", x);
    return buf;
  }
  if ((key == "model_layers" || key == "model_steps") &&
      !(x >= 1 && x <= 1e6 && x == std::floor(x))) {
    std::snprintf(buf, sizeof buf, "expected an integer in [1, 1e6], got %.10g", x);
    return buf;
  }
  if (key == "not_modelled_stages" && !(x >= 0 && x <= 15 && x == std::floor(x))) {
    std::snprintf(buf, sizeof buf, "expected a bit set, an integer in [0, 15], got %.10g", x);
    return buf;
  }
  if (key == "cfg_forwards" && !(x == 1 || x == 2)) {
    std::snprintf(buf, sizeof buf, "expected 1 or 2 forwards per step, got %.10g", x);
    return buf;
  }
  // Slowdown factors (time ratio - 1): >= 0, as topology measured_compute.contention.
  if ((key == "contention_ce_copy" || key == "contention_sm_copy_per_sm") &&
      !(x >= 0 && x <= 1e6)) {
    std::snprintf(buf, sizeof buf, "expected a slowdown factor in [0, 1e6], got %.10g", x);
    return buf;
  }
  // max/mean >= 1; a hair below 1 is rounding of an exactly balanced plan.
  if (key == "compute_imbalance" && !(x >= 1 - 1e-9 && x <= 1e6)) {
    std::snprintf(buf, sizeof buf, "expected a ratio in [1, 1e6], got %.10g", x);
    return buf;
  }
  return {};
}

using Json = nlohmann::ordered_json;

const char* engine_name(sim::Engine e) {
  switch (e) {
    case sim::Engine::ce:
      return "ce";
    case sim::Engine::sm:
      return "sm";
    case sim::Engine::host:
      return "host";
  }
  return "ce";
}

const char* route_name(topology::RouteMode m) {
  switch (m) {
    case topology::RouteMode::automatic:
      return "automatic";
    case topology::RouteMode::p2p:
      return "p2p";
    case topology::RouteMode::host_staged:
      return "host_staged";
  }
  return "automatic";
}

/// Parser state: the source name and error helpers with JSON pointers.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Error err(const std::string& ptr, const std::string& what) const {
    return input_error(source_, ptr, what);
  }

  /// Required member `key` of object `obj` at pointer `ptr`, checked with `pred` (type test).
  template <class Pred>
  const Json* member(const Json& obj, const std::string& ptr, const char* key, bool required,
                     Pred pred, const char* expected, std::optional<Error>& e) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required && !e)
        e = err(ptr + "/" + key, std::string("missing required field (expected ") + expected + ")");
      return nullptr;
    }
    if (!pred(*it)) {
      if (!e)
        e = err(ptr + "/" + key, std::string("expected ") + expected + ", got " + it->type_name());
      return nullptr;
    }
    return &*it;
  }

 private:
  std::string source_;
};

/// Largest compute duration a plan may give (seconds): 1e6 s (11.6 days) is far beyond any
/// attention layer (milliseconds) and keeps simulated times printable.
constexpr double kMaxDurationS = 1e6;
/// Largest compute task in FLOP: 1e6 s at 1e18 FLOP/s (above any GPU's peak).
constexpr double kMaxFlops = 1e24;
/// Largest payload (bytes) of a transfer or block: 2^50 B = 1 PiB, the simulator's own cap
/// (sim/simulate.cpp kMaxTransferBytes).
constexpr double kMaxBytes = 1125899906842624.0;

/// Refuses members of `obj` (at pointer `ptr`) not in `allowed`: typos never pass silently.
std::optional<Error> check_keys(const Reader& rd, const Json& obj, const std::string& ptr,
                                std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || it.key() == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      return rd.err(ptr + "/" + it.key(),
                    "unknown field \"" + it.key() + "\" (expected one of: " + list + ")");
    }
  }
  return std::nullopt;
}

bool is_int(const Json& j) { return j.is_number_integer() || j.is_number_unsigned(); }

/// Reads the integer member `key` of `obj` (at `ptr`) into `out` when present: a JSON integer in
/// [lo, hi]. A fraction (2.5), an integer written as a float (2.0) and a value outside the range
/// (including one past 2^63, or negative where lo >= 0) are errors at its pointer, never wrapped
/// into range. Records the first error in `e`; returns whether `out` was set.
template <class T>
bool int_member(const Reader& rd, const Json& obj, const std::string& ptr, const char* key,
                bool required, int64_t lo, int64_t hi, T& out, std::optional<Error>& e) {
  auto it = obj.find(key);
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (it == obj.end()) {
    if (required && !e)
      e = rd.err(ptr + "/" + key, "missing required field (expected an integer in " + range + ")");
    return false;
  }
  const Json& v = *it;
  bool ok = false;
  if (v.is_number_unsigned())
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
         v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  else if (v.is_number_integer())
    ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!ok) {
    if (!e)
      e = rd.err(ptr + "/" + key, "expected an integer in " + range + ", got " +
                                      (v.is_number() ? v.dump() : std::string(v.type_name())));
    return false;
  }
  out = static_cast<T>(v.get<int64_t>());
  return true;
}
bool is_num(const Json& j) { return j.is_number(); }
/// A non-negative whole number, also in exponent form (1e9).
bool is_whole(const Json& j) {
  if (!j.is_number()) return false;
  const double x = j.get<double>();
  return std::isfinite(x) && x >= 0 && x == std::floor(x);
}
bool is_str(const Json& j) { return j.is_string(); }
bool is_bool(const Json& j) { return j.is_boolean(); }
bool is_arr(const Json& j) { return j.is_array(); }
bool is_obj(const Json& j) { return j.is_object(); }

/// "gpuN" with N a rank's GPU (N < gpus, or one of rank_gpus), or "hostK" with K >= 0.
bool valid_endpoint(const std::string& s, const Plan& plan) {
  auto num = [](const std::string& t, size_t from, long& out) {
    if (from >= t.size() || t.size() - from > 6) return false;
    for (size_t i = from; i < t.size(); ++i)
      if (t[i] < '0' || t[i] > '9') return false;
    out = std::stol(t.substr(from));
    return true;
  };
  long n = 0;
  if (s.rfind("gpu", 0) == 0) return num(s, 3, n) && plan.rank_of_gpu(n) >= 0;
  if (s.rfind("host", 0) == 0) return num(s, 4, n);
  return false;
}

std::string ptr_index(const std::string& base, size_t i) { return base + "/" + std::to_string(i); }

std::string num_text(double x) {
  std::ostringstream o;
  o.precision(15);
  o << x;
  return o.str();
}

/// Checks the KV payload of every transfer that names kv_blocks (policy/PLAN.md, "What replay does
/// with it"): its bytes must be the sum of its blocks' sizes (block_bytes, or kv_block_bytes with
/// the last block's size inferred from the first transfer carrying it, as replay/lower.cpp does),
/// to 1 byte; and its source must own each block or receive it by a transfer it depends on
/// (transitively, through `after` and named-stream FIFO order), as a ring forwards shards.
/// Also refuses dependency cycles. Returns the first error, naming the JSON pointer.
std::optional<Error> check_kv_payloads(const Plan& p, const Reader& rd) {
  const int nb = p.num_blocks;
  std::vector<double> size(static_cast<size_t>(nb), p.kv_block_bytes);
  if (!p.block_bytes.empty()) size = p.block_bytes;
  bool last_open = p.block_bytes.empty() && nb > 0;
  for (size_t li = 0; li < p.layers.size(); ++li) {
    const std::string lp = ptr_index("/layers", li);
    const auto& trs = p.layers[li].work.transfers;
    const auto& cps = p.layers[li].work.compute;
    for (size_t ti = 0; ti < trs.size(); ++ti) {
      const auto& t = trs[ti];
      if (t.kv_blocks.empty()) continue;
      double sum = 0;
      bool has_last = false;
      for (int b : t.kv_blocks) {
        sum += size[static_cast<size_t>(b)];
        has_last = has_last || b == nb - 1;
      }
      if (last_open && has_last) {
        const double deficit = sum - t.bytes;
        if (deficit > 1.0 && deficit < p.kv_block_bytes) {
          size[static_cast<size_t>(nb - 1)] = p.kv_block_bytes - deficit;
          sum -= deficit;
        }
        last_open = false;
      }
      if (std::abs(t.bytes - sum) > 1.0)
        return rd.err(ptr_index(lp + "/transfers", ti) + "/bytes",
                      num_text(t.bytes) + " bytes, but its " + std::to_string(t.kv_blocks.size()) +
                          " kv_blocks hold " + num_text(sum) +
                          " bytes (block_bytes, or kv_block_bytes with a partial last block); "
                          "blocks of unequal size need block_bytes");
    }
    // Dependency order: `after` plus the FIFO predecessor on a named stream (replay/lower.cpp).
    const size_t n = trs.size() + cps.size();
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < trs.size(); ++i) index_of[trs[i].id] = i;
    for (size_t i = 0; i < cps.size(); ++i) index_of[cps[i].id] = trs.size() + i;
    std::vector<std::vector<size_t>> deps(n);
    std::map<std::string, size_t> last_on_stream;
    for (size_t i = 0; i < n; ++i) {
      const auto& after = i < trs.size() ? trs[i].after : cps[i - trs.size()].after;
      const auto& stream = i < trs.size() ? trs[i].stream : cps[i - trs.size()].stream;
      for (const auto& id : after) deps[i].push_back(index_of.at(id));
      if (!stream.empty()) {
        auto it = last_on_stream.find(stream);
        if (it != last_on_stream.end()) deps[i].push_back(it->second);
        last_on_stream[stream] = i;
      }
    }
    std::vector<int> indeg(n, 0);
    std::vector<std::vector<size_t>> out(n);
    for (size_t i = 0; i < n; ++i)
      for (size_t d : deps[i]) {
        ++indeg[i];
        out[d].push_back(i);
      }
    std::vector<size_t> order, ready;
    for (size_t i = 0; i < n; ++i)
      if (indeg[i] == 0) ready.push_back(i);
    while (!ready.empty()) {
      const size_t i = ready.back();
      ready.pop_back();
      order.push_back(i);
      for (size_t j : out[i])
        if (--indeg[j] == 0) ready.push_back(j);
    }
    if (order.size() != n) {
      for (size_t i = 0; i < n; ++i)
        if (indeg[i] > 0) {
          const bool tr = i < trs.size();
          return rd.err(
              tr ? ptr_index(lp + "/transfers", i) : ptr_index(lp + "/compute", i - trs.size()),
              "dependency cycle through \"" + (tr ? trs[i].id : cps[i - trs.size()].id) + "\"");
        }
    }
    // Ancestor sets (bitsets over activities), in topological order.
    const size_t words = (n + 63) / 64;
    std::vector<uint64_t> anc(n * words, 0);
    for (size_t i : order)
      for (size_t d : deps[i]) {
        for (size_t w = 0; w < words; ++w) anc[i * words + w] |= anc[d * words + w];
        anc[i * words + d / 64] |= uint64_t{1} << (d % 64);
      }
    // (dst, block) -> transfers delivering it.
    std::map<std::pair<std::string, int>, std::vector<size_t>> delivered;
    for (size_t i = 0; i < trs.size(); ++i)
      for (int b : trs[i].kv_blocks) delivered[{trs[i].dst, b}].push_back(i);
    for (size_t ti = 0; ti < trs.size(); ++ti) {
      const auto& t = trs[ti];
      for (size_t k = 0; k < t.kv_blocks.size(); ++k) {
        const int b = t.kv_blocks[k];
        const int owner = p.block_owner[static_cast<size_t>(b)];
        if (t.src == p.gpu_endpoint(owner)) continue;
        bool held = false;
        if (auto it = delivered.find({t.src, b}); it != delivered.end())
          for (size_t r : it->second)
            if (anc[ti * words + r / 64] >> (r % 64) & 1) held = true;
        if (!held)
          return rd.err(ptr_index(ptr_index(lp + "/transfers", ti) + "/kv_blocks", k),
                        t.src + " sends block " + std::to_string(b) +
                            " but neither owns it (owner " + p.gpu_endpoint(owner) +
                            ") nor receives it by a transfer it depends on");
      }
    }
  }
  return std::nullopt;
}

}  // namespace

// A compute task's kind and coverage (policy/PLAN.md "Compute kinds"); absent kind: attention
// (plans of schema 1).
// `heads`: the plan's head count (0: not given, then up to 4096).
static std::optional<Error> parse_task_compute(Reader& rd, const Json& cj, const std::string& cp,
                                               int gpus, int heads, sim::TaskCompute& w) {
  std::string kind = "attention";
  if (auto it = cj.find("kind"); it != cj.end()) {
    if (!it->is_string()) return rd.err(cp + "/kind", "expected a string");
    kind = it->get<std::string>();
  }
  if (kind == "attention")
    w.kind = sim::TaskKind::attention;
  else if (kind == "gemm")
    w.kind = sim::TaskKind::gemm;
  else if (kind == "copy")
    w.kind = sim::TaskKind::copy;
  else if (kind == "other")
    w.kind = sim::TaskKind::other;
  else
    return rd.err(cp + "/kind",
                  "unknown kind \"" + kind + "\" (known: attention, gemm, copy, other)");
  auto only = [&](const char* key, sim::TaskKind k) -> std::optional<Error> {
    if (cj.contains(key) && w.kind != k)
      return rd.err(cp + "/" + key,
                    std::string("applies to kind \"") + sim::task_kind_name(k) + "\" only");
    return std::nullopt;
  };
  for (const char* key : {"q_ranks", "kv_ranks", "heads", "partial"})
    if (auto e = only(key, sim::TaskKind::attention)) return e;
  if (auto e = only("bytes", sim::TaskKind::copy)) return e;
  for (const char* key : {"m", "n", "k", "count"})
    if (auto e = only(key, sim::TaskKind::gemm)) return e;
  auto ranks = [&](const char* key, std::vector<int>& out) -> std::optional<Error> {
    auto it = cj.find(key);
    if (it == cj.end()) return std::nullopt;
    if (!it->is_array()) return rd.err(cp + "/" + key, "expected an array of ranks");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& v = (*it)[i];
      if (!is_int(v) || v.get<int64_t>() < 0 || v.get<int64_t>() >= gpus)
        return rd.err(ptr_index(cp + "/" + key, i), "expected a rank in 0..gpus-1");
      out.push_back(v.get<int>());
    }
    return std::nullopt;
  };
  if (auto e = ranks("q_ranks", w.q_ranks)) return e;
  if (auto e = ranks("kv_ranks", w.kv_ranks)) return e;
  if (auto it = cj.find("heads"); it != cj.end()) {
    // A range past the plan's heads was accepted by emulated replay and validate (issue 18).
    const int64_t max_heads = heads > 0 ? heads : 4096;
    if (!it->is_array() || it->size() != 2 || !is_int((*it)[0]) || !is_int((*it)[1]) ||
        (*it)[0].get<int64_t>() < 0 || (*it)[1].get<int64_t>() <= (*it)[0].get<int64_t>() ||
        (*it)[1].get<int64_t>() > max_heads)
      return rd.err(cp + "/heads",
                    "expected [first, end) with 0 <= first < end <= " + std::to_string(max_heads) +
                        (heads > 0 ? " (the plan's heads)" : ""));
    w.head_begin = (*it)[0].get<int>();
    w.head_end = (*it)[1].get<int>();
  }
  if (auto it = cj.find("partial"); it != cj.end()) {
    if (!it->is_boolean()) return rd.err(cp + "/partial", "expected true or false");
    w.partial = it->get<bool>();
  }
  if (auto it = cj.find("bytes"); it != cj.end()) {
    if (!it->is_number() || !(it->get<double>() >= 0) || !(it->get<double>() <= kMaxBytes))
      return rd.err(cp + "/bytes", "expected a number in 0..2^50 (1 PiB)");
    w.bytes = it->get<double>();
  }
  for (auto [key, dst] : {std::pair<const char*, int64_t*>{"m", &w.m},
                          {"n", &w.n},
                          {"k", &w.k},
                          {"count", &w.count}}) {
    auto it = cj.find(key);
    if (it == cj.end()) continue;
    if (!is_int(*it) || it->get<int64_t>() < 1 || it->get<int64_t>() > (int64_t{1} << 40))
      return rd.err(cp + "/" + key, "expected an integer in 1..2^40");
    *dst = it->get<int64_t>();
  }
  return std::nullopt;
}

/// Reads a row-offset array ("row_ptr" / "range_ptr") of rows + 1 non-decreasing entries from 0
/// to `count` at `ptr`.
/// ", got 3.5" for a number, ", got string" for anything else: a wrong type reads as one.
static std::string got(const Json& v) {
  return ", got " + (v.is_number() ? v.dump() : std::string(v.type_name()));
}

std::optional<Error> parse_offsets(Reader& rd, const Json& a, const std::string& ptr, int64_t rows,
                                   bool per_head, size_t count, std::vector<int32_t>& out) {
  if (static_cast<int64_t>(a.size()) != rows + 1)
    return rd.err(ptr, "expected " + std::to_string(rows + 1) + " entries (" +
                           (per_head ? "heads x num_blocks" : "num_blocks") + " + 1), got " +
                           std::to_string(a.size()));
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Json& x = a[i];
    if (!x.is_number_integer() || x.get<int64_t>() < 0 ||
        x.get<int64_t>() > static_cast<int64_t>(count))
      return rd.err(ptr_index(ptr, i),
                    "expected an integer in 0.." + std::to_string(count) + got(x));
    const auto v = static_cast<int32_t>(x.get<int64_t>());
    if ((i == 0 && v != 0) || (i > 0 && v < out.back()))
      return rd.err(ptr_index(ptr, i),
                    i == 0 ? "expected 0 first" : "expected non-decreasing offsets");
    out.push_back(v);
  }
  if (static_cast<size_t>(out.back()) != count)
    return rd.err(ptr_index(ptr, a.size() - 1), "expected the count " + std::to_string(count));
  return std::nullopt;
}

/// Reads a layer's "mask" object (LayerMask) and checks its shape against the plan's header.
/// Two spellings of the same rows (policy/PLAN.md): the CSR lists ("row_ptr", "kv_blocks") or
/// their runs ("range_ptr", "kv_ranges": flat [begin, end) pairs, increasing and disjoint within
/// a row); either way the rows are expanded into LayerMask's CSR.
std::optional<Error> parse_mask(Reader& rd, const Json& mj, const std::string& mp, const Plan& p,
                                LayerMask& m) {
  if (auto ke =
          check_keys(rd, mj, mp, {"per_head", "row_ptr", "kv_blocks", "range_ptr", "kv_ranges"}))
    return *ke;
  std::optional<Error> e;
  if (auto* v = rd.member(mj, mp, "per_head", false, is_bool, "boolean", e))
    m.per_head = v->get<bool>();
  const bool ranges = mj.contains("range_ptr") || mj.contains("kv_ranges");
  if (ranges && (mj.contains("row_ptr") || mj.contains("kv_blocks")))
    return rd.err(mp, "give the rows once: row_ptr + kv_blocks, or range_ptr + kv_ranges");
  const Json* rp = rd.member(mj, mp, ranges ? "range_ptr" : "row_ptr", true, is_arr, "array", e);
  const Json* kb = rd.member(mj, mp, ranges ? "kv_ranges" : "kv_blocks", true, is_arr, "array", e);
  if (e) return e;
  const int64_t rows = static_cast<int64_t>(p.num_blocks) * (m.per_head ? p.heads : 1);
  if (m.per_head && p.heads < 1) return rd.err(mp + "/per_head", "per-head masks need heads >= 1");
  auto block_id = [&](size_t i, int64_t hi) -> std::optional<int32_t> {
    const Json& x = (*kb)[i];
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > hi)
      return std::nullopt;
    return static_cast<int32_t>(x.get<int64_t>());
  };
  if (!ranges) {
    if (auto oe = parse_offsets(rd, *rp, mp + "/row_ptr", rows, m.per_head, kb->size(), m.row_ptr))
      return oe;
    m.kv_blocks.reserve(kb->size());
    for (size_t r = 0; r + 1 < m.row_ptr.size(); ++r)
      for (int32_t i = m.row_ptr[r]; i < m.row_ptr[r + 1]; ++i) {
        const auto v = block_id(static_cast<size_t>(i), p.num_blocks - 1);
        if (!v)
          return rd.err(ptr_index(mp + "/kv_blocks", static_cast<size_t>(i)),
                        "expected a block id in 0.." + std::to_string(p.num_blocks - 1) +
                            got((*kb)[static_cast<size_t>(i)]));
        if (i > m.row_ptr[r] && *v <= m.kv_blocks.back())
          return rd.err(ptr_index(mp + "/kv_blocks", static_cast<size_t>(i)),
                        "expected strictly increasing block ids within a row");
        m.kv_blocks.push_back(*v);
      }
    return std::nullopt;
  }
  if (kb->size() % 2 != 0)
    return rd.err(mp + "/kv_ranges", "expected [begin, end) pairs (an even count), got " +
                                         std::to_string(kb->size()) + " entries");
  std::vector<int32_t> range_ptr;
  if (auto oe =
          parse_offsets(rd, *rp, mp + "/range_ptr", rows, m.per_head, kb->size() / 2, range_ptr))
    return oe;
  m.row_ptr.reserve(range_ptr.size());
  m.row_ptr.push_back(0);
  for (size_t r = 0; r + 1 < range_ptr.size(); ++r) {
    int32_t prev_end = -1;
    for (int32_t j = range_ptr[r]; j < range_ptr[r + 1]; ++j) {
      const size_t ib = 2 * static_cast<size_t>(j), ie = ib + 1;
      const auto b = block_id(ib, p.num_blocks - 1);
      if (!b)
        return rd.err(
            ptr_index(mp + "/kv_ranges", ib),
            "expected a block id in 0.." + std::to_string(p.num_blocks - 1) + got((*kb)[ib]));
      const auto en = block_id(ie, p.num_blocks);
      if (!en || *en <= *b)
        return rd.err(ptr_index(mp + "/kv_ranges", ie),
                      "expected a range end in " + std::to_string(*b + 1) + ".." +
                          std::to_string(p.num_blocks) + " (ranges are [begin, end))" +
                          got((*kb)[ie]));
      if (*b < prev_end)
        return rd.err(ptr_index(mp + "/kv_ranges", ib),
                      "expected increasing, disjoint ranges within a row");
      for (int32_t k = *b; k < *en; ++k) m.kv_blocks.push_back(k);
      prev_end = *en;
    }
    m.row_ptr.push_back(static_cast<int32_t>(m.kv_blocks.size()));
  }
  return std::nullopt;
}

Result<Plan> parse_plan(const std::string& text, const std::string& source_name) {
  Reader rd(source_name);
  auto parsed = parse_json<Json>(text, source_name);
  if (!parsed) return parsed.error();
  const Json& root = *parsed;
  if (!root.is_object()) return rd.err("", "expected a JSON object at the top level");
  if (auto ke = check_keys(
          rd, root, "",
          {"schema_version", "model", "pattern", "gpus", "block_tokens", "heads", "kv_heads",
           "head_dim", "dtype_bytes", "num_blocks", "kv_block_bytes", "policy", "compute_source",
           "topology", "rank_gpus", "block_owner", "block_bytes", "text_blocks", "layers"}))
    return *ke;

  std::optional<Error> e;
  Plan p;
  // Integer fields are range-checked where they are read (int_member): a value past 2^31 was
  // wrapped modulo 2^32 into a valid-looking one (4294967298 GPUs read as 2).
  if (int_member(rd, root, "", "schema_version", true, 1, 1 << 30, p.schema_version, e) &&
      p.schema_version != 1 && p.schema_version != 2)
    return rd.err("/schema_version", "unsupported schema_version " +
                                         std::to_string(p.schema_version) +
                                         " (this build reads 1 and 2)");
  if (e) return *e;
  // Schema 1 predates grouped-query attention and block masks: their keys were read silently as
  // schema 2.
  if (p.schema_version == 1 && root.contains("kv_heads"))
    return rd.err("/kv_heads",
                  "a schema 2 key, but the plan says schema_version 1; write schema_version 2 "
                  "(policy/PLAN.md)");
  if (auto* v = rd.member(root, "", "model", false, is_str, "string", e))
    p.model = v->get<std::string>();
  if (auto* v = rd.member(root, "", "pattern", false, is_str, "string", e))
    p.pattern = v->get<std::string>();
  if (auto* v = rd.member(root, "", "compute_source", false, is_str, "string", e))
    p.compute_source = v->get<std::string>();
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  int_member(rd, root, "", "gpus", true, 1, 4096, p.gpus, e);
  int_member(rd, root, "", "block_tokens", false, 0, kIntMax, p.block_tokens, e);
  // Heads: at most 4096, as a compute task's head range (below); head_dim at most 65536. With
  // these bounds block_tokens x heads x head_dim x dtype_bytes stays below 2^63.
  int_member(rd, root, "", "heads", false, 0, 4096, p.heads, e);
  int_member(rd, root, "", "kv_heads", false, 1, 4096, p.kv_heads, e);  // absent: = heads
  int_member(rd, root, "", "head_dim", false, 0, 65536, p.head_dim, e);
  int_member(rd, root, "", "dtype_bytes", false, 1, 8, p.dtype_bytes, e);
  int_member(rd, root, "", "num_blocks", true, 0, kIntMax, p.num_blocks, e);
  if (auto* v = rd.member(root, "", "kv_block_bytes", true, is_num, "number", e))
    p.kv_block_bytes = v->get<double>();
  if (e) return *e;
  if (!(p.kv_block_bytes >= 0) || !(p.kv_block_bytes <= kMaxBytes))
    return rd.err("/kv_block_bytes",
                  "expected a number in 0..2^50 (1 PiB), got " + num_text(p.kv_block_bytes));
  if (p.num_blocks > 0 && p.kv_block_bytes == 0)
    return rd.err("/kv_block_bytes",
                  "expected > 0 when num_blocks > 0 (bytes of K and V of one block)");
  if (p.kv_heads > 0 && (p.heads == 0 || p.heads % p.kv_heads != 0))
    return rd.err("/kv_heads", "expected a divisor of heads (" + std::to_string(p.heads) +
                                   "), got " + std::to_string(p.kv_heads));

  if (auto* pol = rd.member(root, "", "policy", true, is_obj, "object", e)) {
    if (auto ke = check_keys(rd, *pol, "/policy", {"placement", "scheme", "runtime", "params"}))
      return *ke;
    if (auto* v = rd.member(*pol, "/policy", "placement", true, is_str, "string", e))
      p.policy.placement = v->get<std::string>();
    if (auto* v = rd.member(*pol, "/policy", "scheme", true, is_str, "string", e))
      p.policy.scheme = v->get<std::string>();
    if (auto* v = rd.member(*pol, "/policy", "runtime", true, is_str, "string", e))
      p.policy.runtime = v->get<std::string>();
    // The names are printed as the policy's name: each must be a registered one.
    const std::pair<const char*, std::vector<PolicyInfo>> parts[] = {
        {"placement", placements()}, {"scheme", schemes()}, {"runtime", runtimes()}};
    for (const auto& [part, known] : parts) {
      const std::string& name = part[0] == 'p'   ? p.policy.placement
                                : part[0] == 's' ? p.policy.scheme
                                                 : p.policy.runtime;
      if (name.empty() && e) continue;  // missing: reported below
      // "custom": a plan written by hand or by another tool (replay/tools/make_test_plans.py),
      // not by a registered scheme (policy/PLAN.md).
      if (part[0] == 's' && name == "custom") continue;
      if (std::any_of(known.begin(), known.end(),
                      [&](const PolicyInfo& i) { return i.name == name; }))
        continue;
      std::string list;
      for (const auto& i : known) list += (list.empty() ? "" : ", ") + i.name;
      return rd.err(std::string("/policy/") + part,
                    "unknown " + std::string(part) + " '" + name + "' (known: " + list + ")");
    }
    if (auto* v = rd.member(*pol, "/policy", "params", false, is_obj, "object", e)) {
      for (auto it = v->begin(); it != v->end(); ++it) {
        if (!it.value().is_number())
          return rd.err("/policy/params/" + it.key(), "expected a number");
        const double x = it.value().get<double>();
        if (auto bad = check_study_param(it.key(), x); !bad.empty())
          return rd.err("/policy/params/" + it.key(), bad);
        p.policy.params[it.key()] = x;
      }
    }
  }
  if (e) return *e;

  if (auto* v = rd.member(
          root, "", "topology", false, [](const Json& j) { return j.is_object() || j.is_null(); },
          "object or null", e)) {
    if (v->is_object()) p.topology_json = v->dump(2);
  }
  if (e) return *e;
  // The embedded topology must load (errors re-addressed into this file, /topology/...) and hold
  // the plan's ranks: a plan may use the first P GPUs of a larger machine.
  int topology_gpus = 4096;  // without a topology: GPU indices as the plan's integer bound
  if (!p.topology_json.empty()) {
    const std::string marker = "\x1fplan-topology";
    auto topo = topology::Topology::from_json_text(p.topology_json, marker);
    if (!topo) return rebase_error(topo.error(), marker, source_name, "/topology");
    if (topo->num_gpus() < p.gpus)
      return rd.err("/gpus", std::to_string(p.gpus) + " GPUs, but the embedded topology '" +
                                 topo->name() + "' has only " + std::to_string(topo->num_gpus()));
    topology_gpus = topo->num_gpus();
  }
  // rank_gpus: one distinct GPU of the topology per rank (absent: rank r is gpu r).
  if (auto* v = rd.member(root, "", "rank_gpus", false, is_arr, "array", e)) {
    if (static_cast<int>(v->size()) != p.gpus)
      return rd.err("/rank_gpus", "expected " + std::to_string(p.gpus) + " entries (gpus), got " +
                                      std::to_string(v->size()));
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& g = (*v)[i];
      if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() >= topology_gpus)
        return rd.err(ptr_index("/rank_gpus", i),
                      "expected a GPU index in 0.." + std::to_string(topology_gpus - 1) +
                          (p.topology_json.empty() ? "" : " (the embedded topology's GPUs)"));
      const int gi = static_cast<int>(g.get<int64_t>());
      if (std::find(p.rank_gpus.begin(), p.rank_gpus.end(), gi) != p.rank_gpus.end())
        return rd.err(ptr_index("/rank_gpus", i),
                      "gpu" + std::to_string(gi) + " is listed twice (one rank per GPU)");
      p.rank_gpus.push_back(gi);
    }
  }
  if (e) return *e;

  if (auto* v = rd.member(root, "", "block_owner", true, is_arr, "array", e)) {
    if (static_cast<int>(v->size()) != p.num_blocks)
      return rd.err("/block_owner", "expected " + std::to_string(p.num_blocks) +
                                        " entries (num_blocks), got " + std::to_string(v->size()));
    p.block_owner.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& o = (*v)[i];
      if (!is_int(o) || o.get<long>() < 0 || o.get<long>() >= p.gpus)
        return rd.err(ptr_index("/block_owner", i),
                      "expected a GPU rank in 0.." + std::to_string(p.gpus - 1));
      p.block_owner.push_back(o.get<int>());
    }
  }
  if (e) return *e;

  if (auto* v = rd.member(root, "", "block_bytes", false, is_arr, "array", e)) {
    if (!v->empty() && static_cast<int>(v->size()) != p.num_blocks)
      return rd.err("/block_bytes", "expected " + std::to_string(p.num_blocks) +
                                        " entries (num_blocks) or none, got " +
                                        std::to_string(v->size()));
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& b = (*v)[i];
      if (!b.is_number() || !(b.get<double>() >= 0) || !(b.get<double>() <= kMaxBytes))
        return rd.err(ptr_index("/block_bytes", i), "expected a number in 0..2^50 (1 PiB)");
      p.block_bytes.push_back(b.get<double>());
    }
  }
  if (e) return *e;

  if (auto* v = rd.member(root, "", "text_blocks", false, is_arr, "array", e)) {
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& b = (*v)[i];
      if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() >= p.num_blocks ||
          (!p.text_blocks.empty() && b.get<int64_t>() <= p.text_blocks.back()))
        return rd.err(
            ptr_index("/text_blocks", i),
            "expected strictly increasing block ids in 0.." + std::to_string(p.num_blocks - 1));
      p.text_blocks.push_back(static_cast<int>(b.get<int64_t>()));
    }
  }
  if (e) return *e;
  const Json* layers = rd.member(root, "", "layers", true, is_arr, "array", e);
  if (e) return *e;
  // How endpoint errors state the rule: "N < gpus", or the rank GPUs.
  std::string gpu_rule = "N < gpus";
  if (!p.rank_gpus.empty()) {
    gpu_rule = "N in rank_gpus:";
    for (int g : p.rank_gpus) gpu_rule += " " + std::to_string(g);
  }
  for (size_t li = 0; li < layers->size(); ++li) {
    const std::string lp = ptr_index("/layers", li);
    const Json& lj = (*layers)[li];
    if (!lj.is_object()) return rd.err(lp, "expected an object");
    if (auto ke =
            check_keys(rd, lj, lp, {"step", "layer", "repeat", "transfers", "compute", "mask"}))
      return *ke;
    LayerPlan L;
    int_member(rd, lj, lp, "step", true, 0, kIntMax, L.step, e);
    int_member(rd, lj, lp, "layer", true, 0, kIntMax, L.layer, e);
    int_member(rd, lj, lp, "repeat", false, 1, kIntMax, L.repeat, e);
    if (e) return *e;
    if (p.schema_version == 1 && lj.contains("mask"))
      return rd.err(lp + "/mask",
                    "a schema 2 key, but the plan says schema_version 1; write schema_version 2 "
                    "(policy/PLAN.md)");
    if (auto* mj = rd.member(lj, lp, "mask", false, is_obj, "object", e)) {
      if (auto me = parse_mask(rd, *mj, lp + "/mask", p, L.mask)) return *me;
    }
    if (e) return *e;
    std::set<std::string> ids;
    auto check_after = [&](const Json& a, const std::string& ap,
                           std::vector<std::string>& out) -> std::optional<Error> {
      if (!a.is_array()) return rd.err(ap, "expected an array of activity ids");
      for (size_t k = 0; k < a.size(); ++k) {
        if (!a[k].is_string()) return rd.err(ptr_index(ap, k), "expected a string");
        std::string id = a[k].get<std::string>();
        const auto first = std::find(out.begin(), out.end(), id);
        if (first != out.end())
          return rd.err(ptr_index(ap, k), "duplicate id \"" + id + "\" (also at index " +
                                              std::to_string(first - out.begin()) + ")");
        out.push_back(std::move(id));
      }
      return std::nullopt;
    };
    if (auto* tr = rd.member(lj, lp, "transfers", false, is_arr, "array", e)) {
      for (size_t ti = 0; ti < tr->size(); ++ti) {
        const std::string tp = ptr_index(lp + "/transfers", ti);
        const Json& tj = (*tr)[ti];
        if (!tj.is_object()) return rd.err(tp, "expected an object");
        if (auto ke = check_keys(
                rd, tj, tp,
                {"id", "src", "dst", "bytes", "after", "engine", "stream", "route", "rate_cap_Bps",
                 "chunk_bytes", "staging_buffers", "comm_sms", "layer", "kv_blocks", "driver",
                 "staging", "collective", "released_by_last_wave"}))
          return *ke;
        sim::Transfer t;
        if (auto* v = rd.member(tj, tp, "id", true, is_str, "string", e))
          t.id = v->get<std::string>();
        if (auto* v = rd.member(tj, tp, "src", true, is_str, "string", e))
          t.src = v->get<std::string>();
        if (auto* v = rd.member(tj, tp, "dst", true, is_str, "string", e))
          t.dst = v->get<std::string>();
        if (auto* v = rd.member(tj, tp, "bytes", true, is_num, "number", e))
          t.bytes = v->get<double>();
        if (auto* v = rd.member(tj, tp, "after", false, is_arr, "array", e)) {
          if (auto ae = check_after(*v, tp + "/after", t.after)) return *ae;
        }
        if (auto* v = rd.member(tj, tp, "released_by_last_wave", false, is_arr, "array", e)) {
          if (auto ae = check_after(*v, tp + "/released_by_last_wave", t.released_by_last_wave))
            return *ae;
          for (size_t k = 0; k < t.released_by_last_wave.size(); ++k)
            if (std::find(t.after.begin(), t.after.end(), t.released_by_last_wave[k]) ==
                t.after.end())
              return rd.err(
                  ptr_index(tp + "/released_by_last_wave", k),
                  "\"" + t.released_by_last_wave[k] + "\" is not in this transfer's after");
        }
        if (auto* v = rd.member(tj, tp, "engine", false, is_str, "string", e)) {
          const auto s = v->get<std::string>();
          if (s == "ce")
            t.engine = sim::Engine::ce;
          else if (s == "sm")
            t.engine = sim::Engine::sm;
          else if (s == "host")
            t.engine = sim::Engine::host;
          else
            return rd.err(tp + "/engine", "expected \"ce\", \"sm\" or \"host\", got \"" + s + "\"");
        }
        if (auto* v = rd.member(tj, tp, "stream", false, is_str, "string", e))
          t.stream = v->get<std::string>();
        if (auto* v = rd.member(tj, tp, "route", false, is_str, "string", e)) {
          const auto s = v->get<std::string>();
          if (s == "automatic")
            t.route = topology::RouteMode::automatic;
          else if (s == "p2p")
            t.route = topology::RouteMode::p2p;
          else if (s == "host_staged")
            t.route = topology::RouteMode::host_staged;
          else
            return rd.err(tp + "/route",
                          "expected \"automatic\", \"p2p\" or \"host_staged\", got \"" + s + "\"");
        }
        if (auto* v = rd.member(tj, tp, "driver", false, is_str, "string", e)) {
          const auto s = v->get<std::string>();
          if (s == "src")
            t.driver = sim::Driver::src;
          else if (s == "dst")
            t.driver = sim::Driver::dst;
          else
            return rd.err(tp + "/driver", "expected \"src\" or \"dst\", got \"" + s + "\"");
        }
        if (auto* v = rd.member(tj, tp, "staging", false, is_str, "string", e)) {
          const auto s = v->get<std::string>();
          if (s == "pipelined")
            t.staging = sim::Staging::pipelined;
          else if (s == "driver")
            t.staging = sim::Staging::driver;
          else
            return rd.err(tp + "/staging",
                          "expected \"pipelined\" or \"driver\", got \"" + s + "\"");
        }
        if (auto* v = rd.member(tj, tp, "rate_cap_Bps", false, is_num, "number", e))
          t.rate_cap_Bps = v->get<double>();
        if (auto* v = rd.member(tj, tp, "chunk_bytes", false, is_num, "number", e))
          t.chunk_bytes = v->get<double>();
        // Integers may be written in exponent form (1e9 is one); the range is checked below.
        if (auto* v = rd.member(tj, tp, "staging_buffers", false, is_whole, "integer", e)) {
          if (v->get<double>() > 1024)
            return rd.err(
                tp + "/staging_buffers",
                "expected 0 (the default) .. 1024 buffers, got " + num_text(v->get<double>()));
          t.staging_buffers = static_cast<int>(v->get<double>());
        }
        if (auto* v = rd.member(tj, tp, "comm_sms", false, is_whole, "integer", e)) {
          if (v->get<double>() > 1024)
            return rd.err(tp + "/comm_sms",
                          "expected 0 .. 1024 SMs, got " + num_text(v->get<double>()));
          t.comm_sms = static_cast<int>(v->get<double>());
        }
        if (auto it = tj.find("collective"); it != tj.end()) {
          auto tag = sim::parse_collective_tag_json(it->dump(), source_name, tp + "/collective");
          if (!tag) return tag.error();
          t.collective = *tag;
        }
        t.layer = L.layer;
        int_member(rd, tj, tp, "layer", false, -1, kIntMax, t.layer, e);  // -1: unset (sim.hpp)
        if (auto* v = rd.member(tj, tp, "kv_blocks", false, is_arr, "array", e)) {
          std::set<int32_t> listed;
          for (size_t k = 0; k < v->size(); ++k) {
            const Json& b = (*v)[k];
            if (!is_int(b) || b.get<long>() < 0 || b.get<long>() >= p.num_blocks)
              return rd.err(ptr_index(tp + "/kv_blocks", k),
                            "expected a block id in 0.." + std::to_string(p.num_blocks - 1));
            if (!listed.insert(b.get<int32_t>()).second)
              return rd.err(ptr_index(tp + "/kv_blocks", k),
                            "block " + std::to_string(b.get<long>()) +
                                " listed twice (each block's K and V is sent once)");
            t.kv_blocks.push_back(b.get<int32_t>());
          }
        }
        if (e) return *e;
        if (t.id.empty()) return rd.err(tp + "/id", "empty id");
        if (!ids.insert(t.id).second)
          return rd.err(tp + "/id", "duplicate activity id \"" + t.id + "\"");
        if (!valid_endpoint(t.src, p))
          return rd.err(tp + "/src",
                        "expected \"gpuN\" (" + gpu_rule + ") or \"hostK\", got \"" + t.src + "\"");
        if (!valid_endpoint(t.dst, p))
          return rd.err(tp + "/dst",
                        "expected \"gpuN\" (" + gpu_rule + ") or \"hostK\", got \"" + t.dst + "\"");
        if (t.src == t.dst)
          return rd.err(tp + "/dst", "source and destination are both \"" + t.src + "\"");
        if (!(t.bytes >= 0) || !(t.bytes <= kMaxBytes))
          return rd.err(tp + "/bytes",
                        "expected a number in 0..2^50 (1 PiB), got " + num_text(t.bytes));
        if (t.rate_cap_Bps < 0) return rd.err(tp + "/rate_cap_Bps", "expected >= 0");
        if (t.chunk_bytes < 0) return rd.err(tp + "/chunk_bytes", "expected >= 0");
        if (t.staging_buffers < 0) return rd.err(tp + "/staging_buffers", "expected >= 0");
        if (t.comm_sms < 0) return rd.err(tp + "/comm_sms", "expected >= 0");
        if (t.comm_sms > 0 && t.engine != sim::Engine::sm)
          return rd.err(tp + "/comm_sms",
                        "applies to engine \"sm\" only (this transfer runs on the copy engines)");
        L.work.transfers.push_back(std::move(t));
      }
    }
    if (e) return *e;
    if (auto* cs = rd.member(lj, lp, "compute", false, is_arr, "array", e)) {
      for (size_t ci = 0; ci < cs->size(); ++ci) {
        const std::string cp = ptr_index(lp + "/compute", ci);
        const Json& cj = (*cs)[ci];
        if (!cj.is_object()) return rd.err(cp, "expected an object");
        if (auto ke = check_keys(rd, cj, cp,
                                 {"id", "gpu", "duration_s", "flops", "after", "stream", "layer",
                                  "kind", "q_ranks", "kv_ranks", "heads", "partial", "bytes", "m",
                                  "n", "k", "count", "last_wave_fraction"}))
          return *ke;
        // Schema 1 has no compute kinds (PLAN.md: its tasks are all attention with no
        // coverage): a schema-2 key in a schema-1 plan was read silently as schema 2.
        if (p.schema_version == 1)
          for (const char* key :
               {"kind", "q_ranks", "kv_ranks", "heads", "partial", "bytes", "m", "n", "k", "count"})
            if (cj.contains(key))
              return rd.err(cp + "/" + key,
                            "a schema 2 key, but the plan says schema_version 1; write "
                            "schema_version 2 (policy/PLAN.md, compute kinds)");
        sim::ComputeTask c;
        if (auto* v = rd.member(cj, cp, "id", true, is_str, "string", e))
          c.id = v->get<std::string>();
        if (auto* v = rd.member(cj, cp, "gpu", true, is_str, "string", e))
          c.gpu = v->get<std::string>();
        if (auto* v = rd.member(cj, cp, "duration_s", false, is_num, "number", e))
          c.duration_s = v->get<double>();
        if (auto* v = rd.member(cj, cp, "flops", false, is_num, "number", e))
          c.flops = v->get<double>();
        if (auto* v = rd.member(cj, cp, "after", false, is_arr, "array", e)) {
          if (auto ae = check_after(*v, cp + "/after", c.after)) return *ae;
        }
        if (auto* v = rd.member(cj, cp, "stream", false, is_str, "string", e))
          c.stream = v->get<std::string>();
        if (auto* v = rd.member(cj, cp, "last_wave_fraction", false, is_num, "number", e)) {
          c.last_wave_fraction = v->get<double>();
          if (!(c.last_wave_fraction >= 0 && c.last_wave_fraction <= 1))
            return rd.err(cp + "/last_wave_fraction",
                          "expected a fraction in 0..1, got " + num_text(c.last_wave_fraction));
        }
        c.layer = L.layer;
        int_member(rd, cj, cp, "layer", false, -1, kIntMax, c.layer, e);  // -1: unset (sim.hpp)
        if (e) return *e;
        if (c.id.empty()) return rd.err(cp + "/id", "empty id");
        if (!ids.insert(c.id).second)
          return rd.err(cp + "/id", "duplicate activity id \"" + c.id + "\"");
        if (c.gpu.rfind("gpu", 0) != 0 || !valid_endpoint(c.gpu, p))
          return rd.err(cp + "/gpu",
                        "expected \"gpuN\" with " + gpu_rule + ", got \"" + c.gpu + "\"");
        if (cj.contains("duration_s") && cj.contains("flops"))  // as in workload JSON
          return rd.err(cp, "give 'duration_s' or 'flops', not both");
        if (!(c.duration_s >= 0) || !(c.duration_s <= kMaxDurationS))
          return rd.err(cp + "/duration_s",
                        "expected seconds in 0..1e6, got " + num_text(c.duration_s));
        if (!(c.flops >= 0) || !(c.flops <= kMaxFlops))
          return rd.err(cp + "/flops", "expected FLOP in 0..1e24, got " + num_text(c.flops));
        if (auto ke = parse_task_compute(rd, cj, cp, p.gpus, p.heads, c.what)) return *ke;
        L.work.compute.push_back(std::move(c));
      }
    }
    if (e) return *e;
    // Dependencies must name activities of the same layer plan.
    for (size_t ti = 0; ti < L.work.transfers.size(); ++ti)
      for (size_t k = 0; k < L.work.transfers[ti].after.size(); ++k)
        if (!ids.count(L.work.transfers[ti].after[k]))
          return rd.err(ptr_index(ptr_index(lp + "/transfers", ti) + "/after", k),
                        "unknown activity id \"" + L.work.transfers[ti].after[k] + "\"");
    for (size_t ci = 0; ci < L.work.compute.size(); ++ci)
      for (size_t k = 0; k < L.work.compute[ci].after.size(); ++k)
        if (!ids.count(L.work.compute[ci].after[k]))
          return rd.err(ptr_index(ptr_index(lp + "/compute", ci) + "/after", k),
                        "unknown activity id \"" + L.work.compute[ci].after[k] + "\"");
    p.layers.push_back(std::move(L));
  }
  if (p.layers.empty()) return rd.err("/layers", "no layer plans (expected at least one entry)");
  // Layer plans are distinct (step, layer) pairs (policy/PLAN.md).
  {
    std::map<std::pair<int, int>, size_t> first;
    for (size_t li = 0; li < p.layers.size(); ++li) {
      auto [it, fresh] = first.try_emplace({p.layers[li].step, p.layers[li].layer}, li);
      if (!fresh)
        return rd.err(ptr_index("/layers", li),
                      "(step " + std::to_string(p.layers[li].step) + ", layer " +
                          std::to_string(p.layers[li].layer) + ") repeats " +
                          ptr_index("/layers", it->second));
    }
  }
  // Every rank 0..gpus-1 takes part: owns a block or is an endpoint of a transfer or compute
  // task. A larger `gpus` than the plan uses would replay on idle GPUs and misreport the degree.
  {
    std::vector<char> used(static_cast<size_t>(p.gpus), 0);
    for (int o : p.block_owner) used[static_cast<size_t>(o)] = 1;
    auto mark = [&](const std::string& ep) {
      if (ep.rfind("gpu", 0) == 0)
        used[static_cast<size_t>(p.rank_of_gpu(std::stol(ep.substr(3))))] = 1;
    };
    for (const auto& L : p.layers) {
      for (const auto& t : L.work.transfers) {
        mark(t.src);
        mark(t.dst);
      }
      for (const auto& c : L.work.compute) mark(c.gpu);
    }
    const int n_used = static_cast<int>(std::count(used.begin(), used.end(), 1));
    if (n_used != p.gpus) {
      const auto idle = std::find(used.begin(), used.end(), 0) - used.begin();
      const long idle_gpu = p.rank_gpus.empty() ? idle : p.rank_gpus[static_cast<size_t>(idle)];
      return rd.err("/gpus", std::to_string(p.gpus) + " GPUs, but the plan uses " +
                                 std::to_string(n_used) + " (gpu" + std::to_string(idle_gpu) +
                                 " owns no block and is no endpoint of any transfer or compute "
                                 "task)");
    }
  }
  if (auto ke = check_kv_payloads(p, rd)) return *ke;
  return p;
}

Result<Plan> load_plan(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_plan(*text, path);
}

/// A layer's mask as JSON: the runs form ("range_ptr", "kv_ranges") when it takes fewer numbers
/// than the CSR lists, else the lists (ties: the lists). Deterministic: same mask, same text.
Json mask_json(const LayerMask& m) {
  std::vector<int32_t> range_ptr{0}, kv_ranges;
  for (size_t r = 0; r + 1 < m.row_ptr.size(); ++r) {
    for (int32_t i = m.row_ptr[r]; i < m.row_ptr[r + 1]; ++i) {
      const int32_t b = m.kv_blocks[static_cast<size_t>(i)];
      if (i > m.row_ptr[r] && b == kv_ranges.back())
        ++kv_ranges.back();
      else
        kv_ranges.insert(kv_ranges.end(), {b, b + 1});
    }
    range_ptr.push_back(static_cast<int32_t>(kv_ranges.size() / 2));
  }
  Json mj = Json::object();
  mj["per_head"] = m.per_head;
  if (kv_ranges.size() < m.kv_blocks.size()) {
    mj["range_ptr"] = std::move(range_ptr);
    mj["kv_ranges"] = std::move(kv_ranges);
  } else {
    mj["row_ptr"] = m.row_ptr;
    mj["kv_blocks"] = m.kv_blocks;
  }
  return mj;
}

std::string to_json(const Plan& plan) {
  Json root = Json::object();
  // Always 2: the tasks below carry their kind (a schema-1 plan read and written again would
  // otherwise be refused on the next load).
  root["schema_version"] = 2;
  root["model"] = plan.model;
  root["pattern"] = plan.pattern;
  root["gpus"] = plan.gpus;
  if (!plan.rank_gpus.empty()) root["rank_gpus"] = plan.rank_gpus;
  root["block_tokens"] = plan.block_tokens;
  root["heads"] = plan.heads;
  if (plan.kv_heads > 0) root["kv_heads"] = plan.kv_heads;
  root["head_dim"] = plan.head_dim;
  root["dtype_bytes"] = plan.dtype_bytes;
  root["num_blocks"] = plan.num_blocks;
  root["kv_block_bytes"] = plan.kv_block_bytes;
  Json pol = Json::object();
  pol["placement"] = plan.policy.placement;
  pol["scheme"] = plan.policy.scheme;
  pol["runtime"] = plan.policy.runtime;
  Json params = Json::object();
  for (const auto& [k, v] : plan.policy.params) params[k] = v;  // std::map: sorted keys
  pol["params"] = std::move(params);
  root["policy"] = std::move(pol);
  if (!plan.compute_source.empty()) root["compute_source"] = plan.compute_source;
  if (plan.topology_json.empty()) {
    root["topology"] = nullptr;
  } else {
    try {
      root["topology"] = Json::parse(plan.topology_json);
    } catch (const Json::parse_error&) {
      root["topology"] = nullptr;  // not JSON: callers pass Topology::to_json(), so unreachable
    }
  }
  root["block_owner"] = plan.block_owner;
  if (!plan.block_bytes.empty()) root["block_bytes"] = plan.block_bytes;
  if (!plan.text_blocks.empty()) root["text_blocks"] = plan.text_blocks;
  Json layers = Json::array();
  for (const LayerPlan& L : plan.layers) {
    Json lj = Json::object();
    lj["step"] = L.step;
    lj["layer"] = L.layer;
    lj["repeat"] = L.repeat;
    Json trs = Json::array();
    for (const sim::Transfer& t : L.work.transfers) {
      Json tj = Json::object();
      tj["id"] = t.id;
      tj["src"] = t.src;
      tj["dst"] = t.dst;
      tj["bytes"] = t.bytes;
      tj["after"] = t.after;
      tj["engine"] = engine_name(t.engine);
      tj["stream"] = t.stream;
      tj["route"] = route_name(t.route);
      if (t.driver != sim::Driver::automatic)
        tj["driver"] = t.driver == sim::Driver::src ? "src" : "dst";
      if (t.staging == sim::Staging::driver) tj["staging"] = "driver";
      if (t.rate_cap_Bps != 0) tj["rate_cap_Bps"] = t.rate_cap_Bps;
      if (t.chunk_bytes != 0) tj["chunk_bytes"] = t.chunk_bytes;
      if (t.staging_buffers != 0) tj["staging_buffers"] = t.staging_buffers;
      if (t.comm_sms != 0) tj["comm_sms"] = t.comm_sms;
      if (t.layer != L.layer) tj["layer"] = t.layer;
      tj["kv_blocks"] = t.kv_blocks;
      if (!t.released_by_last_wave.empty()) tj["released_by_last_wave"] = t.released_by_last_wave;
      if (t.collective.set) tj["collective"] = Json::parse(sim::collective_tag_json(t.collective));
      trs.push_back(std::move(tj));
    }
    lj["transfers"] = std::move(trs);
    Json cs = Json::array();
    for (const sim::ComputeTask& c : L.work.compute) {
      Json cj = Json::object();
      cj["id"] = c.id;
      cj["gpu"] = c.gpu;
      cj["duration_s"] = c.duration_s;
      if (c.flops != 0) cj["flops"] = c.flops;
      cj["after"] = c.after;
      cj["stream"] = c.stream;
      if (c.layer != L.layer) cj["layer"] = c.layer;
      if (c.last_wave_fraction != 0) cj["last_wave_fraction"] = c.last_wave_fraction;
      const sim::TaskCompute& w = c.what;
      cj["kind"] = sim::task_kind_name(w.kind);
      if (w.kind == sim::TaskKind::attention) {
        if (!w.q_ranks.empty()) cj["q_ranks"] = w.q_ranks;
        if (!w.kv_ranks.empty()) cj["kv_ranks"] = w.kv_ranks;
        if (w.head_end > 0) cj["heads"] = {w.head_begin, w.head_end};
        cj["partial"] = w.partial;
      } else if (w.kind == sim::TaskKind::copy) {
        cj["bytes"] = w.bytes;
      } else if (w.kind == sim::TaskKind::gemm) {
        cj["m"] = w.m;
        cj["n"] = w.n;
        cj["k"] = w.k;
        cj["count"] = w.count;
      }
      cs.push_back(std::move(cj));
    }
    lj["compute"] = std::move(cs);
    if (!L.mask.empty()) {
      lj["mask"] = mask_json(L.mask);
    }
    layers.push_back(std::move(lj));
  }
  root["layers"] = std::move(layers);
  return root.dump() + "\n";
}

}  // namespace sparsp::policy
