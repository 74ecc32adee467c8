// run_study: pattern -> placement -> scheme -> runtime -> engine, per (step, layer) and policy,
// with exact reuse of identical (step, layer) workloads and step-by-step streaming.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "sparsp/study.hpp"
#include "internal.hpp"

namespace sparsp::study {

std::string policy_label(const policy::PolicySpec& p) {
  std::string s = p.name();
  char sep = ':';
  for (const auto& [k, v] : p.params) {
    std::ostringstream o;
    o << v;
    s += sep + k + "=" + o.str();
    sep = ',';
  }
  return s;
}

namespace {

struct UnitMetrics {
  double attention_s = 0;
  double payload = 0;
  double control = 0;
  double lb_s = 0;
  std::string lb_binding;
  double imbalance = 1;
  std::vector<double> resource_bytes;
};

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
    if (resource_bytes.size() < m.resource_bytes.size()) resource_bytes.resize(m.resource_bytes.size(), 0.0);
    for (size_t i = 0; i < m.resource_bytes.size(); ++i) resource_bytes[i] += m.resource_bytes[i];
    ++units;
  }
};

std::string place_of(const Study& s, size_t i) {
  return i < s.policy_places.size() ? s.policy_places[i] : "/policies/" + std::to_string(i);
}

Error at(const Study& s, const std::string& place, const Error& e) {
  return Error{s.source + ":" + place + ": " + e.message, e.exit_code};
}

Result<std::unique_ptr<patterns::Pattern>> open_pattern(const Study& s, const patterns::ModelSpec& model) {
  if (s.pattern.kind == "file") {
    auto p = patterns::load_pattern(s.pattern.input, &model, s.pattern);
    if (!p) return at(s, "/pattern", p.error());
    return p;
  }
  auto p = patterns::make_pattern(model, s.pattern);
  if (!p) return at(s, "/pattern", p.error());
  return p;
}

}  // namespace

