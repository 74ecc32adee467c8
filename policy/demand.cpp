// Demand and attention-work accounting of one (step, layer): which KV blocks each rank needs from
// each other rank, and how much attention work each (query group, key group, head group) holds.
// Bit-parallel over the 64-bit words of the block masks; irregular blocks (partial last blocks,
// text blocks) are weighted by their real token count.
#include "demand.hpp"

#include <algorithm>
#include <bit>
#include <cassert>

namespace sparsp::policy::detail {

double kv_block_bytes(const patterns::ModelSpec& m, const patterns::BlockLayout& l, int k) {
  return 2.0 * l.tokens_in_block[static_cast<size_t>(k)] * m.kv_heads_or_heads() * m.head_dim *
         m.dtype_bytes;
}

namespace {

int words_for(int n) { return (n + 63) / 64; }

// Bitsets of KV blocks per group, split into "regular" (full block_tokens) and an explicit list
// of irregular blocks with their token counts.
struct GroupSets {
  std::vector<BlockSet> regular;                               // [ngroups]
  std::vector<std::vector<std::pair<int, double>>> irregular;  // [ngroups] (block, tokens)
};

GroupSets group_sets(const patterns::BlockLayout& layout, const std::vector<int>& group, int n) {
  const int nb = layout.num_blocks;
  const int nw = words_for(nb);
  GroupSets s;
  s.regular.assign(static_cast<size_t>(n),
                   BlockSet{std::vector<uint64_t>(static_cast<size_t>(nw), 0), {}});
  s.irregular.resize(static_cast<size_t>(n));
  for (int k = 0; k < nb; ++k) {
    const int g = group[static_cast<size_t>(k)];
    if (g < 0) continue;
    if (layout.tokens_in_block[static_cast<size_t>(k)] == layout.block_tokens) {
      s.regular[static_cast<size_t>(g)].bits[static_cast<size_t>(k >> 6)] |= uint64_t{1}
                                                                             << (k & 63);
    } else {
      s.irregular[static_cast<size_t>(g)].push_back(
          {k, layout.tokens_in_block[static_cast<size_t>(k)]});
    }
  }
  for (auto& r : s.regular)
    for (int w = 0; w < nw; ++w)
      if (r.bits[static_cast<size_t>(w)]) r.words.push_back(w);
  return s;
}

// The token-weighted counts of grouped_flops: one body, compiled twice below (generic, and
// with the POPCNT instruction where the CPU has it: without -mpopcnt, std::popcount is a
// libgcc call, 8% of the dynamic top-k study's time in the 2026-12-03 profile).
#if defined(__GNUC__)
#define SPARSP_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define SPARSP_ALWAYS_INLINE inline
#endif
SPARSP_ALWAYS_INLINE void count_flops(const LayerInput& in, const std::vector<int>& q_group, int nq,
                                      const GroupSets& ks, int nk,
                                      const std::vector<int>& head_group,
                                      std::vector<double>& flops) {
  const auto& layout = *in.layout;
  const int nb = layout.num_blocks;
  const double hd = in.model->head_dim;
  const double bt = layout.block_tokens;
  for (size_t h = 0; h < in.masks.size(); ++h) {
    const auto& m = *in.masks[h];
    const int hg = head_group[h];
    if (hg < 0) continue;
    for (int q = 0; q < nb; ++q) {
      const int qg = q_group[static_cast<size_t>(q)];
      if (qg < 0) continue;
      const uint64_t* row = m.row(q);
      const double tq = layout.tokens_in_block[static_cast<size_t>(q)];
      double* out = &flops[(static_cast<size_t>(hg) * nq + qg) * nk];
      for (int g = 0; g < nk; ++g) {
        const auto& set = ks.regular[static_cast<size_t>(g)];
        int64_t cnt = 0;
        for (int w : set.words) cnt += std::popcount(row[w] & set.bits[static_cast<size_t>(w)]);
        double tk = bt * static_cast<double>(cnt);
        for (const auto& [k, t] : ks.irregular[static_cast<size_t>(g)])
          if ((row[k >> 6] >> (k & 63)) & 1u) tk += t;
        out[g] += 4.0 * tq * tk * hd;
      }
    }
  }
}

void count_flops_generic(const LayerInput& in, const std::vector<int>& q_group, int nq,
                         const GroupSets& ks, int nk, const std::vector<int>& head_group,
                         std::vector<double>& flops) {
  count_flops(in, q_group, nq, ks, nk, head_group, flops);
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__POPCNT__)
[[gnu::target("popcnt")]] void count_flops_popcnt(const LayerInput& in,
                                                  const std::vector<int>& q_group, int nq,
                                                  const GroupSets& ks, int nk,
                                                  const std::vector<int>& head_group,
                                                  std::vector<double>& flops) {
  count_flops(in, q_group, nq, ks, nk, head_group, flops);
}
// The same integer counts either way, so the same flops bit for bit.
bool have_popcnt() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("popcnt") != 0;
  }();
  return yes;
}
#endif

}  // namespace

