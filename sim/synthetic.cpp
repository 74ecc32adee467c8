// Synthetic networks and flow sets: see synthetic.hpp.
#include "synthetic.hpp"

#include <algorithm>
#include <cmath>

namespace sparsp::sim::synthetic {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double uniform01(uint64_t& s) { return static_cast<double>(splitmix64(s) >> 11) * 0x1.0p-53; }

Net pcie_server(int gpus) {
  Net n;
  n.hosts = gpus;
  auto add = [&](const std::string& name, double cap) {
    n.capacity_Bps.push_back(cap);
    n.names.push_back(name);
    return static_cast<int>(n.capacity_Bps.size()) - 1;
  };
  constexpr double kLink = 25e9, kDuplex = 40e9, kRc = 60e9, kUpi = 20e9, kHop = 0.5e-6;
  const int per_socket = std::max(1, gpus / 2);
  const int per_switch = std::min(8, per_socket);
  struct Dir {
    int up, down, duplex;
  };
  std::vector<Dir> gl(gpus);
  std::vector<int> sw_of(gpus), sock_of(gpus);
  for (int g = 0; g < gpus; ++g) {
    const std::string s = "gpu" + std::to_string(g);
    gl[g] = {add(s + "->sw", kLink), add("sw->" + s, kLink), add(s + "<->sw", kDuplex)};
    sock_of[g] = g / per_socket;
    sw_of[g] = g / per_switch;
  }
  const int nsw = (gpus + per_switch - 1) / per_switch;
  std::vector<Dir> sl(nsw);
  for (int w = 0; w < nsw; ++w) {
    const std::string s = "sw" + std::to_string(w);
    sl[w] = {add(s + "->rc", kLink), add("rc->" + s, kLink), add(s + "<->rc", kDuplex)};
  }
  const int nsock = (gpus + per_socket - 1) / per_socket;
  std::vector<int> rc(nsock);
  for (int k = 0; k < nsock; ++k) rc[k] = add("cpu" + std::to_string(k) + ".rc", kRc);
  const int upi01 = add("cpu0->cpu1", kUpi), upi10 = add("cpu1->cpu0", kUpi);
  n.routes.resize(static_cast<size_t>(gpus) * gpus);
  n.latency_s.resize(n.routes.size(), 0);
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      std::vector<lmm::Use> u{{gl[a].up, 1}, {gl[a].duplex, 1}, {gl[b].down, 1}, {gl[b].duplex, 1}};
      int hops = 2;
      if (sw_of[a] != sw_of[b]) {
        const int wa = sw_of[a], wb = sw_of[b];
        for (int c : {sl[wa].up, sl[wa].duplex, sl[wb].down, sl[wb].duplex}) u.push_back({c, 1});
        u.push_back({rc[sock_of[a]], 1});
        hops += 2;
        if (sock_of[a] != sock_of[b]) {
          u.push_back({rc[sock_of[b]], 1});
          u.push_back({sock_of[a] < sock_of[b] ? upi01 : upi10, 1});
          hops += 1;
        }
      }
      std::sort(u.begin(), u.end(), [](auto& x, auto& y) { return x.constraint < y.constraint; });
      n.routes[static_cast<size_t>(a) * gpus + b] = std::move(u);
      n.latency_s[static_cast<size_t>(a) * gpus + b] = hops * kHop;
    }
  return n;
}

Net rail_cluster(int nodes) {
  constexpr int kPerNode = 8;
  constexpr double kNvl = 450e9, kPcie = 64e9, kNic = 50e9;
  Net n;
  n.hosts = nodes * kPerNode;
  n.gpus_per_node = kPerNode;
  auto add = [&](std::string name, double cap) {
    n.capacity_Bps.push_back(cap);
    n.names.push_back(std::move(name));
  };
  // Per GPU g, constraints rail_gpu_base + 4 g + {0 NVLink out, 1 NVLink in, 2 PCIe up,
  // 3 PCIe down}; its NIC rail_nic_base + 2 g + {0 tx, 1 rx}; leaf k rail_leaf_base + 2 k +
  // {0 up to the spine, 1 down from it}.
  n.rail_gpu_base = 0;
  for (int g = 0; g < n.hosts; ++g) {
    const std::string s = "gpu" + std::to_string(g);
    add(s + ".nvl_out", kNvl);
    add(s + ".nvl_in", kNvl);
    add(s + ".pcie_up", kPcie);
    add(s + ".pcie_down", kPcie);
  }
  n.rail_nic_base = static_cast<int>(n.capacity_Bps.size());
  for (int g = 0; g < n.hosts; ++g) {
    add("nic" + std::to_string(g) + ".tx", kNic);
    add("nic" + std::to_string(g) + ".rx", kNic);
  }
  n.rail_leaf_base = static_cast<int>(n.capacity_Bps.size());
  for (int k = 0; k < kPerNode; ++k) {
    add("leaf" + std::to_string(k) + ".up", nodes * kNic);
    add("leaf" + std::to_string(k) + ".down", nodes * kNic);
  }
  n.never_binds.assign(n.capacity_Bps.size(), 0);
  for (size_t c = static_cast<size_t>(n.rail_leaf_base); c < n.capacity_Bps.size(); ++c)
    n.never_binds[c] = 1;
  return n;
}

