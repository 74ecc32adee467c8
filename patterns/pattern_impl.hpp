#pragma once
// Private building blocks of the pattern sources.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "sparsp/pattern.hpp"

namespace sparsp::patterns {

/// Set bits of a word. Without -mpopcnt, std::popcount is a libgcc call (__popcountdi2); this is
/// the branch-free SWAR count (Hacker's Delight, 5-2) inline, or the instruction when available.
inline int popcount64(uint64_t x) {
#if defined(__POPCNT__)
  return __builtin_popcountll(x);
#else
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return static_cast<int>((x * 0x0101010101010101ull) >> 56);
#endif
}

/// splitmix64 finaliser: the counter-based hash behind all seeded randomness of this module.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// Uniform double in [0, 1) from a hash.
inline double unit_from(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

/// Sets bits [a, b) of a row.
inline void set_range(uint64_t* row, int a, int b) {
  while (a < b) {
    const int w = a >> 6, off = a & 63;
    const int n = std::min(64 - off, b - a);
    const uint64_t m = (n == 64) ? ~uint64_t{0} : (((uint64_t{1} << n) - 1) << off);
    row[w] |= m;
    a += n;
  }
}

/// Masks held in memory, deduplicated by content, addressed by an index over (step?, layer,
/// head). Static when the index does not depend on the step.
class StoredPattern final : public Pattern {
 public:
  StoredPattern(ModelSpec model, BlockLayout layout, int steps, int layers, int heads,
                bool per_step, std::string description);
  /// Adds a mask (or finds an identical one) and returns its id.
  int intern(BlockMask mask);
  /// REQUIRES: step == 0 unless per_step.
  void assign(int step, int layer, int head, int id) { index_[slot(step, layer, head)] = id; }
  /// Computes mask groups; call once after all assign() calls.
  void finalize();

  const ModelSpec& model() const override { return model_; }
  const BlockLayout& layout() const override { return layout_; }
  int steps() const override { return steps_; }
  int layers() const override { return layers_; }
  int heads() const override { return heads_; }
  const BlockMask& mask(int step, int layer, int head) override {
    return masks_[static_cast<size_t>(index_[slot(step, layer, head)])];
  }
  int64_t mask_group(int step, int layer) const override {
    return groups_[static_cast<size_t>((per_step_ ? step : 0) * layers_ + layer)];
  }
  std::string describe() const override { return description_; }
  bool is_static() const override { return !per_step_; }
  int64_t stored_masks() const override { return static_cast<int64_t>(masks_.size()); }
  bool per_step() const { return per_step_; }
  int mask_id(int step, int layer, int head) const { return index_[slot(step, layer, head)]; }
  const std::vector<BlockMask>& unique_masks() const { return masks_; }

 private:
  size_t slot(int step, int layer, int head) const {
    return (static_cast<size_t>(per_step_ ? step : 0) * layers_ + layer) * heads_ + head;
  }
  ModelSpec model_;
  BlockLayout layout_;
  int steps_, layers_, heads_;
  bool per_step_;
  std::string description_;
  std::vector<BlockMask> masks_;
  std::unordered_multimap<uint64_t, int> by_hash_;
  std::vector<int> index_;
  std::vector<int64_t> groups_;
};

/// Masks produced on demand by a generator, one step at a time: all masks of the current step
/// are kept (generated lazily layer by layer), earlier steps are dropped. Step-invariant
/// generators keep everything they generated.
class LazyPattern : public Pattern {
 public:
  LazyPattern(ModelSpec model, BlockLayout layout, int steps, int layers, int heads,
              bool step_invariant, std::string description);
  const ModelSpec& model() const override { return model_; }
  const BlockLayout& layout() const override { return layout_; }
  int steps() const override { return steps_; }
  int layers() const override { return layers_; }
  int heads() const override { return heads_; }
  const BlockMask& mask(int step, int layer, int head) override;
  /// Generates the missing layers of `step`, in parallel when parallel_generate().
  void prepare_step(int step, const std::vector<int>& layers) override;
  int64_t mask_group(int step, int layer) const override {
    return step_invariant_ ? layer : static_cast<int64_t>(step) * layers_ + layer;
  }
  std::string describe() const override { return description_; }
  bool is_static() const override { return step_invariant_; }
  int64_t stored_masks() const override;

 protected:
  /// Fills `out` (pre-sized Qb x Kb, all zero) with the masks of all heads of (step, layer).
  virtual void generate(int step, int layer, std::vector<BlockMask>& out) = 0;
  /// True when generate() may run for several layers at once (on different threads).
  virtual bool parallel_generate() const { return false; }
  ModelSpec model_;
  BlockLayout layout_;
  int steps_, layers_, heads_;

 private:
  bool step_invariant_;
  std::string description_;
  int current_step_ = -1;
  /// Drops the previous step's masks when `step` is a new one (dynamic patterns).
  void enter_step(int step);
  /// Generates (step, layer) into its empty cache slot.
  void fill(int step, int layer);
  std::vector<std::vector<BlockMask>> cache_;  ///< [layers][heads]; empty = not generated
};

std::string join3(const std::array<int, 3>& v);

}  // namespace sparsp::patterns
