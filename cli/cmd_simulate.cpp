// Subcommands registered by add_simulate_commands (see commands.hpp).
#include "commands.hpp"

namespace sparsp::cli {
void add_simulate_commands(CLI::App& /*app*/, Context& /*ctx*/) {}
}  // namespace sparsp::cli
