// Bad topology input: one clear line naming the file and the place, never a crash or a partial
// result. Every case listed in issue 2 has a test here (importer cases in test_import.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "sparsp/topology.hpp"

using namespace sparsp::topology;

namespace {

std::string error_of(const std::string& text) {
  auto t = Topology::from_json_text(text, "test.json");
  if (t.ok()) return "<ok>";
  CHECK(t.error().exit_code == 2);
  CHECK(t.error().message.find('\n') == std::string::npos);
  return t.error().message;
}

// A valid two-GPU graph whose pieces the cases below replace.
std::string graph(const std::string& nodes, const std::string& links) {
  return R"({"schema_version": 1, "name": "t", "nodes": [)" + nodes + R"(], "links": [)" + links +
         "]}";
}

const std::string kNodes =
    R"({"id": "cpu0", "kind": "cpu"}, {"id": "gpu0", "kind": "gpu", "model": "L40S"}, {"id": "gpu1", "kind": "gpu", "model": "L40S"})";
const std::string kLink0 = R"({"a": "cpu0", "b": "gpu0", "kind": "pcie", "gen": 4, "width": 16})";
const std::string kLink1 = R"({"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16})";

}  // namespace

TEST_CASE("the valid base case loads") {
  CHECK(error_of(graph(kNodes, kLink0 + "," + kLink1)) == "<ok>");
}

TEST_CASE("empty file") {
  CHECK(error_of("") == "test.json:1: empty file");
  CHECK(error_of("  \n\t\n") == "test.json:1: empty file");
}

TEST_CASE("truncated JSON names the line") {
  const std::string text = "{\n  \"schema_version\": 1,\n  \"nodes\": [\n";
  const std::string e = error_of(text);
  CHECK(e.rfind("test.json:4: invalid JSON: ", 0) == 0);
  const std::string half = graph(kNodes, kLink0).substr(0, 60);
  CHECK(error_of(half).rfind("test.json:1: invalid JSON: ", 0) == 0);
}

TEST_CASE("unknown node kind") {
  const std::string nodes = R"({"id": "cpu0", "kind": "cpu"}, {"id": "gpu0", "kind": "tpu"})";
  CHECK(error_of(graph(nodes, kLink0)) ==
        "test.json:/nodes/1/kind: unknown node kind 'tpu' (expected gpu, pcie_switch, root_port, "
        "cpu, nvswitch or nic)");
}

TEST_CASE("duplicate id") {
  const std::string nodes = kNodes + R"(, {"id": "gpu0", "kind": "gpu", "model": "L40S"})";
  CHECK(error_of(graph(nodes, kLink0 + "," + kLink1)) ==
        "test.json:/nodes/3/id: duplicate node id 'gpu0' (first at /nodes/1)");
}

TEST_CASE("link to a missing node") {
  const std::string bad = R"({"a": "cpu0", "b": "gpu9", "kind": "pcie", "gen": 4, "width": 16})";
  CHECK(error_of(graph(kNodes, kLink0 + "," + bad)) ==
        "test.json:/links/1/b: link to missing node 'gpu9'");
  const std::string bad_a = R"({"a": "cpu7", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16})";
  CHECK(error_of(graph(kNodes, kLink0 + "," + bad_a)) ==
        "test.json:/links/1/a: link to missing node 'cpu7'");
}

TEST_CASE("a cycle in the PCIe tree") {
  const std::string nodes =
      R"({"id": "cpu0", "kind": "cpu"}, {"id": "gpu0", "kind": "gpu", "model": "L40S"},
      {"id": "sw0", "kind": "pcie_switch"}, {"id": "sw1", "kind": "pcie_switch"}, {"id": "sw2", "kind": "pcie_switch"})";
  const std::string links = R"({"a": "sw0", "b": "gpu0", "kind": "pcie", "gen": 4, "width": 16},
      {"a": "sw0", "b": "sw1", "kind": "pcie", "gen": 4, "width": 16},
      {"a": "sw1", "b": "sw2", "kind": "pcie", "gen": 4, "width": 16},
      {"a": "sw2", "b": "sw0", "kind": "pcie", "gen": 4, "width": 16})";
  CHECK(error_of(graph(nodes, links)) ==
        "test.json:/links/3: cycle in the PCIe tree: sw0 -> sw1 -> sw2 -> sw0");
}

