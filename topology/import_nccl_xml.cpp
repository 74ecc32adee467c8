// Importer for NCCL's topology XML, read as NCCL itself reads it (src/graph/xml.cc, topo.cc):
//   <system version="1">
//     <cpu numaid="0" vendor="GenuineIntel" ...>
//       <pci busid="0000:17:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
//         <pci busid="0000:18:00.0" class="0x030200" device="0x2330" link_speed=... link_width=...>
//           <gpu dev="0" sm="90" rank="0" gdr="1"><nvlink target="..." count="18"
//           tclass="0x068000"/></gpu>
//         </pci>
//         <pci busid="..." class="0x020000" ...><nic><net name="mlx5_0" .../></nic></pci>
//       </pci>
//       <nic><net name="eth0" .../></nic>
//     </cpu>
//   </system>
// A pci element is typed by its `class`, as NCCL does: 0x03.... is a GPU (with or without a <gpu>
// child; cloud vendors' static files omit it), 0x02.... a NIC, anything else holding pci elements
// a bridge or switch. Each pci element's link_speed/link_width describe its upstream link;
// link_width="0" and an empty or "Unknown" link_speed mean "same as the parent". GPUs are numbered
// by their <gpu dev>, or in bus-id order when any GPU has no <gpu> child. The GPU model comes from
// --gpu-model, else the pci `device` id (configs/gpus registry), else "generic". NVLinks to
// tclass 0x068000 targets (or NCCL's fffffff:ff:ff.0 placeholder) are NVSwitches, one node per
// target bus id; NVLinks to GPU bus ids are direct bonded links, at the GPU model's per-link rate.
// Whatever the importer assumes or drops is a note (warning on stderr, "source_notes" in JSON).
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

// NCCL writes this bus id for the NVSwitch fabric of a VM that hides the NVSwitches.
constexpr const char* kNvswitchPlaceholderBusid = "fffffff:ff:ff.0";
constexpr int kNvidiaVendorId = 0x10de;

struct NvlinkEntry {
  std::string target, tclass;
  int count, line;
};

// One pci element that plays a part in routing (switch, GPU or NIC), or a <nic> under a <cpu>.
struct Dev {
  NodeKind kind = NodeKind::pcie_switch;
  std::string id;     // node id, assigned when the graph is built
  int parent = -1;    // index into devs_, -1: the cpu
  int cpu = 0;        // index into cpus_ (file order)
  std::string busid;  // empty for a <nic> directly under a <cpu>
  int gen = 0;        // 0: not given anywhere above (resolved from the GPU model)
  int width = 0;      // 0: likewise
  bool from_file = false;
  int line = 0;
  // GPU
  int dev = -1;        // <gpu dev>, -1: no <gpu> child
  int device_id = -1;  // pci device attribute (vendor 0x10de), -1: none
  int sm = 0;          // <gpu sm>
  bool c2c = false;    // host link is NVLink-C2C (an NVLink to its CPU, model with c2c_Bps)
  std::vector<NvlinkEntry> nvlinks;
  GpuSpec spec;
  // NIC
  int ports = 1;
  std::string nets;  // the <net> names, for recognising one NIC listed under two CPUs
  std::string name;  // nic: the non-empty <net> names joined by "," (Node::name)
};

struct Cpu {
  int numaid = -1;  // the file's numaid, -1 unknown
  int index = 0;    // socket index 0..C-1
  int line = 0;
};

