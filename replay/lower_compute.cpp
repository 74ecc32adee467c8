// Lowering of a plan's attention tasks for real compute (exec_plan.hpp: AttnWork, RankQueries).
// Each attention task of rank r covers (query block q, KV block k, head h) with owner(q) = r,
// owner(k) in the task's kv_ranks, h in its head range and (q, k) in the layer's mask
// (policy/PLAN.md "Compute kinds"); its KV is read in place from r's KV slots, which the plan's
// transfers fill (or r owns).
#include "lower_compute.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace sparsp::replay::detail {

namespace {
uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Region query_region(int rank, const RankQueries& rq, int i, int head, int li, int head_dim) {
  const auto& qoff = rq.reference.q_block_offsets;
  const uint64_t qt = static_cast<uint64_t>(qoff.back());
  const int b = rq.blocks[static_cast<size_t>(i)];
  Region q{rank,
           rq.q_offset + (head * qt + static_cast<uint64_t>(qoff[static_cast<size_t>(i)])) *
                             static_cast<uint64_t>(head_dim) * 2,
           static_cast<uint64_t>(qoff[static_cast<size_t>(i) + 1] - qoff[static_cast<size_t>(i)]) *
               static_cast<uint64_t>(head_dim) * 2,
           {},
           b,
           -1,
           true};
  // Q's key: item kQueryItem | block, and the head in the owner field.
  q.key = ContentKey{static_cast<uint32_t>(li), kQueryItem | static_cast<uint32_t>(b),
                     static_cast<uint32_t>(head), 1, 0};
  return q;
}

std::string real_compute_obstacle(const policy::Plan& plan, const ReplayOptions& opt) {
  // GEMMs and copies need nothing from the plan but their shapes; attention needs the rest.
  bool attention_tasks = false;
  for (size_t li = 0; li < plan.layers.size(); ++li)
    for (size_t ci = 0; ci < plan.layers[li].work.compute.size(); ++ci) {
      const auto& w = plan.layers[li].work.compute[ci].what;
      const std::string at =
          opt.plan_source + ":/layers/" + std::to_string(li) + "/compute/" + std::to_string(ci);
      attention_tasks = attention_tasks || w.kind == sim::TaskKind::attention;
      if (w.kind == sim::TaskKind::gemm && (w.m < 1 || w.n < 1 || w.k < 1 || w.count < 1))
        return at + ": a gemm task needs m, n, k and count, each at least 1 (got m " +
               std::to_string(w.m) + ", n " + std::to_string(w.n) + ", k " + std::to_string(w.k) +
               ", count " + std::to_string(w.count) + ")";
      constexpr int64_t kIntMax = 2147483647;  // cuBLAS takes int dimensions
      if (w.kind == sim::TaskKind::gemm && (w.m > kIntMax || w.n > kIntMax || w.k > kIntMax))
        return at + ": a gemm dimension above 2^31 - 1 (the CUDA backend's cuBLAS takes int)";
      if (w.kind == sim::TaskKind::copy && !(w.bytes >= 2))
        return at + ": a copy task needs bytes >= 2 (read + written), got " +
               std::to_string(static_cast<long long>(w.bytes));
    }
  if (!attention_tasks) return {};
  if (opt.payload_scale < 1)
    return "--payload-scale below 1 shrinks the KV blocks, so there is no attention input";
  if (!attention::head_dim_supported(plan.head_dim))
    return "head_dim " + std::to_string(plan.head_dim) +
           " is not supported by the sparsp attention kernel (64, 128)";
  if (plan.dtype_bytes != 2)
    return "dtype_bytes " + std::to_string(plan.dtype_bytes) + " (the kernel computes in bf16)";
  if (plan.heads < 1) return "the plan has no heads";
  const int kvh = plan.kv_heads_or_heads();
  if (plan.heads % kvh != 0) return "kv_heads does not divide heads";
  // The block shape must give the block's bytes (policy/PLAN.md kv_block_bytes: K and V of
  // block_tokens tokens, kv_heads heads of head_dim elements): else the kernel would read the
  // blocks with another head_dim or dtype than they were sized for.
  if (plan.block_tokens > 0) {
    const double shape_bytes = 2.0 * plan.block_tokens * kvh * plan.head_dim * plan.dtype_bytes;
    if (std::abs(shape_bytes - plan.kv_block_bytes) > 0.5) {
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "%s:/kv_block_bytes: %.15g bytes, but the block shape gives 2 x %d tokens x "
                    "%d kv_heads x head_dim %d x dtype_bytes %d = %.15g",
                    opt.plan_source.c_str(), plan.kv_block_bytes, plan.block_tokens, kvh,
                    plan.head_dim, plan.dtype_bytes, shape_bytes);
      return buf;
    }
  }
  for (size_t li = 0; li < plan.layers.size(); ++li) {
    const auto& L = plan.layers[li];
    if (L.mask.empty())
      return "the plan has no mask at /layers/" + std::to_string(li) +
             "/mask (plans written before masks were recorded, or made by hand)";
    for (size_t ci = 0; ci < L.work.compute.size(); ++ci) {
      const auto& c = L.work.compute[ci];
      if (c.what.kind != sim::TaskKind::attention) continue;
      const int r = holder_of(c.gpu, plan);
      const std::string at = "/layers/" + std::to_string(li) + "/compute/" + std::to_string(ci);
      if (!(c.what.q_ranks.empty() || (c.what.q_ranks.size() == 1 && c.what.q_ranks[0] == r)) &&
          !ulysses_plan(plan))
        return "compute task " + at +
               " attends for other ranks' queries (Ulysses head groups), which real compute "
               "runs for ulysses and usp plans only (their all-to-alls carry the Q, K and V)";
      if (c.what.kv_ranks.empty())
        return "compute task " + at + " does not say which ranks' KV it reads (kv_ranks)";
    }
  }
  for (size_t li = 0; li < plan.layers.size() && ulysses_plan(plan); ++li)
    if (const auto g = ulysses_ranks(plan, li); !g)
      return opt.plan_source + ":" + g.error().message;
  return {};
}

