// Real topology files (tests/data/topology/realtopo/, copies of ../shared/realtopo/): each imports
// with the facts its README row gives, or is refused with a message saying what it is. Expected
// values come from that README (the file itself, the same machine's nvidia-smi output, vendor
// documentation) and datasheets, never from this importer's output.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "read_file.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp::topology;

// The case table names only the facts each README row gives; the rest keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace {

const std::string kReal = std::string(SPARSP_TEST_DATA_DIR) + "/topology/realtopo/";

using sparsp::topology::test::read;

struct RealCase {
  const char* file;
  const char* gpu_model = "";  // --gpu-model, "" for none
  const char* nvlink = "";     // --nvlink, "" for none
  const char* refuse = "";     // non-empty: the import fails with a message containing this
  int gpus = 0;
  int sockets = 0;
  int switches = -1;  // -1: not stated by the README
  int nics = -1;
  const char* model = "";           // registry name of every GPU
  const char* pair01 = "";          // path class of GPU0-GPU1 as the real topo -m shows it
  const char* pair0last = "";       // path class of GPU0 and the last GPU
  double nvlink_per_link_GBps = 0;  // per-link nominal rate of every NVLink, 0: none
  int pcie_gen = 0;                 // PCIe generation of GPU0's own link, 0: not PCIe
  std::vector<int> numa;            // gpu_numa_node as the OS numbers it
  std::vector<int> socket;          // gpu_socket
  const char* note = "";            // an importer note that must be there
};

int count_kind(const Topology& t, NodeKind k) {
  return static_cast<int>(std::count_if(t.nodes().begin(), t.nodes().end(),
                                        [&](const Node& n) { return n.kind == k; }));
}

const Link& uplink_of(const Topology& t, const std::string& id) {
  for (const Link& l : t.links()) {
    if (l.kind == LinkKind::pcie && l.b == id) return l;
  }
  FAIL("no PCIe uplink of " << id);
  return t.links().front();
}

sparsp::Result<Topology> import(const RealCase& c) {
  ImportOptions opt;
  opt.gpu_model = c.gpu_model;
  opt.nvlink = c.nvlink;
  const std::string path = kReal + c.file;
  const std::string f = c.file;
  return f.size() > 4 && f.compare(f.size() - 4, 4, ".xml") == 0
             ? import_nccl_xml(read(path), c.file, opt)
             : import_nvidia_smi(read(path), c.file, opt);
}

std::string notes_of(const Topology& t) {
  std::string all;
  for (const auto& n : t.options().notes) all += n + "\n";
  return all;
}

