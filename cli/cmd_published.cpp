// `sparsp check-published FILE... [--json] [--require-tau T] [--require-median-error E]`:
// ranking validation against published benchmarks (configs/published/README.md).
#include <cmath>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "sparsp/study.hpp"

namespace sparsp::cli {
namespace {

struct CheckPublishedOptions {
  std::vector<std::string> files;
  bool json = false;
  double require_tau = std::nan("");
  double require_median_error = std::nan("");
};

int run_check_published(const CheckPublishedOptions& o) {
  auto c = study::check_published(o.files);
  if (!c) return report(c.error());
  std::cout << (o.json ? study::published_to_json(*c) : study::format_published(*c));
  int code = 0;
  if (std::isfinite(o.require_tau))
    for (const auto& f : c->files)
      for (const auto& s : f.sizes)
        if (std::isfinite(s.tau.tau) && s.tau.tau < o.require_tau) {
          std::cerr << "sparsp: check-published: " << f.path << " size " << s.name
                    << ": Kendall tau " << s.tau.tau << " < " << o.require_tau << "\n";
          code = 1;
        }
  if (std::isfinite(o.require_median_error))
    for (const auto& f : c->files)
      if (f.median_throughput_error > o.require_median_error) {
        std::cerr << "sparsp: check-published: " << f.path << ": median throughput error "
                  << f.median_throughput_error << " > " << o.require_median_error << "\n";
        code = 1;
      }
  return code;
}

}  // namespace

void add_published_commands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<CheckPublishedOptions>();
  auto* c = app.add_subcommand(
      "check-published",
      "Simulate the policies of published sequence-parallel benchmarks "
      "(configs/published/*.json) and compare: predicted vs measured time, Kendall tau per "
      "problem size, median throughput error; exit 1 when a --require-* criterion fails");
  c->add_option("files", o->files, "Published-benchmark JSON files")
      ->required()
      ->check(existing_file());
  c->add_flag("--json", o->json, "Print the comparison as JSON");
  c->add_option("--require-tau", o->require_tau,
                "Exit 1 when a size's Kendall tau (tau-a) is below this")
      ->check(between(-1, 1));
  c->add_option("--require-median-error", o->require_median_error,
                "Exit 1 when a file's median |throughput error| (a fraction) is above this")
      ->check(at_least(0));
  c->callback([o, &ctx] { ctx.exit_code = run_check_published(*o); });
}

}  // namespace sparsp::cli
