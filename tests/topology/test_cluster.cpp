// Clusters (issue 20): the cluster JSON, NIC choice, inter-node routes against closed forms, the
// on-demand route cache and its bound.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "must_load.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp::topology;

namespace {

using test::must_load;
using test::must_parse;

// Single-flow rate of one leg: the least capacity / coefficient over its resources.
double leg_rate(const Topology& t, const RouteLeg& leg) {
  double r = 0;
  for (const ResourceUse& u : leg.uses) {
    const double x = t.resources()[static_cast<size_t>(u.resource)].capacity_Bps / u.coefficient;
    r = r > 0 ? std::min(r, x) : x;
  }
  return r;
}

std::vector<ResourceUse> all_uses(const Route& r) {
  std::vector<ResourceUse> out;
  for (const RouteLeg& leg : r.legs) out.insert(out.end(), leg.uses.begin(), leg.uses.end());
  return out;
}

// A two-node cluster of one-switch servers: `gpus` GPUs and one ConnectX-7 under the switch
// (PIX: GPUDirect RDMA), PCIe Gen5 x16 everywhere; `fabric` is the fabric object.
std::string small_cluster(int nodes, int gpus, const std::string& fabric) {
  return R"({"schema_version": 1, "name": "small", "cluster": {"version": 1, "nodes": )" +
         std::to_string(nodes) +
         R"(, "server": {"schema_version": 1, "name": "box", "template": {"sockets": 1,
         "switches_per_socket": 1, "gpus_per_switch": )" +
         std::to_string(gpus) + R"(, "gpu_model": "H100 SXM", "pcie_gen": 5}},
         "nics": [{"parent": "sw0", "model": "ConnectX-7"}], "fabric": )" +
         fabric + "}}";
}

}  // namespace

TEST_CASE("cluster presets load, name their endpoints and round-trip") {
  CHECK(cluster_preset_names() ==
        std::vector<std::string>{"16x8-h100-ndr-rail", "2x8-l40-pcie-100gbe"});
  const Topology h = must_load("16x8-h100-ndr-rail");
  CHECK(h.is_cluster());
  CHECK(h.num_nodes() == 16);
  CHECK(h.num_gpus() == 128);
  CHECK(h.gpus_per_node() == 8);
  CHECK(h.num_sockets() == 32);
  CHECK(h.endpoint_index("node1/gpu0") == 8);
  CHECK(h.endpoint_index("gpu137") == -1);  // 128 GPUs
  CHECK(h.endpoint_index("node15/gpu7") == 127);
  CHECK(h.endpoint_index("node16/gpu0") == -1);
  CHECK(h.endpoint_index("node2/host1") == 128 + 2 * 2 + 1);
  CHECK(h.node_of_gpu(127) == 15);
  CHECK(h.path_class(0, 8) == PathClass::net);
  CHECK(h.path_class(8, 9) == PathClass::nvlink);
  CHECK(h.nvlink_count(8, 9) == 18);
  CHECK_FALSE(h.p2p_allowed(0, 8));
  CHECK(h.ancestors(8).front() == "node1/sw0");
  // 16 nodes x (the server's resources) + 16 x 8 NICs x 2 directions + 8 leaves x 2.
  CHECK(h.resources().size() == 16 * h.server().resources().size() + 16 * 8 * 2 + 8 * 2);
  const std::string once = h.to_json();
  const Topology back = must_parse(once);
  CHECK(back.to_json() == once);
  CHECK(back.resources().size() == h.resources().size());
  const Topology l = must_load("2x8-l40-pcie-100gbe");
  CHECK(l.num_gpus() == 16);
  CHECK(must_parse(l.to_json()).to_json() == l.to_json());
}