std::vector<lmm::Use> Net::route(int src, int dst) const {
  if (gpus_per_node == 0) return routes[static_cast<size_t>(src) * hosts + dst];
  std::vector<lmm::Use> u;
  const int rs = src % gpus_per_node, rd = dst % gpus_per_node;
  if (src / gpus_per_node == dst / gpus_per_node) {
    u = {{rail_gpu_base + 4 * src, 1}, {rail_gpu_base + 4 * dst + 1, 1}};
  } else {
    u = {{rail_gpu_base + 4 * src + 2, 1},
         {rail_gpu_base + 4 * dst + 3, 1},
         {rail_nic_base + 2 * src, 1},
         {rail_nic_base + 2 * dst + 1, 1}};
    if (rs != rd) {
      u.push_back({rail_leaf_base + 2 * rs, 1});
      u.push_back({rail_leaf_base + 2 * rd + 1, 1});
    }
  }
  std::sort(u.begin(), u.end(), [](auto& x, auto& y) { return x.constraint < y.constraint; });
  return u;
}

Net random_split_duplex(uint64_t seed, int hosts, int links) {
  Net n;
  n.hosts = hosts;
  n.split_duplex_pairs = true;
  uint64_t s = seed;
  std::vector<double> lat(links);
  for (int l = 0; l < links; ++l) {
    const double cap = std::round(1e9 + uniform01(s) * 49e9);
    n.capacity_Bps.push_back(cap);
    n.capacity_Bps.push_back(cap);
    n.names.push_back("l" + std::to_string(l) + "_UP");
    n.names.push_back("l" + std::to_string(l) + "_DOWN");
    lat[l] = std::round(uniform01(s) * 5000) * 1e-9;
  }
  n.routes.resize(static_cast<size_t>(hosts) * hosts);
  n.latency_s.resize(n.routes.size(), 0);
  for (int a = 0; a < hosts; ++a)
    for (int b = 0; b < hosts; ++b) {
      if (a == b) continue;
      const int len = 1 + static_cast<int>(splitmix64(s) % 5);
      std::vector<int> picked;
      double latency = 0;
      while (static_cast<int>(picked.size()) < std::min(len, links)) {
        const int l = static_cast<int>(splitmix64(s) % static_cast<uint64_t>(links));
        if (std::find(picked.begin(), picked.end(), l) != picked.end()) continue;
        picked.push_back(l);
        latency += lat[l];
      }
      std::vector<lmm::Use> u;
      for (int l : picked) u.push_back({2 * l + static_cast<int>(splitmix64(s) % 2), 1.0});
      std::sort(u.begin(), u.end(), [](auto& x, auto& y) { return x.constraint < y.constraint; });
      n.routes[static_cast<size_t>(a) * hosts + b] = std::move(u);
      n.latency_s[static_cast<size_t>(a) * hosts + b] = latency;
    }
  return n;
}

std::vector<FlowSpec> random_flows(const Net& net, int n, uint64_t seed, double min_bytes,
                                   double max_bytes, double max_start_s) {
  uint64_t s = seed;
  std::vector<FlowSpec> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    FlowSpec f;
    f.src = static_cast<int>(splitmix64(s) % static_cast<uint64_t>(net.hosts));
    f.dst = static_cast<int>(splitmix64(s) % static_cast<uint64_t>(net.hosts - 1));
    if (f.dst >= f.src) ++f.dst;
    f.bytes = std::round(min_bytes + uniform01(s) * (max_bytes - min_bytes));
    f.start_s = max_start_s > 0 ? std::round(uniform01(s) * max_start_s * 1e9) * 1e-9 : 0;
    out.push_back(f);
  }
  return out;
}

}  // namespace sparsp::sim::synthetic
