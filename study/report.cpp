// Study output: text table, JSON and CSV (include/sparsp/study.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "internal.hpp"
#include "sparsp/study.hpp"
#include "sparsp/units.hpp"

namespace sparsp::study {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A number of the text table: fixed with `decimals` below 1e6 in magnitude, else engineering
// notation (mantissa 1..999.99, exponent a multiple of 3: "1.00e300"), so a huge value (a plan
// with 1e300 FLOPs) stays a short, readable cell and the columns stay aligned; "inf" / "-inf"
// for infinities, "-" for NaN. `suffix` follows the number (" ms", "x", "%").
std::string num_text(double v, int decimals, const char* suffix) {
  char buf[64];
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return std::string(v > 0 ? "inf" : "-inf") + suffix;
  if (std::fabs(v) < 1e6) {
    std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v, suffix);
    return buf;
  }
  int e = static_cast<int>(std::floor(std::log10(std::fabs(v)) / 3)) * 3;
  double m = v / std::pow(10.0, e);
  if (std::fabs(m) >= 999.995) {  // rounds up to 1000.00: one step up
    e += 3;
    m /= 1000;
  }
  std::snprintf(buf, sizeof buf, "%.2fe%d%s", m, e, suffix);
  return buf;
}

std::string bytes_str(double b) {
  if (b >= 1e6 * units::kGB) return num_text(b / units::kGB, 2, " GB");
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

// A CSV field: quoted (inner quotes doubled) when it holds a comma, a quote or a newline.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// A ratio in the table; '-' where it has no value (a zero denominator, NaN).
std::string ratio_text(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  if (std::fabs(v) >= 1e6) {       // "%.2fx" -> "1.00e300x"
    const std::string f = format;  // "%.<d>f<suffix>", "%%" in the suffix meaning "%"
    std::string suffix = f.substr(f.find('f') + 1);
    if (const size_t pc = suffix.find("%%"); pc != std::string::npos) suffix.erase(pc, 1);
    return num_text(v, 2, suffix.c_str());
  }
  return fmt(format, v);
}

}  // namespace

bool mixed_gpu_counts(const StudyResult& r) {
  for (const auto& [topo, n] : r.gpus_per_topology)
    if (n != r.gpus) return true;
  return false;
}

std::string gpu_count_text(const StudyResult& r) {
  auto count = [](int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); };
  if (!mixed_gpu_counts(r)) return count(r.gpus);
  // Topologies of different sizes: "2 GPUs on 2x-h200-nvlink, 8 GPUs on 8x-l40s-gen4-4switch".
  std::string s;
  for (const auto& [topo, n] : r.gpus_per_topology)
    s += (s.empty() ? "" : ", ") + count(n) + " on " + topo;
  return s;
}

