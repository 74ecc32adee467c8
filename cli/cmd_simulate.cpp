// `sparsp simulate`: compare sequence-parallel policies on a server, model and mask (a study).
// Thin layer: options -> study::Study (flags override the study file) -> study::run_study ->
// output.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "sparsp/plan.hpp"
#include "sparsp/study.hpp"
#include "sparsp/sweep.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::cli {

namespace {

struct SimulateArgs {
  double max_memory_gib = study::kDefaultMaxMemoryBytes / (1ull << 30);
  std::string config;
  std::string topology;
  std::string model;
  std::string pattern;
  std::optional<int> block;
  std::string tile, window;
  std::optional<double> density, threshold, decay;
  std::optional<uint64_t> seed;
  std::optional<int> topk;
  std::optional<int> gpus;
  std::string granularity;
  std::vector<std::string> policies;
  std::string baseline;
  std::optional<int> steps, layers;
  std::optional<double> attention_efficiency;
  std::optional<std::string> kernel;  // given (even "") or not
  bool json = false, csv = false, list = false;
  std::string progress = "auto";
  std::string trace_dir, plan_dir, plan_in;
  std::vector<std::string> given;  ///< flags given on the command line (CLI11 count > 0)
};

// Flags that still make sense with --plan (output format only).
bool plan_compatible(const std::string& flag) {
  return flag == "--json" || flag == "--csv" || flag == "--trace" || flag == "--plan" ||
         flag == "--progress";
}

// T,H,W with each in 1..2^20, the bound of a config's /pattern/tile and /pattern/window
// (study/config.cpp get_triple). Parsed with strtoll, not %d: an out-of-int value was wrapped
// (UB) into a small one.
Result<std::array<int, 3>> parse_triple(const std::string& flag, const std::string& s) {
  constexpr long long kMax = 1 << 20;
  std::array<int, 3> v{};
  const char* p = s.c_str();
  for (int i = 0; i < 3; ++i) {
    if (i > 0 && *p++ != ',') p = nullptr;
    char* end = nullptr;
    errno = 0;
    const long long x =
        p && std::isdigit(static_cast<unsigned char>(*p)) ? std::strtoll(p, &end, 10) : 0;
    if (!p || !end || errno == ERANGE || x < 1 || x > kMax)
      return input_error(
          "<command line>", flag,
          "expected T,H,W (integers in 1.." + std::to_string(kMax) + "), got '" + s + "'");
    v[static_cast<size_t>(i)] = static_cast<int>(x);
    p = end;
  }
  if (*p != '\0')
    return input_error(
        "<command line>", flag,
        "expected T,H,W (integers in 1.." + std::to_string(kMax) + "), got '" + s + "'");
  return v;
}

std::string safe_name(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return s;
}

// Creates the output folder DIR itself, as `mkdir` does: its parent must exist (the rule of every
// output file, include/sparsp/output_file.hpp: a missing folder is an error, exit 2, never made
// silently; `--emit-plan /nonexist/x` used to create /nonexist too).
Status make_output_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return Ok{};
  if (fs::exists(fs::symlink_status(dir, ec)))
    return input_error(dir, "", "cannot write: is not a folder");
  fs::path parent = fs::path(dir).lexically_normal();
  if (!parent.has_filename()) parent = parent.parent_path();  // "out/" -> "out"
  parent = parent.parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return input_error(dir, "",
                       fs::exists(parent, ec)
                           ? "cannot create folder: " + parent.string() + " is not a folder"
                           : "cannot create folder: folder " + parent.string() + " does not exist");
  fs::create_directory(dir, ec);
  if (ec) return input_error(dir, "", "cannot create folder: " + ec.message());
  return Ok{};
}

// Writes to DIR/name through a temporary file and a rename (no partial output).
Status write_file(const std::string& dir, const std::string& name, const std::string& text) {
  if (auto st = make_output_dir(dir); !st) return st;
  return write_output_file((std::filesystem::path(dir) / name).string(), text);
}

// Output folders are written after the run: refuse one that cannot be created or written now.
Status check_output_dir(const std::string& dir) {
  if (dir.empty()) return Ok{};
  if (auto st = make_output_dir(dir); !st) return st;
  return study::check_writable((std::filesystem::path(dir) / ".sparsp-write-check").string());
}

