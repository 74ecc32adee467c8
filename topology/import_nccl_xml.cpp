// Importer for NCCL's topology XML (the file NCCL writes with NCCL_TOPO_DUMP_FILE):
//   <system version="1">
//     <cpu numaid="0" vendor="GenuineIntel" ...>
//       <pci busid="0000:17:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
//         <pci busid="0000:18:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
//           <gpu dev="0" sm="80" rank="0" gdr="1"><nvlink target="..." count="12"
//           tclass="0x068000"/></gpu>
//         </pci>
//         <pci busid="..." ...><nic><net name="mlx5_0" .../></nic></pci>
//       </pci>
//     </cpu>
//   </system>
// A pci element holding a gpu is that GPU, one holding a nic is a NIC, one holding pci elements is
// a PCIe switch; each pci element's link_speed/link_width describe its upstream link. NVLinks to
// tclass 0x068000 targets are NVSwitches (one node per target bus id); NVLinks to GPU bus ids are
// direct bonded links. GPUs are numbered by their `dev` attribute (must be 0..N-1).
#include <algorithm>
#include <cmath>
#include <map>
#include <pugixml.hpp>
#include <set>

#include "import_common.hpp"

namespace sparsp::topology {
namespace {

using detail::GraphBuilder;

struct Fail {
  Error error;
};

class XmlImporter {
 public:
  XmlImporter(std::string_view text, const std::string& file, const ImportOptions& options,
              const GpuSpec& spec)
      : text_(text), file_(file), options_(options), spec_(spec) {}

  Result<Topology> run() {
    pugi::xml_document doc;
    const pugi::xml_parse_result res =
        doc.load_buffer(text_.data(), text_.size(), pugi::parse_default, pugi::encoding_utf8);
    if (!res) {
      return input_error(
          file_,
          std::to_string(line_at(static_cast<size_t>(std::max<std::ptrdiff_t>(res.offset, 0)))),
          std::string("invalid XML: ") + res.description());
    }
    try {
      const pugi::xml_node system = doc.child("system");
      if (!system)
        fail(doc.first_child() ? doc.first_child() : doc, "expected a <system> root element");
      std::vector<pugi::xml_node> cpus;
      for (pugi::xml_node c : system.children("cpu")) cpus.push_back(c);
      if (cpus.empty()) fail(system, "no <cpu> element");
      // NUMA ids renumbered 0..C-1 in ascending numaid order (ties by file order).
      std::vector<std::pair<long, size_t>> order;
      for (size_t i = 0; i < cpus.size(); ++i)
        order.emplace_back(int_attr(cpus[i], "numaid", static_cast<long>(i)), i);
      std::stable_sort(order.begin(), order.end());
      std::vector<std::string> cpu_ids(cpus.size());
      bool amd = false;
      for (size_t k = 0; k < order.size(); ++k) {
        const pugi::xml_node c = cpus[order[k].second];
        Node n;
        n.id = "cpu" + std::to_string(k);
        n.kind = NodeKind::cpu;
        n.numa_node = static_cast<int>(k);
        cpu_ids[order[k].second] = n.id;
        cpu_nodes_.push_back({std::move(n), line_of(c)});
        amd = amd || std::string(c.attribute("vendor").as_string()) == "AuthenticAMD";
      }
      for (size_t i = 0; i < cpus.size(); ++i) walk(cpus[i], cpu_ids[i]);
      return finish(cpu_ids, amd ? LinkKind::xgmi : LinkKind::upi, line_of(system));
    } catch (const Fail& f) {
      return f.error;
    }
  }

 private:
  struct GpuEntry {
    int dev;
    std::string busid;
    std::string parent;
    int gen, width, line;
    std::vector<std::tuple<std::string, int, bool, int>> nvlinks;  // target, count, to_switch, line
  };

  // Line of a 0-based offset into the XML text (pugixml's offsets).
  int line_at(size_t offset) const { return line_of_offset(text_, offset + 1); }
  int line_of(const pugi::xml_node& n) const {
    return line_at(static_cast<size_t>(std::max<std::ptrdiff_t>(n.offset_debug(), 0)));
  }

  [[noreturn]] void fail(const pugi::xml_node& n, const std::string& what) const {
    throw Fail{input_error(file_, std::to_string(line_of(n)), what)};
  }