TEST_CASE("a second upstream link (not a tree)") {
  const std::string nodes = kNodes + R"(, {"id": "sw0", "kind": "pcie_switch"})";
  const std::string links =
      kLink0 + "," + kLink1 + R"(, {"a": "cpu0", "b": "sw0", "kind": "pcie", "gen": 4, "width": 16},
      {"a": "sw0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16})";
  CHECK(error_of(graph(nodes, links)) ==
        "test.json:/links/3/b: 'gpu1' already has an upstream PCIe link (/links/1)");
}

TEST_CASE("a GPU with no path to any CPU") {
  CHECK(error_of(graph(kNodes, kLink0)) ==
        "test.json:/nodes/2: gpu 'gpu1' has no PCIe path to a cpu");
  // Hanging from a switch that itself hangs from nothing.
  const std::string nodes = kNodes + R"(, {"id": "sw0", "kind": "pcie_switch"})";
  const std::string links =
      kLink0 + R"(, {"a": "sw0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16})";
  CHECK(error_of(graph(nodes, links)) ==
        "test.json:/nodes/2: gpu 'gpu1' has no PCIe path to a cpu");
}

TEST_CASE("zero, negative, infinite and NaN bandwidth") {
  auto with_capacity = [&](const std::string& cap) {
    return graph(
        kNodes,
        kLink0 +
            R"(, {"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16, "capacity_GBps": )" +
            cap + "}");
  };
  CHECK(error_of(with_capacity("0")) ==
        "test.json:/links/1/capacity_GBps: bandwidth must be > 0, got 0");
  CHECK(error_of(with_capacity("-5")) ==
        "test.json:/links/1/capacity_GBps: bandwidth must be > 0, got -5");
  CHECK(error_of(with_capacity("1e999")) ==
        "test.json:/links/1/capacity_GBps: invalid JSON: number overflow parsing '1e999'");
  CHECK(error_of(with_capacity("\"fast\"")) ==
        "test.json:/links/1/capacity_GBps: expected a number, got string");
  // JSON has no NaN literal: it is a syntax error on its line.
  CHECK(error_of(with_capacity("NaN")).rfind("test.json:1: invalid JSON: ", 0) == 0);
  // NaN through the in-memory builder (importers) is caught as well.
  std::vector<Node> nodes(2);
  nodes[0].id = "cpu0";
  nodes[0].kind = NodeKind::cpu;
  nodes[1].id = "gpu0";
  nodes[1].kind = NodeKind::gpu;
  nodes[1].gpu = find_gpu_model("L40S");
  Link l;
  l.a = "cpu0";
  l.b = "gpu0";
  l.pcie_gen = 4;
  l.pcie_width = 16;
  l.capacity_Bps = std::numeric_limits<double>::quiet_NaN();
  l.capacity_measured = true;
  auto t = Topology::build("n", "", nodes, {l}, {}, "mem");
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message == "mem:/links/0/capacity_Bps: bandwidth must be > 0 and finite");
  // Host memory bandwidth in a cpu node.
  const std::string neg_mem =
      R"({"id": "cpu0", "kind": "cpu", "host_memory_GBps": -1}, {"id": "gpu0", "kind": "gpu", "model": "L40S"})";
  CHECK(error_of(graph(neg_mem, kLink0)) ==
        "test.json:/nodes/0/host_memory_GBps: bandwidth must be > 0, got -1");
}