// clang-format off
const std::vector<RealCase> kCases = {
    // AWS p4d.24xlarge: 8x A100-SXM4-40GB (device 0x20b0) as pci class 0x030200 without <gpu>; 2
    // sockets; 4 switches of 2 GPUs + 1 EFA NIC (class 0x020000); 8 GT/s = Gen3 as the file says;
    // no NVLink in the file: a note, nothing filled in.
    {"aws-ofi-nccl_p4d-24xl-topo.xml", "", "", "", 8, 2, 4, 4, "NVIDIA A100-SXM4-40GB", "PIX", "SYS",
     0, 3, {0, 0, 0, 0, 1, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1, 1}, "lists no NVLink"},
    // The same machine with its NVLink as the user says: NV12 all pairs through NVSwitch, third-
    // generation NVLink 25 GB/s per link per direction (A100 whitepaper: 12 links, 600 GB/s total).
    {"aws-ofi-nccl_p4d-24xl-topo.xml", "", "nvswitch:12", "", 8, 2, 4, 4, "NVIDIA A100-SXM4-40GB",
     "NV12", "NV12", 25, 3, {}, {}, "NVLink added as told"},
    // Azure ND H100 v5: 8 GPUs by class, 2 NUMA, 8 switches of 1 GPU + 1 IB NIC (class 0x020700),
    // 32 GT/s = Gen5; no device id, so no model; NVLink not in the file: a note.
    {"azhpc-images_ndv5-topo.xml", "", "", "", 8, 2, 8, 8, "generic", "NODE", "SYS", 0, 5,
     {0, 0, 0, 0, 1, 1, 1, 1}, {}, "lists no NVLink"},
    // With the real machine's NV18 told (H100 SXM, fourth-generation NVLink 25 GB/s per link).
    {"azhpc-images_ndv5-topo.xml", "H100 SXM", "nvswitch:18", "", 8, 2, 8, 8, "NVIDIA H100 SXM",
     "NV18", "NV18", 25, 5, {}, {}, ""},
    // AWS g5.48xlarge: bare bus ids only: a static skeleton, refused.
    {"aws-ofi-nccl_g5.48xl-topo.xml", "", "", "static topology skeleton", 0, 0},
    {"aws-ofi-nccl_g5.48xl-topo.xml", "", "", "NCCL_TOPO_DUMP_FILE", 0, 0},
    // Azure NC A100 v4: 4 GPUs on 4 NUMA nodes, all SYS; model A100 80GB PCIe from device 0x20b5;
    // link_speed=""/link_width="0" inherit, nothing above: the model's own Gen4 x16 (A100
    // datasheet); NVLinks to the GPU itself dropped with a note; the NIC under a <cpu> kept.
    {"azhpc-images_ncv4-topo.xml", "", "", "", 4, 4, 0, 1, "NVIDIA A100 80GB PCIe", "SYS", "SYS", 0,
     4, {0, 1, 2, 3}, {0, 1, 2, 3}, "to itself"},
    // 8x MI300X with <xgmi> links: refused with a message, not dropped.
    {"rocm-rccl_topo_expl-models_topo_8p_940.xml", "", "", "xGMI", 0, 0},
    // HGX B200: NV18 all pairs at NVLink5's 50 GB/s per link; 2 sockets (NUMA 0/1); host links
    // Gen5 from the model (HGX B200 datasheet).
    {"simllm_vastai-hgx-b200-8x_topo-m.txt", "B200", "", "", 8, 2, -1, -1, "NVIDIA B200", "NV18",
     "NV18", 50, 5, {0, 0, 0, 0, 1, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1, 1}, ""},
    // Quad GH200: NV6 all pairs; NUMA Affinity lists "0,5-11": 4 Grace sockets, GPU i on NUMA i;
    // the host link is NVLink-C2C, not PCIe (checked below).
    {"hpc-ai-envs_quad-gh200_topo-m.txt", "GH200", "", "", 4, 4, -1, -1, "NVIDIA GH200 480GB", "NV6",
     "NV6", 25, 0, {0, 1, 2, 3}, {0, 1, 2, 3}, ""},
    // DGX-1 V100: NIC columns named mlx5_2 mlx5_0 mlx5_3 mlx5_1 (4 NICs); NV1/NV2 hybrid cube mesh;
    // no NUMA column: 2 sockets from SYS (GPUs 0-3, 4-7), also between NVLink peers (GPU0-GPU4 is
    // NV2 but on the other socket); V100 PCIe Gen3 (V100 datasheet).
    {"pytorch-ddp-benchmark-readme_dgx1-v100_topo-m.txt", "V100", "", "", 8, 2, -1, 4,
     "Tesla V100-SXM2-32GB", "NV1", "SYS", 25, 3, {}, {0, 0, 0, 0, 1, 1, 1, 1},
     "no NUMA Affinity column"},
    // 8x V100 SXM2: NV1/NV2/SYS, NUMA 0/1, 2 sockets; Gen3 x16 with --gpu-model V100.
    {"lmdeploy-issue-4423_8x-v100-sxm2-nv1-nv2_topo-m.txt", "V100", "", "", 8, 2, -1, -1,
     "Tesla V100-SXM2-32GB", "NV1", "SYS", 25, 3, {0, 0, 0, 0, 1, 1, 1, 1},
     {0, 0, 0, 0, 1, 1, 1, 1}, ""},
    // ASUS ESC8000A-E12: 4x RTX 6000 Ada, NODE/SYS, 2 sockets, 4 mlx5 ports on 2 dual-port cards
    // (NIC0-NIC1 and NIC2-NIC3 PIX, same paths to every GPU: 2 NIC nodes with ports 2, checked
    // below); RTX 6000 Ada is Gen4 x16.
    {"stelline_asus-esc8000a-e12_topo-m.txt", "NVIDIA RTX 6000 Ada Generation", "", "", 4, 2, -1, 2,
     "NVIDIA RTX 6000 Ada Generation", "NODE", "SYS", 0, 4, {0, 0, 1, 1}, {0, 0, 1, 1}, ""},
    // H200 VM fragment: numaid="-1" is an unknown NUMA node (a note); model H200 from device 0x2335;
    // 18 NVLinks into NCCL's fffffff:ff:ff.0 NVSwitch placeholder; 16 GT/s = Gen4 as given.
    {"nccl-tests-256_h200-vm_numaid-minus1_FRAGMENT-closed.xml", "", "", "", 1, 1, 0, 1,
     "NVIDIA H200", "", "", 25, 4, {0}, {0}, "numaid=\"-1\""},
};
// clang-format on

}  // namespace

TEST_CASE("real topology files import with the facts their README gives") {
  for (const RealCase& c : kCases) {
    CAPTURE(c.file);
    CAPTURE(c.nvlink);
    auto t = import(c);
    if (*c.refuse) {
      REQUIRE_FALSE(t.ok());
      CHECK(t.error().exit_code == 2);
      CHECK(t.error().message.find(c.refuse) != std::string::npos);
      CHECK(t.error().message.rfind(std::string(c.file) + ":", 0) == 0);
      CHECK(t.error().message.find('\n') == std::string::npos);
      continue;
    }
    REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
    CHECK(t->num_gpus() == c.gpus);
    CHECK(t->num_sockets() == c.sockets);
    if (c.switches >= 0) CHECK(t->num_switches() == c.switches);
    if (c.nics >= 0) CHECK(count_kind(*t, NodeKind::nic) == c.nics);
    for (int g = 0; g < t->num_gpus(); ++g) CHECK(t->gpu(g).model == c.model);
    const int last = t->num_gpus() - 1;
    if (*c.pair01) CHECK(to_string(t->path_class(0, 1), t->nvlink_count(0, 1)) == c.pair01);
    if (*c.pair0last)
      CHECK(to_string(t->path_class(0, last), t->nvlink_count(0, last)) == c.pair0last);
    int nvlinks = 0;
    for (const Link& l : t->links()) {
      if (l.kind != LinkKind::nvlink) continue;
      ++nvlinks;
      CHECK(l.nvlink_per_link_Bps / 1e9 == doctest::Approx(c.nvlink_per_link_GBps));
    }
    CHECK((nvlinks > 0) == (c.nvlink_per_link_GBps > 0));
    if (c.pcie_gen > 0) CHECK(uplink_of(*t, "gpu0").pcie_gen == c.pcie_gen);
    const auto shown_numa = nlohmann::json::parse(show_json(*t))["gpu_numa_node"];
    for (size_t g = 0; g < c.numa.size(); ++g) {
      CHECK(t->gpu_numa_node(static_cast<int>(g)) == c.numa[g]);
      CHECK(shown_numa[g] == c.numa[g]);  // topo show --json, as nvidia-smi / NCCL number them
    }
    for (size_t g = 0; g < c.socket.size(); ++g)
      CHECK(t->gpu_socket(static_cast<int>(g)) == c.socket[g]);
    if (*c.note) CHECK(notes_of(*t).find(c.note) != std::string::npos);
    // The canonical JSON round-trips, notes included.
    auto back = Topology::from_json_text(t->to_json(), "re.json");
    REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
    CHECK(back->to_json() == t->to_json());
    // `topo show --json` loads back as the same topology (its /topology member): same GPUs,
    // links and path classes; the report keeps the registry names.
    const std::string report = show_json(*t);
    const auto rj = nlohmann::json::parse(report);
    for (int g = 0; g < t->num_gpus(); ++g)
      CHECK(rj["gpu_models"][static_cast<size_t>(g)] == c.model);
    auto shown = Topology::from_json_text(report, "show.json");
    REQUIRE_MESSAGE(shown.ok(), (shown.ok() ? "" : shown.error().message));
    CHECK(shown->num_gpus() == c.gpus);
    CHECK(shown->links().size() == t->links().size());
    for (int i = 0; i < t->num_gpus(); ++i)
      for (int j = 0; j < t->num_gpus(); ++j) {
        CHECK(shown->path_class(i, j) == t->path_class(i, j));
        CHECK(shown->nvlink_count(i, j) == t->nvlink_count(i, j));
      }
    CHECK(shown->to_json() == t->to_json());
    CHECK(show_json(*shown) == report);
  }
}

