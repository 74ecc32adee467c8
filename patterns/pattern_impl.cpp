// StoredPattern and LazyPattern.
#include "pattern_impl.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cassert>

namespace sparsp::patterns {

std::string join3(const std::array<int, 3>& v) {
  return std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]);
}

StoredPattern::StoredPattern(ModelSpec model, BlockLayout layout, int steps, int layers, int heads,
                             bool per_step, std::string description)
    : model_(std::move(model)),
      layout_(std::move(layout)),
      steps_(steps),
      layers_(layers),
      heads_(heads),
      per_step_(per_step),
      description_(std::move(description)),
      index_(static_cast<size_t>(per_step ? steps : 1) * layers * heads, 0) {}

int StoredPattern::intern(BlockMask mask) {
  const uint64_t h = mask.hash();
  auto [lo, hi] = by_hash_.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (masks_[static_cast<size_t>(it->second)] == mask) return it->second;
  const int id = static_cast<int>(masks_.size());
  masks_.push_back(std::move(mask));
  by_hash_.emplace(h, id);
  return id;
}

void StoredPattern::finalize() {
  const int rows = per_step_ ? steps_ : 1;
  groups_.assign(static_cast<size_t>(rows) * layers_, 0);
  std::map<std::vector<int>, int64_t> seen;  // ordered: ids in first-seen order, deterministic
  for (int s = 0; s < rows; ++s)
    for (int l = 0; l < layers_; ++l) {
      std::vector<int> key(index_.begin() + static_cast<ptrdiff_t>(slot(s, l, 0)),
                           index_.begin() + static_cast<ptrdiff_t>(slot(s, l, 0) + heads_));
      auto [it, inserted] = seen.emplace(std::move(key), static_cast<int64_t>(seen.size()));
      groups_[static_cast<size_t>(s) * layers_ + l] = it->second;
    }
}

LazyPattern::LazyPattern(ModelSpec model, BlockLayout layout, int steps, int layers, int heads,
                         bool step_invariant, std::string description)
    : model_(std::move(model)),
      layout_(std::move(layout)),
      steps_(steps),
      layers_(layers),
      heads_(heads),
      step_invariant_(step_invariant),
      description_(std::move(description)),
      cache_(static_cast<size_t>(layers)) {}

void LazyPattern::enter_step(int step) {
  if (step_invariant_ || step == current_step_) return;
  assert(step > current_step_ && "dynamic patterns: steps in non-decreasing order");
  // Drop the previous step's masks (at most one step is held).
  for (auto& l : cache_) l.clear();
  current_step_ = step;
}

void LazyPattern::fill(int step, int layer) {
  auto& slot = cache_[static_cast<size_t>(layer)];
  slot.assign(static_cast<size_t>(heads_), BlockMask(layout_.num_blocks, layout_.num_blocks));
  generate(step_invariant_ ? 0 : step, layer, slot);
}

const BlockMask& LazyPattern::mask(int step, int layer, int head) {
  assert(step >= 0 && step < steps_ && layer >= 0 && layer < layers_ && head >= 0 && head < heads_);
  enter_step(step);
  if (cache_[static_cast<size_t>(layer)].empty()) fill(step, layer);
  return cache_[static_cast<size_t>(layer)][static_cast<size_t>(head)];
}

void LazyPattern::prepare_step(int step, const std::vector<int>& layers) {
  assert(step >= 0 && step < steps_);
  enter_step(step);
  std::vector<int> todo;
  for (int l : layers) {
    assert(l >= 0 && l < layers_);
    if (cache_[static_cast<size_t>(l)].empty()) todo.push_back(l);
  }
  std::sort(todo.begin(), todo.end());
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  if (!parallel_generate()) {
    for (int l : todo) fill(step, l);
    return;
  }
  // Each layer writes only its own slot; the masks do not depend on the thread that made them.
  tbb::parallel_for(size_t{0}, todo.size(), [&](size_t i) { fill(step, todo[i]); });
}

int64_t LazyPattern::stored_masks() const {
  int64_t n = 0;
  for (const auto& l : cache_) n += static_cast<int64_t>(l.size());
  return n;
}

}  // namespace sparsp::patterns
