// Subcommands registered by add_pattern_commands (see commands.hpp).
#include "commands.hpp"

namespace sparsp::cli {
void add_pattern_commands(CLI::App& /*app*/, Context& /*ctx*/) {}
}  // namespace sparsp::cli
