// Communication schemes: one (step, layer) of a pattern + a placement -> CommPlan (transfers and
// attention pieces with their data dependencies). The registry table at the bottom is the only
// place a new scheme is listed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "demand.hpp"

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

namespace {

using detail::Demand;
using Params = std::map<std::string, double>;

double param(const Params& p, const std::string& k, double def) {
  auto it = p.find(k);
  return it == p.end() ? def : it->second;
}

int add_msg(CommPlan& plan, Message m) {
  plan.messages.push_back(std::move(m));
  return static_cast<int>(plan.messages.size()) - 1;
}
int add_task(CommPlan& plan, AttentionTask t) {
  plan.tasks.push_back(std::move(t));
  return static_cast<int>(plan.tasks.size()) - 1;
}

// Local attention piece of every rank (its queries against its own KV blocks). Returns the task
// index per rank (-1 where there is no local work).
std::vector<int> add_local_tasks(CommPlan& plan, const Demand& d) {
  std::vector<int> idx(static_cast<size_t>(d.ranks), -1);
  for (int g = 0; g < d.ranks; ++g) {
    const double f = d.flops[static_cast<size_t>(g) * d.ranks + g];
    if (f > 0) idx[static_cast<size_t>(g)] = add_task(plan, AttentionTask{g, f, 0, {}, "local"});
  }
  return idx;
}

// Partial text-query outputs back to the text owner, after the sender's local piece (which holds
// its text-query work).
void add_text_partials(CommPlan& plan, const Demand& d, const std::vector<int>& local, bool staged) {
  for (const auto& p : d.text_partials) {
    Message m;
    m.src = p.from;
    m.dst = p.to;
    m.bytes = p.bytes;
    m.host_staged = staged;
    m.phase = 1;
    if (local[static_cast<size_t>(p.from)] >= 0) m.after_tasks = {local[static_cast<size_t>(p.from)]};
    m.tag = "text_out";
    add_msg(plan, std::move(m));
  }
}

// ---- ring -----------------------------------------------------------------------------------
// Ring attention (Liu et al. 2023; ring-flash-attn): P-1 steps; at step s rank r forwards the KV
// shard it received at step s-1 (its own at s=1) to rank r+1 and computes on the shard received.

// One KV shard's trip around a ring (used by `ring` and by USP's ring stage).
struct RingShard {
  int owner = 0;                   // ring position of the shard's owner
  int last_step = 0;               // forwarding steps taken (ring size - 1 unless cut short)
  double bytes = 0;                // shard size, bytes
  std::vector<int32_t> kv_blocks;  // blocks carried (empty where not tracked block by block)
  std::vector<int> first_after;    // messages the step-1 send waits for
};

// At step s = 1..last_step the rank at ring position owner+s-1 forwards the shard to the one at
// owner+s (after the step s-1 message; step 1 after `first_after`), which then computes
// `flops_at[owner+s]` on it. `ring[q]` is the rank at position q. Zero-FLOP pieces are skipped
// unless `keep_empty_tasks`. Returns the task index of each step (index s; -1 where none).
std::vector<int> add_ring_stage(CommPlan& plan, const std::vector<int>& ring,
                                const RingShard& shard, const std::vector<double>& flops_at,
                                bool keep_empty_tasks, bool staged) {
  const int n = static_cast<int>(ring.size());
  std::vector<int> tasks(static_cast<size_t>(shard.last_step) + 1, -1);
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
    // The shard exists at its owner only after `first_after` (e.g. USP's all-to-all).
    m.after_msgs = prev >= 0 ? std::vector<int>{prev} : shard.first_after;
    const int dst = m.dst;
    prev = add_msg(plan, std::move(m));
    const double f = flops_at[static_cast<size_t>(to)];
    if (f > 0 || keep_empty_tasks)
      tasks[static_cast<size_t>(s)] = add_task(plan, AttentionTask{dst, f, s, {prev}, "ring"});
  }
  return tasks;
}

