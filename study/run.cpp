// run_study: pattern -> placement -> scheme -> runtime -> engine, per (step, layer) and policy,
// with exact reuse of identical (step, layer) workloads and step-by-step streaming. run_study reads
// as its steps: per topology, open the group, drop the policies that cannot run on its rank count
// (StudyResult::skipped), place, simulate every unit, summarise.
#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "internal.hpp"
#include "sparsp/study.hpp"

namespace sparsp::study {

std::string policy_label(const policy::PolicySpec& p) {
  std::string s = p.name();
  char sep = ':';
  for (const auto& [k, v] : p.params) {
    // The shortest text that reads back as the same double (break-it 2026-12-03: six digits
    // printed chunk_bytes=1048577 as 1.04858e+06, which ran another policy when pasted back).
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    s += sep + k + "=" + std::string(buf, r.ptr);
    sep = ',';
  }
  return s;
}

namespace {

// What one simulated (step, layer) contributes to a policy's figures.
struct UnitMetrics {
  double attention_s = 0;
  double payload = 0;
  double control = 0;
  double lb_s = 0;
  std::string lb_binding;
  double imbalance = 1;
  std::vector<double> resource_bytes;
};

// Sums of UnitMetrics over the units of one policy on one topology.
struct Accum {
  double attention_s = 0, payload = 0, control = 0, lb_s = 0, imbalance = 0;
  int64_t units = 0, simulated = 0;
  std::vector<double> resource_bytes;
  std::map<std::string, int64_t> binding_count;
  void add(const UnitMetrics& m) {
    attention_s += m.attention_s;
    payload += m.payload;
    control += m.control;
    lb_s += m.lb_s;
    imbalance += m.imbalance;
    binding_count[m.lb_binding]++;
    if (resource_bytes.size() < m.resource_bytes.size())
      resource_bytes.resize(m.resource_bytes.size(), 0.0);
    for (size_t i = 0; i < m.resource_bytes.size(); ++i) resource_bytes[i] += m.resource_bytes[i];
    ++units;
  }
};

// The sequence-parallel group of one topology and the selection of the pattern it runs.
struct Group {
  std::unique_ptr<topology::Topology> topo;
  std::vector<int> gpus;  ///< GPU index of each rank
  policy::RankTopology ranks;
  std::unique_ptr<patterns::Pattern> pattern;  ///< fresh per topology (dynamic: from step 0)
  std::vector<int> steps, layers;              ///< sorted selection
  bool dynamic = false;                        ///< masks change across the selected steps
  policy::ComputeModel compute;
  std::string compute_source;             ///< policy::ResolvedCompute::source
  double contention_ce_copy = 0;          ///< sim::SimOptions::contention_ce_copy
  double contention_sm_copy_per_sm = -1;  ///< sim::SimOptions::contention_sm_copy_per_sm
  int min_sm_count = 0;                   ///< smallest known SM count of the GPUs (0: none)
};

// One policy of the study that runs on a group, and everything kept for it while it runs.
struct PolicyRun {
  size_t index = 0;  ///< into Study::policies
  const policy::Placement* placement = nullptr;
  Accum acc;
  std::map<int64_t, UnitMetrics> cache;  ///< by Pattern::mask_group
  std::shared_ptr<policy::Plan> plan;    ///< keep_plans
  std::map<int64_t, size_t> plan_index;  ///< mask group -> plan layer
  std::string trace;                     ///< keep_trace: first unit simulated
};

// Counts (topology, step, layer) units for RunOptions::progress.
struct Progress {
  const RunOptions& opt;
  int64_t done = 0, total = 0;
  void tick() {
    if (opt.progress) opt.progress(++done, total);
  }
};

std::string place_of(const Study& s, size_t i) {
  return i < s.policy_places.size() ? s.policy_places[i] : "/policies/" + std::to_string(i);
}

// "<file>:<place>" of a study field, or "<command line>:<flag>" when a flag set it (a place that
// is itself a flag, "--policy[1]", or a pointer in Study::flag_places).
std::string where(const Study& s, const std::string& place) {
  if (place.rfind("--", 0) == 0) return "<command line>:" + place;
  if (auto f = s.flag_places.find(place); f != s.flag_places.end())
    return "<command line>:" + f->second;
  return s.source + ":" + place;
}

Error at(const Study& s, const std::string& place, const Error& e) {
  // A pattern option's own error, "<pattern:NAME>:block: ...", about an option a flag set:
  // "<command line>:--block: ...".
  if (place == "/pattern" && e.message.rfind("<pattern:", 0) == 0) {
    const size_t a = e.message.find(">:");
    const size_t b = a == std::string::npos ? a : e.message.find(": ", a + 2);
    if (b != std::string::npos) {
      auto f = s.flag_places.find("/pattern/" + e.message.substr(a + 2, b - a - 2));
      if (f != s.flag_places.end())
        return Error{"<command line>:" + f->second + ": " + e.message.substr(b + 2), e.exit_code};
    }
  }
  return Error{where(s, place) + ": " + e.message, e.exit_code};
}

Error input_at(const Study& s, const std::string& place, const std::string& what) {
  return at(s, place, Error{what, 2});
}

Result<std::unique_ptr<patterns::Pattern>> open_pattern(const Study& s,
                                                        const patterns::ModelSpec& model) {
  if (s.pattern.kind == "file") {
    auto p = patterns::load_pattern(s.pattern.input, &model, s.pattern);
    if (!p) return at(s, "/pattern", p.error());
    return p;
  }
  auto p = patterns::make_pattern(model, s.pattern);
  if (!p) return at(s, "/pattern", p.error());
  return p;
}

// The index of the study's baseline policy: by label, then by parsed spec, then by name.
Result<size_t> find_baseline(const Study& st) {
  if (st.baseline.empty()) return size_t{0};
  int baseline = -1;
  for (size_t i = 0; i < st.policies.size() && baseline < 0; ++i)
    if (policy_label(st.policies[i]) == st.baseline) baseline = static_cast<int>(i);
  if (auto spec = policy::parse_policy(st.baseline); spec)
    for (size_t i = 0; i < st.policies.size() && baseline < 0; ++i)
      if (st.policies[i].name() == spec->name() && st.policies[i].params == spec->params)
        baseline = static_cast<int>(i);
  for (size_t i = 0; i < st.policies.size() && baseline < 0; ++i)
    if (st.policies[i].name() == st.baseline) baseline = static_cast<int>(i);
  if (baseline < 0)
    return input_at(st, "/baseline", "baseline '" + st.baseline + "' is not one of the policies");
  return static_cast<size_t>(baseline);
}

// Steps and layers of the selection (all when empty), checked against the pattern.
Status select_units(const Study& st, const patterns::ModelSpec& model, Group& g) {
  const auto& pattern = *g.pattern;
  g.steps = st.steps;
  g.layers = st.layers;
  if (g.steps.empty()) {
    g.steps.resize(static_cast<size_t>(pattern.steps()));
    std::iota(g.steps.begin(), g.steps.end(), 0);
  }
  if (g.layers.empty()) {
    g.layers.resize(static_cast<size_t>(pattern.layers()));
    std::iota(g.layers.begin(), g.layers.end(), 0);
  }
  std::sort(g.steps.begin(), g.steps.end());
  g.steps.erase(std::unique(g.steps.begin(), g.steps.end()), g.steps.end());
  for (int s : g.steps)
    if (s >= pattern.steps())
      return input_at(st, "/steps",
                      "step " + std::to_string(s) + " outside the pattern's " +
                          std::to_string(pattern.steps()) + " steps");
  for (int l : g.layers)
    if (l >= pattern.layers())
      return input_at(st, "/layers",
                      "layer " + std::to_string(l) + " outside the pattern's " +
                          std::to_string(pattern.layers()) + " layers");
  if (pattern.heads() != model.heads)
    return input_at(st, "/pattern",
                    "pattern has " + std::to_string(pattern.heads()) + " heads, model " +
                        std::to_string(model.heads));
  for (int l : g.layers)
    for (int s : g.steps)
      if (pattern.mask_group(s, l) != pattern.mask_group(g.steps[0], l)) g.dynamic = true;
  return Ok{};
}

// The GPU index of each rank: the study's list, else its first num_gpus GPUs, else all.
std::vector<int> group_gpus(const Study& st, const topology::Topology& topo) {
  std::vector<int> gpus = st.gpus;
  if (gpus.empty()) {
    const int n = st.num_gpus > 0 ? st.num_gpus : topo.num_gpus();
    for (int i = 0; i < n; ++i) gpus.push_back(i);
  }
  return gpus;
}

// Bytes per (query block, KV block) pair a study holds at its peak (block masks, demand and
// placement graphs), from the peak RSS of HunyuanVideo 720p (108000 video tokens): block 8
// (13.5k blocks) 1.8 GB -> 1.8e9 / 13.5e3^2 = 9.9 B; block 4 (27k blocks) 7.0 GB -> 9.6 B.
constexpr double kBytesPerBlockPair = 10.0;

// Refuses a generated pattern whose blocks^2 state would not fit `max_bytes`, before the
// pattern is made (a recorded mask's size is bounded by its file).
Status check_memory(const Study& st, const patterns::ModelSpec& model, double max_bytes,
                    const std::string& remedy) {
  if (st.pattern.kind == "file" || st.pattern.block_tokens < 1) return Ok{};
  const double b = st.pattern.block_tokens;
  const double blocks = std::ceil(model.video_tokens() / b) + std::ceil(model.text_tokens / b);
  const double need = kBytesPerBlockPair * blocks * blocks;
  if (need <= max_bytes) return Ok{};
  char msg[320];
  std::snprintf(msg, sizeof msg,
                "block %d gives %.0f blocks, an estimated %.3g GiB (%.0f B per block pair), over "
                "the limit of %.3g GiB; ",
                st.pattern.block_tokens, blocks, need / (1ull << 30), kBytesPerBlockPair,
                max_bytes / (1ull << 30));
  return input_at(st, "/pattern/block", msg + remedy);
}

// The group on topology `topo`: its GPUs and ranks, the pattern, the selection and the
// compute model of the group's first GPU.
Result<Group> open_group(const Study& st, std::unique_ptr<topology::Topology> topo,
                         const patterns::ModelSpec& model) {
  Group g;
  g.topo = std::move(topo);
  g.gpus = group_gpus(st, *g.topo);
  auto rt = policy::rank_topology(*g.topo, g.gpus);
  if (!rt) return at(st, "/gpus", rt.error());
  g.ranks = std::move(*rt);
  auto pat = open_pattern(st, model);
  if (!pat) return pat.error();
  g.pattern = std::move(*pat);
  if (auto s = select_units(st, model, g); !s) return s.error();
  // No made-up compute figure (compute_model_for falls back to the RTX 4090's 165.2 TFLOP/s).
  for (int i : g.gpus)
    if (g.topo->gpu(i).peak_bf16_flops <= 0)
      return input_at(st, "/topology",
                      g.topo->name() + ": gpu" + std::to_string(i) + " (GPU model '" +
                          g.topo->gpu(i).model +
                          "') has no bf16 compute figure (peak_bf16_flops 0), so its compute "
                          "cannot be simulated; give the GPU model (topo import --gpu-model, "
                          "see `sparsp topo models`) or peak_bf16_flops in the topology");
    else if (g.topo->gpu(i).sm_count < 1)  // SM-driven runtimes would take SMs from none
      return input_at(st, "/topology",
                      g.topo->name() + ": gpu" + std::to_string(i) + " (GPU model '" +
                          g.topo->gpu(i).model +
                          "') has sm_count 0, so its kernels cannot be simulated; give "
                          "sm_count >= 1 in the topology");
  // Compute figures by precedence (policy::resolve_compute): explicit efficiency, a measured
  // entry of the topology, the chosen kernel's registry figure, generic.
  policy::ComputeRequest rq;
  rq.kernel = st.kernel;
  rq.attention_efficiency = st.attention_efficiency;
  rq.gemm_efficiency = st.gemm_efficiency;
  rq.head_dim = model.head_dim;
  rq.seq_tokens = model.tokens();
  rq.block_tokens = st.pattern.block_tokens;
  // One rank's attention call (the wave term, policy.hpp): its N / P queries over all heads;
  // CFG batch2 runs cond and uncond in one call.
  rq.batch = model.pipeline.cfg == "batch2" ? 2 : 1;
  rq.heads = model.heads;
  rq.query_tokens =
      static_cast<double>(model.tokens()) / static_cast<double>(std::max<size_t>(1, g.gpus.size()));
  rq.file = st.source;
  rq.kernel_place = st.kernel_place;
  if (st.kernel_place.rfind("--", 0) == 0) rq.file = "<command line>";
  auto rc = policy::resolve_compute(g.topo->gpu(g.gpus[0]), g.topo->options().measured_compute, rq);
  if (!rc) return rc.error();
  g.compute = rc->model;
  g.compute_source = rc->source;
  g.contention_ce_copy = rc->contention_ce_copy;
  g.contention_sm_copy_per_sm = rc->contention_sm_copy_per_sm;
  for (int i : g.gpus) {
    const int c = g.topo->gpu(i).sm_count;
    if (c > 0) g.min_sm_count = g.min_sm_count > 0 ? std::min(g.min_sm_count, c) : c;
  }
  return g;
}

// Which policies of the study can run on `ranks` ranks of topology `topo_name` (study order), and
// the others with their reasons (policy::check_runnable). The baseline left out, or every policy,
// is an input error.
Result<std::vector<size_t>> runnable_on(const Study& st, const std::string& topo_name, int ranks,
                                        int heads, int kv_heads, int ranks_per_node,
                                        size_t baseline, std::vector<SkippedPolicy>& skipped) {
  std::vector<size_t> runs;
  std::vector<SkippedPolicy> here;
  std::string baseline_reason;
  for (size_t pi = 0; pi < st.policies.size(); ++pi) {
    if (auto ok = policy::check_runnable(st.policies[pi], ranks, heads, kv_heads, ranks_per_node);
        !ok) {
      here.push_back({topo_name, policy_label(st.policies[pi]), ok.error().message});
      if (pi == baseline) baseline_reason = ok.error().message;
      continue;
    }
    runs.push_back(pi);
  }
  if (runs.empty()) {
    std::string why;
    for (const auto& s : here) why += (why.empty() ? "" : "; ") + s.policy + ": " + s.reason;
    return input_at(st, "/policies", "no policy can run on " + topo_name + " (" + why + ")");
  }
  if (!baseline_reason.empty())
    return input_at(st, st.baseline.empty() ? place_of(st, baseline) : "/baseline",
                    "the baseline " + policy_label(st.policies[baseline]) + " cannot run on " +
                        topo_name + " (" + baseline_reason + "); choose another baseline");
  skipped.insert(skipped.end(), here.begin(), here.end());
  return runs;
}

// Loads every topology of the study (once; open_group takes them) and checks, before any
// simulation, that each can run the baseline and at least one policy, so a study that would fail
// on its last topology fails at once.
Result<std::vector<std::unique_ptr<topology::Topology>>> load_topologies(
    const Study& st, const patterns::ModelSpec& model, size_t baseline) {
  std::vector<std::unique_ptr<topology::Topology>> out;
  for (size_t i = 0; i < st.topologies.size(); ++i) {
    const std::string& name = st.topologies[i];
    // The entry's own place: /topologies/<i> in a list of several, else /topology (a sweep
    // writes a study's one "topology" as a one-entry list).
    const std::string place = st.topologies_key == "topologies" && st.topologies.size() > 1
                                  ? "/topologies/" + std::to_string(i)
                                  : "/topology";
    auto topo = topology::Topology::load(name);
    if (!topo) return at(st, place, topo.error());
    if (st.gpus.empty() && st.num_gpus > topo->num_gpus())
      return at(st, "/gpus",
                Error{"asks for " + std::to_string(st.num_gpus) + " GPUs, but topology '" +
                      topo->name() + "' has " + std::to_string(topo->num_gpus())});
    // A listed GPU the topology lacks, at its own place in the list (/gpus/<i>).
    for (size_t k = 0; k < st.gpus.size(); ++k)
      if (st.gpus[k] < 0 || st.gpus[k] >= topo->num_gpus())
        return at(st, "/gpus/" + std::to_string(k),
                  Error{"GPU " + std::to_string(st.gpus[k]) + " is not in topology '" +
                        topo->name() + "' (it has " + std::to_string(topo->num_gpus()) +
                        " GPUs, gpu0..gpu" + std::to_string(topo->num_gpus() - 1) + ")"});
    std::vector<SkippedPolicy> ignored;
    const std::vector<int> gpus = group_gpus(st, *topo);
    std::vector<int> node_of_rank;
    for (int gpu : gpus) node_of_rank.push_back(topo->is_cluster() ? topo->node_of_gpu(gpu) : 0);
    if (auto r = runnable_on(st, topo->name(), static_cast<int>(gpus.size()), model.heads,
                             model.kv_heads_or_heads(), policy::ranks_per_node(node_of_rank),
                             baseline, ignored);
        !r)
      return r.error();
    out.push_back(std::make_unique<topology::Topology>(std::move(*topo)));
  }
  return out;
}

// The policies that run on this group, in study order: a policy whose parameters do not fit the
// group (comm_sms above the GPU's SMs) fails the study; one that cannot run on its rank count is
// recorded in `skipped` and left out (runnable_on).
Result<std::vector<PolicyRun>> runnable_policies(const Study& st, const Group& g,
                                                 const patterns::ModelSpec& model, size_t baseline,
                                                 std::vector<SkippedPolicy>& skipped) {
  for (size_t pi = 0; pi < st.policies.size(); ++pi)
    if (auto chk =
            policy::check_policy_on(st.policies[pi], g.ranks.ranks, model.heads, g.min_sm_count);
        !chk)
      return at(st, place_of(st, pi), chk.error());
  auto idx = runnable_on(st, g.topo->name(), g.ranks.ranks, model.heads, model.kv_heads_or_heads(),
                         policy::ranks_per_node(g.ranks.node), baseline, skipped);
  if (!idx) return idx.error();
  std::vector<PolicyRun> runs(idx->size());
  for (size_t i = 0; i < runs.size(); ++i) runs[i].index = (*idx)[i];
  return runs;
}

// One placement per distinct (placement, tolerance, locality), shared by the policies using it.
Status place_blocks(const Study& st, const Group& g, const patterns::ModelSpec& model,
                    std::vector<PolicyRun>& runs, std::map<std::string, policy::Placement>& cache) {
  const policy::BlockGraph graph = policy::block_graph(*g.pattern);
  for (auto& run : runs) {
    const auto& spec = st.policies[run.index];
    std::map<std::string, double> pp;
    for (const char* k : {"tolerance", "locality"})
      if (spec.params.count(k)) pp[k] = spec.params.at(k);
    std::string key = spec.placement;
    for (const auto& [k, v] : pp) key += "," + k + "=" + std::to_string(v);
    auto it = cache.find(key);
    if (it == cache.end()) {
      policy::PlacementContext ctx{&graph, &g.ranks, model.heads, pp};
      auto pl = policy::make_placement(spec.placement, ctx);
      if (!pl) return at(st, place_of(st, run.index), pl.error());
      it = cache.emplace(key, std::move(*pl)).first;
    }
    run.placement = &it->second;
  }
  return Ok{};
}

// The plan header of a policy (keep_plans): topology, model, layout and placement; layer plans
// are appended as units are simulated.
std::shared_ptr<policy::Plan> plan_header(const Study& st, const Group& g,
                                          const patterns::ModelSpec& model, const PolicyRun& run) {
  const auto& pattern = *g.pattern;
  auto p = std::make_shared<policy::Plan>();
  p->topology_json = g.topo->to_json();
  p->model = model.name;
  p->pattern = pattern.describe();
  p->gpus = g.ranks.ranks;
  p->compute_source = g.compute_source;
  // The GPUs it was made for, when they are not gpu0..gpu{P-1} (issue 18: a study on
  // "gpus": [4, 5] wrote endpoints "gpu4" that the loader refused).
  for (int r = 0; r < static_cast<int>(g.gpus.size()); ++r)
    if (g.gpus[static_cast<size_t>(r)] != r) {
      p->rank_gpus = g.gpus;
      break;
    }
  p->block_tokens = pattern.layout().block_tokens;
  p->heads = model.heads;
  p->head_dim = model.head_dim;
  p->dtype_bytes = model.dtype_bytes;
  p->num_blocks = pattern.layout().num_blocks;
  // K and V are stored per KV head (grouped-query attention: kv_heads <= heads).
  const int kv_heads = model.kv_heads_or_heads();
  p->kv_block_bytes =
      2.0 * pattern.layout().block_tokens * kv_heads * model.head_dim * model.dtype_bytes;
  if (kv_heads != model.heads) p->kv_heads = kv_heads;
  // Blocks of unequal size (tile padding, partial tiles) other than the last one need
  // per-block sizes so that replay can verify each block (policy/PLAN.md).
  const auto& tokens = pattern.layout().tokens_in_block;
  const double per_token = 2.0 * kv_heads * model.head_dim * model.dtype_bytes;
  bool ragged = false;
  for (size_t b = 0; b + 1 < tokens.size(); ++b)
    ragged = ragged || tokens[b] != pattern.layout().block_tokens;
  if (ragged)
    for (int t : tokens) p->block_bytes.push_back(per_token * t);
  p->policy = st.policies[run.index];
  p->block_owner = run.placement->block_owner;
  for (int b = 0; b < pattern.layout().num_blocks; ++b)
    if (pattern.layout().is_text(b)) p->text_blocks.push_back(b);
  return p;
}

// The layer's masks in the plan's CSR form: one set of rows when every head has the same mask,
// else one per head.
policy::LayerMask plan_mask(const std::vector<const patterns::BlockMask*>& masks) {
  policy::LayerMask m;
  if (masks.empty() || !masks[0]) return m;
  for (const auto* h : masks) m.per_head = m.per_head || !(h == masks[0] || *h == *masks[0]);
  m.row_ptr.push_back(0);
  for (size_t h = 0; h < (m.per_head ? masks.size() : 1); ++h) {
    const patterns::BlockMask& b = *masks[h];
    for (int q = 0; q < b.rows(); ++q) {
      const uint64_t* row = b.row(q);
      for (int w = 0; w < b.words_per_row(); ++w)
        for (uint64_t bits = row[w]; bits; bits &= bits - 1)
          m.kv_blocks.push_back(w * 64 + std::countr_zero(bits));
      m.row_ptr.push_back(static_cast<int32_t>(m.kv_blocks.size()));
    }
  }
  return m;
}

// What simulating one unit gives: its metrics, its plan layer (keep_plans) and its trace
// (when asked for).
struct UnitResult {
  UnitMetrics metrics;
  std::optional<policy::LayerPlan> plan_layer;
  std::string trace;
};

// Scheme -> runtime -> engine for one (step, layer) of one policy. Reads `st`, `g` and `run`
// only, so units may be simulated on several threads at once.
Result<UnitResult> simulate_unit(const Study& st, const Group& g, const patterns::ModelSpec& model,
                                 const std::vector<const patterns::BlockMask*>& masks, int step,
                                 int layer, bool trace_this, const PolicyRun& run) {
  const auto& spec = st.policies[run.index];
  policy::LayerInput in;
  in.model = &model;
  in.layout = &g.pattern->layout();
  in.masks = masks;
  in.placement = run.placement;
  in.ranks = &g.ranks;
  in.granularity = st.granularity;
  in.dynamic = g.dynamic;
  in.layer = layer;
  in.step = step;
  auto cp = policy::make_scheme(spec.scheme, in, spec.params);
  if (!cp) return at(st, place_of(st, run.index), cp.error());
  auto work = policy::make_workload(spec.runtime, *cp, g.ranks, g.compute, spec.params, layer);
  if (!work) return at(st, place_of(st, run.index), work.error());
  sim::SimOptions so = st.sim;
  so.contention_ce_copy = g.contention_ce_copy;
  so.contention_sm_copy_per_sm = g.contention_sm_copy_per_sm;
  so.record_resource_timeline = trace_this;
  auto res = sim::simulate(*g.topo, *work, so);
  if (!res) return at(st, place_of(st, run.index), res.error());
  auto lb = sim::lower_bound(*g.topo, *work);
  if (!lb) return at(st, place_of(st, run.index), lb.error());
  UnitResult u;
  UnitMetrics& m = u.metrics;
  m.attention_s = res->makespan_s;
  m.payload = cp->payload_bytes();
  m.control = cp->control_bytes();
  m.lb_s = lb->bound_s;
  m.lb_binding = lb->binding;
  const int P = g.ranks.ranks;
  std::vector<double> fl(static_cast<size_t>(P), 0.0);
  for (const auto& t : cp->tasks) fl[static_cast<size_t>(t.rank)] += t.flops;
  const double mean = std::accumulate(fl.begin(), fl.end(), 0.0) / P;
  m.imbalance = mean > 0 ? *std::max_element(fl.begin(), fl.end()) / mean : 1.0;
  m.resource_bytes.reserve(res->resources.size());
  for (const auto& r : res->resources) m.resource_bytes.push_back(r.bytes);
  if (trace_this) u.trace = sim::to_chrome_trace(*work, *res);
  if (run.plan) {
    policy::LayerPlan lp{step, layer, 1, std::move(*work), {}};
    lp.mask = plan_mask(masks);
    u.plan_layer = std::move(lp);
  }
  return u;
}

// One unit to simulate in a step: layer `li` of the selection for policy run `ri`.
struct Job {
  size_t li = 0, ri = 0;
  bool trace = false;
};

// The units of step `s` that need simulating, in the order a one-unit-at-a-time walk meets them
// (layer by layer, policy by policy): a unit whose mask group is cached, or met earlier in the
// step, reuses that unit's metrics. The first unit simulated of each policy keeps the trace.
std::vector<Job> jobs_of_step(const Group& g, int s, const RunOptions& opt,
                              const std::vector<PolicyRun>& runs) {
  std::vector<Job> jobs;
  std::vector<std::set<int64_t>> met(runs.size());
  std::vector<char> traced(runs.size(), 0);
  for (size_t li = 0; li < g.layers.size(); ++li) {
    const int64_t group = g.pattern->mask_group(s, g.layers[li]);
    for (size_t ri = 0; ri < runs.size(); ++ri) {
      if (runs[ri].cache.count(group) || !met[ri].insert(group).second) continue;
      const bool trace = opt.keep_trace && runs[ri].trace.empty() && !traced[ri];
      traced[ri] = traced[ri] || trace;
      jobs.push_back({li, ri, trace});
    }
  }
  return jobs;
}

// Every selected (step, layer) for every policy: a unit whose masks repeat an earlier unit's
// (same mask group) reuses its metrics and repeats its plan layer instead of simulating again.
// Step by step: the pattern makes the step's masks (in parallel), the units to simulate run in
// parallel (oneTBB), then their results are added in unit order, so every sum, plan and trace
// is the same, bit for bit, on any number of threads.
Status simulate_units(const Study& st, const Group& g, const patterns::ModelSpec& model,
                      const RunOptions& opt, std::vector<PolicyRun>& runs, Progress& progress) {
  auto& pattern = *g.pattern;
  const size_t heads = static_cast<size_t>(pattern.heads());
  for (int s : g.steps) {
    const std::vector<Job> jobs = jobs_of_step(g, s, opt, runs);
    if (!jobs.empty()) pattern.prepare_step(s, g.layers);
    std::vector<std::optional<Result<UnitResult>>> done(jobs.size());
    tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t j) {
      const int l = g.layers[jobs[j].li];
      std::vector<const patterns::BlockMask*> masks(heads);
      for (size_t h = 0; h < heads; ++h) masks[h] = &pattern.mask(s, l, static_cast<int>(h));
      done[j] = simulate_unit(st, g, model, masks, s, l, jobs[j].trace, runs[jobs[j].ri]);
    });
    size_t next = 0;
    for (size_t li = 0; li < g.layers.size(); ++li) {
      const int64_t group = pattern.mask_group(s, g.layers[li]);
      for (auto& run : runs) {
        auto hit = run.cache.find(group);
        if (hit != run.cache.end()) {
          run.acc.add(hit->second);
          if (run.plan) run.plan->layers[run.plan_index.at(group)].repeat++;
          continue;
        }
        auto& r = *done[next++];
        if (!r) return r.error();
        if (run.plan) {
          run.plan_index[group] = run.plan->layers.size();
          run.plan->layers.push_back(std::move(*r->plan_layer));
        }
        if (!r->trace.empty()) run.trace = std::move(r->trace);
        run.acc.add(r->metrics);
        run.acc.simulated++;
        run.cache.emplace(group, std::move(r->metrics));
      }
      progress.tick();
    }
    // Dynamic patterns never repeat a group across steps: drop the step's cache.
    if (g.dynamic)
      for (auto& run : runs) run.cache.clear();
  }
  return Ok{};
}

