// Attention kernel registry (configs/kernels/kernels.json, embedded) and the compute-model
// precedence (resolve_compute). Formulas and precedence: include/sparsp/policy.hpp.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "sparsp/policy.hpp"

namespace sparsp::policy {
namespace detail {
extern const char* const kEmbeddedKernelsJson;
}

namespace {

using json = nlohmann::json;

// The embedded registry is part of the build: a malformed entry is a defect, reported with its
// JSON pointer and aborting (tests load it, so it never ships).
[[noreturn]] void bad_registry(const std::string& place, const std::string& what) {
  std::fprintf(stderr, "sparsp: internal error: configs/kernels/kernels.json:%s: %s\n",
               place.c_str(), what.c_str());
  std::abort();
}

double fraction(const json& v, const std::string& place) {
  // Up to 4: 8-bit kernels (SageAttention2) exceed the bf16 peak (INT8/FP8 tensor cores).
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0) ||
      v.get<double>() > 4)
    bad_registry(place, "expected a fraction of peak in (0, 4]");
  return v.get<double>();
}

int int_key(const std::string& k, const std::string& place) {
  if (k.empty() || k.size() > 7 || k.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(k) < 1)
    bad_registry(place, "expected a positive integer key");
  return std::stoi(k);
}

KernelFigure parse_figure(const json& v, const std::string& place) {
  KernelFigure f;
  if (v.is_number()) {
    f.long_seq = fraction(v, place);
    return f;
  }
  if (!v.is_object()) bad_registry(place, "expected a number or an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string p = place + "/" + it.key();
    if (it.key() == "long_seq")
      f.long_seq = fraction(it.value(), p);
    else if (it.key() == "seq_half_tokens") {
      if (!it.value().is_number() || !(it.value().get<double>() >= 0))
        bad_registry(p, "expected tokens >= 0");
      f.seq_half_tokens = it.value().get<double>();
    } else if (it.key() == "tile_q_tokens" || it.key() == "ctas_per_sm") {
      const json& x = it.value();
      if (!x.is_number_integer() || x.get<long long>() < 1 || x.get<long long>() > 4096)
        bad_registry(p, "expected an integer in [1, 4096]");
      (it.key() == "tile_q_tokens" ? f.tile_q_tokens : f.ctas_per_sm) = x.get<int>();
    } else if (it.key() == "single_cta_wave_time") {
      f.single_cta_wave_time = fraction(it.value(), p);
      if (f.single_cta_wave_time > 1) bad_registry(p, "expected a fraction of a wave in (0, 1]");
    } else if (it.key() == "by_head_dim") {
      for (auto h = it.value().begin(); h != it.value().end(); ++h)
        f.by_head_dim.emplace_back(int_key(h.key(), p + "/" + h.key()),
                                   fraction(h.value(), p + "/" + h.key()));
      std::sort(f.by_head_dim.begin(), f.by_head_dim.end());
    } else
      bad_registry(p, "unknown key");
  }
  if (!(f.long_seq > 0)) bad_registry(place + "/long_seq", "missing");
  if ((f.tile_q_tokens > 0) != (f.ctas_per_sm > 0))
    bad_registry(place + (f.tile_q_tokens > 0 ? "/ctas_per_sm" : "/tile_q_tokens"),
                 "tile_q_tokens and ctas_per_sm come together (the wave term)");
  if (f.single_cta_wave_time < 1 && f.ctas_per_sm < 2)
    bad_registry(place + "/single_cta_wave_time", "needs ctas_per_sm >= 2 (a partial wave)");
  return f;
}

std::vector<int> int_list(const json& v, const std::string& place) {
  std::vector<int> out;
  if (!v.is_array()) bad_registry(place, "expected an array");
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<int>() < 1) bad_registry(place, "expected integers >= 1");
    out.push_back(x.get<int>());
  }
  return out;
}