TEST_CASE("NIC choice by PCIe proximity, GPUDirect RDMA where the path is at most PXB") {
  // 16x8 H100: two ConnectX-7 under each GPU pair's switch (PIX for both GPUs of the pair); the
  // pair spreads over its two NICs by GPU index: gpu0 -> nic0, gpu1 -> nic1, gpu2 -> nic2, ...
  const Topology h = must_load("16x8-h100-ndr-rail");
  for (int g = 0; g < 8; ++g) {
    CAPTURE(g);
    const Route& r = h.route_ref(g, 8 + g).value();  // same local GPU in node 1: same rail
    CHECK_FALSE(r.host_staged);
    REQUIRE(r.legs.size() == 1);
    const std::string nic = "node0/nic" + std::to_string(g);
    CHECK(std::find(r.legs[0].hops.begin(), r.legs[0].hops.end(), nic) != r.legs[0].hops.end());
  }
  // 2x8 L40: one NIC on CPU0's root complex: NODE for socket 0's GPUs, SYS for socket 1's; both
  // beyond PXB, so every inter-node route is host-staged.
  const Topology l = must_load("2x8-l40-pcie-100gbe");
  const Route& a = l.route_ref(0, 8).value();
  CHECK(a.host_staged);
  CHECK(a.staging_host == "host0");
  REQUIRE(a.legs.size() == 2);
  const Route& b = l.route_ref(4, 12).value();  // socket 1 of node 0 -> socket 1 of node 1
  CHECK(b.host_staged);
  CHECK(b.staging_host == "host1");
  // Its second leg crosses node 0's UPI to the NIC and node 1's UPI back down.
  int upi = 0;
  for (const std::string& hop : b.legs[1].hops) upi += hop == "node0/cpu0" || hop == "node1/cpu0";
  CHECK(upi == 2);
}

TEST_CASE("a GDR flow between nodes on a rail is bounded by the NIC: closed form for 1 GiB") {
  const Topology h = must_load("16x8-h100-ndr-rail");
  const Route& r =
      h.route_ref(h.endpoint_index("node0/gpu0"), h.endpoint_index("node1/gpu0")).value();
  REQUIRE(r.legs.size() == 1);
  // gpu0 -> sw0 -> nic0 (PCIe Gen5 x16, both), nic0 -> leaf0 -> node1/nic0 (400 Gb/s = 50 GB/s),
  // node1/nic0 -> sw0 -> gpu0 (Gen5 x16): the bottleneck is min(NIC, PCIe path).
  const double expect_Bps = std::min(400e9 / 8, pcie_usable_Bps(5, 16));
  CHECK(expect_Bps == doctest::Approx(50e9));  // Gen5 x16 DMA carries more than the NIC
  CHECK(leg_rate(h, r.legs[0]) == doctest::Approx(expect_Bps).epsilon(1e-12));
  // Four PCIe hops of 0.1 us and two fabric hops of 0.5 us.
  CHECK(r.legs[0].latency_s == doctest::Approx(4 * 0.1e-6 + 2 * 0.5e-6).epsilon(1e-12));
  const double gib = 1 << 30;
  // 2^30 B / 50e9 B/s = 21.474836 ms, plus 1.4 us.
  CHECK(gib / leg_rate(h, r.legs[0]) + r.legs[0].latency_s ==
        doctest::Approx(0.021474836 + 1.4e-6).epsilon(1e-8));
  CHECK(max_min_rates(h, {all_uses(r)})[0] == doctest::Approx(50e9));
  // Inside one node nothing changes: the server's NVLink route, moved to node 1.
  const Route& in = h.route_ref(8, 9).value();
  CHECK(in.path_class == PathClass::nvlink);
  CHECK(in.legs[0].src == "gpu8");
  CHECK(leg_rate(h, in.legs[0]) ==
        doctest::Approx(leg_rate(h.server(), h.server().route_ref(0, 1)->legs[0])));
}

