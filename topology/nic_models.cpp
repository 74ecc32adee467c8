// The NIC model table (NicModel): line rate per port, usual port count, PCIe host interface and
// GPUDirect RDMA support of the NVIDIA (Mellanox) adapters the cluster presets use.
#include <algorithm>
#include <cctype>

#include "sparsp/topology.hpp"
#include "sparsp/units.hpp"

namespace sparsp::topology {

namespace {

// Lower case, letters and digits only ("ConnectX-6 Dx" -> "connectx6dx").
std::string squash(std::string_view s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Gb/s (decimal, as datasheets give line rates) to bytes/s.
constexpr double Gbps(double g) { return g * 1e9 / 8; }

}  // namespace

const std::vector<NicModel>& nic_models() {
  // Every NVIDIA ConnectX since ConnectX-3 supports GPUDirect RDMA (NVIDIA GPUDirect RDMA
  // documentation, docs.nvidia.com/cuda/gpudirect-rdma); whether NCCL uses it depends on the path
  // to the GPU (Topology::server, "GPUDirect RDMA" in topology/README.md).
  static const std::vector<NicModel> models = {
      {"ConnectX-5", Gbps(100), 2, 3, 16, true,
       "NVIDIA ConnectX-5 VPI adapter card user manual (MCX556A-ECAT): 2 ports of EDR 100 Gb/s "
       "InfiniBand or 100 GbE, PCIe Gen3 x16"},
      {"ConnectX-6", Gbps(200), 1, 4, 16, true,
       "NVIDIA ConnectX-6 VPI adapter card user manual (MCX653105A-HDAT): 1 port of HDR 200 Gb/s "
       "InfiniBand or 200 GbE, PCIe Gen3/Gen4 x16"},
      {"ConnectX-6 Dx", Gbps(100), 2, 4, 16, true,
       "NVIDIA ConnectX-6 Dx Ethernet adapter card user manual (MCX623106AN-CDAT): 2 ports of "
       "100 GbE, PCIe Gen3/Gen4 x16"},
      {"ConnectX-7", Gbps(400), 1, 5, 16, true,
       "NVIDIA ConnectX-7 adapter card user manual (MCX75310AAS-NEAT, the DGX H100 compute-fabric "
       "card): 1 port of NDR 400 Gb/s InfiniBand or 400 GbE, PCIe Gen5 x16"},
  };
  return models;
}

std::optional<NicModel> find_nic_model(std::string_view name) {
  const std::string want = squash(name);
  if (want.empty()) return std::nullopt;
  for (const NicModel& m : nic_models()) {
    const std::string have = squash(m.name);
    // "cx7" for "connectx7": the vendor's short form.
    const std::string brief = "cx" + have.substr(std::string("connectx").size());
    if (want == have || want == brief) return m;
  }
  return std::nullopt;
}

}  // namespace sparsp::topology
