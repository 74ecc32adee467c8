#pragma once
// Test helper shared by the topology tests: a whole file as bytes ("" if it cannot be read).
#include <fstream>
#include <sstream>
#include <string>

namespace sparsp::topology::test {

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sparsp::topology::test
