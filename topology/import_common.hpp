#pragma once
// Helpers shared by the importers (nvidia-smi text, NCCL XML).
#include <string>
#include <vector>

#include "sparsp/units.hpp"
#include "topology_impl.hpp"

namespace sparsp::topology::detail {

/// Defaults for what an importer input does not say (documented in topology/README.md).
inline constexpr int kImportDefaultGen = 4;
inline constexpr int kImportDefaultWidth = 16;
/// Inter-socket capacity per direction when unknown: 64 GB/s (same default as templates).
inline constexpr double kImportInterSocket_Bps = 64e9;
/// Default hop latencies (as in the JSON format).
inline constexpr double kImportPcieLatency_s = 0.1e-6;
inline constexpr double kImportNvlinkLatency_s = 0.1e-6;
inline constexpr double kImportSocketLatency_s = 0.2e-6;

/// Accumulates nodes and links with the place (line number) each came from.
struct GraphBuilder {
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<std::string> node_places, link_places;

  void node(Node n, int line) {
    nodes.push_back(std::move(n));
    node_places.push_back(std::to_string(line));
  }
  void pcie(const std::string& a, const std::string& b, int gen, int width, int line,
            double capacity_Bps = 0) {
    Link l;
    l.a = a;
    l.b = b;
    l.kind = LinkKind::pcie;
    l.pcie_gen = gen;
    l.pcie_width = width;
    l.latency_s = kImportPcieLatency_s;
    l.duplex_factor = pcie_default_duplex_factor();
    if (capacity_Bps > 0) {
      l.capacity_Bps = capacity_Bps;
      l.capacity_measured = true;
    }
    links.push_back(std::move(l));
    link_places.push_back(std::to_string(line));
  }
  void nvlink(const std::string& a, const std::string& b, int count, int line) {
    Link l;
    l.a = a;
    l.b = b;
    l.kind = LinkKind::nvlink;
    l.nvlink_count = count;
    l.nvlink_per_link_Bps = nvlink_default_per_link_Bps();
    l.latency_s = kImportNvlinkLatency_s;
    links.push_back(std::move(l));
    link_places.push_back(std::to_string(line));
  }
  void sockets(const std::vector<std::string>& cpus, LinkKind kind, int line) {
    for (size_t s = 0; s < cpus.size(); ++s) {
      for (size_t u = s + 1; u < cpus.size(); ++u) {
        Link l;
        l.a = cpus[s];
        l.b = cpus[u];
        l.kind = kind;
        l.capacity_Bps = kImportInterSocket_Bps;
        l.capacity_measured = true;
        l.latency_s = kImportSocketLatency_s;
        links.push_back(std::move(l));
        link_places.push_back(std::to_string(line));
      }
    }
  }
};

/// The GPU spec an importer uses: options.gpu_model looked up, "generic" when empty. An explicit
/// options.p2p (--p2p on|off) sets the GPUs' p2p_capable too: `--p2p on` on GeForce models
/// (P2P-patched driver) otherwise changed nothing, since a pair needs both.
inline Result<GpuSpec> import_gpu_spec(const ImportOptions& options, const std::string& file) {
  const std::string name = options.gpu_model.empty() ? "generic" : options.gpu_model;
  auto g = find_gpu_model(name);
  if (!g)
    return input_error(file, "",
                       "unknown GPU model '" + name + "' (--gpu-model; see `sparsp topo models`)");
  if (options.p2p) g->p2p_capable = *options.p2p;
  return *g;
}

}  // namespace sparsp::topology::detail
