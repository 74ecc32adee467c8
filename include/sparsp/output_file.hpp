#pragma once
// Where an output file is really written, shared by every writer (cli, patterns, study), so that
// no writer renames a temporary file over something that is not a regular file.
//
// Rules (the same for every output option):
//   - a missing path or a regular file: written through a temporary file beside it and a rename
//     (atomic; no partial output);
//   - a symbolic link: followed; the link stays and its target is written by the rules here;
//   - a character device or FIFO (/dev/null, /dev/stdout, /dev/full, a named pipe): written in
//     place, never replaced; a write error (ENOSPC on /dev/full) is an error, exit 1;
//   - a folder, a block device or a socket: refused, exit 2.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "sparsp/status.hpp"

namespace sparsp {

/// What output_target() resolved an output path to.
struct OutputTarget {
  /// The file to write: `path` itself, or the target of a symbolic link (followed).
  std::string path;
  /// True for a character device or FIFO: write it in place (write_in_place), never rename over it.
  bool in_place = false;
};

/// Resolves the output path `path` by the rules at the top of this file. Errors (exit 2):
/// "<path>: cannot write: is a folder", "... is a block device", "... is a socket",
/// "<path>: cannot write: <why the link cannot be followed>".
inline Result<OutputTarget> output_target(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return input_error("<output>", "", "cannot write: empty path");
  std::error_code ec;
  fs::path p = path;
  // Follow the chain of links (at most 40, as the kernel does); a dangling link names the file
  // to create.
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops == 40) return input_error(path, "", "cannot write: too many levels of symbolic links");
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return input_error(path, "", "cannot write: " + ec.message());
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  const fs::file_status st = fs::status(p, ec);
  // Under a regular file ("file/out.json"): nothing there; the writer says why it cannot create it.
  if (ec == std::errc::not_a_directory) return OutputTarget{p.string(), false};
  if (ec && ec != std::errc::no_such_file_or_directory)
    return input_error(path, "", "cannot write: " + ec.message());
  switch (st.type()) {
    case fs::file_type::not_found:
    case fs::file_type::regular:
      return OutputTarget{p.string(), false};
    case fs::file_type::directory:
      return input_error(path, "", "cannot write: is a folder");
    case fs::file_type::character:
    case fs::file_type::fifo:
      return OutputTarget{p.string(), true};
    case fs::file_type::block:
      return input_error(path, "", "cannot write: is a block device; refusing to write to it");
    case fs::file_type::socket:
      return input_error(path, "", "cannot write: is a socket");
    default:
      return input_error(path, "", "cannot write: not a regular file");
  }
}

/// Writes `text` to the character device or FIFO `path` in place (no temporary file, no
/// truncation, no rename). Errors: "<path>: cannot open: <why>" (exit 2), "<path>: write failed:
/// <why>" (exit 1, e.g. "No space left on device" on /dev/full).
inline Status write_in_place(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return input_error(path, "", std::string("cannot open: ") + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "short write";
      ::close(fd);
      return Error{path + ": write failed: " + why, 1};
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && errno != EINTR)
    return Error{path + ": write failed: " + std::strerror(errno), 1};
  return Ok{};
}

}  // namespace sparsp
