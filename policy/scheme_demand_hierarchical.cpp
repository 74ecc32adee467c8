// Scheme `demand_hierarchical`: demand_direct, but a block several GPUs behind one switch need
// crosses the uplink once (a leader forwards it) or is staged in host memory once.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy::detail {
namespace {

// Like demand_direct, but a KV block needed by several ranks behind the same PCIe switch (not
// the owner's) crosses that switch's uplink once, to a leader that forwards it below the switch
// over P2P; where the owner has no P2P to a requester, the owner stages the union of all such
// requesters' blocks into its NUMA node's pinned host memory once (one device-to-host copy) and
// each requester reads its blocks from there. In a cluster, a block needed in another server node
// crosses the network once per destination node, to the requester there that needs the most
// bytes (the node's leader), which forwards the others' blocks inside its node; host staging
// never spans nodes (a host's memory is reachable only inside its node).
Result<CommPlan> scheme_demand_hierarchical(const LayerInput& in, const Params& p) {
  const Demand d = compute_demand(in, param(p, "split_text", 1) != 0);
  const int P = d.ranks;
  const RankTopology& rt = *in.ranks;
  const bool force_staged = param(p, "host_staged", 0) != 0;
  CommPlan plan;
  std::vector<int> req;
  if (in.dynamic) req = add_discovery(plan, in, d, force_staged, true);
  add_text_partials(plan, d, add_local_tasks(plan, d), force_staged);
  auto leaf = [&](int x) {
    return rt.ancestors[static_cast<size_t>(x)].empty() ? std::string()
                                                        : rt.ancestors[static_cast<size_t>(x)][0];
  };
  auto remote_task = [&](int g, int o, int msg) {
    const double f = d.flops[static_cast<size_t>(g) * P + o];
    AttentionTask t{g, f, 0, {msg}, "remote"};
    t.what.kv_ranks = {o};
    if (f > 0) add_task(plan, std::move(t));
  };
  for (int o = 0; o < P; ++o) {
    std::vector<int> staged, direct_p2p;
    std::map<int, std::vector<int>> other_nodes;  // destination node -> its requesters
    for (int sh = 1; sh < P; ++sh) {  // shifted order (see demand_direct)
      const int g = (o + sh) % P;
      if (d.bytes[static_cast<size_t>(g) * P + o] <= 0) continue;
      if (rt.node_of(g) != rt.node_of(o))
        other_nodes[rt.node_of(g)].push_back(g);
      else if (force_staged || !rt.p2p_allowed(o, g))
        staged.push_back(g);
      else
        direct_p2p.push_back(g);
    }
    auto requests_of = [&](const std::vector<int>& gs) {
      std::vector<int> after;
      if (!req.empty())
        for (int g : gs) after.push_back(req[static_cast<size_t>(g) * P + o]);
      return after;
    };
    // One copy o -> the member needing the most bytes (the leader; also its own delivery) with
    // the union of the members' blocks, then leader -> each other member with its own blocks.
    auto via_leader = [&](const std::vector<int>& members, const char* tag, bool host_staged) {
      int leader = members[0];
      for (int g : members)
        if (d.bytes[static_cast<size_t>(g) * P + o] > d.bytes[static_cast<size_t>(leader) * P + o])
          leader = g;
      const size_t lo = static_cast<size_t>(leader) * P + o;
      Message m;
      m.src = o;
      m.dst = leader;
      m.host_staged = host_staged;
      m.bytes = members.size() == 1 ? d.bytes[lo] : detail::union_bytes(in, d, o, members);
      m.kv_blocks = members.size() == 1 ? d.blocks[lo] : detail::union_blocks(d, o, members);
      m.after_msgs = requests_of(members);
      m.tag = members.size() == 1 ? "kv" : tag;
      const int up_id = add_msg(plan, std::move(m));
      remote_task(leader, o, up_id);
      for (int g : members) {
        if (g == leader) continue;
        const size_t go = static_cast<size_t>(g) * P + o;
        Message f{leader, g,       -1, d.bytes[go], false,        false, host_staged,
                  0,      {up_id}, {}, true,        d.blocks[go], "fwd"};
        remote_task(g, o, add_msg(plan, std::move(f)));
      }
    };
    if (staged.size() == 1) {
      // One requester: nothing to share; a plain host-staged copy.
      const int g = staged[0];
      const size_t go = static_cast<size_t>(g) * P + o;
      Message m{o,  g,    -1,           d.bytes[go], false, false, true, 0, requests_of({g}),
                {}, true, d.blocks[go], "kv"};
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
          Message m{o,  g,    -1,           d.bytes[go], false, false, false, 0, requests_of({g}),
                    {}, true, d.blocks[go], "kv"};
          remote_task(g, o, add_msg(plan, std::move(m)));
        }
        continue;
      }
      via_leader(members, "kv_up", false);
    }
    // Requesters in other nodes: once across the network per node, then forwarded inside it.
    for (const auto& [node, members] : other_nodes) via_leader(members, "kv_net", force_staged);
  }
  return plan;
}

const RegisterScheme kRegistered{
    {"demand_hierarchical",
     "demand_direct, but shared blocks cross a switch uplink or the network once "
     "(a leader forwards) or are staged in host memory once",
     6, scheme_demand_hierarchical}};

}  // namespace
}  // namespace sparsp::policy::detail
