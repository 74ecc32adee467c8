// Definitions of the input-file helpers declared in include/sparsp/status.hpp. They live in the
// topology library because it is the lowest one: every other module links it.
#include "sparsp/status.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

namespace sparsp {

namespace {

// Reads at most `limit` bytes of `in` (+1 to detect more); false when there was more.
bool read_bounded(std::istream& in, size_t limit, std::string& out) {
  out.clear();
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    if (out.size() + n > limit) return false;
    out.append(buf, n);
  }
  return true;
}

std::string limit_text(size_t limit) { return std::to_string(limit >> 20) + " MiB"; }

// What was read from a non-regular file (a pipe such as /dev/stdin, a FIFO), by its device and
// inode: such a file can be read only once, but one input may be loaded more than once (a
// study's topology by the study check and by the run, by every point of a sweep), and a second
// read would find it empty and report a confusing "unexpected end of input". Each is read once,
// then every load of it parses the same bytes. Process-wide, guarded by its mutex; bounded by
// kMaxStreamInputBytes per input.
struct StreamCache {
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, std::string> text;
};
StreamCache& stream_cache() {
  static StreamCache c;
  return c;
}

}  // namespace

Result<std::string> read_text_file(const std::string& path, std::string_view kind) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st))
    return input_error(path, "", "is a directory, not a " + std::string(kind));
  const bool regular = std::filesystem::is_regular_file(st);
  const size_t limit = regular ? kMaxInputFileBytes : kMaxStreamInputBytes;
  if (regular) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > limit)
      return input_error(path, "",
                         "too large for a " + std::string(kind) + " (" +
                             std::to_string(size >> 20) + " MiB; at most " + limit_text(limit) +
                             ")");
  }
  // A pipe or FIFO is read once; a later load of it gets the same text (StreamCache).
  struct ::stat sb {};
  const bool once =
      !regular && ::stat(path.c_str(), &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode));
  const std::pair<dev_t, ino_t> key{sb.st_dev, sb.st_ino};
  std::unique_lock<std::mutex> lock;
  if (once) {
    lock = std::unique_lock<std::mutex>(stream_cache().mu);
    if (auto it = stream_cache().text.find(key); it != stream_cache().text.end()) return it->second;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return input_error(path, "", "cannot open " + std::string(kind));
  std::string text;
  if (!read_bounded(in, limit, text))
    return input_error(path, "",
                       std::string(regular ? "" : "not a regular file, and ") + "longer than " +
                           limit_text(limit) + " (the limit for a " + std::string(kind) + ")");
  if (in.bad()) return input_error(path, "", "read error");
  if (once) stream_cache().text.emplace(key, text);
  return text;
}

Result<std::string> read_text_stream(std::istream& in, const std::string& name) {
  std::string text;
  if (!read_bounded(in, kMaxStreamInputBytes, text))
    return input_error(name, "", "longer than " + limit_text(kMaxStreamInputBytes));
  if (in.bad()) return input_error(name, "", "read error");
  return text;
}

Error invalid_json(const std::string& file, std::string_view what, std::string_view text,
                   size_t byte) {
  // nlohmann's messages start "[json.exception.parse_error.101] ": keep what follows.
  constexpr std::string_view kPrefix = "[json.exception.";
  if (what.substr(0, kPrefix.size()) == kPrefix) {
    if (const auto end = what.find("] "); end != std::string_view::npos)
      what.remove_prefix(end + 2);
  }
  const std::string place = byte == 0 ? std::string() : std::to_string(line_of_offset(text, byte));
  return input_error(file, place, "invalid JSON: " + std::string(what));
}

Error rebase_error(const Error& e, const std::string& marker, const std::string& file,
                   const std::string& prefix) {
  const std::string& m = e.message;
  if (m.compare(0, marker.size(), marker) != 0) return e;
  const std::string rest = m.substr(marker.size());
  if (rest.compare(0, 2, ":/") == 0) return Error{file + ":" + prefix + rest.substr(1), e.exit_code};
  if (rest.compare(0, 2, ": ") == 0) return Error{file + ":" + prefix + rest, e.exit_code};
  const size_t colon = rest.find(": ", 1);  // ":<line>: what"
  return Error{file + ":" + prefix + (colon == std::string::npos ? rest : rest.substr(colon)),
               e.exit_code};
}

}  // namespace sparsp
