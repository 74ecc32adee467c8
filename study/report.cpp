// Study output: text table, JSON and CSV; and re-timing of a plan.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "sparsp/study.hpp"
#include "sparsp/units.hpp"
#include "internal.hpp"

namespace sparsp::study {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string bytes_str(double b) {
  if (b >= units::kGB) return fmt("%.2f GB", b / units::kGB);
  if (b >= units::kMB) return fmt("%.1f MB", b / units::kMB);
  if (b >= units::kKB) return fmt("%.1f kB", b / units::kKB);
  return fmt("%.0f B", b);
}

// Rounds to 9 significant digits so that JSON output does not depend on the last bits of a sum.
double r9(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return std::strtod(buf, nullptr);
}

// The shortest decimal text that reads back as `v` (at most 9 significant digits after r9), laid
// out as nlohmann_json lays numbers out (its dtoa_impl::format_buffer: fixed notation for decimal
// exponents -4 < n <= 15, ".0" on integral values, else d.ddde+XX). nlohmann's own Grisu2 output
// is not always the shortest (0.381007287 came out as 0.38100728699999997), which broke the
// documented 9 significant digits.
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";  // as nlohmann_json
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  std::string sign = v < 0 ? "-" : "";
  char buf[64];
  int prec = 1;
  for (; prec < 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, std::fabs(v));
    if (std::strtod(buf, nullptr) == std::fabs(v)) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", prec - 1, std::fabs(v));
  // buf = "d.ddde[+-]XX": digits and the exponent of the leading digit.
  const std::string text = buf;
  const size_t epos = text.find('e');
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (text[i] != '.') digits += text[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int k = static_cast<int>(digits.size());
  const int n = std::atoi(text.c_str() + epos + 1) + 1;  // decimal point after n digits
  constexpr int kMinExp = -4, kMaxExp = 15;              // nlohmann: -4, digits10
  std::string out;
  if (k <= n && n <= kMaxExp) {
    out = digits + std::string(static_cast<size_t>(n - k), '0') + ".0";
  } else if (0 < n && n <= kMaxExp) {
    out = digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (kMinExp < n && n <= 0) {
    out = "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out = digits.substr(0, 1) + (k > 1 ? "." + digits.substr(1) : "") + "e";
    const int e = n - 1;
    out += e < 0 ? "-" : "+";
    const int a = std::abs(e);
    out += (a < 10 ? "0" : "") + std::to_string(a);
  }
  return sign + out;
}

// nlohmann_json's dump(indent) layout, with floating-point numbers rounded to 9 significant
// digits (r9) and written by json_number.
void dump_rounded(const nlohmann::ordered_json& j, int indent, int level, std::string& out) {
  const std::string pad(static_cast<size_t>(indent * (level + 1)), ' ');
  const std::string close_pad(static_cast<size_t>(indent * level), ' ');
  if (j.is_object()) {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ",\n";
      first = false;
      out += pad + nlohmann::ordered_json(it.key()).dump() + ": ";
      dump_rounded(it.value(), indent, level + 1, out);
    }
    out += "\n" + close_pad + "}";
  } else if (j.is_array()) {
    if (j.empty()) {
      out += "[]";
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ",\n";
      out += pad;
      dump_rounded(j[i], indent, level + 1, out);
    }
    out += "\n" + close_pad + "]";
  } else if (j.is_number_float()) {
    out += json_number(r9(j.get<double>()));
  } else {
    out += j.dump();
  }
}

}  // namespace

std::string format_table(const StudyResult& r) {
  std::ostringstream out;
  out << "model " << r.model << ", pattern " << r.pattern << ", " << r.gpus
      << (r.gpus == 1 ? " GPU" : " GPUs") << (r.dynamic ? " (dynamic)" : "") << "; baseline "
      << r.baseline << "\n";
  out << "volume and control: bytes between GPUs per denoising step (all layers); vs base: volume / "
         "the baseline's ('-' when the baseline moves none); attn: attention phase per layer; step: "
         "one denoising step; e2e: all denoising steps; speedup: baseline e2e / this e2e; attn x: "
         "baseline attention / this attention; imbal: max over ranks of attention FLOPs / mean; "
         "LB: lower bound of the attention phase; sim/LB: simulated attention / LB (1.00 = at the "
         "bound)\n";
  const char* hdr =
      "%-58s %10s %7s %9s %9s %8s %9s %7s %6s %6s  %-24s %9s %6s\n";
  for (size_t i = 0; i < r.policies.size();) {
    const std::string topo = r.policies[i].topology;
    size_t j = i;
    while (j < r.policies.size() && r.policies[j].topology == topo) ++j;
    out << "\n== " << topo << "\n";
    char buf[512];
    std::snprintf(buf, sizeof buf, hdr, "policy", "volume", "vs base", "control", "attn/layer", "step",
                  "e2e", "speedup", "attn x", "imbal", "busiest link (util)", "LB/layer", "sim/LB");
    out << buf;
    double base_volume = -1;
    for (size_t k = i; k < j; ++k)
      if (policy_label(r.policies[k].policy) == r.baseline) base_volume = r.policies[k].volume_bytes;
    size_t best = i;
    for (size_t k = i; k < j; ++k) {
      const auto& p = r.policies[k];
      if (p.speedup > r.policies[best].speedup) best = k;
      const std::string busiest =
          p.busiest_link.empty() ? "-" : p.busiest_link + fmt(" (%.0f%%)", 100 * p.busiest_utilization);
      const std::string vs = base_volume == 0 ? "-" : fmt("%.1f%%", 100 * p.volume_vs_baseline);
      std::snprintf(buf, sizeof buf, hdr, policy_label(p.policy).c_str(), bytes_str(p.volume_bytes).c_str(),
                    vs.c_str(), bytes_str(p.control_bytes).c_str(),
                    fmt("%.2f ms", units::s_to_ms(p.attention_time_s)).c_str(),
                    fmt("%.2f s", p.step_time_s).c_str(), fmt("%.1f s", p.e2e_time_s).c_str(),
                    fmt("%.2fx", p.speedup).c_str(), fmt("%.2fx", p.attention_speedup).c_str(),
                    fmt("%.2f", p.compute_imbalance).c_str(), busiest.c_str(),
                    fmt("%.2f ms", units::s_to_ms(p.lower_bound_s)).c_str(),
                    fmt("%.2f", p.lower_bound_s > 0 ? p.attention_time_s / p.lower_bound_s : 0).c_str());
      out << buf;
    }
    if (j - i > 1) {
      const auto& b = r.policies[best];
      out << "fastest on " << topo << ": " << policy_label(b.policy) << fmt(", %.2fx end to end", b.speedup)
          << fmt(", %.2fx attention", b.attention_speedup) << " vs " << r.baseline << "\n";
    }
    i = j;
  }
  return out.str();
}

