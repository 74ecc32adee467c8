// sparsp: thin command-line layer over the libraries (parse options, call one library function,
// map the result to an exit code). Exit codes: 0 success, 1 run-time failure, 2 bad input.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <regex>
#include <system_error>

#include "commands.hpp"
#include "sparsp/output_file.hpp"
#include "sparsp/version.hpp"

namespace sparsp::cli {
namespace {
// The message as one line of text that cannot steer a terminal: line breaks become spaces, and
// what input_error escapes (C0/DEL, C1 controls, U+2028/2029, bidirectional controls, bytes that
// are not UTF-8) is escaped here too, for words that reach a message without input_error: a
// --baseline or --backend value, a subcommand name, CLI11's own messages (break-it 2026-12-04).
// Idempotent: an escaped message has nothing left to escape.
std::string terminal_safe(std::string msg) {
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  std::string out = input_error("", "", msg).message;  // ": " + the escaped message
  out.erase(0, 2);
  std::string safe;  // input_error keeps the 0x1f marker for its callers; none is left here
  for (char c : out) safe += c == '\x1f' ? std::string("\\x1f") : std::string(1, c);
  return safe;
}
}  // namespace

int report(const Error& error) {
  std::cerr << "sparsp: " << terminal_safe(error.message) << "\n";
  return error.exit_code;
}

namespace {

/// Shortest text that reads back as `x` (1, 0.5, 268435456, 1e+300).
std::string number_text(double x) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}

/// Parses the whole of `s` as a finite number; an error text naming `what` otherwise.
std::string parse_finite(const std::string& s, const std::string& what, double& x) {
  char* end = nullptr;
  x = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return "expected " + what + ", got '" + s + "'";
  if (!std::isfinite(x)) return "expected " + what + ", got " + s;
  return {};
}

/// Accepts finite numbers x with ok(x). `description` is shown by --help after the type, in
/// interval notation ("INT:[0,inf)"); `bound_text` goes into the messages: "must be >= 0, got -1",
/// "expected a finite number >= 0, got nan".
CLI::Validator number_validator(std::string description, std::function<bool(double)> ok,
                                std::string bound_text) {
  return CLI::Validator(
      [ok = std::move(ok), bound_text](std::string& s) -> std::string {
        double x = 0;
        if (auto err = parse_finite(s, "a finite number " + bound_text, x); !err.empty())
          return err;
        if (!ok(x)) return "must be " + bound_text + ", got " + s;
        return {};
      },
      std::move(description));
}

/// How a CLI11 type name reads in a message.
std::string type_words(const std::string& type) {
  if (type.rfind("UINT", 0) == 0) return "a non-negative integer (malformed or out of range)";
  if (type.rfind("INT", 0) == 0) return "an integer (malformed or out of range)";
  if (type.rfind("FLOAT", 0) == 0) return "a number";
  if (type.empty()) return "a value of this option";
  return type;
}

}  // namespace

CLI::Validator at_least(double lo) {
  return number_validator(
      "[" + number_text(lo) + ",inf)", [lo](double x) { return x >= lo; }, ">= " + number_text(lo));
}

Status write_output_file(const std::string& path_given, const std::string& text,
                         const std::string& what) {
  // A device or FIFO (/dev/null, /dev/full, a pipe) is written in place, never renamed over; a
  // symbolic link is followed (sparsp/output_file.hpp).
  auto target = output_target(path_given);
  if (!target) return target.error();
  if (target->in_place) return write_in_place(target->path, text);
  const std::string& path = target->path;
  // Beside the output (same folder, so the rename is atomic), named after this process so that
  // two writers never share one; removed on every failure.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return input_error(path_given, "", "cannot write " + what);
    out << text;
    out.flush();
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      return Error{path_given + ": write failed (disk full?)", 1};
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    return input_error(path_given, "", "cannot write " + what + ": " + why);
  }
  return Ok{};
}

