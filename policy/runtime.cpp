// Runtimes (CommPlan -> sim::Workload), the rank view of a topology, the block dependency graph,
// policy parsing and the lower bound. The runtime registry table is the only place a new runtime
// is listed.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "demand.hpp"

namespace sparsp::policy {

// ---- rank view of the topology ----------------------------------------------------------------

RankTopology RankTopology::flat(int ranks, bool p2p) {
  RankTopology rt;
  rt.ranks = ranks;
  for (int r = 0; r < ranks; ++r) {
    rt.gpu_of_rank.push_back(r);
    rt.ancestors.push_back({"sw0", "cpu0"});
    rt.numa.push_back(0);
  }
  rt.p2p.assign(static_cast<size_t>(ranks) * ranks, p2p ? 1 : 0);
  return rt;
}

// ---- block dependency graph ---------------------------------------------------------------------

BlockGraph block_graph(patterns::Pattern& pattern, int max_layers) {
  const auto& layout = pattern.layout();
  const auto& model = pattern.model();
  BlockGraph g;
  const int n = layout.num_blocks;
  g.num_blocks = n;
  g.tokens.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) g.tokens[static_cast<size_t>(k)] = layout.tokens_in_block[static_cast<size_t>(k)];
  g.work.assign(static_cast<size_t>(n), 0.0);
  std::vector<uint32_t> cnt(static_cast<size_t>(n) * n, 0);
  std::set<int64_t> seen;
  int used = 0;
  for (int l = 0; l < pattern.layers() && used < max_layers; ++l) {
    if (!seen.insert(pattern.mask_group(0, l)).second) continue;
    ++used;
    for (int h = 0; h < pattern.heads(); ++h) {
      const auto& m = pattern.mask(0, l, h);
      for (int q = 0; q < n; ++q) {
        // Text query rows (dense) are split across the ranks by the demand schemes, so they
        // create no dependency on where their KV blocks live.
        if (layout.is_text(q)) continue;
        const uint64_t* row = m.row(q);
        double tk = 0;
        for (int w = 0; w < m.words_per_row(); ++w) {
          uint64_t x = row[w];
          while (x) {
            const int k = w * 64 + std::countr_zero(x);
            x &= x - 1;
            cnt[static_cast<size_t>(q) * n + k]++;
            tk += g.tokens[static_cast<size_t>(k)];
          }
        }
        g.work[static_cast<size_t>(q)] += 4.0 * g.tokens[static_cast<size_t>(q)] * tk * model.head_dim;
      }
    }
  }
  const double samples = std::max(1, used) * std::max(1, pattern.heads());
  g.dep.resize(cnt.size());
  for (size_t i = 0; i < cnt.size(); ++i) g.dep[i] = static_cast<float>(cnt[i] / samples);
  for (auto& w : g.work) w /= std::max(1, used);
  return g;
}

// ---- runtimes ---------------------------------------------------------------------------------

