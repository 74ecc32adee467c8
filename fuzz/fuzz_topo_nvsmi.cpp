// libFuzzer target: `nvidia-smi topo -m` importer. Any input must give a topology whose matrix
// export imports back to the same path classes, or a one-line error.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sparsp/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = sparsp::topology::import_nvidia_smi(text, "fuzz.txt");
  if (!t) {
    if (t.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const std::string matrix = sparsp::topology::to_matrix_text(*t);
  auto back = sparsp::topology::import_nvidia_smi(matrix, "matrix.txt");
  if (!back || sparsp::topology::to_matrix_text(*back) != matrix) std::abort();
  return 0;
}