// Files `*<suffix>` in `dir` that this run does not write (`ours`: the names it writes), sorted.
// An --emit-plan (or --trace) folder with plans of an earlier run would pass those off as this
// run's to `replay` on the folder; they are refused, never deleted (they may be the user's).
Status refuse_stale_outputs(const std::string& dir, const std::string& suffix,
                            const std::set<std::string>& ours, const std::string& option) {
  if (dir.empty()) return Ok{};
  std::error_code ec;
  std::vector<std::string> stale;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 && !ours.count(name))
      stale.push_back(name);
  }
  if (stale.empty()) return Ok{};
  std::sort(stale.begin(), stale.end());
  return input_error(
      dir, "",
      option + " folder holds " + std::to_string(stale.size()) + " " + suffix + " file" +
          (stale.size() == 1 ? "" : "s") + " that this run does not write (" + stale.front() +
          (stale.size() > 1 ? ", ..." : "") +
          "), from an earlier run; nothing was written: give an empty or new folder, or remove "
          "them");
}

// A plan is written only if `replay` and `simulate --plan` will take it (issue 18, defect 7):
// fewer blocks than GPUs leaves a GPU with no block, which the loader refuses.
Status check_emitted_plan(const std::string& dir, const std::string& name, const policy::Plan& plan,
                          const std::string& text) {
  const std::string path = (std::filesystem::path(dir) / name).string();
  if (plan.num_blocks < plan.gpus)
    return input_error(path, "",
                       "not written: the pattern has " + std::to_string(plan.num_blocks) +
                           " blocks for " + std::to_string(plan.gpus) +
                           " GPUs, so some GPU would own no block and replay would refuse the "
                           "plan; use a smaller --block or fewer --gpus");
  if (auto back = policy::parse_plan(text, path); !back)
    return Error{path + ": not written: the plan would not load (" + back.error().message + ")",
                 back.error().exit_code};
  return Ok{};
}

