// GPU model table. Figures are from NVIDIA datasheets and architecture whitepapers (cited per
// entry); peak_bf16_flops is the dense (no structured sparsity) tensor-core rate with FP32
// accumulate; memory is the datasheet figure, which is binary (GiB): the H200's "141 GB" is
// 143771 MiB = 140.4 GiB on the replay machine (nvidia-smi), an RTX 4090's "24 GB" 24564 MiB;
// copy_engines is cudaDeviceProp::asyncEngineCount as deviceQuery prints it for that family.
#include <algorithm>
#include <cctype>

#include "sparsp/topology.hpp"
#include "sparsp/units.hpp"

namespace sparsp::topology {
namespace {

GpuSpec make(const char* model, int sms, int copy_engines, double memory_GiB, double bf16_TFLOPs,
             double memory_GBps, bool p2p) {
  GpuSpec g;
  g.model = model;
  g.sm_count = sms;
  g.copy_engines = copy_engines;
  g.memory_bytes = memory_GiB * units::kGiB;
  g.peak_bf16_flops = units::TFLOPs_to_FLOPs(bf16_TFLOPs);
  g.memory_bandwidth_Bps = units::GBps_to_Bps(memory_GBps);
  g.p2p_capable = p2p;
  return g;
}

std::vector<GpuSpec> build_table() {
  return {
      // NVIDIA Ada GPU architecture whitepaper v2.1, appendix table (RTX 4090): 128 SMs, 24 GB
      // GDDR6X at 1008 GB/s, BF16 tensor with FP32 accumulate 165.2 TFLOPS dense. GeForce: peer
      // access disabled by the stock driver.
      make("NVIDIA GeForce RTX 4090", 128, 2, 24, 165.2, 1008, false),
      // NVIDIA RTX Blackwell GPU architecture whitepaper v1.0 (RTX 5090): 170 SMs, 32 GB GDDR7 at
      // 1792 GB/s, BF16 with FP32 accumulate 209.5 TFLOPS dense. GeForce: no P2P.
      make("NVIDIA GeForce RTX 5090", 170, 2, 32, 209.5, 1792, false),
      // NVIDIA L40S datasheet (2023): 142 SMs (Ada AD102), 48 GB GDDR6 at 864 GB/s, BF16 tensor
      // 362.05 TFLOPS dense (733 with sparsity).
      make("NVIDIA L40S", 142, 2, 48, 362.05, 864, true),
      // NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet (2025): 188 SMs, 96 GB GDDR7 at
      // 1597 GB/s; 4 PFLOPS FP4 with sparsity -> 2 dense -> 1 FP8 -> 0.5 PFLOPS BF16 dense.
      make("NVIDIA RTX PRO 6000 Blackwell Server Edition", 188, 2, 96, 500.0, 1597, true),
      // NVIDIA A100 datasheet (A100 80GB PCIe): 108 SMs, 80 GB HBM2e at 1935 GB/s, BF16 tensor
      // 312 TFLOPS dense.
      make("NVIDIA A100 80GB PCIe", 108, 3, 80, 312, 1935, true),
      // NVIDIA H100 datasheet (H100 PCIe): 114 SMs, 80 GB HBM2e at 2000 GB/s, BF16 756 TFLOPS
      // dense (1513 with sparsity).
      make("NVIDIA H100 PCIe", 114, 3, 80, 756, 2000, true),
      // NVIDIA H100 datasheet (H100 SXM): 132 SMs, 80 GB HBM3 at 3350 GB/s, BF16 989.4 TFLOPS
      // dense (1979 with sparsity).
      make("NVIDIA H100 SXM", 132, 3, 80, 989.4, 3350, true),
      // NVIDIA H200 datasheet (H200 SXM): 132 SMs, 141 GB HBM3e at 4800 GB/s, BF16 989 TFLOPS
      // dense.
      make("NVIDIA H200", 132, 3, 141, 989, 4800, true),
      // NVIDIA H200 datasheet (H200 NVL, PCIe card): 132 SMs, 141 GB at 4800 GB/s, BF16 835.5
      // TFLOPS dense (1671 with sparsity).
      make("NVIDIA H200 NVL", 132, 3, 141, 835.5, 4800, true),
      // NVIDIA Turing GPU architecture whitepaper (RTX 2080 Ti): 68 SMs, 11 GB GDDR6 at 616 GB/s;
      // no BF16 tensor cores (0). GeForce: no P2P. (Present for the 2x-gen3 real case.)
      make("NVIDIA GeForce RTX 2080 Ti", 68, 3, 11, 0, 616, false),
      // Placeholder for importers when the model is unknown: P2P-capable, no compute figures.
      make("generic", 0, 2, 0, 0, 0, true),
  };
}

std::string squash(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

}  // namespace

const std::vector<GpuSpec>& gpu_models() {
  static const std::vector<GpuSpec> table = build_table();
  return table;
}

std::optional<GpuSpec> find_gpu_model(std::string_view name) {
  std::string key = squash(name);
  if (key.empty()) return std::nullopt;
  // Drop vendor words so "rtx4090", "GeForce RTX 4090" and the full name all match.
  for (const char* prefix : {"nvidia", "geforce"}) {
    if (key.rfind(prefix, 0) == 0) key = key.substr(std::string_view(prefix).size());
  }
  if (key.rfind("geforce", 0) == 0) key = key.substr(7);
  // Common short forms.
  static const std::pair<const char*, const char*> kAliases[] = {
      {"a100pcie", "a10080gbpcie"},
      {"a100pcie80gb", "a10080gbpcie"},
      {"a100", "a10080gbpcie"},
      {"h100sxm5", "h100sxm"},
      {"h100sxm80gb", "h100sxm"},
      {"h200sxm", "h200"},
      {"h200sxm141gb", "h200"},
      {"rtxpro6000", "rtxpro6000blackwellserveredition"},
      {"rtxpro6000blackwell", "rtxpro6000blackwellserveredition"},
  };
  for (const auto& [alias, target] : kAliases) {
    if (key == alias && *target) key = target;
  }
  for (const GpuSpec& g : gpu_models()) {
    std::string m = squash(g.model);
    if (m.rfind("nvidia", 0) == 0) m = m.substr(6);
    if (m.rfind("geforce", 0) == 0) m = m.substr(7);
    if (m == key) return g;
  }
  // Names with a trailing memory size in parentheses, e.g. "... Server Edition (96 GB)".
  for (const GpuSpec& g : gpu_models()) {
    std::string m = squash(g.model);
    if (m.rfind("nvidia", 0) == 0) m = m.substr(6);
    if (m.rfind("geforce", 0) == 0) m = m.substr(7);
    if (m != "generic" && key.rfind(m, 0) == 0 && key.size() > m.size()) {
      std::string_view rest(key);
      rest.remove_prefix(m.size());
      // Only a memory-size suffix ("96gb", "80gb", "11gb", "80gbhgxbaseboard") may follow.
      if (rest.find("gb") != std::string_view::npos &&
          std::isdigit(static_cast<unsigned char>(rest[0]))) {
        return g;
      }
    }
  }
  return std::nullopt;
}

}  // namespace sparsp::topology
