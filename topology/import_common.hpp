#pragma once
// Helpers shared by the importers (nvidia-smi text, NCCL XML).
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "sparsp/status.hpp"
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

/// Accumulates nodes and links with the place (line number) each came from, and the importer's
/// notes (what it assumed or dropped: "<file>:<place>: <what>", printed as warnings by the CLI and
/// kept in the topology JSON's "source_notes").
struct GraphBuilder {
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<std::string> node_places, link_places;
  std::vector<std::string> notes;

  /// Bytes outside printable ASCII (what a file quotes may be any bytes) become '?', so that the
  /// note stays one line and valid UTF-8 in the JSON.
  void note(const std::string& file, const std::string& place, const std::string& what) {
    std::string line = input_error(file, place, what).message;
    for (char& c : line) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    }
    notes.push_back(std::move(line));
  }

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
  /// NVLink-C2C host link cpu -> gpu of a GPU model with `c2c_Bps` nominal per direction; usable
  /// capacity = nominal x the NVLink copy-engine efficiency (nvlink_usable_Bps; C2C itself is not
  /// measured here).
  void c2c(const std::string& cpu, const std::string& gpu, double c2c_Bps, int line) {
    Link l;
    l.a = cpu;
    l.b = gpu;
    l.kind = LinkKind::c2c;
    l.capacity_Bps = nvlink_usable_Bps(1, c2c_Bps);
    l.capacity_measured = true;
    l.latency_s = kImportPcieLatency_s;
    links.push_back(std::move(l));
    link_places.push_back(std::to_string(line));
  }
  /// `per_link_Bps` 0: the NVLink 3/4 default (nvlink_default_per_link_Bps).
  void nvlink(const std::string& a, const std::string& b, int count, int line,
              double per_link_Bps = 0) {
    Link l;
    l.a = a;
    l.b = b;
    l.kind = LinkKind::nvlink;
    l.nvlink_count = count;
    l.nvlink_per_link_Bps = per_link_Bps > 0 ? per_link_Bps : nvlink_default_per_link_Bps();
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
/// options.gpu_model (the `--gpu-model` flag) looked up; an error names the flag, not the input
/// file: "<command line>:--gpu-model: unknown GPU model 'x' (see `sparsp topo models`)".
inline Result<GpuSpec> lookup_flag_gpu_model(const std::string& name) {
  auto g = lookup_gpu_model(name, "<command line>:--gpu-model");
  if (g) return g;
  Error e = g.error();
  if (const size_t at = e.message.find("(--gpu-model; "); at != std::string::npos)
    e.message.erase(at + 1, 13);
  return e;
}

inline Result<GpuSpec> import_gpu_spec(const ImportOptions& options, const std::string& /*file*/) {
  auto g = options.gpu_model.empty() ? lookup_gpu_model("generic", "")
                                     : lookup_flag_gpu_model(options.gpu_model);
  if (!g) return g.error();
  if (options.p2p) g->p2p_capable = *options.p2p;
  return *g;
}

/// Notes a GPU model without a bf16 compute figure (its bf16_dense_TFLOPs is 0), which `simulate`
/// then refuses for compute: "generic" (no figures at all: 0 SMs, 0 FLOP/s), or a real model
/// without bf16 tensor cores (V100: 80 SMs, no bf16). Kept in the topology's source notes.
inline void note_compute_figures(GraphBuilder& gb, const std::string& file, const GpuSpec& spec) {
  if (spec.peak_bf16_flops > 0) return;
  if (spec.sm_count <= 0)
    gb.note(file, "",
            "GPU model '" + spec.model +
                "' has no compute figures (0 SMs, 0 FLOP/s); pass --gpu-model (see `sparsp topo "
                "models`) before simulating compute");
  else
    gb.note(file, "",
            "GPU model '" + spec.model + "' has no bf16 figure (" + std::to_string(spec.sm_count) +
                " SMs, no bf16 tensor cores); simulating compute needs peak_bf16_flops in the "
                "topology");
}

/// PCIe generation when the input gives no real one: --pcie-gen, else the GPU model's own, else
/// Gen4 (kImportDefaultGen).
inline int import_default_gen(const ImportOptions& options, const GpuSpec& spec) {
  if (options.pcie_gen > 0) return options.pcie_gen;
  return spec.pcie_gen > 0 ? spec.pcie_gen : kImportDefaultGen;
}
inline int import_default_width(const ImportOptions& options, const GpuSpec& spec) {
  if (options.pcie_width > 0) return options.pcie_width;
  return spec.pcie_width > 0 ? spec.pcie_width : kImportDefaultWidth;
}

/// Nominal per-link NVLink rate of a GPU: the model's, else from its NVLink generation, else the
/// NVLink 3/4 default.
inline double import_nvlink_rate_Bps(const GpuSpec& spec) {
  if (spec.nvlink_per_link_Bps > 0) return spec.nvlink_per_link_Bps;
  if (spec.nvlink_gen > 0) return nvlink_per_link_Bps_of_gen(spec.nvlink_gen);
  return nvlink_default_per_link_Bps();
}

/// Parses --nvlink ("nvswitch:N" or "direct:N", N links per GPU); nullopt when empty. Errors
/// name the option.
struct NvlinkFill {
  bool nvswitch = false;
  int links = 0;
};
inline Result<std::optional<NvlinkFill>> parse_nvlink_fill(const std::string& v,
                                                           const std::string& file) {
  if (v.empty()) return std::optional<NvlinkFill>();
  const size_t colon = v.find(':');
  const std::string kind = v.substr(0, colon);
  NvlinkFill f;
  f.nvswitch = kind == "nvswitch";
  char* end = nullptr;
  const std::string n = colon == std::string::npos ? "" : v.substr(colon + 1);
  const long links = std::strtol(n.c_str(), &end, 10);
  if ((kind != "nvswitch" && kind != "direct") || n.empty() || *end != '\0' || links < 1 ||
      links > 64)
    return input_error(file, "",
                       "--nvlink '" + v + "': expected nvswitch:N or direct:N with N in 1..64");
  f.links = static_cast<int>(links);
  return std::optional<NvlinkFill>(f);
}

/// `s` with every character that sparsp::unprintable_character refuses (controls, bidirectional
/// controls, bytes that are not UTF-8) replaced by '?': a file name is the user's, and what an
/// import writes from it must load again (break-it 2026-12-03: a control byte in the input's file
/// name imported cleanly into a topology that `topo show` then refused).
inline std::string printable_copy(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::max<size_t>(1, utf8_sequence_length(s, i));
    const std::string one = s.substr(i, n);
    out += unprintable_character(one).empty() ? one : "?";
    i += n;
  }
  return out;
}

/// The topology name of an imported file: its base name, printable (printable_copy).
inline std::string import_name(const std::string& file) {
  const auto slash = file.find_last_of('/');
  return printable_copy(slash == std::string::npos ? file : file.substr(slash + 1));
}

}  // namespace sparsp::topology::detail
