// Policy names and parameters: parse_policy ("PLACEMENT/SCHEME/RUNTIME[:k=v,...]") and the
// checks of a PolicySpec on its own and against a group (include/sparsp/policy.hpp).
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "scheme_parts.hpp"
#include "sparsp/policy.hpp"

namespace sparsp::policy {

namespace {
bool known(const std::vector<PolicyInfo>& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(), [&](const PolicyInfo& p) { return p.name == name; });
}
std::string names(const std::vector<PolicyInfo>& list) {
  std::string s;
  for (const auto& p : list) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}
const char* const kKnownParams[] = {"skip_empty",
                                    "ulysses_degree",
                                    "host_staged",
                                    "comm_sms",
                                    "chunk_bytes",
                                    "tolerance",
                                    "locality",
                                    "ce_only",
                                    "split_text",
                                    "staging_buffers",
                                    "merge_bytes_per_element",
                                    "high_priority_comm",
                                    "seq_a2a_copies",
                                    "out_cast_bytes_per_element"};
// Boolean parameters: 0 or 1 (2 or 0.5 is a typo, not "on").
const char* const kBooleanParams[] = {"skip_empty", "host_staged",        "ce_only",
                                      "split_text", "high_priority_comm", "seq_a2a_copies"};
// Which part reads each parameter that not every policy reads (the others, host_staged,
// chunk_bytes and staging_buffers, apply to the host-staged transfers of any policy). Kept in
// step with the readers: scheme_ring.cpp (skip_empty; merge_bytes_per_element, also read by
// scheme_usp.cpp; seq_a2a_copies; out_cast_bytes_per_element, also read by scheme_usp.cpp and
// scheme_ulysses.cpp), scheme_demand_*.cpp (split_text),
// scheme_usp.cpp (ulysses_degree), placement_balanced.cpp and placement_dependency_aware.cpp
// (tolerance, locality), runtime.cpp (comm_sms and ce_only: SM-driven copies only;
// high_priority_comm: sm_overlap's comm kernels against the attention kernel).
struct ParamReaders {
  const char* param;
  const char* part;  // "placement", "scheme" or "runtime"
  std::vector<std::string> names;
};
const ParamReaders kParamReaders[] = {
    {"skip_empty", "scheme", {"ring"}},
    {"merge_bytes_per_element", "scheme", {"ring", "usp"}},
    {"seq_a2a_copies", "scheme", {"ring"}},
    {"out_cast_bytes_per_element", "scheme", {"ring", "usp", "ulysses"}},
    {"split_text", "scheme", {"demand_alltoall", "demand_direct", "demand_hierarchical"}},
    {"ulysses_degree", "scheme", {"usp"}},
    {"tolerance", "placement", {"balanced", "dependency_aware"}},
    {"locality", "placement", {"balanced"}},
    {"comm_sms", "runtime", {"sync", "sm_overlap"}},
    {"ce_only", "runtime", {"sync", "sm_overlap"}},
    {"high_priority_comm", "runtime", {"sm_overlap"}},
};
// Host-staged pipeline chunk: at least one 4 KiB page (smaller chunks only multiply events and
// per-chunk overheads), at most 1 TB (as /sim/chunk_bytes in a study).
constexpr double kMinChunkBytes = 4096, kMaxChunkBytes = 1e12;
}  // namespace

