// block_graph(): the block dependency graph of a pattern that the placements partition
// (BlockGraph, include/sparsp/policy.hpp).
#include <algorithm>
#include <cmath>
#include <set>

#include "sparsp/policy.hpp"

namespace sparsp::policy {

BlockGraph block_graph(patterns::Pattern& pattern, int max_layers) {
  const auto& layout = pattern.layout();
  const auto& model = pattern.model();
  BlockGraph g;
  const int n = layout.num_blocks;
  g.num_blocks = n;
  g.tokens.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k)
    g.tokens[static_cast<size_t>(k)] = layout.tokens_in_block[static_cast<size_t>(k)];
  g.work.assign(static_cast<size_t>(n), 0.0);
  std::vector<uint32_t> cnt(static_cast<size_t>(n) * n, 0);
  std::set<int64_t> seen;
  int used = 0;
  for (int l = 0; l < pattern.layers() && used < max_layers; ++l) {
    if (!seen.insert(pattern.mask_group(0, l)).second) continue;
    ++used;
    for (int h = 0; h < pattern.heads(); ++h) {
      const auto& m = pattern.mask(0, l, h);
      for (int q = 0; q < n; ++q) {
        // Text query rows (dense) are split across the ranks by the demand schemes, so they
        // create no dependency on where their KV blocks live.
        if (layout.is_text(q)) continue;
        const uint64_t* row = m.row(q);
        double tk = 0;
        for (int w = 0; w < m.words_per_row(); ++w) {
          uint64_t x = row[w];
          while (x) {
            const int k = w * 64 + std::countr_zero(x);
            x &= x - 1;
            cnt[static_cast<size_t>(q) * n + k]++;
            tk += g.tokens[static_cast<size_t>(k)];
          }
        }
        g.work[static_cast<size_t>(q)] +=
            4.0 * g.tokens[static_cast<size_t>(q)] * tk * model.head_dim;
      }
    }
  }
  const double samples = std::max(1, used) * std::max(1, pattern.heads());
  g.dep.resize(cnt.size());
  for (size_t i = 0; i < cnt.size(); ++i) g.dep[i] = static_cast<float>(cnt[i] / samples);
  for (auto& w : g.work) w /= std::max(1, used);
  return g;
}

}  // namespace sparsp::policy