Result<study::Study> build_study(const SimulateArgs& a) {
  // Flags also supply a field the study file lacks (configs/studies/README: "Command-line flags
  // override the study's fields"); they are applied below either way.
  nlohmann::json fill = nlohmann::json::object();
  if (!a.topology.empty()) fill["topology"] = a.topology;
  if (!a.model.empty()) fill["model"] = a.model;
  if (!a.policies.empty()) fill["policies"] = a.policies;
  if (!a.pattern.empty()) fill["pattern"] = {{"kind", "dense"}};  // replaced below
  auto st = a.config.empty() ? study::default_study()
                             : study::load_study(a.config, fill.empty() ? "" : fill.dump());
  if (!st) return st.error();
  study::Study s = std::move(*st);
  const std::string cl = "<command line>";
  // Errors about a field a flag set name the flag, not the study (study::Study::flag_places).
  auto flag = [&](bool given, const char* place, const char* name) {
    if (given) s.flag_places[place] = name;
  };
  flag(!a.topology.empty(), "/topology", "--topology");
  flag(!a.model.empty(), "/model", "--model");
  flag(!a.pattern.empty(), "/pattern", "--pattern");
  flag(a.block.has_value(), "/pattern/block", "--block");
  flag(!a.tile.empty(), "/pattern/tile", "--tile");
  flag(!a.window.empty(), "/pattern/window", "--window");
  flag(a.density.has_value(), "/pattern/density", "--density");
  flag(a.seed.has_value(), "/pattern/seed", "--seed");
  flag(a.topk.has_value(), "/pattern/topk", "--topk");
  flag(a.threshold.has_value(), "/pattern/threshold", "--threshold");
  flag(a.decay.has_value(), "/pattern/decay", "--decay");
  flag(a.gpus.has_value(), "/gpus", "--gpus");
  flag(!a.baseline.empty(), "/baseline", "--baseline");
  flag(!a.policies.empty(), "/policies", "--policy");
  flag(a.steps.has_value(), "/steps", "--steps");
  flag(a.layers.has_value(), "/layers", "--layers");
  if (!a.topology.empty()) s.topologies = {a.topology};
  if (!a.model.empty()) s.model = a.model;
  if (!a.pattern.empty()) {
    const bool file =
        a.pattern.find('/') != std::string::npos || a.pattern.find('.') != std::string::npos;
    s.pattern.kind = file ? "file" : a.pattern;
    s.pattern.input = file ? a.pattern : "";
    if (file && !a.block) s.pattern.block_tokens = 0;  // the file's own
    // A recording names its model: it is the study's unless --model or a config says otherwise.
    if (file && a.model.empty() && a.config.empty()) {
      auto rm = patterns::recording_model(a.pattern);
      if (!rm) return rm.error();
      if (!rm->empty()) s.model = *rm;
    }
  }
  if (a.block) s.pattern.block_tokens = *a.block;
  if (!a.tile.empty()) {
    auto v = parse_triple("--tile", a.tile);
    if (!v) return v.error();
    s.pattern.tile = *v;
  }
  if (!a.window.empty()) {
    auto v = parse_triple("--window", a.window);
    if (!v) return v.error();
    s.pattern.window = *v;
  }
  if (a.density) s.pattern.density = *a.density;
  if (a.seed) s.pattern.seed = *a.seed;
  if (a.topk) s.pattern.topk = *a.topk;
  if (a.threshold) s.pattern.threshold = *a.threshold;
  if (a.decay) s.pattern.decay = *a.decay;
  if (a.gpus) {
    if (*a.gpus < 1) return input_error(cl, "--gpus", "expected a positive count");
    s.gpus.clear();
    s.num_gpus = *a.gpus;
  }
  if (!a.granularity.empty()) {
    if (a.granularity == "block")
      s.granularity = policy::Granularity::block;
    else if (a.granularity == "head_block")
      s.granularity = policy::Granularity::head_block;
    else
      return input_error(cl, "--granularity", "expected block or head_block");
  }
  if (!a.policies.empty()) {
    s.policies.clear();
    s.policy_places.clear();
    for (size_t i = 0; i < a.policies.size(); ++i) {
      auto p = policy::parse_policy(a.policies[i]);
      if (!p) return input_error(cl, "--policy", p.error().message);
      s.policies.push_back(*p);
      s.policy_places.push_back("--policy[" + std::to_string(i) + "]");
    }
    s.baseline.clear();
  }
  if (!a.baseline.empty()) s.baseline = a.baseline;
  if (a.attention_efficiency) {
    if (!(*a.attention_efficiency > 0 && *a.attention_efficiency <= 1))
      return input_error(cl, "--attention-efficiency", "expected a fraction in (0, 1]");
    s.attention_efficiency = *a.attention_efficiency;
  }
  if (a.kernel) {  // "" is refused by find_kernel, as /compute/kernel "" is
    if (auto k = policy::find_kernel(*a.kernel, cl, "--kernel"); !k) return k.error();
    s.kernel = *a.kernel;
    s.kernel_place = "--kernel";
  }
  if (a.steps) {
    if (*a.steps < 1) return input_error(cl, "--steps", "expected a positive count");
    s.steps.clear();
    for (int i = 0; i < *a.steps; ++i) s.steps.push_back(i);
  }
  if (a.layers) {
    if (*a.layers < 1) return input_error(cl, "--layers", "expected a positive count");
    s.layers.clear();
    for (int i = 0; i < *a.layers; ++i) s.layers.push_back(i);
  }
  // `--topology` with fewer GPUs than the study's degree and no `--gpus`: use all its GPUs (the
  // study's ranks would not fit) and say so on stderr. Policies that cannot run at that degree
  // (USP below 4 ranks, ...) are left out by the study runner (StudyResult::skipped).
  // The built-in default study runs on all the GPUs of a `--topology` (README: "the default
  // study on it (all its GPUs)"), more than its 8 too.
  if (!a.topology.empty() && !a.gpus && s.gpus.empty() && s.num_gpus > 0) {
    auto t = topology::Topology::load(a.topology);
    if (t && (t->num_gpus() < s.num_gpus || (a.config.empty() && t->num_gpus() > s.num_gpus))) {
      std::fprintf(stderr,
                   "sparsp: note: %s has %d GPU%s, the study asks for %d: simulating "
                   "sequence-parallel degree %d (choose with --gpus)\n",
                   a.topology.c_str(), t->num_gpus(), t->num_gpus() == 1 ? "" : "s", s.num_gpus,
                   t->num_gpus());
      s.num_gpus = t->num_gpus();
    }
  }
  return s;
}