Status check_policy_param(const std::string& k, double v) {
  if (std::find(std::begin(kKnownParams), std::end(kKnownParams), k) == std::end(kKnownParams))
    return Error{"unknown policy parameter '" + k + "'"};
  auto integer_in = [&](double lo, double hi) -> Status {
    if (!(v >= lo && v <= hi) || v != std::floor(v)) {
      std::ostringstream o;
      o << "policy parameter '" << k << "' must be an integer in [" << lo << ", " << hi << "], got "
        << v;
      return Error{o.str()};
    }
    return Ok{};
  };
  // comm_sms is also checked against the GPU's SM count when the study runs (check_policy_on).
  if (k == "comm_sms" || k == "staging_buffers" || k == "ulysses_degree")
    return integer_in(1, 1024);
  if (k == "chunk_bytes" && !(v >= kMinChunkBytes && v <= kMaxChunkBytes)) {
    std::ostringstream o;
    o << "policy parameter 'chunk_bytes' must be in [" << kMinChunkBytes << ", " << kMaxChunkBytes
      << "] bytes, got " << v;
    return Error{o.str()};
  }
  auto bytes_per_element_in = [&](double hi) -> Status {
    if (v >= 0 && v <= hi) return Ok{};
    std::ostringstream o;
    o << "policy parameter '" << k << "' must be in [0, " << hi
      << "] bytes per output element, got " << v;
    return Error{o.str()};
  };
  // The ring merge's bytes per output element (scheme_parts.hpp kRingMergeBytesPerElement): 0
  // turns the merge off; 1e4 is far above any elementwise chain (eager PyTorch: 48).
  if (k == "merge_bytes_per_element") return bytes_per_element_in(1e4);
  // The accumulator's casts (scheme_parts.hpp out_cast_bytes_per_element): 12 in bf16, 0 off; a
  // cast chain reads and writes each element once per cast, so 100 is far above any dtype.
  if (k == "out_cast_bytes_per_element") return bytes_per_element_in(100);
  if (k == "tolerance" && !(v >= 1.0 && std::isfinite(v))) {
    std::ostringstream o;
    o << "policy parameter 'tolerance' must be >= 1 (1.03 = 3% imbalance allowed), got " << v;
    return Error{o.str()};
  }
  if (std::find(std::begin(kBooleanParams), std::end(kBooleanParams), k) !=
          std::end(kBooleanParams) &&
      v != 0 && v != 1) {
    std::ostringstream o;
    o << "policy parameter '" << k << "' is a switch: expected 0 or 1, got " << v;
    return Error{o.str()};
  }
  if (!std::isfinite(v) || v < 0) return Error{"policy parameter '" + k + "' must be >= 0"};
  return Ok{};
}

Status check_policy(const PolicySpec& spec) {
  if (!known(placements(), spec.placement))
    return Error{"unknown placement '" + spec.placement + "' (known: " + names(placements()) + ")"};
  if (!known(schemes(), spec.scheme))
    return Error{"unknown scheme '" + spec.scheme + "' (known: " + names(schemes()) + ")"};
  if (!known(runtimes(), spec.runtime))
    return Error{"unknown runtime '" + spec.runtime + "' (known: " + names(runtimes()) + ")"};
  for (const auto& [k, v] : spec.params)
    if (auto st = check_policy_param(k, v); !st) return st;
  // A parameter the chosen placement, scheme or runtime does not read is a mistake (it used to
  // be ignored without a word: split_text on ring).
  for (const ParamReaders& pr : kParamReaders) {
    if (!spec.params.count(pr.param)) continue;
    const std::string part = pr.part;
    const std::string& chosen = part == "placement" ? spec.placement
                                : part == "scheme"  ? spec.scheme
                                                    : spec.runtime;
    if (std::find(pr.names.begin(), pr.names.end(), chosen) != pr.names.end()) continue;
    std::string list;
    for (const auto& n : pr.names) list += (list.empty() ? "" : ", ") + n;
    return Error{"policy parameter '" + std::string(pr.param) + "' does not apply to " + part +
                 " '" + chosen + "' (it is read by " + part + " " + list + ")"};
  }
  if (spec.params.count("comm_sms") && spec.params.count("ce_only") &&
      spec.params.at("ce_only") == 1)
    return Error{
        "policy parameter 'comm_sms' does not apply with ce_only=1 (copies run on the copy "
        "engines, no SMs)"};
  // Ulysses shards heads, not blocks: its only meaningful placement is head_parallel.
  if (spec.scheme == "ulysses" && spec.placement != "head_parallel")
    // No "policy '...'" lead: the callers add theirs (parse_policy, the study's pointer).
    return Error{"scheme 'ulysses' splits heads, so its placement must be head_parallel (got '" +
                 spec.placement + "')"};
  return Ok{};
}

Status check_policy_on(const PolicySpec& spec, int /*ranks*/, int /*heads*/, int gpu_sm_count) {
  if (auto it = spec.params.find("comm_sms");
      it != spec.params.end() && gpu_sm_count > 0 && it->second > gpu_sm_count) {
    std::ostringstream o;
    o << "policy '" << spec.name() << "': policy parameter 'comm_sms' must be in [1, "
      << gpu_sm_count << "] (the GPU's SMs), got " << it->second;
    return Error{o.str(), 2};
  }
  if (spec.scheme == "usp" && spec.params.count("ulysses_degree") &&
      spec.params.at("ulysses_degree") == 1)
    return Error{"policy '" + spec.name() +
                     ":ulysses_degree=1': ulysses_degree 1 given, so USP would be plain ring; use "
                     "the ring scheme, or a ulysses_degree above 1",
                 2};
  return Ok{};
}

