// Per-platform PCIe figures by CPU family (include/sparsp/topology.hpp, CpuFamily). Every figure
// is from a published measurement named in `source`; where none was found the figure stays at
// the topology default (duplex 0: the link's own factor, cross-socket P2P 1.0) and the source
// says so. Ratios: duplex = bidirectional P2P / (2 x unidirectional) of one pair,
// cross-socket = SYS unidirectional / NODE unidirectional on the same machine.
#include <algorithm>

#include "sparsp/topology.hpp"

namespace sparsp::topology {

const std::vector<CpuFamily>& cpu_families() {
  static const std::vector<CpuFamily> table = {
      {"amd-genoa", 0.98, 0.75,
       "../shared/cases/8x-gen5-direct-attach-dual-socket (2x EPYC 9124, RTX PRO 6000, "
       "p2pBandwidthLatencyTest): duplex 112.3 / (2 x 57.2) = 0.98 (NODE pairs), cross-socket "
       "43 / 57.2 = 0.75 (SYS tier 42-44 GB/s); checked against a dual EPYC 9374F write-up "
       "(voipmonitor/rtx6kpro hardware/pcie-bandwidth.md: ~39 of ~54 GB/s = 0.72)"},
      {"amd-trpro-7000", 0.94, 1.0,
       "../shared/cases/8x-gen5-two-switches-one-socket (Threadripper PRO 7955WX, two Switchtec "
       "Gen5 switches): duplex 101.3 / (2 x 53.9) = 0.94 (bidirectional mean of 24 PIX pairs); "
       "one socket, no cross-socket figure"},
      {"amd-turin", 0.98, 0.90,
       "voipmonitor/rtx6kpro hardware/pcie-bandwidth.md, dual EPYC Turin (4x RTX PRO 6000 WS + 2x "
       "RTX 5090, p2pBandwidthLatencyTest): duplex 111.4 / (2 x 56.6) = 0.98, cross-socket "
       "51.0 / 56.6 = 0.90"},
      {"intel-emr", 0, 1.0,
       "no published per-platform P2P figure found: link defaults (duplex 0.894 of the H200 "
       "replay machine); cpu.peer_coefficient and cpu.root_complex_GBps remain the knobs"},
      {"intel-spr", 0, 1.0,
       "no published per-platform P2P figure found: link defaults (duplex 0.894 of the H200 "
       "replay machine); cpu.peer_coefficient and cpu.root_complex_GBps remain the knobs"},
  };
  return table;
}

std::optional<CpuFamily> find_cpu_family(std::string_view name) {
  for (const CpuFamily& f : cpu_families())
    if (f.name == name) return f;
  return std::nullopt;
}

}  // namespace sparsp::topology