bool ulysses_plan(const policy::Plan& plan) {
  return plan.policy.scheme == "ulysses" || plan.policy.scheme == "usp";
}

Result<std::vector<UlyssesRank>> ulysses_ranks(const policy::Plan& plan, size_t li) {
  std::vector<UlyssesRank> ranks(static_cast<size_t>(plan.gpus));
  const auto& cps = plan.layers[li].work.compute;
  for (size_t ci = 0; ci < cps.size(); ++ci) {
    const auto& c = cps[ci];
    if (c.what.kind != sim::TaskKind::attention) continue;
    const int r = holder_of(c.gpu, plan);
    if (r < 0 || r >= plan.gpus) continue;
    UlyssesRank u;
    u.head_begin = c.what.head_end > c.what.head_begin ? c.what.head_begin : 0;
    u.head_end = c.what.head_end > c.what.head_begin ? c.what.head_end : plan.heads;
    u.q_ranks = c.what.q_ranks.empty() ? std::vector<int>{r} : c.what.q_ranks;
    std::sort(u.q_ranks.begin(), u.q_ranks.end());
    UlyssesRank& x = ranks[static_cast<size_t>(r)];
    if (x.head_end == 0) {
      x = u;
    } else if (x.head_begin != u.head_begin || x.head_end != u.head_end || x.q_ranks != u.q_ranks) {
      return Error{"/layers/" + std::to_string(li) + "/compute/" + std::to_string(ci) + ": gpu" +
                       std::to_string(r) +
                       "'s attention tasks cover different heads or query ranks; a Ulysses "
                       "rank computes one head group of one sequence group",
                   2};
    }
  }
  return ranks;
}

