// replay::run: lower, prepare the backend, per layer plan fill / warm up / time / verify, medians.
// Also the trace, Perfetto and summary JSON.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "exec_plan.hpp"

namespace sparsp::replay {

using detail::ActKind;
using Json = nlohmann::ordered_json;

#ifndef SPARSP_HAVE_CUDA
namespace detail {
std::unique_ptr<Backend> make_cuda_backend() { return nullptr; }
}  // namespace detail
#endif

std::vector<std::string> backend_names() {
#ifdef SPARSP_HAVE_CUDA
  return {"cuda", "host"};
#else
  return {"host"};
#endif
}

namespace {
std::string lane_of(const detail::Activity& a, const std::vector<int>& devices, int ranks) {
  if (a.kind == ActKind::compute) return "compute";
  const auto& t = *a.transfer;
  std::string lane = !t.stream.empty()                             ? t.stream
                     : t.route == topology::RouteMode::host_staged ? "staged"
                     : t.engine == sim::Engine::sm                 ? "sm"
                                                                   : "ce";
  (void)devices;
  (void)ranks;
  return lane;
}
/// Ends the process when one backend call runs longer than the timeout. A GPU stuck in a
/// collective whose peer never arrives (or a host thread blocked inside the NCCL or CUDA runtime)
/// cannot be cancelled, so the watchdog reports where it was and exits; no output file has been
/// written at that point (they are written after run() returns).
class Watchdog {
 public:
  explicit Watchdog(double timeout_s) : timeout_s_(timeout_s) {
    if (timeout_s_ > 0) thread_ = std::jthread([this](std::stop_token st) { watch(st); });
  }
  ~Watchdog() {
    if (thread_.joinable()) {
      thread_.request_stop();
      cv_.notify_all();
    }
  }
  /// Starts the clock for the next backend call, described by `what`.
  void enter(std::string what) {
    if (timeout_s_ <= 0) return;
    std::lock_guard lock(mu_);
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(timeout_s_));
    cv_.notify_all();
  }