// A policy's figures from its sums: per-layer means, per-step and end-to-end extrapolation to
// the model's layers and steps, the binding resource and the busiest link.
PolicyResult summarise(const Study& st, const Group& g, const patterns::ModelSpec& model,
                       PolicyRun& run) {
  const auto& pattern = *g.pattern;
  const auto& a = run.acc;
  const double nlayers_model = pattern.layers();
  const double nsteps_model = pattern.steps();
  PolicyResult r;
  r.topology = g.topo->name();
  r.policy = st.policies[run.index];
  const double u = static_cast<double>(std::max<int64_t>(1, a.units));
  r.attention_time_s = a.attention_s / u;
  r.lower_bound_s = a.lb_s / u;
  r.compute_imbalance = a.imbalance / u;
  r.volume_bytes = a.payload / u * nlayers_model;
  r.control_bytes = a.control / u * nlayers_model;
  std::vector<double> tok(static_cast<size_t>(g.ranks.ranks), 0.0);
  const auto& lay = pattern.layout();
  for (int k = 0; k < lay.num_blocks; ++k)
    tok[static_cast<size_t>(run.placement->block_owner[static_cast<size_t>(k)])] +=
        lay.tokens_in_block[static_cast<size_t>(k)];
  const double max_tokens = *std::max_element(tok.begin(), tok.end());
  r.other_time_s = g.compute.other_time_s(model, max_tokens);
  r.step_time_s = (r.attention_time_s + r.other_time_s) * nlayers_model;
  {
    const auto pt =
        pipeline_times(model.pipeline, r.step_time_s * nsteps_model, static_cast<int>(nsteps_model),
                       g.topo->gpu(g.gpus[0]), g.compute.gemm_efficiency, g.ranks.ranks);
    r.denoise_time_s = pt.denoise_s;
    r.e2e_time_s = pt.e2e_s;
    r.not_modelled = pt.not_modelled;
    if (run.plan) {
      run.plan->policy.params[std::string(kPlanPipelineKey)] = pt.e2e_s - pt.denoise_s;
      run.plan->policy.params[std::string(kPlanCfgKey)] = pt.cfg_forwards;
      int stages = 0;
      for (int b = 0; b < 4; ++b)
        if (std::find(pt.not_modelled.begin(), pt.not_modelled.end(), kPipelineStageNames[b]) !=
            pt.not_modelled.end())
          stages |= 1 << b;
      if (stages) run.plan->policy.params[std::string(kPlanNotModelledKey)] = stages;
    }
  }
  int64_t best = -1;
  for (const auto& [b, c] : a.binding_count)
    if (c > best) {
      best = c;
      r.lower_bound_binding = b;
    }
  const auto& resources = g.topo->resources();
  for (size_t i = 0; i < a.resource_bytes.size() && i < resources.size(); ++i) {
    if (resources[i].capacity_Bps <= 0 || a.attention_s <= 0) continue;
    const double util = a.resource_bytes[i] / resources[i].capacity_Bps / a.attention_s;
    if (util > r.busiest_utilization) {
      r.busiest_utilization = util;
      r.busiest_link = resources[i].name;
    }
  }
  r.units = a.units;
  r.simulated = a.simulated;
  r.compute_source = g.compute_source;
  if (run.plan) {
    // What retime_plan needs to give the same step/e2e figures (policy/PLAN.md, policy params).
    run.plan->policy.params[std::string(kPlanOtherTimeKey)] = r.other_time_s;
    run.plan->policy.params[std::string(kPlanLayersKey)] = nlayers_model;
    run.plan->policy.params[std::string(kPlanStepsKey)] = nsteps_model;
    run.plan->policy.params[std::string(kPlanImbalanceKey)] = r.compute_imbalance;
    // Measured contention (sim::SimOptions defaults otherwise: 0 and -1, not written, so plans
    // of studies without measured_compute.contention are unchanged).
    if (g.contention_ce_copy > 0)
      run.plan->policy.params[std::string(kPlanContentionCeKey)] = g.contention_ce_copy;
    if (g.contention_sm_copy_per_sm >= 0)
      run.plan->policy.params[std::string(kPlanContentionSmKey)] = g.contention_sm_copy_per_sm;
  }
  r.plan = run.plan;
  r.trace_json = std::move(run.trace);
  return r;
}

