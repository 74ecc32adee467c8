// `sparsp sim run --topology T.json --workload W.json [--trace out.json] [--json]`
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "sparsp/sim.hpp"
#include "sparsp/sweep.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::cli {
namespace {

struct SimRunOptions {
  std::string topology, workload, trace;
  bool json = false;
};

/// Writes `text` to `path` through a temporary file and a rename (no partial output).
Status write_atomically(const std::string& path, const std::string& text) {
  return write_output_file(path, text, "trace file");
}

int run_sim(const SimRunOptions& o) {
  // The trace never replaces an input (`--trace w.json` for `--workload w.json` did, exit 0).
  if (auto st = distinct_files(
          {{"--topology", o.topology}, {"--workload", o.workload}, {"--trace", o.trace}});
      !st)
    return report(st.error());
  // The trace is written after the run: refuse a folder or an unwritable path now.
  if (!o.trace.empty())
    if (auto st = study::check_writable(o.trace); !st) return report(st.error());
  auto topo = topology::Topology::load(o.topology);
  if (!topo) return report(topo.error());
  auto work = sim::load_workload(o.workload);
  if (!work) return report(work.error());
  sim::SimOptions options;
  options.record_resource_timeline = !o.trace.empty();
  auto result = sim::simulate(*topo, *work, options);
  if (!result) return report(result.error());
  if (!o.trace.empty()) {
    if (auto s = write_atomically(o.trace, sim::to_chrome_trace(*work, *result)); !s)
      return report(s.error());
  }
  const sim::SimResult& r = *result;
  if (o.json) {
    nlohmann::ordered_json j;
    j["makespan_s"] = r.makespan_s;
    j["activities"] = nlohmann::ordered_json::array();
    for (const auto& a : r.activities)
      j["activities"].push_back({{"id", a.id},
                                 {"kind", a.is_transfer ? "transfer" : "compute"},
                                 {"where", a.where},
                                 {"lane", a.lane},
                                 {"start_s", a.start_s},
                                 {"end_s", a.end_s},
                                 {"bytes", a.bytes}});
    j["resources"] = nlohmann::ordered_json::array();
    for (const auto& s : r.resources)
      j["resources"].push_back({{"name", s.name},
                                {"capacity_Bps", s.capacity_Bps},
                                {"bytes", s.bytes},
                                {"busy_s", s.busy_s},
                                {"peak_utilization", s.peak_utilization}});
    j["critical_path"] = r.critical_path;
    j["events"] = r.events;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("makespan: %.9g s\n", r.makespan_s);
  std::printf("%-24s %-20s %-10s %14s %14s %12s\n", "id", "where", "lane", "start_us", "end_us",
              "GB/s");
  for (const auto& a : r.activities) {
    const double dur = a.end_s - a.start_s;
    std::printf("%-24s %-20s %-10s %14.3f %14.3f %12.3f\n", a.id.c_str(), a.where.c_str(),
                a.lane.c_str(), a.start_s * 1e6, a.end_s * 1e6,
                a.is_transfer && dur > 0 ? a.bytes / dur / 1e9 : 0.0);
  }
  std::printf("busy resources:\n");
  for (const auto& s : r.resources)
    if (s.busy_s > 0)
      std::printf("  %-28s %10.3f GB  busy %12.3f us  peak %5.1f%%\n", s.name.c_str(),
                  s.bytes / 1e9, s.busy_s * 1e6, 100 * s.peak_utilization);
  std::printf("critical path:");
  for (const auto& id : r.critical_path) std::printf(" %s", id.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace

void add_sim_commands(CLI::App& app, Context& ctx) {
  auto* sim = app.add_subcommand("sim", "Flow-level simulation of a raw workload on a topology");
  sim->require_subcommand(1);
  auto opts = std::make_shared<SimRunOptions>();
  auto* run = sim->add_subcommand(
      "run", "Simulate a workload JSON (schema: sim/README.md) on a topology; print when each "
             "transfer and compute task starts and ends");
  run->add_option("--topology", opts->topology, "Topology JSON file or preset name")->required();
  run->add_option("--workload", opts->workload, "Workload JSON file")->required();
  run->add_option("--trace", opts->trace, "Write a Chrome/Perfetto trace JSON here");
  run->add_flag("--json", opts->json, "Print the result as JSON");
  run->callback([opts, &ctx] { ctx.exit_code = run_sim(*opts); });
}

}  // namespace sparsp::cli