namespace {

using Params = std::map<std::string, double>;

double param(const Params& p, const std::string& k, double def) {
  auto it = p.find(k);
  return it == p.end() ? def : it->second;
}

enum class Mode { sync, sm_overlap, ce_decoupled };

std::string endpoint(const RankTopology& rt, int rank, int host_numa) {
  if (rank < 0) return "host" + std::to_string(host_numa);
  return "gpu" + std::to_string(rt.gpu_of_rank[static_cast<size_t>(rank)]);
}

sim::Workload build(Mode mode, const CommPlan& plan, const RankTopology& rt, const ComputeModel& cm,
               const Params& p, int layer) {
  sim::Workload w;
  const int comm_sms = static_cast<int>(param(p, "comm_sms", 16));
  const double chunk = param(p, "chunk_bytes", 0);
  const int staging = static_cast<int>(param(p, "staging_buffers", 0));  // 0: SimOptions default
  const bool ce_only = param(p, "ce_only", 0) != 0;
  const std::string L = "L" + std::to_string(layer) + ".";
  auto mid = [&](size_t i) {
    const auto& m = plan.messages[i];
    std::ostringstream s;
    s << L << "m" << i << "." << m.tag << "."
      << (m.src < 0 ? "h" + std::to_string(m.host_numa) : std::to_string(m.src)) << "-"
      << (m.dst < 0 ? "h" + std::to_string(m.host_numa) : std::to_string(m.dst));
    return s.str();
  };
  auto tid = [&](size_t i) {
    return L + "a" + std::to_string(i) + "." + plan.tasks[i].tag + "." +
           std::to_string(plan.tasks[i].rank);
  };
  // Sync: on each rank, compute of phase p waits for all messages of phases <= p touching the
  // rank; messages of phase p leaving a rank wait for its compute of phases < p.
  std::vector<std::vector<size_t>> msgs_of(static_cast<size_t>(rt.ranks));
  std::vector<std::vector<size_t>> tasks_of(static_cast<size_t>(rt.ranks));
  for (size_t i = 0; i < plan.messages.size(); ++i) {
    const auto& m = plan.messages[i];
    if (m.src >= 0) msgs_of[static_cast<size_t>(m.src)].push_back(i);
    if (m.dst >= 0 && m.dst != m.src) msgs_of[static_cast<size_t>(m.dst)].push_back(i);
  }
  for (size_t i = 0; i < plan.tasks.size(); ++i) tasks_of[static_cast<size_t>(plan.tasks[i].rank)].push_back(i);
  for (size_t i = 0; i < plan.messages.size(); ++i) {
    const auto& m = plan.messages[i];
    sim::Transfer t;
    t.id = mid(i);
    t.src = endpoint(rt, m.src, m.host_numa);
    t.dst = endpoint(rt, m.dst, m.host_numa);
    t.bytes = m.bytes;
    std::set<std::string> after;
    for (int a : m.after_msgs) after.insert(mid(static_cast<size_t>(a)));
    for (int a : m.after_tasks) after.insert(tid(static_cast<size_t>(a)));
    if (mode == Mode::sync && m.src >= 0)
      for (size_t ti : tasks_of[static_cast<size_t>(m.src)])
        if (plan.tasks[ti].phase < m.phase) after.insert(tid(ti));
    t.after.assign(after.begin(), after.end());
    const bool sm = !ce_only && (mode == Mode::sm_overlap || (mode == Mode::sync && m.collective));
    t.engine = (m.src < 0 || m.dst < 0) ? sim::Engine::ce : (sm ? sim::Engine::sm : sim::Engine::ce);
    t.comm_sms = t.engine == sim::Engine::sm ? comm_sms : 0;
    t.route = m.host_staged ? topology::RouteMode::host_staged : topology::RouteMode::automatic;
    t.chunk_bytes = chunk;
    t.staging_buffers = staging;
    t.layer = layer;
    t.kv_blocks = m.kv_blocks;
    w.transfers.push_back(std::move(t));
  }
  // Compute in (phase, scheme order): a rank's FIFO attention stream (sync) must not queue a
  // later ring step before an earlier one.
  std::vector<size_t> order(plan.tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return plan.tasks[x].phase < plan.tasks[y].phase; });
  for (size_t i : order) {
    const auto& a = plan.tasks[i];
    sim::ComputeTask c;
    c.id = tid(i);
    c.gpu = endpoint(rt, a.rank, -1);
    c.duration_s = cm.attention_time_s(a.flops);
    std::set<std::string> after;
    for (int m : a.after_msgs) after.insert(mid(static_cast<size_t>(m)));
    if (mode == Mode::sync) {
      for (size_t mi : msgs_of[static_cast<size_t>(a.rank)]) {
        const auto& m = plan.messages[mi];
        if (m.phase <= a.phase && m.after_tasks.empty()) after.insert(mid(mi));
      }
      c.stream = "attn" + std::to_string(a.rank);
    }
    c.after.assign(after.begin(), after.end());
    c.layer = layer;
    w.compute.push_back(std::move(c));
  }
  return w;
}

struct RuntimeEntry {
  const char* name;
  const char* description;
  Mode mode;
};

const RuntimeEntry kRuntimes[] = {
    {"sync", "communication, then attention, per step of the scheme; collectives on SM-driven "
             "kernels, point-to-point copies on copy engines", Mode::sync},
    {"sm_overlap", "NCCL-style SM-driven transfers (comm_sms SMs each) overlapped with attention; "
                   "P2P-less paths through host memory", Mode::sm_overlap},
    {"ce_decoupled", "copy engines and host-driven staging (no SMs taken); local attention first, "
                     "each remote piece as soon as its data arrives", Mode::ce_decoupled},
};

}  // namespace

