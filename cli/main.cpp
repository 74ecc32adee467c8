// sparsp: thin command-line layer over the libraries (parse options, call one library function,
// map the result to an exit code). Exit codes: 0 success, 1 run-time failure, 2 bad input.
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "sparsp/version.hpp"

namespace sparsp::cli {
int report(const Error& error) {
  std::cerr << "sparsp: " << error.message << "\n";
  return error.exit_code;
}
}  // namespace sparsp::cli

int main(int argc, char** argv) {
  CLI::App app{
      "sparsp: simulator and replay harness for sparse sequence-parallel communication in "
      "multi-GPU video DiT inference",
      "sparsp"};
  app.set_version_flag("--version", std::string("sparsp ") + sparsp::kVersion);
  app.require_subcommand(1);
  sparsp::cli::Context ctx;
  sparsp::cli::add_topo_commands(app, ctx);
  sparsp::cli::add_pattern_commands(app, ctx);
  sparsp::cli::add_sim_commands(app, ctx);
  sparsp::cli::add_simulate_commands(app, ctx);
  sparsp::cli::add_replay_commands(app, ctx);
  sparsp::cli::add_study_commands(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return ctx.exit_code;
}
