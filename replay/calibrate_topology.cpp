// Topology JSON from calibration fits (see calibrate_topology.hpp).
#include "calibrate_topology.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "sparsp/topology.hpp"

namespace sparsp::replay::detail {

using Json = nlohmann::ordered_json;

namespace {
double gbps(double Bps) { return Bps / 1e9; }
Json gpu_node(const std::string& id, const CalibratedGpu& g) {
  Json n = Json::object();
  n["id"] = id;
  n["kind"] = "gpu";
  n["model"] = g.model;
  if (g.sm_count > 0) n["sm_count"] = g.sm_count;
  if (g.copy_engines > 0) n["copy_engines"] = g.copy_engines;
  if (g.memory_bytes > 0) n["memory_bytes"] = g.memory_bytes;
  return n;
}
Json pcie_link(const std::string& a, const std::string& b, int gen, int width, double cap_Bps,
               double latency_s, double duplex) {
  Json l = Json::object();
  l["a"] = a;
  l["b"] = b;
  l["kind"] = "pcie";
  l["gen"] = std::clamp(gen, 1, 6);
  l["width"] = width;
  if (cap_Bps > 0) l["capacity_GBps"] = gbps(cap_Bps);
  l["latency_us"] = std::max(0.0, latency_s) * 1e6;
  l["duplex_factor"] = std::clamp(duplex, 0.5, 1.0);
  return l;
}
}  // namespace

double concurrent_copies(const std::vector<double>& ends_s) {
  if (ends_s.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(ends_s.begin(), ends_s.end());
  if (!(*lo > 0)) return 0;
  return static_cast<double>(ends_s.size()) * *lo / *hi;
}

bool peer_is_nvlink(const CalibratedPeer& p, const std::vector<CalibratedGpu>& gpus) {
  if (p.nvlink_count > 0) return true;
  if (!p.p2p || p.a < 0 || p.b < 0 || p.a >= static_cast<int>(gpus.size()) ||
      p.b >= static_cast<int>(gpus.size()))
    return false;
  auto pcie = [](const CalibratedGpu& g) { return std::max(g.h2d_Bps, g.d2h_Bps); };
  const double fastest = std::max(pcie(gpus[p.a]), pcie(gpus[p.b]));
  return fastest > 0 && p.uni_Bps > 1.25 * fastest;
}

std::string calibrated_topology_json(const std::string& name,
                                     const std::vector<CalibratedGpu>& gpus,
                                     const std::vector<CalibratedPeer>& peers, int virtual_ranks,
                                     double launch_overhead_s, const topology::NcclFigures& nccl,
                                     const std::string& measured_compute_json) {
  Json root = Json::object();
  root["schema_version"] = 1;
  root["name"] = name;
  std::string src =
      "sparsp calibrate: measured copy-engine bandwidths fitted as t = latency + bytes / bandwidth "
      "(least squares, relative error); link latency = fitted latency - simulator launch overhead";
  if (virtual_ranks > 1)
    src += "; " + std::to_string(virtual_ranks) +
           " ranks folded onto GPU 0 behind a virtual switch (replay --devices 0,0,...)";
  root["source"] = src;
  const bool any_p2p =
      std::any_of(peers.begin(), peers.end(), [](const CalibratedPeer& p) { return p.p2p; });
  root["p2p"] = virtual_ranks > 1 || any_p2p;
  Json nodes = Json::array(), links = Json::array();
  std::vector<int> numa;
  for (const auto& g : gpus) numa.push_back(std::max(0, g.numa_node));
  const int sockets = numa.empty() ? 1 : *std::max_element(numa.begin(), numa.end()) + 1;
  for (int s = 0; s < sockets; ++s) {
    Json c = Json::object();
    c["id"] = "cpu" + std::to_string(s);
    c["kind"] = "cpu";
    c["numa_node"] = s;
    nodes.push_back(c);
  }
  // The simulator charges a copy launch_overhead_s plus the hop latencies; the per-chunk cost of
  // host staging is its own term (SimOptions::staging_chunk_overhead_s), not a link latency.
  auto link_latency = [&](const CalibratedGpu& g) {
    return std::max(0.0, g.latency_s - launch_overhead_s);
  };
  auto link_of = [&](const CalibratedGpu& g) {
    const double cap = std::max(g.h2d_Bps, g.d2h_Bps);
    const double duplex =
        cap > 0 && g.bidir_aggregate_Bps > 0 ? g.bidir_aggregate_Bps / (2 * cap) : 1.0;
    return std::make_pair(cap, duplex);
  };
  if (virtual_ranks > 1 && !gpus.empty()) {
    const CalibratedGpu& g = gpus[0];
    const auto [cap, duplex] = link_of(g);
    Json sw = Json::object();
    sw["id"] = "vsw0";
    sw["kind"] = "pcie_switch";
    nodes.push_back(sw);
    links.push_back(pcie_link("cpu" + std::to_string(numa[0]), "vsw0", g.pcie_gen, g.pcie_width,
                              cap, link_latency(g), duplex));
    CalibratedGpu share = g;
    share.sm_count = std::max(1, g.sm_count / virtual_ranks);
    for (int r = 0; r < virtual_ranks; ++r) {
      nodes.push_back(gpu_node("gpu" + std::to_string(r), share));
      // Device-local copy: one read and one write of HBM; each virtual rank's downlink carries it.
      links.push_back(pcie_link("vsw0", "gpu" + std::to_string(r), g.pcie_gen, g.pcie_width,
                                g.d2d_Bps > 0 ? g.d2d_Bps : 1e12, 0.0, 1.0));
    }
  } else {
    for (size_t i = 0; i < gpus.size(); ++i) {
      const auto [cap, duplex] = link_of(gpus[i]);
      nodes.push_back(gpu_node("gpu" + std::to_string(i), gpus[i]));
      links.push_back(pcie_link("cpu" + std::to_string(numa[i]), "gpu" + std::to_string(i),
                                gpus[i].pcie_gen, gpus[i].pcie_width, cap, link_latency(gpus[i]),
                                duplex));
    }
  }
  // NVLink: one link per unordered pair, from the two directions' measurements.
  if (virtual_ranks <= 1) {
    for (const CalibratedPeer& p : peers) {
      if (p.a >= p.b || !peer_is_nvlink(p, gpus)) continue;
      const CalibratedPeer* back = nullptr;
      for (const CalibratedPeer& q : peers)
        if (q.a == p.b && q.b == p.a) back = &q;
      const double cap = back && back->uni_Bps > 0 ? 0.5 * (p.uni_Bps + back->uni_Bps) : p.uni_Bps;
      const double lat =
          back && back->uni_Bps > 0 ? 0.5 * (p.latency_s + back->latency_s) : p.latency_s;
      // Nominal 25 GB/s per link per direction x efficiency 0.88 (topology/README.md).
      const int count = p.nvlink_count > 0
                            ? p.nvlink_count
                            : std::clamp(static_cast<int>(std::lround(cap / (25e9 * 0.88))), 1, 64);
      Json l = Json::object();
      l["a"] = "gpu" + std::to_string(p.a);
      l["b"] = "gpu" + std::to_string(p.b);
      l["kind"] = "nvlink";
      l["count"] = count;
      if (cap > 0) l["capacity_GBps"] = gbps(cap);
      l["latency_us"] = std::max(0.0, lat - launch_overhead_s) * 1e6;
      const double duplex =
          cap > 0 && p.bidir_aggregate_Bps > 0 ? p.bidir_aggregate_Bps / (2 * cap) : 1.0;
      l["duplex_factor"] = std::clamp(duplex, 0.5, 1.0);
      links.push_back(std::move(l));
    }
  }
  if (nccl.any() && virtual_ranks <= 1) {
    Json nc = Json::object();
    if (nccl.p2p_Bps > 0) nc["p2p_GBps"] = gbps(nccl.p2p_Bps);
    if (nccl.p2p_bidir_Bps > 0) nc["p2p_bidir_GBps"] = gbps(nccl.p2p_bidir_Bps);
    if (nccl.host_Bps > 0) nc["host_GBps"] = gbps(nccl.host_Bps);
    if (nccl.host_bidir_Bps > 0) nc["host_bidir_GBps"] = gbps(nccl.host_bidir_Bps);
    if (nccl.p2p_latency_s > 0) nc["p2p_latency_us"] = nccl.p2p_latency_s * 1e6;
    if (nccl.host_latency_s > 0) nc["host_latency_us"] = nccl.host_latency_s * 1e6;
    nc["source"] =
        "sparsp calibrate: NCCL send/recv between the first two GPUs, 64 KiB-max sizes, fitted "
        "bandwidth; one way = mean of both directions; host = NCCL_P2P_DISABLE=1";
    root["nccl"] = std::move(nc);
  }
  root["nodes"] = std::move(nodes);
  root["links"] = std::move(links);
  if (!measured_compute_json.empty()) root["measured_compute"] = Json::parse(measured_compute_json);
  return root.dump(2) + "\n";
}

}  // namespace sparsp::replay::detail

namespace sparsp::replay::detail {

Result<std::string> topology_from_machine(const std::string& text, const std::string& src,
                                          int virtual_ranks, double launch_overhead_s) {
  auto parsed = parse_json<Json>(text, src);
  if (!parsed) return parsed.error();
  const Json& m = *parsed;
  if (!m.is_object() || m.value("schema", "") != "sparsp.machine")
    return input_error(src, "/schema", "expected \"sparsp.machine\"");
  std::vector<CalibratedGpu> gpus;
  std::vector<CalibratedPeer> peers;
  topology::NcclFigures nccl;
  try {
    std::map<std::string, const Json*> fits;
    for (const Json& f : m.at("fits")) fits[f.at("name").get<std::string>()] = &f;
    // Re-fit from the raw points where present (so a machine JSON is reproducible data and fit
    // improvements apply to old measurements); "staged:" fits keep their stored numbers.
    auto refit = [&](const std::string& k) -> PathFit {
      PathFit f;
      auto it = fits.find(k);
      if (it == fits.end()) return f;
      const Json& j = *it->second;
      f.bandwidth_Bps = j.at("bandwidth_GBps").get<double>() * 1e9;
      f.latency_s = j.at("latency_us").get<double>() * 1e-6;
      f.aggregate_Bps = j.value("aggregate_GBps", 0.0) * 1e9;
      if (k.rfind("staged:", 0) != 0 && j.contains("points")) {
        std::vector<double> x, t;
        for (const Json& p : j["points"]) {
          x.push_back(p.at("bytes").get<double>());
          t.push_back(p.at("time_us").get<double>() * 1e-6);
        }
        if (x.size() >= 2) {
          const double flows = f.aggregate_Bps > 0 && f.bandwidth_Bps > 0
                                   ? std::round(f.aggregate_Bps / f.bandwidth_Bps)
                                   : 1;
          f = fit_latency_bandwidth(k, x, t);
          if (flows > 1) f.aggregate_Bps = flows * f.bandwidth_Bps;
        }
      }
      return f;
    };
    auto bw = [&](const std::string& k) { return refit(k).bandwidth_Bps; };
    auto agg = [&](const std::string& k) { return refit(k).aggregate_Bps; };
    auto lat = [&](const std::string& k) { return refit(k).latency_s; };
    std::vector<int> ordinals;
    for (const Json& d : m.at("devices")) {
      CalibratedGpu g;
      const std::string k = std::to_string(d.at("ordinal").get<int>());
      g.model = d.at("name").get<std::string>();
      g.sm_count = d.value("sm_count", 0);
      g.copy_engines = std::max(1, d.value("async_engine_count", 2));
      g.memory_bytes = d.value("memory_bytes", 0.0);
      g.numa_node = std::max(0, std::atoi(d.value("numa_node", std::string("0")).c_str()));
      const std::string speed = d.value("max_link_speed", std::string());
      const double gts = std::atof(speed.c_str());
      g.pcie_gen = gts >= 60   ? 6
                   : gts >= 30 ? 5
                   : gts >= 15 ? 4
                   : gts >= 7  ? 3
                   : gts >= 4  ? 2
                   : gts > 0   ? 1
                               : 5;
      const int w = std::atoi(d.value("max_link_width", std::string("16")).c_str());
      g.pcie_width = w > 0 ? w : 16;
      g.h2d_Bps = bw("h2d:" + k);
      g.d2h_Bps = bw("d2h:" + k);
      g.bidir_aggregate_Bps = agg("bidir:" + k);
      g.latency_s = 0.5 * (lat("h2d:" + k) + lat("d2h:" + k));
      g.d2d_Bps = bw("d2d:" + k);
      g.staged_chunk_s = lat("staged:" + k);
      gpus.push_back(g);
      ordinals.push_back(d.at("ordinal").get<int>());
    }
    // NV# per pair from the recorded `nvidia-smi topo -m` (GPU k of the matrix = ordinal k).
    std::vector<std::vector<int>> nv;
    if (m.contains("nvidia_smi_topo") && m["nvidia_smi_topo"].is_string()) {
      auto imported = topology::import_nvidia_smi(m["nvidia_smi_topo"].get<std::string>(),
                                                  src + ":/nvidia_smi_topo");
      if (imported.ok()) {
        const int n = imported->num_gpus();
        nv.assign(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), 0));
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) nv[i][j] = i == j ? 0 : imported->nvlink_count(i, j);
      }
    }
    std::map<std::pair<int, int>, bool> access;
    if (m.contains("p2p_access"))
      for (const Json& a : m["p2p_access"])
        access[{a.at("from").get<int>(), a.at("to").get<int>()}] = a.at("access").get<bool>();
    for (size_t i = 0; i < ordinals.size(); ++i)
      for (size_t j = 0; j < ordinals.size(); ++j) {
        if (i == j) continue;
        const int oi = ordinals[i], oj = ordinals[j];
        const std::string name = std::to_string(oi) + "->" + std::to_string(oj);
        if (!fits.count("p2p:" + name)) continue;
        CalibratedPeer p;
        p.a = static_cast<int>(i);
        p.b = static_cast<int>(j);
        const PathFit f = refit("p2p:" + name);
        p.uni_Bps = f.bandwidth_Bps;
        p.latency_s = f.latency_s;
        auto it = access.find({oi, oj});
        p.p2p = it != access.end() && it->second;
        if (i < j)
          p.bidir_aggregate_Bps =
              agg("p2p_bidir:" + std::to_string(oi) + "<->" + std::to_string(oj));
        if (oi >= 0 && oj >= 0 && static_cast<size_t>(std::max(oi, oj)) < nv.size())
          p.nvlink_count = nv[oi][oj];
        peers.push_back(p);
      }
    // NCCL send/recv (calibrate's nccl_sweeps): one way = mean of the directions measured.
    auto one_way = [&](const std::string& prefix, bool latency) {
      double sum = 0;
      int n = 0;
      for (const auto& [k, f] : fits)
        if (k.rfind(prefix + ":", 0) == 0) {
          const PathFit x = refit(k);
          sum += latency ? x.latency_s : x.bandwidth_Bps;
          ++n;
        }
      return n > 0 ? sum / n : 0.0;
    };
    auto both_ways = [&](const std::string& prefix) {
      for (const auto& [k, f] : fits)
        if (k.rfind(prefix + "_bidir:", 0) == 0) return refit(k).aggregate_Bps;
      return 0.0;
    };
    nccl.p2p_Bps = one_way("nccl", false);
    nccl.p2p_latency_s = one_way("nccl", true);
    nccl.p2p_bidir_Bps = both_ways("nccl");
    nccl.host_Bps = one_way("nccl_shm", false);
    nccl.host_latency_s = one_way("nccl_shm", true);
    nccl.host_bidir_Bps = both_ways("nccl_shm");
  } catch (const Json::exception& e) {
    return input_error(src, "", std::string("malformed machine JSON: ") + e.what());
  }
  if (gpus.empty()) return input_error(src, "/devices", "no devices");
  std::string name = "calibrated-" + std::to_string(gpus.size()) + "x-" + gpus[0].model;
  std::replace(name.begin(), name.end(), ' ', '-');
  if (virtual_ranks > 1) name += "-folded" + std::to_string(virtual_ranks);
  // The attention kernel's measured figures (calibrate's measured_compute), per physical GPU:
  // folded ranks share it (validate divides it among the ranks computing at once).
  const std::string mc = m.contains("measured_compute") ? m["measured_compute"].dump() : "";
  return calibrated_topology_json(name, gpus, peers, virtual_ranks, launch_overhead_s, nccl, mc);
}

}  // namespace sparsp::replay::detail