  long int_attr(const pugi::xml_node& n, const char* name,
                std::optional<long> def = std::nullopt) const {
    const pugi::xml_attribute a = n.attribute(name);
    if (!a) {
      if (def) return *def;
      fail(n, std::string("<") + n.name() + "> without " + name);
    }
    const std::string v = a.as_string();
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || x < 0 || x > 100000)
      fail(n, std::string(name) + "=\"" + v + "\" is not a valid number");
    return x;
  }

  // PCIe gen from NCCL's link_speed ("16.0 GT/s PCIe", "8 GT/s", "Unknown").
  int gen_of(const pugi::xml_node& n) const {
    if (options_.pcie_gen > 0) return options_.pcie_gen;
    const pugi::xml_attribute a = n.attribute("link_speed");
    if (!a || std::string(a.as_string()).empty() ||
        std::string(a.as_string()).rfind("Unknown", 0) == 0)
      return detail::kImportDefaultGen;
    const std::string v = a.as_string();
    char* end = nullptr;
    const double gt = std::strtod(v.c_str(), &end);
    static const std::pair<double, int> kSpeeds[] = {{2.5, 1}, {5, 2},  {8, 3},
                                                     {16, 4},  {32, 5}, {64, 6}};
    for (const auto& [rate, gen] : kSpeeds) {
      if (end != v.c_str() && std::fabs(gt - rate) < 1e-6) return gen;
    }
    fail(n, "unknown link_speed \"" + v + "\" (expected 2.5, 5, 8, 16, 32 or 64 GT/s)");
  }

  int width_of(const pugi::xml_node& n) const {
    if (options_.pcie_width > 0) return options_.pcie_width;
    if (!n.attribute("link_width")) return detail::kImportDefaultWidth;
    const long w = int_attr(n, "link_width");
    if (w == 0) return detail::kImportDefaultWidth;  // NCCL writes 0 when unknown
    if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
      fail(n, "link_width " + std::to_string(w) + " is not 1, 2, 4, 8 or 16");
    return static_cast<int>(w);
  }

  void walk(const pugi::xml_node& parent_xml, const std::string& parent, int depth = 0) {
    if (depth > 32) fail(parent_xml, "PCIe hierarchy deeper than 32 levels");
    for (pugi::xml_node c : parent_xml.children()) {
      const std::string name = c.name();
      if (name == "pci") {
        const std::string busid = c.attribute("busid").as_string();
        if (busid.empty()) fail(c, "<pci> without busid");
        if (!busids_.insert(busid).second) fail(c, "duplicate busid " + busid);
        const int gen = gen_of(c), width = width_of(c);
        if (pugi::xml_node g = c.child("gpu")) {
          GpuEntry e{
              static_cast<int>(int_attr(g, "dev")), busid, parent, gen, width, line_of(g), {}};
          for (pugi::xml_node nv : g.children("nvlink")) {
            const std::string target = nv.attribute("target").as_string();
            if (target.empty()) fail(nv, "<nvlink> without target");
            const long count = int_attr(nv, "count");
            if (count < 1 || count > 64) fail(nv, "NVLink count must be 1..64");
            const std::string tclass = nv.attribute("tclass").as_string();
            e.nvlinks.emplace_back(target, static_cast<int>(count), tclass == "0x068000",
                                   line_of(nv));
          }
          gpus_.push_back(std::move(e));
        } else if (c.child("nic")) {
          const std::string id = "nic" + std::to_string(nics_.size());
          nics_.push_back({id, parent, gen, width, line_of(c)});
        } else if (c.child("pci")) {
          const std::string id = "sw" + std::to_string(switches_.size());
          switches_.push_back({id, parent, gen, width, line_of(c)});
          walk(c, id, depth + 1);
        }
        // Other PCI functions (no gpu, nic or children) play no part in routing.
      } else if (name == "nic") {
        const std::string id = "nic" + std::to_string(nics_.size());
        nics_.push_back(
            {id, parent, detail::kImportDefaultGen, detail::kImportDefaultWidth, line_of(c)});
      }
    }
  }

