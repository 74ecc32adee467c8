// Pattern statistics, union over heads, db-SP sparse imbalance ratio and per-GPU KV demand.
#include <algorithm>
#include <bit>
#include <map>

#include "pattern_impl.hpp"

namespace sparsp::patterns {
namespace {

// Masks of the word positions whose bit b is set: sum of set-bit positions of w is
// sum_b 2^b * popcount(w & kPosBit[b]).
constexpr uint64_t kPosBit[6] = {0xAAAAAAAAAAAAAAAAull, 0xCCCCCCCCCCCCCCCCull,
                                 0xF0F0F0F0F0F0F0F0ull, 0xFF00FF00FF00FF00ull,
                                 0xFFFF0000FFFF0000ull, 0xFFFFFFFF00000000ull};

inline int64_t pos_sum(uint64_t w) {
  int64_t s = 0;
  for (int b = 0; b < 6; ++b) s += (int64_t{1} << b) * popcount64(w & kPosBit[b]);
  return s;
}

struct HeadCounts {
  int64_t all = 0, video = 0;
  double dist_sum = 0;
};

struct LayerCounts {
  std::vector<HeadCounts> heads;
  int64_t union_count = 0;
};

// Sum over set bits k in [lo, hi) of |k - q| and their count, for one row.
void row_distance(const uint64_t* row, int lo, int hi, int q, double& sum, int64_t& cnt) {
  for (int w = lo >> 6; w <= (hi - 1) >> 6; ++w) {
    uint64_t bits = row[w];
    const int base = w << 6;
    if (base < lo) bits &= ~uint64_t{0} << (lo - base);
    if (base + 64 > hi)
      bits &= (hi - base) >= 64 ? ~uint64_t{0} : ((uint64_t{1} << (hi - base)) - 1);
    if (!bits) continue;
    // Split the word at q: positions < q and >= q.
    uint64_t below = 0, above = bits;
    if (q >= base + 64) {
      below = bits;
      above = 0;
    } else if (q > base) {
      const uint64_t m = (uint64_t{1} << (q - base)) - 1;
      below = bits & m;
      above = bits & ~m;
    }
    const int nb = popcount64(below), na = popcount64(above);
    const int64_t sb = pos_sum(below) + int64_t{base} * nb;  // sum of k for k < q
    const int64_t sa = pos_sum(above) + int64_t{base} * na;  // sum of k for k >= q
    sum += static_cast<double>(int64_t{q} * nb - sb + sa - int64_t{q} * na);
    cnt += nb + na;
  }
}

LayerCounts count_layer(Pattern& p, int step, int layer) {
  const BlockLayout& L = p.layout();
  const int nb = L.num_blocks, v0 = L.first_video_block, v1 = v0 + L.num_video_blocks;
  LayerCounts lc;
  lc.heads.resize(static_cast<size_t>(p.heads()));
  BlockMask u(nb, nb);
  for (int h = 0; h < p.heads(); ++h) {
    const BlockMask& m = p.mask(step, layer, h);
    HeadCounts& hc = lc.heads[static_cast<size_t>(h)];
    hc.all = m.count();
    int64_t vcnt = 0;
    double dsum = 0;
    for (int q = v0; q < v1; ++q) row_distance(m.row(q), v0, v1, q, dsum, vcnt);
    hc.video = vcnt;
    hc.dist_sum = dsum;
    u.or_with(m);
  }
  lc.union_count = u.count();
  return lc;
}

}  // namespace

BlockMask union_mask(Pattern& p, int step, int layer) {
  const int nb = p.layout().num_blocks;
  BlockMask u(nb, nb);
  for (int h = 0; h < p.heads(); ++h) u.or_with(p.mask(step, layer, h));
  return u;
}

std::vector<int> active_kv_counts(const BlockMask& m) {
  std::vector<int> c(static_cast<size_t>(m.rows()));
  for (int q = 0; q < m.rows(); ++q) c[static_cast<size_t>(q)] = m.row_count(q);
  return c;
}

Result<PatternStats> compute_stats(Pattern& p, const StatsOptions& opt) {
  PatternStats st;
  const BlockLayout& L = p.layout();
  st.steps = opt.max_steps > 0 ? std::min(opt.max_steps, p.steps()) : p.steps();
  st.layers = p.layers();
  st.heads = p.heads();
  st.num_blocks = L.num_blocks;
  st.num_video_blocks = L.num_video_blocks;
  const double all_pairs = static_cast<double>(L.num_blocks) * L.num_blocks;
  const double video_pairs = static_cast<double>(L.num_video_blocks) * L.num_video_blocks;
  st.step_density.assign(static_cast<size_t>(st.steps), 0);
  st.layer_density.assign(static_cast<size_t>(st.layers), 0);
  st.head_density.assign(static_cast<size_t>(st.heads), 0);
  if (opt.per_layer_head)
    st.layer_head_density.assign(static_cast<size_t>(st.layers) * st.heads, 0);
  std::map<int64_t, LayerCounts> cache;
  double sum_all = 0, sum_video = 0, sum_union = 0, dist_sum = 0, dist_cnt = 0;
  for (int s = 0; s < st.steps; ++s) {
    for (int l = 0; l < st.layers; ++l) {
      const int64_t g = p.mask_group(s, l);
      auto it = cache.find(g);
      if (it == cache.end()) it = cache.emplace(g, count_layer(p, s, l)).first;
      const LayerCounts& lc = it->second;
      for (int h = 0; h < st.heads; ++h) {
        const HeadCounts& hc = lc.heads[static_cast<size_t>(h)];
        const double d = static_cast<double>(hc.all) / all_pairs;
        sum_all += d;
        if (video_pairs > 0) sum_video += static_cast<double>(hc.video) / video_pairs;
        st.step_density[static_cast<size_t>(s)] += d;
        st.layer_density[static_cast<size_t>(l)] += d;
        st.head_density[static_cast<size_t>(h)] += d;
        if (opt.per_layer_head) st.layer_head_density[static_cast<size_t>(l) * st.heads + h] += d;
        dist_sum += hc.dist_sum;
        dist_cnt += static_cast<double>(hc.video);
      }
      sum_union += static_cast<double>(lc.union_count) / all_pairs;
    }
  }
  const double n = static_cast<double>(st.steps) * st.layers * st.heads;
  st.density = sum_all / n;
  st.video_density = sum_video / n;
  st.union_density = sum_union / (static_cast<double>(st.steps) * st.layers);
  st.mean_kv_blocks = st.density * L.num_blocks;
  st.mean_block_distance = dist_cnt > 0 ? dist_sum / dist_cnt : 0;
  for (auto& d : st.step_density) d /= static_cast<double>(st.layers) * st.heads;
  for (auto& d : st.layer_density) d /= static_cast<double>(st.steps) * st.heads;
  for (auto& d : st.head_density) d /= static_cast<double>(st.steps) * st.layers;
  for (auto& d : st.layer_head_density) d /= st.steps;
  st.distinct_groups = static_cast<int64_t>(cache.size());
  return st;
}

double sparse_imbalance_ratio(Pattern& p, int step, int layer, const std::vector<int>& head_group,
                              int head_groups, const std::vector<int>& block_group,
                              int block_groups) {
  std::vector<double> work(static_cast<size_t>(head_groups) * block_groups, 0);
  for (int h = 0; h < p.heads(); ++h) {
    const BlockMask& m = p.mask(step, layer, h);
    const size_t gh = static_cast<size_t>(head_group[static_cast<size_t>(h)]);
    for (int q = 0; q < m.rows(); ++q)
      work[gh * block_groups + static_cast<size_t>(block_group[static_cast<size_t>(q)])] +=
          m.row_count(q);
  }
  double mx = 0, sum = 0;
  for (double w : work) {
    mx = std::max(mx, w);
    sum += w;
  }
  if (sum <= 0) return 1.0;
  return mx / (sum / static_cast<double>(work.size()));
}

Result<KvDemand> kv_demand(Pattern& p, int step, int layer, const DemandOptions& o) {
  const BlockLayout& L = p.layout();
  const int P = o.gpus, nb = L.num_blocks;
  if (P < 1) return input_error("<demand>", "gpus", "need at least one GPU");
  if (static_cast<int>(o.block_owner.size()) != nb)
    return input_error("<demand>", "block_owner",
                       "has " + std::to_string(o.block_owner.size()) + " entries, expected " +
                           std::to_string(nb) + " blocks");
  for (int b = 0; b < nb; ++b)
    if (o.block_owner[static_cast<size_t>(b)] < 0 || o.block_owner[static_cast<size_t>(b)] >= P)
      return input_error("<demand>", "block_owner[" + std::to_string(b) + "]",
                         "GPU " + std::to_string(o.block_owner[static_cast<size_t>(b)]) +
                             " out of range 0.." + std::to_string(P - 1));
  const ModelSpec& m = p.model();
  const double bph = o.bytes_per_block_head > 0 ? o.bytes_per_block_head
                                                : 2.0 * L.block_tokens * m.head_dim * m.dtype_bytes;
  std::vector<double> weight(static_cast<size_t>(nb));
  for (int b = 0; b < nb; ++b)
    weight[static_cast<size_t>(b)] =
        bph * L.tokens_in_block[static_cast<size_t>(b)] / static_cast<double>(L.block_tokens);
  KvDemand d;
  d.gpus = P;
  d.bytes.assign(static_cast<size_t>(P) * P, 0);
  const int wpr = (nb + 63) / 64;
  // heads_needed[i * nb + k]: heads for which GPU i needs KV block k.
  std::vector<int32_t> heads_needed(static_cast<size_t>(P) * nb, 0);
  std::vector<uint64_t> need(static_cast<size_t>(P) * wpr);
  auto accumulate = [&](int add) {
    for (int i = 0; i < P; ++i) {
      const uint64_t* row = need.data() + static_cast<size_t>(i) * wpr;
      for (int w = 0; w < wpr; ++w)
        for (uint64_t bits = row[w]; bits; bits &= bits - 1) {
          const int k = (w << 6) + std::countr_zero(bits);
          heads_needed[static_cast<size_t>(i) * nb + k] += add;
        }
    }
  };
  auto or_rows = [&](const BlockMask& mk) {
    std::fill(need.begin(), need.end(), 0);
    for (int q = 0; q < nb; ++q) {
      uint64_t* dst =
          need.data() + static_cast<size_t>(o.block_owner[static_cast<size_t>(q)]) * wpr;
      const uint64_t* src = mk.row(q);
      for (int w = 0; w < wpr; ++w) dst[w] |= src[w];
    }
  };
  if (o.granularity == DemandGranularity::block) {
    or_rows(union_mask(p, step, layer));
    accumulate(p.heads());
  } else {
    for (int h = 0; h < p.heads(); ++h) {
      or_rows(p.mask(step, layer, h));
      accumulate(1);
    }
  }
  if (o.list_blocks) {
    d.blocks.assign(static_cast<size_t>(P) * P, {});
    d.block_heads.assign(static_cast<size_t>(P) * P, {});
  }
  for (int i = 0; i < P; ++i)
    for (int k = 0; k < nb; ++k) {
      const int32_t hn = heads_needed[static_cast<size_t>(i) * nb + k];
      const int j = o.block_owner[static_cast<size_t>(k)];
      if (hn == 0 || j == i) continue;
      d.bytes[static_cast<size_t>(i) * P + j] += weight[static_cast<size_t>(k)] * hn;
      if (o.list_blocks) {
        d.blocks[static_cast<size_t>(i) * P + j].push_back(k);
        d.block_heads[static_cast<size_t>(i) * P + j].push_back(hn);
      }
    }
  return d;
}

Result<std::vector<double>> demand_matrix(Pattern& p, int step, int layer,
                                          const std::vector<int>& block_owner, int gpus,
                                          DemandGranularity granularity,
                                          double bytes_per_block_head) {
  DemandOptions o;
  o.gpus = gpus;
  o.block_owner = block_owner;
  o.granularity = granularity;
  o.bytes_per_block_head = bytes_per_block_head;
  auto r = kv_demand(p, step, layer, o);
  if (!r) return r.error();
  return std::move(r->bytes);
}

}  // namespace sparsp::patterns
