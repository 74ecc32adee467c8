// retime_plan(): a plan's layer workloads re-simulated as written, reported as a one-policy study
// (`sparsp simulate --plan`).
#include <algorithm>
#include <map>

#include "internal.hpp"
#include "sparsp/study.hpp"

namespace sparsp::study {

Result<StudyResult> retime_plan(const policy::Plan& pl, const sim::SimOptions& options,
                                const RunOptions& run) {
  if (pl.topology_json.empty())
    return Error{
        "the plan has no embedded topology (\"topology\": null), so it cannot be re-timed "
        "as written; hand-made plans are timed with `sparsp validate --topology T` "
        "against a replay trace",
        2};
  auto topo = topology::Topology::from_json_text(pl.topology_json, "<plan topology>");
  if (!topo) return topo.error();
  StudyResult out;
  out.model = pl.model;
  out.pattern = pl.pattern;
  out.gpus = pl.gpus;
  out.baseline = policy_label(pl.policy);
  PolicyResult r;
  r.topology = topo->name();
  r.policy = pl.policy;
  // The compute tasks keep the times the study gave them; say where those came from.
  r.compute_source = pl.compute_source.empty()
                         ? "as written in the plan (it records no compute_source)"
                         : pl.compute_source + " (as written in the plan)";
  // The contention the study simulated with (kPlanContention*Key), else the caller's options.
  sim::SimOptions base = options;
  {
    auto ce = r.policy.params.find(kPlanContentionCeKey);
    if (ce != r.policy.params.end()) {
      base.contention_ce_copy = ce->second;
      r.policy.params.erase(ce);
    }
    auto sm = r.policy.params.find(kPlanContentionSmKey);
    if (sm != r.policy.params.end()) {
      base.contention_sm_copy_per_sm = sm->second;
      r.policy.params.erase(sm);
    }
  }
  double att = 0, lb = 0, vol = 0, units_n = 0;
  std::map<std::string, int64_t> binding;
  std::vector<double> res_bytes;
  for (const auto& lp : pl.layers) {
    sim::SimOptions so = base;
    const bool trace_this = run.keep_trace && r.trace_json.empty();
    so.record_resource_timeline = so.record_resource_timeline || trace_this;
    auto res = sim::simulate(*topo, lp.work, so);
    if (!res) return res.error();
    if (trace_this) r.trace_json = sim::to_chrome_trace(lp.work, *res);
    auto b = sim::lower_bound(*topo, lp.work);
    if (!b) return b.error();
    const double rep = static_cast<double>(lp.repeat);
    att += rep * res->makespan_s;
    lb += rep * b->bound_s;
    binding[b->binding] += lp.repeat;
    for (const auto& t : lp.work.transfers)  // deliveries to GPUs; discovery traffic apart
      if (t.dst.rfind("gpu", 0) == 0 && t.id.find(".summary.") == std::string::npos &&
          t.id.find(".index.") == std::string::npos)
        vol += rep * t.bytes;
    res_bytes.resize(res->resources.size(), 0.0);
    for (size_t i = 0; i < res->resources.size(); ++i)
      res_bytes[i] += rep * res->resources[i].bytes;
    units_n += rep;
    r.simulated++;
  }
  const double u = std::max(1.0, units_n);
  r.units = static_cast<int64_t>(units_n);
  r.attention_time_s = att / u;
  r.lower_bound_s = lb / u;
  int64_t best = -1;
  for (const auto& [k, c] : binding)
    if (c > best) {
      best = c;
      r.lower_bound_binding = k;
    }
  // Per-step figures: non-attention work and the layers/steps to extrapolate to as the study
  // that wrote the plan stored them (policy params, kPlan*Key); otherwise from the model preset
  // named in the plan, attention phase only; without a known model, the plan's total.
  auto model = patterns::load_model(pl.model);
  double layers = model ? model->layers : u;
  double steps = model ? model->steps : 1;
  auto take = [&](const char* key, double& v) {
    auto it = r.policy.params.find(key);
    if (it == r.policy.params.end()) return;
    v = it->second;
    r.policy.params.erase(it);
  };
  take(kPlanOtherTimeKey, r.other_time_s);
  take(kPlanLayersKey, layers);
  take(kPlanStepsKey, steps);
  take(kPlanImbalanceKey, r.compute_imbalance);
  double pipeline_s = 0, cfg = 1;
  take(kPlanPipelineKey, pipeline_s);
  take(kPlanCfgKey, cfg);
  double stages = 0;
  take(kPlanNotModelledKey, stages);
  for (int b = 0; b < 4; ++b)
    if (static_cast<int>(stages) & (1 << b)) r.not_modelled.push_back(kPipelineStageNames[b]);
  out.baseline = policy_label(r.policy);
  r.volume_bytes = vol / u * layers;
  r.step_time_s = (r.attention_time_s + r.other_time_s) * layers;
  r.denoise_time_s = r.step_time_s * steps * cfg;
  r.e2e_time_s = r.denoise_time_s + pipeline_s;
  const auto& resources = topo->resources();
  for (size_t i = 0; i < res_bytes.size() && i < resources.size(); ++i) {
    if (resources[i].capacity_Bps <= 0 || att <= 0) continue;
    const double util = res_bytes[i] / resources[i].capacity_Bps / att;
    if (util > r.busiest_utilization) {
      r.busiest_utilization = util;
      r.busiest_link = resources[i].name;
    }
  }
  out.policies.push_back(std::move(r));
  return out;
}

}  // namespace sparsp::study