// skip_empty: owner o's shard stops at the last rank along the ring that needs any of it.
Result<CommPlan> scheme_ring(const LayerInput& in, const Params& p) {
  const Demand d = detail::compute_demand(in);
  const int P = d.ranks;
  const bool skip = param(p, "skip_empty", 0) != 0;
  const bool staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  add_local_tasks(plan, d);
  std::vector<int> ring(static_cast<size_t>(P));
  std::iota(ring.begin(), ring.end(), 0);
  for (int o = 0; o < P; ++o) {
    RingShard shard;
    shard.owner = o;
    for (int k = 0; k < in.layout->num_blocks; ++k)
      if (in.placement->block_owner[static_cast<size_t>(k)] == o) {
        shard.bytes += detail::kv_block_bytes(*in.model, *in.layout, k);
        shard.kv_blocks.push_back(k);
      }
    shard.last_step = P - 1;
    if (skip) {
      shard.last_step = 0;
      for (int s = 1; s < P; ++s)
        if (!d.blocks[static_cast<size_t>((o + s) % P) * P + o].empty()) shard.last_step = s;
    }
    std::vector<double> flops_at(static_cast<size_t>(P));
    for (int x = 0; x < P; ++x)
      flops_at[static_cast<size_t>(x)] = d.flops[static_cast<size_t>(x) * P + o];
    add_ring_stage(plan, ring, shard, flops_at, /*keep_empty_tasks=*/false, staged);
  }
  return plan;
}

// ---- allgather -------------------------------------------------------------------------------
// NCCL ring all-gather of every KV shard (P-1 forwarding steps), then attention on all of it.
Result<CommPlan> scheme_allgather(const LayerInput& in, const Params& p) {
  Params q = p;
  q["skip_empty"] = 0;
  auto ring = scheme_ring(in, q);
  if (!ring) return ring.error();
  const Demand d = detail::compute_demand(in);
  const int P = d.ranks;
  CommPlan plan;
  plan.messages = ring->messages;
  for (auto& m : plan.messages) {
    m.phase = 0;
    m.tag = "allgather";
  }
  add_local_tasks(plan, d);
  for (int g = 0; g < P; ++g) {
    double f = 0;
    for (int o = 0; o < P; ++o)
      if (o != g) f += d.flops[static_cast<size_t>(g) * P + o];
    AttentionTask t{g, f, 0, {}, "remote"};
    for (size_t i = 0; i < plan.messages.size(); ++i)
      if (plan.messages[i].dst == g || plan.messages[i].src == g)
        t.after_msgs.push_back(static_cast<int>(i));
    if (f > 0) add_task(plan, std::move(t));
  }
  return plan;
}

// ---- ulysses / usp ---------------------------------------------------------------------------
// DeepSpeed-Ulysses (Jacobs et al. 2023): all-to-all of Q, K, V so each rank holds all tokens of
// H/u heads, attention, all-to-all of the output back. USP (Fang & Zhao 2024, xDiT): u x r = P;
// ranks j*u .. j*u+u-1 form Ulysses group j; after the all-to-all, rank (j, i) rings the KV of
// sequence shard j, head group i, with ranks (j', i) of the other groups.
Result<CommPlan> scheme_usp_impl(const LayerInput& in, int u, bool staged, const char* tag) {
  const int P = in.placement->ranks;
  const int H = in.model->heads;
  if (u < 1 || P % u != 0)
    return Error{"ulysses degree " + std::to_string(u) + " does not divide the " +
                 std::to_string(P) + " ranks"};
  if (H % u != 0)
    return Error{"heads (" + std::to_string(H) + ") not divisible by the Ulysses degree " +
                 std::to_string(u)};
  const int r = P / u;
  const auto& layout = *in.layout;
  const double hb = static_cast<double>(in.model->head_dim) * in.model->dtype_bytes;  // per token, head
  const double hpg = static_cast<double>(H) / u;     // heads per group
  std::vector<double> tokens(static_cast<size_t>(P), 0.0);
  std::vector<int> seq_group(static_cast<size_t>(layout.num_blocks));
  for (int k = 0; k < layout.num_blocks; ++k) {
    const int o = in.placement->block_owner[static_cast<size_t>(k)];
    tokens[static_cast<size_t>(o)] += layout.tokens_in_block[static_cast<size_t>(k)];
    seq_group[static_cast<size_t>(k)] = o / u;
  }
  std::vector<double> group_tokens(static_cast<size_t>(r), 0.0);
  for (int x = 0; x < P; ++x) group_tokens[static_cast<size_t>(x / u)] += tokens[static_cast<size_t>(x)];
  std::vector<int> head_group(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h) head_group[static_cast<size_t>(h)] = h / (H / u);
  const auto fl = detail::grouped_flops(in, seq_group, r, seq_group, r, head_group, u);
  auto F = [&](int i, int j, int o) { return fl[(static_cast<size_t>(i) * r + j) * r + o]; };
  CommPlan plan;
  // All-to-all in: rank s sends its tokens' Q, K, V of head group i to rank (j, i).
  std::vector<std::vector<int>> a2a_of(static_cast<size_t>(P));
  for (int s = 0; s < P; ++s)
    for (int dd = 0; dd < P; ++dd) {
      if (s == dd || s / u != dd / u) continue;
      Message m;
      m.src = s;
      m.dst = dd;
      m.bytes = 3.0 * tokens[static_cast<size_t>(s)] * hpg * hb;
      m.collective = true;
      m.host_staged = staged;
      m.phase = 0;
      m.tag = std::string(tag) + "_qkv";
      const int id = add_msg(plan, std::move(m));
      a2a_of[static_cast<size_t>(s)].push_back(id);
      a2a_of[static_cast<size_t>(dd)].push_back(id);
    }
  std::vector<std::vector<int>> tasks_of(static_cast<size_t>(P));
  // Attention: local shard after the all-to-all (NCCL all-to-all completes as a whole per rank).
  for (int x = 0; x < P; ++x) {
    const int j = x / u, i = x % u;
    const double f = F(i, j, j);
    tasks_of[static_cast<size_t>(x)].push_back(
        add_task(plan, AttentionTask{x, f, 0, a2a_of[static_cast<size_t>(x)], tag}));
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
      shard.bytes = 2.0 * group_tokens[static_cast<size_t>(o)] * hpg * hb;
      shard.first_after = a2a_of[static_cast<size_t>(ring[static_cast<size_t>(o)])];
      std::vector<double> flops_at(static_cast<size_t>(r));
      for (int j = 0; j < r; ++j) flops_at[static_cast<size_t>(j)] = F(i, j, o);
      const auto steps =
          add_ring_stage(plan, ring, shard, flops_at, /*keep_empty_tasks=*/true, staged);
      for (int s = 1; s < r; ++s)
        tasks_of[static_cast<size_t>(ring[static_cast<size_t>((o + s) % r)])].push_back(
            steps[static_cast<size_t>(s)]);
    }
  }
  // All-to-all out: rank (j, i) returns the output of its heads for rank dd's tokens.
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
      m.after_tasks = tasks_of[static_cast<size_t>(s)];
      m.tag = std::string(tag) + "_out";
      add_msg(plan, std::move(m));
    }
  return plan;
}


