#pragma once
// Error values for I/O, config and CLI boundaries (STYLE habit 5): these functions return
// Result<T>; internal invariants assert; nothing throws across a public API.
#include <cstddef>
#include <cstdlib>
#include <iosfwd>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

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

/// Length of the well-formed UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there
/// are not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut
/// short). Rules: RFC 3629, section 4 (the Unicode "well-formed UTF-8 byte sequences" table).
inline size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c == 0xe0)
    n = 3, lo = 0xa0;
  else if (c >= 0xe1 && c <= 0xef)
    n = 3, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c == 0xf0)
    n = 4, lo = 0x90;
  else if (c >= 0xf1 && c <= 0xf3)
    n = 4;
  else if (c == 0xf4)
    n = 4, hi = 0x8f;
  else
    return 0;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
  return n;
}

/// Describes the first character of `s` that must not reach a terminal raw when `s` is printed
/// as it is (names, ids, sources in headings and tables), or returns "" when there is none:
/// C0 controls and DEL ("the control byte 0x1b"), C1 controls U+0080..U+009F, the line and
/// paragraph separators U+2028/U+2029, and the bidirectional embeddings, overrides and isolates
/// U+202A..U+202E, U+2066..U+2069 (they reorder the text after them on screen: Unicode UAX #9;
/// CVE-2021-42574 "Trojan Source"). Bytes that are not well-formed UTF-8 are reported too.
inline std::string unprintable_character(std::string_view s) {
  static const char kUpper[] = "0123456789ABCDEF";
  static const char kLower[] = "0123456789abcdef";
  auto code = [&](unsigned cp, const char* what) {
    std::string u = "U+";
    for (int sh = 12; sh >= 0; sh -= 4) u += kUpper[(cp >> sh) & 15];
    return u + " (" + what + ")";
  };
  auto byte = [&](unsigned char c) { return std::string("0x") + kLower[c >> 4] + kLower[c & 15]; };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return "the byte " + byte(c) + " (not UTF-8)";
    if (c < 0x20 || c == 0x7f) return "the control byte " + byte(c);
    unsigned cp = 0;
    if (n == 2) cp = (c & 0x1fu) << 6 | (static_cast<unsigned char>(s[i + 1]) & 0x3fu);
    if (n == 3)
      cp = (c & 0x0fu) << 12 | (static_cast<unsigned char>(s[i + 1]) & 0x3fu) << 6 |
           (static_cast<unsigned char>(s[i + 2]) & 0x3fu);
    if (cp >= 0x80 && cp <= 0x9f) return code(cp, "a C1 control character");
    if (cp == 0x2028 || cp == 0x2029) return code(cp, "a line or paragraph separator");
    if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
      return code(cp, "a bidirectional control");
    i += n;
  }
  return {};
}

/// Formats "<file>:<place>: <what>" (place omitted when empty), with control characters that
/// come from the input (a JSON key or value holding "\n") and bytes that are not well-formed
/// UTF-8 (a parse error quoting a Latin-1 byte) written as "\xNN", and the characters
/// unprintable_character() names beyond C0/DEL (C1 controls, U+2028/2029, bidirectional controls,
/// e.g. in a file name or a --policy text) written as "\uXXXX", so the message stays one line
/// of valid text on any terminal (fuzz_topo_json found a key with a newline). 0x1f is kept: it
/// marks nested file names that their callers replace (policy/plan_io.cpp, replay/validate.cpp).
inline Error input_error(const std::string& file, const std::string& place,
                         const std::string& what) {
  const std::string raw = place.empty() ? file + ": " + what : file + ":" + place + ": " + what;
  std::string out;
  out.reserve(raw.size());
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < raw.size();) {
    const auto c = static_cast<unsigned char>(raw[i]);
    const size_t n = utf8_sequence_length(raw, i);
    if (n == 0 || (c < 0x20 && c != 0x1f) || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    } else if (n > 1 && !unprintable_character(std::string_view(raw).substr(i, n)).empty()) {
      // C1 controls, U+2028/2029 and the bidirectional controls (all two or three bytes).
      unsigned cp = n == 2 ? (c & 0x1fu) << 6 | (static_cast<unsigned char>(raw[i + 1]) & 0x3fu)
                           : (c & 0x0fu) << 12 |
                                 (static_cast<unsigned char>(raw[i + 1]) & 0x3fu) << 6 |
                                 (static_cast<unsigned char>(raw[i + 2]) & 0x3fu);
      out += "\\u";
      for (int sh = 12; sh >= 0; sh -= 4) out += kHex[(cp >> sh) & 15];
      i += n;
    } else {
      out.append(raw, i, n);
      i += n;
    }
  }
  return Error{std::move(out), 2};
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
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    check();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
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
/// gives "<file>: invalid JSON: <detail>" (parse_json then adds the value's JSON pointer).
Error invalid_json(const std::string& file, std::string_view what, std::string_view text = {},
                   size_t byte = 0);

