// Importers (nvidia-smi topo -m, NCCL XML) and exporters (matrix, DOT, CLI round trips).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "read_file.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp::topology;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(SPARSP_TEST_DATA_DIR) + "/topology";

using sparsp::topology::test::read;

// GPU x GPU cells of an nvidia-smi style matrix (rows starting with "GPU"), trimmed.
std::vector<std::vector<std::string>> gpu_cells(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("GPU", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string c;
    while (std::getline(ls, c, '\t')) {
      c.erase(0, c.find_first_not_of(' '));
      c.erase(c.find_last_not_of(' ') + 1);
      cells.push_back(c);
    }
    rows.push_back(cells);
  }
  const size_t n = rows.size();
  for (auto& r : rows)
    r = std::vector<std::string>(
        r.begin() + 1, r.begin() + 1 + static_cast<std::ptrdiff_t>(std::min(n, r.size() - 1)));
  return rows;
}

std::string run_cli(const std::string& args, int* exit_code) {
  const std::string cmd = std::string(SPARSP_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  *exit_code = WEXITSTATUS(status);
  return out;
}

std::string import_error(const std::string& text) {
  auto t = import_nvidia_smi(text, "topo.txt");
  if (t.ok()) return "<ok>";
  CHECK(t.error().exit_code == 2);
  return t.error().message;
}

ImportOptions model(const std::string& name) {
  ImportOptions o;
  o.gpu_model = name;
  return o;
}

const char* kLegend =
    "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP "
    "interconnect between NUMA nodes (e.g., QPI/UPI)\n";

}  // namespace

TEST_CASE(
    "nvidia-smi import -> matrix round-trips every real case exactly, counts match the facts") {
  int cases = 0;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(kData + "/cases")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    CAPTURE(dir.filename().string());
    const std::string text = read((dir / "topo.txt").string());
    const auto facts = nlohmann::json::parse(read((dir / "measured.json").string()));
    ImportOptions opt;
    opt.gpu_model = facts.at("gpu_model").get<std::string>();
    auto t = import_nvidia_smi(text, (dir / "topo.txt").string(), opt);
    REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
    CHECK(t->num_gpus() == facts.at("gpus").get<int>());
    CHECK(gpu_cells(to_matrix_text(*t)) == gpu_cells(text));
    if (facts.contains("pcie_switches"))
      CHECK(t->num_switches() == facts["pcie_switches"].get<int>());
    if (facts.contains("sockets")) CHECK(t->num_sockets() == facts["sockets"].get<int>());
    if (facts.contains("gpu_numa_node")) {
      for (int i = 0; i < t->num_gpus(); ++i)
        CHECK(t->gpu_numa_node(i) == facts["gpu_numa_node"][static_cast<size_t>(i)].get<int>());
    }
    if (facts.contains("p2p_supported"))
      CHECK(t->p2p_allowed(0, 1) == facts["p2p_supported"].get<bool>());
    // Canonical JSON of the import round-trips too.
    auto back = Topology::from_json_text(t->to_json(), "re.json");
    REQUIRE(back.ok());
    CHECK(back->to_json() == t->to_json());
    ++cases;
  }
  CHECK(cases == 6);
}