std::vector<KernelSpec> parse_registry() {
  const json root = json::parse(detail::kEmbeddedKernelsJson, nullptr, false);
  if (root.is_discarded() || !root.is_object() || !root.contains("kernels"))
    bad_registry("", "not a kernel registry");
  std::vector<KernelSpec> out;
  const auto& ks = root["kernels"];
  for (size_t i = 0; i < ks.size(); ++i) {
    const json& k = ks[i];
    const std::string at = "/kernels/" + std::to_string(i);
    KernelSpec s;
    for (auto it = k.begin(); it != k.end(); ++it) {
      const std::string p = at + "/" + it.key();
      const std::string& key = it.key();
      const json& v = it.value();
      if (key == "name" || key == "description") {
        if (!v.is_string()) bad_registry(p, "expected a string");
        (key == "name" ? s.name : s.description) = v.get<std::string>();
      } else if (key == "kind") {
        if (v != "dense" && v != "block_sparse") bad_registry(p, "expected dense or block_sparse");
        s.block_sparse = v == "block_sparse";
      } else if (key == "head_dims")
        s.head_dims = int_list(v, p);
      else if (key == "block_sizes")
        s.block_sizes = int_list(v, p);
      else if (key == "efficiency" || key == "gpu_models") {
        auto& dst = key == "efficiency" ? s.architectures : s.gpu_models;
        for (auto a = v.begin(); a != v.end(); ++a)
          dst.emplace_back(a.key(), parse_figure(a.value(), p + "/" + a.key()));
      } else if (key == "sparse_efficiency") {
        for (auto b = v.begin(); b != v.end(); ++b) {
          const double f = fraction(b.value(), p + "/" + b.key());
          if (f > 1) bad_registry(p + "/" + b.key(), "a fraction of dense, at most 1");
          s.sparse_by_block.emplace_back(int_key(b.key(), p + "/" + b.key()), f);
        }
        std::sort(s.sparse_by_block.begin(), s.sparse_by_block.end());
      } else if (key == "launch_overhead_us") {
        if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 1e6)
          bad_registry(p, "expected microseconds in [0, 1e6]");
        s.launch_overhead_s = v.get<double>() / 1e6;
      } else if (key != "sources")
        bad_registry(p, "unknown key");
    }
    if (s.name.empty()) bad_registry(at + "/name", "missing");
    if (s.name == "generic")  // its figures stay exactly today's (issue 14)
      for (const auto& [a, f] : s.architectures)
        if (f.tile_q_tokens > 0)
          bad_registry(at + "/efficiency/" + a + "/tile_q_tokens", "generic has no wave term");
    if (!k.contains("sources")) bad_registry(at + "/sources", "every kernel names its sources");
    if (s.architectures.empty()) bad_registry(at + "/efficiency", "missing");
    for (const auto& o : out)
      if (o.name == s.name) bad_registry(at + "/name", "duplicate kernel '" + s.name + "'");
    out.push_back(std::move(s));
  }
  if (out.empty() || out[0].name != "generic") bad_registry("/kernels/0", "generic comes first");
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// Piecewise linear in log2(x) between sorted points, flat outside.
double log_interp(const std::vector<std::pair<int, double>>& pts, double x) {
  if (x <= pts.front().first) return pts.front().second;
  if (x >= pts.back().first) return pts.back().second;
  for (size_t i = 1; i < pts.size(); ++i)
    if (x <= pts[i].first) {
      const double x0 = std::log2(pts[i - 1].first), x1 = std::log2(pts[i].first);
      const double t = (std::log2(x) - x0) / (x1 - x0);
      return pts[i - 1].second + t * (pts[i].second - pts[i - 1].second);
    }
  return pts.back().second;
}

}  // namespace

const std::vector<KernelSpec>& kernels() {
  static const std::vector<KernelSpec> registry = parse_registry();
  return registry;
}

Result<const KernelSpec*> find_kernel(const std::string& name, const std::string& file,
                                      const std::string& place) {
  std::string names;
  for (const auto& k : kernels()) {
    if (k.name == name) return &k;
    names += (names.empty() ? "" : ", ") + k.name;
  }
  return input_error(
      file, place,
      "unknown kernel '" + name + "' (valid: " + names + "; `sparsp simulate --list`)");
}

double kernel_dense_efficiency(const KernelFigure& f, int head_dim, double seq_tokens) {
  double e = f.long_seq;
  for (const auto& [hd, v] : f.by_head_dim)
    if (hd == head_dim) e = v;
  if (f.seq_half_tokens > 0) e *= seq_tokens / (seq_tokens + f.seq_half_tokens);
  return e;
}

double attention_ctas(int batch, int heads, double query_tokens, int tile_q) {
  return static_cast<double>(batch) * heads * std::ceil(query_tokens / tile_q);
}