TEST_CASE("PCIe width 3 and gen 9") {
  const std::string w3 = R"({"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 3})";
  CHECK(error_of(graph(kNodes, kLink0 + "," + w3)) ==
        "test.json:/links/1/width: PCIe width must be 1, 2, 4, 8 or 16, got 3");
  const std::string g9 = R"({"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 9, "width": 16})";
  CHECK(error_of(graph(kNodes, kLink0 + "," + g9)) ==
        "test.json:/links/1/gen: PCIe gen must be 1..6, got 9");
  const std::string tmpl =
      R"({"schema_version": 1, "template": {"gpus_per_socket": 2, "gpu_model": "L40S", "pcie_gen": 9}})";
  CHECK(error_of(tmpl) == "test.json:/template/pcie_gen: PCIe gen must be 1..6, got 9");
}

TEST_CASE("other structural errors name their place") {
  CHECK(error_of("[1, 2]") == "test.json: expected an object, got array");
  CHECK(error_of(R"({"schema_version": 2, "nodes": []})") ==
        "test.json:/schema_version: unsupported schema_version 2 (expected 1)");
  CHECK(error_of(R"({"nodes": []})") ==
        "test.json:/schema_version: missing required key 'schema_version'");
  CHECK(error_of(graph(kNodes, kLink0 + "," + kLink1).replace(1, 0, R"("colour": "red", )")) ==
        "test.json:/colour: unknown key 'colour'");
  const std::string bad_model =
      R"({"id": "cpu0", "kind": "cpu"}, {"id": "gpu0", "kind": "gpu", "model": "rtx4900"})";
  CHECK(error_of(graph(bad_model, kLink0))
            .rfind("test.json:/nodes/1/model: unknown GPU model 'rtx4900'", 0) == 0);
  const std::string up_gpu = R"({"a": "gpu0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16})";
  CHECK(error_of(graph(kNodes, kLink0 + "," + up_gpu)) ==
        "test.json:/links/1/a: 'gpu0' (gpu) cannot be the upstream side of a PCIe link");
  const std::string dup = kLink0 + "," + kLink0;
  CHECK(error_of(graph(kNodes, dup)) ==
        "test.json:/links/1: duplicate link between 'cpu0' and 'gpu0'");
  const std::string two_cpus = R"({"id": "cpu0", "kind": "cpu"}, {"id": "cpu1", "kind": "cpu"},
      {"id": "gpu0", "kind": "gpu", "model": "L40S"}, {"id": "gpu1", "kind": "gpu", "model": "L40S"})";
  CHECK(error_of(graph(
            two_cpus,
            kLink0 + R"(, {"a": "cpu1", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 16})")) ==
        "test.json:/nodes/1: cpu 'cpu1' has no inter-socket (upi/xgmi) path to cpu 'cpu0'");
  CHECK(error_of(
            graph(kNodes, kLink0 + "," + kLink1 +
                              R"(, {"a": "gpu0", "b": "gpu1", "kind": "nvlink", "count": 0})")) ==
        "test.json:/links/2/count: NVLink count must be 1..64");
  CHECK(
      error_of(
          R"({"schema_version": 1, "template": {"gpus_per_socket": 2, "gpu_model": "L40S"}, "nodes": []})") ==
      "test.json:/template: give either a template or nodes/links, not both");
  CHECK(
      error_of(R"({"schema_version": 1, "p2p_overrides": [{"a": "gpu0", "b": "cpu0", "p2p": true}],
      "template": {"gpus_per_socket": 2, "gpu_model": "L40S"}})") ==
      "test.json:/p2p_overrides/0/b: 'cpu0' is not a gpu node");
}

TEST_CASE("files: missing file and error prefix") {
  auto t = Topology::from_json_file("/nonexistent/x.json");
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message == "/nonexistent/x.json: cannot open file");
}

