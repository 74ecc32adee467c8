// Subcommands registered by add_replay_commands (see commands.hpp): `replay`, `validate`,
// `calibrate`. Thin layer over include/sparsp/replay.hpp.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "sparsp/replay.hpp"
#include "sparsp/sweep.hpp"

namespace sparsp::cli {
namespace {

/// Writes `text` to `path` through a temporary file and a rename (no partial files).
Status write_file(const std::string& path, const std::string& text) {
  return write_output_file(path, text);
}

Result<std::vector<int>> parse_devices(const std::string& s) {
  std::vector<int> out;
  if (s.empty()) return out;
  std::stringstream ss(s);
  std::string tok;
  size_t i = 0;
  while (std::getline(ss, tok, ',')) {
    try {
      size_t used = 0;
      const int d = std::stoi(tok, &used);
      if (used != tok.size() || d < 0) throw std::invalid_argument(tok);
      out.push_back(d);
    } catch (const std::exception&) {
      return input_error("--devices", "[" + std::to_string(i) + "]",
                         "expected a device index, got \"" + tok + "\"");
    }
    ++i;
  }
  return out;
}

struct ReplayArgs {
  std::string plan, devices, out, perfetto, compute;
  bool json = false, no_compute = false, no_nccl = false;
  replay::ReplayOptions opt;
};

struct ValidateArgs {
  std::string plan, trace, out, perfetto;
  bool json = false;
  replay::ValidateOptions opt;
};

struct CalibrateArgs {
  std::string devices, out, topology_out, from;
  bool json = false;
  replay::CalibrateOptions opt;
};

}  // namespace

void add_replay_commands(CLI::App& app, Context& ctx) {
  // ---- replay ----
  auto ra = std::make_shared<ReplayArgs>();
  CLI::App* r = app.add_subcommand(
      "replay", "Run a transfer plan on the GPUs (or host memory), time and verify it");
  r->add_option("--plan", ra->plan, "plan JSON (sparsp simulate --emit-plan)")->required();
  r->add_option("--devices", ra->devices,
                "rank -> device list, e.g. 0,1 or 0,0 (ranks on one GPU)");
  r->add_option("--backend", ra->opt.backend, "cuda | host")->capture_default_str();
  r->add_option("--warmup", ra->opt.warmup, "untimed iterations per layer plan")
      ->capture_default_str()
      ->check(at_least(0));
  r->add_option("--iterations", ra->opt.iterations, "timed iterations per layer plan (medians)")
      ->capture_default_str()
      ->check(at_least(1));
  r->add_option("-o,--output", ra->out, "trace JSON (schema sparsp.trace)");
  r->add_option("--perfetto", ra->perfetto, "also write a Perfetto / Chrome trace JSON");
  r->add_option("--payload-scale", ra->opt.payload_scale,
                "shrink payloads by this factor [1e-6, 1] (CI on small machines)")
      ->capture_default_str()
      ->check(between(1e-6, 1));
  r->add_option("--max-layers", ra->opt.max_layers, "replay only the first N layer plans (0: all)")
      ->check(at_least(0));
  r->add_option("--comm-sms", ra->opt.default_comm_sms,
                "SMs of a copy kernel when the plan gives none")
      ->capture_default_str()
      ->check(at_least(1));
  r->add_option("--compute-sms", ra->opt.compute_sms,
                "SMs a compute task keeps busy (0: the device's SMs / ranks on it)")
      ->capture_default_str()
      ->check(at_least(0));
  r->add_option("--timeout-s", ra->opt.timeout_s,
                "abort (exit 1) when one iteration or set-up step makes no progress this long; "
                "0: never")
      ->capture_default_str()
      ->check(between(0, 1e7));
  r->add_flag("--no-compute", ra->no_compute, "no compute tasks (the same as --compute none)");
  r->add_option("--compute", ra->compute,
                "real: run the plan's block-sparse attention (sparsp's kernel; host: on the CPU) "
                "and check its output, gemm tasks as bf16 GEMMs (cuBLAS; host: Eigen) and copy "
                "tasks as memory copies (timed, not checked; `other` tasks stay emulated); "
                "emulated: busy the GPU (host: sleep) for each task's modelled time; none: "
                "transfers only. Default: real where the plan allows it, else emulated")
      ->check(CLI::IsMember({"real", "emulated", "none"}));
  r->add_flag("--check-all", ra->opt.check_all,
              "output check over every query block (default: first, middle and last of each "
              "rank, and every one reading --corrupt-block)");
  r->add_flag("--no-nccl", ra->no_nccl,
              "SM-driven transfers run as copy kernels instead of NCCL send/recv");
  r->add_flag("--json", ra->json,
              "print the JSON summary (bytes_moved, bytes_verified, makespans)");
  // Fault injection, shown in --help (a test of the integrity and output checks; it was hidden).
  r->add_option("--skip-transfer", ra->opt.skip_transfer,
                "fault injection: do not run the transfer with this id (a plan's transfer id; "
                "the integrity check then fails, exit 1)")
      ->group("Fault injection");
  r->add_option("--corrupt-block", ra->opt.corrupt_block,
                "fault injection: overwrite a span of this KV block (a block id >= 0 that some "
                "rank receives) as it is received; the integrity check then fails, exit 1")
      ->group("Fault injection");
  r->add_flag("--corrupt-query", ra->opt.corrupt_query,
              "fault injection, with --corrupt-block: overwrite a span of that block's Q as the "
              "all-to-all of a ulysses or usp plan delivers it (--compute real); the output "
              "check then fails, exit 1")
      ->group("Fault injection");
  r->callback([ra, r, &ctx] {
    auto devs = parse_devices(ra->devices);
    if (!devs) {
      ctx.exit_code = report(devs.error());
      return;
    }
    ra->opt.devices = *devs;
    ra->opt.emulate_compute = !ra->no_compute;
    if (ra->no_compute && !ra->compute.empty() && ra->compute != "none") {
      ctx.exit_code =
          report(Error{"replay: --no-compute means --compute none; it contradicts "
                       "--compute " +
                           ra->compute,
                       2});
      return;
    }
    ra->opt.compute = ra->compute == "real"                     ? replay::ComputeMode::real
                      : ra->compute == "emulated"               ? replay::ComputeMode::emulated
                      : ra->compute == "none" || ra->no_compute ? replay::ComputeMode::none
                                                                : replay::ComputeMode::automatic;
    if (ra->opt.check_all && ra->opt.compute == replay::ComputeMode::emulated) {
      ctx.exit_code =
          report(Error{"replay: --check-all checks attention outputs; --compute "
                       "emulated computes none",
                       2});
      return;
    }
    // -1 is the option's "off" default; given on the command line it is refused like any other
    // negative id (break-it 2026-12-03: `--corrupt-block -1` ran and corrupted nothing, exit 0).
    if (ra->opt.corrupt_block < -1 ||
        (ra->opt.corrupt_block == -1 && r->count("--corrupt-block") > 0)) {
      ctx.exit_code =
          report(Error{"replay: --corrupt-block " + std::to_string(ra->opt.corrupt_block) +
                           ": expected a block id (>= 0)",
                       2});
      return;
    }
    if (ra->opt.corrupt_query && ra->opt.corrupt_block < 0) {
      ctx.exit_code =
          report(Error{"replay: --corrupt-query needs --corrupt-block N (the block "
                       "whose delivered Q to corrupt)",
                       2});
      return;
    }
    if (ra->opt.check_all && ra->opt.compute == replay::ComputeMode::none) {
      ctx.exit_code =
          report(Error{"replay: --check-all checks attention outputs; there are none "
                       "with --compute none (--no-compute)",
                       2});
      return;
    }
    ra->opt.use_nccl = !ra->no_nccl;
    ra->opt.plan_source = ra->plan;
    auto plan = policy::load_plan(ra->plan);
    if (!plan) {
      ctx.exit_code = report(plan.error());
      return;
    }
    // Every output path is checked before the run, so a bad one never leaves the others written.
    if (auto st = distinct_files(
            {{"--plan", ra->plan}, {"--output", ra->out}, {"--perfetto", ra->perfetto}});
        !st) {
      ctx.exit_code = report(st.error());
      return;
    }
    for (const std::string* path : {&ra->out, &ra->perfetto})
      if (!path->empty())
        if (auto st = study::check_writable(*path); !st) {
          ctx.exit_code = report(st.error());
          return;
        }
    auto res = replay::run(*plan, ra->opt);
    if (!res) {
      ctx.exit_code = report(res.error());
      return;
    }
    if (!ra->out.empty()) {
      if (auto st = write_file(ra->out, replay::trace_json(*plan, *res)); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
    }
    if (!ra->perfetto.empty()) {
      if (auto st = write_file(ra->perfetto, replay::perfetto_json(*plan, *res)); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
    }
    if (!res->compute_note.empty()) std::fprintf(stderr, "note: %s\n", res->compute_note.c_str());
    if (ra->json) {
      std::cout << replay::summary_json(*res);
    } else {
      // The modelled total is the simulator's (the plan re-simulated as it was replayed, as
      // validate does): the same on every run. The measured total is a wall-clock median and
      // varies from run to run; it used to be printed as "modelled" (break-it pass, D3).
      std::string modelled;
      replay::ValidateOptions vo;
      vo.plan_source = ra->plan;
      if (auto v = replay::validate(*plan, *res, vo)) {
        double total_s = 0;
        for (const auto& L : v->simulated) total_s += L.makespan_s * static_cast<double>(L.repeat);
        char buf[96];
        std::snprintf(buf, sizeof buf, "modelled run total %.3f ms (simulated), ", total_s * 1e3);
        modelled = buf;
      }
      std::printf(
          "replayed %zu layer plans on %s: %.3f GB moved, %.3f GB verified (%lld blocks); %s"
          "measured run total %.3f ms (median makespan x repeat over the layer plans; varies "
          "from run to run)\n",
          res->layers.size(), res->device_description.c_str(), res->bytes_moved / 1e9,
          res->bytes_verified / 1e9, static_cast<long long>(res->blocks_verified), modelled.c_str(),
          res->total_s * 1e3);
      if (res->output_check.ran)
        std::printf("output check: %lld query blocks, max |O - O_ref| %.3g (tolerance %.3g): %s\n",
                    static_cast<long long>(res->output_check.checked_blocks),
                    res->output_check.max_abs_error, res->output_check.tolerance,
                    res->output_check.passed ? "passed" : "FAILED");
    }
    ctx.exit_code = 0;
  });

  // ---- validate ----
  auto va = std::make_shared<ValidateArgs>();
  CLI::App* v =
      app.add_subcommand("validate", "Re-simulate a plan and compare with a replay trace");
  v->add_option("--plan", va->plan, "plan JSON")->required();
  v->add_option("--trace", va->trace, "trace JSON written by sparsp replay -o")->required();
  v->add_option("--topology", va->opt.topology_path,
                "topology to simulate on (default: the plan's)");
  v->add_option("--top", va->opt.top_outliers, "outliers to list")
      ->capture_default_str()
      ->check(at_least(0));
  v->add_option("-o,--output", va->out, "also write the JSON report here");
  v->add_option("--perfetto", va->perfetto,
                "write measurement and simulation side by side (Perfetto JSON)");
  v->add_flag("--json", va->json, "print JSON (mape, p50, p90, max_error as fractions)");
  v->add_flag("--no-compute", va->opt.no_compute,
              "simulate without compute (for traces of replay --no-compute that do not say so)");
  v->add_flag("--nccl-p2p-disable", va->opt.nccl_p2p_disable,
              "model NCCL transfers on its host path (for traces run with NCCL_P2P_DISABLE=1 "
              "that do not say so)");
  v->callback([va, &ctx] {
    auto plan = policy::load_plan(va->plan);
    if (!plan) {
      ctx.exit_code = report(plan.error());
      return;
    }
    auto trace = replay::load_trace(va->trace);
    if (!trace) {
      ctx.exit_code = report(trace.error());
      return;
    }
    if (auto st = distinct_files({{"--plan", va->plan},
                                  {"--trace", va->trace},
                                  {"--output", va->out},
                                  {"--perfetto", va->perfetto}});
        !st) {
      ctx.exit_code = report(st.error());
      return;
    }
    for (const std::string* path : {&va->out, &va->perfetto})
      if (!path->empty())
        if (auto st = study::check_writable(*path); !st) {
          ctx.exit_code = report(st.error());
          return;
        }
    va->opt.plan_source = va->plan;
    va->opt.trace_source = va->trace;
    auto rep = replay::validate(*plan, *trace, va->opt);
    if (!rep) {
      ctx.exit_code = report(rep.error());
      return;
    }
    if (!va->out.empty()) {
      if (auto st = write_file(va->out, replay::validate_json(*rep)); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
    }
    if (!va->perfetto.empty()) {
      if (auto st = write_file(va->perfetto, replay::side_by_side_perfetto(*plan, *trace, *rep));
          !st) {
        ctx.exit_code = report(st.error());
        return;
      }
    }
    std::cout << (va->json ? replay::validate_json(*rep) : replay::validate_table(*rep));
    ctx.exit_code = 0;
  });

  // ---- calibrate ----
  auto ca = std::make_shared<CalibrateArgs>();
  CLI::App* c = app.add_subcommand(
      "calibrate", "Measure the machine (nvbandwidth-style) and write a topology JSON");
  CLI::Option* devices =
      c->add_option("--devices", ca->devices, "devices to measure (default: all)");
  CLI::Option* output =
      c->add_option("-o,--output", ca->out, "machine JSON (discovery, measurements, fits)");
  CLI::Option* from = c->add_option(
      "--from", ca->from,
      "rebuild the topology from this machine JSON instead of measuring (needs --topology-out; "
      "the measuring options do not apply)");
  c->add_option("--topology-out", ca->topology_out,
                "topology JSON for the simulator (default: <output stem>.topology.json)");
  c->add_option(
       "--virtual-ranks", ca->opt.virtual_ranks,
       "also fold N ranks onto device 0 in the topology (for --devices 0,0,..; at most 64)")
      ->check(between(0, 64));
  CLI::Option* iterations =
      c->add_option("--iterations", ca->opt.iterations, "repetitions per size (median)")
          ->capture_default_str()
          ->check(at_least(1));
  CLI::Option* max_bytes =
      c->add_option("--max-bytes", ca->opt.max_bytes, "largest size of the sweep (bytes)")
          ->type_name("BYTES")
          ->default_str("268435456")
          ->check(at_least(1));
  CLI::Option* concurrency =
      c->add_option("--concurrency-copies", ca->opt.concurrency_copies,
                    "copy-engine concurrency tests with N = 1, 2, 4, .. up to this many copies at "
                    "once (0: skip)")
          ->capture_default_str()
          ->check(between(0, 64));
  CLI::Option* json = c->add_flag("--json", ca->json, "print the fits as JSON");
  CLI::Option* no_nccl = c->add_flag_callback(
      "--no-nccl", [ca] { ca->opt.nccl = false; },
      "skip the NCCL send/recv measurements (default transports and host path)");
  CLI::Option* no_compute = c->add_flag_callback(
      "--no-compute", [ca] { ca->opt.compute = false; },
      "skip timing sparsp's attention kernel (the measured_compute entries)");
  CLI::Option* no_contention = c->add_flag_callback(
      "--no-contention", [ca] { ca->opt.compute_contention = false; },
      "skip timing attention beside copy-engine and SM-driven copies (measured_compute "
      "contention)");
  // --from reads an earlier measurement: options of a measurement are errors with it.
  for (CLI::Option* o : {devices, output, iterations, max_bytes, concurrency, json, no_nccl,
                         no_compute, no_contention})
    from->excludes(o);
  c->callback([ca, &ctx] {
    auto devs = parse_devices(ca->devices);
    if (!devs) {
      ctx.exit_code = report(devs.error());
      return;
    }
    ca->opt.devices = *devs;
    if (!ca->from.empty()) {
      if (ca->topology_out.empty()) {
        ctx.exit_code = report(Error{"calibrate: --from needs --topology-out", 2});
        return;
      }
      if (auto st = distinct_files({{"--from", ca->from}, {"--topology-out", ca->topology_out}});
          !st) {
        ctx.exit_code = report(st.error());
        return;
      }
      if (auto st = study::check_writable(ca->topology_out); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
      auto topo = replay::topology_from_machine_file(ca->from, ca->opt.virtual_ranks);
      if (!topo) {
        ctx.exit_code = report(topo.error());
        return;
      }
      if (auto st = write_file(ca->topology_out, *topo); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
      // Say what was written (break-it pass of 2026-12-02: a silent success looked like nothing).
      std::printf("topology %s written from %s\n", ca->topology_out.c_str(), ca->from.c_str());
      ctx.exit_code = 0;
      return;
    }
    if (ca->out.empty()) {
      ctx.exit_code = report(Error{"calibrate: -o/--output is required", 2});
      return;
    }
    {
      std::string topo_out = ca->topology_out;
      if (topo_out.empty()) {
        std::filesystem::path p(ca->out);
        topo_out = (p.parent_path() / (p.stem().string() + ".topology.json")).string();
      }
      if (auto st = distinct_files({{"--output", ca->out}, {"--topology-out", topo_out}}); !st) {
        ctx.exit_code = report(st.error());
        return;
      }
      for (const std::string* path : {&ca->out, &topo_out})
        if (auto st = study::check_writable(*path); !st) {
          ctx.exit_code = report(st.error());
          return;
        }
    }
    auto res = replay::calibrate(ca->opt);
    if (!res) {
      ctx.exit_code = report(res.error());
      return;
    }
    if (auto st = write_file(ca->out, res->machine_json); !st) {
      ctx.exit_code = report(st.error());
      return;
    }
    std::string topo_out = ca->topology_out;
    if (topo_out.empty()) {
      std::filesystem::path p(ca->out);
      topo_out = (p.parent_path() / (p.stem().string() + ".topology.json")).string();
    }
    if (auto st = write_file(topo_out, res->topology_json); !st) {
      ctx.exit_code = report(st.error());
      return;
    }
    if (ca->json) {
      // {"fits": [{"name", "latency_us", "bandwidth_GBps"[, "aggregate_GBps"]}, ...]}; the
      // measured points are in the machine JSON.
      std::printf("{\"fits\": [");
      for (size_t i = 0; i < res->fits.size(); ++i) {
        const auto& f = res->fits[i];
        std::printf("%s\n {\"name\": \"%s\", \"latency_us\": %.6g, \"bandwidth_GBps\": %.6g",
                    i ? "," : "", f.name.c_str(), f.latency_s * 1e6, f.bandwidth_Bps / 1e9);
        if (f.aggregate_Bps > 0) std::printf(", \"aggregate_GBps\": %.6g", f.aggregate_Bps / 1e9);
        std::printf("}");
      }
      std::printf("\n]}\n");
    } else {
      for (const auto& f : res->fits)
        std::printf(
            "%-14s latency %8.2f us  bandwidth %8.2f GB/s%s\n", f.name.c_str(), f.latency_s * 1e6,
            f.bandwidth_Bps / 1e9,
            f.aggregate_Bps > 0
                ? (" (aggregate " + std::to_string(f.aggregate_Bps / 1e9) + " GB/s)").c_str()
                : "");
    }
    ctx.exit_code = 0;
  });
}

}  // namespace sparsp::cli
