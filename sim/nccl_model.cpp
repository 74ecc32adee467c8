// NCCL's collective cost model (include/sparsp/nccl_model.hpp for the source and scope).
#include "sparsp/nccl_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>

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
// graph/topo.h per-link NVLink bandwidth, GB/s, by arch row (SM70/SM80, SM80, SM90, SM100).
constexpr std::array<double, 4> kNvlinkLink_GBps = {20.0, 20.0, 20.6, 40.1};
// enqueue.cc NCCL_P2P_LL_THRESHOLD default, bytes per channel.
constexpr double kP2pLlThresholdBytes = 16384;

constexpr const char* kCollectiveNames[] = {"all_to_all", "all_gather", "reduce_scatter",
                                            "all_reduce", "send_recv"};
constexpr const char* kTransportNames[] = {"p2p", "shm", "net"};

bool is_ring(Collective c) {
  return c == Collective::all_gather || c == Collective::reduce_scatter ||
         c == Collective::all_reduce;
}

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

int p2p_channels_per_peer(HwClass hw, double path_Bps, Arch arch) {
  if (hw != HwClass::nvlink) return 2;
  const double link_Bps = kNvlinkLink_GBps[static_cast<int>(arch)] * kGBps;
  return 2 * std::max(1, static_cast<int>(path_Bps / link_Bps));
}

Protocol p2p_protocol(double bytes, int channels_per_peer) {
  return bytes <= channels_per_peer * kP2pLlThresholdBytes ? Protocol::ll : Protocol::simple;
}

double p2p_latency_s(Protocol p, HwClass hw) {
  return (kRingBaseLatency_us[pi(p)] + kRingHwLatency_us[static_cast<int>(hw)][pi(p)]) * kUs;
}

double protocol_efficiency(Protocol p) {
  if (p == Protocol::ll) return 0.5;
  if (p == Protocol::ll128) return 0.92;
  return 1.0;
}

double interpolate_points(const std::vector<CollectivePoint>& points, int gpus, double bytes,
                          Transport transport) {
  const CollectivePoint* lo = nullptr;  // largest bytes <= `bytes`
  const CollectivePoint* hi = nullptr;  // smallest bytes >= `bytes`
  for (const auto& p : points) {
    if (p.gpus != gpus || p.transport != transport) continue;
    if (p.bytes <= bytes && (!lo || p.bytes > lo->bytes)) lo = &p;
    if (p.bytes >= bytes && (!hi || p.bytes < hi->bytes)) hi = &p;
  }
  if (!lo || !hi) return -1;
  if (hi->bytes == lo->bytes) return lo->time_s;
  const double f = (bytes - lo->bytes) / (hi->bytes - lo->bytes);
  return lo->time_s + f * (hi->time_s - lo->time_s);
}

TransferTiming transfer_timing(const TransferContext& x,
                               const std::vector<CollectivePoint>& points) {
  TransferTiming out;
  const HwClass hw = x.transport == Transport::shm ? HwClass::pci : x.hw;
  const int channels = p2p_channels_per_peer(hw, x.path_Bps, x.arch);
  int steps = 1;  // sequential transfers of one rank in the collective
  double model_latency_s = 0;
  if (is_ring(x.op)) {
    RingSetup s;
    s.ranks = x.ranks;
    s.channels = channels;
    s.channel_Bps = x.path_Bps / channels;
    s.hw = hw;
    s.arch = x.arch;
    s.ll128_enabled = x.arch == Arch::hopper || x.arch == Arch::blackwell;
    out.protocol = choose_protocol(x.op, x.collective_bytes, s);
    steps = ring_steps(x.op, x.ranks);
    model_latency_s = ring_latency_s(x.op, out.protocol, s);
    out.latency_s = model_latency_s / steps;
    out.cap_Bps = ring_bus_Bps(out.protocol, s);
  } else {
    out.protocol = p2p_protocol(x.transfer_bytes, channels);
    model_latency_s = p2p_latency_s(out.protocol, hw);
    out.latency_s = model_latency_s;
    out.cap_Bps = protocol_efficiency(out.protocol) * x.path_Bps;
  }
  const double t_s = interpolate_points(points, x.ranks, x.collective_bytes, x.transport);
  if (t_s > 0) {
    const double latency_s = std::min(model_latency_s, 0.5 * t_s);
    out.from_points = true;
    out.latency_s = latency_s / steps;
    const double per_step_s = (t_s - latency_s) / steps;
    out.cap_Bps = x.transfer_bytes > 0 ? x.transfer_bytes / per_step_s : 0;
  }
  return out;
}

const char* collective_name(Collective c) { return kCollectiveNames[static_cast<int>(c)]; }
bool parse_collective(const std::string& name, Collective* out) {
  for (int i = 0; i < 5; ++i)
    if (name == kCollectiveNames[i]) {
      *out = static_cast<Collective>(i);
      return true;
    }
  return false;
}
const char* transport_name(Transport t) { return kTransportNames[static_cast<int>(t)]; }
bool parse_transport(const std::string& name, Transport* out) {
  for (int i = 0; i < 3; ++i)
    if (name == kTransportNames[i]) {
      *out = static_cast<Transport>(i);
      return true;
    }
  return false;
}

}  // namespace sparsp::sim::nccl