TEST_CASE("nvidia-smi import: inferred structure of the PHB/SYS case") {
  // GPU0-1 PHB, GPU3-4 PHB, all else SYS: SYS -> separate sockets gives 4 sockets ({0,1}, {2},
  // {3,4}, {5}), PHB -> one host bridge (root_port) each for {0,1} and {3,4}, no switches.
  auto t = import_nvidia_smi(read(kData + "/cases/6x-rtx4090-phb-sys-no-p2p/topo.txt"), "t.txt",
                             model("rtx4090"));
  REQUIRE(t.ok());
  CHECK(t->num_sockets() == 4);
  CHECK(t->num_switches() == 0);
  CHECK(t->ancestors(0) == std::vector<std::string>{"rp0", "cpu0"});
  CHECK(t->ancestors(2) == std::vector<std::string>{"cpu1"});
  CHECK(t->ancestors(4) == std::vector<std::string>{"rp1", "cpu2"});
  CHECK_FALSE(t->p2p_allowed(0, 1));  // GeForce default: P2P off
  // The NIC of the switch-per-socket case joins the socket-0 switch with GPU0-3.
  auto s = import_nvidia_smi(read(kData + "/cases/8x-rtx4090-switch-per-socket/topo.txt"), "s.txt");
  REQUIRE(s.ok());
  const int nic = s->node_index("nic0");
  REQUIRE(nic >= 0);
  CHECK(s->ancestors(0) == std::vector<std::string>{"sw0", "cpu0"});
  bool nic_on_sw0 = false;
  for (const auto& l : s->links()) nic_on_sw0 = nic_on_sw0 || (l.a == "sw0" && l.b == "nic0");
  CHECK(nic_on_sw0);
  // The NVSwitch case: NV18 x 7 peers = 126 > 18 links -> one NVSwitch fabric, 18 links per GPU.
  auto h = import_nvidia_smi(read(kData + "/cases/8x-h100-sxm-nvswitch/topo.txt"), "h.txt",
                             model("H100 SXM"));
  REQUIRE(h.ok());
  CHECK(h->node_index("nvswitch0") >= 0);
  CHECK(h->nvlink_count(3, 6) == 18);
}

TEST_CASE("nvidia-smi import tolerates ANSI escapes and space-aligned copies") {
  const std::string text = read(kData + "/cases/8x-gen5-two-switches-one-socket/topo.txt");
  std::string ansi;
  for (char c : text) {
    if (c == 'P') ansi += "\x1b[1m";
    ansi.push_back(c);
    if (c == 'X') ansi += "\x1b[0m";
  }
  auto t = import_nvidia_smi("\x1b[4m" + ansi, "ansi.txt");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  CHECK(gpu_cells(to_matrix_text(*t)) == gpu_cells(text));
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), '\t', ' ');
  for (size_t p = 0; (p = spaced.find(' ', p)) != std::string::npos; p += 3) spaced.insert(p, "  ");
  auto u = import_nvidia_smi(spaced, "spaced.txt");
  REQUIRE_MESSAGE(u.ok(), (u.ok() ? "" : u.error().message));
  CHECK(gpu_cells(to_matrix_text(*u)) == gpu_cells(text));
}

TEST_CASE("nvidia-smi import: the one-GPU H200 replay machine (real output, ANSI underline)") {
  // Captured with `nvidia-smi topo -m` on the H200 machine: the header is wrapped in
  // ESC[4m..ESC[0m.
  const std::string text = read(kData + "/h200-1gpu-ansi-topo.txt");
  REQUIRE(text.find("\x1b[4m") != std::string::npos);
  ImportOptions opt = model("h200");
  opt.pcie_gen = 5;
  auto t = import_nvidia_smi(text, "h200.txt", opt);
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  CHECK(t->num_gpus() == 1);
  CHECK(t->num_sockets() == 1);
  CHECK(t->num_switches() == 0);
  CHECK(gpu_cells(to_matrix_text(*t)) == std::vector<std::vector<std::string>>{{"X"}});
  // Same single-flow figures as the 1x-h200-pcie preset: Gen5 x16 = 53.00 GB/s each way.
  const auto rep = single_flow_report(*t);
  CHECK(rep.h2d_Bps[0] / 1e9 == doctest::Approx(53.0049).epsilon(1e-4));
  CHECK(t->gpu(0).copy_engines == 3);  // asyncEngineCount measured on that machine
  CHECK(t->gpu(0).memory_bytes == doctest::Approx(141.0 * 1024 * 1024 * 1024));
}

