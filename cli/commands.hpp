#pragma once
// Registration of the CLI's subcommands. Each add_* function registers the subcommands of one
// library on `app`; a subcommand's callback stores its exit code in ctx.exit_code.
#include <CLI/CLI.hpp>

#include "sparsp/status.hpp"

namespace sparsp::cli {

struct Context {
  int exit_code = 0;
};

/// Prints "sparsp: <message>" on stderr and returns the error's exit code.
int report(const Error& error);

void add_topo_commands(CLI::App& app, Context& ctx);
void add_pattern_commands(CLI::App& app, Context& ctx);
void add_sim_commands(CLI::App& app, Context& ctx);        // `sim run`
void add_simulate_commands(CLI::App& app, Context& ctx);   // `simulate`
void add_replay_commands(CLI::App& app, Context& ctx);     // `replay`, `validate`, `calibrate`
void add_study_commands(CLI::App& app, Context& ctx);      // `sweep`, `tune`

}  // namespace sparsp::cli
