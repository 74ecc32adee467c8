#pragma once
// Error values for I/O, config and CLI boundaries (STYLE habit 5): these functions return
// Result<T>; internal invariants assert; nothing throws across a public API.
#include <cstddef>
#include <cstdlib>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sparsp {

/// A user-facing error. `message` is one line of the form
/// "<file>:<place>: <what>" where place is a line number ("12"), a JSON pointer ("/links/3/gen")
/// or an array index ("[H=2,Qb=5]"); file is "<preset:NAME>" or "<stdin>" where there is none.
/// `exit_code` is the process exit status the CLI maps it to: 2 for bad input (the default),
/// 1 for a failure at run time (e.g. a replay integrity mismatch or a CUDA error).
struct Error {
  std::string message;
  int exit_code = 2;
};

/// Formats "<file>:<place>: <what>" (place omitted when empty).
inline Error input_error(const std::string& file, const std::string& place, const std::string& what) {
  return Error{place.empty() ? file + ": " + what : file + ":" + place + ": " + what, 2};
}

/// 1-based line number of a 1-based byte offset into `text` (as nlohmann::json's
/// parse_error::byte reports it), for "<file>:<line>: ..." messages on malformed JSON.
inline int line_of_offset(std::string_view text, size_t byte) {
  int line = 1;
  const size_t end = byte == 0 ? 0 : (byte - 1 < text.size() ? byte - 1 : text.size());
  for (size_t i = 0; i < end; ++i)
    if (text[i] == '\n') ++line;
  return line;
}

/// Either a T or an Error. Accessing value() of an error aborts (a programming error, not input).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}     // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// REQUIRES: !ok().
  const Error& error() const { return std::get<1>(v_); }

 private:
  void check() const {
    if (!ok()) std::abort();  // value() of an error: caller bug
  }
  std::variant<T, Error> v_;
};

/// Result of an operation that produces nothing.
struct Ok {};
using Status = Result<Ok>;

// ---- reading input files ----------------------------------------------------------------------
// Every loader of a file (topology, model, study, sweep, tune, workload, plan, ...) reads it with
// read_text_file and parses JSON with parse_json, so missing files, directories and syntax errors
// are reported the same way everywhere. Defined in topology/status.cpp (topology is the lowest
// library; every module links it).

/// The whole file at `path`, as bytes (no newline translation).
/// Errors (exit 2): "<path>: is a directory, not a <kind>"; "<path>: cannot open <kind>" (missing
/// or unreadable); "<path>: read error" (an I/O error part-way). `kind` names what the caller
/// expects: "file", "workload file", ...
/// "<path>: too large for a <kind> (N MiB; at most M MiB)" for a regular file over
/// kMaxInputFileBytes; "<path>: not a regular file, and longer than 64 MiB (the limit for a
/// <kind>)" for a device or FIFO (/dev/zero) that gives more than kMaxStreamInputBytes: reading is
/// bounded.
Result<std::string> read_text_file(const std::string& path, std::string_view kind = "file");

/// Largest regular input file read (1 GiB) and largest non-regular input (FIFO, device, stdin)
/// read before giving up (64 MiB).
inline constexpr size_t kMaxInputFileBytes = size_t{1} << 30;
inline constexpr size_t kMaxStreamInputBytes = size_t{64} << 20;

/// All of `in` (stdin), at most kMaxStreamInputBytes; errors name `name` ("<stdin>").
Result<std::string> read_text_stream(std::istream& in, const std::string& name);

/// The error for JSON text that failed to parse: "<file>:<line>: invalid JSON: <detail>", where
/// line = line_of_offset(text, byte) (the line of the character parsing stopped at) and detail is
/// `what` (an nlohmann::json exception's what()) without its "[json.exception.<id>] " prefix.
/// byte == 0 (errors without a position, e.g. out_of_range.406 "number overflow parsing '1e999'")
/// gives "<file>: invalid JSON: <detail>".
Error invalid_json(const std::string& file, std::string_view what, std::string_view text = {},
                   size_t byte = 0);

/// Re-addresses an error of a document nested in a file (parsed or simulated under the name
/// `marker`) into that file, at JSON pointer `prefix`: "<marker>:/x: what" ->
/// "<file>:<prefix>/x: what"; "<marker>: what" and "<marker>:<line>: what" ->
/// "<file>:<prefix>: what". Errors not starting with `marker` (e.g. from another file) are
/// returned unchanged. Used for a plan's embedded topology and its layer plans' workloads.
Error rebase_error(const Error& e, const std::string& marker, const std::string& file,
                   const std::string& prefix);

/// Parses `text` as JSON into `Json` (nlohmann::json or nlohmann::ordered_json; a template so that
/// this header needs no JSON include). Any parser exception becomes invalid_json(file, ...): a
/// syntax error names its line; a number out of range (1e999) names no line. Never throws.
template <class Json>
Result<Json> parse_json(std::string_view text, const std::string& file) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const typename Json::parse_error& e) {
    return invalid_json(file, e.what(), text, e.byte);
  } catch (const typename Json::exception& e) {
    return invalid_json(file, e.what());
  }
}

}  // namespace sparsp