TEST_CASE("nvidia-smi import: PXB hierarchy and bad input") {
  // GPU0-1 PIX under one leaf switch, GPU2 PXB to both (another leaf under the same upper switch).
  const std::string pxb =
      "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tPXB\nGPU1\tPIX\t X \tPXB\nGPU2\tPXB\tPXB\t X \n";
  auto t = import_nvidia_smi(pxb + kLegend, "pxb.txt");
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  CHECK(t->num_switches() == 3);
  CHECK(t->ancestors(0) == std::vector<std::string>{"sw1", "sw0", "cpu0"});
  CHECK(t->ancestors(2) == std::vector<std::string>{"sw2", "sw0", "cpu0"});
  CHECK(gpu_cells(to_matrix_text(*t)) == gpu_cells(pxb));

  CHECK(import_error("") == "topo.txt:1: empty file");
  CHECK(import_error("\n\n") == "topo.txt:1: empty file");
  // Non-square: a short row, and a missing row.
  CHECK(import_error("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\n") ==
        "topo.txt:3: matrix is not square: row GPU1 has 1 entries, expected 2");
  CHECK(import_error("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tSYS\nGPU1\tPIX\t X \tSYS\n") ==
        "topo.txt:3: matrix is not square: 3 GPU columns but 2 GPU rows");
  CHECK(import_error("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \nGPU2\tSYS\tSYS\t X \n") ==
        "topo.txt:4: matrix is not square: 2 GPU columns but row GPU2");
  // Asymmetric.
  CHECK(import_error("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tSYS\t X \n") ==
        "topo.txt:3: asymmetric matrix: GPU1-GPU0 is SYS but GPU0-GPU1 is PIX");
  // Unknown legend token.
  CHECK(import_error("\tGPU0\tGPU1\nGPU0\t X \tPIXX\nGPU1\tPIX\t X \n") ==
        "topo.txt:2: unknown legend token 'PIXX' in row GPU0, column GPU1");
  CHECK(import_error("\tGPU0\tGPU1\nGPU0\t X \tNV0\nGPU1\tNV0\t X \n") ==
        "topo.txt:2: unknown legend token 'NV0' in row GPU0, column GPU1");
  CHECK(import_error("\tGPU0\tGPU1\nGPU0\tPIX\tPIX\nGPU1\tPIX\t X \n") ==
        "topo.txt:2: diagonal entry of GPU0 must be X, got 'PIX'");
  CHECK(import_error("hello\n") ==
        "topo.txt:1: expected the `nvidia-smi topo -m` header (GPU0 GPU1 ...)");
  CHECK(import_error("\tGPU0\tGPU1\nGPU1\tPIX\t X \nGPU0\t X \tPIX\n") ==
        "topo.txt:2: row 'GPU1' out of order (expected GPU0)");
  // Not realisable by any PCIe tree: PIX is transitive.
  CHECK(import_error(
            "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tPIX\nGPU1\tPIX\t X \tNODE\nGPU2\tPIX\tNODE\t X \n")
            .rfind("topo.txt:3: GPU1-GPU2 is NODE but no PCIe tree consistent with the other "
                   "entries gives that",
                   0) == 0);
  CHECK(import_nvidia_smi("\tGPU0\nGPU0\t X \n", "x", model("nope")).error().message ==
        "<command line>:--gpu-model: unknown GPU model 'nope' (see `sparsp topo models`)");
}

TEST_CASE("NCCL XML import: two switches") {
  auto t = import_nccl_xml(read(kData + "/nccl_two_switches.xml"), "two.xml", model("L40S"));
  REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
  CHECK(t->num_gpus() == 4);
  CHECK(t->num_switches() == 2);
  CHECK(t->num_sockets() == 1);
  const std::vector<std::vector<std::string>> want = {{"X", "PIX", "NODE", "NODE"},
                                                      {"PIX", "X", "NODE", "NODE"},
                                                      {"NODE", "NODE", "X", "PIX"},
                                                      {"NODE", "NODE", "PIX", "X"}};
  CHECK(gpu_cells(to_matrix_text(*t)) == want);
  // dev="0" is bus 02:00.0, listed second in the file: still gpu0, under sw0.
  CHECK(t->ancestors(0) == std::vector<std::string>{"sw0", "cpu0"});
  CHECK(t->node_index("nic0") >= 0);
  // gpu3 has a Gen4 x8 link: 16 GT/s * 8 / 8 * 128/130 * 256/280 * 0.92 = 13.25 GB/s.
  const auto rep = single_flow_report(*t);
  CHECK(rep.bandwidth_Bps[0][3] / 1e9 == doctest::Approx(13.2512).epsilon(1e-4));
  CHECK(rep.bandwidth_Bps[0][1] / 1e9 == doctest::Approx(26.5025).epsilon(1e-4));

  auto nv = import_nccl_xml(read(kData + "/nccl_nvswitch.xml"), "nv.xml", model("H100 SXM"));
  REQUIRE_MESSAGE(nv.ok(), (nv.ok() ? "" : nv.error().message));
  CHECK(nv->num_sockets() == 2);
  CHECK(nv->gpu_numa_node(0) == 0);  // numaid="0" is the second <cpu> in the file
  CHECK(nv->gpu_numa_node(1) == 1);
  CHECK(to_string(nv->path_class(0, 1), nv->nvlink_count(0, 1)) == "NV18");
  CHECK(nv->links().back().kind == LinkKind::upi);
}

