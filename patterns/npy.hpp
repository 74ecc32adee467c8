#pragma once
// NumPy .npy format (private): header parsing and streaming reads. Format reference:
// numpy.lib.format (NEP 1): magic "\x93NUMPY", version byte pair, little-endian header length
// (u16 for 1.0, u32 for 2.0/3.0), an ASCII Python dict literal with 'descr', 'fortran_order',
// 'shape', padded with spaces and '\n' so the data starts 64-byte aligned.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparsp/pattern.hpp"
#include "sparsp/status.hpp"

namespace sparsp::patterns {

struct NpyHeader {
  std::string descr;      ///< e.g. "<f4", "|b1"
  char byte_order = '|';  ///< '<', '>', '|' ('=' mapped to '<')
  char kind = '?';        ///< 'b', 'u', 'i', 'f'
  int item_bytes = 0;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t header_bytes = 0;  ///< offset of the data
  int64_t elements() const;
};

/// Reads up to n bytes into buf; returns the count (0 at end).
using ReadFn = std::function<size_t(void* buf, size_t n)>;

/// Parses the header from a reader positioned at the start. Errors (exit 2) name `src`:
/// bad magic, unsupported version, malformed dict, unknown descr, negative or overflowing shape.
Result<NpyHeader> read_npy_header(const ReadFn& read, const std::string& src);

/// Header bytes for a C-order array (version 1.0, 64-byte aligned).
std::string make_npy_header(const std::string& descr, const std::vector<int64_t>& shape);

/// Converts `n` items of a float/bf16 dtype to float. `bf16` treats '<u2' / '>u2' as bfloat16.
void convert_to_float(const NpyHeader& h, const uint8_t* src, size_t n, float* dst);

/// A mask array read from .npy/.npz: shape [S?, L?, H, Qb, Kb] normalised to 5 dims, streamed
/// mask by mask into `sink(step, layer, head, BlockMask&&)`.
struct MaskArrayInfo {
  int steps = 1, layers = 1, heads = 0, rows = 0, cols = 0;
  int ndim = 0;
};

using MaskSink = std::function<Status(int step, int layer, int head, BlockMask&& mask)>;

/// Reads a bool/uint8 mask array (3, 4 or 5 dims) from a reader positioned at the start.
/// `available`: total bytes of the .npy stream, header included (SIZE_MAX: unknown); checked before
/// any allocation. Errors: wrong dtype, Fortran order, bad rank, values other than 0/1, truncated
/// data, trailing bytes.
Result<MaskArrayInfo> read_npy_masks(const ReadFn& read, const std::string& src,
                                     const MaskSink& sink, size_t available = SIZE_MAX);

/// Parses an in-memory .npy mask (used by the fuzzer and tests).
Result<MaskArrayInfo> parse_npy_masks(const uint8_t* data, size_t size, const std::string& src,
                                      const MaskSink& sink);

}  // namespace sparsp::patterns
