#pragma once
// The advisory lock on a sweep output's "<output>.partial" (private to study/): held by a sweep
// for its whole run and by `sweep merge` while it writes, so two writers of one output refuse
// each other instead of interleaving or overwriting (issue 18).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sparsp/status.hpp"

namespace sparsp::study {

// An exclusive advisory lock (flock) on <output>.partial, held for the whole run, so that a
// second sweep on the same output is refused instead of interleaving its rows. Removes the
// .partial it created itself if nothing was written to it.
class PartialLock {
 public:
  ~PartialLock() {
    if (fd_ < 0) return;
    struct stat st {};
    if (created_ && ::fstat(fd_, &st) == 0 && st.st_size == 0) ::unlink(path_.c_str());
    ::close(fd_);
  }
  Status acquire(const std::string& partial, const std::string& output) {
    path_ = partial;
    for (int attempt = 0; attempt < 8; ++attempt) {
      struct stat before {};
      created_ = ::stat(partial.c_str(), &before) != 0;
      fd_ = ::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd_ < 0)
        return input_error(partial, "",
                           std::string("cannot open for writing: ") + std::strerror(errno));
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd_);
        fd_ = -1;
        created_ = false;
        return input_error(output, "",
                           "in use by another sweep (" + partial +
                               " is locked); wait for it to finish or use another output");
      }
      // The file may have been renamed to the output between open and flock: lock the new one.
      struct stat locked {
      }, now{};
      if (::fstat(fd_, &locked) == 0 && ::stat(partial.c_str(), &now) == 0 &&
          locked.st_ino == now.st_ino && locked.st_dev == now.st_dev)
        return Ok{};
      ::close(fd_);
      fd_ = -1;
    }
    return Error{partial + ": cannot lock (it keeps being replaced)", 1};
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool created_ = false;
};

}  // namespace sparsp::study