Status check_runnable(const PolicySpec& spec, int ranks, int heads, int kv_heads,
                      int ranks_per_node) {
  auto heads_split = [&](int u) -> Status {
    if (heads % u != 0)
      return Error{"heads (" + std::to_string(heads) + ") not divisible by the Ulysses degree " +
                   std::to_string(u)};
    // The rule of ulysses_plan (scheme_parts.cpp), which otherwise failed the whole study.
    if (kv_heads > 0 && u > 0 && detail::ulysses_kv_heads(heads, kv_heads, u) < 0)
      return Error{"kv_heads (" + std::to_string(kv_heads) + ") and the Ulysses degree " +
                   std::to_string(u) + " do not divide one another"};
    return Ok{};
  };
  if (spec.scheme == "ulysses") return heads_split(ranks);
  if (spec.scheme != "usp") return Ok{};
  if (!spec.params.count("ulysses_degree")) {
    if (const int u = default_ulysses_degree(ranks, heads, ranks_per_node); u > 1)
      return heads_split(u);
    const std::string of_ranks = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
    return Error{"no Ulysses x ring split of " + of_ranks +
                 (ranks < 4
                      ? std::string()
                      : " and " + std::to_string(heads) +
                            " heads: the default Ulysses degree, the largest u <= " +
                            (ranks_per_node > 0 && ranks_per_node < ranks
                                 ? "the " + std::to_string(ranks_per_node) + " ranks of a node"
                                 : std::string("P/2")) +
                            " dividing both, is 1")};
  }
  const int u = static_cast<int>(spec.params.at("ulysses_degree"));
  if (u > 1 && ranks % u != 0)
    return Error{"ulysses_degree " + std::to_string(u) + " does not divide the " +
                 std::to_string(ranks) + " ranks"};
  return heads_split(u);
}

Result<PolicySpec> parse_policy(const std::string& text) {
  PolicySpec spec;
  std::string body = text, ps;
  if (auto c = text.find(':'); c != std::string::npos) {
    body = text.substr(0, c);
    ps = text.substr(c + 1);
  }
  const auto s1 = body.find('/');
  const auto s2 = s1 == std::string::npos ? s1 : body.find('/', s1 + 1);
  if (s1 == std::string::npos || s2 == std::string::npos ||
      body.find('/', s2 + 1) != std::string::npos)
    return Error{"policy '" + text + "': expected PLACEMENT/SCHEME/RUNTIME[:key=value,...]"};
  spec.placement = body.substr(0, s1);
  spec.scheme = body.substr(s1 + 1, s2 - s1 - 1);
  spec.runtime = body.substr(s2 + 1);
  std::istringstream in(ps);
  std::string kv;
  while (std::getline(in, kv, ',')) {
    if (kv.empty()) continue;
    const auto eq = kv.find('=');
    if (eq == std::string::npos)
      return Error{"policy '" + text + "': parameter '" + kv + "' is not key=value"};
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "route") {
      if (spec.params.count("host_staged"))
        return Error{"policy '" + text + "': route given twice"};
      if (v == "host_staged")
        spec.params["host_staged"] = 1;
      else if (v == "automatic")
        spec.params["host_staged"] = 0;
      else
        return Error{"policy '" + text + "': route must be automatic or host_staged"};
      continue;
    }
    // A decimal number only: strtod alone would also take "0x1", "inf", "nan" and leading blanks.
    const bool decimal = !v.empty() && v.find_first_not_of("0123456789+-.eE") == std::string::npos;
    char* end = nullptr;
    double x = decimal ? std::strtod(v.c_str(), &end) : 0;
    if (!decimal || *end || !std::isfinite(x))
      return Error{
          "policy '" + text + "': parameter '" + k + "' is not a decimal number ('" + v + "'" +
          (v.find(':') != std::string::npos ? "; parameters are separated by ','" : "") + ")"};
    if (x == 0) x = 0;                      // -0 names the same policy as 0
    if (!spec.params.emplace(k, x).second)  // skip_empty=1,skip_empty=0: the last no longer wins
      return Error{"policy '" + text + "': parameter '" + k + "' given twice"};
  }
  if (auto st = check_policy(spec); !st)
    return Error{"policy '" + text + "': " + st.error().message};
  return spec;
}

}  // namespace sparsp::policy
