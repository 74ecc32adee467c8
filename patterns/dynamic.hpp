#pragma once
// Lazily generated patterns (private).
#include <array>
#include <cmath>
#include <mutex>

#include "generators.hpp"

namespace sparsp::patterns {

/// Independent Bernoulli(density) bits per (layer, head), the same for every step.
class RandomPattern final : public LazyPattern {
 public:
  RandomPattern(ModelSpec m, BlockLayout l, int steps, int layers, double density, uint64_t seed);
  std::string describe() const override;

 protected:
  void generate(int step, int layer, std::vector<BlockMask>& out) override;
  bool parallel_generate() const override { return true; }  ///< reads only const members

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
  /// Scratch is per call and the candidates are built once under a once_flag.
  bool parallel_generate() const override { return true; }

 private:
  static constexpr int kMetricVariants = 8;
  struct Candidates {              ///< step-independent, per metric variant
    std::vector<uint32_t> offset;  ///< [nv + 1] CSR row offsets into `group`
    std::vector<uint32_t> mid;     ///< [nv] end of the groups that can reach tau
    std::vector<uint32_t> group;   ///< candidate column groups g (columns 4g .. 4g + 3)
    std::vector<float> base;       ///< [4 per group] noise-free scores (-inf past the last)
    std::vector<float> tau;        ///< [nv] likely lower bound of the k-th best noisy score
    std::vector<float> tau_hi;     ///< [nv] likely upper bound of it (+inf: none)
  };
  std::array<float, 3> metric(int variant) const;
  /// The candidates of a metric variant, built on first use (thread-safe).
  const Candidates& candidates(int variant);
  void build_candidates(int variant, Candidates& c) const;
  void generate_cdf(const std::vector<int>& variant, const std::vector<uint64_t>& head_base,
                    std::vector<BlockMask>& out) const;
  void generate_topk(const std::vector<int>& variant, const std::vector<uint64_t>& head_base,
                     std::vector<BlockMask>& out);
  float base_score(int q, int k, const std::array<float, 3>& inv) const {
    const size_t a = static_cast<size_t>(q), b = static_cast<size_t>(k);
    return -(std::fabs(ct_[a] - ct_[b]) * inv[0] + std::fabs(ch_[a] - ch_[b]) * inv[1] +
             std::fabs(cw_[a] - cw_[b]) * inv[2]);
  }
  bool cdf_;
  int topk_;
  double threshold_, noise_, length_;
  uint64_t seed_;
  bool text_dense_;
  std::array<float, 3> extent_{};
  std::vector<float> ct_, ch_, cw_;  ///< block centres, structure of arrays
  std::vector<int> rows_;            ///< video block ids
  std::vector<Candidates> cand_;     ///< [kMetricVariants], built on first use
  std::array<std::once_flag, kMetricVariants> cand_once_;  ///< guards cand_[v]'s build
};

}  // namespace sparsp::patterns
