// Host-side parts of the sparsp attention kernel (attention.cuh): layout checks, FLOP count,
// tolerance and comparison. Builds without CUDA, so CPU-only CI tests them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "attention.cuh"

namespace sparsp::replay::attention {

float BlockSparseLayout::scale() const {
  return softmax_scale != 0.0f ? softmax_scale : 1.0f / std::sqrt(float(head_dim));
}

bool head_dim_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

namespace {

Status check_offsets(const std::vector<int32_t>& off, const std::string& name,
                     const std::string& key) {
  if (off.size() < 2) return input_error(name, "/" + key, "needs at least 2 entries (one block)");
  if (off[0] != 0) return input_error(name, "/" + key + "/0", "must be 0");
  for (size_t i = 1; i < off.size(); ++i)
    if (off[i] <= off[i - 1])
      return input_error(name, "/" + key + "/" + std::to_string(i),
                         "offsets must rise strictly (" + std::to_string(off[i - 1]) + " then " +
                             std::to_string(off[i]) + ")");
  return Ok{};
}

}  // namespace

Status check_layout(const BlockSparseLayout& l, const std::string& name) {
  if (!head_dim_supported(l.head_dim))
    return input_error(name, "/head_dim",
                       "head_dim " + std::to_string(l.head_dim) +
                           " is not supported by the sparsp attention kernel (64, 128)");
  if (l.heads < 1) return input_error(name, "/heads", "must be at least 1");
  if (!(l.scale() > 0.0f) || !std::isfinite(l.scale()))
    return input_error(name, "/softmax_scale", "must be finite and positive (or 0 for default)");
  if (auto s = check_offsets(l.q_block_offsets, name, "q_block_offsets"); !s) return s;
  if (auto s = check_offsets(l.kv_block_offsets, name, "kv_block_offsets"); !s) return s;
  const size_t rows = size_t(l.per_head ? l.heads : 1) * size_t(l.n_q_blocks());
  if (l.row_ptr.size() != rows + 1)
    return input_error(name, "/row_ptr",
                       "has " + std::to_string(l.row_ptr.size()) + " entries, expected " +
                           std::to_string(rows + 1));
  if (l.row_ptr[0] != 0) return input_error(name, "/row_ptr/0", "must be 0");
  for (size_t r = 1; r <= rows; ++r)
    if (l.row_ptr[r] < l.row_ptr[r - 1])
      return input_error(name, "/row_ptr/" + std::to_string(r), "must not decrease");
  if (size_t(l.row_ptr[rows]) != l.kv_blocks.size())
    return input_error(name, "/kv_blocks",
                       "has " + std::to_string(l.kv_blocks.size()) + " entries, row_ptr ends at " +
                           std::to_string(l.row_ptr[rows]));
  const int nkv = l.n_kv_blocks();
  for (size_t r = 0; r < rows; ++r) {
    std::set<int32_t> seen;
    for (int32_t i = l.row_ptr[r]; i < l.row_ptr[r + 1]; ++i) {
      const int32_t b = l.kv_blocks[size_t(i)];
      if (b < 0 || b >= nkv)
        return input_error(
            name, "/kv_blocks/" + std::to_string(i),
            "KV block " + std::to_string(b) + " out of range (" + std::to_string(nkv) + " blocks)");
      if (!seen.insert(b).second)
        return input_error(
            name, "/kv_blocks/" + std::to_string(i),
            "KV block " + std::to_string(b) + " repeated in the list of row " + std::to_string(r));
    }
  }
  if (l.kv_group < 1) return input_error(name, "/kv_group", "must be at least 1");
  if (l.head0 < 0) return input_error(name, "/head0", "must not be negative");
  if (!l.kv_block_base.empty() &&
      (l.kv_block_base.size() != size_t(nkv) || l.kv_head_stride.size() != size_t(nkv)))
    return input_error(
        name, "/kv_block_base",
        "paged K/V tables need one entry per KV block (" + std::to_string(nkv) + ")");
  return Ok{};
}

namespace {
// K and V rows of KV token j (global in the layout) of KV head g, for paged or contiguous K/V.
struct KvRows {
  const uint16_t* k;
  const uint16_t* v;
};
KvRows kv_rows(const BlockSparseLayout& l, const uint16_t* k, const uint16_t* v, int g, int b,
               int j) {
  const int D = l.head_dim;
  const int s = l.kv_block_offsets[size_t(b)], e = l.kv_block_offsets[size_t(b) + 1];
  if (!l.kv_block_base.empty()) {
    const uint16_t* kb = k + l.kv_block_base[size_t(b)] + int64_t(g) * l.kv_head_stride[size_t(b)];
    return {kb + size_t(j - s) * D, kb + size_t(e - s + j - s) * D};
  }
  const size_t row = size_t(g) * size_t(l.kv_tokens()) + size_t(j);
  return {k + row * D, v + row * D};
}
}  // namespace

void attention_forward_host(const BlockSparseLayout& l, const uint16_t* q, const uint16_t* k,
                            const uint16_t* v, uint16_t* o, float* lse) {
  const int D = l.head_dim, nq = l.n_q_blocks(), qt = l.q_tokens();
  const float scale = l.scale();
  std::vector<float> qv(static_cast<size_t>(D)), acc(static_cast<size_t>(D)), sc;
  for (int h = 0; h < l.heads; ++h) {
    const int g = (l.head0 + h) / std::max(1, l.kv_group);
    for (int qb = 0; qb < nq; ++qb) {
      const size_t r = size_t(l.per_head ? h * nq + qb : qb);
      for (int t = l.q_block_offsets[size_t(qb)]; t < l.q_block_offsets[size_t(qb) + 1]; ++t) {
        const size_t row = size_t(h) * size_t(qt) + size_t(t);
        for (int d = 0; d < D; ++d) qv[size_t(d)] = bf16_to_float(q[row * D + size_t(d)]);
        std::fill(acc.begin(), acc.end(), 0.0f);
        float m = -std::numeric_limits<float>::infinity(), sum = 0.0f;
        // Online softmax, one KV block at a time (FlashAttention's recurrence), P in bf16 before
        // P V as the GPU kernel rounds it.
        for (int32_t i = l.row_ptr[r]; i < l.row_ptr[r + 1]; ++i) {
          const int b = l.kv_blocks[size_t(i)];
          const int s = l.kv_block_offsets[size_t(b)], e = l.kv_block_offsets[size_t(b) + 1];
          sc.assign(size_t(e - s), 0.0f);
          float mb = -std::numeric_limits<float>::infinity();
          for (int j = s; j < e; ++j) {
            const KvRows kr = kv_rows(l, k, v, g, b, j);
            float dot = 0.0f;
            for (int d = 0; d < D; ++d) dot += qv[size_t(d)] * bf16_to_float(kr.k[d]);
            sc[size_t(j - s)] = dot * scale;
            mb = std::max(mb, dot * scale);
          }
          const float mn = std::max(m, mb);
          const float alpha = std::exp(m - mn);
          sum *= alpha;
          for (float& a : acc) a *= alpha;
          for (int j = s; j < e; ++j) {
            const float pj = std::exp(sc[size_t(j - s)] - mn);
            sum += pj;
            const float pr = bf16_to_float(float_to_bf16(pj));
            const KvRows kr = kv_rows(l, k, v, g, b, j);
            for (int d = 0; d < D; ++d) acc[size_t(d)] += pr * bf16_to_float(kr.v[d]);
          }
          m = mn;
        }
        for (int d = 0; d < D; ++d)
          o[row * D + size_t(d)] = float_to_bf16(sum > 0.0f ? acc[size_t(d)] / sum : 0.0f);
        lse[row] = sum > 0.0f ? m + std::log(sum) : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

void attention_reference_host(const BlockSparseLayout& l, const uint16_t* q, const uint16_t* k,
                              const uint16_t* v, float* o_ref, float* lse_ref,
                              const std::vector<int>& q_blocks) {
  const int D = l.head_dim, nq = l.n_q_blocks(), qt = l.q_tokens();
  const double scale = l.scale();
  std::vector<int> blocks = q_blocks;
  if (blocks.empty())
    for (int qb = 0; qb < nq; ++qb) blocks.push_back(qb);
  std::vector<double> sc, acc(static_cast<size_t>(D));
  for (int h = 0; h < l.heads; ++h) {
    const int g = (l.head0 + h) / std::max(1, l.kv_group);
    for (int qb : blocks) {
      const size_t r = size_t(l.per_head ? h * nq + qb : qb);
      for (int t = l.q_block_offsets[size_t(qb)]; t < l.q_block_offsets[size_t(qb) + 1]; ++t) {
        const size_t row = size_t(h) * size_t(qt) + size_t(t);
        sc.clear();
        double mx = -std::numeric_limits<double>::infinity();
        for (int32_t i = l.row_ptr[r]; i < l.row_ptr[r + 1]; ++i) {
          const int b = l.kv_blocks[size_t(i)];
          for (int j = l.kv_block_offsets[size_t(b)]; j < l.kv_block_offsets[size_t(b) + 1]; ++j) {
            const KvRows kr = kv_rows(l, k, v, g, b, j);
            double dot = 0;
            for (int d = 0; d < D; ++d)
              dot += double(bf16_to_float(q[row * D + size_t(d)])) * bf16_to_float(kr.k[d]);
            sc.push_back(dot * scale);
            mx = std::max(mx, dot * scale);
          }
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        size_t n = 0;
        for (int32_t i = l.row_ptr[r]; i < l.row_ptr[r + 1]; ++i) {
          const int b = l.kv_blocks[size_t(i)];
          for (int j = l.kv_block_offsets[size_t(b)]; j < l.kv_block_offsets[size_t(b) + 1]; ++j) {
            const double p = std::exp(sc[n++] - mx);
            sum += p;
            const KvRows kr = kv_rows(l, k, v, g, b, j);
            for (int d = 0; d < D; ++d) acc[size_t(d)] += p * bf16_to_float(kr.v[d]);
          }
        }
        for (int d = 0; d < D; ++d)
          o_ref[row * D + size_t(d)] = sum > 0 ? float(acc[size_t(d)] / sum) : 0.0f;
        lse_ref[row] =
            sum > 0 ? float(mx + std::log(sum)) : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

double active_flops(const BlockSparseLayout& l) {
  double f = 0;
  const int nq = l.n_q_blocks();
  for (int h = 0; h < (l.per_head ? l.heads : 1); ++h)
    for (int qb = 0; qb < nq; ++qb) {
      const size_t r = size_t(h) * size_t(nq) + size_t(qb);
      const double bq = l.q_block_offsets[size_t(qb) + 1] - l.q_block_offsets[size_t(qb)];
      double bk = 0;
      for (int32_t i = l.row_ptr[r]; i < l.row_ptr[r + 1]; ++i) {
        const int32_t b = l.kv_blocks[size_t(i)];
        bk += l.kv_block_offsets[size_t(b) + 1] - l.kv_block_offsets[size_t(b)];
      }
      f += 4.0 * bq * bk * l.head_dim;
    }
  return l.per_head ? f : f * l.heads;
}

std::string to_string(const KernelConfig& c) {
  return "w" + std::to_string(c.warps) + "_m" + std::to_string(16 * c.m_tiles * c.warps) + "_n" +
         std::to_string(c.kv_tile) + "_b" + std::to_string(c.min_blocks) + "_s" +
         std::to_string(c.stages);
}

Tolerance derive_tolerance(int head_dim, double scale, double max_abs_q, double max_abs_k,
                           double max_abs_v) {
  const double u2 = std::ldexp(1.0, -7);  // 2u, u = 2^-8 (bf16)
  const double ds =
      2.0 * head_dim * std::ldexp(1.0, -24) * scale * head_dim * max_abs_q * max_abs_k;
  return Tolerance{u2 * max_abs_v + 2.0 * ds * max_abs_v, ds};
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

CheckResult compare_with_reference(int heads, int q_tokens, int head_dim,
                                   const std::vector<uint16_t>& o, const std::vector<float>& lse,
                                   const std::vector<float>& o_ref,
                                   const std::vector<float>& lse_ref, const Tolerance& tol,
                                   const std::vector<int>& rows) {
  CheckResult c;
  std::vector<int> all;
  const std::vector<int>* rs = &rows;
  if (rows.empty()) {
    all.resize(size_t(q_tokens));
    for (int t = 0; t < q_tokens; ++t) all[size_t(t)] = t;
    rs = &all;
  }
  double worst = -1;
  const double inf = std::numeric_limits<double>::infinity();
  for (int h = 0; h < heads; ++h)
    for (int t : *rs) {
      ++c.checked_rows;
      const size_t row = size_t(h) * size_t(q_tokens) + size_t(t);
      const double lr = lse_ref[row], lk = lse[row];
      bool row_bad = false;
      if (lr == -inf) {
        if (lk != -inf) row_bad = true;
      } else if (!std::isfinite(lk)) {
        ++c.unwritten;
        row_bad = true;
      } else {
        const double e = std::fabs(lk - lr);
        c.max_lse_error = std::max(c.max_lse_error, e);
        if (e > tol.lse_abs_base + std::ldexp(1.0, -20) * (1 + std::fabs(lr))) row_bad = true;
      }
      for (int d = 0; d < head_dim; ++d) {
        const size_t i = row * size_t(head_dim) + size_t(d);
        const double x = bf16_to_float(o[i]);
        const double r = lr == -inf ? 0.0 : double(o_ref[i]);
        if (!std::isfinite(x)) {
          ++c.unwritten;
          row_bad = true;
          continue;
        }
        const double e = std::fabs(x - r);
        if (e > worst) {
          worst = e;
          c.worst_head = h;
          c.worst_token = t;
        }
        c.max_abs_error = std::max(c.max_abs_error, e);
        if (e > tol.output_abs) row_bad = true;
      }
      if (row_bad) ++c.bad;
    }
  return c;
}

}  // namespace sparsp::replay::attention