namespace {

// A call's time in wave units: its full waves and its last (partial) wave's time, 0 if none.
struct WaveUnits {
  double full = 0, partial = 0;
};

WaveUnits wave_units(const KernelFigure& f, double ctas, int sms) {
  const double slots = static_cast<double>(sms) * f.ctas_per_sm;
  WaveUnits u;
  u.full = std::floor(ctas / slots);
  const double rem = ctas - u.full * slots;
  if (rem > 0) {
    // The last wave's busiest SM holds k of its ctas_per_sm slots; it takes the time of a full
    // wave at k = ctas_per_sm, single_cta_wave_time at k = 1, linear between.
    const double k = std::min<double>(std::ceil(rem / sms), f.ctas_per_sm);
    u.partial = f.ctas_per_sm < 2 ? 1.0
                                  : f.single_cta_wave_time + (1 - f.single_cta_wave_time) *
                                                                 (k - 1) / (f.ctas_per_sm - 1);
  }
  return u;
}

bool has_wave_term(const KernelFigure& f, double ctas, int sms) {
  return f.tile_q_tokens >= 1 && f.ctas_per_sm >= 1 && ctas >= 1 && sms >= 1;
}

}  // namespace

double kernel_wave_factor(const KernelFigure& f, double ctas, int sms) {
  if (!has_wave_term(f, ctas, sms)) return 1.0;
  const WaveUnits u = wave_units(f, ctas, sms);
  const double slots = static_cast<double>(sms) * f.ctas_per_sm;
  return std::min(1.0, ctas / slots / (u.full + u.partial));
}

double kernel_last_wave_share(const KernelFigure& f, double ctas, int sms) {
  if (!has_wave_term(f, ctas, sms)) return 0.0;
  const WaveUnits u = wave_units(f, ctas, sms);
  const double units = u.full + u.partial;
  if (units <= 1) return 1.0;  // one wave or less: every CTA is dispatched at the start
  return (u.partial > 0 ? u.partial : 1.0) / units;
}

double kernel_sparse_efficiency(const KernelSpec& k, int block_tokens) {
  if (!k.block_sparse || k.sparse_by_block.empty()) return 1.0;
  const auto& first = k.sparse_by_block.front();
  if (block_tokens < first.first)
    return first.second * static_cast<double>(block_tokens) / first.first;
  return log_interp(k.sparse_by_block, block_tokens);
}

std::string gpu_architecture(const topology::GpuSpec& gpu) {
  if (!gpu.architecture.empty()) return lower(gpu.architecture);
  const std::string name = lower(gpu.model);
  if (name.find("h100") != std::string::npos || name.find("h200") != std::string::npos ||
      name.find("h800") != std::string::npos)
    return "hopper";
  return "";
}

const KernelFigure* kernel_figure(const KernelSpec& k, const topology::GpuSpec& gpu) {
  for (const auto& [model, f] : k.gpu_models)
    if (model == gpu.model) return &f;
  const std::string arch = gpu_architecture(gpu);
  for (const auto& [a, f] : k.architectures)
    if (!arch.empty() && a == arch) return &f;
  for (const auto& [a, f] : k.architectures)
    if (a == "default") return &f;
  return nullptr;
}