  Result<Topology> finish(const std::vector<std::string>& cpu_ids, LinkKind socket_kind,
                          int system_line) {
    if (gpus_.empty()) return input_error(file_, std::to_string(system_line), "no <gpu> element");
    std::sort(gpus_.begin(), gpus_.end(),
              [](const GpuEntry& a, const GpuEntry& b) { return a.dev < b.dev; });
    std::map<std::string, int> gpu_of_bus;
    for (size_t i = 0; i < gpus_.size(); ++i) {
      if (gpus_[i].dev != static_cast<int>(i)) {
        return input_error(file_, std::to_string(gpus_[i].line),
                           "GPU dev numbers must be 0.." + std::to_string(gpus_.size() - 1) +
                               ", got dev=\"" + std::to_string(gpus_[i].dev) + "\"");
      }
      gpu_of_bus[gpus_[i].busid] = static_cast<int>(i);
    }
    GraphBuilder gb;
    for (auto& [n, line] : cpu_nodes_) gb.node(n, line);
    for (const auto& s : switches_) {
      Node n;
      n.id = s.id;
      n.kind = NodeKind::pcie_switch;
      n.acs_redirect = options_.acs_redirect;
      gb.node(std::move(n), s.line);
      gb.pcie(s.parent, s.id, s.gen, s.width, s.line);
    }
    for (size_t i = 0; i < gpus_.size(); ++i) {
      Node n;
      n.id = "gpu" + std::to_string(i);
      n.kind = NodeKind::gpu;
      n.gpu = spec_;
      gb.node(std::move(n), gpus_[i].line);
      gb.pcie(gpus_[i].parent, "gpu" + std::to_string(i), gpus_[i].gen, gpus_[i].width,
              gpus_[i].line);
    }
    for (const auto& nic : nics_) {
      Node n;
      n.id = nic.id;
      n.kind = NodeKind::nic;
      gb.node(std::move(n), nic.line);
      gb.pcie(nic.parent, nic.id, nic.gen, nic.width, nic.line);
    }
    std::map<std::string, std::string> nvswitch_of_bus;
    std::set<std::pair<int, int>> gpu_pairs;
    for (size_t i = 0; i < gpus_.size(); ++i) {
      for (const auto& [target, count, to_switch, line] : gpus_[i].nvlinks) {
        if (to_switch) {
          auto it = nvswitch_of_bus.find(target);
          if (it == nvswitch_of_bus.end()) {
            const std::string id = "nvswitch" + std::to_string(nvswitch_of_bus.size());
            it = nvswitch_of_bus.emplace(target, id).first;
            Node n;
            n.id = id;
            n.kind = NodeKind::nvswitch;
            gb.node(std::move(n), line);
          }
          gb.nvlink("gpu" + std::to_string(i), it->second, count, line);
        } else if (auto g = gpu_of_bus.find(target); g != gpu_of_bus.end()) {
          const int a = std::min(static_cast<int>(i), g->second),
                    b = std::max(static_cast<int>(i), g->second);
          if (a != b && gpu_pairs.emplace(a, b).second)
            gb.nvlink("gpu" + std::to_string(a), "gpu" + std::to_string(b), count, line);
        }
        // NVLinks to CPUs (POWER9) are not modelled.
      }
    }
    gb.sockets(cpu_ids, socket_kind, system_line);
    Topology::Options topt;
    topt.p2p = options_.p2p.value_or(spec_.p2p_capable);
    std::string name = file_;
    if (auto slash = name.find_last_of('/'); slash != std::string::npos)
      name = name.substr(slash + 1);
    return Topology::build(name, "imported from NCCL topology XML: " + file_, std::move(gb.nodes),
                           std::move(gb.links), topt, file_, std::move(gb.node_places),
                           std::move(gb.link_places));
  }

  struct Device {
    std::string id, parent;
    int gen, width, line;
  };

  std::string_view text_;
  const std::string& file_;
  const ImportOptions& options_;
  const GpuSpec& spec_;
  std::vector<std::pair<Node, int>> cpu_nodes_;
  std::vector<GpuEntry> gpus_;
  std::vector<Device> switches_, nics_;
  std::set<std::string> busids_;
};

}  // namespace

Result<Topology> import_nccl_xml(std::string_view text, const std::string& file,
                                 const ImportOptions& options) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return input_error(file, "1", "empty file");
  auto spec = detail::import_gpu_spec(options, file);
  if (!spec) return spec.error();
  XmlImporter imp(text, file, options, *spec);
  return imp.run();
}

}  // namespace sparsp::topology