Result<CommPlan> scheme_ulysses(const LayerInput& in, const Params& p) {
  return scheme_usp_impl(in, in.placement->ranks, param(p, "host_staged", 0) != 0, "a2a");
}
Result<CommPlan> scheme_usp(const LayerInput& in, const Params& p) {
  const int u = static_cast<int>(param(p, "ulysses_degree",
                                       default_ulysses_degree(in.placement->ranks, in.model->heads)));
  return scheme_usp_impl(in, u, param(p, "host_staged", 0) != 0, "a2a");
}

// ---- demand-driven schemes ------------------------------------------------------------------
// Index bytes per requested (block) entry: one int32.
constexpr double kIndexBytes = 4.0;

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
      m.bytes = kIndexBytes * (1.0 + static_cast<double>(d.blocks[static_cast<size_t>(g) * P + o].size()));
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

Result<CommPlan> scheme_demand_direct(const LayerInput& in, const Params& p) {
  const Demand d = detail::compute_demand(in, param(p, "split_text", 1) != 0);
  const int P = d.ranks;
  const bool staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  std::vector<int> req;
  if (in.dynamic) req = add_discovery(plan, in, d, staged, true);
  add_text_partials(plan, d, add_local_tasks(plan, d), staged);
  // Shifted order (owner o serves o+1, o+2, ...), as NCCL's pairwise all-to-all does, so that
  // the copy-engine queues of the owners do not all serve the same requester first (incast).
  for (int sh = 1; sh < P; ++sh)
    for (int o = 0; o < P; ++o) {
      const int g = (o + sh) % P;
      const size_t go = static_cast<size_t>(g) * P + o;
      if (d.bytes[go] <= 0) continue;
      Message m;
      m.src = o;
      m.dst = g;
      m.bytes = d.bytes[go];
      m.host_staged = staged;
      m.kv_blocks = d.blocks[go];
      m.tag = "kv";
      if (!req.empty()) m.after_msgs.push_back(req[go]);
      const int id = add_msg(plan, std::move(m));
      if (d.flops[go] > 0) add_task(plan, AttentionTask{g, d.flops[go], 0, {id}, "remote"});
    }
  return plan;
}