std::string to_json(const StudyResult& r) {
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["name"] = r.name;
  j["model"] = r.model;
  j["pattern"] = r.pattern;
  j["gpus"] = r.gpus;
  j["dynamic"] = r.dynamic;
  j["baseline"] = r.baseline;
  auto& arr = j["policies"] = nlohmann::ordered_json::array();
  for (const auto& p : r.policies) {
    nlohmann::ordered_json o;
    o["topology"] = p.topology;
    o["name"] = policy_label(p.policy);
    o["placement"] = p.policy.placement;
    o["scheme"] = p.policy.scheme;
    o["runtime"] = p.policy.runtime;
    nlohmann::ordered_json params = nlohmann::ordered_json::object();
    for (const auto& [k, v] : p.policy.params) params[k] = v;
    o["params"] = params;
    o["volume_bytes"] = r9(p.volume_bytes);
    o["control_bytes"] = r9(p.control_bytes);
    o["volume_vs_baseline"] = r9(p.volume_vs_baseline);
    o["attention_time_s"] = r9(p.attention_time_s);
    o["other_time_s"] = r9(p.other_time_s);
    o["step_time_s"] = r9(p.step_time_s);
    o["e2e_time_s"] = r9(p.e2e_time_s);
    o["lower_bound_s"] = r9(p.lower_bound_s);
    o["lower_bound_binding"] = p.lower_bound_binding;
    o["speedup"] = r9(p.speedup);
    o["attention_speedup"] = r9(p.attention_speedup);
    o["compute_imbalance"] = r9(p.compute_imbalance);
    o["busiest_link"] = p.busiest_link;
    o["busiest_utilization"] = r9(p.busiest_utilization);
    o["units"] = p.units;
    o["simulated"] = p.simulated;
    arr.push_back(std::move(o));
  }
  std::string text;
  dump_rounded(j, 2, 0, text);
  return text + "\n";
}

std::string to_csv(const StudyResult& r) {
  std::ostringstream out;
  out << "topology,policy,placement,scheme,runtime,volume_bytes,control_bytes,volume_vs_baseline,"
         "attention_time_s,step_time_s,e2e_time_s,speedup,attention_speedup,compute_imbalance,"
         "busiest_link,busiest_utilization,lower_bound_s\n";
  for (const auto& p : r.policies) {
    out << p.topology << ",\"" << policy_label(p.policy) << "\"," << p.policy.placement << ","
        << p.policy.scheme << "," << p.policy.runtime;
    for (double v : {p.volume_bytes, p.control_bytes, p.volume_vs_baseline, p.attention_time_s,
                     p.step_time_s, p.e2e_time_s, p.speedup, p.attention_speedup, p.compute_imbalance})
      out << "," << fmt("%.9g", v);
    out << "," << p.busiest_link << "," << fmt("%.9g", p.busiest_utilization) << ","
        << fmt("%.9g", p.lower_bound_s) << "\n";
  }
  return out.str();
}

Result<StudyResult> retime_plan(const policy::Plan& pl, const sim::SimOptions& options, const RunOptions& run) {
  if (pl.topology_json.empty())
    return Error{"the plan has no embedded topology (\"topology\": null), so it cannot be re-timed "
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
  double att = 0, lb = 0, vol = 0, units_n = 0;
  std::map<std::string, int64_t> binding;
  std::vector<double> res_bytes;
  for (const auto& lp : pl.layers) {
    sim::SimOptions so = options;
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
    for (const auto& t : lp.work.transfers)   // deliveries to GPUs; discovery traffic apart
      if (t.dst.rfind("gpu", 0) == 0 && t.id.find(".summary.") == std::string::npos &&
          t.id.find(".index.") == std::string::npos)
        vol += rep * t.bytes;
    res_bytes.resize(res->resources.size(), 0.0);
    for (size_t i = 0; i < res->resources.size(); ++i) res_bytes[i] += rep * res->resources[i].bytes;
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
  out.baseline = policy_label(r.policy);
  r.volume_bytes = vol / u * layers;
  r.step_time_s = (r.attention_time_s + r.other_time_s) * layers;
  r.e2e_time_s = r.step_time_s * steps;
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
