// Physical-layer bandwidth models of PCIe and NVLink links (see topology/README.md, "Link
// bandwidth", for the derivation and the sources of every constant).
#include <array>

#include "sparsp/topology.hpp"
#include "sparsp/units.hpp"

namespace sparsp::topology {
namespace {

// Per-lane line rate in GT/s for PCIe gen 1..6 (PCI-SIG Base Specification 1.0a .. 6.0).
constexpr std::array<double, 7> kLineRateGTps = {0, 2.5, 5.0, 8.0, 16.0, 32.0, 64.0};

// Encoding efficiency: 8b/10b (gen 1-2), 128b/130b (gen 3-5); gen 6 uses 1b/1b PAM4 in 256 B
// FLITs of which 242 B carry TLP and DLLP bytes (236 TLP + 6 DLP; 8 B CRC + 6 B FEC are lost).
double encoding(int gen) {
  if (gen <= 2) return 8.0 / 10.0;
  if (gen <= 5) return 128.0 / 130.0;
  return 242.0 / 256.0;
}

// TLP efficiency of a posted memory write with a 256 B max payload (Xilinx WP350, "Understanding
// Performance of PCI Express Systems", table 1): 256 B payload + 24 B overhead (start 1 B,
// sequence 2 B, 4DW header 16 B, LCRC 4 B, end 1 B; gen 3-5 replace start/end by a 4 B STP token
// holding the sequence number, same 24 B). Gen 6 FLIT mode drops per-TLP framing, sequence and
// LCRC (they live in the FLIT), leaving the 16 B header.
double tlp_efficiency(int gen) {
  constexpr double kPayload = 256.0;
  return gen <= 5 ? kPayload / (kPayload + 24.0) : kPayload / (kPayload + 16.0);
}

}  // namespace

// DMA efficiency: what a GPU copy engine achieves of the TLP-level rate once DLLP traffic (ACK and
// flow-control updates), read-request/completion round trips and copy-engine overheads are paid.
// 0.92 from NVIDIA's published bandwidthTest figures on PCIe hosts: H100-PCIe (Gen5 x16) and the
// H200 replay machine measure 53-55 GB/s of 57.6 GB/s TLP-level (0.92-0.96), Gen4 x16 boards
// 24-26.5 GB/s of 28.8 GB/s (0.85-0.92); 0.92 sits inside both ranges (see topology/README.md).
constexpr double kPcieDmaEfficiency = 0.92;

// NVLink: measured copy-engine throughput over nominal. H200 NV18 (the replay machine, cudaMemcpy
// peer with copy engines): 396 GB/s per direction of 18 x 25 GB/s = 450 GB/s nominal -> 0.88.
constexpr double kNvlinkEfficiency = 396.0 / 450.0;

double pcie_raw_Bps(int gen, int width) {
  if (gen < 1 || gen > 6) return 0;
  return kLineRateGTps[gen] * 1e9 * width / 8.0;
}

double pcie_usable_Bps(int gen, int width) {
  if (gen < 1 || gen > 6) return 0;
  return pcie_raw_Bps(gen, width) * encoding(gen) * tlp_efficiency(gen) * kPcieDmaEfficiency;
}

double pcie_default_duplex_factor() { return 99.0 / (55.4 + 55.3); }

double nvlink_default_per_link_Bps() { return units::GBps_to_Bps(25.0); }

// Per-link rate per direction by NVLink generation: NVLink 1 (P100 whitepaper: 4 links x 20 GB/s
// per direction = 160 GB/s total), 2 (V100 whitepaper: 6 x 25 GB/s = 300 GB/s total), 3 (A100
// whitepaper: 12 x 25 GB/s = 600 GB/s total), 4 (H100 whitepaper: 18 x 25 GB/s = 900 GB/s
// total), 5 (Blackwell/HGX B200 datasheet: 18 x 50 GB/s = 1.8 TB/s total).
double nvlink_per_link_Bps_of_gen(int gen) {
  constexpr std::array<double, 6> kPerLinkGBps = {0, 20.0, 25.0, 25.0, 25.0, 50.0};
  if (gen < 1 || gen > 5) return 0;
  return units::GBps_to_Bps(kPerLinkGBps[static_cast<size_t>(gen)]);
}

// NVLink generation by the GPU family that introduced it: Pascal sm_60 (1), Volta sm_70 (2),
// Ampere sm_80 (3), Hopper sm_90 (4), Blackwell sm_100 (5). Other minor versions (sm_86 and
// sm_89 consumer/workstation parts) carry no NVSwitch-class NVLink: 0.
int nvlink_gen_of_sm(int sm_version) {
  switch (sm_version) {
    case 60:
      return 1;
    case 70:
      return 2;
    case 80:
      return 3;
    case 90:
      return 4;
    case 100:
      return 5;
    default:
      return 0;
  }
}

double nvlink_usable_Bps(int count, double per_link_Bps) {
  return count * per_link_Bps * kNvlinkEfficiency;
}

}  // namespace sparsp::topology