// DSV (Tan et al. 2025): exchange request indices (an all-to-all of counts and ids), then one
// uneven NCCL all-to-all carrying exactly the demanded KV; a rank's remote attention starts when
// its all-to-all (sends and receives, one NCCL group) has completed.
Result<CommPlan> scheme_demand_alltoall(const LayerInput& in, const Params& p) {
  const Demand d = detail::compute_demand(in, param(p, "split_text", 1) != 0);
  const int P = d.ranks;
  const bool staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  const std::vector<int> req = add_discovery(plan, in, d, staged, in.dynamic);
  for (auto& m : plan.messages) m.collective = true;
  add_text_partials(plan, d, add_local_tasks(plan, d), staged);
  std::vector<std::vector<int>> involved(static_cast<size_t>(P));
  for (int sh = 1; sh < P; ++sh)   // shifted pairwise order, as NCCL's all-to-all
    for (int o = 0; o < P; ++o) {
      const int g = (o + sh) % P;
      const size_t go = static_cast<size_t>(g) * P + o;
      if (d.bytes[go] <= 0) continue;
      Message m;
      m.src = o;
      m.dst = g;
      m.bytes = d.bytes[go];
      m.collective = true;
      m.host_staged = staged;
      m.kv_blocks = d.blocks[go];
      m.tag = "a2a_kv";
      for (int x = 0; x < P; ++x)   // the owner knows all requests once the index a2a is done
        if (x != o) m.after_msgs.push_back(req[static_cast<size_t>(x) * P + o]);
      const int id = add_msg(plan, std::move(m));
      involved[static_cast<size_t>(g)].push_back(id);
      involved[static_cast<size_t>(o)].push_back(id);
    }
  for (int g = 0; g < P; ++g) {
    double f = 0;
    for (int o = 0; o < P; ++o)
      if (o != g) f += d.flops[static_cast<size_t>(g) * P + o];
    if (f > 0) add_task(plan, AttentionTask{g, f, 0, involved[static_cast<size_t>(g)], "remote"});
  }
  return plan;
}

// Like demand_direct, but a KV block needed by several ranks behind the same PCIe switch (not
// the owner's) crosses that switch's uplink once, to a leader that forwards it below the switch
// over P2P; where the owner has no P2P to a requester, the owner stages the union of all such
// requesters' blocks into its NUMA node's pinned host memory once (one device-to-host copy) and
// each requester reads its blocks from there.
Result<CommPlan> scheme_demand_hierarchical(const LayerInput& in, const Params& p) {
  const Demand d = detail::compute_demand(in, param(p, "split_text", 1) != 0);
  const int P = d.ranks;
  const RankTopology& rt = *in.ranks;
  const bool force_staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  std::vector<int> req;
  if (in.dynamic) req = add_discovery(plan, in, d, force_staged, true);
  add_text_partials(plan, d, add_local_tasks(plan, d), force_staged);
  auto leaf = [&](int x) { return rt.ancestors[static_cast<size_t>(x)].empty()
                                      ? std::string() : rt.ancestors[static_cast<size_t>(x)][0]; };
  auto remote_task = [&](int g, int o, int msg) {
    const double f = d.flops[static_cast<size_t>(g) * P + o];
    if (f > 0) add_task(plan, AttentionTask{g, f, 0, {msg}, "remote"});
  };
  for (int o = 0; o < P; ++o) {
    std::vector<int> staged, direct_p2p;
    for (int sh = 1; sh < P; ++sh) {   // shifted order (see demand_direct)
      const int g = (o + sh) % P;
      if (d.bytes[static_cast<size_t>(g) * P + o] <= 0) continue;
      if (force_staged || !rt.p2p_allowed(o, g)) staged.push_back(g);
      else direct_p2p.push_back(g);
    }
    auto requests_of = [&](const std::vector<int>& gs) {
      std::vector<int> after;
      if (!req.empty())
        for (int g : gs) after.push_back(req[static_cast<size_t>(g) * P + o]);
      return after;
    };
    if (staged.size() == 1) {
      // One requester: nothing to share; a plain host-staged copy.
      const int g = staged[0];
      const size_t go = static_cast<size_t>(g) * P + o;
      Message m{o, g, -1, d.bytes[go], false, false, true, 0, requests_of({g}), {}, true,
                d.blocks[go], "kv"};
      remote_task(g, o, add_msg(plan, std::move(m)));
    } else if (staged.size() > 1) {
      Message up;
      up.src = o;
      up.dst = -1;
      up.host_numa = rt.numa[static_cast<size_t>(o)];
      up.bytes = detail::union_bytes(in, d, o, staged);
      up.kv_blocks = detail::union_blocks(d, o, staged);
      up.counts_volume = false;
      up.after_msgs = requests_of(staged);
      up.tag = "stage";
      const int up_id = add_msg(plan, std::move(up));
      for (int g : staged) {
        const size_t go = static_cast<size_t>(g) * P + o;
        Message m;
        m.src = -1;
        m.host_numa = rt.numa[static_cast<size_t>(o)];
        m.dst = g;
        m.bytes = d.bytes[go];
        m.kv_blocks = d.blocks[go];
        m.after_msgs = {up_id};
        m.tag = "unstage";
        remote_task(g, o, add_msg(plan, std::move(m)));
      }
    }
    // P2P requesters: group by leaf switch.
    std::map<std::string, std::vector<int>> by_switch;
    for (int g : direct_p2p) by_switch[leaf(g)].push_back(g);
    for (auto& [sw, members] : by_switch) {
      bool share = members.size() >= 2 && sw != leaf(o) && !sw.empty();
      for (size_t a = 0; share && a < members.size(); ++a)
        for (size_t b = 0; b < members.size(); ++b)
          if (a != b && !rt.p2p_allowed(members[a], members[b])) share = false;
      if (!share) {
        for (int g : members) {
          const size_t go = static_cast<size_t>(g) * P + o;
          Message m{o, g, -1, d.bytes[go], false, false, false, 0, requests_of({g}), {}, true,
                    d.blocks[go], "kv"};
          remote_task(g, o, add_msg(plan, std::move(m)));
        }
        continue;
      }
      int leader = members[0];
      for (int g : members)
        if (d.bytes[static_cast<size_t>(g) * P + o] > d.bytes[static_cast<size_t>(leader) * P + o])
          leader = g;
      Message m;
      m.src = o;
      m.dst = leader;
      m.bytes = detail::union_bytes(in, d, o, members);
      m.kv_blocks = detail::union_blocks(d, o, members);
      m.after_msgs = requests_of(members);
      m.tag = "kv_up";
      const int up_id = add_msg(plan, std::move(m));
      remote_task(leader, o, up_id);
      for (int g : members) {
        if (g == leader) continue;
        const size_t go = static_cast<size_t>(g) * P + o;
        Message f{leader, g, -1, d.bytes[go], false, false, false, 0, {up_id}, {}, true,
                  d.blocks[go], "fwd"};
        remote_task(g, o, add_msg(plan, std::move(f)));
      }
    }
  }
  return plan;
}