TEST_CASE("host-staged inter-node flow on the 2x8 L40: bounded by the 100 GbE port") {
  const Topology l = must_load("2x8-l40-pcie-100gbe");
  const Route& r = l.route_ref(0, 8).value();
  // Leg 1: gpu0 -> host0 of node 0 (Gen4 x16 DMA); leg 2: host0 -> nic0 -> leaf0 -> nic0 ->
  // host0 of node 1 -> gpu8. 100 Gb/s = 12.5 GB/s is below Gen4 x16 DMA.
  CHECK(pcie_usable_Bps(4, 16) > 12.5e9);
  CHECK(leg_rate(l, r.legs[0]) == doctest::Approx(pcie_usable_Bps(4, 16)));
  CHECK(leg_rate(l, r.legs[1]) == doctest::Approx(12.5e9));
  // Pipelined: 1 GiB at the slower leg, 2^30 / 12.5e9 = 85.899 ms.
  CHECK(std::pow(2.0, 30) / std::min(leg_rate(l, r.legs[0]), leg_rate(l, r.legs[1])) ==
        doctest::Approx(0.0858993459).epsilon(1e-9));
  // Forcing P2P across nodes is an error naming both nodes.
  const auto& p = l.route_ref(0, 8, RouteMode::p2p);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("different nodes: node0, node1") != std::string::npos);
}

TEST_CASE("two GPUs behind one switch share its NIC: max-min halves the NIC rate") {
  const Topology t = must_parse(small_cluster(2, 2, R"({"kind": "rail", "port_GBps": 50,
                                               "latency_us": 1})"));
  const Route& a = t.route_ref(0, 2).value();  // node0/gpu0 -> node1/gpu0
  const Route& b = t.route_ref(1, 3).value();  // node0/gpu1 -> node1/gpu1
  CHECK_FALSE(a.host_staged);                  // PIX to the NIC: GPUDirect RDMA
  const auto rates = max_min_rates(t, {all_uses(a), all_uses(b)});
  // Both flows cross node0/nic0 -> leaf0 (50 GB/s): 25 GB/s each.
  CHECK(rates[0] == doctest::Approx(25e9));
  CHECK(rates[1] == doctest::Approx(25e9));
}

TEST_CASE("an oversubscribed spine: a flow between leaves gets the leaf uplink's share") {
  // Four nodes, two per leaf, 2:1 oversubscription: each leaf's uplink carries
  // 2 nodes x 50 GB/s / 2 = 50 GB/s. Two flows leaf0 -> leaf1 share it: 25 GB/s each; one flow
  // inside a leaf does not touch the spine (50 GB/s).
  const Topology t = must_parse(
      small_cluster(4, 1, R"({"kind": "leaf_spine", "nodes_per_leaf": 2, "oversubscription": 2,
               "port_GBps": 50, "latency_us": 1, "leaf_ports": 3})"));
  const Route& x = t.route_ref(0, 2).value();  // node0 -> node2 (other leaf)
  const Route& y = t.route_ref(1, 3).value();  // node1 -> node3 (other leaf)
  const Route& z = t.route_ref(0, 1).value();  // node0 -> node1 (same leaf)
  CHECK(std::find(x.legs[0].hops.begin(), x.legs[0].hops.end(), "spine") != x.legs[0].hops.end());
  CHECK(std::find(z.legs[0].hops.begin(), z.legs[0].hops.end(), "spine") == z.legs[0].hops.end());
  const auto both = max_min_rates(t, {all_uses(x), all_uses(y)});
  CHECK(both[0] == doctest::Approx(25e9));
  CHECK(both[1] == doctest::Approx(25e9));
  CHECK(max_min_rates(t, {all_uses(z)})[0] == doctest::Approx(50e9));
  // NIC -> leaf, leaf -> spine, spine -> leaf, leaf -> NIC at 1 us, four PCIe hops at 0.1 us.
  CHECK(x.legs[0].latency_s == doctest::Approx(4e-6 + 0.4e-6));
}

TEST_CASE("leaf uplinks never bind without oversubscription, and bind with it") {
  // 1:1, four nodes, two per leaf: each leaf uplink is 2 x 50 GB/s = 100 GB/s, the two NIC links
  // below it together, and every flow through it crosses one of them: it can never bind. At 2:1
  // the uplink is 50 GB/s and binds (the test above: two flows get 25 GB/s each). Nothing else
  // is marked.
  for (int over : {1, 2}) {
    CAPTURE(over);
    const Topology t = must_parse(small_cluster(
        4, 1,
        R"({"kind": "leaf_spine", "nodes_per_leaf": 2, "oversubscription": )" +
            std::to_string(over) + R"(, "port_GBps": 50, "latency_us": 1, "leaf_ports": )" +
            std::to_string(over == 1 ? 4 : 3) + "}"));
    int uplinks = 0, marked = 0;
    for (const Resource& r : t.resources()) {
      const bool uplink = r.name.find("spine") != std::string::npos;
      uplinks += uplink;
      marked += r.never_binds;
      if (!uplink) CHECK_FALSE(r.never_binds);
      if (uplink) CHECK(r.never_binds == (over == 1));
    }
    CHECK(uplinks == 4);  // 2 leaves x (up, down)
    CHECK(marked == (over == 1 ? 4 : 0));
  }
}