std::vector<PolicyInfo> runtimes() {
  std::vector<PolicyInfo> out;
  for (const auto& r : kRuntimes) out.push_back({r.name, r.description});
  return out;
}

Result<sim::Workload> make_workload(const std::string& runtime, const CommPlan& plan,
                               const RankTopology& ranks, const ComputeModel& compute,
                               const std::map<std::string, double>& params, int layer) {
  for (const auto& r : kRuntimes)
    if (runtime == r.name) return build(r.mode, plan, ranks, compute, params, layer);
  return Error{"unknown runtime '" + runtime + "'"};
}

// ---- policy parsing ---------------------------------------------------------------------------

namespace {
bool known(const std::vector<PolicyInfo>& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(), [&](const PolicyInfo& p) { return p.name == name; });
}
std::string names(const std::vector<PolicyInfo>& list) {
  std::string s;
  for (const auto& p : list) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}
const char* const kKnownParams[] = {"skip_empty", "ulysses_degree", "host_staged", "comm_sms",
                                    "chunk_bytes", "tolerance", "locality", "ce_only", "split_text",
                                    "staging_buffers"};
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
      o << "policy parameter '" << k << "' must be an integer in [" << lo << ", " << hi << "], got " << v;
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
  if (k == "tolerance" && !(v >= 1.0 && std::isfinite(v))) {
    std::ostringstream o;
    o << "policy parameter 'tolerance' must be >= 1 (1.03 = 3% imbalance allowed), got " << v;
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
  // Ulysses shards heads, not blocks: its only meaningful placement is head_parallel.
  if (spec.scheme == "ulysses" && spec.placement != "head_parallel")
    return Error{"policy '" + spec.name() + "': scheme 'ulysses' splits heads, so its placement must be "
                 "head_parallel (got '" + spec.placement + "')"};
  return Ok{};
}

Status check_policy_on(const PolicySpec& spec, int ranks, int heads, int gpu_sm_count) {
  if (auto it = spec.params.find("comm_sms");
      it != spec.params.end() && gpu_sm_count > 0 && it->second > gpu_sm_count) {
    std::ostringstream o;
    o << "policy '" << spec.name() << "': policy parameter 'comm_sms' must be in [1, " << gpu_sm_count
      << "] (the GPU's SMs), got " << it->second;
    return Error{o.str(), 2};
  }
  if (spec.scheme == "usp" && ranks > 1) {
    const int u = spec.params.count("ulysses_degree") ? static_cast<int>(spec.params.at("ulysses_degree"))
                                                      : default_ulysses_degree(ranks, heads);
    if (u <= 1)
      return Error{"policy '" + spec.name() + "': " +
                       (spec.params.count("ulysses_degree")
                            ? std::string("ulysses_degree 1 given")
                            : "no default Ulysses degree for " + std::to_string(ranks) +
                                  " ranks and " + std::to_string(heads) +
                                  " heads (the default is the largest u <= P/2 dividing both, and "
                                  "needs P >= 4)") +
                       ", so USP would be plain ring; use the ring or ulysses scheme, or set "
                       "ulysses_degree",
                   2};
  }
  return Ok{};
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
  if (s1 == std::string::npos || s2 == std::string::npos || body.find('/', s2 + 1) != std::string::npos)
    return Error{"policy '" + text + "': expected PLACEMENT/SCHEME/RUNTIME[:key=value,...]"};
  spec.placement = body.substr(0, s1);
  spec.scheme = body.substr(s1 + 1, s2 - s1 - 1);
  spec.runtime = body.substr(s2 + 1);
  std::istringstream in(ps);
  std::string kv;
  while (std::getline(in, kv, ',')) {
    if (kv.empty()) continue;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) return Error{"policy '" + text + "': parameter '" + kv + "' is not key=value"};
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "route") {
      if (v == "host_staged") spec.params["host_staged"] = 1;
      else if (v == "automatic") spec.params["host_staged"] = 0;
      else return Error{"policy '" + text + "': route must be automatic or host_staged"};
      continue;
    }
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end) return Error{"policy '" + text + "': parameter '" + k + "' is not a number"};
    spec.params[k] = x;
  }
  if (auto st = check_policy(spec); !st) return Error{"policy '" + text + "': " + st.error().message};
  return spec;
}

}  // namespace sparsp::policy
