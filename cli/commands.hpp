#pragma once
// Registration of the CLI's subcommands. Each add_* function registers the subcommands of one
// library on `app`; a subcommand's callback stores its exit code in ctx.exit_code.
#include <CLI/CLI.hpp>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "sparsp/status.hpp"

namespace sparsp::cli {

struct Context {
  int exit_code = 0;
};

/// Prints "sparsp: <message>" on stderr and returns the error's exit code.
int report(const Error& error);

/// The top-level error barrier: prints an exception that escaped a subcommand as one line
/// "sparsp: <subcommand>: <what failed>" and returns 1 (run-time: out of memory, system error,
/// anything else) or 2 (std::filesystem::filesystem_error: a path given that cannot be used).
int report_exception(const CLI::App& app, std::exception_ptr error);

/// Flushes standard output and checks that everything written to it arrived: on a write error
/// (ENOSPC on /dev/full, EBADF) prints "sparsp: <subcommand>: cannot write standard output: <why>"
/// and returns 1 where `exit_code` is 0; otherwise returns `exit_code`.
int finish_stdout(const CLI::App& app, int exit_code);

/// Prints a CLI11 parse error as one line "sparsp: <subcommand>: <option>: <message>" on stderr
/// and returns 2; --help and --version print their text on stdout and return 0.
int report_parse_error(const CLI::App& app, const CLI::ParseError& error);

// Option validators with readable bounds. Each accepts a finite number (NaN and infinities are
// rejected) and names the bound and the value given, e.g. at_least(0) on "-1":
// "must be >= 0, got -1"; --help shows the interval ("INT:[0,inf)"). Integer options are still
// converted by CLI11 afterwards (a fraction or an out-of-range integer is then reported by
// report_parse_error).

/// A finite number >= lo.
CLI::Validator at_least(double lo);
/// A finite number in [lo, hi].
CLI::Validator between(double lo, double hi);
/// A finite number in (lo, hi].
CLI::Validator above_up_to(double lo, double hi);
/// Any finite number.
CLI::Validator finite_number();
/// An existing regular file (not a directory).
CLI::Validator existing_file();

/// Writes `text` to `path` through a temporary file beside it and a rename: no partial output,
/// and no temporary file left behind after an error. Errors: "<path>: cannot write <what>"
/// (exit 2: cannot create, cannot rename), "<path>: write failed (disk full?)" (exit 1).
Status write_output_file(const std::string& path, const std::string& text,
                         const std::string& what = "file");

/// Refuses (exit 2) an output path that names the same file as an input or another output:
/// `files` are (option, path) pairs, empty paths skipped; compared after resolving `.`, `..`
/// and symbolic links. Error: "<command line>:<option>: <path> is also <other option>".
Status distinct_files(const std::vector<std::pair<std::string, std::string>>& files);

/// The long names ("--density") of the options of `cmd` given on the command line.
std::vector<std::string> given_options(const CLI::App& cmd);

/// Refuses (exit 2) a pattern option given on the command line (`given`: long names) that the
/// pattern kind does not read: "<command line>:--density: does not apply to pattern kind 'sta'
/// (it applies to random, topk)". Kind "file" (a recorded mask) is not checked.
Status options_apply_to_kind(const std::string& kind, const std::vector<std::string>& given);

void add_topo_commands(CLI::App& app, Context& ctx);
void add_pattern_commands(CLI::App& app, Context& ctx);
void add_sim_commands(CLI::App& app, Context& ctx);        // `sim run`
void add_simulate_commands(CLI::App& app, Context& ctx);   // `simulate`
void add_replay_commands(CLI::App& app, Context& ctx);     // `replay`, `validate`, `calibrate`
void add_study_commands(CLI::App& app, Context& ctx);      // `sweep`, `tune`
void add_published_commands(CLI::App& app, Context& ctx);  // `check-published`

}  // namespace sparsp::cli