std::vector<double> grouped_flops(const LayerInput& in, const std::vector<int>& q_group, int nq,
                                  const std::vector<int>& k_group, int nk,
                                  const std::vector<int>& head_group, int nh) {
  const auto& layout = *in.layout;
  const GroupSets ks = group_sets(layout, k_group, nk);
  std::vector<double> flops(static_cast<size_t>(nh) * nq * nk, 0.0);
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__POPCNT__)
  if (have_popcnt()) {
    count_flops_popcnt(in, q_group, nq, ks, nk, head_group, flops);
    return flops;
  }
#endif
  count_flops_generic(in, q_group, nq, ks, nk, head_group, flops);
  return flops;
}

Demand compute_demand(const LayerInput& in, bool split_text) {
  const auto& layout = *in.layout;
  const auto& owner = in.placement->block_owner;
  const int P = in.placement->ranks;
  const int nb = layout.num_blocks;
  const int nw = words_for(nb);
  const int H = static_cast<int>(in.masks.size());
  Demand d;
  d.ranks = P;
  const size_t PP = static_cast<size_t>(P) * P;
  d.bytes.assign(PP, 0.0);
  d.blocks.assign(PP, {});
  d.owned_blocks.assign(static_cast<size_t>(P), 0);
  d.owned_tokens.assign(static_cast<size_t>(P), 0.0);
  std::vector<std::vector<int>> q_of(static_cast<size_t>(P));
  for (int k = 0; k < nb; ++k) {
    const int o = owner[static_cast<size_t>(k)];
    if (!(split_text && layout.is_text(k))) q_of[static_cast<size_t>(o)].push_back(k);
    d.owned_blocks[static_cast<size_t>(o)]++;
    d.owned_tokens[static_cast<size_t>(o)] += layout.tokens_in_block[static_cast<size_t>(k)];
  }
  const double per_token_head = 2.0 * in.model->head_dim * in.model->dtype_bytes;  // K and V
  std::vector<uint64_t> uni(static_cast<size_t>(nw)), head(static_cast<size_t>(nw)),
      kv_need(static_cast<size_t>(nw));
  const int group = std::max(1, H / in.model->kv_heads_or_heads());  // query heads per KV head
  for (int g = 0; g < P; ++g) {
    std::fill(uni.begin(), uni.end(), 0);
    for (int h = 0; h < H; ++h) {
      const auto& m = *in.masks[static_cast<size_t>(h)];
      std::fill(head.begin(), head.end(), 0);
      for (int q : q_of[static_cast<size_t>(g)]) {
        const uint64_t* row = m.row(q);
        for (int w = 0; w < nw; ++w) head[static_cast<size_t>(w)] |= row[w];
      }
      for (int w = 0; w < nw; ++w) uni[static_cast<size_t>(w)] |= head[static_cast<size_t>(w)];
      if (in.granularity == Granularity::head_block) {
        if (d.head_need.empty()) d.head_need.assign(static_cast<size_t>(P), {});
        auto& hn = d.head_need[static_cast<size_t>(g)];
        if (hn.empty()) hn.assign(static_cast<size_t>(H) * nw, 0);
        std::copy(head.begin(), head.end(), hn.begin() + static_cast<ptrdiff_t>(h) * nw);
        // Grouped-query attention: query heads h of one group (h / group) read the same K and V
        // head, so a KV block is sent once per KV head that any of them needs.
        if (h % group == 0) std::fill(kv_need.begin(), kv_need.end(), 0);
        for (int w = 0; w < nw; ++w)
          kv_need[static_cast<size_t>(w)] |= head[static_cast<size_t>(w)];
        if (h % group != group - 1 && h != H - 1) continue;
        for (int w = 0; w < nw; ++w) {
          uint64_t x = kv_need[static_cast<size_t>(w)];
          while (x) {
            const int k = w * 64 + std::countr_zero(x);
            x &= x - 1;
            const int o = owner[static_cast<size_t>(k)];
            if (o == g) continue;
            d.bytes[static_cast<size_t>(g) * P + o] +=
                per_token_head * layout.tokens_in_block[static_cast<size_t>(k)];
          }
        }
      }
    }
    for (int w = 0; w < nw; ++w) {
      uint64_t x = uni[static_cast<size_t>(w)];
      while (x) {
        const int k = w * 64 + std::countr_zero(x);
        x &= x - 1;
        const int o = owner[static_cast<size_t>(k)];
        if (o == g) continue;
        d.blocks[static_cast<size_t>(g) * P + o].push_back(k);
        if (in.granularity == Granularity::block)
          d.bytes[static_cast<size_t>(g) * P + o] += kv_block_bytes(*in.model, layout, k);
      }
    }
  }
  std::vector<int> all_heads(static_cast<size_t>(H), 0);
  if (!split_text) {
    d.flops = grouped_flops(in, owner, P, owner, P, all_heads, 1);
    return d;
  }
  std::vector<int> video_q(owner);
  bool any_text = false;
  for (int k = 0; k < nb; ++k)
    if (layout.is_text(k)) {
      video_q[static_cast<size_t>(k)] = -1;
      any_text = true;
    }
  d.flops = grouped_flops(in, video_q, P, owner, P, all_heads, 1);
  if (!any_text) return d;
  // Each text block's rows, by KV owner: the work lands on the KV owner (local piece).
  const double partial_per_token =
      static_cast<double>(H) * (in.model->head_dim * in.model->dtype_bytes + 4.0);
  for (int t = 0; t < nb; ++t) {
    if (!layout.is_text(t)) continue;
    std::vector<int> qsel(static_cast<size_t>(nb), -1);
    qsel[static_cast<size_t>(t)] = 0;
    const auto f = grouped_flops(in, qsel, 1, owner, P, all_heads, 1);
    const int to = owner[static_cast<size_t>(t)];
    for (int o = 0; o < P; ++o) {
      if (f[static_cast<size_t>(o)] <= 0) continue;
      d.flops[static_cast<size_t>(o) * P + o] += f[static_cast<size_t>(o)];
      if (o != to)
        d.text_partials.push_back(
            {o, to, partial_per_token * layout.tokens_in_block[static_cast<size_t>(t)]});
    }
  }
  return d;
}

