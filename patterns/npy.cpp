// .npy reading and writing.
#include "npy.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace sparsp::patterns {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxElements = int64_t{1} << 50;
constexpr int kMaxMaskSide = 1 << 15;  // 32768 blocks per side: 128 MiB per mask

class DictParser {
 public:
  DictParser(const std::string& s, const std::string& src) : s_(s), src_(src) {}

  Result<NpyHeader> parse() {
    NpyHeader h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip();
    if (!eat('{')) return err("header dict does not start with '{'");
    skip();
    while (!peek('}')) {
      auto key = string_lit();
      if (!key) return key.error();
      skip();
      if (!eat(':')) return err("expected ':' after key '" + *key + "'");
      skip();
      // A key given twice is an error, as in every JSON format (the last one must not win).
      if ((*key == "descr" && have_descr) || (*key == "fortran_order" && have_fortran) ||
          (*key == "shape" && have_shape))
        return err("duplicate header key '" + *key + "'");
      if (*key == "descr") {
        auto v = string_lit();
        if (!v) return v.error();
        h.descr = *v;
        have_descr = true;
      } else if (*key == "fortran_order") {
        if (s_.compare(i_, 4, "True") == 0) {
          h.fortran_order = true;
          i_ += 4;
        } else if (s_.compare(i_, 5, "False") == 0) {
          h.fortran_order = false;
          i_ += 5;
        } else {
          return err("fortran_order must be True or False");
        }
        have_fortran = true;
      } else if (*key == "shape") {
        if (!eat('(')) return err("shape must be a tuple");
        skip();
        while (!peek(')')) {
          if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_])))
            return err("shape entries must be non-negative integers");
          int64_t v = 0;
          while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
            v = v * 10 + (s_[i_++] - '0');
            if (v > kMaxDim) return err("shape entry too large");
          }
          if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 long suffix
          h.shape.push_back(v);
          if (h.shape.size() > 32) return err("too many dimensions");
          skip();
          if (!eat(',')) break;
          skip();
        }
        if (!eat(')')) return err("unterminated shape tuple");
        have_shape = true;
      } else {
        return err("unknown header key '" + *key + "'");
      }
      skip();
      if (!eat(',')) break;
      skip();
    }
    if (!eat('}')) return err("header dict not closed with '}'");
    skip();
    if (i_ != s_.size()) return err("unexpected bytes after the header dict");
    if (!have_descr || !have_fortran || !have_shape)
      return err("header lacks one of 'descr', 'fortran_order', 'shape'");
    int64_t n = 1;
    for (int64_t d : h.shape) {
      if (d != 0 && n > kMaxElements / d) return err("shape too large");
      n *= d;
    }
    // descr: byte order + kind + size, e.g. "<f4", "|b1".
    const std::string& d = h.descr;
    if (d.size() < 3 || std::string("<>|=").find(d[0]) == std::string::npos)
      return err("unsupported dtype '" + d + "'");
    h.byte_order = d[0] == '=' ? '<' : d[0];
    h.kind = d[1];
    if (std::string("buif").find(h.kind) == std::string::npos)
      return err("unsupported dtype '" + d + "'");
    int size = 0;
    for (size_t k = 2; k < d.size(); ++k) {
      if (!std::isdigit(static_cast<unsigned char>(d[k])) || size > 100)
        return err("unsupported dtype '" + d + "'");
      size = size * 10 + (d[k] - '0');
    }
    if (size != 1 && size != 2 && size != 4 && size != 8)
      return err("unsupported dtype '" + d + "'");
    h.item_bytes = size;
    return h;
  }

 private:
  Error err(const std::string& what) const { return input_error(src_, "header", what); }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  Result<std::string> string_lit() {
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
      return err("expected a quoted string");
    const char q = s_[i_++];
    const size_t end = s_.find(q, i_);
    if (end == std::string::npos) return err("unterminated string");
    std::string v = s_.substr(i_, end - i_);
    i_ = end + 1;
    return v;
  }
  const std::string& s_;
  const std::string& src_;
  size_t i_ = 0;
};

size_t read_full(const ReadFn& read, void* buf, size_t n) {
  size_t got = 0;
  auto* p = static_cast<uint8_t*>(buf);
  while (got < n) {
    const size_t r = read(p + got, n - got);
    if (r == 0) break;
    got += r;
  }
  return got;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

int64_t NpyHeader::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<NpyHeader> read_npy_header(const ReadFn& read, const std::string& src) {
  uint8_t pre[10];
  const size_t got = read_full(read, pre, 10);
  if (got < 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    return input_error(src, "0", "not a .npy file (bad magic)");
  const int major = pre[6];
  size_t hlen = 0, prefix = 10;
  if (major == 1) {
    hlen = pre[8] | (size_t{pre[9]} << 8);
  } else if (major == 2 || major == 3) {
    uint8_t more[2];
    if (read_full(read, more, 2) < 2) return input_error(src, "8", "truncated header length");
    hlen = pre[8] | (size_t{pre[9]} << 8) | (size_t{more[0]} << 16) | (size_t{more[1]} << 24);
    prefix = 12;
  } else {
    return input_error(src, "6", "unsupported .npy version " + std::to_string(major));
  }
  if (hlen > (1u << 20)) return input_error(src, "8", "header length too large");
  std::string text(hlen, '\0');
  if (read_full(read, text.data(), hlen) < hlen)
    return input_error(src, "header", "truncated header");
  DictParser parser(text, src);
  auto h = parser.parse();
  if (!h) return h.error();
  h->header_bytes = prefix + hlen;
  return h;
}

std::string make_npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ", ";
  }
  if (shape.size() == 1) dict.pop_back();
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  const size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  const size_t hlen = dict.size();
  std::string out = "\x93NUMPY";
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(hlen & 0xff);
  out += static_cast<char>((hlen >> 8) & 0xff);
  return out + dict;
}