Status lower_attention(const policy::Plan& plan, const ReplayOptions& opt, int li,
                       const std::vector<double>& block_bytes, const SlotFn& slot_of,
                       const AllocFn& alloc, ExecLayer& el, ExecPlan& ex) {
  const policy::LayerPlan& L = plan.layers[static_cast<size_t>(li)];
  const int P = plan.gpus, H = plan.heads, D = plan.head_dim, nb = plan.num_blocks;
  const int kvh = plan.kv_heads_or_heads();
  const double per_token = 2.0 * kvh * D * plan.dtype_bytes;
  const std::string where = "plan:/layers/" + std::to_string(li);
  // Tokens per block, from its bytes.
  std::vector<int32_t> tokens(static_cast<size_t>(nb));
  el.block_token_offsets.assign(static_cast<size_t>(nb) + 1, 0);
  for (int b = 0; b < nb; ++b) {
    const double t = block_bytes[static_cast<size_t>(b)] / per_token;
    if (!(t >= 1) || std::abs(t - std::round(t)) > 1e-9)
      return Error{"replay: --compute real: block " + std::to_string(b) + " holds " +
                       std::to_string(block_bytes[static_cast<size_t>(b)]) +
                       " bytes, not a whole number of tokens of " + std::to_string(per_token) +
                       " bytes (2 x kv_heads x head_dim x dtype_bytes)",
                   2};
    tokens[static_cast<size_t>(b)] = static_cast<int32_t>(std::lround(t));
    el.block_token_offsets[static_cast<size_t>(b) + 1] =
        el.block_token_offsets[static_cast<size_t>(b)] + tokens[static_cast<size_t>(b)];
  }
  el.block_keys.resize(static_cast<size_t>(nb));
  for (int b = 0; b < nb; ++b) {
    const uint64_t bb = static_cast<uint64_t>(std::llround(block_bytes[static_cast<size_t>(b)]));
    el.block_keys[static_cast<size_t>(b)] =
        ContentKey{static_cast<uint32_t>(li), static_cast<uint32_t>(b),
                   static_cast<uint32_t>(plan.block_owner[static_cast<size_t>(b)]),
                   static_cast<uint32_t>(kvh), kvh > 1 ? bb / static_cast<uint64_t>(kvh) : 0};
  }
  // Where each (query block, KV block) pair is computed. At the query block's owner r when r
  // holds the KV block (owns it, or a transfer of this layer plan delivers it); otherwise at the
  // KV block's owner o when q is one of the plan's text_blocks and the plan sends o's partial
  // output for r's queries back (a "text_out" message o -> r: demand schemes compute a text
  // block's rows, which read every KV block, where the KV lives, policy/demand.cpp). Else at r
  // regardless: its slot is never filled and the checks fail (a plan that does not deliver what
  // attention reads).
  const auto owner_of = [&](int b) { return plan.block_owner[static_cast<size_t>(b)]; };
  std::set<std::pair<int, int>> delivered;    // (rank, block)
  std::set<std::pair<int, int>> text_return;  // (kv owner o, query owner r)
  for (const Activity& a : el.acts) {
    if (a.kind != ActKind::transfer || a.dst < 0 || a.dst >= P) continue;
    for (int b : a.transfer->kv_blocks) delivered.insert({a.dst, b});
    if (a.src >= 0 && a.src < P && a.transfer->id.find("text_out") != std::string::npos)
      text_return.insert({a.src, a.dst});
  }
  std::vector<char> is_text(static_cast<size_t>(nb), 0);
  for (int b : plan.text_blocks) is_text[static_cast<size_t>(b)] = 1;
  const auto computed_at = [&](int q, int k) {
    const int r = owner_of(q), o = owner_of(k);
    if (r == o || delivered.count({r, k})) return r;
    return is_text[static_cast<size_t>(q)] && text_return.count({o, r}) ? o : r;
  };
  // Ulysses / USP: rank r computes its head group's rows of its sequence group's query blocks
  // (the q_ranks of its attention tasks); their Q arrives by the all-to-all (lower.cpp).
  std::vector<UlyssesRank> uly;
  if (ulysses_plan(plan)) {
    auto g = ulysses_ranks(plan, static_cast<size_t>(li));
    if (!g) return Error{opt.plan_source + ":" + g.error().message, 2};
    uly = std::move(*g);
  }
  // Queries: every rank's own blocks, ascending, then the other ranks' blocks it computes rows
  // of (a text block's Q is generated here too; a Ulysses group's Q is delivered); Q regions
  // per (head, block).
  el.queries.assign(static_cast<size_t>(P), RankQueries{});
  for (int b = 0; b < nb; ++b) el.queries[static_cast<size_t>(owner_of(b))].blocks.push_back(b);
  for (int r = 0; r < P; ++r)
    el.queries[static_cast<size_t>(r)].own_blocks =
        static_cast<int>(el.queries[static_cast<size_t>(r)].blocks.size());
  {
    std::vector<std::set<int>> foreign(static_cast<size_t>(P));
    for (int q = 0; q < nb; ++q)
      for (int h = 0; h < (L.mask.per_head ? H : 1); ++h) {
        auto [first, last] = L.mask.row(q, h, nb);
        for (const int32_t* k = first; k != last; ++k) {
          const int at = computed_at(q, *k);
          if (at != owner_of(q)) foreign[static_cast<size_t>(at)].insert(q);
        }
      }
    for (int r = 0; r < P && !uly.empty(); ++r)
      for (int q = 0; q < nb; ++q) {
        const auto& qr = uly[static_cast<size_t>(r)].q_ranks;
        if (owner_of(q) != r && std::binary_search(qr.begin(), qr.end(), owner_of(q)))
          foreign[static_cast<size_t>(r)].insert(q);
      }
    for (int r = 0; r < P; ++r)
      for (int q : foreign[static_cast<size_t>(r)])
        el.queries[static_cast<size_t>(r)].blocks.push_back(q);
  }
  for (int r = 0; r < P; ++r) {
    RankQueries& rq = el.queries[static_cast<size_t>(r)];
    std::vector<int32_t> qoff{0};
    for (int b : rq.blocks) qoff.push_back(qoff.back() + tokens[static_cast<size_t>(b)]);
    const uint64_t qt = static_cast<uint64_t>(qoff.back());
    rq.q_bytes = align_up(static_cast<uint64_t>(H) * qt * D * 2);
    rq.q_offset = alloc(r, rq.q_bytes);
    rq.reference.q_block_offsets = qoff;
    for (int h = 0; h < H; ++h)
      for (size_t i = 0; i < rq.blocks.size(); ++i) {
        const int b = rq.blocks[i];
        if (!uly.empty() && owner_of(b) != r) continue;  // delivered (lower.cpp)
        el.fills.push_back(query_region(r, rq, static_cast<int>(i), h, li, D));
      }
    // The reference: these query blocks against all KV blocks (contiguous original K/V).
    attention::BlockSparseLayout& ref = rq.reference;
    ref.heads = H;
    ref.head_dim = D;
    ref.kv_group = H / kvh;
    ref.kv_block_offsets = el.block_token_offsets;
    ref.per_head = L.mask.per_head;
    ref.row_ptr.push_back(0);
    for (int h = 0; h < (L.mask.per_head ? H : 1); ++h)
      for (int b : rq.blocks) {
        auto [first, last] = L.mask.row(b, h, nb);
        ref.kv_blocks.insert(ref.kv_blocks.end(), first, last);
        ref.row_ptr.push_back(static_cast<int32_t>(ref.kv_blocks.size()));
      }
    // Checked query blocks: first, middle, last, and every one reading the corrupted block (of
    // the rank's own; the other ranks' blocks computed here are added below).
    std::set<int> check;
    const int n = rq.own_blocks;
    if (opt.check_all) {
      for (int i = 0; i < n; ++i) check.insert(i);
    } else if (n > 0) {
      check = {0, n / 2, n - 1};
      if (opt.corrupt_block >= 0)
        for (int i = 0; i < n; ++i) {
          if (rq.blocks[static_cast<size_t>(i)] == opt.corrupt_block) check.insert(i);  // its Q
          for (int h = 0; h < (L.mask.per_head ? H : 1); ++h) {
            auto [first, last] = L.mask.row(rq.blocks[static_cast<size_t>(i)], h, nb);
            if (std::binary_search(first, last, opt.corrupt_block)) check.insert(i);
          }
        }
    }
    rq.check_blocks.assign(check.begin(), check.end());
  }
  // A checked query block's rows computed on another rank are read there too (the merge).
  for (int r = 0; r < P; ++r) {
    RankQueries& rq = el.queries[static_cast<size_t>(r)];
    for (size_t i = static_cast<size_t>(rq.own_blocks); i < rq.blocks.size(); ++i) {
      const RankQueries& oq = el.queries[static_cast<size_t>(owner_of(rq.blocks[i]))];
      for (int c : oq.check_blocks)
        if (oq.blocks[static_cast<size_t>(c)] == rq.blocks[i])
          rq.check_blocks.push_back(static_cast<int>(i));
    }
  }
  // Attention works.
  el.attn_of_act.assign(el.acts.size(), -1);
  for (size_t ai = 0; ai < el.acts.size(); ++ai) {
    const Activity& a = el.acts[ai];
    if (a.kind != ActKind::compute || a.compute->what.kind != sim::TaskKind::attention) continue;
    const sim::TaskCompute& w = a.compute->what;
    const int r = a.src;
    RankQueries& rq = el.queries[static_cast<size_t>(r)];
    AttnWork aw;
    aw.act = static_cast<int>(ai);
    aw.rank = r;
    aw.head_begin = w.head_end > w.head_begin ? w.head_begin : 0;
    aw.head_end = w.head_end > w.head_begin ? w.head_end : H;
    if (aw.head_begin < 0 || aw.head_end > H)
      return Error{where + "/compute/" + std::to_string(a.index) + ": head range [" +
                       std::to_string(aw.head_begin) + ", " + std::to_string(aw.head_end) +
                       ") outside the plan's " + std::to_string(H) + " heads",
                   2};
    const std::set<int> kv_ranks(w.kv_ranks.begin(), w.kv_ranks.end());
    // A Ulysses task computes exactly its triples (policy/PLAN.md): its q_ranks' rows.
    const bool group_task = !(w.q_ranks.empty() || (w.q_ranks.size() == 1 && w.q_ranks[0] == r));
    const std::set<int> q_ranks(w.q_ranks.begin(), w.q_ranks.end());
    const int th = aw.head_end - aw.head_begin;
    attention::BlockSparseLayout& l = aw.layout;
    l.heads = th;
    l.head_dim = D;
    l.head0 = aw.head_begin;
    l.kv_group = H / kvh;
    l.q_block_offsets = rq.reference.q_block_offsets;
    l.per_head = L.mask.per_head;
    l.kv_block_offsets.push_back(0);
    std::map<int, int> index_of;  // plan block -> layout KV block
    l.row_ptr.push_back(0);
    for (int hl = 0; hl < (L.mask.per_head ? th : 1); ++hl)
      for (int b : rq.blocks) {
        auto [first, last] = L.mask.row(b, aw.head_begin + hl, nb);
        if (group_task && !q_ranks.count(owner_of(b))) first = last;
        for (const int32_t* k = first; k != last; ++k) {
          if (!kv_ranks.count(plan.block_owner[static_cast<size_t>(*k)])) continue;
          if (!group_task && computed_at(b, *k) != r) continue;
          auto [it, fresh] = index_of.try_emplace(*k, static_cast<int>(aw.kv_block_ids.size()));
          if (fresh) {
            aw.kv_block_ids.push_back(*k);
            l.kv_block_offsets.push_back(l.kv_block_offsets.back() +
                                         tokens[static_cast<size_t>(*k)]);
            const uint64_t off = slot_of(r, *k);  // bytes, 256-aligned
            l.kv_block_base.push_back(static_cast<int64_t>(off / 2));
            l.kv_head_stride.push_back(2LL * tokens[static_cast<size_t>(*k)] * D);
          }
          l.kv_blocks.push_back(it->second);
        }
        l.row_ptr.push_back(static_cast<int32_t>(l.kv_blocks.size()));
      }
    if (aw.kv_block_ids.empty()) {  // nothing to attend to: a valid, empty work
      l.kv_block_offsets.push_back(1);
      l.kv_block_base.push_back(0);
      l.kv_head_stride.push_back(0);
    }
    aw.flops = attention::active_flops(l);
    const uint64_t qt = static_cast<uint64_t>(l.q_tokens());
    aw.q_offset = rq.q_offset + static_cast<uint64_t>(aw.head_begin) * qt * D * 2;
    aw.o_offset = rq.out_bytes;
    rq.out_bytes += align_up(static_cast<uint64_t>(th) * qt * D * 2);
    aw.lse_offset = rq.out_bytes;
    rq.out_bytes += align_up(static_cast<uint64_t>(th) * qt * 4);
    el.attn_of_act[ai] = static_cast<int>(el.attn.size());
    el.attn.push_back(std::move(aw));
  }
  for (int r = 0; r < P; ++r) {
    ex.max_q_bytes[static_cast<size_t>(r)] = std::max(ex.max_q_bytes[static_cast<size_t>(r)],
                                                      el.queries[static_cast<size_t>(r)].q_bytes);
    ex.max_out_bytes[static_cast<size_t>(r)] = std::max(
        ex.max_out_bytes[static_cast<size_t>(r)], el.queries[static_cast<size_t>(r)].out_bytes);
  }
  ex.max_reference_kv_bytes =
      std::max(ex.max_reference_kv_bytes, static_cast<uint64_t>(2ull * 2ull * kvh * D) *
                                              static_cast<uint64_t>(el.block_token_offsets.back()));
  return Ok{};
}

