// Runtimes: how a CommPlan's transfers and attention pieces are issued (sync, sm_overlap,
// ce_decoupled), CommPlan -> sim::Workload. The runtime registry table is the only place a new
// runtime is listed.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "demand.hpp"
#include "registry.hpp"

namespace sparsp::policy {

namespace {

using detail::param;
using detail::Params;

enum class Mode { sync, sm_overlap, ce_decoupled };

std::string endpoint(const RankTopology& rt, int rank, int host_numa) {
  if (rank < 0) return "host" + std::to_string(host_numa);
  return "gpu" + std::to_string(rt.gpu_of_rank[static_cast<size_t>(rank)]);
}

sim::Workload build(Mode mode, const CommPlan& plan, const RankTopology& rt, const ComputeModel& cm,
                    const Params& p, int layer) {
  sim::Workload w;
  const int comm_sms = static_cast<int>(param(p, "comm_sms", 16));
  const double chunk = param(p, "chunk_bytes", 0);
  const int staging = static_cast<int>(param(p, "staging_buffers", 0));  // 0: SimOptions default
  const bool ce_only = param(p, "ce_only", 0) != 0;
  // high_priority_comm=0 (sm_overlap): the comm kernels are launched on a side stream of the same
  // priority as the attention stream, as PyTorch's ProcessGroupNCCL does by default
  // (ProcessGroupNCCL::Options::is_high_priority_stream = false), and enqueued just before an
  // attention kernel that fills every SM (ring-flash-attn / yunchang / xDiT RingComm: the
  // step's batch_isend_irecv, then flash-attn on the compute stream). Both become runnable when
  // the previous compute ends; the block scheduler dispatches the attention kernel's CTAs first
  // (pending work of a higher-priority stream only would go ahead: CUDA C++ Programming Guide,
  // "Stream Priorities"), so the comm kernel gets SMs only when that attention kernel ends.
  // Modelled as: an SM-driven message of phase p waits for its sender's attention of phase p-1
  // and for all its sender's tasks of phases < p-1 (stream order, the NCCL stream's wait on the
  // compute stream); attention of phase p runs on the rank's one compute stream after every
  // message of phases <= p touching the rank (req.wait() on the send and the receive). The
  // step's LSE merge (phase p-1, after the attention kernel) runs beside the transfer.
  // With a kernel wave term (ComputeModel::attention_last_wave_share > 0) the message is
  // released when that attention kernel enters its last wave, not at its end: its CTAs are all
  // dispatched then, and the comm kernel gets the SMs the last wave frees (an NCCL-shaped copy
  // kernel beside SDPA flash attention on an H200 at default priority ended in or just after the
  // attention's last wave in 15 of 15 repetitions; sim/RESULTS.md "A communication kernel beside
  // flash attention"); sim::Transfer::released_by_last_wave, sim/README.md "Last waves".
  // 1 (default): the comm kernels get their SMs as soon as their inputs are ready (a
  // high-priority NCCL stream, or comm launched ahead of the attention kernel).
  const bool comm_behind_compute =
      mode == Mode::sm_overlap && !ce_only && param(p, "high_priority_comm", 1) == 0;
  const std::string L = "L" + std::to_string(layer) + ".";
  auto mid = [&](size_t i) {
    const auto& m = plan.messages[i];
    std::ostringstream s;
    s << L << "m" << i << "." << m.tag << "."
      << (m.src < 0 ? "h" + std::to_string(m.host_numa) : std::to_string(m.src)) << "-"
      << (m.dst < 0 ? "h" + std::to_string(m.host_numa) : std::to_string(m.dst));
    return s.str();
  };
  auto tid = [&](size_t i) {
    return L + "a" + std::to_string(i) + "." + plan.tasks[i].tag + "." +
           std::to_string(plan.tasks[i].rank);
  };
  // Sync: on each rank, compute of phase p waits for all messages of phases <= p touching the
  // rank; messages of phase p leaving a rank wait for its compute of phases < p.
  std::vector<std::vector<size_t>> msgs_of(static_cast<size_t>(rt.ranks));
  std::vector<std::vector<size_t>> tasks_of(static_cast<size_t>(rt.ranks));
  for (size_t i = 0; i < plan.messages.size(); ++i) {
    const auto& m = plan.messages[i];
    if (m.src >= 0) msgs_of[static_cast<size_t>(m.src)].push_back(i);
    if (m.dst >= 0 && m.dst != m.src) msgs_of[static_cast<size_t>(m.dst)].push_back(i);
  }
  for (size_t i = 0; i < plan.tasks.size(); ++i)
    tasks_of[static_cast<size_t>(plan.tasks[i].rank)].push_back(i);
  for (size_t i = 0; i < plan.messages.size(); ++i) {
    const auto& m = plan.messages[i];
    sim::Transfer t;
    t.id = mid(i);
    t.src = endpoint(rt, m.src, m.host_numa);
    t.dst = endpoint(rt, m.dst, m.host_numa);
    t.bytes = m.bytes;
    std::set<std::string> after;
    for (int a : m.after_msgs) after.insert(mid(static_cast<size_t>(a)));
    for (int a : m.after_tasks) after.insert(tid(static_cast<size_t>(a)));
    if (mode == Mode::sync && m.src >= 0)
      for (size_t ti : tasks_of[static_cast<size_t>(m.src)])
        if (plan.tasks[ti].phase < m.phase) after.insert(tid(ti));
    const bool sm = !ce_only && (mode == Mode::sm_overlap || (mode == Mode::sync && m.collective));
    t.engine =
        (m.src < 0 || m.dst < 0) ? sim::Engine::ce : (sm ? sim::Engine::sm : sim::Engine::ce);
    std::set<std::string> at_last_wave;
    if (comm_behind_compute && t.engine == sim::Engine::sm)
      for (size_t ti : tasks_of[static_cast<size_t>(m.src)]) {
        const auto& a = plan.tasks[ti];
        if (a.phase < m.phase - 1 || (a.phase == m.phase - 1 && a.what.kind != sim::TaskKind::copy))
          after.insert(tid(ti));
        // The attention kernel it was launched beside: its SMs free up as the last wave drains.
        // Without a wave term (share 0) its end, as before, and nothing is written.
        if (cm.attention_last_wave_share > 0 && a.phase == m.phase - 1 &&
            a.what.kind == sim::TaskKind::attention &&
            std::find(m.after_tasks.begin(), m.after_tasks.end(), static_cast<int>(ti)) ==
                m.after_tasks.end())
          at_last_wave.insert(tid(ti));
      }
    t.after.assign(after.begin(), after.end());
    t.released_by_last_wave.assign(at_last_wave.begin(), at_last_wave.end());
    t.comm_sms = t.engine == sim::Engine::sm ? comm_sms : 0;
    // An SM-driven transfer is an NCCL send/recv: NCCL carries it through host memory (SHM)
    // where its default P2P level stops (RankTopology::nccl_p2p).
    const bool nccl_shm = t.engine == sim::Engine::sm && m.src >= 0 && m.dst >= 0 &&
                          m.src != m.dst && !rt.nccl_p2p_allowed(m.src, m.dst);
    t.route = m.host_staged || nccl_shm ? topology::RouteMode::host_staged
                                        : topology::RouteMode::automatic;
    // An NCCL collective's message, timed as NCCL runs it (sim::Transfer::collective), where
    // NCCL runs it: SM-driven, between two GPUs.
    if (t.engine == sim::Engine::sm && m.src >= 0 && m.dst >= 0 && m.src != m.dst)
      t.collective = m.nccl;
    t.chunk_bytes = chunk;
    t.staging_buffers = staging;
    t.layer = layer;
    t.kv_blocks = m.kv_blocks;
    w.transfers.push_back(std::move(t));
  }
  // Compute in (phase, scheme order): a rank's FIFO attention stream (sync) must not queue a
  // later ring step before an earlier one.
  std::vector<size_t> order(plan.tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return plan.tasks[x].phase < plan.tasks[y].phase; });
  // Partial outputs: an attention task is one of several pieces of the same queries and heads on
  // its rank (ring steps, local + remote pieces), merged by log-sum-exp.
  using QueryKey = std::tuple<int, std::vector<int>, int, int>;
  auto query_key = [](const AttentionTask& x) {
    return QueryKey{x.rank, x.what.q_ranks, x.what.head_begin, x.what.head_end};
  };
  std::map<QueryKey, int> pieces;
  for (const auto& t : plan.tasks)
    if (t.what.kind == sim::TaskKind::attention) ++pieces[query_key(t)];
  for (size_t i : order) {
    const auto& a = plan.tasks[i];
    sim::ComputeTask c;
    c.id = tid(i);
    c.gpu = endpoint(rt, a.rank, -1);
    c.what = a.what;
    if (c.what.kind == sim::TaskKind::copy) {
      c.duration_s = cm.copy_time_s(a.what.bytes, a.what.copy_kind);
    } else {
      c.duration_s = cm.attention_time_s(a.flops);
      if (c.what.q_ranks.empty()) c.what.q_ranks = {a.rank};
      c.what.partial = pieces[query_key(a)] > 1;
      // Its last wave's share of the kernel time (launch overhead excluded), for the transfers
      // released at its last wave (high_priority_comm=0 above); 0 without a wave term.
      if (comm_behind_compute && c.duration_s > cm.launch_overhead_s)
        c.last_wave_fraction =
            cm.attention_last_wave_share * (c.duration_s - cm.launch_overhead_s) / c.duration_s;
    }
    std::set<std::string> after;
    for (int m : a.after_msgs) after.insert(mid(static_cast<size_t>(m)));
    for (int t : a.after_tasks) after.insert(tid(static_cast<size_t>(t)));
    if (mode == Mode::sync || comm_behind_compute) {
      for (size_t mi : msgs_of[static_cast<size_t>(a.rank)]) {
        const auto& m = plan.messages[mi];
        if (m.phase <= a.phase && m.after_tasks.empty()) after.insert(mid(mi));
      }
      c.stream = "attn" + std::to_string(a.rank);
    }
    c.after.assign(after.begin(), after.end());
    c.layer = layer;
    w.compute.push_back(std::move(c));
  }
  return w;
}

struct RuntimeEntry {
  const char* name;
  const char* description;
  Mode mode;
};

const RuntimeEntry kRuntimes[] = {
    {"sync",
     "communication, then attention, per step of the scheme; collectives on SM-driven "
     "kernels, point-to-point copies on copy engines",
     Mode::sync},
    {"sm_overlap",
     "NCCL-style SM-driven transfers (comm_sms SMs each) overlapped with attention; "
     "P2P-less paths through host memory; high_priority_comm=0: comm on a stream of the "
     "attention stream's priority (PyTorch's default), each transfer after the attention "
     "kernel it was launched beside (from its last wave where the kernel has a wave term)",
     Mode::sm_overlap},
    {"ce_decoupled",
     "copy engines and host-driven staging (no SMs taken); local attention first, "
     "each remote piece as soon as its data arrives",
     Mode::ce_decoupled},
};

}  // namespace

std::vector<PolicyInfo> runtimes() {
  std::vector<PolicyInfo> out;
  for (const auto& r : kRuntimes) out.push_back({r.name, r.description});
  return out;
}

Result<sim::Workload> make_workload(const std::string& runtime, const CommPlan& plan,
                                    const RankTopology& ranks, const ComputeModel& compute,
                                    const std::map<std::string, double>& params, int layer) {
  for (const auto& r : kRuntimes)
    if (runtime == r.name) return build(r.mode, plan, ranks, compute, params, layer);
  return Error{"unknown runtime '" + runtime + "'"};
}

}  // namespace sparsp::policy