TEST_CASE("CLI: bad input prints one line and exits 2") {
  const std::string path = "sparsp_test_bad_topology.json";
  {
    std::ofstream out(path);
    out << graph(kNodes,
                 kLink0 + R"(, {"a": "cpu0", "b": "gpu1", "kind": "pcie", "gen": 4, "width": 3})");
  }
  const std::string cmd = std::string(SPARSP_CLI_PATH) + " topo show " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  std::remove(path.c_str());
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out == "sparsp: " + path + ":/links/1/width: PCIe width must be 1, 2, 4, 8 or 16, got 3\n");
}

TEST_CASE("an input's control characters never break the one-line message") {
  // fuzz_topo_json (CI, 2026-12-02): a node key "memory\numa_id" (JSON escape \n) gave a message
  // of two lines. Every control character but the 0x1f marker is written as \xNN.
  const auto t = sparsp::topology::Topology::from_json_text(
      R"({"schema_version": 1, "name": "x", "nodes": [{"id": "cpu0", "kind": "cpu", "a\nb\tc": 1}],
          "links": []})",
      "k.json");
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find('\n') == std::string::npos);
  CHECK(t.error().message.find("k.json:/nodes/0/a\\x0ab\\x09c: unknown key 'a\\x0ab\\x09c'") == 0);
  CHECK(sparsp::input_error("f", "/p", std::string("x\x1fy\x7f")).message == "f:/p: x\x1fy\\x7f");
}

TEST_CASE("bytes that are not well-formed UTF-8 are written as \\xNN, valid UTF-8 is kept") {
  // Break-it pass (2026-12-02): a JSON parse error quoting a Latin-1 byte 0xe9 sent the raw byte
  // to the terminal. RFC 3629 section 4: 0xc3 0xa9 is U+00E9 (kept); a lone 0xe9 starts a
  // three-byte form that "x" cannot continue; 0xc0 0xaf is an overlong '/'; 0xed 0xa0 0x80 is a
  // UTF-16 surrogate (U+D800); 0xf4 0x90 is past U+10FFFF; 0x80 is a stray continuation byte.
  using sparsp::input_error;
  CHECK(input_error("f", "", "caf\xc3\xa9").message == "f: caf\xc3\xa9");
  CHECK(input_error("f", "", "\xe9x").message == "f: \\xe9x");
  CHECK(input_error("f", "", "\xc0\xaf").message == "f: \\xc0\\xaf");
  CHECK(input_error("f", "", "\xed\xa0\x80").message == "f: \\xed\\xa0\\x80");
  CHECK(input_error("f", "", "\xf4\x90\x80\x80").message == "f: \\xf4\\x90\\x80\\x80");
  CHECK(input_error("f", "", "\x80").message == "f: \\x80");
  CHECK(input_error("f", "", "\xf0\x9f\x98\x80 ok").message ==
        "f: \xf0\x9f\x98\x80 ok");                                     // U+1F600
  CHECK(input_error("f", "", "\xe2\x82").message == "f: \\xe2\\x82");  // cut short at the end
}

TEST_CASE(
    "C1 controls, line separators and bidirectional controls in a message are written as \\uXXXX") {
  // Break-it pass (2026-12-03): `sparsp topo show $'nonexist\u202e.json'` echoed the right-to-left
  // override raw, reordering the rest of the line on screen. UTF-8 (RFC 3629): U+202E is
  // e2 80 ae, U+0085 is c2 85, U+2028 is e2 80 a8, U+2066 is e2 81 a6; U+00E9 (c3 a9) and
  // U+2019 (e2 80 99, a quotation mark) are printable and kept.
  using sparsp::input_error;
  CHECK(input_error("a\xe2\x80\xae.json", "", "x").message == "a\\u202e.json: x");
  CHECK(input_error("f", "", "a\xc2\x85z").message == "f: a\\u0085z");
  CHECK(input_error("f", "/p", "a\xe2\x80\xa8z\xe2\x81\xa6").message == "f:/p: a\\u2028z\\u2066");
  CHECK(input_error("f", "", "\xc3\xa9\xe2\x80\x99").message == "f: \xc3\xa9\xe2\x80\x99");
}
