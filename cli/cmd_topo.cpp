// Subcommands registered by add_topo_commands (see commands.hpp).
#include "commands.hpp"

namespace sparsp::cli {
void add_topo_commands(CLI::App& /*app*/, Context& /*ctx*/) {}
}  // namespace sparsp::cli
