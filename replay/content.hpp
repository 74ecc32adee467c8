#pragma once
// Expected content of every payload byte (private to replay/). Used on the host (host backend,
// host-side checks) and on the device (replay/cuda_backend.cu), hence the macro below.
//
// A block region's 32-bit word w carries mix(layer, block, head, owner, w), with head = the head
// the word belongs to (the block is laid out head-major: heads equal slices of bytes_per_head).
// An opaque payload (a transfer that is not a whole number of KV blocks) uses
// item = kOpaqueItem | transfer index and head 0. Byte i of a region is byte (i % 4) of word i / 4,
// little-endian, so tails shorter than a word are covered too.
//
// Every word is two finite bf16 values (bf16_pair), so a KV block is also real attention input:
// its head slice g (KV head g; bytes_per_head = 2 * tokens * head_dim * 2) holds
// K[tokens][head_dim] then V[tokens][head_dim], row-major bf16, element e of the slice in half (e %
// 2) of its word.
#include <cstdint>

#if defined(__CUDACC__)
#define SPARSP_HD __host__ __device__ __forceinline__
#else
#define SPARSP_HD inline
#endif

namespace sparsp::replay::detail {

inline constexpr uint32_t kOpaqueItem = 0x80000000u;
/// Item tag of a query block's Q (item = kQueryItem | block): never transferred, generated where
/// it is used (the rank's Q buffer, the reference).
inline constexpr uint32_t kQueryItem = 0x40000000u;
inline constexpr uint32_t kPoisonByte = 0xA5u;

struct ContentKey {
  uint32_t layer = 0;           ///< plan layer index (LayerPlan position)
  uint32_t item = 0;            ///< block id, or kOpaqueItem | transfer index
  uint32_t owner = 0;           ///< owner rank of the block / source holder of the opaque payload
  uint32_t heads = 1;           ///< heads the region is split into (>= 1)
  uint64_t bytes_per_head = 0;  ///< 0: one head
  /// Word of the item's content at the region's first byte: 0 for a whole item; a region that
  /// holds only some of a block's KV heads (a Ulysses head group: KV heads [g0, g1)) starts at
  /// word g0 * bytes_per_head / 4, so its words are the same as the whole block's.
  uint64_t word0 = 0;
};

/// 32-bit finaliser of MurmurHash3 (Appleby, public domain) over a combined key.
SPARSP_HD uint32_t mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/// Maps 16 hash bits to a finite bf16 of magnitude in [2^-3, 2): sign from bit 15, mantissa from
/// bits 0-6, biased exponent 124 + bits 7-8 (124..127). So every payload word is two valid bf16
/// values (K, V and Q of the real-compute replay read them as such) and never the poison pattern
/// (0xA5A5's exponent field is 75).
SPARSP_HD uint32_t bf16_of_bits(uint32_t h) {
  return (h & 0x807Fu) | ((124u + ((h >> 7) & 3u)) << 7);
}
SPARSP_HD uint32_t bf16_pair(uint32_t x) {
  return bf16_of_bits(x & 0xFFFFu) | (bf16_of_bits(x >> 16) << 16);
}

/// Bound of |value| of every content element (bf16_of_bits): below 2.
inline constexpr double kContentMaxAbs = 2.0;

SPARSP_HD uint32_t content_word(const ContentKey& k, uint64_t word) {
  word += k.word0;
  uint32_t head = 0;
  if (k.bytes_per_head > 0) {
    const uint64_t h = (word * 4) / k.bytes_per_head;
    head = static_cast<uint32_t>(h < k.heads ? h : k.heads - 1);
  }
  uint32_t x = mix32(k.layer * 0x9e3779b1u ^ k.item);
  x = mix32(x ^ (head * 0x7feb352du) ^ (k.owner << 24));
  x = mix32(x ^ static_cast<uint32_t>(word) ^ static_cast<uint32_t>(word >> 32) * 0x846ca68bu);
  return bf16_pair(x);
}

/// Element `elem` of a region read as bf16 (16-bit pattern): half (elem % 2) of word elem / 2.
SPARSP_HD uint16_t content_bf16(const ContentKey& k, uint64_t elem) {
  return static_cast<uint16_t>(content_word(k, elem / 2) >> (16 * (elem % 2)));
}

SPARSP_HD uint8_t content_byte(const ContentKey& k, uint64_t i) {
  return static_cast<uint8_t>(content_word(k, i / 4) >> (8 * (i % 4)));
}

}  // namespace sparsp::replay::detail