TEST_CASE("topo show --json: a report with a stray key or a bad graph is refused") {
  auto t = import({"lmdeploy-issue-4423_8x-v100-sxm2-nv1-nv2_topo-m.txt", "V100"});
  REQUIRE(t.ok());
  auto rj = nlohmann::json::parse(show_json(*t));
  auto stray = rj;
  stray["gpu_modles"] = 1;  // a typo is not silently ignored
  auto e1 = Topology::from_json_text(stray.dump(), "r.json");
  REQUIRE_FALSE(e1.ok());
  CHECK(e1.error().message.rfind("r.json:/gpu_modles: unknown key 'gpu_modles'", 0) == 0);
  auto bad = rj;
  bad["topology"]["links"][0]["gen"] = 9;  // the first link is cpu0 -> gpu0, PCIe
  auto e2 = Topology::from_json_text(bad.dump(), "r.json");
  REQUIRE_FALSE(e2.ok());
  CHECK(e2.error().message == "r.json:/topology/links/0/gen: PCIe gen must be 1..6, got 9");
  auto dup = rj;
  dup["topology"]["nodes"][1]["id"] = dup["topology"]["nodes"][0]["id"];
  auto e3 = Topology::from_json_text(dup.dump(), "r.json");
  REQUIRE_FALSE(e3.ok());
  CHECK(e3.error().message.find("(first at /topology/nodes/0)") != std::string::npos);
  auto not_obj = rj;
  not_obj["topology"] = 3;
  auto e4 = Topology::from_json_text(not_obj.dump(), "r.json");
  REQUIRE_FALSE(e4.ok());
  CHECK(e4.error().message == "r.json:/topology: expected an object, got number");
}

TEST_CASE("real files: structure beyond counts") {
  // p4d: each switch holds 2 GPUs and 1 NIC (the file's comments: "Each group has 2 GPUs and 1
  // NIC behind a PCIe switch"); GPU order is bus-id order (10:1c, 10:1d, 20:1c, ...).
  auto p4d = import({"aws-ofi-nccl_p4d-24xl-topo.xml"});
  REQUIRE(p4d.ok());
  for (int s = 0; s < 4; ++s) {
    const std::string sw = "sw" + std::to_string(s);
    CHECK(p4d->ancestors(2 * s).front() == sw);
    CHECK(p4d->ancestors(2 * s + 1).front() == sw);
    CHECK(uplink_of(*p4d, "nic" + std::to_string(s)).a == sw);
  }
  // ncv4: the NIC directly under the first <cpu> hangs from cpu0.
  auto ncv4 = import({"azhpc-images_ncv4-topo.xml"});
  REQUIRE(ncv4.ok());
  CHECK(uplink_of(*ncv4, "nic0").a == "cpu0");
  // Four self-NVLink rows, four notes.
  const std::string notes = notes_of(*ncv4);
  int self = 0;
  for (size_t p = notes.find("to itself"); p != std::string::npos;
       p = notes.find("to itself", p + 1))
    ++self;
  CHECK(self == 4);
  // H200 VM: one NVSwitch node, 18 links into it.
  auto vm = import({"nccl-tests-256_h200-vm_numaid-minus1_FRAGMENT-closed.xml"});
  REQUIRE(vm.ok());
  CHECK(count_kind(*vm, NodeKind::nvswitch) == 1);
  CHECK(vm->links().back().nvlink_count == 18);
}