TEST_CASE("1,024-GPU cluster: routes are computed on demand, memory follows the pairs asked") {
  // 128 nodes x 8 H100: 1,024 GPUs. Nothing is precomputed; a ring asks 1,024 routes and holds
  // exactly those (a precomputed table would hold 3 x (1024 + 256)^2 = 4.9M).
  std::string text = R"({"schema_version": 1, "name": "k", "cluster": {"version": 1,
      "nodes": 128, "server": "8x-h100-sxm-nvswitch", "nics": [)";
  for (int k = 0; k < 8; ++k)
    text += std::string(k ? "," : "") + R"({"parent": "sw)" + std::to_string(k / 2) +
            R"(", "model": "ConnectX-7"})";
  text += R"(], "fabric": {"kind": "rail", "port_GBps": 50, "latency_us": 0.5}}})";
  const Topology t = must_parse(text);
  REQUIRE(t.num_gpus() == 1024);
  CHECK(t.cached_routes() == 0);
  std::vector<const sparsp::Result<Route>*> first;
  for (int g = 0; g < 1024; ++g) first.push_back(&t.route_ref(g, (g + 1) % 1024));
  CHECK(t.cached_routes() == 1024);
  // Stable references, and no growth when asked again, from several threads at once.
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int g = 0; g < 1024; ++g)
        mismatches[static_cast<size_t>(w)] +=
            &t.route_ref(g, (g + 1) % 1024) != first[static_cast<size_t>(g)];
    });
  for (auto& th : threads) th.join();
  CHECK(mismatches == std::vector<int>(4, 0));
  CHECK(t.cached_routes() == 1024);
  // Every 8th hop of the ring crosses nodes, the rest stay on NVLink.
  CHECK(first[7]->value().path_class == PathClass::net);
  CHECK(first[6]->value().path_class == PathClass::nvlink);
  // A copy shares the cache.
  const Topology copy = t;
  CHECK(&copy.route_ref(0, 1) == first[0]);
  // One server still precomputes its 3 x (8 GPUs + 2 hosts)^2 routes.
  CHECK(must_load("8x-h100-sxm-nvswitch").cached_routes() == 300);
}

TEST_CASE("cluster input errors name the place") {
  auto err = [](const std::string& text) {
    auto t = Topology::from_json_text(text, "c.json");
    REQUIRE_FALSE(t.ok());
    return t.error().message;
  };
  const std::string fab = R"({"kind": "rail", "port_GBps": 50, "latency_us": 1})";
  CHECK(err(small_cluster(257, 1, fab)) ==
        "c.json:/cluster/nodes: more than 256 server nodes (257)");
  CHECK(err(small_cluster(200, 8, fab)) ==
        "c.json:/cluster/nodes: 200 nodes x 8 GPUs = 1600 GPUs (at most 1024)");
  CHECK(err(small_cluster(2, 1, R"({"kind": "ring", "port_GBps": 50, "latency_us": 1})")) ==
        "c.json:/cluster/fabric/kind: unknown fabric kind 'ring' (expected rail or leaf_spine)");
  CHECK(err(small_cluster(4, 1, R"({"kind": "leaf_spine", "nodes_per_leaf": 2,
      "oversubscription": 2, "port_GBps": 50, "latency_us": 1, "leaf_ports": 4})")) ==
        "c.json:/cluster/fabric/leaf_ports: leaf ports do not add up: 2 down + 1 up = 3, not 4");
}