Status distinct_files(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::pair<std::string, std::filesystem::path>> seen;
  for (const auto& [opt, path] : files) {
    if (path.empty()) continue;
    std::error_code ec;
    std::filesystem::path c = std::filesystem::weakly_canonical(path, ec);
    if (ec) c = std::filesystem::absolute(path, ec).lexically_normal();
    for (const auto& [o2, c2] : seen)
      if (c == c2)
        return input_error("<command line>", opt,
                           path + " is also " + o2 + "; refusing to overwrite it");
    seen.emplace_back(opt, c);
  }
  return Ok{};
}

Status options_apply_to_kind(const std::string& kind, const std::vector<std::string>& given) {
  // Which generator reads each option (patterns/factory.cpp); other options apply to every kind.
  struct Rule {
    const char* flag;
    std::vector<std::string> kinds;
  };
  static const Rule kRules[] = {
      {"--density", {"random", "topk"}},
      {"--seed", {"random", "svg", "topk", "cdf"}},
      {"--topk", {"topk"}},
      {"--threshold", {"cdf"}},
      {"--decay", {"radial"}},
      {"--window", {"sta"}},
      {"--table", {"sta", "svg"}},
      {"--band-frames", {"svg"}},
      {"--spatial-ratio", {"svg"}},
      {"--q", {"topk", "cdf"}},
      {"--k", {"topk", "cdf"}},
  };
  if (kind == "file") return Ok{};  // a recorded mask: its loader says what it reads
  for (const std::string& flag : given)
    for (const Rule& r : kRules) {
      if (flag != r.flag) continue;
      if (std::find(r.kinds.begin(), r.kinds.end(), kind) != r.kinds.end()) continue;
      std::string kinds;
      for (const auto& k : r.kinds) kinds += (kinds.empty() ? "" : ", ") + k;
      return input_error(
          "<command line>", flag,
          "does not apply to pattern kind '" + kind + "' (it applies to " + kinds + ")");
    }
  return Ok{};
}

std::vector<std::string> given_options(const CLI::App& cmd) {
  std::vector<std::string> given;
  for (const CLI::Option* o : cmd.get_options())
    if (o->count() > 0 && !o->get_lnames().empty()) given.push_back("--" + o->get_lnames().front());
  return given;
}

CLI::Validator between(double lo, double hi) {
  const std::string b = "between " + number_text(lo) + " and " + number_text(hi);
  return number_validator(
      "[" + number_text(lo) + "," + number_text(hi) + "]",
      [lo, hi](double x) { return x >= lo && x <= hi; }, b);
}

CLI::Validator above_up_to(double lo, double hi) {
  const std::string b = "in (" + number_text(lo) + ", " + number_text(hi) + "]";
  return number_validator(
      "(" + number_text(lo) + "," + number_text(hi) + "]",
      [lo, hi](double x) { return x > lo && x <= hi; }, b);
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double x = 0;
        return parse_finite(s, "a finite number", x);
      },
      "FINITE");
}

CLI::Validator existing_file() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::error_code ec;
        const auto st = std::filesystem::status(s, ec);
        if (!std::filesystem::exists(st)) return s + ": no such file";
        if (std::filesystem::is_directory(st)) return s + ": is a directory, not a file";
        return {};
      },
      "FILE");
}

namespace {

/// The subcommand being parsed or run: the chain of parsed subcommands ("topo import"), "" when
/// none was chosen; `sub` becomes the innermost one.
std::string command_chain(const CLI::App& app, const CLI::App*& sub) {
  std::string where;
  sub = &app;
  for (auto subs = sub->get_subcommands(); !subs.empty(); subs = sub->get_subcommands()) {
    sub = subs.front();
    where += (where.empty() ? "" : " ") + sub->get_name();
  }
  return where;
}

std::string one_line(std::string msg) { return terminal_safe(std::move(msg)); }

}  // namespace

int report_exception(const CLI::App& app, std::exception_ptr error) {
  const CLI::App* sub = nullptr;
  const std::string where = command_chain(app, sub);
  std::string msg;
  int code = 1;
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc&) {
    msg = "out of memory (std::bad_alloc); the problem is too large for this machine";
  } catch (const std::filesystem::filesystem_error& e) {
    // A path that cannot be used (too long, a symlink loop, no permission): input.
    msg = e.what();
    code = 2;
  } catch (const std::system_error& e) {
    msg = std::string("system error: ") + e.what();
  } catch (const std::exception& e) {
    msg = std::string("internal error: ") + e.what();
  } catch (...) {
    msg = "internal error: unknown exception";
  }
  std::cerr << "sparsp: " << (where.empty() ? "" : where + ": ") << one_line(msg) << "\n";
  return code;
}