Status lower_ulysses_transfers(const policy::Plan& plan, const ReplayOptions& opt, int li,
                               const std::vector<char>& structured,
                               const std::map<std::string, int>& index_of, const SlotFn& slot_of,
                               ExecLayer& el, Received& received) {
  const policy::LayerPlan& L = plan.layers[static_cast<size_t>(li)];
  const int P = plan.gpus, H = plan.heads, D = plan.head_dim, nb = plan.num_blocks;
  const int G = H / plan.kv_heads_or_heads();  // query heads per KV head
  auto uly = ulysses_ranks(plan, static_cast<size_t>(li));
  if (!uly) return Error{opt.plan_source + ":" + uly.error().message, 2};
  const auto owner_of = [&](int b) { return plan.block_owner[static_cast<size_t>(b)]; };
  const auto tokens = [&](int b) {
    return static_cast<uint64_t>(el.block_token_offsets[static_cast<size_t>(b) + 1] -
                                 el.block_token_offsets[static_cast<size_t>(b)]);
  };
  // Position of each block in each rank's Q array.
  std::vector<std::map<int, int>> q_index(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r)
    for (size_t i = 0; i < el.queries[static_cast<size_t>(r)].blocks.size(); ++i)
      q_index[static_cast<size_t>(r)][el.queries[static_cast<size_t>(r)].blocks[i]] =
          static_cast<int>(i);
  // The sequence group whose KV a ring step carries: the one its source received by the ring
  // step it waits for, else the source's own (USP: the shard it holds after the all-to-all).
  std::vector<std::vector<int>> shard(structured.size());
  const auto shard_of = [&](size_t i, auto&& self) -> const std::vector<int>& {
    if (!shard[i].empty()) return shard[i];
    const auto& t = L.work.transfers[i];
    const int src = holder_of(t.src, plan);
    for (const auto& id : t.after) {
      const auto it = index_of.find(id);
      if (it == index_of.end() || it->second >= static_cast<int>(structured.size())) continue;
      const size_t j = static_cast<size_t>(it->second);
      if (structured[j] == 2 && holder_of(L.work.transfers[j].dst, plan) == src)
        return shard[i] = self(j, self);
    }
    return shard[i] = (*uly)[static_cast<size_t>(src)].q_ranks;
  };
  for (size_t i = 0; i < structured.size(); ++i) {
    if (!structured[i]) continue;
    Activity& a = el.acts[i];
    const std::string at =
        opt.plan_source + ":/layers/" + std::to_string(li) + "/transfers/" + std::to_string(i);
    const UlyssesRank& to = (*uly)[static_cast<size_t>(a.dst)];
    if (to.head_end == 0)
      return Error{at + ": " + a.transfer->dst + " receives Q/K/V but computes no attention", 2};
    const int g0 = to.head_begin / G, g1 = (to.head_end - 1) / G + 1;  // its KV heads
    std::vector<int> from = structured[i] == 1 ? std::vector<int>{a.src} : shard_of(i, shard_of);
    std::vector<int> blocks;
    for (int b = 0; b < nb; ++b)
      if (std::find(from.begin(), from.end(), owner_of(b)) != from.end()) blocks.push_back(b);
    a.pieces.clear();
    // Q of the destination's heads for the source's query blocks (all-to-all in only).
    if (structured[i] == 1)
      for (int h = to.head_begin; h < to.head_end; ++h)
        for (int b : blocks) {
          const auto is = q_index[static_cast<size_t>(a.src)].find(b);
          const auto id = q_index[static_cast<size_t>(a.dst)].find(b);
          if (id == q_index[static_cast<size_t>(a.dst)].end())
            return Error{at + ": carries the queries of " + a.transfer->src + " to " +
                             a.transfer->dst +
                             ", whose attention tasks do not compute them "
                             "(q_ranks)",
                         2};
          const Region src =
              query_region(a.src, el.queries[static_cast<size_t>(a.src)], is->second, h, li, D);
          const Region dst =
              query_region(a.dst, el.queries[static_cast<size_t>(a.dst)], id->second, h, li, D);
          append_piece(a.pieces, {src.offset, dst.offset, dst.bytes});
          el.checks.push_back(dst);
          received.q.try_emplace({a.dst, b}, static_cast<int>(i));
        }
    // K and V of the destination's KV heads [g0, g1): a byte range of each block's slot.
    for (int b : blocks) {
      const uint64_t per_head = 2 * tokens(b) * static_cast<uint64_t>(D) * 2;
      if (a.src != owner_of(b)) {
        const auto it = received.kv_heads.find({a.src, b});
        if (it == received.kv_heads.end() || it->second.first > g0 || it->second.second < g1)
          return Error{at + ": " + a.transfer->src + " sends KV heads [" + std::to_string(g0) +
                           ", " + std::to_string(g1) + ") of block " + std::to_string(b) +
                           " but neither owns nor receives them before",
                       2};
      }
      append_piece(a.pieces, {slot_of(a.src, b) + g0 * per_head, slot_of(a.dst, b) + g0 * per_head,
                              (g1 - g0) * per_head});
      auto [it, fresh] = received.kv_heads.try_emplace({a.dst, b}, std::pair<int, int>{g0, g1});
      if (!fresh) it->second = {std::min(it->second.first, g0), std::max(it->second.second, g1)};
      received.kv.try_emplace({a.dst, b}, static_cast<int>(i));
    }
    a.bytes = 0;
    for (const Piece& p : a.pieces) a.bytes += p.bytes;
    if (std::abs(static_cast<double>(a.bytes) - a.transfer->bytes) > 1.0) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "/bytes: %.15g bytes, but the %s of heads [%d, %d) of %zu blocks it carries "
                    "hold %llu",
                    a.transfer->bytes, structured[i] == 1 ? "Q, K and V" : "K and V", to.head_begin,
                    to.head_end, blocks.size(), static_cast<unsigned long long>(a.bytes));
      return Error{at + buf, 2};
    }
  }
  return Ok{};
}