std::vector<int32_t> union_blocks(const Demand& d, int o, const std::vector<int>& requesters) {
  std::vector<int32_t> out;
  for (int g : requesters) {
    const auto& b = d.blocks[static_cast<size_t>(g) * d.ranks + o];
    out.insert(out.end(), b.begin(), b.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

double union_bytes(const LayerInput& in, const Demand& d, int o,
                   const std::vector<int>& requesters) {
  if (in.granularity == Granularity::block) return blocks_bytes(in, union_blocks(d, o, requesters));
  const auto& layout = *in.layout;
  const int nw = words_for(layout.num_blocks);
  const int H = static_cast<int>(in.masks.size());
  const double per_token_head = 2.0 * in.model->head_dim * in.model->dtype_bytes;
  const int group = std::max(1, H / in.model->kv_heads_or_heads());  // query heads per KV head
  double bytes = 0;
  for (int h0 = 0; h0 < H; h0 += group) {  // one KV head: the union over its query heads
    for (int w = 0; w < nw; ++w) {
      uint64_t x = 0;
      for (int h = h0; h < std::min(H, h0 + group); ++h)
        for (int g : requesters)
          x |= d.head_need[static_cast<size_t>(g)][static_cast<size_t>(h) * nw + w];
      while (x) {
        const int k = w * 64 + std::countr_zero(x);
        x &= x - 1;
        if (in.placement->block_owner[static_cast<size_t>(k)] != o) continue;
        bytes += per_token_head * layout.tokens_in_block[static_cast<size_t>(k)];
      }
    }
  }
  return bytes;
}

double blocks_bytes(const LayerInput& in, const std::vector<int32_t>& blocks) {
  double b = 0;
  for (int32_t k : blocks) b += kv_block_bytes(*in.model, *in.layout, k);
  return b;
}

}  // namespace sparsp::policy::detail
