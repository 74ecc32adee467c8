// Exporters: the nvidia-smi `topo -m` style matrix and Graphviz DOT.
#include <cstdio>
#include <sstream>

#include "cluster.hpp"
#include "sparsp/units.hpp"
#include "topology_impl.hpp"

namespace sparsp::topology {

std::string to_matrix_text(const Topology& topo) {
  if (topo.is_cluster()) return detail::cluster_matrix_text(topo);
  const int g = topo.num_gpus();
  std::ostringstream out;
  for (int j = 0; j < g; ++j) out << "\tGPU" << j;
  out << "\n";
  for (int i = 0; i < g; ++i) {
    out << "GPU" << i;
    for (int j = 0; j < g; ++j) {
      out << "\t"
          << (i == j ? std::string(" X ")
                     : to_string(topo.path_class(i, j), topo.nvlink_count(i, j)));
    }
    out << "\n";
  }
  out << "\nLegend:\n\n"
         "  X    = Self\n"
         "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
         "(e.g., QPI/UPI)\n"
         "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
         "Bridges within a NUMA node\n"
         "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
         "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
         "Bridge)\n"
         "  PIX  = Connection traversing at most a single PCIe bridge\n"
         "  NV#  = Connection traversing a bonded set of # NVLinks\n";
  return out.str();
}

namespace {
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}
}  // namespace

std::string to_dot(const Topology& topo) {
  std::ostringstream out;
  out << "graph " << quote(topo.name().empty() ? "topology" : topo.name()) << " {\n";
  out << "  node [fontname=\"Helvetica\"];\n";
  for (const Node& n : topo.nodes()) {
    std::string label = n.id;
    std::string shape = "box";
    switch (n.kind) {
      case NodeKind::gpu:
        label += "\\n" + n.gpu->model;
        shape = "box3d";
        break;
      case NodeKind::cpu:
        label += "\\nNUMA " + std::to_string(n.numa_node);
        shape = "house";
        break;
      case NodeKind::pcie_switch:
        label += n.acs_redirect ? "\\nPCIe switch (ACS)" : "\\nPCIe switch";
        shape = "diamond";
        break;
      case NodeKind::root_port:
        label += "\\nhost bridge";
        shape = "trapezium";
        break;
      case NodeKind::nvswitch:
        label += "\\nNVSwitch";
        shape = "octagon";
        break;
      case NodeKind::nic:
        label += "\\nNIC";
        shape = "ellipse";
        break;
    }
    out << "  " << quote(n.id) << " [shape=" << shape << ", label=\"" << label << "\"];\n";
  }
  for (const Link& l : topo.links()) {
    std::string what = to_string(l.kind);
    if (l.kind == LinkKind::pcie)
      what += " gen" + std::to_string(l.pcie_gen) + " x" + std::to_string(l.pcie_width);
    if (l.kind == LinkKind::nvlink) what = "NV" + std::to_string(l.nvlink_count);
    char cap[64];
    std::snprintf(cap, sizeof cap, "%.1f GB/s", units::Bps_to_GBps(l.capacity_Bps));
    out << "  " << quote(l.a) << " -- " << quote(l.b) << " [label=\"" << what << "\\n"
        << cap << "\"";
    if (l.kind == LinkKind::nvlink) out << ", color=green, penwidth=2";
    if (l.kind == LinkKind::upi || l.kind == LinkKind::xgmi) out << ", style=dashed";
    out << "];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace sparsp::topology