TEST_CASE("real files: modelled rates against the machines' measurements") {
  // HGX B200 NV18: 18 x 50 GB/s = 900 GB/s nominal per direction, times the NVLink efficiency
  // 396/450 (H200 copy-engine measurement) = 792 GB/s.
  auto b200 = import({"simllm_vastai-hgx-b200-8x_topo-m.txt", "B200"});
  REQUIRE(b200.ok());
  const auto rb = single_flow_report(*b200);
  CHECK(rb.bandwidth_Bps[0][1] / 1e9 == doctest::Approx(792.0).epsilon(1e-6));
  // B200 host link Gen5 x16: 32 GT/s * 16 / 8 * 128/130 * 256/280 * 0.92 = 53.00 GB/s.
  CHECK(rb.h2d_Bps[0] / 1e9 == doctest::Approx(53.0050).epsilon(1e-4));

  // 8x V100 SXM2: Gen3 x16 = 8 GT/s * 16 / 8 * 128/130 * 256/280 * 0.92 = 13.25 GB/s to the host;
  // one NVLink 2 link = 25 GB/s * 396/450 = 22 GB/s; cross-socket PCIe (SYS) is slower than NV1.
  auto v100 = import({"lmdeploy-issue-4423_8x-v100-sxm2-nv1-nv2_topo-m.txt", "V100"});
  REQUIRE(v100.ok());
  // V100 has SMs but no bf16 tensor cores: the note says so (it said "0 SMs") and is kept.
  CHECK(notes_of(*v100).find("GPU model 'Tesla V100-SXM2-32GB' has no bf16 figure (80 SMs, no "
                             "bf16 tensor cores)") != std::string::npos);
  const auto rv = single_flow_report(*v100);
  CHECK(rv.h2d_Bps[0] / 1e9 == doctest::Approx(13.2512).epsilon(1e-4));
  CHECK(rv.bandwidth_Bps[0][1] / 1e9 == doctest::Approx(22.0).epsilon(1e-6));  // NV1
  CHECK(rv.bandwidth_Bps[0][5] < rv.bandwidth_Bps[0][1]);                      // SYS < NV1

  // Quad GH200: each GPU's host link is NVLink-C2C from its own Grace, 450 GB/s per direction
  // nominal (GH200 datasheet: 900 GB/s bidirectional) times the NVLink copy-engine efficiency
  // 396/450 = 396 GB/s.
  auto gh = import({"hpc-ai-envs_quad-gh200_topo-m.txt", "GH200"});
  REQUIRE(gh.ok());
  for (int g = 0; g < 4; ++g) {
    const std::string id = "gpu" + std::to_string(g);
    const auto up = std::find_if(gh->links().begin(), gh->links().end(), [&](const Link& l) {
      return l.b == id && l.kind != LinkKind::nvlink;
    });
    REQUIRE(up != gh->links().end());
    CHECK(up->kind == LinkKind::c2c);
    CHECK(up->a == "cpu" + std::to_string(g));
  }
  const auto rg = single_flow_report(*gh);
  CHECK(rg.h2d_Bps[0] / 1e9 == doctest::Approx(396.0).epsilon(1e-6));
  CHECK(rg.d2h_Bps[3] / 1e9 == doctest::Approx(396.0).epsilon(1e-6));
  // c2c joins a cpu to a gpu, nothing else.
  auto bad = Topology::build(
      "x", "", {Node{"cpu0", NodeKind::cpu}, Node{"gpu0", NodeKind::gpu, find_gpu_model("GH200")}},
      {Link{"gpu0", "cpu0", LinkKind::c2c}}, {}, "x.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("c2c joins a cpu (a) to a gpu (b)") != std::string::npos);

  // ESC8000A-E12 (RTX 6000 Ada, Gen4 x16): measured bandwidthTest H2D 26.8 GB/s, D2H 26.3 GB/s,
  // p2pBandwidthLatencyTest unidirectional P2P-on 26.32-26.33 GB/s. Model: 16 GT/s * 16 / 8 *
  // 128/130 * 256/280 * 0.92 = 26.50 GB/s, within 2% of each.
  auto asus = import({"stelline_asus-esc8000a-e12_topo-m.txt", "NVIDIA RTX 6000 Ada Generation"});
  REQUIRE(asus.ok());
  // Two dual-port cards: NIC0+NIC1 on socket 0, NIC2+NIC3 on socket 1, all 4 ports kept.
  std::vector<int> ports;
  for (const Node& n : asus->nodes())
    if (n.kind == NodeKind::nic) ports.push_back(n.ports);
  CHECK(ports == std::vector<int>{2, 2});
  CHECK(notes_of(*asus).find("NIC0 and 1 more NIC(s) PIX to it with the same paths to every "
                             "GPU: one card with 2 ports (nic0)") != std::string::npos);
  const auto ra = single_flow_report(*asus);
  CHECK(ra.h2d_Bps[0] / 1e9 == doctest::Approx(26.8).epsilon(0.02));
  CHECK(ra.d2h_Bps[0] / 1e9 == doctest::Approx(26.3).epsilon(0.02));
  CHECK(ra.p2p[0][1]);
  CHECK(ra.bandwidth_Bps[0][1] / 1e9 == doctest::Approx(26.33).epsilon(0.02));
  // Bidirectional P2P-on, measured 52.10-52.12 GB/s: the model's duplex factor (0.894, from the
  // Gen5 H200 machine) gives 2 * 0.894 * 26.50 = 47.40 GB/s, 9% low (topology/VALIDATION.md).
  CHECK(ra.bidir_bandwidth_Bps[0][1] / 1e9 == doctest::Approx(47.403).epsilon(1e-3));
  CHECK(ra.bidir_bandwidth_Bps[0][1] / 1e9 == doctest::Approx(52.11).epsilon(0.10));
}

TEST_CASE("nvidia-smi: NUMA ids as the OS numbers them") {
  // tests/data/topology/cases/2x-gen3-switch-no-p2p: both GPUs show NUMA Affinity 1 (one socket,
  // the machine's second NUMA node): gpu_numa_node stays 1, the socket index is 0 (host0).
  auto t = import_nvidia_smi(
      read(std::string(SPARSP_TEST_DATA_DIR) + "/topology/cases/2x-gen3-switch-no-p2p/topo.txt"),
      "topo.txt");
  REQUIRE(t.ok());
  CHECK(t->num_sockets() == 1);
  CHECK(t->gpu_numa_node(0) == 1);
  CHECK(t->gpu_numa_node(1) == 1);
  CHECK(t->gpu_socket(0) == 0);
  CHECK(t->host_endpoints() == std::vector<std::string>{"host0"});
  CHECK(t->to_json().find("\"numa_id\": 1") != std::string::npos);
}

TEST_CASE("GPU model registry") {
  // Every entry parsed, with its PCIe generation (datasheets): V100 Gen3, A100 Gen4, H100 Gen5.
  CHECK(find_gpu_model("V100 PCIe")->pcie_gen == 3);
  CHECK(find_gpu_model("NVIDIA A100-SXM4-80GB")->pcie_gen == 4);
  CHECK(find_gpu_model("H100 SXM")->pcie_gen == 5);
  // nvidia-smi's exact names and short aliases.
  CHECK(find_gpu_model("NVIDIA RTX 6000 Ada Generation")->sm_count == 142);
  // The 16 GB cards are their own entries (16 GiB, their own PCI ids), not the 32 GB ones.
  CHECK(find_gpu_model("Tesla V100-SXM2-16GB")->model == "Tesla V100-SXM2-16GB");
  CHECK(find_gpu_model("Tesla V100-SXM2-16GB")->memory_bytes == 16.0 * (1ull << 30));
  CHECK(find_gpu_model("Tesla V100-PCIE-16GB")->model == "Tesla V100-PCIE-16GB");
  CHECK(find_gpu_model("V100")->model == "Tesla V100-SXM2-32GB");
  CHECK(find_gpu_model("B200")->nvlink_per_link_Bps == doctest::Approx(50e9));
  CHECK(find_gpu_model("B200")->nvlink_links == 18);
  // PCI device ids (PCI ID database): 10de:2330 H100 SXM5, 10de:20b0 A100-SXM4-40GB.
  CHECK(find_gpu_model_by_pci_id(0x2330)->model == "NVIDIA H100 SXM");
  CHECK(find_gpu_model_by_pci_id(0x20b0)->model == "NVIDIA A100-SXM4-40GB");
  CHECK_FALSE(find_gpu_model_by_pci_id(0xffff));
  // An alias shared by several models is an error naming them.
  auto a100 = lookup_gpu_model("A100", "cli");
  REQUIRE_FALSE(a100.ok());
  CHECK(a100.error().message.find("matches several models") != std::string::npos);
  CHECK(a100.error().message.find("NVIDIA A100-SXM4-40GB") != std::string::npos);
  CHECK(a100.error().message.find("NVIDIA A100 80GB PCIe") != std::string::npos);
  // The models the issue lists are all there.
  for (const char* m :
       {"B200", "GH200", "H20", "H800", "A800", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB",
        "A10G", "L4", "L20", "L40", "RTX 6000 Ada", "RTX A6000", "RTX 3090", "V100", "V100 PCIe"}) {
    CAPTURE(m);
    CHECK(find_gpu_model(m));
  }
  // NVLink rate by generation (whitepapers): 1: 20, 2-4: 25, 5: 50 GB/s per link per direction.
  CHECK(nvlink_per_link_Bps_of_gen(1) == doctest::Approx(20e9));
  CHECK(nvlink_per_link_Bps_of_gen(4) == doctest::Approx(25e9));
  CHECK(nvlink_per_link_Bps_of_gen(5) == doctest::Approx(50e9));
  CHECK(nvlink_gen_of_sm(100) == 5);
  CHECK(nvlink_gen_of_sm(89) == 0);
}

TEST_CASE("NCCL XML: placeholder links, graph dumps, bad --nvlink") {
  auto err = [](const std::string& xml, const ImportOptions& o = {}) {
    auto t = import_nccl_xml(xml, "v.xml", o);
    return t.ok() ? std::string("<ok>") : t.error().message;
  };
  // A VM's virtual bridge at 2.5 GT/s x1 above an H100 SXM (Gen5 x16, H100 datasheet): replaced
  // by the GPU's own link, with a note.
  const std::string vm =
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\" "
      "class=\"0x060400\" link_speed=\"2.5 GT/s PCIe\" link_width=\"1\">\n      <pci "
      "busid=\"0000:02:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" "
      "link_speed=\"\" link_width=\"0\"/>\n    </pci>\n  </cpu>\n</system>\n";
  auto t = import_nccl_xml(vm, "v.xml");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  CHECK(uplink_of(*t, "sw0").pcie_gen == 5);
  CHECK(uplink_of(*t, "sw0").pcie_width == 16);
  CHECK(uplink_of(*t, "gpu0").pcie_gen == 5);
  CHECK(notes_of(*t).find("v.xml:3: 2.5 GT/s x1 link above a Gen5 NVIDIA H100 SXM") !=
        std::string::npos);
  // --pcie-gen wins over everything.
  ImportOptions gen3;
  gen3.pcie_gen = 3;
  auto t3 = import_nccl_xml(vm, "v.xml", gen3);
  REQUIRE(t3.ok());
  CHECK(uplink_of(*t3, "gpu0").pcie_gen == 3);
  // NCCL's graph dump is not a topology.
  CHECK(err("<graphs version=\"1\">\n<graph id=\"0\"/>\n</graphs>\n")
            .rfind("v.xml:1: this is NCCL's graph dump", 0) == 0);
  ImportOptions bad;
  bad.nvlink = "mesh:4";
  CHECK(err(vm, bad) ==
        "v.xml: --nvlink 'mesh:4': expected nvswitch:N or direct:N with N in 1..64");
  ImportOptions direct;
  direct.nvlink = "direct:6";
  auto two = import_nccl_xml(
      "<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"/><pci "
      "busid=\"0000:02:00.0\" class=\"0x030200\"/></cpu></system>",
      "d.xml", direct);
  REQUIRE_MESSAGE(two.ok(), (two.ok() ? "" : two.error().message));
  CHECK(two->nvlink_count(0, 1) == 6);
  // More links per GPU than the model has is refused: an H100 SXM has 18 NVLinks (registry,
  // H100 whitepaper), an L40S none.
  const std::string two_gpus =
      "<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"/><pci "
      "busid=\"0000:02:00.0\" class=\"0x030200\"/></cpu></system>";
  ImportOptions too_many;
  too_many.gpu_model = "H100 SXM";
  too_many.nvlink = "nvswitch:19";
  CHECK(err(two_gpus, too_many) ==
        "v.xml:1: --nvlink nvswitch:19: GPU model 'NVIDIA H100 SXM' has 18 NVLinks per GPU");
  too_many.nvlink = "nvswitch:18";
  CHECK(import_nccl_xml(two_gpus, "v.xml", too_many).ok());
  ImportOptions none;
  none.gpu_model = "L40S";
  none.nvlink = "direct:1";
  CHECK(err(two_gpus, none) == "v.xml:1: --nvlink direct:1: GPU model 'NVIDIA L40S' has no NVLink");
}

TEST_CASE("NCCL XML: NIC cards, NICs listed twice, unknown NUMA ids") {
  // A dual-port card (two <net> under one pci function) is one NIC with ports 2; the same
  // <nic> (same net names) under both CPUs is one NIC; two numaid="-1" CPUs are numbered in file
  // order after the known ones (here: none known).
  const std::string xml =
      "<system version=\"1\">\n"
      "  <cpu numaid=\"-1\">\n"
      "    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><gpu dev=\"0\" sm=\"80\"/></pci>\n"
      "    <pci busid=\"0000:02:00.0\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><nic><net name=\"mlx5_0\"/><net name=\"mlx5_1\"/></nic></pci>\n"
      "    <nic><net name=\"eth0\"/></nic>\n"
      "  </cpu>\n"
      "  <cpu numaid=\"-1\">\n"
      "    <pci busid=\"0000:81:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><gpu dev=\"1\" sm=\"80\"/></pci>\n"
      "    <nic><net name=\"eth0\"/></nic>\n"
      "  </cpu>\n"
      "</system>\n";
  auto t = import_nccl_xml(xml, "n.xml");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  CHECK(count_kind(*t, NodeKind::nic) == 2);
  CHECK(t->nodes()[static_cast<size_t>(t->node_index("nic0"))].ports == 2);
  CHECK(t->nodes()[static_cast<size_t>(t->node_index("nic1"))].ports == 1);
  CHECK(uplink_of(*t, "nic1").a == "cpu0");
  CHECK(t->gpu_socket(0) == 0);
  CHECK(t->gpu_socket(1) == 1);
  const std::string notes = notes_of(*t);
  CHECK(notes.find("n.xml:2: numaid=\"-1\" (NUMA node unknown): numbered socket 0") !=
        std::string::npos);
  CHECK(notes.find("n.xml:7: numaid=\"-1\" (NUMA node unknown): numbered socket 1") !=
        std::string::npos);
  CHECK(notes.find("n.xml:9: NIC eth0 listed under two CPUs: kept once") != std::string::npos);
  // sm 80 with a generic model: NVLink rate from sm (Ampere, NVLink 3: 25 GB/s per link).
  CHECK(to_string(t->path_class(0, 1), t->nvlink_count(0, 1)) == "SYS");
  auto back = Topology::from_json_text(t->to_json(), "re.json");
  REQUIRE(back.ok());
  CHECK(back->nodes()[static_cast<size_t>(back->node_index("nic0"))].ports == 2);
  // A note quoting bytes that are not UTF-8 (fuzzer find: a mangled NVLink target) stays
  // printable, so the JSON export does not throw.
  auto odd = import_nccl_xml(
      "<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\">"
      "<nvlink target=\"0000:0\xff:00.0\" count=\"2\" tclass=\"0x030200\"/></gpu></pci></cpu>"
      "</system>",
      "o.xml");
  REQUIRE(odd.ok());
  // The stray byte is written as \xff (input_error: bytes that are not UTF-8).
  CHECK(notes_of(*odd).find("to GPU 0000:0\\xff:00.0, which is not in the file") !=
        std::string::npos);
  CHECK(Topology::from_json_text(odd->to_json(), "re.json").ok());
}

TEST_CASE("nvidia-smi: the GPU NUMA ID column, in every real file that has it") {
  // README rows: quad GH200 GPU NUMA IDs 4/12/20/28 (GPU i's HBM, beside Grace i's NUMA node i);
  // the others print N/A (B200 after an empty padding cell: "0\t\tN/A").
  struct Want {
    const char* file;
    const char* gpu_model;
    std::vector<int> numa, memory_numa;  // -1: N/A
  };
  const std::vector<Want> files = {
      {"hpc-ai-envs_quad-gh200_topo-m.txt", "GH200", {0, 1, 2, 3}, {4, 12, 20, 28}},
      {"lmdeploy-issue-4423_8x-v100-sxm2-nv1-nv2_topo-m.txt",
       "V100",
       {0, 0, 0, 0, 1, 1, 1, 1},
       {-1, -1, -1, -1, -1, -1, -1, -1}},
      {"simllm_vastai-hgx-b200-8x_topo-m.txt",
       "B200",
       {0, 0, 0, 0, 1, 1, 1, 1},
       {-1, -1, -1, -1, -1, -1, -1, -1}},
      {"stelline_asus-esc8000a-e12_topo-m.txt",
       "NVIDIA RTX 6000 Ada Generation",
       {0, 0, 1, 1},
       {-1, -1, -1, -1}},
  };
  for (const Want& w : files) {
    CAPTURE(w.file);
    RealCase c{w.file, w.gpu_model};
    auto t = import(c);
    REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
    REQUIRE(t->num_gpus() == static_cast<int>(w.numa.size()));
    const auto rj = nlohmann::json::parse(show_json(*t));
    for (int g = 0; g < t->num_gpus(); ++g) {
      const auto gg = static_cast<size_t>(g);
      CHECK(t->gpu_memory_numa_id(g) == w.memory_numa[gg]);
      CHECK(rj["gpu_numa_node"][gg] == w.numa[gg]);  // as nvidia-smi's NUMA Affinity prints it
      if (w.memory_numa[gg] < 0)
        CHECK(rj["gpu_memory_numa_id"][gg].is_null());
      else
        CHECK(rj["gpu_memory_numa_id"][gg] == w.memory_numa[gg]);
    }
    // Kept by the canonical JSON.
    auto back = Topology::from_json_text(t->to_json(), "re.json");
    REQUIRE(back.ok());
    for (int g = 0; g < t->num_gpus(); ++g)
      CHECK(back->gpu_memory_numa_id(g) == w.memory_numa[static_cast<size_t>(g)]);
  }

  // GH200 without --gpu-model: the GPU NUMA ID says the memory is coherent, the model has no
  // NVLink-C2C: a note, and the host link stays PCIe (nothing filled in silently).
  auto generic = import({"hpc-ai-envs_quad-gh200_topo-m.txt"});
  REQUIRE(generic.ok());
  CHECK(notes_of(*generic).find("GPU0 has GPU NUMA ID 4") != std::string::npos);
  CHECK(generic->num_sockets() == 4);

  // The same file with its NUMA Affinity cells N/A: the GPU NUMA IDs alone give one Grace per
  // GPU (4 sockets, NV6 between them notwithstanding), each GPU on NVLink-C2C from its own CPU.
  std::string text = read(kReal + "hpc-ai-envs_quad-gh200_topo-m.txt");
  for (const char* list : {"0,5-11", "1,13-19", "2,21-27", "3,29-35"}) {
    const size_t p = text.find(list);
    REQUIRE(p != std::string::npos);
    text.replace(p, std::string(list).size(), "N/A");
  }
  ImportOptions gh;
  gh.gpu_model = "GH200";
  auto na = import_nvidia_smi(text, "gh.txt", gh);
  REQUIRE_MESSAGE(na.ok(), (na.ok() ? "" : na.error().message));
  CHECK(na->num_sockets() == 4);
  for (int g = 0; g < 4; ++g) {
    CHECK(na->gpu_socket(g) == g);
    const std::string id = "gpu" + std::to_string(g);
    const auto up = std::find_if(na->links().begin(), na->links().end(),
                                 [&](const Link& l) { return l.b == id; });
    REQUIRE(up != na->links().end());
    CHECK(up->kind == LinkKind::c2c);
    CHECK(up->a == "cpu" + std::to_string(g));
  }
  CHECK(notes_of(*na).find("gh.txt:1: no NUMA Affinity for GPUs with a GPU NUMA ID") !=
        std::string::npos);

  // Bad cells: not a number; one NUMA node for two GPUs' memories.
  const std::string head = "\tGPU0\tGPU1\tNUMA Affinity\tGPU NUMA ID\n";
  auto bad = import_nvidia_smi(head + "GPU0\t X \tNV6\t0\tx4\nGPU1\tNV6\t X \t1\t12\n", "b.txt");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "b.txt:2: GPU NUMA ID 'x4' of GPU0 is not a NUMA node number (or N/A)");
  auto twice = import_nvidia_smi(head + "GPU0\t X \tNV6\t0\t4\nGPU1\tNV6\t X \t1\t4\n", "b.txt");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message.find("NUMA node 4 is the memory of two GPUs ('gpu0' and 'gpu1')") !=
        std::string::npos);
  auto cpu_too = import_nvidia_smi(head + "GPU0\t X \tNV6\t0\t1\nGPU1\tNV6\t X \t1\t5\n", "b.txt");
  REQUIRE_FALSE(cpu_too.ok());
  CHECK(cpu_too.error().message.find(
            "NUMA node 1 is both cpu 'cpu1' and the memory of gpu 'gpu0'") != std::string::npos);
}

