// Building blocks shared by the communication schemes (policy/scheme_parts.hpp), and the CommPlan
// byte counts.
#include "scheme_parts.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

namespace sparsp::policy {

double CommPlan::payload_bytes() const {
  double b = 0;
  for (const auto& m : messages)
    if (!m.control && m.counts_volume) b += m.bytes;
  return b;
}
double CommPlan::control_bytes() const {
  double b = 0;
  for (const auto& m : messages)
    if (m.control) b += m.bytes;
  return b;
}

namespace detail {

int add_msg(CommPlan& plan, Message m) {
  plan.messages.push_back(std::move(m));
  return static_cast<int>(plan.messages.size()) - 1;
}
int add_task(CommPlan& plan, AttentionTask t) {
  plan.tasks.push_back(std::move(t));
  return static_cast<int>(plan.tasks.size()) - 1;
}

void tag_alltoall(CommPlan& plan, const std::vector<int>& ids, int ranks,
                  sim::nccl::Collective op) {
  if (ranks < 2) return;
  std::map<int, double> sent;  // source rank -> bytes it sends among ids
  for (int id : ids)
    sent[plan.messages[static_cast<size_t>(id)].src] +=
        plan.messages[static_cast<size_t>(id)].bytes;
  for (int id : ids) {
    Message& m = plan.messages[static_cast<size_t>(id)];
    const double b = sent[m.src] * ranks / (ranks - 1.0);
    if (!(b > 0)) continue;
    m.nccl.set = true;
    m.nccl.op = op;
    m.nccl.ranks = ranks;
    m.nccl.bytes = b;
  }
}

// Local attention piece of every rank (its queries against its own KV blocks). Returns the task
// index per rank (-1 where there is no local work).
std::vector<int> add_local_tasks(CommPlan& plan, const Demand& d) {
  std::vector<int> idx(static_cast<size_t>(d.ranks), -1);
  for (int g = 0; g < d.ranks; ++g) {
    const double f = d.flops[static_cast<size_t>(g) * d.ranks + g];
    AttentionTask t{g, f, 0, {}, "local"};
    t.what.kv_ranks = {g};
    if (f > 0) idx[static_cast<size_t>(g)] = add_task(plan, std::move(t));
  }
  return idx;
}

// Partial text-query outputs back to the text owner, after the sender's local piece (which holds
// its text-query work).
void add_text_partials(CommPlan& plan, const Demand& d, const std::vector<int>& local,
                       bool staged) {
  for (const auto& p : d.text_partials) {
    Message m;
    m.src = p.from;
    m.dst = p.to;
    m.bytes = p.bytes;
    m.host_staged = staged;
    m.phase = 1;
    if (local[static_cast<size_t>(p.from)] >= 0)
      m.after_tasks = {local[static_cast<size_t>(p.from)]};
    m.tag = "text_out";
    add_msg(plan, std::move(m));
  }
}

// At step s = 1..last_step the rank at ring position owner+s-1 forwards the shard to the one at
// owner+s (after the step s-1 message; step 1 after `first_after`), which then computes
// `flops_at[owner+s]` on it. `ring[q]` is the rank at position q. Zero-FLOP pieces are skipped
// unless `keep_empty_tasks`. Returns the task index of each step (index s; -1 where none).
RingStage add_ring_stage(CommPlan& plan, const std::vector<int>& ring, const RingShard& shard,
                         const std::vector<double>& flops_at, bool keep_empty_tasks, bool staged) {
  const int n = static_cast<int>(ring.size());
  RingStage out;
  out.tasks.assign(static_cast<size_t>(shard.last_step) + 1, -1);
  out.merges.assign(static_cast<size_t>(shard.last_step) + 1, -1);
  int prev = -1;
  for (int s = 1; s <= shard.last_step; ++s) {
    const int to = (shard.owner + s) % n;
    Message m;
    m.src = ring[static_cast<size_t>((shard.owner + s - 1) % n)];
    m.dst = ring[static_cast<size_t>(to)];
    m.bytes = shard.bytes;
    m.collective = true;
    m.host_staged = staged;
    m.phase = s;
    m.kv_blocks = shard.kv_blocks;
    m.tag = "ring";
    if (shard.bytes > 0) m.nccl = {true, sim::nccl::Collective::send_recv, 2, shard.bytes};
    // The shard exists at its owner only after `first_after` (e.g. USP's all-to-all).
    m.after_msgs = prev >= 0 ? std::vector<int>{prev} : shard.first_after;
    const int dst = m.dst;
    prev = add_msg(plan, std::move(m));
    const double f = flops_at[static_cast<size_t>(to)];
    if (f > 0 || keep_empty_tasks) {
      AttentionTask t{dst, f, s, {prev}, "ring"};
      t.what = shard.what;
      if (t.what.kv_ranks.empty()) t.what.kv_ranks = {ring[static_cast<size_t>(shard.owner)]};
      const int ti = add_task(plan, std::move(t));
      out.tasks[static_cast<size_t>(s)] = ti;
      const double elements = static_cast<size_t>(to) < shard.merge_elements_at.size()
                                  ? shard.merge_elements_at[static_cast<size_t>(to)]
                                  : 0.0;
      const double merge_bytes = shard.merge_bytes_per_element * elements;
      if (merge_bytes > 0) {
        AttentionTask c{dst, 0, s, {}, "ring_merge"};
        c.after_tasks = {ti};
        c.what.kind = sim::TaskKind::copy;
        c.what.bytes = merge_bytes;
        out.merges[static_cast<size_t>(s)] = add_task(plan, std::move(c));
      }
    }
  }
  return out;
}

void chain_ring_merges(CommPlan& plan) {
  std::map<int, std::vector<int>> of_rank;  // rank -> its merge tasks
  for (size_t i = 0; i < plan.tasks.size(); ++i)
    if (plan.tasks[i].tag == "ring_merge")
      of_rank[plan.tasks[i].rank].push_back(static_cast<int>(i));
  for (auto& [rank, v] : of_rank) {
    std::stable_sort(v.begin(), v.end(), [&](int a, int b) {
      return plan.tasks[static_cast<size_t>(a)].phase < plan.tasks[static_cast<size_t>(b)].phase;
    });
    for (size_t k = 1; k < v.size(); ++k)
      plan.tasks[static_cast<size_t>(v[k])].after_tasks.push_back(v[k - 1]);
  }
}

double ring_merge_bytes_per_element(const Params& p) {
  return param(p, "merge_bytes_per_element", kRingMergeBytesPerElement);
}

double out_cast_bytes_per_element(const Params& p) {
  return param(p, "out_cast_bytes_per_element", 0.0);
}

int add_out_cast(CommPlan& plan, int x, double bytes, int phase, std::vector<int> after) {
  if (!(bytes > 0)) return -1;
  AttentionTask c{x, 0, phase, {}, "out_cast"};
  c.after_tasks = std::move(after);
  c.what.kind = sim::TaskKind::copy;
  c.what.bytes = bytes;
  return add_task(plan, std::move(c));
}

// Control for dynamic patterns: every owner sends its pooled K block summaries (one head_dim
// vector per head and block, as VSA/SpargeAttn pool them) to every rank, which scores its pooled
// Q against them; then each requester sends the owner its request list. Returns, per (g, o),
// the id of the request message (the owner's KV send waits for it), or -1.
std::vector<int> add_discovery(CommPlan& plan, const LayerInput& in, const Demand& d, bool staged,
                               bool summaries) {
  const int P = d.ranks;
  std::vector<int> req(static_cast<size_t>(P) * P, -1);
  std::vector<int> summary(static_cast<size_t>(P) * P, -1);
  if (summaries)
    for (int o = 0; o < P; ++o)
      for (int g = 0; g < P; ++g) {
        if (g == o) continue;
        Message m;
        m.src = o;
        m.dst = g;
        m.bytes = static_cast<double>(d.owned_blocks[static_cast<size_t>(o)]) * in.model->heads *
                  in.model->head_dim * in.model->dtype_bytes;
        m.control = true;
        m.host_staged = staged;
        m.tag = "summary";
        summary[static_cast<size_t>(o) * P + g] = add_msg(plan, std::move(m));
      }
  for (int g = 0; g < P; ++g)
    for (int o = 0; o < P; ++o) {
      if (g == o) continue;
      Message m;
      m.src = g;
      m.dst = o;
      m.bytes = kIndexBytes *
                (1.0 + static_cast<double>(d.blocks[static_cast<size_t>(g) * P + o].size()));
      m.control = true;
      m.host_staged = staged;
      m.tag = "index";
      if (summaries)
        for (int x = 0; x < P; ++x)
          if (x != g) m.after_msgs.push_back(summary[static_cast<size_t>(x) * P + g]);
      req[static_cast<size_t>(g) * P + o] = add_msg(plan, std::move(m));
    }
  return req;
}

int ulysses_kv_heads(int heads, int kv_heads, int u) {
  const int kvh = kv_heads > 0 ? kv_heads : heads;
  if (kvh >= u) return kvh % u == 0 ? kvh : -1;
  return u % kvh == 0 ? u : -1;
}

Result<CommPlan> ulysses_plan(const LayerInput& in, int u, bool staged, const char* tag,
                              double merge_bytes_per_element, double cast_bytes_per_element) {
  const int P = in.placement->ranks;
  const int H = in.model->heads;
  if (u < 1 || P % u != 0)
    return Error{"ulysses degree " + std::to_string(u) + " does not divide the " +
                 std::to_string(P) + " ranks"};
  if (H % u != 0)
    return Error{"heads (" + std::to_string(H) + ") not divisible by the Ulysses degree " +
                 std::to_string(u)};
  const int kv_heads = in.model->kv_heads_or_heads();
  const int kv_moved = ulysses_kv_heads(H, kv_heads, u);
  if (kv_moved < 0)
    return Error{"kv_heads (" + std::to_string(kv_heads) + ") and the Ulysses degree " +
                 std::to_string(u) +
                 " do not divide one another (yunchang/comm/all_to_all.py all_to_all_4D splits "
                 "the heads into degree equal groups)"};
  const int r = P / u;
  const auto& layout = *in.layout;
  const double hb =
      static_cast<double>(in.model->head_dim) * in.model->dtype_bytes;  // per token, head
  const double hpg = static_cast<double>(H) / u;                        // heads per group
  const double kvpg = static_cast<double>(kv_moved) / u;                // K (and V) heads per group
  std::vector<double> tokens(static_cast<size_t>(P), 0.0);
  std::vector<int> seq_group(static_cast<size_t>(layout.num_blocks));
  for (int k = 0; k < layout.num_blocks; ++k) {
    const int o = in.placement->block_owner[static_cast<size_t>(k)];
    tokens[static_cast<size_t>(o)] += layout.tokens_in_block[static_cast<size_t>(k)];
    seq_group[static_cast<size_t>(k)] = o / u;
  }
  std::vector<double> group_tokens(static_cast<size_t>(r), 0.0);
  for (int x = 0; x < P; ++x)
    group_tokens[static_cast<size_t>(x / u)] += tokens[static_cast<size_t>(x)];
  std::vector<int> head_group(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h) head_group[static_cast<size_t>(h)] = h / (H / u);
  const auto fl = detail::grouped_flops(in, seq_group, r, seq_group, r, head_group, u);
  auto F = [&](int i, int j, int o) { return fl[(static_cast<size_t>(i) * r + j) * r + o]; };
  auto group_ranks = [&](int j) {
    std::vector<int> v;
    for (int x = j * u; x < (j + 1) * u; ++x) v.push_back(x);
    return v;
  };
  auto copy_task = [&](int x, double bytes, int phase, const std::string& t) {
    AttentionTask c{x, 0, phase, {}, std::string(tag) + "_" + t};
    c.what.kind = sim::TaskKind::copy;
    c.what.bytes = bytes;
    return c;
  };
  CommPlan plan;
  // Transposes before the all-to-all in (yunchang/comm/all_to_all.py all_to_all_4D,
  // scatter_idx 2: reshape + transpose(0, 2) + .contiguous() of Q, K and V each): rank x reads and
  // writes its tokens' Q (H heads) and K, V (kv_moved heads each).
  std::vector<int> pre_in(static_cast<size_t>(P), -1), post_in(static_cast<size_t>(P), -1);
  if (u > 1)
    for (int x = 0; x < P; ++x)
      pre_in[static_cast<size_t>(x)] = add_task(
          plan, copy_task(x, 2.0 * tokens[static_cast<size_t>(x)] * (H + 2.0 * kv_moved) * hb, 0,
                          "pre_qkv"));
  // All-to-all in: rank s sends its tokens' Q, K, V of head group i to rank (j, i); K and V
  // carry kv_moved / u heads each (grouped-query attention).
  std::vector<std::vector<int>> a2a_of(static_cast<size_t>(P));
  std::vector<int> a2a_in_ids, a2a_out_ids;  // one all-to-all per Ulysses group, same size each
  for (int s = 0; s < P; ++s)
    for (int dd = 0; dd < P; ++dd) {
      if (s == dd || s / u != dd / u) continue;
      Message m;
      m.src = s;
      m.dst = dd;
      m.bytes = tokens[static_cast<size_t>(s)] * (hpg + 2.0 * kvpg) * hb;
      m.collective = true;
      m.host_staged = staged;
      m.phase = 0;
      if (pre_in[static_cast<size_t>(s)] >= 0) m.after_tasks = {pre_in[static_cast<size_t>(s)]};
      m.tag = std::string(tag) + "_qkv";
      const int id = add_msg(plan, std::move(m));
      a2a_of[static_cast<size_t>(s)].push_back(id);
      a2a_of[static_cast<size_t>(dd)].push_back(id);
      a2a_in_ids.push_back(id);
    }
  tag_alltoall(plan, a2a_in_ids, u);
  // Transposes after it (all_to_all_4D: output.transpose(0, 1).contiguous()): rank (j, i) holds
  // the whole sequence shard j of its head group; it waits for the whole all-to-all (NCCL's
  // all-to-all completes as a whole per rank).
  if (u > 1)
    for (int x = 0; x < P; ++x) {
      AttentionTask c =
          copy_task(x, 2.0 * group_tokens[static_cast<size_t>(x / u)] * (hpg + 2.0 * kvpg) * hb, 0,
                    "post_qkv");
      c.after_msgs = a2a_of[static_cast<size_t>(x)];
      c.after_tasks = {pre_in[static_cast<size_t>(x)]};
      post_in[static_cast<size_t>(x)] = add_task(plan, std::move(c));
    }
  std::vector<std::vector<int>> tasks_of(static_cast<size_t>(P));
  // Attention: local shard after the all-to-all and its transposes.
  for (int x = 0; x < P; ++x) {
    const int j = x / u, i = x % u;
    const double f = F(i, j, j);
    AttentionTask t{x, f, 0, a2a_of[static_cast<size_t>(x)], tag};
    if (post_in[static_cast<size_t>(x)] >= 0) t.after_tasks = {post_in[static_cast<size_t>(x)]};
    t.what.q_ranks = group_ranks(j);
    t.what.kv_ranks = group_ranks(j);
    t.what.head_begin = i * (H / u);
    t.what.head_end = (i + 1) * (H / u);
    tasks_of[static_cast<size_t>(x)].push_back(add_task(plan, std::move(t)));
  }
  // Ring over the r groups for each head group i: ranks (0, i), (1, i), ..., (r-1, i); the K and
  // V of group o's tokens for head group i, after the all-to-all that brought them.
  for (int i = 0; i < u; ++i) {
    std::vector<int> ring(static_cast<size_t>(r));
    for (int j = 0; j < r; ++j) ring[static_cast<size_t>(j)] = j * u + i;
    for (int o = 0; o < r; ++o) {
      RingShard shard;
      shard.owner = o;
      shard.last_step = r - 1;
      shard.bytes = 2.0 * group_tokens[static_cast<size_t>(o)] * kvpg * hb;
      shard.first_after = a2a_of[static_cast<size_t>(ring[static_cast<size_t>(o)])];
      shard.what.kv_ranks = group_ranks(o);
      shard.what.head_begin = i * (H / u);
      shard.what.head_end = (i + 1) * (H / u);
      shard.merge_bytes_per_element = merge_bytes_per_element;
      std::vector<double> flops_at(static_cast<size_t>(r));
      for (int j = 0; j < r; ++j) {
        flops_at[static_cast<size_t>(j)] = F(i, j, o);
        shard.merge_elements_at.push_back(group_tokens[static_cast<size_t>(j)] * hpg *
                                          in.model->head_dim);
      }
      const auto stage =
          add_ring_stage(plan, ring, shard, flops_at, /*keep_empty_tasks=*/true, staged);
      for (int s = 1; s < r; ++s) {
        const int x = ring[static_cast<size_t>((o + s) % r)];
        const int ti = stage.tasks[static_cast<size_t>(s)];
        auto& t = plan.tasks[static_cast<size_t>(ti)];
        t.what.q_ranks = group_ranks(x / u);
        if (post_in[static_cast<size_t>(x)] >= 0) t.after_tasks = {post_in[static_cast<size_t>(x)]};
        tasks_of[static_cast<size_t>(x)].push_back(ti);
        // The output transposes read the merged output.
        if (const int mi = stage.merges[static_cast<size_t>(s)]; mi >= 0)
          tasks_of[static_cast<size_t>(x)].push_back(mi);
      }
    }
  }
  chain_ring_merges(plan);
  // The accumulator's casts (float32 at the first step, back at the end) after the rank's pieces
  // and merges; the output transposes read the cast output.
  for (int x = 0; x < P; ++x)
    if (const int c =
            add_out_cast(plan, x,
                         cast_bytes_per_element * group_tokens[static_cast<size_t>(x / u)] * hpg *
                             in.model->head_dim,
                         r, tasks_of[static_cast<size_t>(x)]);
        c >= 0)
      tasks_of[static_cast<size_t>(x)] = {c};
  // Transpose before the all-to-all out (all_to_all_4D, scatter_idx 1: transpose(0, 3)
  // .transpose(0, 1).contiguous()) of the output of rank (j, i)'s heads over shard j.
  std::vector<int> pre_out(static_cast<size_t>(P), -1);
  if (u > 1)
    for (int x = 0; x < P; ++x) {
      AttentionTask c =
          copy_task(x, 2.0 * group_tokens[static_cast<size_t>(x / u)] * hpg * hb, r, "pre_out");
      c.after_tasks = tasks_of[static_cast<size_t>(x)];
      pre_out[static_cast<size_t>(x)] = add_task(plan, std::move(c));
    }
  // All-to-all out: rank (j, i) returns the output of its heads for rank dd's tokens.
  std::vector<std::vector<int>> out_into(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s)
    for (int dd = 0; dd < P; ++dd) {
      if (s == dd || s / u != dd / u) continue;
      Message m;
      m.src = s;
      m.dst = dd;
      m.bytes = tokens[static_cast<size_t>(dd)] * hpg * hb;
      m.collective = true;
      m.host_staged = staged;
      m.phase = r;
      m.after_tasks = pre_out[static_cast<size_t>(s)] >= 0
                          ? std::vector<int>{pre_out[static_cast<size_t>(s)]}
                          : tasks_of[static_cast<size_t>(s)];
      m.tag = std::string(tag) + "_out";
      const int id = add_msg(plan, std::move(m));
      out_into[static_cast<size_t>(dd)].push_back(id);
      a2a_out_ids.push_back(id);
    }
  tag_alltoall(plan, a2a_out_ids, u);
  // Transpose after it (all_to_all_4D: output.transpose(0, 2).contiguous()): the rank's own
  // tokens, all heads.
  if (u > 1)
    for (int x = 0; x < P; ++x) {
      AttentionTask c = copy_task(x, 2.0 * tokens[static_cast<size_t>(x)] * H * hb, r, "post_out");
      c.after_msgs = out_into[static_cast<size_t>(x)];
      c.after_tasks = {pre_out[static_cast<size_t>(x)]};
      add_task(plan, std::move(c));
    }
  return plan;
}

}  // namespace detail
}  // namespace sparsp::policy