Result<StudyResult> run_study(const Study& st, const RunOptions& opt) {
  auto model = patterns::load_model(st.model);
  if (!model) return at(st, "/model", model.error());
  StudyResult out;
  out.name = st.name;
  out.model = model->name;
  if (st.policies.empty()) return input_error(st.source, "/policies", "no policy to simulate");
  // Baseline.
  int baseline = 0;
  if (!st.baseline.empty()) {
    baseline = -1;
    for (size_t i = 0; i < st.policies.size() && baseline < 0; ++i)
      if (policy_label(st.policies[i]) == st.baseline) baseline = static_cast<int>(i);
    if (auto spec = policy::parse_policy(st.baseline); spec)
      for (size_t i = 0; i < st.policies.size() && baseline < 0; ++i)
        if (st.policies[i].name() == spec->name() && st.policies[i].params == spec->params)
          baseline = static_cast<int>(i);
    for (size_t i = 0; i < st.policies.size() && baseline < 0; ++i)
      if (st.policies[i].name() == st.baseline) baseline = static_cast<int>(i);
    if (baseline < 0)
      return input_error(st.source, "/baseline", "baseline '" + st.baseline + "' is not one of the policies");
  }
  out.baseline = policy_label(st.policies[static_cast<size_t>(baseline)]);
  int64_t units_done = 0, units_total = 0;  // progress over (topology, step, layer)

  for (size_t ti = 0; ti < st.topologies.size(); ++ti) {
    auto topo = topology::Topology::load(st.topologies[ti]);
    if (!topo) return at(st, "/topology", topo.error());
    // The group's GPUs.
    std::vector<int> gpus = st.gpus;
    if (gpus.empty()) {
      const int n = st.num_gpus > 0 ? st.num_gpus : topo->num_gpus();
      for (int g = 0; g < n; ++g) gpus.push_back(g);
    }
    auto rt = policy::rank_topology(*topo, gpus);
    if (!rt) return at(st, "/gpus", rt.error());
    const int P = rt->ranks;
    out.gpus = P;
    // A fresh pattern per topology: dynamic patterns are streamed from step 0 each time.
    auto pat = open_pattern(st, *model);
    if (!pat) return pat.error();
    auto& pattern = **pat;
    out.pattern = pattern.describe();
    std::vector<int> steps = st.steps, layers = st.layers;
    if (steps.empty()) {
      steps.resize(static_cast<size_t>(pattern.steps()));
      std::iota(steps.begin(), steps.end(), 0);
    }
    if (layers.empty()) {
      layers.resize(static_cast<size_t>(pattern.layers()));
      std::iota(layers.begin(), layers.end(), 0);
    }
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    if (ti == 0)
      units_total = static_cast<int64_t>(st.topologies.size() * steps.size() * layers.size());
    for (int s : steps)
      if (s >= pattern.steps())
        return input_error(st.source, "/steps", "step " + std::to_string(s) + " outside the pattern's " +
                                                    std::to_string(pattern.steps()) + " steps");
    for (int l : layers)
      if (l >= pattern.layers())
        return input_error(st.source, "/layers", "layer " + std::to_string(l) + " outside the pattern's " +
                                                     std::to_string(pattern.layers()) + " layers");
    if (pattern.heads() != model->heads)
      return input_error(st.source, "/pattern", "pattern has " + std::to_string(pattern.heads()) +
                                                    " heads, model " + std::to_string(model->heads));
    bool dynamic = false;
    for (int l : layers)
      for (int s : steps)
        if (pattern.mask_group(s, l) != pattern.mask_group(steps[0], l)) dynamic = true;
    out.dynamic = dynamic;
    // Compute model.
    policy::ComputeModel cm = policy::compute_model_for(topo->gpu(gpus[0]));
    if (st.attention_efficiency > 0) cm.attention_efficiency = st.attention_efficiency;
    if (st.gemm_efficiency > 0) cm.gemm_efficiency = st.gemm_efficiency;
    // Policies against this group (comm_sms vs the GPU's SMs, a real Ulysses degree for USP).
    {
      int sms = 0;
      for (int g : gpus) {
        const int c = topo->gpu(g).sm_count;
        if (c > 0) sms = sms > 0 ? std::min(sms, c) : c;
      }
      for (size_t pi = 0; pi < st.policies.size(); ++pi)
        if (auto chk = policy::check_policy_on(st.policies[pi], P, model->heads, sms); !chk)
          return at(st, place_of(st, pi), chk.error());
    }
    // Placements (one per distinct placement + parameters).
    const policy::BlockGraph graph = policy::block_graph(pattern);
    std::map<std::string, policy::Placement> placement_cache;
    std::vector<const policy::Placement*> placement_of(st.policies.size());
    for (size_t pi = 0; pi < st.policies.size(); ++pi) {
      const auto& spec = st.policies[pi];
      std::map<std::string, double> pp;
      for (const char* k : {"tolerance", "locality"})
        if (spec.params.count(k)) pp[k] = spec.params.at(k);
      std::string key = spec.placement;
      for (const auto& [k, v] : pp) key += "," + k + "=" + std::to_string(v);
      auto it = placement_cache.find(key);
      if (it == placement_cache.end()) {
        policy::PlacementContext ctx{&graph, &*rt, model->heads, pp};
        auto pl = policy::make_placement(spec.placement, ctx);
        if (!pl) return at(st, place_of(st, pi), pl.error());
        it = placement_cache.emplace(key, std::move(*pl)).first;
      }
      placement_of[pi] = &it->second;
    }
    // Per-policy state.
    const size_t NP = st.policies.size();
    std::vector<Accum> acc(NP);
    std::vector<std::map<int64_t, UnitMetrics>> cache(NP);
    std::vector<std::shared_ptr<policy::Plan>> plans(NP);
    std::vector<std::map<int64_t, size_t>> plan_index(NP);
    std::vector<std::string> traces(NP);
    if (opt.keep_plans)
      for (size_t pi = 0; pi < NP; ++pi) {
        auto p = std::make_shared<policy::Plan>();
        p->topology_json = topo->to_json();
        p->model = model->name;
        p->pattern = pattern.describe();
        p->gpus = P;
        p->block_tokens = pattern.layout().block_tokens;
        p->heads = model->heads;
        p->head_dim = model->head_dim;
        p->dtype_bytes = model->dtype_bytes;
        p->num_blocks = pattern.layout().num_blocks;
        p->kv_block_bytes = 2.0 * pattern.layout().block_tokens * model->heads * model->head_dim *
                            model->dtype_bytes;
        // Blocks of unequal size (tile padding, partial tiles) other than the last one need
        // per-block sizes so that replay can verify each block (sim/PLAN.md).
        const auto& tokens = pattern.layout().tokens_in_block;
        const double per_token = 2.0 * model->heads * model->head_dim * model->dtype_bytes;
        bool ragged = false;
        for (size_t b = 0; b + 1 < tokens.size(); ++b)
          ragged = ragged || tokens[b] != pattern.layout().block_tokens;
        if (ragged)
          for (int t : tokens) p->block_bytes.push_back(per_token * t);
        p->policy = st.policies[pi];
        p->block_owner = placement_of[pi]->block_owner;
        plans[pi] = std::move(p);
      }
    std::vector<const patterns::BlockMask*> masks(static_cast<size_t>(pattern.heads()));
    for (int s : steps) {
      for (int l : layers) {
        const int64_t group = pattern.mask_group(s, l);
        bool masks_loaded = false;
        for (size_t pi = 0; pi < NP; ++pi) {
          auto hit = cache[pi].find(group);
          if (hit != cache[pi].end()) {
            acc[pi].add(hit->second);
            if (plans[pi]) plans[pi]->layers[plan_index[pi].at(group)].repeat++;
            continue;
          }
          if (!masks_loaded) {
            for (int h = 0; h < pattern.heads(); ++h) masks[static_cast<size_t>(h)] = &pattern.mask(s, l, h);
            masks_loaded = true;
          }
          const auto& spec = st.policies[pi];
          policy::LayerInput in;
          in.model = &*model;
          in.layout = &pattern.layout();
          in.masks = masks;
          in.placement = placement_of[pi];
          in.ranks = &*rt;
          in.granularity = st.granularity;
          in.dynamic = dynamic;
          in.layer = l;
          in.step = s;
          auto cp = policy::make_scheme(spec.scheme, in, spec.params);
          if (!cp) return at(st, place_of(st, pi), cp.error());
          auto work = policy::make_workload(spec.runtime, *cp, *rt, cm, spec.params, l);
          if (!work) return at(st, place_of(st, pi), work.error());
          sim::SimOptions so = st.sim;
          const bool trace_this = opt.keep_trace && traces[pi].empty();
          so.record_resource_timeline = trace_this;
          auto res = sim::simulate(*topo, *work, so);
          if (!res) return at(st, place_of(st, pi), res.error());
          auto lb = sim::lower_bound(*topo, *work);
          if (!lb) return at(st, place_of(st, pi), lb.error());
          UnitMetrics m;
          m.attention_s = res->makespan_s;
          m.payload = cp->payload_bytes();
          m.control = cp->control_bytes();
          m.lb_s = lb->bound_s;
          m.lb_binding = lb->binding;
          std::vector<double> fl(static_cast<size_t>(P), 0.0);
          for (const auto& t : cp->tasks) fl[static_cast<size_t>(t.rank)] += t.flops;
          const double mean = std::accumulate(fl.begin(), fl.end(), 0.0) / P;
          m.imbalance = mean > 0 ? *std::max_element(fl.begin(), fl.end()) / mean : 1.0;
          m.resource_bytes.reserve(res->resources.size());
          for (const auto& r : res->resources) m.resource_bytes.push_back(r.bytes);
          if (trace_this) traces[pi] = sim::to_chrome_trace(*work, *res);
          acc[pi].add(m);
          acc[pi].simulated++;
          if (plans[pi]) {
            plan_index[pi][group] = plans[pi]->layers.size();
            plans[pi]->layers.push_back(policy::LayerPlan{s, l, 1, std::move(*work)});
          }
          cache[pi].emplace(group, std::move(m));
        }
        if (opt.progress) opt.progress(++units_done, units_total);
      }
      // Dynamic patterns never repeat a group across steps: drop the step's cache.
      if (dynamic)
        for (auto& c : cache) c.clear();
    }
    // Results.
    const size_t first = out.policies.size();
    const double nlayers_model = pattern.layers();
    const double nsteps_model = pattern.steps();
    for (size_t pi = 0; pi < NP; ++pi) {
      const auto& a = acc[pi];
      PolicyResult r;
      r.topology = topo->name();
      r.policy = st.policies[pi];
      const double u = static_cast<double>(std::max<int64_t>(1, a.units));
      r.attention_time_s = a.attention_s / u;
      r.lower_bound_s = a.lb_s / u;
      r.compute_imbalance = a.imbalance / u;
      r.volume_bytes = a.payload / u * nlayers_model;
      r.control_bytes = a.control / u * nlayers_model;
      double max_tokens = 0;
      {
        std::vector<double> tok(static_cast<size_t>(P), 0.0);
        const auto& lay = pattern.layout();
        for (int k = 0; k < lay.num_blocks; ++k)
          tok[static_cast<size_t>(placement_of[pi]->block_owner[static_cast<size_t>(k)])] +=
              lay.tokens_in_block[static_cast<size_t>(k)];
        max_tokens = *std::max_element(tok.begin(), tok.end());
      }
      r.other_time_s = cm.other_time_s(*model, max_tokens);
      r.step_time_s = (r.attention_time_s + r.other_time_s) * nlayers_model;
      r.e2e_time_s = r.step_time_s * nsteps_model;
      int64_t best = -1;
      for (const auto& [b, c] : a.binding_count)
        if (c > best) {
          best = c;
          r.lower_bound_binding = b;
        }
      const auto& resources = topo->resources();
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
      if (plans[pi]) {
        // What retime_plan needs to give the same step/e2e figures (sim/PLAN.md, policy params).
        plans[pi]->policy.params[std::string(kPlanOtherTimeKey)] = r.other_time_s;
        plans[pi]->policy.params[std::string(kPlanLayersKey)] = nlayers_model;
        plans[pi]->policy.params[std::string(kPlanStepsKey)] = nsteps_model;
        plans[pi]->policy.params[std::string(kPlanImbalanceKey)] = r.compute_imbalance;
      }
      r.plan = plans[pi];
      r.trace_json = std::move(traces[pi]);
      out.policies.push_back(std::move(r));
    }
    const auto& base = out.policies[first + static_cast<size_t>(baseline)];
    const double be2e = base.e2e_time_s, batt = base.attention_time_s, bvol = base.volume_bytes;
    for (size_t i = first; i < out.policies.size(); ++i) {
      auto& r = out.policies[i];
      r.speedup = r.e2e_time_s > 0 ? be2e / r.e2e_time_s : 1;
      r.attention_speedup = r.attention_time_s > 0 ? batt / r.attention_time_s : 1;
      r.volume_vs_baseline = bvol > 0 ? r.volume_bytes / bvol : 1;
    }
  }
  return out;
}

}  // namespace sparsp::study