std::string format_table(const StudyResult& r) {
  std::ostringstream out;
  out << "model " << r.model << ", pattern " << r.pattern << ", " << gpu_count_text(r)
      << (r.dynamic ? " (dynamic)" : "") << "; baseline " << r.baseline << "\n";
  out << "volume and control: bytes between GPUs per denoising step (all layers); vs base: volume "
         "/ "
         "the baseline's ('-' when the baseline moves none); attn: attention phase per layer; "
         "step: "
         "one denoising step; e2e: the whole generation (denoising loop with CFG, text encoder, "
         "VAE "
         "decode, scheduler; '*': some stage not modelled, 0 s); speedup: baseline e2e / this e2e; "
         "attn x: "
         "baseline attention / this attention; imbal: max over ranks of attention FLOPs / mean; "
         "LB: lower bound of the attention phase; sim/LB: simulated attention / LB (1.00 = at the "
         "bound)\n";
  // Column widths; a numeric column widens to its longest cell (a huge value in engineering
  // notation), so every row of a section stays aligned. The policy and busiest-link columns keep
  // their widths (a longer label pushes only its own row, as before).
  const std::vector<size_t> kWidths = {58, 10, 7, 9, 9, 8, 9, 7, 6, 6, 24, 9, 6};
  const size_t kPolicy = 0, kBusiest = 10;
  for (size_t i = 0; i < r.policies.size();) {
    const std::string topo = r.policies[i].topology;
    size_t j = i;
    while (j < r.policies.size() && r.policies[j].topology == topo) ++j;
    out << "\n== " << topo << "\n";
    std::vector<std::vector<std::string>> rows = {
        {"policy", "volume", "vs base", "control", "attn/layer", "step", "e2e", "speedup", "attn x",
         "imbal", "busiest link (util)", "LB/layer", "sim/LB"}};
    double base_volume = -1;
    for (size_t k = i; k < j; ++k)
      if (policy_label(r.policies[k].policy) == r.baseline)
        base_volume = r.policies[k].volume_bytes;
    size_t best = i;
    for (size_t k = i; k < j; ++k) {
      const auto& p = r.policies[k];
      if (p.speedup > r.policies[best].speedup) best = k;
      const std::string busiest =
          p.busiest_link.empty() ? "-"
                                 : p.busiest_link + fmt(" (%.0f%%)", 100 * p.busiest_utilization);
      const std::string vs =
          base_volume == 0 ? "-" : ratio_text("%.1f%%", 100 * p.volume_vs_baseline);
      rows.push_back(
          {policy_label(p.policy), bytes_str(p.volume_bytes), vs, bytes_str(p.control_bytes),
           num_text(units::s_to_ms(p.attention_time_s), 2, " ms"), num_text(p.step_time_s, 2, " s"),
           num_text(p.e2e_time_s, 1, p.not_modelled.empty() ? " s" : " s*"),
           ratio_text("%.2fx", p.speedup), ratio_text("%.2fx", p.attention_speedup),
           num_text(p.compute_imbalance, 2, ""), busiest,
           num_text(units::s_to_ms(p.lower_bound_s), 2, " ms"),
           num_text(p.lower_bound_s > 0 ? p.attention_time_s / p.lower_bound_s : 0, 2, "")});
    }
    std::vector<size_t> w = kWidths;
    // The header row does not widen a column ("attn/layer" has always stood one character
    // out of its 9).
    for (size_t k = 1; k < rows.size(); ++k)
      for (size_t c = 0; c < rows[k].size(); ++c)
        if (c != kPolicy && c != kBusiest) w[c] = std::max(w[c], rows[k][c].size());
    for (const auto& row : rows) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) {
        const std::string pad(row[c].size() < w[c] ? w[c] - row[c].size() : 0, ' ');
        line += c == 0 ? "" : c == kBusiest ? "  " : " ";
        // Text columns left-aligned, numbers right-aligned.
        line += c == kPolicy || c == kBusiest ? row[c] + pad : pad + row[c];
      }
      out << line << "\n";
    }
    if (j - i > 1) {
      const auto& b = r.policies[best];
      out << "fastest on " << topo << ": " << policy_label(b.policy) << ", "
          << ratio_text("%.2fx", b.speedup) << " end to end, "
          << ratio_text("%.2fx", b.attention_speedup) << " attention"
          << " vs " << r.baseline << "\n";
    }
    if (!r.policies[i].not_modelled.empty()) {
      out << "* e2e without (no figure for this GPU, 0 s):";
      for (const auto& n : r.policies[i].not_modelled) out << " " << n;
      out << "\n";
    }
    for (const auto& sk : r.skipped)
      if (sk.topology == topo) out << "left out: " << sk.policy << " (" << sk.reason << ")\n";
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
  // Only where the counts differ (a study of one size prints as before).
  if (mixed_gpu_counts(r)) {
    auto& per = j["gpus_per_topology"] = nlohmann::ordered_json::object();
    for (const auto& [topo, n] : r.gpus_per_topology) per[topo] = n;
  }
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
    o["volume_bytes"] = whole_bytes(p.volume_bytes);
    o["control_bytes"] = whole_bytes(p.control_bytes);
    o["volume_vs_baseline"] = r9(p.volume_vs_baseline);
    o["attention_time_s"] = r9(p.attention_time_s);
    o["other_time_s"] = r9(p.other_time_s);
    o["step_time_s"] = r9(p.step_time_s);
    o["denoise_time_s"] = r9(p.denoise_time_s);
    o["e2e_time_s"] = r9(p.e2e_time_s);
    o["lower_bound_s"] = r9(p.lower_bound_s);
    o["lower_bound_binding"] = p.lower_bound_binding;
    o["speedup"] = r9(p.speedup);
    o["denoise_speedup"] = r9(p.denoise_speedup);
    o["attention_speedup"] = r9(p.attention_speedup);
    o["compute_imbalance"] = r9(p.compute_imbalance);
    // No link carried anything (one GPU, no transfers): null, as the table's '-'.
    o["busiest_link"] =
        p.busiest_link.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(p.busiest_link);
    o["busiest_utilization"] = r9(p.busiest_utilization);
    o["units"] = p.units;
    o["simulated"] = p.simulated;
    o["compute_source"] = p.compute_source;
    o["not_modelled"] = p.not_modelled;
    arr.push_back(std::move(o));
  }
  // Absent when nothing was left out (so studies without skipped policies print as before).
  if (!r.skipped.empty()) {
    auto& sk = j["skipped"] = nlohmann::ordered_json::array();
    for (const auto& s : r.skipped)
      sk.push_back({{"topology", s.topology}, {"policy", s.policy}, {"reason", s.reason}});
  }
  std::string text;
  dump_rounded(j, 2, 0, text);
  return text + "\n";
}