int finish_stdout(const CLI::App& app, int exit_code) {
  // Flush everything written to stdout (iostreams and stdio share one buffer) and check it: a
  // full disk, /dev/full or a closed descriptor must not end in exit 0.
  std::cout.flush();
  errno = 0;
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed) return exit_code;
  const int err = errno;
  const CLI::App* sub = nullptr;
  const std::string where = command_chain(app, sub);
  std::cerr << "sparsp: " << (where.empty() ? "" : where + ": ") << "cannot write standard output: "
            << (err ? std::string(std::strerror(err)) : std::string("write error")) << "\n";
  return exit_code != 0 ? exit_code : 1;
}

int report_parse_error(const CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == 0) return app.exit(error) == 0 ? 0 : 2;  // --help, --version
  const CLI::App* sub = nullptr;
  const std::string where = command_chain(app, sub);
  const std::string help = "sparsp " + (where.empty() ? "" : where + " ") + "--help";
  std::string msg = error.what();
  std::smatch m;
  static const std::regex conversion(R"(^Could not convert: (\S+) = (.*)$)");
  static const std::regex required(R"(^(\S+) is required$)");
  static const std::regex excludes(R"(^(\S+) excludes (\S+)$)");
  static const std::regex mismatch(R"(^(\S+): \d+ required (\S+) missing$)");
  static const std::regex extras(R"(^The following arguments? (?:was|were) not expected: (.*)$)");
  if (std::regex_match(msg, m, conversion)) {
    const CLI::Option* o = sub->get_option_no_throw(m[1].str());
    msg = m[1].str() + ": expected " + type_words(o ? o->get_type_name() : "") + ", got '" +
          m[2].str() + "'";
  } else if (std::regex_match(msg, m, required)) {
    msg = m[1].str() + ": required but not given (see " + help + ")";
  } else if (std::regex_match(msg, m, excludes)) {
    msg = m[2].str() + ": cannot be combined with " + m[1].str();
  } else if (std::regex_match(msg, m, mismatch)) {
    msg = m[1].str() + ": expected a value (" + m[2].str() + ")";
  } else if (std::regex_match(msg, m, extras)) {
    msg = "unexpected argument(s): " + m[1].str() + " (see " + help + ")";
  } else if (msg.rfind("A subcommand is required", 0) == 0 && !sub->remaining().empty()) {
    // `sparsp bogus`: name the word and the subcommands there are.
    std::string names;
    for (const CLI::App* c : sub->get_subcommands({}))
      names += (names.empty() ? "" : ", ") + c->get_name();
    msg = "unknown subcommand '" + sub->remaining().front() + "' (one of: " + names + "; see " +
          help + ")";
  } else if (!msg.empty() && msg[0] >= 'A' && msg[0] <= 'Z' && msg.find(':') == std::string::npos) {
    msg[0] = static_cast<char>(msg[0] - 'A' + 'a');  // "A subcommand is required" and the like
  }
  std::cerr << "sparsp: " << (where.empty() ? "" : where + ": ") << one_line(msg) << "\n";
  return 2;
}

}  // namespace sparsp::cli

int main(int argc, char** argv) {
  // Last resort for an exception escaping a worker thread: one line and exit 1, not SIGABRT.
  std::set_terminate([] {
    std::fputs("sparsp: internal error: unhandled exception in a worker thread\n", stderr);
    std::_Exit(1);
  });
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
  sparsp::cli::add_published_commands(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return sparsp::cli::report_parse_error(app, e);
  } catch (...) {
    // The error barrier: a subcommand's callback runs inside parse(); nothing ends the process
    // with a signal (bad_alloc, filesystem_error, system_error, anything else).
    return sparsp::cli::report_exception(app, std::current_exception());
  }
  return sparsp::cli::finish_stdout(app, ctx.exit_code);
}