// The text table and the JSON say which policies were left out; CSV has no row for them, so a
// note on stderr does.
void print(const study::StudyResult& r, const SimulateArgs& a) {
  if (a.json)
    std::cout << study::to_json(r);
  else if (a.csv)
    std::cout << study::to_csv(r);
  else
    std::cout << study::format_table(r);
  if (a.csv)
    for (const auto& s : r.skipped)
      std::fprintf(stderr, "sparsp: note: %s left out on %s (%s)\n", s.policy.c_str(),
                   s.topology.c_str(), s.reason.c_str());
}

int run(const SimulateArgs& a) {
  if (a.list) {
    // --list lists; any other option (but --json) would be ignored: refuse it.
    for (const auto& f : a.given)
      if (f != "--list" && f != "--json")
        return report(input_error("<command line>", f, "cannot be combined with --list"));
    if (a.json) {
      nlohmann::ordered_json j;
      auto add = [&j](const char* key, const std::vector<policy::PolicyInfo>& v) {
        auto& arr = j[key] = nlohmann::ordered_json::array();
        for (const auto& p : v) arr.push_back({{"name", p.name}, {"description", p.description}});
      };
      add("placements", policy::placements());
      add("schemes", policy::schemes());
      add("runtimes", policy::runtimes());
      auto& ks = j["kernels"] = nlohmann::ordered_json::array();
      for (const auto& k : policy::kernels()) {
        nlohmann::ordered_json o{{"name", k.name},
                                 {"description", k.description},
                                 {"kind", k.block_sparse ? "block_sparse" : "dense"}};
        auto& arch = o["architectures"] = nlohmann::ordered_json::array();
        for (const auto& [arch_name, f] : k.architectures) arch.push_back(arch_name);
        auto& models = o["gpu_models"] = nlohmann::ordered_json::array();
        for (const auto& [model, f] : k.gpu_models) models.push_back(model);
        ks.push_back(std::move(o));
      }
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << "placements:\n";
    for (const auto& p : policy::placements())
      std::cout << "  " << p.name << ": " << p.description << "\n";
    std::cout << "schemes:\n";
    for (const auto& p : policy::schemes())
      std::cout << "  " << p.name << ": " << p.description << "\n";
    std::cout << "runtimes:\n";
    for (const auto& p : policy::runtimes())
      std::cout << "  " << p.name << ": " << p.description << "\n";
    std::cout << "kernels (--kernel; configs/kernels/kernels.json):\n";
    for (const auto& k : policy::kernels()) {
      std::string arch;
      for (const auto& [name, f] : k.architectures) arch += (arch.empty() ? "" : ", ") + name;
      // GPU models with their own figure (e.g. each Ada part for fa2 and sage2), after the
      // architectures.
      std::string models;
      for (const auto& [model, f] : k.gpu_models) models += (models.empty() ? "" : ", ") + model;
      std::cout << "  " << k.name << ": " << k.description << " ["
                << (k.block_sparse ? "block_sparse" : "dense") << "; " << arch
                << (models.empty() ? "" : "; GPU models: " + models) << "]\n";
    }
    return 0;
  }
  if (a.json && a.csv)
    return report(
        input_error("<command line>", "--csv", "--json and --csv are mutually exclusive"));
  if (!a.plan_in.empty()) {
    for (const auto& f : a.given)
      if (!plan_compatible(f))
        return report(
            input_error("<command line>", f,
                        "--plan re-times a plan as written; " + f + " cannot be combined with it"));
    if (auto st = check_output_dir(a.trace_dir); !st) return report(st.error());
    auto pl = policy::load_plan(a.plan_in);
    if (!pl) return report(pl.error());
    if (pl->topology_json.empty())
      return report(input_error(a.plan_in, "/topology",
                                "null: a plan without its topology cannot be re-timed as written "
                                "(time a hand-made plan with `sparsp validate --topology T`)"));
    study::RunOptions ro;
    ro.keep_trace = !a.trace_dir.empty();
    auto r = study::retime_plan(*pl, {}, ro);
    if (!r) return report(r.error());
    if (ro.keep_trace && !r->policies.empty() && !r->policies[0].trace_json.empty()) {
      const std::string stem = std::filesystem::path(a.plan_in).filename().string();
      if (auto st =
              write_file(a.trace_dir, safe_name(stem) + ".trace.json", r->policies[0].trace_json);
          !st)
        return report(st.error());
    }
    print(*r, a);
    return 0;
  }
  auto study = build_study(a);
  if (!study) return report(study.error());
  if (auto st = options_apply_to_kind(study->pattern.kind, a.given); !st) return report(st.error());
  for (const std::string* dir : {&a.trace_dir, &a.plan_dir})
    if (auto st = check_output_dir(*dir); !st) return report(st.error());
  study::RunOptions opt;
  opt.max_memory_bytes = a.max_memory_gib * (1ull << 30);
  opt.keep_plans = !a.plan_dir.empty();
  opt.keep_trace = !a.trace_dir.empty();
  // Progress on stderr: a bar on a terminal, nothing otherwise (piped output and logs unchanged).
  const study::ProgressMode mode =
      study::resolve_progress_mode(a.progress == "bar"     ? study::ProgressMode::bar
                                   : a.progress == "lines" ? study::ProgressMode::lines
                                   : a.progress == "off"   ? study::ProgressMode::off
                                                           : study::ProgressMode::automatic,
                                   false, study::ProgressMode::off);
  std::optional<study::ProgressMeter> meter;
  int64_t units_done = 0, units_total = 0;
  if (mode != study::ProgressMode::off)
    opt.progress = [&](int64_t done, int64_t total) {
      if (!meter) meter.emplace(mode, total, 0, "layers", "simulate", 10.0);
      units_done = done;
      units_total = total;
      meter->update(done, done == total);
    };
  auto r = study::run_study(*study, opt);
  if (meter && units_done != units_total) meter->update(units_done, true);  // ends the bar line
  if (!r) return report(r.error());
  // Names and texts first: every plan is checked, and the folders are checked for files of an
  // earlier run, before anything is written (no partial output).
  struct Out {
    std::string stem, plan_text;
    const study::PolicyResult* p;
  };
  std::vector<Out> outs;
  std::set<std::string> plan_names, trace_names;
  for (const auto& p : r->policies) {
    std::string label = p.policy.name();
    for (const auto& [k, v] : p.policy.params) {
      std::ostringstream o;
      o << "_" << k << "-" << v;
      label += o.str();
    }
    Out o{safe_name(p.topology + "__" + label), "", &p};
    if (opt.keep_plans && p.plan) {
      o.plan_text = policy::to_json(*p.plan);
      if (auto st = check_emitted_plan(a.plan_dir, o.stem + ".plan.json", *p.plan, o.plan_text);
          !st)
        return report(st.error());
      plan_names.insert(o.stem + ".plan.json");
    }
    if (opt.keep_trace && !p.trace_json.empty()) trace_names.insert(o.stem + ".trace.json");
    outs.push_back(std::move(o));
  }
  if (opt.keep_plans)
    if (auto st = refuse_stale_outputs(a.plan_dir, ".plan.json", plan_names, "--emit-plan"); !st)
      return report(st.error());
  if (opt.keep_trace)
    if (auto st = refuse_stale_outputs(a.trace_dir, ".trace.json", trace_names, "--trace"); !st)
      return report(st.error());
  for (const auto& o : outs) {
    if (opt.keep_plans && o.p->plan) {
      if (auto st = write_file(a.plan_dir, o.stem + ".plan.json", o.plan_text); !st)
        return report(st.error());
    }
    if (opt.keep_trace && !o.p->trace_json.empty()) {
      if (auto st = write_file(a.trace_dir, o.stem + ".trace.json", o.p->trace_json); !st)
        return report(st.error());
    }
  }
  print(*r, a);
  return 0;
}

}  // namespace

