// doctest main for every test_<module> executable. Each test process gets its own scratch
// folder as TMPDIR (std::filesystem::temp_directory_path() and the CLI processes a test starts
// use it), so test cases that ctest runs in parallel never share temporary files.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  std::string scratch = (std::filesystem::temp_directory_path() / "sparsp-test-XXXXXX").string();
  const bool own_tmp = mkdtemp(scratch.data()) != nullptr;
  if (own_tmp) setenv("TMPDIR", scratch.c_str(), 1);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int rc = context.run();
  if (own_tmp) {
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
  }
  return rc;
}
