// validate: re-simulate every layer plan and compare with a replay trace; and the latency /
// bandwidth least-squares fit used by calibrate.
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "calibrate_topology.hpp"
#include "exec_plan.hpp"
#include "sparsp/units.hpp"

namespace sparsp::replay {

using Json = nlohmann::ordered_json;

namespace {
double rel_error(double simulated, double measured) {
  return measured > 0 ? std::abs(simulated - measured) / measured : 0.0;
}
std::string fmt_bytes(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", b);
  return buf;
}
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Linear interpolation between closest ranks (numpy's default).
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}
}  // namespace

Result<ValidateReport> validate(const policy::Plan& plan, const ReplayResult& trace,
                                const ValidateOptions& opt) {
  const std::string& plan_file = opt.plan_source;
  const std::string& trace_file = opt.trace_source;
  // Nested documents (the embedded topology, a layer plan's workload) are parsed and simulated
  // under a marker name; their errors are re-addressed into the plan file.
  const std::string marker = "\x1fvalidate-nested";
  Result<topology::Topology> topo =
      opt.topology_path.empty()
          ? (plan.topology_json.empty()
                 ? Result<topology::Topology>(
                       input_error(plan_file, "/topology",
                                   "the plan has no embedded topology; pass --topology"))
                 : topology::Topology::from_json_text(plan.topology_json, marker))
          : topology::Topology::load(opt.topology_path);
  if (!topo) return rebase_error(topo.error(), marker, plan_file, "/topology");
  if (topo->num_gpus() < plan.gpus) {
    const std::string what = "topology " + topo->name() + " has " +
                             std::to_string(topo->num_gpus()) + " GPUs; the plan needs " +
                             std::to_string(plan.gpus) + " (" + plan_file + ":/gpus)";
    return opt.topology_path.empty() ? input_error(plan_file, "/topology", what)
                                     : input_error(opt.topology_path, "", what);
  }
  // --no-compute is for traces of replay --no-compute that do not record it; on a trace that
  // says it computed, the model without compute made every compute error 100 % (compute_mape 1).
  if (opt.no_compute && trace.compute_recorded && trace.compute != "none")
    return input_error("<command line>", "--no-compute",
                       trace_file + " records compute \"" + trace.compute +
                           "\" (the replay computed); --no-compute is for traces of replay "
                           "--no-compute that do not say so");
  // The trace names the plan it replayed (when it records it): refuse another plan's trace.
  if (trace.gpus > 0 && trace.gpus != plan.gpus)
    return input_error(trace_file, "/gpus",
                       std::to_string(trace.gpus) + " ranks, the plan (" + plan_file + ") has " +
                           std::to_string(plan.gpus));
  if (!trace.model.empty() && trace.model != plan.model)
    return input_error(trace_file, "/model",
                       "\"" + trace.model + "\", the plan (" + plan_file + ") is for \"" +
                           plan.model + "\"");
  if (!trace.policy.empty() && trace.policy != plan.policy.name())
    return input_error(trace_file, "/policy",
                       "\"" + trace.policy + "\", the plan (" + plan_file + ") is \"" +
                           plan.policy.name() + "\"");
  if (trace.layers.size() > plan.layers.size())
    return input_error(trace_file, "/layers",
                       "the trace has " + std::to_string(trace.layers.size()) +
                           " layer plans, the plan (" + plan_file + ") only " +
                           std::to_string(plan.layers.size()));
  ValidateReport rep;
  rep.topology_name = topo->name();
  std::vector<double> compute_errs;
  sim::SimOptions sim_opt = opt.sim;
  // Ranks folded onto one device (--devices 0,0,...) share its compute, and its kernels queue
  // first come first served as the replay's do (sim/README.md, "Compute").
  if (static_cast<int>(trace.devices.size()) == plan.gpus &&
      std::set<int>(trace.devices.begin(), trace.devices.end()).size() < trace.devices.size())
    sim_opt.compute_device = trace.devices;
  // Real compute: each attention task's active FLOPs (the replay's own lowering) at the
  // topology's measured rate of the sparsp kernel (calibrate's measured_compute entry).
  std::optional<std::vector<std::vector<double>>> real_flops;
  double real_rate_flops = 0, real_launch_s = 0;
  if (trace.compute == "real" && !opt.no_compute) {
    const topology::MeasuredCompute* mc = nullptr;
    for (const auto& m : topo->options().measured_compute)
      if (m.kernel == "sparsp" && m.head_dim == plan.head_dim &&
          !m.attention_flops_by_block.empty() && m.gpu_model == topo->gpu(0).model) {
        mc = &m;
        break;
      }
    if (!mc) {
      rep.compute_source =
          "plan (the topology has no measured_compute entry of kernel sparsp "
          "for " +
          topo->gpu(0).model + " at head_dim " + std::to_string(plan.head_dim) + ")";
    } else {
      const auto& pts = mc->attention_flops_by_block;
      const double x = std::max(1, plan.block_tokens);
      real_rate_flops = pts.back().second;
      if (x <= pts.front().first) real_rate_flops = pts.front().second;
      for (size_t i = 1; i < pts.size(); ++i)
        if (x > pts[i - 1].first && x <= pts[i].first) {
          const double x0 = std::log2(pts[i - 1].first), x1 = std::log2(pts[i].first);
          real_rate_flops = pts[i - 1].second +
                            (std::log2(x) - x0) / (x1 - x0) * (pts[i].second - pts[i - 1].second);
          break;
        }
      real_launch_s = std::max(0.0, mc->launch_overhead_s);
      ReplayOptions lo;
      lo.compute = ComputeMode::real;
      // The FLOPs only, not a run: the host backend's size bound (kHostRealComputeMaxFlops)
      // does not apply to a trace the CUDA backend made.
      lo.backend = trace.backend.empty() ? "cuda" : trace.backend;
      lo.max_layers = static_cast<int>(trace.layers.size());
      auto ex = detail::lower(plan, lo);
      if (!ex) return ex.error();
      real_flops.emplace();
      for (const auto& el : ex->layers) {
        const auto& L = plan.layers[static_cast<size_t>(el.plan_index)];
        std::vector<double> f(L.work.compute.size(), -1.0);
        for (const auto& w : el.attn)
          f[static_cast<size_t>(w.act) - L.work.transfers.size()] = w.flops;
        real_flops->push_back(std::move(f));
      }
      rep.compute_source = "measured_compute " + mc->place + " (kernel sparsp, " +
                           std::to_string(real_rate_flops / 1e12) + " TFLOP/s at block " +
                           std::to_string(plan.block_tokens) + ")";
    }
  }
  // Real GEMMs (cuBLAS in the replay): count x 2 m n k at the topology's measured GEMM rate
  // (measured_compute gemm_TFLOPs of the GPU model, calibrate's cuBLAS figure) plus the launch
  // overhead per GEMM. Without such a figure the plan's duration_s stays.
  double gemm_rate_flops = 0, gemm_launch_s = 0;
  if (trace.compute == "real" && !opt.no_compute) {
    for (const auto& m : topo->options().measured_compute)
      if (m.gemm_flops > 0 && m.gpu_model == topo->gpu(0).model) {
        gemm_rate_flops = m.gemm_flops;
        gemm_launch_s = std::max(0.0, m.launch_overhead_s);
        rep.compute_source += std::string(rep.compute_source.empty() ? "" : "; ") +
                              "gemm: measured_compute " + m.place + " (" +
                              std::to_string(m.gemm_flops / 1e12) + " TFLOP/s)";
        break;
      }
  }
  std::vector<double> errs;
  std::vector<TransferError> all;
  std::vector<double> mk_errs;
  for (size_t li = 0; li < trace.layers.size(); ++li) {
    const policy::LayerPlan& L = plan.layers[li];
    const LayerReplay& R = trace.layers[li];
    const std::string layer_ptr = "/layers/" + std::to_string(li);
    if (R.step != L.step || R.layer != L.layer)
      return input_error(trace_file, layer_ptr,
                         "layer plan is (step " + std::to_string(R.step) + ", layer " +
                             std::to_string(R.layer) + "), the plan's (" + plan_file + ":" +
                             layer_ptr + ") is (step " + std::to_string(L.step) + ", layer " +
                             std::to_string(L.layer) + ")");
    if (R.repeat != L.repeat)
      return input_error(trace_file, layer_ptr + "/repeat",
                         std::to_string(R.repeat) + ", the plan's (" + plan_file + ":" + layer_ptr +
                             ") is " + std::to_string(L.repeat));
    // The trace must be a replay of this layer plan: the same activities (each once), the same
    // endpoints and kinds, the same bytes (times the run's payload_scale).
    std::map<std::string, const sim::Transfer*> plan_t;  // the layer plan's transfers by id
    std::map<std::string, const std::string*> compute_gpu;  // its compute tasks' GPUs by id
    for (const auto& t : L.work.transfers) plan_t[t.id] = &t;
    for (const auto& c : L.work.compute) compute_gpu[c.id] = &c.gpu;
    {
      std::map<std::string, bool> seen;
      for (const auto& t : L.work.transfers) seen[t.id] = false;
      for (const auto& c : L.work.compute) seen[c.id] = false;
      for (size_t ai = 0; ai < R.activities.size(); ++ai) {
        const sim::ActivityResult& m = R.activities[ai];
        const std::string ap = layer_ptr + "/activities/" + std::to_string(ai);
        auto s_it = seen.find(m.id);
        if (s_it == seen.end())
          return input_error(trace_file, ap + "/id",
                             "trace activity \"" + m.id + "\" is not in the plan (" + plan_file +
                                 ":" + layer_ptr + ")");
        s_it->second = true;
        auto t_it = plan_t.find(m.id);
        const bool is_t = t_it != plan_t.end();
        if (m.is_transfer != is_t)
          return input_error(trace_file, ap + "/is_transfer",
                             "\"" + m.id + "\" is a " + (is_t ? "transfer" : "compute task") +
                                 " in the plan (" + plan_file + ":" + layer_ptr + ")");
        if (!is_t) {
          const std::string& gpu = *compute_gpu.at(m.id);
          if (!m.where.empty() && m.where != gpu)
            return input_error(trace_file, ap + "/where",
                               "\"" + m.where + "\" but the plan's compute task \"" + m.id +
                                   "\" runs on " + gpu);
          if (m.bytes != 0)
            return input_error(trace_file, ap + "/bytes", "a compute task moves no bytes");
          continue;
        }
        const sim::Transfer& t = *t_it->second;
        const std::string where = t.src + "->" + t.dst;
        if (!m.where.empty() && m.where != where)
          return input_error(trace_file, ap + "/where",
                             "\"" + m.where + "\" but the plan's transfer \"" + m.id + "\" is " +
                                 where);
        // Scaled runs round each block to whole bytes: at most 1/2 byte per block off.
        const double want = t.bytes * trace.payload_scale;
        const double tol =
            trace.payload_scale < 1 ? 1 + 0.5 * static_cast<double>(t.kv_blocks.size() + 1) : 0.5;
        if (m.bytes > 0 && std::abs(m.bytes - want) > tol)
          return input_error(trace_file, ap + "/bytes",
                             "replayed " + fmt_bytes(m.bytes) + " bytes but the plan moves " +
                                 fmt_bytes(want) +
                                 (trace.payload_scale < 1 ? " at payload_scale " +
                                                                std::to_string(trace.payload_scale)
                                                          : std::string()));
      }
      for (const auto& [id, was] : seen)
        if (!was)
          return input_error(trace_file, layer_ptr + "/activities",
                             "the plan's activity \"" + id + "\" (" + plan_file + ":" + layer_ptr +
                                 ") is missing from the trace");
    }
    // Model the run as it was made: without compute when the replay skipped it, NCCL's
    // host path for SM-driven transfers when NCCL_P2P_DISABLE was set.
    sim::Workload work = L.work;
    work.source = marker;
    if (opt.no_compute || !trace.compute_emulated)
      for (auto& c : work.compute) {
        c.duration_s = 0;
        c.flops = 0;
      }
    else if (real_flops && !real_flops->empty())
      // Real attention: its time is modelled from its active FLOPs and the topology's measured
      // figure for the sparsp kernel (the plan's duration_s came from the study's compute model).
      for (size_t ci = 0; ci < work.compute.size(); ++ci) {
        const double f = (*real_flops)[li][ci];
        if (f < 0) continue;
        work.compute[ci].duration_s = f / real_rate_flops + real_launch_s;
        work.compute[ci].flops = 0;
      }
    if (!(opt.no_compute || !trace.compute_emulated) && gemm_rate_flops > 0)
      for (auto& c : work.compute) {
        const sim::TaskCompute& w = c.what;
        if (w.kind != sim::TaskKind::gemm || w.count < 1) continue;
        const double per =
            2.0 * static_cast<double>(w.m) * static_cast<double>(w.n) * static_cast<double>(w.k);
        c.duration_s = static_cast<double>(w.count) * (per / gemm_rate_flops + gemm_launch_s);
        c.flops = 0;
      }
    if (trace.payload_scale < 1)
      for (auto& t : work.transfers) t.bytes *= trace.payload_scale;
    if (opt.nccl_p2p_disable || trace.nccl_p2p_disabled)
      for (auto& t : work.transfers)
        if (t.engine == sim::Engine::sm && t.src.rfind("gpu", 0) == 0 &&
            t.dst.rfind("gpu", 0) == 0 && t.src != t.dst)
          t.route = topology::RouteMode::host_staged;
    auto sim = sim::simulate(*topo, work, sim_opt);
    if (!sim) return rebase_error(sim.error(), marker, plan_file, layer_ptr);
    LayerReplay sim_layer;
    sim_layer.step = L.step;
    sim_layer.layer = L.layer;
    sim_layer.repeat = L.repeat;
    sim_layer.makespan_s = sim->makespan_s;
    sim_layer.activities = sim->activities;
    rep.simulated.push_back(std::move(sim_layer));
    std::map<std::string, const sim::ActivityResult*> simulated;
    for (const auto& a : sim->activities) simulated[a.id] = &a;
    double staged_best = 0, staged_bytes = 0;
    std::vector<std::pair<double, double>> staged_iv;
    for (size_t ai = 0; ai < R.activities.size(); ++ai) {
      const sim::ActivityResult& m = R.activities[ai];  // in the plan: checked above
      const sim::ActivityResult& sa = *simulated.at(m.id);
      const double md = m.end_s - m.start_s;
      const double sd = sa.end_s - sa.start_s;
      if (md <= 0) continue;
      if (!m.is_transfer) {
        compute_errs.push_back(rel_error(sd, md));
        continue;
      }
      TransferError te{static_cast<int>(li), m.id, md, sd, rel_error(sd, md)};
      errs.push_back(te.error);
      all.push_back(te);
      if (plan_t.at(m.id)->route == topology::RouteMode::host_staged && m.bytes > 0) {
        staged_best = std::max(staged_best, m.bytes / md);
        staged_bytes += m.bytes;
        staged_iv.emplace_back(m.start_s, m.end_s);
      }
    }
    rep.host_staged_achieved_Bps = std::max(rep.host_staged_achieved_Bps, staged_best);
    LayerError le{
        L.step, L.layer, R.makespan_s, sim->makespan_s, rel_error(sim->makespan_s, R.makespan_s),
        0,      0};
    // Busy time of host staging: the length of the union of the staged transfers' intervals.
    std::sort(staged_iv.begin(), staged_iv.end());
    double busy = 0, cur_a = 0, cur_b = -1;
    for (const auto& [a, b] : staged_iv) {
      if (a > cur_b) {
        if (cur_b > cur_a) busy += cur_b - cur_a;
        cur_a = a;
        cur_b = b;
      } else {
        cur_b = std::max(cur_b, b);
      }
    }
    if (cur_b > cur_a) busy += cur_b - cur_a;
    if (staged_bytes > 0 && busy > 0) {
      le.staged_bytes = staged_bytes;
      le.staged_span_s = busy;
      rep.host_staged_aggregate_Bps = std::max(rep.host_staged_aggregate_Bps, staged_bytes / busy);
    }
    mk_errs.push_back(le.error);
    rep.layers.push_back(le);
  }
  // Mean, median, p90 and max of a list of errors (all 0 when empty).
  struct Summary {
    double mean = 0, p50 = 0, p90 = 0, max = 0;
  };
  auto summary = [](const std::vector<double>& e) {
    Summary s;
    if (e.empty()) return s;
    double sum = 0;
    for (double x : e) sum += x;
    s.mean = sum / static_cast<double>(e.size());
    s.p50 = quantile(e, 0.5);
    s.p90 = quantile(e, 0.9);
    s.max = *std::max_element(e.begin(), e.end());
    return s;
  };
  rep.transfers = static_cast<int>(errs.size());
  const Summary te = summary(errs), me = summary(mk_errs), ce = summary(compute_errs);
  rep.mape = te.mean;
  rep.p50 = te.p50;
  rep.p90 = te.p90;
  rep.max_error = te.max;
  rep.makespan_mape = me.mean;
  rep.makespan_p50 = me.p50;
  rep.makespan_p90 = me.p90;
  rep.makespan_max_error = me.max;
  rep.compute_tasks = static_cast<int>(compute_errs.size());
  rep.compute_mape = ce.mean;
  rep.compute_p50 = ce.p50;
  rep.compute_p90 = ce.p90;
  rep.compute_max_error = ce.max;
  std::stable_sort(all.begin(), all.end(), [](const TransferError& a, const TransferError& b) {
    return a.error > b.error;
  });
  if (static_cast<int>(all.size()) > opt.top_outliers)
    all.resize(static_cast<size_t>(std::max(0, opt.top_outliers)));
  rep.outliers = std::move(all);
  return rep;
}

std::string validate_json(const ValidateReport& r) {
  Json root = Json::object();
  root["topology"] = r.topology_name;
  root["transfers"] = r.transfers;
  // No transfer compared (every measured duration 0): the errors are unknown, not 0.
  const bool none = r.transfers == 0;
  root["mape"] = none ? Json() : Json(r.mape);
  root["p50"] = none ? Json() : Json(r.p50);
  root["p90"] = none ? Json() : Json(r.p90);
  root["max_error"] = none ? Json() : Json(r.max_error);
  root["makespan_mape"] = r.makespan_mape;
  root["makespan_max_error"] = r.makespan_max_error;
  root["makespan_p50"] = r.makespan_p50;
  root["makespan_p90"] = r.makespan_p90;
  const bool no_compute = r.compute_tasks == 0;
  root["compute_tasks"] = r.compute_tasks;
  root["compute_mape"] = no_compute ? Json() : Json(r.compute_mape);
  root["compute_p50"] = no_compute ? Json() : Json(r.compute_p50);
  root["compute_p90"] = no_compute ? Json() : Json(r.compute_p90);
  root["compute_max_error"] = no_compute ? Json() : Json(r.compute_max_error);
  root["compute_source"] = r.compute_source;
  root["host_staged_achieved_GBps"] = units::Bps_to_GBps(r.host_staged_achieved_Bps);
  root["host_staged_aggregate_GBps"] = units::Bps_to_GBps(r.host_staged_aggregate_Bps);
  Json layers = Json::array();
  for (const auto& l : r.layers)
    layers.push_back({{"step", l.step},
                      {"layer", l.layer},
                      {"measured_s", l.measured_s},
                      {"simulated_s", l.simulated_s},
                      {"error", l.error},
                      {"staged_bytes", l.staged_bytes},
                      {"staged_span_s", l.staged_span_s}});
  root["layers"] = std::move(layers);
  Json outl = Json::array();
  for (const auto& o : r.outliers)
    outl.push_back({{"layer_index", o.layer_index},
                    {"id", o.id},
                    {"measured_s", o.measured_s},
                    {"simulated_s", o.simulated_s},
                    {"error", o.error}});
  root["outliers"] = std::move(outl);
  return root.dump(1) + "\n";
}

std::string side_by_side_perfetto(const policy::Plan& plan, const ReplayResult& trace,
                                  const ValidateReport& report) {
  // Both timelines in one ReplayResult-shaped view, measured first; processes are told apart
  // by a prefix on `where`, and each layer plan gets the longer of the two makespans.
  ReplayResult both;
  both.backend = trace.backend + "+sim";
  for (size_t li = 0; li < trace.layers.size() && li < report.simulated.size(); ++li) {
    LayerReplay L = trace.layers[li];
    const LayerReplay& S = report.simulated[li];
    for (auto& a : L.activities) a.where = "replay " + a.where;
    for (auto a : S.activities) {
      a.where = "sim " + a.where;
      L.activities.push_back(std::move(a));
    }
    L.makespan_s = std::max(L.makespan_s, S.makespan_s);
    both.layers.push_back(std::move(L));
  }
  return perfetto_json(plan, both);
}

std::string validate_table(const ValidateReport& r) {
  std::ostringstream os;
  char buf[256];
  os << "topology " << r.topology_name << ", " << r.transfers << " transfers\n";
  if (r.transfers == 0)
    std::snprintf(buf, sizeof buf,
                  "transfer durations: MAPE n/a (no transfer with a measured duration above 0)\n");
  else
    std::snprintf(buf, sizeof buf,
                  "transfer durations: MAPE %.2f%%  p50 %.2f%%  p90 %.2f%%  max %.2f%%\n",
                  100 * r.mape, 100 * r.p50, 100 * r.p90, 100 * r.max_error);
  os << buf;
  std::snprintf(buf, sizeof buf,
                "layer makespans:    MAPE %.2f%%  max %.2f%%  (median %.2f%%, p90 %.2f%%)\n",
                100 * r.makespan_mape, 100 * r.makespan_max_error, 100 * r.makespan_p50,
                100 * r.makespan_p90);
  os << buf;
  if (r.compute_tasks > 0) {
    std::snprintf(
        buf, sizeof buf,
        "compute tasks:      MAPE %.2f%%  p50 %.2f%%  p90 %.2f%%  max %.2f%% (%d tasks; %s)\n",
        100 * r.compute_mape, 100 * r.compute_p50, 100 * r.compute_p90, 100 * r.compute_max_error,
        r.compute_tasks, r.compute_source.c_str());
    os << buf;
  }
  if (r.host_staged_achieved_Bps > 0) {
    std::snprintf(buf, sizeof buf,
                  "host-staged: best transfer %.2f GB/s, aggregate %.2f GB/s (bytes / busy time)\n",
                  units::Bps_to_GBps(r.host_staged_achieved_Bps),
                  units::Bps_to_GBps(r.host_staged_aggregate_Bps));
    os << buf;
  }
  os << "\n  step layer   measured_ms  simulated_ms   error\n";
  for (const auto& l : r.layers) {
    std::snprintf(buf, sizeof buf, "  %4d %5d  %12.4f  %12.4f  %6.2f%%\n", l.step, l.layer,
                  units::s_to_ms(l.measured_s), units::s_to_ms(l.simulated_s), 100 * l.error);
    os << buf;
  }
  if (!r.outliers.empty()) {
    os << "\n  largest transfer errors:\n";
    for (const auto& o : r.outliers) {
      std::snprintf(buf, sizeof buf,
                    "  [%d] %-28s measured %10.4f ms  simulated %10.4f ms  %6.2f%%\n",
                    o.layer_index, o.id.c_str(), units::s_to_ms(o.measured_s),
                    units::s_to_ms(o.simulated_s), 100 * o.error);
      os << buf;
    }
  }
  return os.str();
}

PathFit fit_latency_bandwidth(const std::string& name, const std::vector<double>& x,
                              const std::vector<double>& t) {
  PathFit f;
  f.name = name;
  f.sizes_bytes = x;
  f.times_s = t;
  const size_t n = x.size();
  if (n < 2 || t.size() != n) return f;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  const double xmax = x[order.back()];
  std::vector<size_t> big, small;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    if (x[i] >= xmax / 32 || k + 3 >= n) big.push_back(i);
    if (x[i] <= 256 * 1024.0 || k < 3) small.push_back(i);
  }
  // Slope by ordinary least squares on [1, x] over the large sizes (Eigen QR).
  Eigen::MatrixXd A(static_cast<Eigen::Index>(big.size()), 2);
  Eigen::VectorXd y(static_cast<Eigen::Index>(big.size()));
  for (size_t k = 0; k < big.size(); ++k) {
    A(static_cast<Eigen::Index>(k), 0) = 1.0;
    A(static_cast<Eigen::Index>(k), 1) = x[big[k]];
    y(static_cast<Eigen::Index>(k)) = t[big[k]];
  }
  const Eigen::Vector2d ab = A.colPivHouseholderQr().solve(y);
  const double slope = ab(1);
  f.bandwidth_Bps = slope > 0 ? 1.0 / slope : 0.0;
  double lat = 0;
  for (size_t i : small) lat += t[i] - (slope > 0 ? x[i] * slope : 0.0);
  f.latency_s = std::max(0.0, lat / static_cast<double>(small.size()));
  return f;
}