 private:
  void watch(std::stop_token st) {
    std::unique_lock lock(mu_);
    while (!st.stop_requested()) {
      const auto deadline = deadline_;
      if (deadline == std::chrono::steady_clock::time_point{}) {
        cv_.wait(lock, st, [&] { return deadline_ != deadline; });
        continue;
      }
      if (cv_.wait_until(lock, st, deadline, [&] { return deadline_ != deadline; })) continue;
      if (st.stop_requested()) return;
      std::fprintf(stderr,
                   "sparsp: replay: no progress for %g s while %s (a hung NCCL collective or "
                   "copy; raise --timeout-s if the plan is that slow); aborted, nothing written\n",
                   timeout_s_, what_.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  double timeout_s_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_{};
  std::jthread thread_;  // last: joined before the members it uses are destroyed
};
}  // namespace

const char* compute_mode_name(ComputeMode m) {
  switch (m) {
    case ComputeMode::automatic:
      return "auto";
    case ComputeMode::real:
      return "real";
    case ComputeMode::emulated:
      return "emulated";
    case ComputeMode::none:
      return "none";
  }
  return "?";
}

namespace {
/// The output check of one iteration (ReplayOptions::compute real): per rank, the checked query
/// blocks' partial outputs merged as ring attention merges them (lse = log sum exp lse_i,
/// O = sum exp(lse_i - lse) O_i; in double) against the reference. Failure: exit 1 naming the
/// layer, rank, query block, head and worst error.
Status check_outputs(const policy::Plan& plan, const detail::ExecPlan& ex,
                     const detail::ExecLayer& el, detail::Backend& be, int iteration,
                     OutputCheck& oc) {
  const policy::LayerPlan& L = plan.layers[static_cast<size_t>(el.plan_index)];
  const int H = ex.heads, D = ex.head_dim;
  const double tol = ex.tolerance.output_abs;
  if (el.queries.empty()) return Ok{};  // no attention in this layer plan (GEMMs, copies only)
  oc.ran = true;
  oc.tolerance = tol;
  // Every rank's outputs for its checked blocks (own ones, and others' rows computed there).
  struct RankRows {
    detail::Backend::OutputRows rows;
    std::map<int, std::pair<size_t, size_t>> at;  // block -> (first row, rows) in `rows`
    size_t R = 0;
    std::vector<const detail::AttnWork*> works;
  };
  std::vector<RankRows> rr(static_cast<size_t>(ex.ranks));
  for (int r = 0; r < ex.ranks; ++r) {
    const detail::RankQueries& rq = el.queries[static_cast<size_t>(r)];
    if (rq.check_blocks.empty()) continue;
    auto rows = be.read_outputs(el, r, rq.check_blocks);
    if (!rows) return rows.error();
    RankRows& x = rr[static_cast<size_t>(r)];
    x.rows = std::move(*rows);
    for (int i : rq.check_blocks) {
      const int n = rq.reference.q_block_offsets[static_cast<size_t>(i) + 1] -
                    rq.reference.q_block_offsets[static_cast<size_t>(i)];
      x.at[rq.blocks[static_cast<size_t>(i)]] = {x.R, static_cast<size_t>(n)};
      x.R += static_cast<size_t>(n);
    }
    for (const auto& w : el.attn)
      if (w.rank == r) x.works.push_back(&w);
  }
  std::vector<double> acc(static_cast<size_t>(D));
  for (int r = 0; r < ex.ranks; ++r) {
    const detail::RankQueries& rq = el.queries[static_cast<size_t>(r)];
    const RankRows& me = rr[static_cast<size_t>(r)];
    double worst = 0;
    int worst_h = -1, worst_block = -1;
    std::string what, computed_on;
    int64_t checked = 0;
    for (int i : rq.check_blocks) {
      if (i >= rq.own_blocks) continue;
      const int q = rq.blocks[static_cast<size_t>(i)];
      ++checked;
      const auto [row0, n] = me.at.at(q);
      for (int h = 0; h < H; ++h)
        for (size_t t = 0; t < n; ++t) {
          // Partials of (q, h, t) from every rank that computed rows of q.
          std::vector<std::pair<double, const float*>> parts;
          std::set<int> at_ranks;  // ranks that computed them
          for (int xr = 0; xr < ex.ranks; ++xr) {
            const RankRows& x = rr[static_cast<size_t>(xr)];
            auto it = x.at.find(q);
            if (it == x.at.end()) continue;
            const size_t k = it->second.first + t;
            for (size_t wi = 0; wi < x.works.size(); ++wi) {
              const auto* w = x.works[wi];
              if (h < w->head_begin || h >= w->head_end) continue;
              const size_t row = size_t(h - w->head_begin) * x.R + k;
              parts.push_back({x.rows.lse[wi][row], &x.rows.o[wi][row * size_t(D)]});
              at_ranks.insert(xr);
            }
          }
          double m = -INFINITY;
          for (const auto& p : parts) m = std::max(m, p.first);
          double sum = 0;
          std::fill(acc.begin(), acc.end(), 0.0);
          if (m != -INFINITY)
            for (const auto& p : parts) {
              const double wt = std::exp(p.first - m);
              if (!(wt > 0)) continue;
              sum += wt;
              for (int d = 0; d < D; ++d) acc[size_t(d)] += wt * static_cast<double>(p.second[d]);
            }
          const double lse = sum > 0 ? m + std::log(sum) : -INFINITY;
          const size_t ref_row = size_t(h) * me.R + row0 + t;
          const double lse_ref = me.rows.lse_ref[ref_row];
          double err = 0;
          for (int d = 0; d < D; ++d) {
            const double o = sum > 0 ? acc[size_t(d)] / sum : 0.0;
            const double e = std::abs(o - me.rows.o_ref[ref_row * D + size_t(d)]);
            err = std::isnan(e) ? INFINITY : std::max(err, e);
          }
          const bool lse_bad =
              std::isinf(lse_ref) != std::isinf(lse) ||
              (!std::isinf(lse_ref) &&
               !(std::abs(lse - lse_ref) <=
                 ex.tolerance.lse_abs_base + std::ldexp(1.0, -20) * (1 + std::abs(lse_ref))));
          oc.max_abs_error = std::max(oc.max_abs_error, err);
          if ((err > tol || lse_bad) && (worst_h < 0 || err > worst)) {
            worst = err;
            worst_h = h;
            worst_block = q;
            what = lse_bad ? "log-sum-exp " + std::to_string(lse) + " vs reference " +
                                 std::to_string(lse_ref) + ", "
                           : "";
            computed_on.clear();  // named where other ranks computed the rows (Ulysses)
            if (at_ranks != std::set<int>{r})
              for (int x : at_ranks)
                computed_on +=
                    (computed_on.empty() ? " (computed on " : ", ") + plan.gpu_endpoint(x);
            if (!computed_on.empty()) computed_on += ")";
          }
        }
    }
    if (iteration == 0) oc.checked_blocks += checked;
    if (worst_h >= 0) {
      oc.passed = false;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.4g > tolerance %.4g", worst, tol);
      return Error{"replay: output check failed: layer " + std::to_string(L.layer) + " (step " +
                       std::to_string(L.step) + ") rank " + plan.gpu_endpoint(r) + " query block " +
                       std::to_string(worst_block) + " head " + std::to_string(worst_h) +
                       computed_on + ": " + what + "max |O - O_ref| " + buf + " (iteration " +
                       std::to_string(iteration) +
                       "; a missing, stale, corrupted or misrouted KV block, or a "
                       "Ulysses head group's Q)",
                   1};
    }
  }
  return Ok{};
}
}  // namespace

Result<ReplayResult> run(const policy::Plan& plan, const ReplayOptions& opt) {
  if (opt.iterations < 1) return Error{"replay: --iterations must be >= 1", 2};
  if (opt.warmup < 0) return Error{"replay: --warmup must be >= 0", 2};
  std::unique_ptr<detail::Backend> be;
  if (opt.backend == "host") {
    be = detail::make_host_backend();
  } else if (opt.backend == "cuda") {
    be = detail::make_cuda_backend();
    if (!be)
      return Error{
          "replay: this build has no CUDA backend (built without a CUDA compiler); use --backend "
          "host",
          2};
  } else {
    return Error{"replay: unknown backend \"" + opt.backend + "\" (expected cuda or host)", 2};
  }
  if (!opt.devices.empty() && static_cast<int>(opt.devices.size()) != plan.gpus)
    return Error{"replay: --devices lists " + std::to_string(opt.devices.size()) +
                     " devices but the plan has " + std::to_string(plan.gpus) + " ranks",
                 2};
  auto ex = detail::lower(plan, opt);
  if (!ex) return ex.error();
  Watchdog watchdog(opt.timeout_s);
  watchdog.enter("preparing the " + opt.backend +
                 " backend (allocation, peer access, NCCL set-up)");
  if (auto st = be->prepare(plan, *ex, opt); !st) return st.error();

  ReplayResult res;
  res.backend = opt.backend;
  res.devices = opt.devices;
  if (res.devices.empty())
    for (int r = 0; r < plan.gpus; ++r) res.devices.push_back(r);
  res.device_description = be->description();
  res.warmup = opt.warmup;
  res.iterations = opt.iterations;
  const bool no_compute = !opt.emulate_compute || opt.compute == ComputeMode::none;
  res.compute_emulated = !no_compute;
  res.compute = no_compute ? "none" : ex->real ? "real" : "emulated";
  res.compute_note = ex->compute_note;
  res.payload_scale = opt.payload_scale;
  {
    const char* v = std::getenv("NCCL_P2P_DISABLE");
    res.nccl_p2p_disabled = opt.backend == "cuda" && opt.use_nccl && v && std::atoi(v) != 0;
  }
  for (const detail::ExecLayer& el : ex->layers) {
    const policy::LayerPlan& L = plan.layers[el.plan_index];
    const std::string where = "layer plan " + std::to_string(el.plan_index) + " (step " +
                              std::to_string(L.step) + ", layer " + std::to_string(L.layer) + ")";
    watchdog.enter("filling the send buffers of " + where);
    if (auto st = be->fill(el); !st) return st.error();
    const size_t n = el.acts.size();
    std::vector<std::vector<double>> starts(n), ends(n);
    std::vector<double> makespans;
    for (int it = 0; it < opt.warmup + opt.iterations; ++it) {
      std::vector<double> s, e;
      watchdog.enter("running iteration " + std::to_string(it) + " of " + where);
      if (auto st = be->run_once(el, s, e); !st) return st.error();
      watchdog.enter("verifying iteration " + std::to_string(it) + " of " + where);
      if (ex->real) {
        if (auto st = check_outputs(plan, *ex, el, *be, it, res.output_check); !st)
          return st.error();
      }
      auto v = be->verify(el);
      if (!v) return v.error();
      if (v->first >= 0) {
        const detail::Region& r = el.checks[v->first];
        return Error{"replay: integrity check failed: " + detail::describe(plan, el, r, ex->ranks) +
                         ": byte " + std::to_string(v->second) + " of " + std::to_string(r.bytes) +
                         " differs from the expected content (iteration " + std::to_string(it) +
                         ")",
                     1};
      }
      for (const auto& r : el.checks) res.bytes_verified += static_cast<double>(r.bytes);
      for (const auto& r : el.checks) res.blocks_verified += r.block >= 0 ? 1 : 0;
      res.bytes_moved += static_cast<double>(el.bytes_moved);
      if (it < opt.warmup) continue;
      double mk = 0;
      for (size_t i = 0; i < n; ++i) {
        starts[i].push_back(s[i]);
        ends[i].push_back(e[i]);
        mk = std::max(mk, e[i]);
      }
      makespans.push_back(mk);
    }
    LayerReplay lr;
    lr.step = L.step;
    lr.layer = L.layer;
    lr.repeat = L.repeat;
    lr.makespan_s = detail::median(makespans);
    lr.makespan_samples_s = makespans;
    // Activities come from the representative iteration: the one whose makespan is the (lower)
    // median, so the timeline is one coherent run (per-activity medians of start and end could
    // mix iterations in which concurrent transfers were served in different orders).
    std::vector<size_t> idx(makespans.size());
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = k;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t a, size_t b) { return makespans[a] < makespans[b]; });
    const size_t rep = idx[(idx.size() - 1) / 2];
    for (size_t i = 0; i < n; ++i) {
      const detail::Activity& a = el.acts[i];
      sim::ActivityResult ar;
      ar.id = a.id;
      ar.is_transfer = a.kind == ActKind::transfer;
      if (ar.is_transfer)
        ar.where = a.transfer->src + "->" + a.transfer->dst;
      else
        ar.where = a.compute->gpu;
      ar.lane = lane_of(a, res.devices, ex->ranks);
      ar.start_s = starts[i][rep];
      ar.end_s = ends[i][rep];
      ar.bytes = static_cast<double>(a.bytes);
      lr.activities.push_back(std::move(ar));
    }
    res.total_s += lr.makespan_s * static_cast<double>(lr.repeat);
    res.layers.push_back(std::move(lr));
  }
  return res;
}

namespace {
// compute_emulated, compute, compute_note and output_check (trace and summary alike).
void add_compute_fields(Json& root, const ReplayResult& r) {
  root["compute_emulated"] = r.compute_emulated;
  root["compute"] = r.compute;
  if (!r.compute_note.empty()) root["compute_note"] = r.compute_note;
  if (r.output_check.ran) {
    Json oc = Json::object();
    oc["checked_blocks"] = r.output_check.checked_blocks;
    oc["max_abs_error"] = r.output_check.max_abs_error;
    oc["tolerance"] = r.output_check.tolerance;
    oc["passed"] = r.output_check.passed;
    root["output_check"] = std::move(oc);
  }
}
}  // namespace

std::string trace_json(const policy::Plan& plan, const ReplayResult& r) {
  Json root = Json::object();
  root["schema"] = "sparsp.trace";
  root["schema_version"] = 1;
  root["source"] = "replay";
  root["backend"] = r.backend;
  root["device"] = r.device_description;
  root["devices"] = r.devices;
  root["policy"] = plan.policy.name();
  root["model"] = plan.model;
  root["gpus"] = plan.gpus;
  root["warmup"] = r.warmup;
  root["iterations"] = r.iterations;
  root["bytes_moved"] = r.bytes_moved;
  root["bytes_verified"] = r.bytes_verified;
  root["blocks_verified"] = r.blocks_verified;
  root["total_s"] = r.total_s;
  root["payload_scale"] = r.payload_scale;
  add_compute_fields(root, r);
  root["nccl_p2p_disable"] = r.nccl_p2p_disabled;
  Json layers = Json::array();
  for (const auto& L : r.layers) {
    Json lj = Json::object();
    lj["step"] = L.step;
    lj["layer"] = L.layer;
    lj["repeat"] = L.repeat;
    lj["makespan_s"] = L.makespan_s;
    lj["makespan_samples_s"] = L.makespan_samples_s;
    Json acts = Json::array();
    for (const auto& a : L.activities) {
      Json aj = Json::object();
      aj["id"] = a.id;
      aj["is_transfer"] = a.is_transfer;
      aj["where"] = a.where;
      aj["lane"] = a.lane;
      aj["start_s"] = a.start_s;
      aj["end_s"] = a.end_s;
      aj["bytes"] = a.bytes;
      acts.push_back(std::move(aj));
    }
    lj["activities"] = std::move(acts);
    layers.push_back(std::move(lj));
  }
  root["layers"] = std::move(layers);
  return root.dump(1) + "\n";
}

Result<ReplayResult> parse_trace(const std::string& text, const std::string& src) {
  auto parsed = parse_json<Json>(text, src);
  if (!parsed) return parsed.error();
  const Json& root = *parsed;
  // Strict: every key known, every number finite and in range, ids unique per layer plan; the
  // first problem is reported with its JSON pointer.
  std::string bad_ptr, bad_what;
  auto fail = [&](std::string ptr, std::string what) {
    if (bad_ptr.empty() && bad_what.empty()) {
      bad_ptr = std::move(ptr);
      bad_what = std::move(what);
    }
    return false;
  };
  auto keys = [&](const Json& o, const std::string& ptr, std::initializer_list<const char*> ok) {
    for (const auto& [k, v] : o.items()) {
      bool known = false;
      for (const char* x : ok) known = known || k == x;
      if (!known) return fail(ptr + "/" + k, "unknown key '" + k + "'");
    }
    return true;
  };
  auto num = [&](const Json& o, const std::string& ptr, const char* key, double lo, double hi,
                 double& out, bool required) {
    if (!o.contains(key)) return required ? fail(ptr, std::string("missing '") + key + "'") : true;
    const Json& v = o[key];
    if (!v.is_number()) return fail(ptr + "/" + key, "expected a number");
    out = v.get<double>();
    if (!std::isfinite(out) || out < lo || out > hi) {
      char range[64];
      std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
      return fail(ptr + "/" + key,
                  std::string("must be a finite number in ") + range + ", got " + v.dump());
    }
    return true;
  };
  // A whole number in [lo, hi] (counts, indices): 1.5 was cast silently to 1.
  auto whole = [&](const Json& o, const std::string& ptr, const char* key, double lo, double hi,
                   double& out, bool required) {
    if (!num(o, ptr, key, lo, hi, out, required)) return false;
    if (o.contains(key) && out != std::floor(out))
      return fail(ptr + "/" + key, "expected an integer, got " + o[key].dump());
    return o.contains(key);
  };
  // An optional string member: a wrong type is an error at its pointer (it was a library
  // exception without one).
  auto str = [&](const Json& o, const std::string& ptr, const char* key, std::string& out,
                 bool required) {
    if (!o.contains(key)) return required ? fail(ptr, std::string("missing '") + key + "'") : true;
    if (!o[key].is_string())
      return fail(ptr + "/" + key, std::string("expected a string, got ") + o[key].type_name());
    out = o[key].get<std::string>();
    return true;
  };
  auto flag = [&](const Json& o, const std::string& ptr, const char* key, bool dflt) {
    if (!o.contains(key)) return dflt;
    if (!o[key].is_boolean()) {
      fail(ptr + "/" + key, "expected true or false, got " + o[key].dump());
      return dflt;
    }
    return o[key].get<bool>();
  };
  ReplayResult r;
  if (!root.is_object()) return input_error(src, "", "expected a JSON object");
  if (root.value("schema", "") != "sparsp.trace")
    return input_error(src, "/schema", "expected \"sparsp.trace\"");
  if (root.value("schema_version", 0) != 1)
    return input_error(src, "/schema_version", "expected 1");
  try {
    keys(root, "",
         {"schema",
          "schema_version",
          "source",
          "backend",
          "device",
          "devices",
          "policy",
          "model",
          "gpus",
          "warmup",
          "iterations",
          "bytes_moved",
          "bytes_verified",
          "blocks_verified",
          "total_s",
          "payload_scale",
          "compute_emulated",
          "compute",
          "compute_note",
          "output_check",
          "nccl_p2p_disable",
          "layers"});
    str(root, "", "backend", r.backend, false);
    str(root, "", "device", r.device_description, false);
    str(root, "", "policy", r.policy, false);
    str(root, "", "model", r.model, false);
    double x = 0;
    if (whole(root, "", "gpus", 1, 4096, x, false)) r.gpus = static_cast<int>(x);
    if (whole(root, "", "warmup", 0, 1e9, x, false)) r.warmup = static_cast<int>(x);
    if (whole(root, "", "iterations", 0, 1e9, x, false)) r.iterations = static_cast<int>(x);
    // devices: rank -> CUDA device ordinal, one per rank (replay writes all of them).
    if (root.contains("devices")) {
      const Json& d = root["devices"];
      if (!d.is_array()) {
        fail("/devices", std::string("expected an array of device indices, got ") + d.type_name());
      } else {
        for (size_t i = 0; i < d.size(); ++i) {
          const std::string dp = "/devices/" + std::to_string(i);
          if (!d[i].is_number_integer() || d[i].get<int64_t>() < 0 || d[i].get<int64_t>() > 1023) {
            fail(dp, "expected a device index in 0..1023, got " + d[i].dump());
            break;
          }
          r.devices.push_back(static_cast<int>(d[i].get<int64_t>()));
        }
        if (bad_what.empty() && r.gpus > 0 && static_cast<int>(r.devices.size()) != r.gpus)
          fail("/devices", std::to_string(r.devices.size()) + " entries, but /gpus is " +
                               std::to_string(r.gpus) + " (one device per rank)");
      }
    }
    num(root, "", "bytes_moved", 0, 1e18, r.bytes_moved, false);
    num(root, "", "bytes_verified", 0, 1e18, r.bytes_verified, false);
    if (whole(root, "", "blocks_verified", 0, 1e15, x, false))
      r.blocks_verified = static_cast<int64_t>(x);
    num(root, "", "total_s", 0, 1e12, r.total_s, false);
    num(root, "", "payload_scale", 1e-9, 1, r.payload_scale, false);
    r.compute_emulated = flag(root, "", "compute_emulated", true);
    if (!bad_what.empty()) return input_error(src, bad_ptr, bad_what);
    r.compute = r.compute_emulated ? "emulated" : "none";
    r.compute_recorded = false;
    if (root.contains("compute")) {
      if (!root["compute"].is_string() ||
          (root["compute"] != "real" && root["compute"] != "emulated" && root["compute"] != "none"))
        return input_error(
            src, "/compute",
            "expected \"real\", \"emulated\" or \"none\", got " + root["compute"].dump());
      r.compute = root["compute"].get<std::string>();
      r.compute_recorded = true;
      // compute_emulated means "compute ran" (real or emulated); the two keys must agree.
      if (root.contains("compute_emulated") && (r.compute != "none") != r.compute_emulated)
        return input_error(src, "/compute_emulated",
                           std::string(r.compute_emulated ? "true" : "false") +
                               ", but /compute is \"" + r.compute +
                               "\" (compute_emulated is true exactly when compute ran)");
    }
    str(root, "", "compute_note", r.compute_note, false);
    if (root.contains("output_check")) {
      const Json& oc = root["output_check"];
      if (!oc.is_object())
        return input_error(src, "/output_check",
                           std::string("expected an object, got ") + oc.type_name());
      if (r.compute != "real")
        return input_error(src, "/output_check",
                           "an output check, but /compute is \"" + r.compute + "\"" +
                               (r.compute_recorded ? "" : " (absent: read as emulated)") +
                               " (only real compute has outputs to check)");
      const std::string op = "/output_check";
      keys(oc, op, {"checked_blocks", "max_abs_error", "tolerance", "passed"});
      r.output_check.ran = true;
      if (whole(oc, op, "checked_blocks", 0, 1e15, x, true))
        r.output_check.checked_blocks = static_cast<int64_t>(x);
      num(oc, op, "max_abs_error", 0, 1e300, r.output_check.max_abs_error, true);
      num(oc, op, "tolerance", 0, 1e300, r.output_check.tolerance, true);
      if (!oc.contains("passed")) fail(op, "missing 'passed'");
      r.output_check.passed = flag(oc, op, "passed", false);
      // replay writes no trace of a failed check; timings of a wrong run validate nothing.
      if (bad_what.empty() && !r.output_check.passed)
        fail(op + "/passed",
             "false: the replay's output check failed, so its timings are of a "
             "run that computed the wrong attention");
    }
    r.nccl_p2p_disabled = flag(root, "", "nccl_p2p_disable", false);
    if (!bad_what.empty()) return input_error(src, bad_ptr, bad_what);
    if (!root.contains("layers") || !root["layers"].is_array())
      return input_error(src, "/layers", "expected an array");
    if (root["layers"].empty())
      return input_error(src, "/layers", "no layer plans (an empty trace has nothing to compare)");
    for (size_t i = 0; i < root["layers"].size() && bad_what.empty(); ++i) {
      const Json& lj = root["layers"][i];
      const std::string lp = "/layers/" + std::to_string(i);
      if (!lj.is_object()) return input_error(src, lp, "expected an object");
      keys(lj, lp, {"step", "layer", "repeat", "makespan_s", "makespan_samples_s", "activities"});
      LayerReplay L;
      if (whole(lj, lp, "step", 0, 1e9, x, true)) L.step = static_cast<int>(x);
      if (whole(lj, lp, "layer", 0, 1e9, x, true)) L.layer = static_cast<int>(x);
      if (whole(lj, lp, "repeat", 1, 1e15, x, false)) L.repeat = static_cast<int64_t>(x);
      num(lj, lp, "makespan_s", 0, 1e6, L.makespan_s, true);
      if (lj.contains("makespan_samples_s")) {
        const Json& ms = lj["makespan_samples_s"];
        if (!ms.is_array())
          fail(lp + "/makespan_samples_s",
               std::string("expected an array of times, got ") + ms.type_name());
        else
          for (size_t k = 0; k < ms.size(); ++k) {
            if (!ms[k].is_number() || !std::isfinite(ms[k].get<double>()) ||
                ms[k].get<double>() < 0) {
              fail(lp + "/makespan_samples_s/" + std::to_string(k), "must be a finite time >= 0");
              break;
            }
            L.makespan_samples_s.push_back(ms[k].get<double>());
          }
      }
      if (!lj.contains("activities") || !lj["activities"].is_array())
        return input_error(src, lp + "/activities", "expected an array");
      std::set<std::string> ids;
      double last_end = 0;
      for (size_t k = 0; k < lj["activities"].size() && bad_what.empty(); ++k) {
        const Json& aj = lj["activities"][k];
        const std::string ap = lp + "/activities/" + std::to_string(k);
        if (!aj.is_object()) return input_error(src, ap, "expected an object");
        keys(aj, ap, {"id", "is_transfer", "where", "lane", "start_s", "end_s", "bytes"});
        sim::ActivityResult a;
        str(aj, ap, "id", a.id, true);
        if (bad_what.empty() && a.id.empty()) fail(ap + "/id", "empty id");
        if (bad_what.empty() && !ids.insert(a.id).second)
          fail(ap + "/id", "duplicate id \"" + a.id + "\"");
        a.is_transfer = flag(aj, ap, "is_transfer", true);
        str(aj, ap, "where", a.where, false);
        str(aj, ap, "lane", a.lane, false);
        num(aj, ap, "start_s", 0, 1e6, a.start_s, true);
        num(aj, ap, "end_s", 0, 1e6, a.end_s, true);
        num(aj, ap, "bytes", 0, 1e18, a.bytes, false);
        if (bad_what.empty() && a.end_s < a.start_s)
          fail(ap + "/end_s", "ends before it starts (" + std::to_string(a.end_s) + " < " +
                                  std::to_string(a.start_s) + ")");
        last_end = std::max(last_end, a.end_s);
        L.activities.push_back(std::move(a));
      }
      if (bad_what.empty() && !L.activities.empty() && !(L.makespan_s > 0))
        fail(lp + "/makespan_s", "must be > 0 for a layer plan with activities");
      // The activities are those of the iteration whose makespan is makespan_s: none ends later.
      if (bad_what.empty() && last_end > L.makespan_s * (1 + 1e-9) + 1e-12)
        fail(lp + "/makespan_s", "is " + std::to_string(L.makespan_s) +
                                     " s but an activity ends at " + std::to_string(last_end) +
                                     " s (the activities are the run whose makespan this is)");
      r.layers.push_back(std::move(L));
    }
  } catch (const Json::exception& e) {
    return input_error(src, "", std::string("malformed trace: ") + e.what());
  }
  if (!bad_what.empty()) return input_error(src, bad_ptr, bad_what);
  return r;
}

Result<ReplayResult> load_trace(const std::string& path) {
  auto text = read_text_file(path, "file");
  if (!text) return text.error();
  return parse_trace(*text, path);
}

std::string perfetto_json(const policy::Plan& plan, const ReplayResult& r) {
  // Chrome trace event format: pid = rank (the source rank of a transfer), tid = lane.
  Json events = Json::array();
  std::map<std::string, int> pids, tids;
  auto pid_of = [&](const std::string& where) {
    std::string rank = where.substr(0, where.find("->"));
    auto [it, fresh] = pids.try_emplace(rank, static_cast<int>(pids.size()));
    if (fresh) {
      Json m = {
          {"name", "process_name"}, {"ph", "M"}, {"pid", it->second}, {"args", {{"name", rank}}}};
      events.push_back(m);
    }
    return it->second;
  };
  auto tid_of = [&](int pid, const std::string& lane) {
    const std::string key = std::to_string(pid) + "/" + lane;
    auto [it, fresh] = tids.try_emplace(key, static_cast<int>(tids.size()));
    if (fresh) {
      Json m = {{"name", "thread_name"},
                {"ph", "M"},
                {"pid", pid},
                {"tid", it->second},
                {"args", {{"name", lane}}}};
      events.push_back(m);
    }
    return it->second;
  };
  double t_base = 0;
  for (const auto& L : r.layers) {
    for (const auto& a : L.activities) {
      const int pid = pid_of(a.where);
      const int tid = tid_of(pid, a.lane);
      Json ev = {
          {"name", a.id},
          {"cat", a.is_transfer ? "transfer" : "compute"},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", (t_base + a.start_s) * 1e6},
          {"dur", (a.end_s - a.start_s) * 1e6},
          {"args", {{"where", a.where}, {"bytes", a.bytes}, {"step", L.step}, {"layer", L.layer}}}};
      events.push_back(std::move(ev));
    }
    t_base += L.makespan_s * 1.05 + 1e-5;  // small gap between layer plans
  }
  Json root = {
      {"traceEvents", events},
      {"displayTimeUnit", "ns"},
      {"otherData",
       {{"source", "sparsp replay"}, {"backend", r.backend}, {"policy", plan.policy.name()}}}};
  return root.dump() + "\n";
}

std::string summary_json(const ReplayResult& r) {
  Json root = Json::object();
  root["backend"] = r.backend;
  root["device"] = r.device_description;
  root["devices"] = r.devices;
  root["warmup"] = r.warmup;
  root["iterations"] = r.iterations;
  root["bytes_moved"] = r.bytes_moved;
  root["bytes_verified"] = r.bytes_verified;
  root["blocks_verified"] = r.blocks_verified;
  root["total_s"] = r.total_s;
  root["payload_scale"] = r.payload_scale;
  add_compute_fields(root, r);
  root["nccl_p2p_disable"] = r.nccl_p2p_disabled;
  Json layers = Json::array();
  for (const auto& L : r.layers)
    layers.push_back(
        {{"step", L.step}, {"layer", L.layer}, {"repeat", L.repeat}, {"makespan_s", L.makespan_s}});
  root["layers"] = std::move(layers);
  return root.dump(1) + "\n";
}

}  // namespace sparsp::replay