TEST_CASE("NIC names, kept by both importers, the JSON and topo show") {
  // README rows and the files themselves: ESC8000A-E12's NIC Legend NIC0..3 = mlx5_0..3 on two
  // dual-port cards; DGX-1's columns mlx5_2 mlx5_0 mlx5_3 mlx5_1, each PIX to a GPU pair
  // (mlx5_2: GPU4/5, mlx5_0: GPU0/1, mlx5_3: GPU6/7, mlx5_1: GPU2/3); the H200 VM's
  // <net name="mlx5_0">, NC A100 v4's <net name="eth0">; p4d's EFA cards have no <net>: no name.
  struct Want {
    const char* file;
    std::vector<std::string> names, parents;  // per NIC node, nic0..
  };
  const std::vector<Want> files = {
      {"stelline_asus-esc8000a-e12_topo-m.txt", {"mlx5_0,mlx5_1", "mlx5_2,mlx5_3"}, {}},
      {"pytorch-ddp-benchmark-readme_dgx1-v100_topo-m.txt",
       {"mlx5_2", "mlx5_0", "mlx5_3", "mlx5_1"},
       {"sw2", "sw0", "sw3", "sw1"}},  // switches of GPU4/5, 0/1, 6/7, 2/3
      {"nccl-tests-256_h200-vm_numaid-minus1_FRAGMENT-closed.xml", {"mlx5_0"}, {"cpu0"}},
      {"azhpc-images_ncv4-topo.xml", {"eth0"}, {"cpu0"}},
      {"aws-ofi-nccl_p4d-24xl-topo.xml", {"", "", "", ""}, {"sw0", "sw1", "sw2", "sw3"}},
  };
  for (const Want& w : files) {
    CAPTURE(w.file);
    auto t = import({w.file});
    REQUIRE(t.ok());
    std::vector<std::string> names;
    for (const Node& n : t->nodes())
      if (n.kind == NodeKind::nic) names.push_back(n.name);
    CHECK(names == w.names);
    for (size_t k = 0; k < w.parents.size(); ++k)
      CHECK(uplink_of(*t, "nic" + std::to_string(k)).a == w.parents[k]);
    auto back = Topology::from_json_text(t->to_json(), "re.json");
    REQUIRE(back.ok());
    std::vector<std::string> back_names;
    for (const Node& n : back->nodes())
      if (n.kind == NodeKind::nic) back_names.push_back(n.name);
    CHECK(back_names == w.names);
    const auto rj = nlohmann::json::parse(show_json(*t));
    REQUIRE(rj["nics"].size() == w.names.size());
    for (size_t k = 0; k < w.names.size(); ++k) {
      if (w.names[k].empty())
        CHECK(rj["nics"][k]["name"].is_null());
      else
        CHECK(rj["nics"][k]["name"] == w.names[k]);
    }
  }
  auto asus = import({"stelline_asus-esc8000a-e12_topo-m.txt"});
  REQUIRE(asus.ok());
  CHECK(show_text(*asus).find("nic nic0 mlx5_0,mlx5_1 (2 ports): below cpu0\n") !=
        std::string::npos);
  // Bad names in the JSON.
  const std::string base =
      R"({"schema_version": 1, "nodes": [{"id": "cpu0", "kind": "cpu"}, {"id": "gpu0", "kind":
      "gpu", "model": "H200"}, {"id": "nic0", "kind": "nic", "name": NAME}], "links": [{"a":
      "cpu0", "b": "gpu0", "kind": "pcie", "gen": 5, "width": 16}, {"a": "cpu0", "b": "nic0",
      "kind": "pcie", "gen": 5, "width": 16}]})";
  auto with = [&](const std::string& name) {
    std::string j = base;
    j.replace(j.find("NAME"), 4, name);
    return Topology::from_json_text(j, "n.json");
  };
  CHECK(with("\"mlx5_4\"").ok());
  CHECK(with("\"\"").error().message ==
        "n.json:/nodes/2/name: expected a device name (\"mlx5_0\"), got \"\"");
  CHECK(with("4").error().message == "n.json:/nodes/2/name: expected a string, got number");
}

