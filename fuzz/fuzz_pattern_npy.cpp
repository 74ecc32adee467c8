// libFuzzer target: the .npy mask reader (header dict parser, dtype/shape checks, data reads).
// Any input must give a mask array or an Error, never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>

#include "../patterns/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparsp::patterns;
  int64_t bits = 0;
  auto sink = [&](int, int, int, BlockMask&& m) -> sparsp::Status {
    bits += m.count();
    return sparsp::Ok{};
  };
  auto r = parse_npy_masks(data, size, "<fuzz>", sink);
  if (r.ok() && (r->rows < 1 || r->cols < 1)) __builtin_trap();
  // The float path (Q/K dumps) shares the header parser.
  size_t pos = 0;
  ReadFn read = [&](void* buf, size_t n) {
    const size_t k = n < size - pos ? n : size - pos;
    if (k) __builtin_memcpy(buf, data + pos, k);
    pos += k;
    return k;
  };
  auto h = read_npy_header(read, "<fuzz>");
  if (h.ok() && (h->kind == 'f' || h->kind == 'u') && h->item_bytes <= 8) {
    const size_t avail = size - pos;
    const size_t n = avail / static_cast<size_t>(h->item_bytes);
    float out[64];
    convert_to_float(*h, data + pos, n < 64 ? n : 64, out);
  }
  return 0;
}