double ulysses_last_block_bytes(const policy::Plan& plan) {
  const int nb = plan.num_blocks, D = plan.head_dim, kvh = plan.kv_heads_or_heads();
  if (nb < 1 || plan.heads < 1 || D < 1 || plan.heads % kvh != 0) return 0;
  const int last = nb - 1, owner = plan.block_owner[static_cast<size_t>(last)];
  const double token_kv = 2.0 * kvh * D * plan.dtype_bytes;  // K and V of one token, all heads
  const double full_tokens = plan.kv_block_bytes / token_kv;
  const int G = plan.heads / kvh;
  for (size_t li = 0; li < plan.layers.size(); ++li) {
    const auto uly = ulysses_ranks(plan, li);
    if (!uly) return 0;
    for (const auto& t : plan.layers[li].work.transfers) {
      const int s = holder_of(t.src, plan), d = holder_of(t.dst, plan);
      if (!t.kv_blocks.empty() || s != owner || d < 0 || d >= plan.gpus) continue;
      const bool a2a = t.id.find(".a2a_qkv.") != std::string::npos;
      const bool ring = t.id.find(".ring.") != std::string::npos &&
                        std::none_of(t.after.begin(), t.after.end(), [](const std::string& id) {
                          return id.find(".ring.") != std::string::npos;
                        });  // a first ring step: the source's own sequence group
      const UlyssesRank& to = (*uly)[static_cast<size_t>(d)];
      if (!(a2a || ring) || to.head_end == 0) continue;
      const int kv_moved = (to.head_end - 1) / G + 1 - to.head_begin / G;
      const double per_token =
          ((a2a ? to.head_end - to.head_begin : 0) + 2.0 * kv_moved) * D * plan.dtype_bytes;
      const std::vector<int> from =
          a2a ? std::vector<int>{s} : (*uly)[static_cast<size_t>(s)].q_ranks;
      double tokens = 0;  // every carried block taken as full
      for (int b = 0; b < nb; ++b)
        if (std::find(from.begin(), from.end(), plan.block_owner[static_cast<size_t>(b)]) !=
            from.end())
          tokens += full_tokens;
      const double missing = tokens - t.bytes / per_token;
      if (missing > 0.5 && missing < full_tokens - 0.5)
        return (full_tokens - std::round(missing)) * token_kv;
      return 0;
    }
  }
  return 0;
}

}  // namespace sparsp::replay::detail