// Speedups and volume of the results [first, end) of one topology against its baseline.
void relate_to_baseline(std::vector<PolicyResult>& results, size_t first, size_t baseline_at) {
  const auto& base = results[baseline_at];
  const double be2e = base.e2e_time_s, batt = base.attention_time_s, bvol = base.volume_bytes;
  const double bden = base.denoise_time_s;
  for (size_t i = first; i < results.size(); ++i) {
    auto& r = results[i];
    // x / 0 has no value: NaN, printed '-' (table), null (JSON), empty (CSV); never a made-up 1.
    constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    r.speedup = r.e2e_time_s > 0 ? be2e / r.e2e_time_s : kNone;
    r.denoise_speedup = r.denoise_time_s > 0 ? bden / r.denoise_time_s : kNone;
    r.attention_speedup = r.attention_time_s > 0 ? batt / r.attention_time_s : kNone;
    r.volume_vs_baseline = bvol > 0 ? r.volume_bytes / bvol : kNone;
  }
}

}  // namespace

PipelineTimes pipeline_times(const patterns::Pipeline& p, double loop_s, int steps,
                             const topology::GpuSpec& gpu, double gemm_efficiency, int ranks) {
  PipelineTimes t;
  t.cfg_forwards = p.cfg_forwards();
  if (p.cfg.empty()) t.not_modelled.push_back("cfg");
  t.denoise_s = loop_s * t.cfg_forwards;
  auto stage = [&](const patterns::PipelineStage& s, const char* name) {
    for (const auto& [model, sec] : s.time_s)
      if (model == gpu.model) return sec;
    const double eff = s.efficiency > 0 ? s.efficiency : gemm_efficiency;
    if (s.flops > 0 && gpu.peak_bf16_flops > 0 && eff > 0)
      return s.flops / (gpu.peak_bf16_flops * eff);
    t.not_modelled.push_back(name);
    return 0.0;
  };
  t.text_encoder_s = stage(p.text_encoder, "text_encoder");
  t.vae_decode_s = stage(p.vae_decode, "vae_decode");
  if (p.vae_decode.split && ranks > 1) t.vae_decode_s /= ranks;
  if (p.scheduler_overhead_s >= 0)
    t.scheduler_s = p.scheduler_overhead_s * steps;
  else
    t.not_modelled.push_back("scheduler");
  t.e2e_s = t.denoise_s + t.text_encoder_s + t.vae_decode_s + t.scheduler_s;
  return t;
}

