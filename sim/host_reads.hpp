#pragma once
// Host reads under writes (issue 17; sim/README.md "Host reads under writes"): while a copy-engine
// write to host memory (a D2H copy, the first leg of a host-staged copy) crosses a PCIe link toward
// the host, the copy-engine reads of host memory (H2D copies, the second legs of host-staged
// copies) crossing that link toward the device share `fraction` x its one-direction capacity;
// with no such write they are not limited beyond the link itself. Applies to links of PCIe Gen
// 1..max_gen (SimOptions::host_read_under_write, host_read_under_write_max_gen).
//
// Compiled as one switched resource per such link (engine.hpp, Problem::switched): a write leg's
// task switches it on from start to end, every read leg over the link uses it with coefficient 1.
#include <map>
#include <string>

#include "engine.hpp"
#include "sparsp/topology.hpp"

namespace sparsp::sim {

class HostReadRule {
 public:
  /// fraction in (0, 1) turns the rule on; >= 1 (or <= 0) leaves every task unchanged.
  HostReadRule(const topology::Topology& topo, double fraction, int max_gen);

  /// Task `k` moves `route` on copy engines (k.legs mirror route.legs): adds the read legs' use of
  /// each crossed link's switched resource and the write legs' switches, creating the switched
  /// resources in `p` on first use.
  void apply(const topology::Route& route, Task& k, Problem& p);

 private:
  int switched_for(int link, Problem& p);

  const topology::Topology& topo_;
  double fraction_ = 1;
  std::map<int, int> toward_device_;  // resource index -> link index (a -> b, downstream)
  std::map<int, int> toward_host_;    // resource index -> link index (b -> a, upstream)
  std::map<int, int> switched_;       // link index -> Problem::switched index
};

/// Whether endpoint id `id` ("host0", "node1/host0") is host memory.
bool is_host_endpoint(const std::string& id);

}  // namespace sparsp::sim