TEST_CASE("NCCL XML import: bad input names the line") {
  auto err = [](const std::string& xml) {
    auto t = import_nccl_xml(xml, "bad.xml");
    return t.ok() ? std::string("<ok>") : t.error().message;
  };
  CHECK(err("") == "bad.xml:1: empty file");
  CHECK(err("<system>\n<cpu>\n<pci busid=\"1\">\n</system>").rfind("bad.xml:4: invalid XML: ", 0) ==
        0);
  CHECK(err("<topology/>") == "bad.xml:1: expected a <system> root element");
  CHECK(err("<system>\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\" link_speed=\"16 "
            "GT/s\" link_width=\"3\">\n"
            "      <gpu dev=\"0\"/>\n    </pci>\n  </cpu>\n</system>") ==
        "bad.xml:3: link_width 3 is not 1, 2, 4, 8 or 16");
  CHECK(err("<system>\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\" link_speed=\"99 "
            "GT/s\" link_width=\"16\">\n"
            "      <gpu dev=\"0\"/>\n    </pci>\n  </cpu>\n</system>") ==
        "bad.xml:3: unknown link_speed \"99 GT/s\" (expected 2.5, 5, 8, 16, 32 or 64 GT/s)");
  CHECK(err("<system>\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\">\n      <gpu "
            "dev=\"4\"/>\n    </pci>\n  </cpu>\n</system>") ==
        "bad.xml:4: GPU dev numbers must be 0..0, got dev=\"4\"");
  CHECK(err("<system>\n  <cpu numaid=\"0\"/>\n</system>") == "bad.xml:1: no <gpu> element");
}