class XmlImporter {
 public:
  XmlImporter(std::string_view text, const std::string& file, const ImportOptions& options,
              const std::optional<GpuSpec>& forced, const std::optional<detail::NvlinkFill>& fill)
      : text_(text), file_(file), options_(options), forced_(forced), fill_(fill) {}

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
      const pugi::xml_node system = system_of(doc);
      read_cpus(system);
      for (size_t i = 0; i < cpu_xml_.size(); ++i) walk(cpu_xml_[i], -1, static_cast<int>(i));
      check_gpus_present(system);
      number_gpus();
      pick_models();
      resolve_links();
      mark_c2c();
      return build(line_of(system));
    } catch (const Fail& f) {
      return f.error;
    }
  }

 private:
  // Line of a 0-based offset into the XML text (pugixml's offsets).
  int line_at(size_t offset) const { return line_of_offset(text_, offset + 1); }
  int line_of(const pugi::xml_node& n) const {
    return line_at(static_cast<size_t>(std::max<std::ptrdiff_t>(n.offset_debug(), 0)));
  }

  [[noreturn]] void fail(const pugi::xml_node& n, const std::string& what) const {
    throw Fail{input_error(file_, std::to_string(line_of(n)), what)};
  }
  [[noreturn]] void fail_at(int line, const std::string& what) const {
    throw Fail{input_error(file_, std::to_string(line), what)};
  }
  void note(int line, const std::string& what) { gb_.note(file_, std::to_string(line), what); }

  long int_attr(const pugi::xml_node& n, const char* name, std::optional<long> def = std::nullopt,
                long min = 0) const {
    const pugi::xml_attribute a = n.attribute(name);
    if (!a) {
      if (def) return *def;
      fail(n, std::string("<") + n.name() + "> without " + name);
    }
    const std::string v = a.as_string();
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || x < min || x > 100000)
      fail(n, std::string(name) + "=\"" + v + "\" is not a valid number");
    return x;
  }

  static int hex_attr(const pugi::xml_node& n, const char* name) {
    const std::string v = n.attribute(name).as_string();
    if (v.size() < 3 || v.compare(0, 2, "0x") != 0) return -1;
    char* end = nullptr;
    const long x = std::strtol(v.c_str() + 2, &end, 16);
    return *end == '\0' && x >= 0 && x <= 0xffff ? static_cast<int>(x) : -1;
  }

  // The <system> root; other roots NCCL writes (its graph dump) get a message saying what they
  // are.
  pugi::xml_node system_of(const pugi::xml_document& doc) const {
    const pugi::xml_node system = doc.child("system");
    if (system) return system;
    pugi::xml_node first = doc.first_child();
    if (!first) first = doc;
    if (doc.child("graphs"))
      fail(first,
           "this is NCCL's graph dump (NCCL_GRAPH_DUMP_FILE: rings and trees), not a topology; "
           "import the NCCL_TOPO_DUMP_FILE output of the same run instead");
    fail(first, "expected a <system> root element");
  }

  // CPUs: socket index 0..C-1 in ascending numaid order (ties by file order); numaid="-1"
  // (unknown) ones follow in file order, with a note.
  void read_cpus(const pugi::xml_node& system) {
    for (pugi::xml_node c : system.children("cpu")) cpu_xml_.push_back(c);
    if (cpu_xml_.empty()) fail(system, "no <cpu> element");
    std::vector<std::pair<long, size_t>> order;
    for (size_t i = 0; i < cpu_xml_.size(); ++i) {
      Cpu c;
      c.numaid = static_cast<int>(int_attr(cpu_xml_[i], "numaid", static_cast<long>(i), -1));
      c.line = line_of(cpu_xml_[i]);
      cpus_.push_back(c);
      order.emplace_back(c.numaid < 0 ? 100001 : c.numaid, i);
      amd_ = amd_ || std::string(cpu_xml_[i].attribute("vendor").as_string()) == "AuthenticAMD";
    }
    std::stable_sort(order.begin(), order.end());
    for (size_t k = 0; k < order.size(); ++k) {
      Cpu& c = cpus_[order[k].second];
      c.index = static_cast<int>(k);
      if (c.numaid < 0)
        note(c.line, "numaid=\"-1\" (NUMA node unknown): numbered socket " + std::to_string(k) +
                         " in file order");
    }
  }

  // A link's gen/width: the element's own when real, else the parent's (0 when none above).
  void link_of(const pugi::xml_node& n, int parent, Dev& d) const {
    const Dev* up = parent >= 0 ? &devs_[static_cast<size_t>(parent)] : nullptr;
    d.gen = up ? up->gen : 0;
    d.width = up ? up->width : 0;
    d.from_file = up && up->from_file;
    const std::string speed = n.attribute("link_speed").as_string();
    if (!speed.empty() && speed.rfind("Unknown", 0) != 0) {
      char* end = nullptr;
      const double gt = std::strtod(speed.c_str(), &end);
      static const std::pair<double, int> kSpeeds[] = {{2.5, 1}, {5, 2},  {8, 3},
                                                       {16, 4},  {32, 5}, {64, 6}};
      int gen = 0;
      for (const auto& [rate, g] : kSpeeds) {
        if (end != speed.c_str() && std::fabs(gt - rate) < 1e-6) gen = g;
      }
      if (gen == 0)
        fail(n, "unknown link_speed \"" + speed + "\" (expected 2.5, 5, 8, 16, 32 or 64 GT/s)");
      d.gen = gen;
      d.from_file = true;
    }
    if (n.attribute("link_width")) {
      const long w = int_attr(n, "link_width");
      if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
        fail(n, "link_width " + std::to_string(w) + " is not 1, 2, 4, 8 or 16");
      if (w != 0) d.width = static_cast<int>(w);  // NCCL writes 0 when unknown
    }
  }

  void walk(const pugi::xml_node& parent_xml, int parent, int cpu, int depth = 0) {
    if (depth > 32) fail(parent_xml, "PCIe hierarchy deeper than 32 levels");
    for (pugi::xml_node c : parent_xml.children()) {
      const std::string name = c.name();
      if (name == "pci") {
        pci(c, parent, cpu, depth);
      } else if (name == "nic") {
        Dev d;
        d.kind = NodeKind::nic;
        d.parent = parent;
        d.cpu = cpu;
        d.line = line_of(c);
        if (parent >= 0) link_of(parent_xml, parent, d);
        add_nic(c, std::move(d));
      }
    }
  }

  void pci(const pugi::xml_node& c, int parent, int cpu, int depth) {
    const std::string busid = c.attribute("busid").as_string();
    if (busid.empty()) fail(c, "<pci> without busid");
    const std::string cls = c.attribute("class").as_string();
    const bool is_gpu = c.child("gpu") || cls.rfind("0x03", 0) == 0;
    const bool is_nic = !is_gpu && (c.child("nic") || cls.rfind("0x02", 0) == 0);
    if (!busids_.insert(busid).second) {
      if (is_nic) {
        note(line_of(c), "NIC " + busid + " listed twice: kept once");
        return;
      }
      fail(c, "duplicate busid " + busid);
    }
    Dev d;
    d.parent = parent;
    d.cpu = cpu;
    d.busid = busid;
    d.line = line_of(c);
    link_of(c, parent, d);
    if (is_gpu) {
      d.kind = NodeKind::gpu;
      if (hex_attr(c, "vendor") == kNvidiaVendorId) d.device_id = hex_attr(c, "device");
      if (pugi::xml_node g = c.child("gpu")) read_gpu(g, d);
      devs_.push_back(std::move(d));
    } else if (is_nic) {
      d.kind = NodeKind::nic;
      add_nic(c.child("nic"), std::move(d));
    } else if (c.child("pci")) {
      d.kind = NodeKind::pcie_switch;
      devs_.push_back(std::move(d));
      walk(c, static_cast<int>(devs_.size()) - 1, cpu, depth + 1);
    } else if (cls.empty()) {
      ++bare_pci_;  // a static skeleton's bare bus id
    }
    // Other PCI functions (no GPU, NIC or children) play no part in routing.
  }

  void read_gpu(const pugi::xml_node& g, Dev& d) {
    d.dev = static_cast<int>(int_attr(g, "dev"));
    d.line = line_of(g);
    d.sm = static_cast<int>(int_attr(g, "sm", 0L));
    if (pugi::xml_node x = g.child("xgmi")) {
      fail(x,
           "AMD xGMI GPU links (<xgmi>, RCCL's topology) are not modelled; refusing the file "
           "rather than dropping them");
    }
    for (pugi::xml_node nv : g.children("nvlink")) {
      NvlinkEntry e;
      e.target = nv.attribute("target").as_string();
      if (e.target.empty()) fail(nv, "<nvlink> without target");
      const long count = int_attr(nv, "count");
      if (count < 1 || count > 64) fail(nv, "NVLink count must be 1..64");
      e.count = static_cast<int>(count);
      e.tclass = nv.attribute("tclass").as_string();
      e.line = line_of(nv);
      d.nvlinks.push_back(std::move(e));
    }
  }

  // A NIC: one node per card (its <net> children are its ports); the same card listed under two
  // CPUs (same <net> names) is one NIC.
  void add_nic(const pugi::xml_node& nic, Dev d) {
    int ports = 0;
    for (pugi::xml_node net : nic.children("net")) {
      std::string name = net.attribute("name").as_string();
      for (char& ch : name) {  // any bytes in the file; the name goes into JSON (UTF-8), one line
        if (static_cast<unsigned char>(ch) <= 0x20 || static_cast<unsigned char>(ch) > 0x7e ||
            ch == ',')
          ch = '?';
      }
      d.nets += name + " ";
      if (!name.empty()) d.name += (d.name.empty() ? "" : ",") + name;
      ++ports;
    }
    d.ports = std::max(ports, 1);
    if (d.busid.empty() && !d.nets.empty()) {
      for (const Dev& o : devs_) {
        if (o.kind == NodeKind::nic && o.nets == d.nets) {
          note(d.line, "NIC " + d.nets.substr(0, d.nets.size() - 1) +
                           " listed under two CPUs: kept once, under the first");
          return;
        }
      }
    }
    devs_.push_back(std::move(d));
  }

  std::vector<int> gpus() const {
    std::vector<int> out;
    for (size_t i = 0; i < devs_.size(); ++i) {
      if (devs_[i].kind == NodeKind::gpu) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  void check_gpus_present(const pugi::xml_node& system) const {
    if (!gpus().empty()) return;
    if (bare_pci_ > 0)
      fail(system,
           "no GPU in the file: it is a static topology skeleton (bare PCI bus ids, no GPU or NIC "
           "class) that NCCL completes on the live machine; import the topology NCCL dumps there "
           "instead (run with NCCL_TOPO_DUMP_FILE=topo.xml)");
    fail_at(line_of(system), "no <gpu> element");
  }

  // GPU order: <gpu dev> when every GPU has one (must be 0..N-1), else bus-id order.
  void number_gpus() {
    gpu_order_ = gpus();
    const bool all_dev = std::all_of(gpu_order_.begin(), gpu_order_.end(),
                                     [&](int i) { return devs_[static_cast<size_t>(i)].dev >= 0; });
    auto key = [&](int i) -> const Dev& { return devs_[static_cast<size_t>(i)]; };
    if (all_dev) {
      std::stable_sort(gpu_order_.begin(), gpu_order_.end(),
                       [&](int a, int b) { return key(a).dev < key(b).dev; });
      for (size_t k = 0; k < gpu_order_.size(); ++k) {
        const Dev& d = key(gpu_order_[k]);
        if (d.dev != static_cast<int>(k))
          fail_at(d.line, "GPU dev numbers must be 0.." + std::to_string(gpu_order_.size() - 1) +
                              ", got dev=\"" + std::to_string(d.dev) + "\"");
      }
    } else {
      std::stable_sort(gpu_order_.begin(), gpu_order_.end(),
                       [&](int a, int b) { return key(a).busid < key(b).busid; });
      note(key(gpu_order_[0]).line,
           "GPUs given by PCI class without a <gpu> element: numbered in bus-id order");
    }
    for (size_t k = 0; k < gpu_order_.size(); ++k)
      gpu_of_bus_[key(gpu_order_[k]).busid] = static_cast<int>(k);
  }

  // Model per GPU: --gpu-model, else the pci device id, else generic.
  void pick_models() {
    for (int i : gpu_order_) {
      Dev& d = devs_[static_cast<size_t>(i)];
      if (forced_) {
        d.spec = *forced_;
        continue;
      }
      if (auto g = d.device_id >= 0 ? find_gpu_model_by_pci_id(d.device_id) : std::nullopt) {
        d.spec = *g;
        continue;
      }
      d.spec = *find_gpu_model("generic");
      char id[16];
      std::snprintf(id, sizeof id, "0x%04x", d.device_id);
      if (d.device_id >= 0)
        note(d.line, std::string("PCI device ") + id +
                         " is not in the GPU registry: model generic (pass --gpu-model)");
    }
  }

  // The first GPU at or below device i (file order), or nullptr.
  const Dev* gpu_below(int i) const {
    for (int g : gpus()) {
      for (int a = g; a >= 0; a = devs_[static_cast<size_t>(a)].parent) {
        if (a == i) return &devs_[static_cast<size_t>(g)];
      }
    }
    return nullptr;
  }

  // Links nothing above gave a figure for take the GPU model's own PCIe link; a VM's placeholder
  // (2.5 GT/s x1) above a Gen4+ GPU is replaced by it, with a note; --pcie-gen/--pcie-width win.
  void resolve_links() {
    for (size_t i = 0; i < devs_.size(); ++i) {
      Dev& d = devs_[i];
      const Dev* g = gpu_below(static_cast<int>(i));
      const GpuSpec generic = *find_gpu_model("generic");
      const GpuSpec& spec = g ? g->spec : generic;
      const int gen = detail::import_default_gen(ImportOptions{}, spec);
      const int width = detail::import_default_width(ImportOptions{}, spec);
      const bool placeholder = d.from_file && d.gen == 1 && d.width == 1 && spec.pcie_gen >= 4;
      if (placeholder && options_.pcie_gen == 0)
        note(d.line, "2.5 GT/s x1 link above a Gen" + std::to_string(spec.pcie_gen) + " " +
                         spec.model + " is a virtual bridge's placeholder: using the GPU's Gen" +
                         std::to_string(gen) + " x" + std::to_string(width));
      if (d.gen == 0 || placeholder) d.gen = gen;
      if (d.width == 0 || placeholder) d.width = width;
      if (options_.pcie_gen > 0) d.gen = options_.pcie_gen;
      if (options_.pcie_width > 0) d.width = options_.pcie_width;
    }
  }

  // Whether an NVLink entry points at the GPU's CPU: not itself, not an NVSwitch, not a GPU.
  bool to_cpu(const Dev& d, const NvlinkEntry& e) const {
    return e.target != d.busid && e.tclass != "0x068000" && e.target != kNvswitchPlaceholderBusid &&
           !gpu_of_bus_.count(e.target) && e.tclass.rfind("0x03", 0) != 0;
  }

  // A GPU right under its <cpu> with an NVLink to the CPU and a model with NVLink-C2C (GH200):
  // its host link is c2c, at the model's rate.
  void mark_c2c() {
    for (int i : gpu_order_) {
      Dev& d = devs_[static_cast<size_t>(i)];
      d.c2c = d.parent < 0 && d.spec.c2c_Bps > 0 &&
              std::any_of(d.nvlinks.begin(), d.nvlinks.end(),
                          [&](const NvlinkEntry& e) { return to_cpu(d, e); });
    }
  }

  Result<Topology> build(int system_line) {
    add_cpu_nodes();
    add_device_nodes();
    const bool listed = add_nvlinks();
    add_nvlink_fill(listed, system_line);
    std::vector<std::string> cpu_ids(cpus_.size());
    for (size_t k = 0; k < cpus_.size(); ++k) cpu_ids[k] = "cpu" + std::to_string(k);
    gb_.sockets(cpu_ids, amd_ ? LinkKind::xgmi : LinkKind::upi, system_line);
    const GpuSpec& first = devs_[static_cast<size_t>(gpu_order_[0])].spec;
    Topology::Options topt;
    topt.p2p = options_.p2p.value_or(first.p2p_capable);
    detail::note_compute_figures(gb_, file_, first);
    topt.notes = gb_.notes;
    return Topology::build(detail::import_name(file_), "imported from NCCL topology XML: " + detail::printable_copy(file_),
                           std::move(gb_.nodes), std::move(gb_.links), topt, file_,
                           std::move(gb_.node_places), std::move(gb_.link_places));
  }

  void add_cpu_nodes() {
    std::vector<const Cpu*> by_index(cpus_.size());
    for (const Cpu& c : cpus_) by_index[static_cast<size_t>(c.index)] = &c;
    for (const Cpu* c : by_index) {
      Node n;
      n.id = "cpu" + std::to_string(c->index);
      n.kind = NodeKind::cpu;
      n.numa_node = c->index;
      if (c->numaid >= 0 && c->numaid != c->index) n.numa_id = c->numaid;
      gb_.node(std::move(n), c->line);
    }
  }

  // Switches in file order (sw0..), GPUs in GPU order (gpu0..), NICs in file order (nic0..).
  void add_device_nodes() {
    int sw = 0, nic = 0;
    for (Dev& d : devs_) {
      if (d.kind == NodeKind::pcie_switch) d.id = "sw" + std::to_string(sw++);
      if (d.kind == NodeKind::nic) d.id = "nic" + std::to_string(nic++);
    }
    for (size_t k = 0; k < gpu_order_.size(); ++k)
      devs_[static_cast<size_t>(gpu_order_[k])].id = "gpu" + std::to_string(k);
    auto add = [&](Dev& d) {
      Node n;
      n.id = d.id;
      n.kind = d.kind;
      if (d.kind == NodeKind::gpu) n.gpu = d.spec;
      if (d.kind == NodeKind::pcie_switch) n.acs_redirect = options_.acs_redirect;
      if (d.kind == NodeKind::nic) {
        n.ports = d.ports;
        n.name = d.name;
      }
      gb_.node(std::move(n), d.line);
      const std::string up = d.parent >= 0
                                 ? devs_[static_cast<size_t>(d.parent)].id
                                 : "cpu" + std::to_string(cpus_[static_cast<size_t>(d.cpu)].index);
      if (d.c2c)
        gb_.c2c(up, d.id, d.spec.c2c_Bps, d.line);
      else
        gb_.pcie(up, d.id, d.gen, d.width, d.line);
    };
    for (NodeKind k : {NodeKind::pcie_switch, NodeKind::gpu, NodeKind::nic}) {
      if (k == NodeKind::gpu) {
        for (int i : gpu_order_) add(devs_[static_cast<size_t>(i)]);
        continue;
      }
      for (Dev& d : devs_) {
        if (d.kind == k) add(d);
      }
    }
  }

  // Per-link rate: the GPU model's, else from <gpu sm>'s NVLink generation, else 25 GB/s.
  static double nvlink_rate(const Dev& d) {
    if (d.spec.nvlink_per_link_Bps > 0 || d.spec.nvlink_gen > 0)
      return detail::import_nvlink_rate_Bps(d.spec);
    if (const double r = nvlink_per_link_Bps_of_gen(nvlink_gen_of_sm(d.sm)); r > 0) return r;
    return nvlink_default_per_link_Bps();
  }

  // Returns whether the file lists any NVLink.
  bool add_nvlinks() {
    std::map<std::string, std::string> nvswitch_of_bus;
    std::set<std::pair<int, int>> pairs;
    bool listed = false;
    for (size_t k = 0; k < gpu_order_.size(); ++k) {
      const Dev& d = devs_[static_cast<size_t>(gpu_order_[k])];
      const double rate = nvlink_rate(d);
      for (const NvlinkEntry& e : d.nvlinks) {
        listed = true;
        const auto g = gpu_of_bus_.find(e.target);
        if (e.target == d.busid) {
          note(e.line,
               "NVLink of " + d.id + " to itself (" + std::to_string(e.count) + " links): dropped");
        } else if (e.tclass == "0x068000" || e.target == kNvswitchPlaceholderBusid) {
          auto it = nvswitch_of_bus.find(e.target);
          if (it == nvswitch_of_bus.end()) {
            it = nvswitch_of_bus
                     .emplace(e.target, "nvswitch" + std::to_string(nvswitch_of_bus.size()))
                     .first;
            Node n;
            n.id = it->second;
            n.kind = NodeKind::nvswitch;
            gb_.node(std::move(n), e.line);
          }
          gb_.nvlink(d.id, it->second, e.count, e.line, rate);
        } else if (g != gpu_of_bus_.end()) {
          const int a = std::min(static_cast<int>(k), g->second),
                    b = std::max(static_cast<int>(k), g->second);
          if (pairs.emplace(a, b).second)
            gb_.nvlink("gpu" + std::to_string(a), "gpu" + std::to_string(b), e.count, e.line, rate);
        } else if (e.tclass.rfind("0x03", 0) == 0) {
          note(e.line,
               "NVLink of " + d.id + " to GPU " + e.target + ", which is not in the file: dropped");
        } else if (!d.c2c) {
          note(e.line, "NVLink of " + d.id + " to the CPU (" + e.target +
                           ", NVLink-C2C) is not modelled for a " + d.spec.model +
                           " below a PCIe bridge: the host link stays PCIe");
        }
      }
    }
    return listed;
  }

  // NVLink the file does not list: a note, and links only where --nvlink says so.
  void add_nvlink_fill(bool listed, int system_line) {
    const bool static_file = std::any_of(gpu_order_.begin(), gpu_order_.end(), [&](int i) {
      return devs_[static_cast<size_t>(i)].dev < 0;
    });
    if (listed) {
      if (fill_)
        fail_at(system_line,
                "--nvlink: the file already lists NVLink; it only fills files without");
      return;
    }
    if (!fill_) {
      if (static_file)
        note(system_line,
             "the file lists no NVLink (a static vendor file); if the machine has NVLink, pass "
             "--nvlink nvswitch:N or --nvlink direct:N (N links per GPU)");
      return;
    }
    const int n = static_cast<int>(gpu_order_.size());
    // N links per GPU cannot exceed what the GPU model has (its registry nvlink_links); a model
    // known to have none takes none. The generic model (nothing known) takes what it is told.
    for (int i : gpu_order_) {
      const GpuSpec& spec = devs_[static_cast<size_t>(i)].spec;
      if (spec.model == "generic") continue;
      const std::string given = std::string("--nvlink ") +
                                (fill_->nvswitch ? "nvswitch:" : "direct:") +
                                std::to_string(fill_->links);
      if (spec.nvlink_links <= 0) {
        fail_at(system_line, given + ": GPU model '" + spec.model + "' has no NVLink");
        return;
      }
      if (fill_->links > spec.nvlink_links) {
        fail_at(system_line, given + ": GPU model '" + spec.model + "' has " +
                                 std::to_string(spec.nvlink_links) + " NVLinks per GPU");
        return;
      }
    }
    const double rate = nvlink_rate(devs_[static_cast<size_t>(gpu_order_[0])]);
    note(system_line, std::string("NVLink added as told (--nvlink ") +
                          (fill_->nvswitch ? "nvswitch:" : "direct:") +
                          std::to_string(fill_->links) + ")");
    if (fill_->nvswitch) {
      Node s;
      s.id = "nvswitch0";
      s.kind = NodeKind::nvswitch;
      gb_.node(std::move(s), system_line);
      for (int k = 0; k < n; ++k)
        gb_.nvlink("gpu" + std::to_string(k), "nvswitch0", fill_->links, system_line, rate);
      return;
    }
    if (n < 2 || fill_->links % (n - 1) != 0)
      fail_at(system_line, "--nvlink direct:" + std::to_string(fill_->links) + ": " +
                               std::to_string(n) + " GPUs need a multiple of " +
                               std::to_string(std::max(n - 1, 1)) + " links per GPU");
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b)
        gb_.nvlink("gpu" + std::to_string(a), "gpu" + std::to_string(b), fill_->links / (n - 1),
                   system_line, rate);
    }
  }

  std::string_view text_;
  const std::string& file_;
  const ImportOptions& options_;
  const std::optional<GpuSpec>& forced_;
  const std::optional<detail::NvlinkFill>& fill_;
  GraphBuilder gb_;
  std::vector<pugi::xml_node> cpu_xml_;
  std::vector<Cpu> cpus_;
  std::vector<Dev> devs_;
  std::vector<int> gpu_order_;  // devs_ index of GPU k
  std::map<std::string, int> gpu_of_bus_;
  std::set<std::string> busids_;
  int bare_pci_ = 0;
  bool amd_ = false;
};

}  // namespace

Result<Topology> import_nccl_xml(std::string_view text, const std::string& file,
                                 const ImportOptions& options) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return input_error(file, "1", "empty file");
  std::optional<GpuSpec> forced;
  if (!options.gpu_model.empty()) {
    auto spec = detail::lookup_flag_gpu_model(options.gpu_model);
    if (!spec) return spec.error();
    forced = *spec;
  }
  auto fill = detail::parse_nvlink_fill(options.nvlink, file);
  if (!fill) return fill.error();
  XmlImporter imp(text, file, options, forced, *fill);
  return imp.run();
}

}  // namespace sparsp::topology
