// NCCL's collective cost model against hand-worked values from NCCL 2.30.7's tuning constants
// (src/graph/tuning.cc, commit 5067397: ring base latency LL/LL128/Simple 6.6/14.0/8.4 us; ring
// hop latency PCI 1.0/2.5/5.7 us, NVLink 0.6/1.9/3.4 us; llMaxBw Ampere 87.7, Hopper 141 GB/s;
// perChMaxRingLL128Bw Hopper 36.7 GB/s).
#include "sparsp/nccl_model.hpp"

#include <doctest/doctest.h>

using namespace sparsp::sim::nccl;

namespace {
RingSetup pcie8() {
  RingSetup s;
  s.ranks = 8;
  s.channels = 2;
  s.channel_Bps = 12e9;
  s.hw = HwClass::pci;
  s.arch = Arch::ampere;
  return s;
}
}  // namespace

TEST_CASE("nccl model: ring all-gather latency and bandwidth terms (8 PCIe GPUs, Simple)") {
  const RingSetup s = pcie8();
  CHECK(ring_steps(Collective::all_gather, 8) == 7);
  CHECK(ring_steps(Collective::all_reduce, 8) == 14);
  // 8.4 + 7 x 5.7 = 48.3 us
  CHECK(ring_latency_s(Collective::all_gather, Protocol::simple, s) == doctest::Approx(48.3e-6));
  // 8.4 + 14 x 5.7 = 88.2 us
  CHECK(ring_latency_s(Collective::all_reduce, Protocol::simple, s) == doctest::Approx(88.2e-6));
  CHECK(ring_bus_Bps(Protocol::simple, s) == doctest::Approx(24e9));
  // (P-1)/P x 64 MiB / 24 GB/s = 58720256 / 24e9 = 2.44667733 ms, + 48.3 us
  CHECK(ring_time_s(Collective::all_gather, Protocol::simple, 67108864.0, s) ==
        doctest::Approx(2.49497733e-3).epsilon(1e-6));
  // LL: half the bus bandwidth (12 GB/s, under llMaxBw 87.7), 6.6 + 7 x 1.0 = 13.6 us
  CHECK(ring_bus_Bps(Protocol::ll, s) == doctest::Approx(12e9));
  CHECK(ring_latency_s(Collective::all_gather, Protocol::ll, s) == doctest::Approx(13.6e-6));
}

TEST_CASE("nccl model: protocol switch points as NCCL's tuner gives them") {
  // PCIe, LL128 off: LL = Simple where 7/8 B (1/12e9 - 1/24e9) = 34.7 us: B = 951,771 bytes.
  const RingSetup s = pcie8();
  CHECK(choose_protocol(Collective::all_gather, 900e3, s) == Protocol::ll);
  CHECK(choose_protocol(Collective::all_gather, 1.0e6, s) == Protocol::simple);
  RingSetup off = s;
  off.ll128_enabled = false;
  CHECK(choose_protocol(Collective::all_gather, 1e9, off) == Protocol::simple);
  // Hopper NVLink, 16 channels x 20 GB/s, LL128 on: bus LL 141, LL128 min(0.92 x 320, 16 x
  // 36.7) = 294.4, Simple 320 GB/s; latency 10.8 / 27.3 / 32.2 us. LL -> LL128 at
  // 7/8 B (1/141 - 1/294.4) ns = 16.5 us: B = 5.10 MB; LL128 -> Simple at
  // 7/8 B (1/294.4 - 1/320) ns = 4.9 us: B = 20.6 MB.
  RingSetup h;
  h.ranks = 8;
  h.channels = 16;
  h.channel_Bps = 20e9;
  h.hw = HwClass::nvlink;
  h.arch = Arch::hopper;
  h.ll128_enabled = true;
  CHECK(ring_bus_Bps(Protocol::ll128, h) == doctest::Approx(294.4e9));
  CHECK(ring_bus_Bps(Protocol::ll, h) == doctest::Approx(141e9));
  CHECK(choose_protocol(Collective::all_gather, 5.0e6, h) == Protocol::ll);
  CHECK(choose_protocol(Collective::all_gather, 5.2e6, h) == Protocol::ll128);
  CHECK(choose_protocol(Collective::all_gather, 20e6, h) == Protocol::ll128);
  CHECK(choose_protocol(Collective::all_gather, 21.5e6, h) == Protocol::simple);
}

TEST_CASE("nccl model: all-to-all over P2P vs SHM") {
  // 8 ranks, 64 MiB each, 7/8 of it leaves: 58720256 B. Latency 8.4 + 5.7 = 14.1 us.
  // P2P at 25 GB/s: 2.34881 ms. SHM: 2 x 8 x 58720256 B through 100 GB/s host memory: 9.39524 ms.
  const double p2p = alltoall_time_s(8, 67108864.0, Transport::p2p, 25e9, 100e9, HwClass::pci);
  const double shm = alltoall_time_s(8, 67108864.0, Transport::shm, 25e9, 100e9, HwClass::pci);
  CHECK(p2p == doctest::Approx(2.3629102e-3).epsilon(1e-6));
  CHECK(shm == doctest::Approx(9.4093410e-3).epsilon(1e-6));
  // Host memory fast enough (1 TB/s): SHM is link-bound like P2P.
  CHECK(alltoall_time_s(8, 67108864.0, Transport::shm, 25e9, 1e12, HwClass::pci) ==
        doctest::Approx(p2p).epsilon(1e-9));
  CHECK(alltoall_time_s(8, 1e6, Transport::net, 25e9, 1e12, HwClass::pci) == -1);
}
