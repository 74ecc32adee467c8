// Single-flow figures (what `sparsp topo show` prints) and the small max-min solver behind the
// bidirectional figures.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster.hpp"
#include "sparsp/units.hpp"
#include "topology_impl.hpp"

namespace sparsp::topology {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// All legs of a route as one flow: a pipelined staged copy moves every byte over both legs, so the
// coefficients of a resource used by both legs add up.
std::vector<ResourceUse> merged_uses(const Route& r) {
  std::map<int, double> m;
  for (const RouteLeg& leg : r.legs) {
    for (const ResourceUse& u : leg.uses) m[u.resource] += u.coefficient;
  }
  std::vector<ResourceUse> out;
  for (const auto& [res, c] : m) out.push_back(ResourceUse{res, c});
  return out;
}

double route_latency(const Route& r) {
  double s = 0;
  for (const RouteLeg& leg : r.legs) s += leg.latency_s;
  return s;
}

std::string fmt(double v, int decimals = 1) {
  if (std::isinf(v)) return "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(const std::string& s, size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}

// The node a NIC hangs from (the upstream end of its one tree link), "" if none.
std::string parent_of(const Topology& topo, const std::string& id) {
  for (const Link& l : topo.links()) {
    if (l.b == id && l.kind != LinkKind::nvlink) return l.a;
  }
  return "";
}

}  // namespace

std::vector<double> max_min_rates(const Topology& topo,
                                  const std::vector<std::vector<ResourceUse>>& flows) {
  // Progressive filling over the resources the flows actually use (compact local indices).
  const auto& res = topo.resources();
  std::map<int, size_t> local;
  for (const auto& f : flows) {
    for (const ResourceUse& u : f) local.emplace(u.resource, 0);
  }
  std::vector<double> capacity;
  for (auto& [r, idx] : local) {
    idx = capacity.size();
    capacity.push_back(res[static_cast<size_t>(r)].capacity_Bps);
  }
  std::vector<std::vector<std::pair<size_t, double>>> fl(flows.size());
  for (size_t f = 0; f < flows.size(); ++f) {
    for (const ResourceUse& u : flows[f]) fl[f].emplace_back(local.at(u.resource), u.coefficient);
  }
  std::vector<double> rate(flows.size(), 0.0);
  std::vector<bool> active(flows.size(), false);
  size_t n_active = 0;
  for (size_t f = 0; f < flows.size(); ++f) {
    if (fl[f].empty()) {
      rate[f] = kInf;
    } else {
      active[f] = true;
      ++n_active;
    }
  }
  std::vector<double> remaining = capacity;
  while (n_active > 0) {
    std::vector<double> load(capacity.size(), 0.0);
    for (size_t f = 0; f < flows.size(); ++f) {
      if (!active[f]) continue;
      for (const auto& [r, c] : fl[f]) load[r] += c;
    }
    double delta = kInf;
    for (size_t r = 0; r < capacity.size(); ++r) {
      if (load[r] > 0) delta = std::min(delta, remaining[r] / load[r]);
    }
    for (size_t f = 0; f < flows.size(); ++f) {
      if (active[f]) rate[f] += delta;
    }
    for (size_t r = 0; r < capacity.size(); ++r) remaining[r] -= load[r] * delta;
    for (size_t f = 0; f < flows.size(); ++f) {
      if (!active[f]) continue;
      for (const auto& [r, c] : fl[f]) {
        if (remaining[r] <= 1e-9 * capacity[r]) {
          active[f] = false;
          --n_active;
          break;
        }
      }
    }
  }
  return rate;
}

SingleFlowReport single_flow_report(const Topology& topo) {
  const int g = topo.num_gpus();
  SingleFlowReport rep;
  const auto gsz = static_cast<size_t>(g);
  rep.path_class.assign(gsz, std::vector<PathClass>(gsz, PathClass::self));
  rep.nvlink_count.assign(gsz, std::vector<int>(gsz, 0));
  rep.p2p.assign(gsz, std::vector<bool>(gsz, false));
  rep.bandwidth_Bps.assign(gsz, std::vector<double>(gsz, 0));
  rep.bidir_bandwidth_Bps.assign(gsz, std::vector<double>(gsz, 0));
  rep.latency_s.assign(gsz, std::vector<double>(gsz, 0));
  for (int i = 0; i < g; ++i) {
    for (int j = 0; j < g; ++j) {
      const auto ii = static_cast<size_t>(i), jj = static_cast<size_t>(j);
      rep.path_class[ii][jj] = topo.path_class(i, j);
      rep.nvlink_count[ii][jj] = topo.nvlink_count(i, j);
      if (i == j) continue;
      rep.p2p[ii][jj] = topo.p2p_allowed(i, j);
      const Route& ij = topo.route_ref(i, j).value();
      const Route& ji = topo.route_ref(j, i).value();
      rep.bandwidth_Bps[ii][jj] = max_min_rates(topo, {merged_uses(ij)})[0];
      const auto both = max_min_rates(topo, {merged_uses(ij), merged_uses(ji)});
      rep.bidir_bandwidth_Bps[ii][jj] = both[0] + both[1];
      rep.latency_s[ii][jj] = route_latency(ij);
    }
  }
  for (int i = 0; i < g; ++i) {
    const int host = g + topo.gpu_socket(i);
    const Route& h2d = topo.route_ref(host, i).value();
    const Route& d2h = topo.route_ref(i, host).value();
    rep.h2d_Bps.push_back(max_min_rates(topo, {merged_uses(h2d)})[0]);
    rep.d2h_Bps.push_back(max_min_rates(topo, {merged_uses(d2h)})[0]);
    const auto both = max_min_rates(topo, {merged_uses(h2d), merged_uses(d2h)});
    rep.h2d_bidir_Bps.push_back(both[0] + both[1]);
  }
  return rep;
}

std::string show_text(const Topology& topo) {
  if (topo.is_cluster()) return detail::cluster_show_text(topo);
  const SingleFlowReport rep = single_flow_report(topo);
  const int g = topo.num_gpus();
  std::ostringstream out;
  out << "Topology " << (topo.name().empty() ? "(unnamed)" : topo.name()) << "\n";
  if (!topo.source().empty()) out << "Source: " << topo.source() << "\n";
  out << "GPUs: " << g << "   sockets: " << topo.num_sockets()
      << "   PCIe switches: " << topo.num_switches()
      << "   P2P: " << (topo.p2p_enabled() ? "on" : "off")
      << (topo.p2p_cross_socket() ? "" : " (not across sockets)") << "\n\n";
  // Sockets and switches with the GPUs below them.
  for (int k = 0; k < topo.num_sockets(); ++k) {
    std::string gpus;
    for (int i = 0; i < g; ++i) {
      if (topo.gpu_socket(i) == k) gpus += " gpu" + std::to_string(i);
    }
    int os_numa = k;  // the OS number of the socket's NUMA node (cpu numa_id), as nvidia-smi's
    for (const Node& n : topo.nodes()) {
      if (n.kind == NodeKind::cpu && n.numa_node == k && n.numa_id >= 0) os_numa = n.numa_id;
    }
    out << "socket host" << k << " (NUMA " << os_numa << "):" << (gpus.empty() ? " no GPUs" : gpus)
        << "\n";
  }
  for (const Node& n : topo.nodes()) {
    if (n.kind != NodeKind::pcie_switch && n.kind != NodeKind::root_port) continue;
    std::string gpus;
    for (int i = 0; i < g; ++i) {
      const auto a = topo.ancestors(i);
      if (std::find(a.begin(), a.end(), n.id) != a.end()) gpus += " gpu" + std::to_string(i);
    }
    out << (n.kind == NodeKind::pcie_switch ? "switch " : "host bridge ") << n.id
        << (n.acs_redirect ? " (ACS redirect)" : "") << ":" << (gpus.empty() ? " no GPUs" : gpus)
        << "\n";
  }
  for (const Node& n : topo.nodes()) {
    if (n.kind != NodeKind::nic) continue;
    out << "nic " << n.id << (n.name.empty() ? "" : " " + n.name)
        << (n.ports > 1 ? " (" + std::to_string(n.ports) + " ports)" : "") << ": below "
        << parent_of(topo, n.id) << "\n";
  }
  out << "\n";
  out << "GPU     NUMA  model                                  SMs memory GiB  bf16 TFLOP/s  path "
         "to CPU\n";
  for (int i = 0; i < g; ++i) {
    const GpuSpec& s = topo.gpu(i);
    std::string path;
    for (const auto& a : topo.ancestors(i)) path += (path.empty() ? "" : " > ") + a;
    char line[256];
    std::snprintf(line, sizeof line, "gpu%-4d %4d  %-37s %4d  %9.0f  %12.1f  %s\n", i,
                  topo.gpu_numa_node(i), s.model.c_str(), s.sm_count, s.memory_bytes / units::kGiB,
                  s.peak_bf16_flops / 1e12, path.c_str());
    out << line;
    if (topo.gpu_memory_numa_id(i) >= 0) {  // before the newline: "... > cpu0  memory NUMA 4"
      out.seekp(-1, std::ios_base::cur);
      out << "  memory NUMA " << topo.gpu_memory_numa_id(i) << "\n";
    }
  }
  auto header = [&](size_t w) {
    out << pad("", 6);
    for (int j = 0; j < g; ++j) out << pad("gpu" + std::to_string(j), w);
    out << "\n";
  };
  out << "\nPath classes (nvidia-smi topo -m legend):\n";
  header(6);
  bool any_chip = false;
  for (int i = 0; i < g; ++i) {
    out << pad("gpu" + std::to_string(i), 6);
    for (int j = 0; j < g; ++j) {
      const auto ii = static_cast<size_t>(i), jj = static_cast<size_t>(j);
      const bool chip = i != j && topo.same_switch_chip(i, j);
      any_chip = any_chip || chip;
      out << pad(to_string(rep.path_class[ii][jj], rep.nvlink_count[ii][jj]) + (chip ? "^" : ""),
                 6);
    }
    out << "\n";
  }
  if (any_chip)
    out << "^ = two partitions of one switch chip: peer traffic crosses the chip's fabric, not "
           "the uplinks and the CPU\n";
  auto matrix = [&](const char* title, const std::vector<std::vector<double>>& m) {
    out << "\n" << title << "\n";
    header(8);
    for (int i = 0; i < g; ++i) {
      out << pad("gpu" + std::to_string(i), 6);
      for (int j = 0; j < g; ++j) {
        const auto ii = static_cast<size_t>(i), jj = static_cast<size_t>(j);
        if (i == j) {
          out << pad("-", 8);
        } else {
          out << pad(fmt(units::Bps_to_GBps(m[ii][jj])) + (rep.p2p[ii][jj] ? " " : "*"), 8);
        }
      }
      out << "\n";
    }
  };
  matrix("Single-flow bandwidth, GB/s (row = source, column = destination; * = host-staged):",
         rep.bandwidth_Bps);
  matrix("Bidirectional single-flow bandwidth, GB/s (both directions summed; * = host-staged):",
         rep.bidir_bandwidth_Bps);
  out << "\nHost <-> GPU (host memory of the GPU's NUMA node), GB/s:\n";
  out << "GPU     host    H2D     D2H    both\n";
  for (int i = 0; i < g; ++i) {
    const auto ii = static_cast<size_t>(i);
    char line[160];
    std::snprintf(line, sizeof line, "gpu%-4d host%-2d %6s  %6s  %6s\n", i, topo.gpu_socket(i),
                  fmt(units::Bps_to_GBps(rep.h2d_Bps[ii])).c_str(),
                  fmt(units::Bps_to_GBps(rep.d2h_Bps[ii])).c_str(),
                  fmt(units::Bps_to_GBps(rep.h2d_bidir_Bps[ii])).c_str());
    out << line;
  }
  out << "\nLinks (capacity per direction):\n";
  for (const Link& l : topo.links()) {
    std::string what = to_string(l.kind);
    if (l.kind == LinkKind::pcie)
      what += " gen" + std::to_string(l.pcie_gen) + " x" + std::to_string(l.pcie_width);
    if (l.kind == LinkKind::nvlink) what += " x" + std::to_string(l.nvlink_count);
    char line[256];
    std::snprintf(line, sizeof line, "  %-12s -- %-12s %-16s %7.1f GB/s%s  %.2f us\n", l.a.c_str(),
                  l.b.c_str(), what.c_str(), units::Bps_to_GBps(l.capacity_Bps),
                  l.capacity_measured ? " (given)" : "", units::s_to_us(l.latency_s));
    out << line;
  }
  return out.str();
}

std::string show_json(const Topology& topo) {
  if (topo.is_cluster()) return detail::cluster_show_json(topo);
  using ojson = nlohmann::ordered_json;
  const SingleFlowReport rep = single_flow_report(topo);
  const int g = topo.num_gpus();
  ojson root;
  root["name"] = topo.name();
  root["source"] = topo.source();
  root["gpus"] = topo.gpu_endpoints();
  root["hosts"] = topo.host_endpoints();
  root["sockets"] = topo.num_sockets();
  root["pcie_switches"] = topo.num_switches();
  root["p2p_enabled"] = topo.p2p_enabled();
  ojson models = ojson::array(), numa = ojson::array(), socket = ojson::array(),
        memory_numa = ojson::array();
  for (int i = 0; i < g; ++i) {
    models.push_back(topo.gpu(i).model);
    numa.push_back(topo.gpu_numa_node(i));
    socket.push_back(topo.gpu_socket(i));
    if (topo.gpu_memory_numa_id(i) >= 0)
      memory_numa.push_back(topo.gpu_memory_numa_id(i));
    else
      memory_numa.push_back(nullptr);
  }
  root["gpu_models"] = models;
  root["gpu_numa_node"] = numa;  // as the OS numbers it
  root["gpu_socket"] = socket;   // index 0..sockets-1, the host<k> it stages through
  root["gpu_memory_numa_id"] = memory_numa;  // nvidia-smi's GPU NUMA ID; null: N/A
  ojson nics = ojson::array();
  for (const Node& n : topo.nodes()) {
    if (n.kind != NodeKind::nic) continue;
    ojson o;
    o["id"] = n.id;
    if (n.name.empty())
      o["name"] = nullptr;
    else
      o["name"] = n.name;
    o["ports"] = n.ports;
    o["parent"] = parent_of(topo, n.id);
    nics.push_back(std::move(o));
  }
  root["nics"] = nics;
  ojson pc = ojson::array(), p2p = ojson::array(), bw = ojson::array(), bidir = ojson::array(),
        lat = ojson::array();
  for (int i = 0; i < g; ++i) {
    ojson r1 = ojson::array(), r2 = ojson::array(), r3 = ojson::array(), r4 = ojson::array(),
          r5 = ojson::array();
    for (int j = 0; j < g; ++j) {
      const auto ii = static_cast<size_t>(i), jj = static_cast<size_t>(j);
      r1.push_back(to_string(rep.path_class[ii][jj], rep.nvlink_count[ii][jj]));
      r2.push_back(i != j && rep.p2p[ii][jj]);
      if (i == j) {
        r3.push_back(nullptr);
        r4.push_back(nullptr);
        r5.push_back(nullptr);
      } else {
        r3.push_back(rep.bandwidth_Bps[ii][jj]);
        r4.push_back(rep.bidir_bandwidth_Bps[ii][jj]);
        r5.push_back(rep.latency_s[ii][jj]);
      }
    }
    pc.push_back(r1);
    p2p.push_back(r2);
    bw.push_back(r3);
    bidir.push_back(r4);
    lat.push_back(r5);
  }
  root["path_class"] = pc;
  root["p2p"] = p2p;
  root["p2p_bandwidth_Bps"] = bw;
  root["p2p_bidir_bandwidth_Bps"] = bidir;
  root["p2p_latency_s"] = lat;
  root["host_bandwidth_Bps"] =
      ojson{{"h2d", rep.h2d_Bps}, {"d2h", rep.d2h_Bps}, {"bidir", rep.h2d_bidir_Bps}};
  ojson links = ojson::array();
  for (const Link& l : topo.links()) {
    ojson o;
    o["a"] = l.a;
    o["b"] = l.b;
    o["kind"] = to_string(l.kind);
    o["capacity_Bps"] = l.capacity_Bps;
    o["latency_s"] = l.latency_s;
    o["duplex_factor"] = l.duplex_factor;
    if (l.kind == LinkKind::pcie) {
      o["gen"] = l.pcie_gen;
      o["width"] = l.pcie_width;
    }
    if (l.kind == LinkKind::nvlink) o["count"] = l.nvlink_count;
    links.push_back(std::move(o));
  }
  root["links"] = links;
  // The graph itself, as `topo export` writes it: the report loads back as a topology
  // (Topology::from_json_text reads this member and ignores the figures above).
  root["topology"] = ojson::parse(topo.to_json());
  return root.dump(2) + "\n";
}

}  // namespace sparsp::topology