Result<ResolvedCompute> resolve_compute(const topology::GpuSpec& gpu,
                                        const std::vector<topology::MeasuredCompute>& measured,
                                        const ComputeRequest& rq) {
  ResolvedCompute out;
  ComputeModel& m = out.model;
  if (gpu.peak_bf16_flops > 0) m.peak_bf16_flops = gpu.peak_bf16_flops;
  if (gpu.memory_bandwidth_Bps > 0) m.memory_bandwidth_Bps = gpu.memory_bandwidth_Bps;
  const KernelSpec* kernel = &kernels().front();  // generic
  if (!rq.kernel.empty()) {
    auto k = find_kernel(rq.kernel, rq.file, rq.kernel_place);
    if (!k) return k.error();
    kernel = *k;
    if (!kernel->head_dims.empty() && std::find(kernel->head_dims.begin(), kernel->head_dims.end(),
                                                rq.head_dim) == kernel->head_dims.end()) {
      std::string hds;
      for (int h : kernel->head_dims) hds += (hds.empty() ? "" : ", ") + std::to_string(h);
      return input_error(rq.file, rq.kernel_place,
                         "kernel " + kernel->name + " supports head_dim " + hds +
                             "; the model's is " + std::to_string(rq.head_dim));
    }
  }
  // 2. a measured entry: this GPU model and head_dim, the chosen kernel (any when none chosen).
  const topology::MeasuredCompute* meas = nullptr;
  for (const auto& e : measured)
    if (e.gpu_model == gpu.model && e.head_dim == rq.head_dim &&
        (rq.kernel.empty() || e.kernel == rq.kernel)) {
      meas = &e;
      break;
    }
  std::string att, gemm, launch;
  if (rq.attention_efficiency > 0) {
    m.attention_efficiency = rq.attention_efficiency;
    att = "attention_efficiency given";
  } else if (meas && !meas->attention_flops_by_block.empty() && m.peak_bf16_flops > 0) {
    m.attention_efficiency =
        log_interp(meas->attention_flops_by_block, std::max(1, rq.block_tokens)) /
        m.peak_bf16_flops;
    att = "measured_compute " + meas->place + " (kernel " + meas->kernel + ")";
  } else {
    const KernelFigure* f = kernel_figure(*kernel, gpu);
    if (!f) {
      std::string have;
      for (const auto& [a, fig] : kernel->architectures) have += (have.empty() ? "" : ", ") + a;
      for (const auto& [g, fig] : kernel->gpu_models) have += (have.empty() ? "" : ", ") + g;
      const std::string arch = gpu_architecture(gpu);
      return input_error(rq.file, rq.kernel_place,
                         "kernel " + kernel->name + " has no efficiency figure for " +
                             (arch.empty() ? "an unknown architecture" : arch) + " (" + gpu.model +
                             "); it has figures for " + have);
    }
    const double dense = kernel_dense_efficiency(*f, rq.head_dim, std::max(1.0, rq.seq_tokens));
    const double sparse = kernel_sparse_efficiency(*kernel, std::max(1, rq.block_tokens));
    double tail = 1.0, ctas = 0;
    if (f->tile_q_tokens > 0 && rq.heads > 0 && rq.query_tokens >= 1 && gpu.sm_count > 0) {
      ctas = attention_ctas(std::max(1, rq.batch), rq.heads, rq.query_tokens, f->tile_q_tokens);
      tail = kernel_wave_factor(*f, ctas, gpu.sm_count);
      m.attention_last_wave_share = kernel_last_wave_share(*f, ctas, gpu.sm_count);
    }
    m.attention_efficiency = dense * sparse * tail;
    // The figure's origin: the GPU model's own entry, else its architecture's (or the default).
    std::string origin = gpu_architecture(gpu);
    for (const auto& [model, fig] : kernel->gpu_models)
      if (&fig == f) origin = model;
    att = std::string(rq.kernel.empty() ? "generic" : "kernel " + kernel->name) + " (" +
          (origin.empty() ? "default" : origin) + ", " + num(m.attention_efficiency) + " of peak)";
    if (ctas > 0)
      att += "; waves " + num(ctas / (static_cast<double>(gpu.sm_count) * f->ctas_per_sm)) +
             " of " + std::to_string(gpu.sm_count) + " SMs x " + std::to_string(f->ctas_per_sm) +
             " (" + std::to_string(static_cast<long long>(ctas)) + " CTAs): tail " + num(tail);
    // A block size the kernel does not run natively is priced, not refused, by the registry's
    // documented rule (configs/README.md: log2-linear between listed blocks, flat above, scaled by
    // b / b0 below), and the source says so.
    if (kernel->block_sparse && !kernel->block_sizes.empty() && rq.block_tokens >= 1 &&
        std::find(kernel->block_sizes.begin(), kernel->block_sizes.end(), rq.block_tokens) ==
            kernel->block_sizes.end()) {
      std::string native;
      for (int b : kernel->block_sizes) native += (native.empty() ? "" : ", ") + std::to_string(b);
      att += "; block " + std::to_string(rq.block_tokens) + " not native to " + kernel->name +
             " (" + native + "): sparse efficiency " + num(sparse) + " by the registry rule";
    }
  }
  if (rq.gemm_efficiency > 0) {
    m.gemm_efficiency = rq.gemm_efficiency;
    gemm = "given";
  } else if (meas && meas->gemm_flops > 0 && m.peak_bf16_flops > 0) {
    m.gemm_efficiency = meas->gemm_flops / m.peak_bf16_flops;
    gemm = "measured";
  }
  if (meas && meas->launch_overhead_s >= 0) {
    m.launch_overhead_s = meas->launch_overhead_s;
    launch = "measured";
  } else {
    m.launch_overhead_s = kernel->launch_overhead_s;
  }
  std::string cont;
  if (meas && meas->contention_ce_copy >= 0) {
    out.contention_ce_copy = meas->contention_ce_copy;
    cont = "measured";
  }
  if (meas && meas->contention_sm_copy_per_sm >= 0) {
    out.contention_sm_copy_per_sm = meas->contention_sm_copy_per_sm;
    cont = "measured";
  }
  out.source = att;
  if (!gemm.empty()) out.source += "; gemm " + gemm;
  if (!launch.empty()) out.source += "; launch overhead " + launch;
  if (!cont.empty()) out.source += "; contention " + cont;
  return out;
}

}  // namespace sparsp::policy