TEST_CASE("CLI: import, matrix, show --json, dot") {
  int rc = 0;
  const std::string out_json = "sparsp_test_import_out.json";
  const std::string in = kData + "/cases/8x-rtx4090-switch-per-socket/topo.txt";
  run_cli("topo import --format nvidia-smi " + in + " -o " + out_json +
              " --gpu-model rtx4090 --pcie-gen 4",
          &rc);
  REQUIRE(rc == 0);
  const std::string matrix = run_cli("topo matrix " + out_json, &rc);
  CHECK(rc == 0);
  CHECK(matrix.rfind("\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\nGPU0\t X "
                     "\tPIX\tPIX\tPIX\tSYS\tSYS\tSYS\tSYS\n",
                     0) == 0);
  CHECK(gpu_cells(matrix) == gpu_cells(read(in)));
  const std::string show_text = run_cli("topo show --json " + out_json, &rc);
  const auto show = nlohmann::json::parse(show_text);
  CHECK(rc == 0);
  // The report loads as the topology it describes: matrix and report come back unchanged.
  const std::string report_json = "sparsp_test_import_report.json";
  {
    std::ofstream f(report_json);
    f << show_text;
  }
  CHECK(gpu_cells(run_cli("topo matrix " + report_json, &rc)) == gpu_cells(read(in)));
  CHECK(rc == 0);
  CHECK(run_cli("topo show --json " + report_json, &rc) == show_text);
  CHECK(rc == 0);
  std::remove(report_json.c_str());
  CHECK(show["gpus"][7] == "gpu7");
  CHECK(show["path_class"][0][4] == "SYS");
  CHECK(show["p2p"][0][1] == false);  // GeForce: staged
  // Staged 0->1 (PIX but no P2P): gpu0 -> sw0 -> cpu0 (host0) -> sw0 -> gpu1 crosses the switch
  // uplink in both directions, so its duplex capacity 2 * (99 / 110.7) * 26.5025 = 47.403 GB/s is
  // used twice per byte: 23.70 GB/s (below the 26.50 GB/s of each direction).
  CHECK(show["p2p_bandwidth_Bps"][0][1].get<double>() / 1e9 ==
        doctest::Approx(23.7014).epsilon(1e-4));
  CHECK(show["p2p_bidir_bandwidth_Bps"][1][0].is_number());
  CHECK(show["host_bandwidth_Bps"]["h2d"].size() == 8);
  CHECK(show["links"][0].contains("capacity_Bps"));
  CHECK(show["links"][0].contains("latency_s"));
  const std::string dot = run_cli("topo dot " + out_json, &rc);
  CHECK(rc == 0);
  CHECK(dot.rfind("graph ", 0) == 0);
  CHECK(dot.find("\"sw0\" -- \"gpu0\"") != std::string::npos);
  std::remove(out_json.c_str());
  // Bad input: one line, exit code 2, no output file left behind.
  const std::string bad = "sparsp_test_bad.txt";
  {
    std::ofstream f(bad);
    f << "\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n";
  }
  const std::string err =
      run_cli("topo import --format nvidia-smi " + bad + " -o " + out_json, &rc);
  CHECK(rc == 2);
  CHECK(err == "sparsp: " + bad + ":2: unknown legend token 'FOO' in row GPU0, column GPU1\n");
  CHECK_FALSE(fs::exists(out_json));
  std::remove(bad.c_str());
  // A real file refused: one line naming the file and the place, exit 2, no output file; a real
  // file imported: its notes as warnings on stderr.
  const std::string g5 = kData + "/realtopo/aws-ofi-nccl_g5.48xl-topo.xml";
  const std::string refused =
      run_cli("topo import --format nccl-xml " + g5 + " -o " + out_json, &rc);
  CHECK(rc == 2);
  CHECK(refused.rfind("sparsp: " + g5 + ":12: no GPU in the file: it is a static topology skeleton",
                      0) == 0);
  CHECK(std::count(refused.begin(), refused.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(out_json));
  const std::string p4d = kData + "/realtopo/aws-ofi-nccl_p4d-24xl-topo.xml";
  const std::string warned =
      run_cli("topo import --format nccl-xml " + p4d + " -o " + out_json, &rc);
  CHECK(rc == 0);
  CHECK(warned.find("sparsp: warning: " + p4d + ":15: the file lists no NVLink") !=
        std::string::npos);
  std::remove(out_json.c_str());
  CHECK(run_cli("topo import --format nvidia-smi " + in + " -o " + out_json + " --gpu-model A100",
                &rc)
            .find("matches several models") != std::string::npos);
  CHECK(rc == 2);
  // Partial names that fit several models are refused too (the new-user pass found "A100 80GB"
  // and "A100 SXM" silently taken as one SXM4 card, and "H100" called unknown).
  for (const char* partial : {"\"A100 80GB\"", "\"A100 SXM\"", "H100"}) {
    CAPTURE(partial);
    const std::string partial_err = run_cli(
        "topo import --format nvidia-smi " + in + " -o " + out_json + " --gpu-model " + partial,
        &rc);
    CHECK(rc == 2);
    CHECK((partial_err.find("matches several models") != std::string::npos ||
           partial_err.find("is not a full name; it starts") != std::string::npos));
  }
  CHECK(run_cli("topo import --format nvidia-smi " + in + " -o " + out_json + " --gpu-model H100",
                &rc)
            .find("it starts NVIDIA H100 PCIe, NVIDIA H100 SXM") != std::string::npos);
  // The model table, as JSON.
  const auto models = nlohmann::json::parse(run_cli("topo models --json", &rc));
  CHECK(rc == 0);
  CHECK(models.size() == gpu_models().size());
  CHECK(models[0]["model"] == "NVIDIA GeForce RTX 4090");
  CHECK(models[0]["sm_count"] == 128);
  // Presets by name from any directory.
  const std::string preset = run_cli("topo matrix 4x-a100-pcie-phb", &rc);
  CHECK(rc == 0);
  CHECK(preset.rfind("\tGPU0\tGPU1\tGPU2\tGPU3\nGPU0\t X \tPHB\tPHB\tPHB\n", 0) == 0);
}
