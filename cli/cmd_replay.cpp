// Subcommands registered by add_replay_commands (see commands.hpp).
#include "commands.hpp"

namespace sparsp::cli {
void add_replay_commands(CLI::App& /*app*/, Context& /*ctx*/) {}
}  // namespace sparsp::cli