struct SchemeEntry {
  const char* name;
  const char* description;
  Result<CommPlan> (*make)(const LayerInput&, const Params&);
};

const SchemeEntry kSchemes[] = {
    {"ring", "ring attention: P-1 shard-forwarding steps overlapped with attention (skip_empty=1 "
             "stops a shard after the last rank needing it)", scheme_ring},
    {"allgather", "NCCL ring all-gather of all KV, then attention", scheme_allgather},
    {"ulysses", "DeepSpeed-Ulysses: all-to-all of Q, K, V by heads, attention, all-to-all of the "
                "output (heads divisible by P)", scheme_ulysses},
    {"usp", "USP (xDiT): Ulysses degree x ring degree = P (ulysses_degree, default P/2)",
     scheme_usp},
    {"demand_alltoall", "DSV: index exchange, then one uneven NCCL all-to-all of exactly the "
                        "demanded KV", scheme_demand_alltoall},
    {"demand_direct", "one direct transfer per (owner, requester) with the union of the needed KV "
                      "blocks; host-staged where P2P is unavailable", scheme_demand_direct},
    {"demand_hierarchical", "demand_direct, but shared blocks cross a switch uplink once (leader "
                            "forwards) or are staged in host memory once", scheme_demand_hierarchical},
};

}  // namespace

std::vector<PolicyInfo> schemes() {
  std::vector<PolicyInfo> out;
  for (const auto& s : kSchemes) out.push_back({s.name, s.description});
  return out;
}

Result<CommPlan> make_scheme(const std::string& name, const LayerInput& in, const Params& params) {
  for (const auto& s : kSchemes)
    if (name == s.name) return s.make(in, params);
  return Error{"unknown scheme '" + name + "'"};
}

int default_ulysses_degree(int P, int H) {
  // xDiT's common PCIe setting: Ulysses inside half the group, ring across the halves.
  int u = P >= 4 ? P / 2 : 1;
  while (u > 1 && (H % u != 0 || P % u != 0)) --u;
  return u;
}

}  // namespace sparsp::policy