Result<std::string> topology_from_machine_file(const std::string& path, int virtual_ranks) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  auto topo = detail::topology_from_machine(*text, path, virtual_ranks,
                                            sim::SimOptions{}.launch_overhead_s);
  if (!topo) return topo;
  // The topology written must load: its measured_compute is copied from the machine file as it
  // is, so it goes through the topology loader's strict parser first (an unloadable topology was
  // written with exit 0). The copy keeps its JSON pointer: errors there name the machine file
  // at /measured_compute/...; an error elsewhere is one of the built parts.
  const std::string marker =
      "\x1f"
      "calibrated-topology";
  auto check = topology::Topology::from_json_text(*topo, marker);
  if (!check) {
    const std::string& msg = check.error().message;
    if (msg.rfind(marker + ":/measured_compute", 0) == 0)
      return Error{path + msg.substr(marker.size()), 2};
    return Error{"calibrate: the topology built from " + path + " does not load: " +
                     msg.substr(msg.rfind(marker, 0) == 0 ? marker.size() + 1 : 0),
                 2};
  }
  return topo;
}

#ifndef SPARSP_HAVE_CUDA
Result<CalibrateResult> calibrate(const CalibrateOptions& /*options*/) {
  return Error{"calibrate: this build has no CUDA backend (built without a CUDA compiler)", 1};
}
#endif

}  // namespace sparsp::replay
