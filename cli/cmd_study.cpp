// Subcommands registered by add_study_commands (see commands.hpp).
#include "commands.hpp"

namespace sparsp::cli {
void add_study_commands(CLI::App& /*app*/, Context& /*ctx*/) {}
}  // namespace sparsp::cli