void convert_to_float(const NpyHeader& h, const uint8_t* src, size_t n, float* dst) {
  const bool swap = h.byte_order == '>';
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = src + i * static_cast<size_t>(h.item_bytes);
    uint8_t b[8];
    for (int k = 0; k < h.item_bytes; ++k) b[k] = swap ? p[h.item_bytes - 1 - k] : p[k];
    if (h.kind == 'f' && h.item_bytes == 4) {
      std::memcpy(&dst[i], b, 4);
    } else if (h.kind == 'f' && h.item_bytes == 2) {
      dst[i] = half_to_float(static_cast<uint16_t>(b[0] | (b[1] << 8)));
    } else if (h.kind == 'f' && h.item_bytes == 8) {
      double d;
      std::memcpy(&d, b, 8);
      dst[i] = static_cast<float>(d);
    } else {  // bf16 stored as uint16: the high half of a float32
      const uint32_t bits = static_cast<uint32_t>(b[0] | (b[1] << 8)) << 16;
      std::memcpy(&dst[i], &bits, 4);
    }
  }
}

Result<MaskArrayInfo> read_npy_masks(const ReadFn& read, const std::string& src,
                                     const MaskSink& sink, size_t available) {
  auto hr = read_npy_header(read, src);
  if (!hr) return hr.error();
  const NpyHeader& h = *hr;
  if (!((h.kind == 'b' || h.kind == 'u') && h.item_bytes == 1))
    return input_error(src, "header", "mask dtype must be bool or uint8, got '" + h.descr + "'");
  if (h.fortran_order)
    return input_error(src, "header",
                       "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  MaskArrayInfo info;
  info.ndim = static_cast<int>(h.shape.size());
  if (info.ndim < 3 || info.ndim > 5)
    return input_error(src, "header",
                       "mask shape must be [H,Qb,Kb], [L,H,Qb,Kb] or [S,L,H,Qb,Kb], got " +
                           std::to_string(info.ndim) + " dimensions");
  const auto& s = h.shape;
  const size_t n = s.size();
  for (int64_t d : s)
    if (d < 1) return input_error(src, "header", "mask shape has an empty dimension");
  if (s[n - 1] > kMaxMaskSide || s[n - 2] > kMaxMaskSide || s[n - 3] > 65536 ||
      (n >= 4 && s[n - 4] > 100000) || (n == 5 && s[0] > 100000))
    return input_error(src, "header", "mask shape too large");
  info.cols = static_cast<int>(s[n - 1]);
  info.rows = static_cast<int>(s[n - 2]);
  info.heads = static_cast<int>(s[n - 3]);
  info.layers = n >= 4 ? static_cast<int>(s[n - 4]) : 1;
  info.steps = n == 5 ? static_cast<int>(s[0]) : 1;
  const size_t expect = static_cast<size_t>(h.elements());
  if (available != SIZE_MAX && available - std::min(available, h.header_bytes) < expect)
    return input_error(
        src, "data",
        "truncated: " + std::to_string(available - std::min(available, h.header_bytes)) +
            " data bytes, shape needs " + std::to_string(expect));
  std::vector<uint8_t> row(static_cast<size_t>(info.cols));
  size_t consumed = 0;
  for (int st = 0; st < info.steps; ++st)
    for (int l = 0; l < info.layers; ++l)
      for (int hd = 0; hd < info.heads; ++hd) {
        BlockMask m(info.rows, info.cols);
        for (int q = 0; q < info.rows; ++q) {
          const size_t got = read_full(read, row.data(), row.size());
          consumed += got;
          if (got < row.size())
            return input_error(src, "data",
                               "truncated: data ends after " + std::to_string(consumed) + " of " +
                                   std::to_string(expect) + " bytes");
          uint64_t* w = m.row(q);
          for (int k = 0; k < info.cols; ++k) {
            const uint8_t v = row[static_cast<size_t>(k)];
            if (v > 1) {
              std::string place = "[";
              if (n == 5) place += "S=" + std::to_string(st) + ",";
              if (n >= 4) place += "L=" + std::to_string(l) + ",";
              place += "H=" + std::to_string(hd) + ",Qb=" + std::to_string(q) +
                       ",Kb=" + std::to_string(k) + "]";
              return input_error(src, place, "mask value " + std::to_string(v) + " is not 0 or 1");
            }
            w[k >> 6] |= uint64_t{v} << (k & 63);
          }
        }
        auto st2 = sink(st, l, hd, std::move(m));
        if (!st2) return st2.error();
      }
  uint8_t extra;
  if (read(&extra, 1) != 0)
    return input_error(src, "data",
                       "trailing bytes after " + std::to_string(expect) + " data bytes");
  return info;
}

Result<MaskArrayInfo> parse_npy_masks(const uint8_t* data, size_t size, const std::string& src,
                                      const MaskSink& sink) {
  size_t pos = 0;
  ReadFn read = [&](void* buf, size_t n) {
    const size_t k = std::min(n, size - pos);
    std::memcpy(buf, data + pos, k);
    pos += k;
    return k;
  };
  return read_npy_masks(read, src, sink, size);
}

}  // namespace sparsp::patterns