std::string to_csv(const StudyResult& r) {
  std::ostringstream out;
  out << "topology,policy,placement,scheme,runtime,volume_bytes,control_bytes,volume_vs_baseline,"
         "attention_time_s,step_time_s,e2e_time_s,speedup,attention_speedup,compute_imbalance,"
         "busiest_link,busiest_utilization,lower_bound_s,name,params,other_time_s,"
         "lower_bound_binding,units,simulated,denoise_time_s,denoise_speedup,not_modelled,"
         "compute_source\n";
  for (const auto& p : r.policies) {
    // The topology name comes from a file ("name"): quoted and escaped where it needs it.
    out << csv_field(p.topology) << ",\"" << policy_label(p.policy) << "\"," << p.policy.placement
        << "," << p.policy.scheme << "," << p.policy.runtime;
    out << "," << whole_bytes(p.volume_bytes) << "," << whole_bytes(p.control_bytes);
    for (double v : {p.volume_vs_baseline, p.attention_time_s, p.step_time_s, p.e2e_time_s,
                     p.speedup, p.attention_speedup, p.compute_imbalance})
      out << "," << (std::isfinite(v) ? fmt("%.9g", v) : std::string());  // no value: empty
    out << "," << csv_field(p.busiest_link) << "," << fmt("%.9g", p.busiest_utilization) << ","
        << fmt("%.9g", p.lower_bound_s);
    // The JSON fields the CSV lacked (issue 18, defect 19), appended: "the same per row".
    nlohmann::ordered_json params = nlohmann::ordered_json::object();
    for (const auto& [k, v] : p.policy.params) params[k] = v;
    out << "," << csv_field(policy_label(p.policy)) << "," << csv_field(params.dump()) << ","
        << fmt("%.9g", p.other_time_s) << "," << csv_field(p.lower_bound_binding) << "," << p.units
        << "," << p.simulated;
    // Issue 14's fields, appended: not_modelled joined with ';' (empty: every stage modelled).
    for (double v : {p.denoise_time_s, p.denoise_speedup})
      out << "," << (std::isfinite(v) ? fmt("%.9g", v) : std::string());
    out << "," << csv_field(join_not_modelled(p.not_modelled)) << "," << csv_field(p.compute_source)
        << "\n";
  }
  return out.str();
}

}  // namespace sparsp::study
