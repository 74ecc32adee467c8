#pragma once
// Lazily generated patterns (private).
#include "generators.hpp"

namespace sparsp::patterns {

/// Independent Bernoulli(density) bits per (layer, head), the same for every step.
class RandomPattern final : public LazyPattern {
 public:
  RandomPattern(ModelSpec m, BlockLayout l, int steps, int layers, double density, uint64_t seed);
  std::string describe() const override;

 protected:
  void generate(int step, int layer, std::vector<BlockMask>& out) override;

 private:
  double density_;
  uint64_t seed_;
};

/// topk / cdf over a seeded synthetic block-score model that changes with the step.
class SyntheticScorePattern final : public LazyPattern {
 public:
  SyntheticScorePattern(ModelSpec m, BlockLayout l, int steps, int layers, bool cdf, int topk,
                        double threshold, double noise, double length, uint64_t seed,
                        bool text_dense);
  std::string describe() const override;

 protected:
  void generate(int step, int layer, std::vector<BlockMask>& out) override;

 private:
  bool cdf_;
  int topk_;
  double threshold_, noise_, length_;
  uint64_t seed_;
  bool text_dense_;
  std::array<float, 3> extent_{};
  std::vector<int> rows_;      ///< video block ids
  std::vector<float> scores_;  ///< [nv * nv] scratch
};

}  // namespace sparsp::patterns
