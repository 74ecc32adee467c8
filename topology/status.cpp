// Definitions of the input-file helpers declared in include/sparsp/status.hpp. They live in the
// topology library because it is the lowest one: every other module links it.
#include "sparsp/status.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace sparsp {

Result<std::string> read_text_file(const std::string& path, std::string_view kind) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return input_error(path, "", "is a directory, not a " + std::string(kind));
  std::ifstream in(path, std::ios::binary);
  if (!in) return input_error(path, "", "cannot open " + std::string(kind));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return input_error(path, "", "read error");
  return ss.str();
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
