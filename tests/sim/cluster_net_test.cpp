// simulate() across the nodes of a cluster (issue 20): a ring over two 8x H100 nodes is bound by
// its two inter-node transfers, whose time has a closed form.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "sparsp/sim.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

TEST_CASE("simulate: a ring over two cluster nodes is NET-bound (closed form)") {
  auto t = topology::Topology::load("16x8-h100-ndr-rail");
  REQUIRE(t.ok());
  // Ring gpu0 -> gpu1 -> ... -> gpu15 -> gpu0 (nodes 0 and 1), 1 GiB each, all at once.
  std::string w = R"({"schema_version": 1, "transfers": [)";
  for (int g = 0; g < 16; ++g)
    w += std::string(g ? "," : "") + R"({"id": "r)" + std::to_string(g) + R"(", "src": "gpu)" +
         std::to_string(g) + R"(", "dst": "gpu)" + std::to_string((g + 1) % 16) +
         R"(", "bytes": 1073741824})";
  w += "]}";
  auto work = sim::parse_workload(w, "<ring>");
  REQUIRE(work.ok());
  auto r = sim::simulate(*t, *work);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  // gpu7 -> gpu8 (node0/gpu7 -> node1/gpu0) leaves on node0/nic7 (rail 7) and arrives on
  // node1/nic0 (rail 0): GDR at both ends (PIX), across the spine. Nothing else shares its
  // resources, so it runs alone at min(400 Gb/s = 50 GB/s, Gen5 x16 DMA) = 50 GB/s. Time:
  // launch 2 us + latency (4 PCIe hops x 0.1 us + 4 fabric hops x 0.5 us = 2.4 us) + 2^30 / 50e9
  // = 0.02147483648 s; gpu15 -> gpu0 alike. The NVLink hops (NV18 at 0.88 x 450 GB/s) end first.
  const double net_s = 2e-6 + 2.4e-6 + std::pow(2.0, 30) / 50e9;
  CHECK(r->makespan_s == doctest::Approx(net_s).epsilon(1e-9));
  int at_makespan = 0;
  for (const auto& a : r->activities) at_makespan += std::abs(a.end_s - net_s) < 1e-9;
  CHECK(at_makespan == 2);
}