void add_simulate_commands(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SimulateArgs>();
  auto* cmd = app.add_subcommand(
      "simulate",
      "Compare sequence-parallel policies (placement/scheme/runtime) on a server, model and "
      "sparse mask. With no arguments, runs the default study (configs/studies/default.json).");
  cmd->add_option("--config", args->config, "study JSON (configs/studies/README.md)");
  cmd->add_option("--topology", args->topology,
                  "topology preset or JSON file (overrides the study)");
  cmd->add_option("--model", args->model, "model preset or JSON file");
  cmd->add_option("--pattern", args->pattern,
                  "pattern kind (sta, radial, topk, ...) or recorded mask file");
  cmd->add_option("--block", args->block, "tokens per block")->check(at_least(1));
  cmd->add_option("--tile", args->tile, "tile shape T,H,W");
  cmd->add_option("--window", args->window, "STA window in tiles T,H,W");
  cmd->add_option("--density", args->density, "density (random, topk without --topk)")
      ->check(between(0, 1));
  cmd->add_option("--seed", args->seed, "RNG seed of the pattern generator")->check(at_least(0));
  cmd->add_option("--topk", args->topk, "KV blocks kept per query block (topk)")
      ->check(at_least(0));
  cmd->add_option("--threshold", args->threshold, "softmax mass to keep (cdf)")
      ->check(above_up_to(0, 1));
  cmd->add_option("--decay", args->decay, "band decay factor (radial)")->check(finite_number());
  cmd->add_option("--gpus", args->gpus,
                  "sequence-parallel degree: the first N GPUs of the topology")
      ->check(at_least(1));
  cmd->add_option("--granularity", args->granularity, "demand granularity: block | head_block");
  cmd->add_option(
      "--policy", args->policies,
      "PLACEMENT/SCHEME/RUNTIME[:key=value,...] (repeatable; replaces the study's list; "
      "route=host_staged forces host staging)");
  cmd->add_option("--baseline", args->baseline, "policy the speedups are relative to");
  cmd->add_option("--steps", args->steps, "simulate the first N denoising steps (e2e extrapolated)")
      ->check(at_least(1));
  cmd->add_option("--layers", args->layers, "simulate the first N layers (step extrapolated)")
      ->check(at_least(1));
  cmd->add_option("--attention-efficiency", args->attention_efficiency,
                  "fraction of the GPU's dense bf16 peak reached by attention kernels")
      ->check(above_up_to(0, 1));
  cmd->add_option("--kernel", args->kernel,
                  "attention kernel whose published efficiency to use (fa2, fa3, cudnn, flex, "
                  "sta, sage2, generic; see --list); default: a measured_compute entry of the "
                  "topology, else generic");
  cmd->add_option("--max-memory-gib", args->max_memory_gib,
                  "refuse a study estimated to need more memory than this (GiB; default 16)")
      ->check(above_up_to(0, 1e6));
  cmd->add_flag("--json", args->json, "JSON output");
  cmd->add_flag("--csv", args->csv, "CSV output");
  // An empty name used to mean "not given" without a word (--trace "").
  const CLI::Validator folder_name(
      [](std::string& v) { return v.empty() ? std::string("expected a folder, got ''") : ""; },
      "DIR");
  cmd->add_option("--trace", args->trace_dir,
                  "write a Perfetto trace of one layer per policy into DIR")
      ->check(folder_name);
  cmd->add_option("--emit-plan", args->plan_dir,
                  "write the plan JSON of each policy into DIR; a DIR holding *.plan.json files "
                  "that this run does not write (an earlier run's) is refused, nothing written")
      ->check(folder_name);
  cmd->add_option("--plan", args->plan_in, "re-time a plan JSON instead of running a study");
  cmd->add_flag("--list", args->list,
                "list the placements, schemes, runtimes and attention kernels");
  cmd->add_option("--progress", args->progress,
                  "progress on stderr: auto (a bar on a terminal, else none), bar, lines (every "
                  "10 s), off")
      ->check(CLI::IsMember({"auto", "bar", "lines", "off"}));
  cmd->callback([args, cmd, &ctx] {
    args->given = given_options(*cmd);
    ctx.exit_code = run(*args);
  });
}

}  // namespace sparsp::cli
