// libFuzzer target: the native pattern reader (magic, JSON header, model/layout checks, payload).
#include <cstddef>
#include <cstdint>

#include "../patterns/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = sparsp::patterns::parse_native(data, size, "<fuzz>");
  if (r.ok()) {
    auto& p = **r;
    // Touch every mask once: the index must only point at stored masks.
    int64_t bits = 0;
    for (int l = 0; l < p.layers() && l < 4; ++l)
      for (int h = 0; h < p.heads() && h < 4; ++h) bits += p.mask(0, l, h).count();
    if (bits < 0) __builtin_trap();
  }
  return 0;
}