/// Re-addresses an error of a document nested in a file (parsed or simulated under the name
/// `marker`) into that file, at JSON pointer `prefix`: "<marker>:/x: what" ->
/// "<file>:<prefix>/x: what"; "<marker>: what" and "<marker>:<line>: what" ->
/// "<file>:<prefix>: what". Errors not starting with `marker` (e.g. from another file) are
/// returned unchanged. Used for a plan's embedded topology and its layer plans' workloads.
Error rebase_error(const Error& e, const std::string& marker, const std::string& file,
                   const std::string& prefix);

namespace detail {

/// Finds the first key repeated within one object while nlohmann's parser runs (its parser
/// callback), and the JSON pointer of the repeat ("/transfers", "/links/3/gen").
class DuplicateKeyFinder {
 public:
  enum class Event { object_start, object_end, array_start, array_end, key, value };
  void on(Event e, const std::string* key) {
    switch (e) {
      case Event::object_start:
      case Event::array_start:
        stack_.push_back(Frame{e == Event::object_start, 0, {}, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!stack_.empty()) stack_.pop_back();
        next_element();
        break;
      case Event::key:
        if (stack_.empty() || !key) break;
        stack_.back().key = *key;
        if (!stack_.back().keys.insert(*key).second && found_.empty()) {
          found_ = pointer();
          key_ = *key;
        }
        break;
      case Event::value:
        next_element();
        break;
    }
  }
  bool found() const { return !found_.empty(); }
  const std::string& pointer_found() const { return found_; }
  const std::string& key() const { return key_; }
  /// The JSON pointer of the value being parsed now (where a parse stopped).
  std::string current_pointer() const { return pointer(); }

 private:
  struct Frame {
    bool object;
    size_t index;
    std::string key;
    std::set<std::string> keys;
  };
  void next_element() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
  }
  std::string pointer() const {
    std::string p;
    for (const Frame& f : stack_) {
      p += '/';
      if (!f.object) {
        p += std::to_string(f.index);
        continue;
      }
      for (char c : f.key)
        p += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    }
    return p;
  }
  std::vector<Frame> stack_;
  std::string found_, key_;
};

}  // namespace detail

/// Parses `text` as JSON into `Json` (nlohmann::json or nlohmann::ordered_json; a template so that
/// this header needs no JSON include). Any parser exception becomes invalid_json(file, ...): a
/// syntax error names its line; a number out of range (1e999) names its JSON pointer. A key given
/// twice in one object is an error too, "<file>:<pointer>: duplicate key \"k\" (each key may appear
/// once)": the last one would otherwise win silently. Never throws.
template <class Json>
Result<Json> parse_json(std::string_view text, const std::string& file) {
  detail::DuplicateKeyFinder dups;
  using E = typename Json::parse_event_t;
  using D = detail::DuplicateKeyFinder::Event;
  auto callback = [&dups](int, E event, Json& parsed) {
    switch (event) {
      case E::object_start:
        dups.on(D::object_start, nullptr);
        break;
      case E::object_end:
        dups.on(D::object_end, nullptr);
        break;
      case E::array_start:
        dups.on(D::array_start, nullptr);
        break;
      case E::array_end:
        dups.on(D::array_end, nullptr);
        break;
      case E::key: {
        const std::string* k = parsed.template get_ptr<const std::string*>();
        dups.on(D::key, k);
        break;
      }
      case E::value:
        dups.on(D::value, nullptr);
        break;
    }
    return true;
  };
  try {
    Json j = Json::parse(text.begin(), text.end(), callback);
    if (dups.found())
      return input_error(file, dups.pointer_found(),
                         "duplicate key \"" + dups.key() + "\" (each key may appear once)");
    return j;
  } catch (const typename Json::parse_error& e) {
    return invalid_json(file, e.what(), text, e.byte);
  } catch (const typename Json::exception& e) {
    // No byte offset (out_of_range.406, "number overflow parsing '1e999'"): the value's pointer.
    Error err = invalid_json(file, e.what());
    const std::string at = dups.current_pointer();
    if (!at.empty()) err.message = file + ":" + at + err.message.substr(file.size());
    return err;
  }
}

}  // namespace sparsp
