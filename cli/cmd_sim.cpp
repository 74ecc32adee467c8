// Subcommands registered by add_sim_commands (see commands.hpp).
#include "commands.hpp"

namespace sparsp::cli {
void add_sim_commands(CLI::App& /*app*/, Context& /*ctx*/) {}
}  // namespace sparsp::cli
