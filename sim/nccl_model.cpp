// NCCL's collective cost model (include/sparsp/nccl_model.hpp for the source and scope).
#include "sparsp/nccl_model.hpp"

#include <algorithm>
#include <array>

namespace sparsp::sim::nccl {
namespace {

constexpr double kUs = 1e-6, kGBps = 1e9;
// tuning.cc ncclTunerConstantsDefaults, ring rows only, [protocol LL, LL128, Simple], us.
constexpr std::array<double, 3> kRingBaseLatency_us = {6.6, 14.0, 8.4};
// hwLatencies[class][Ring][protocol], us: NVLink, PCI, NET.
constexpr std::array<std::array<double, 3>, 3> kRingHwLatency_us = {
    {{0.6, 1.9, 3.4}, {1.0, 2.5, 5.7}, {2.7, 4.0, 14.0}}};
// llMaxBws[arch][single node], GB/s; perChMaxRingLL128Bws[arch][single node], GB/s.
constexpr std::array<double, 4> kLlMaxBw_GBps = {39.0, 87.7, 141.0, 282.0};
constexpr std::array<double, 4> kPerChRingLl128Bw_GBps = {20.0, 20.0, 36.7, 40.0};

int pi(Protocol p) { return static_cast<int>(p); }

}  // namespace

int ring_steps(Collective c, int ranks) {
  if (c == Collective::all_reduce) return 2 * (ranks - 1);
  if (c == Collective::all_gather || c == Collective::reduce_scatter) return ranks - 1;
  return ranks;
}

double ring_latency_s(Collective c, Protocol p, const RingSetup& s) {
  const double hop = kRingHwLatency_us[static_cast<int>(s.hw)][pi(p)];
  return (kRingBaseLatency_us[pi(p)] + ring_steps(c, s.ranks) * hop) * kUs;
}

double ring_bus_Bps(Protocol p, const RingSetup& s) {
  const double bus = s.channels * s.channel_Bps;
  const int a = static_cast<int>(s.arch);
  if (p == Protocol::ll) return std::min(kLlMaxBw_GBps[a] * kGBps, 0.5 * bus);
  if (p == Protocol::ll128)
    return std::min(0.92 * bus, s.channels * kPerChRingLl128Bw_GBps[a] * kGBps);
  return bus;
}

double ring_algo_Bps(Collective c, Protocol p, const RingSetup& s) {
  return ring_bus_Bps(p, s) * s.ranks / ring_steps(c, s.ranks);
}

double ring_time_s(Collective c, Protocol p, double bytes, const RingSetup& s) {
  return ring_latency_s(c, p, s) + bytes / ring_algo_Bps(c, p, s);
}

Protocol choose_protocol(Collective c, double bytes, const RingSetup& s) {
  Protocol best = Protocol::ll;
  double best_s = ring_time_s(c, Protocol::ll, bytes, s);
  for (Protocol p : {Protocol::ll128, Protocol::simple}) {
    if (p == Protocol::ll128 && !s.ll128_enabled) continue;
    const double t = ring_time_s(c, p, bytes, s);
    if (t < best_s) best = p, best_s = t;
  }
  return best;
}

double alltoall_time_s(int ranks, double bytes, Transport t, double gpu_link_Bps,
                       double host_memory_Bps, HwClass hw) {
  if (t == Transport::net || ranks < 2) return -1;
  const double out = bytes * (ranks - 1) / ranks;
  const int cls = static_cast<int>(t == Transport::shm ? HwClass::pci : hw);
  const double latency_s =
      (kRingBaseLatency_us[pi(Protocol::simple)] + kRingHwLatency_us[cls][pi(Protocol::simple)]) *
      kUs;
  double bw_s = out / gpu_link_Bps;
  if (t == Transport::shm) bw_s = std::max(bw_s, 2.0 * ranks * out / host_memory_Bps);
  return latency_s + bw_s;
}

}  // namespace sparsp::sim::nccl