// A pipeline stage's time_s keys name GPU models by the registry's full name ("NVIDIA L40", as
// topologies resolve theirs): an alias or an unknown name would never match a topology's GPU,
// and the stage would count 0 s without a word.
static Status check_pipeline_gpus(const patterns::ModelSpec& m, const std::string& src) {
  const std::pair<const char*, const patterns::PipelineStage*> stages[] = {
      {"text_encoder", &m.pipeline.text_encoder}, {"vae_decode", &m.pipeline.vae_decode}};
  for (const auto& [name, stage] : stages)
    for (const auto& [gpu, sec] : stage->time_s) {
      const std::string place = std::string("/pipeline/") + name + "/time_s/" + gpu;
      const auto g = topology::find_gpu_model(gpu);
      if (!g)
        return input_error(src, place,
                           "unknown GPU model '" + gpu + "' (configs/gpus lists the known ones)");
      if (g->model != gpu)
        return input_error(src, place, "write the GPU model's full name '" + g->model + "'");
    }
  return Ok{};
}

Result<StudyResult> run_study(const Study& st, const RunOptions& opt) {
  auto model = st.model_json.empty() ? patterns::load_model(st.model)
                                     : patterns::parse_model(st.model_json, st.model);
  if (!model) return at(st, "/model", model.error());
  if (auto s = check_pipeline_gpus(*model, st.model); !s) return at(st, "/model", s.error());
  StudyResult out;
  out.name = st.name;
  out.model = model->name;
  if (st.policies.empty()) return input_at(st, "/policies", "no policy to simulate");
  // A policy twice (also as skip_empty=1 and skip_empty=1.0) gave duplicate rows, and its
  // second plan and trace files overwrote the first.
  for (size_t j = 1; j < st.policies.size(); ++j)
    for (size_t i = 0; i < j; ++i)
      if (policy_label(st.policies[i]) == policy_label(st.policies[j]))
        return input_at(
            st, place_of(st, j),
            "the same policy as " + place_of(st, i) + " (" + policy_label(st.policies[j]) + ")");
  auto baseline = find_baseline(st);
  if (!baseline) return baseline.error();
  out.baseline = policy_label(st.policies[*baseline]);
  auto topos = load_topologies(st, *model, *baseline);
  if (!topos) return topos.error();
  if (auto s = check_memory(st, *model, opt.max_memory_bytes, opt.memory_remedy); !s)
    return s.error();
  Progress progress{opt};
  for (size_t ti = 0; ti < st.topologies.size(); ++ti) {
    auto g = open_group(st, std::move((*topos)[ti]), *model);
    if (!g) return g.error();
    if (ti == 0) out.gpus = g->ranks.ranks;
    out.gpus_per_topology.emplace_back(g->topo->name(), g->ranks.ranks);
    out.pattern = g->pattern->describe();
    out.dynamic = g->dynamic;
    if (ti == 0)
      progress.total =
          static_cast<int64_t>(st.topologies.size() * g->steps.size() * g->layers.size());
    auto runs = runnable_policies(st, *g, *model, *baseline, out.skipped);
    if (!runs) return runs.error();
    std::map<std::string, policy::Placement> placement_cache;
    if (auto s = place_blocks(st, *g, *model, *runs, placement_cache); !s) return s.error();
    if (opt.keep_plans)
      for (auto& run : *runs) run.plan = plan_header(st, *g, *model, run);
    if (auto s = simulate_units(st, *g, *model, opt, *runs, progress); !s) return s.error();
    const size_t first = out.policies.size();
    size_t baseline_at = first;
    for (auto& run : *runs) {
      if (run.index == *baseline) baseline_at = out.policies.size();
      out.policies.push_back(summarise(st, *g, *model, run));
    }
    relate_to_baseline(out.policies, first, baseline_at);
  }
  return out;
}

}  // namespace sparsp::study
