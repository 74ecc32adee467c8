#pragma once
// Expected content of every payload byte (private to replay/). Used on the host (host backend,
// host-side checks) and on the device (replay/cuda_backend.cu), hence the macro below.
//
// A block region's 32-bit word w carries mix(layer, block, head, owner, w), with head = the head
// the word belongs to (the block is laid out head-major: heads equal slices of bytes_per_head).
// An opaque payload (a transfer that is not a whole number of KV blocks) uses
// item = kOpaqueItem | transfer index and head 0. Byte i of a region is byte (i % 4) of word i / 4,
// little-endian, so tails shorter than a word are covered too.
#include <cstdint>

#if defined(__CUDACC__)
#define SPARSP_HD __host__ __device__ __forceinline__
#else
#define SPARSP_HD inline
#endif

namespace sparsp::replay::detail {

inline constexpr uint32_t kOpaqueItem = 0x80000000u;
inline constexpr uint32_t kPoisonByte = 0xA5u;

struct ContentKey {
  uint32_t layer = 0;           ///< plan layer index (LayerPlan position)
  uint32_t item = 0;            ///< block id, or kOpaqueItem | transfer index
  uint32_t owner = 0;           ///< owner rank of the block / source holder of the opaque payload
  uint32_t heads = 1;           ///< heads the region is split into (>= 1)
  uint64_t bytes_per_head = 0;  ///< 0: one head
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

SPARSP_HD uint32_t content_word(const ContentKey& k, uint64_t word) {
  uint32_t head = 0;
  if (k.bytes_per_head > 0) {
    const uint64_t h = (word * 4) / k.bytes_per_head;
    head = static_cast<uint32_t>(h < k.heads ? h : k.heads - 1);
  }
  uint32_t x = mix32(k.layer * 0x9e3779b1u ^ k.item);
  x = mix32(x ^ (head * 0x7feb352du) ^ (k.owner << 24));
  x = mix32(x ^ static_cast<uint32_t>(word) ^ static_cast<uint32_t>(word >> 32) * 0x846ca68bu);
  // Never the poison pattern, so a poisoned word can never pass.
  return x == 0xA5A5A5A5u ? 0x5A5A5A5Au : x;
}

SPARSP_HD uint8_t content_byte(const ContentKey& k, uint64_t i) {
  return static_cast<uint8_t>(content_word(k, i / 4) >> (8 * (i % 4)));
}

}  // namespace sparsp::replay::detail