namespace {

// The GPU x GPU cells of a `topo -m` file, read independently of the importer: rows whose first
// word is GPU<k>, the next n words (n = GPU columns in the header).
std::vector<std::vector<std::string>> file_matrix(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int n = -1;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> words;
    for (std::string w; ls >> w;) words.push_back(w);
    if (words.empty()) continue;
    if (n < 0) {
      n = static_cast<int>(std::count_if(words.begin(), words.end(), [](const std::string& w) {
        return w.rfind("GPU", 0) == 0 && w.size() > 3 &&
               std::isdigit(static_cast<unsigned char>(w[3]));
      }));
      continue;
    }
    if (words[0].rfind("GPU", 0) != 0 || static_cast<int>(words.size()) <= n) continue;
    rows.emplace_back(words.begin() + 1, words.begin() + 1 + n);
  }
  return rows;
}

}  // namespace

TEST_CASE("real files: every GPU pair's path class is the real topo -m's") {
  // nvidia-smi files: the file itself is the real `topo -m`.
  for (const char* f : {"simllm_vastai-hgx-b200-8x_topo-m.txt", "hpc-ai-envs_quad-gh200_topo-m.txt",
                        "pytorch-ddp-benchmark-readme_dgx1-v100_topo-m.txt",
                        "lmdeploy-issue-4423_8x-v100-sxm2-nv1-nv2_topo-m.txt",
                        "stelline_asus-esc8000a-e12_topo-m.txt"}) {
    CAPTURE(f);
    auto t = import({f});
    REQUIRE(t.ok());
    const auto want = file_matrix(read(kReal + f));
    REQUIRE(static_cast<int>(want.size()) == t->num_gpus());
    for (int i = 0; i < t->num_gpus(); ++i)
      for (int j = 0; j < t->num_gpus(); ++j) {
        const std::string w = want[static_cast<size_t>(i)][static_cast<size_t>(j)];
        CHECK(to_string(t->path_class(i, j), t->nvlink_count(i, j)) == (w == "SOC" ? "SYS" : w));
      }
  }
  // NCCL XML files, against the README rows: NC A100 v4 all SYS (4 NUMA nodes, a GPU each);
  // p4d NV12 all pairs (NVSwitch) and ND H100 v5 NV18 all pairs once told.
  struct Xml {
    const char* file;
    const char* nvlink;
    const char* gpu_model;
    const char* every_pair;
  };
  for (const Xml& x : {Xml{"azhpc-images_ncv4-topo.xml", "", "", "SYS"},
                       Xml{"aws-ofi-nccl_p4d-24xl-topo.xml", "nvswitch:12", "", "NV12"},
                       Xml{"azhpc-images_ndv5-topo.xml", "nvswitch:18", "H100 SXM", "NV18"}}) {
    CAPTURE(x.file);
    RealCase c{x.file, x.gpu_model, x.nvlink};
    auto t = import(c);
    REQUIRE(t.ok());
    for (int i = 0; i < t->num_gpus(); ++i)
      for (int j = 0; j < t->num_gpus(); ++j)
        CHECK(to_string(t->path_class(i, j), t->nvlink_count(i, j)) ==
              (i == j ? std::string("X") : std::string(x.every_pair)));
  }
  // ND H100 v5: each of the 8 switches holds one GPU and one IB NIC (class 0x020700).
  auto ndv5 = import({"azhpc-images_ndv5-topo.xml"});
  REQUIRE(ndv5.ok());
  for (int s = 0; s < 8; ++s) {
    CHECK(ndv5->ancestors(s).front() == "sw" + std::to_string(s));
    CHECK(uplink_of(*ndv5, "nic" + std::to_string(s)).a == "sw" + std::to_string(s));
  }
}
