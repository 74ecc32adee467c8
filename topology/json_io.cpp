// Topology JSON: the full-graph format, the compact template, the canonical export and presets.
// Format reference: topology/README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster.hpp"
#include "embedded_presets.hpp"
#include "sparsp/units.hpp"
#include "topology_impl.hpp"

namespace sparsp::topology {
namespace {

using json = nlohmann::json;
using Ptr = json::json_pointer;

constexpr int kSchemaVersion = 1;

// Parse failures travel as this exception inside this file only; every public entry catches it.
struct Fail {
  Error error;
};

class Reader {
 public:
  /// `base`: where the topology sits in the file (Ptr() at the root, "/topology" inside a
  /// `topo show --json` report); every place in a message is prefixed with it.
  explicit Reader(const std::string& file, Ptr base = Ptr())
      : file_(file), base_(std::move(base)) {}

  [[noreturn]] void fail(const Ptr& at, const std::string& what) const {
    throw Fail{input_error(file_, place(at), what)};
  }

  /// The JSON pointer of `at` in the file.
  std::string place(const Ptr& at) const { return (base_ / at).to_string(); }

  void expect_object(const json& j, const Ptr& at) const {
    if (!j.is_object()) fail(at, std::string("expected an object, got ") + j.type_name());
  }

  void allow_keys(const json& obj, const Ptr& at,
                  std::initializer_list<std::string_view> keys) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (std::string_view k : keys) known = known || k == it.key();
      if (!known) fail(at / it.key(), "unknown key '" + it.key() + "'");
    }
  }

  const json* find(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  const json& require(const json& obj, const Ptr& at, const char* key) const {
    const json* v = find(obj, key);
    if (!v) fail(at / key, std::string("missing required key '") + key + "'");
    return *v;
  }

  std::string string(const json& obj, const Ptr& at, const char* key,
                     std::optional<std::string> def = std::nullopt) const {
    const json* v = find(obj, key);
    if (!v) {
      if (def) return *def;
      fail(at / key, std::string("missing required key '") + key + "'");
    }
    if (!v->is_string()) fail(at / key, std::string("expected a string, got ") + v->type_name());
    return v->get<std::string>();
  }

  bool boolean(const json& obj, const Ptr& at, const char* key, bool def) const {
    const json* v = find(obj, key);
    if (!v) return def;
    if (!v->is_boolean())
      fail(at / key, std::string("expected true or false, got ") + v->type_name());
    return v->get<bool>();
  }

  std::optional<bool> opt_boolean(const json& obj, const Ptr& at, const char* key) const {
    if (!find(obj, key)) return std::nullopt;
    return boolean(obj, at, key, false);
  }

  double number(const json& v, const Ptr& at) const {
    if (!v.is_number()) fail(at, std::string("expected a number, got ") + v.type_name());
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(at, "expected a finite number");
    return d;
  }

  std::optional<double> opt_number(const json& obj, const Ptr& at, const char* key) const {
    const json* v = find(obj, key);
    if (!v) return std::nullopt;
    return number(*v, at / key);
  }

  int integer(const json& obj, const Ptr& at, const char* key,
              std::optional<int> def = std::nullopt) const {
    const json* v = find(obj, key);
    if (!v) {
      if (def) return *def;
      fail(at / key, std::string("missing required key '") + key + "'");
    }
    if (!v->is_number_integer())
      fail(at / key, std::string("expected an integer, got ") + v->type_name());
    const auto x = v->get<std::int64_t>();
    if (x < -1000000 || x > 1000000) fail(at / key, "integer out of range");
    return static_cast<int>(x);
  }

  // A bandwidth given as <base>_Bps or <base>_GBps (not both); > 0 and finite.
  std::optional<double> bandwidth(const json& obj, const Ptr& at, const std::string& base,
                                  bool allow_zero = false) const {
    const json* bps = find(obj, (base + "_Bps").c_str());
    const json* gbps = find(obj, (base + "_GBps").c_str());
    if (bps && gbps)
      fail(at / (base + "_GBps"), "give " + base + "_Bps or " + base + "_GBps, not both");
    if (!bps && !gbps) return std::nullopt;
    const Ptr p = at / (bps ? base + "_Bps" : base + "_GBps");
    const double v = number(bps ? *bps : *gbps, p);
    if (v < 0 || (v == 0 && !allow_zero))
      fail(p, "bandwidth must be > 0, got " + (bps ? bps : gbps)->dump());
    const double out = bps ? v : units::GBps_to_Bps(v);
    // 1 B/s .. 1e18 B/s (1 EB/s): outside, a typo or a unit mix-up, and simulated times overflow.
    if (out != 0 && !(out >= 1 && out <= 1e18))
      fail(p, "bandwidth must be between 1 B/s and 1e18 B/s (1e9 GB/s), got " +
                  (bps ? bps : gbps)->dump());
    return out;
  }

  // A latency given as <base>_s or <base>_us; >= 0 and finite.
  std::optional<double> latency(const json& obj, const Ptr& at) const {
    const json* s = find(obj, "latency_s");
    const json* us = find(obj, "latency_us");
    if (s && us) fail(at / "latency_us", "give latency_s or latency_us, not both");
    if (!s && !us) return std::nullopt;
    const Ptr p = at / (s ? "latency_s" : "latency_us");
    const double v = number(s ? *s : *us, p);
    if (v < 0) fail(p, "latency must be >= 0");
    const double out = s ? v : units::us_to_s(v);
    if (out > 1) fail(p, "latency must be at most 1 s, got " + (s ? s : us)->dump());
    return out;
  }

  const std::string& file() const { return file_; }

 private:
  const std::string& file_;
  Ptr base_;
};

// A string printed as it is in headings and tables (names, ids, sources): a control character
// or a bidirectional control there would reach the terminal raw, so it is refused at `at`
// (break-it 2026-12-03; sparsp::unprintable_character lists what is refused).
void require_printable(const Reader& r, const Ptr& at, const std::string& s, const char* why) {
  if (const std::string bad = unprintable_character(s); !bad.empty())
    r.fail(at, "contains " + bad + "; " + why);
}

NodeKind parse_node_kind(const Reader& r, const std::string& s, const Ptr& at) {
  for (NodeKind k : {NodeKind::gpu, NodeKind::pcie_switch, NodeKind::root_port, NodeKind::cpu,
                     NodeKind::nvswitch, NodeKind::nic}) {
    if (to_string(k) == s) return k;
  }
  r.fail(at, "unknown node kind '" + s +
                 "' (expected gpu, pcie_switch, root_port, cpu, nvswitch or nic)");
}

LinkKind parse_link_kind(const Reader& r, const std::string& s, const Ptr& at) {
  for (LinkKind k :
       {LinkKind::pcie, LinkKind::nvlink, LinkKind::upi, LinkKind::xgmi, LinkKind::c2c}) {
    if (to_string(k) == s) return k;
  }
  r.fail(at, "unknown link kind '" + s + "' (expected pcie, nvlink, upi, xgmi or c2c)");
}

// Default one-way hop latencies (see topology/README.md, "Latency"): PCIe switch/root-port hop
// 0.1 us (Broadcom PEX88000 / Microchip Switchtec port-to-port ~100-115 ns cut-through), NVLink hop
// 0.1 us, inter-socket hop 0.2 us (UPI/xGMI remote access adds ~100-200 ns over local).
constexpr double kDefaultPcieLatency_s = 0.1e-6;
constexpr double kDefaultNvlinkLatency_s = 0.1e-6;
constexpr double kDefaultSocketLatency_s = 0.2e-6;

double default_latency(LinkKind k) {
  switch (k) {
    case LinkKind::pcie:
    case LinkKind::c2c:
      return kDefaultPcieLatency_s;
    case LinkKind::nvlink:
      return kDefaultNvlinkLatency_s;
    default:
      return kDefaultSocketLatency_s;
  }
}

GpuSpec parse_gpu_spec(const Reader& r, const json& obj, const Ptr& at) {
  const std::string model = r.string(obj, at, "model");
  std::optional<GpuSpec> spec = find_gpu_model(model);
  const bool custom = r.find(obj, "sm_count") && r.find(obj, "memory_bytes") &&
                      r.find(obj, "peak_bf16_flops") && r.find(obj, "memory_bandwidth_Bps");
  if (!spec && !custom) {
    r.fail(at / "model",
           "unknown GPU model '" + model +
               "' (see `sparsp topo models`; a custom model needs sm_count, memory_bytes, "
               "peak_bf16_flops and memory_bandwidth_Bps)");
  }
  GpuSpec g = spec ? *spec : GpuSpec{};
  if (!spec) g.model = model;
  if (r.find(obj, "sm_count")) g.sm_count = r.integer(obj, at, "sm_count");
  if (r.find(obj, "copy_engines")) g.copy_engines = r.integer(obj, at, "copy_engines");
  if (auto v = r.opt_number(obj, at, "memory_bytes")) g.memory_bytes = *v;
  if (auto v = r.opt_number(obj, at, "peak_bf16_flops")) g.peak_bf16_flops = *v;
  if (auto v = r.opt_number(obj, at, "memory_bandwidth_Bps")) g.memory_bandwidth_Bps = *v;
  g.p2p_capable = r.boolean(obj, at, "p2p_capable", g.p2p_capable);
  if (g.sm_count < 0) r.fail(at / "sm_count", "must be >= 0");
  if (g.copy_engines < 1) r.fail(at / "copy_engines", "must be >= 1");
  if (g.memory_bytes < 0) r.fail(at / "memory_bytes", "must be >= 0");
  if (g.peak_bf16_flops < 0) r.fail(at / "peak_bf16_flops", "must be >= 0");
  if (g.memory_bandwidth_Bps < 0) r.fail(at / "memory_bandwidth_Bps", "must be >= 0");
  return g;
}

struct Parsed {
  std::string name, source;
  std::vector<Node> nodes;
  std::vector<Link> links;
  Topology::Options options;
  std::vector<std::string> node_places, link_places;
  std::vector<std::pair<std::pair<std::string, std::string>, bool>> overrides;  // by node id
  Ptr overrides_at;
};

// ---- partitioned switch chips and CPU families (issue 17) ----

// A node's "chip" (pcie_switch only, a non-empty id) and "family" (cpu only, a known family).
void parse_chip_and_family(const Reader& r, const json& o, const Ptr& at, Node& n) {
  if (r.find(o, "chip")) {
    if (n.kind != NodeKind::pcie_switch)
      r.fail(at / "chip",
             "\"chip\" is only for pcie_switch nodes (this node is a " + to_string(n.kind) + ")");
    n.chip = r.string(o, at, "chip");
    if (n.chip.empty()) r.fail(at / "chip", "expected a non-empty chip id");
  }
  if (r.find(o, "family")) {
    if (n.kind != NodeKind::cpu)
      r.fail(at / "family",
             "\"family\" is only for cpu nodes (this node is a " + to_string(n.kind) + ")");
    n.family = r.string(o, at, "family");
    if (!find_cpu_family(n.family)) {
      std::string names;
      for (const CpuFamily& f : cpu_families()) names += (names.empty() ? "" : ", ") + f.name;
      r.fail(at / "family", "unknown CPU family '" + n.family + "' (known: " + names + ")");
    }
  }
}

// Top-level "chips": {"<id>": {"fabric_GBps": N}}; every id must be a chip of some switch.
void parse_chips(const Reader& r, const json& root, Parsed& out) {
  const json* chips = r.find(root, "chips");
  if (!chips) return;
  const Ptr at("/chips");
  r.expect_object(*chips, at);
  for (auto it = chips->begin(); it != chips->end(); ++it) {
    const Ptr cat = at / it.key();
    bool used = false;
    for (const Node& n : out.nodes)
      used = used || (n.kind == NodeKind::pcie_switch && n.chip == it.key());
    if (!used)
      r.fail(cat, "unknown chip id '" + it.key() + "' (no pcie_switch has \"chip\": \"" + it.key() +
                      "\")");
    r.expect_object(*it, cat);
    r.allow_keys(*it, cat, {"fabric_GBps", "fabric_Bps", "peer_concurrency_cost"});
    const auto bw = r.bandwidth(*it, cat, "fabric");
    const auto cost = r.opt_number(*it, cat, "peer_concurrency_cost");
    if (!bw && !cost)
      r.fail(cat, "gives no figure: expected fabric_GBps and/or peer_concurrency_cost");
    if (bw) {
      if (!(*bw > 0)) r.fail(cat / "fabric_GBps", "must be > 0");
      out.options.chip_fabric_Bps.emplace_back(it.key(), *bw);
    }
    if (cost) {
      if (!(*cost >= 0 && *cost <= 100))
        r.fail(cat / "peer_concurrency_cost", "must be a number in [0, 100]");
      out.options.chip_peer_concurrency_cost.emplace_back(it.key(), *cost);
    }
  }
}

// A nic node's "model" (the NIC table's name, stored as the table spells it) and "rate_Gbps"
// (line rate of one port, 1..3200 Gb/s).
void parse_nic_model(const Reader& r, const json& o, const Ptr& at, Node& n) {
  if (r.find(o, "model")) {
    const std::string m = r.string(o, at, "model");
    const auto model = find_nic_model(m);
    if (!model) {
      std::string names;
      for (const NicModel& x : nic_models()) names += (names.empty() ? "" : ", ") + x.name;
      r.fail(at / "model", "unknown NIC model '" + m + "' (known: " + names + ")");
    }
    n.nic_model = model->name;
  }
  if (const auto g = r.opt_number(o, at, "rate_Gbps")) {
    if (!(*g >= 1 && *g <= 3200)) r.fail(at / "rate_Gbps", "expected 1..3200 Gb/s per port");
    n.nic_rate_Bps = *g * 1e9 / 8;
  }
}

void parse_graph(const Reader& r, const json& root, Parsed& out) {
  const Ptr nodes_at = Ptr("/nodes");
  const json& nodes = r.require(root, Ptr(), "nodes");
  if (!nodes.is_array())
    r.fail(nodes_at, std::string("expected an array, got ") + nodes.type_name());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Ptr at = nodes_at / i;
    const json& o = nodes[i];
    r.expect_object(o, at);
    Node n;
    n.id = r.string(o, at, "id");
    require_printable(r, at / "id", n.id, "node ids are printed in tables and messages");
    n.kind = parse_node_kind(r, r.string(o, at, "kind"), at / "kind");
    parse_chip_and_family(r, o, at, n);
    switch (n.kind) {
      case NodeKind::gpu:
        r.allow_keys(o, at,
                     {"id", "kind", "model", "sm_count", "copy_engines", "memory_bytes",
                      "peak_bf16_flops", "memory_bandwidth_Bps", "p2p_capable", "memory_numa_id"});
        n.gpu = parse_gpu_spec(r, o, at);
        n.memory_numa_id = r.integer(o, at, "memory_numa_id", -1);
        if (r.find(o, "memory_numa_id") && n.memory_numa_id < 0)
          r.fail(at / "memory_numa_id", "must be >= 0");
        break;
      case NodeKind::pcie_switch:
        r.allow_keys(o, at, {"id", "kind", "acs_redirect", "chip"});
        n.acs_redirect = r.boolean(o, at, "acs_redirect", false);
        break;
      case NodeKind::cpu:
        r.allow_keys(o, at,
                     {"id", "kind", "numa_node", "numa_id", "host_memory_Bps", "host_memory_GBps",
                      "root_complex_Bps", "root_complex_GBps", "peer_coefficient", "family"});
        n.numa_node = r.integer(o, at, "numa_node", -1);
        if (r.find(o, "numa_node") && n.numa_node < 0) r.fail(at / "numa_node", "must be >= 0");
        n.numa_id = r.integer(o, at, "numa_id", -1);
        if (r.find(o, "numa_id") && n.numa_id < 0) r.fail(at / "numa_id", "must be >= 0");
        n.host_memory_Bps = r.bandwidth(o, at, "host_memory", true).value_or(0);
        n.root_complex_Bps = r.bandwidth(o, at, "root_complex", true).value_or(0);
        if (auto v = r.opt_number(o, at, "peer_coefficient")) {
          if (*v < 1) r.fail(at / "peer_coefficient", "must be >= 1");
          n.peer_coefficient = *v;
        }
        break;
      case NodeKind::nic:
        r.allow_keys(o, at, {"id", "kind", "ports", "name", "model", "rate_Gbps"});
        n.ports = r.integer(o, at, "ports", 1);
        if (n.ports < 1 || n.ports > 64) r.fail(at / "ports", "expected 1..64");
        if (r.find(o, "name")) {
          n.name = r.string(o, at, "name");
          if (n.name.empty()) r.fail(at / "name", "expected a device name (\"mlx5_0\"), got \"\"");
          require_printable(r, at / "name", n.name, "a NIC name is printed in tables");
        }
        parse_nic_model(r, o, at, n);
        break;
      default:
        r.allow_keys(o, at, {"id", "kind"});
        break;
    }
    out.nodes.push_back(std::move(n));
    out.node_places.push_back(r.place(at));
  }
  const Ptr links_at = Ptr("/links");
  const json* links = r.find(root, "links");
  if (!links) return;
  if (!links->is_array())
    r.fail(links_at, std::string("expected an array, got ") + links->type_name());
  for (size_t i = 0; i < links->size(); ++i) {
    const Ptr at = links_at / i;
    const json& o = (*links)[i];
    r.expect_object(o, at);
    Link l;
    l.a = r.string(o, at, "a");
    l.b = r.string(o, at, "b");
    l.kind = parse_link_kind(r, r.string(o, at, "kind"), at / "kind");
    switch (l.kind) {
      case LinkKind::pcie:
        r.allow_keys(o, at,
                     {"a", "b", "kind", "gen", "width", "capacity_Bps", "capacity_GBps",
                      "latency_s", "latency_us", "duplex_factor"});
        l.pcie_gen = r.integer(o, at, "gen");
        if (l.pcie_gen < 1 || l.pcie_gen > 6)
          r.fail(at / "gen", "PCIe gen must be 1..6, got " + std::to_string(l.pcie_gen));
        l.pcie_width = r.integer(o, at, "width");
        if (l.pcie_width != 1 && l.pcie_width != 2 && l.pcie_width != 4 && l.pcie_width != 8 &&
            l.pcie_width != 16) {
          r.fail(at / "width",
                 "PCIe width must be 1, 2, 4, 8 or 16, got " + std::to_string(l.pcie_width));
        }
        l.duplex_factor = pcie_default_duplex_factor();
        break;
      case LinkKind::nvlink:
        r.allow_keys(o, at,
                     {"a", "b", "kind", "count", "per_link_Bps", "per_link_GBps", "capacity_Bps",
                      "capacity_GBps", "latency_s", "latency_us", "duplex_factor"});
        l.nvlink_count = r.integer(o, at, "count");
        if (l.nvlink_count < 1 || l.nvlink_count > 64)
          r.fail(at / "count", "NVLink count must be 1..64");
        l.nvlink_per_link_Bps =
            r.bandwidth(o, at, "per_link").value_or(nvlink_default_per_link_Bps());
        break;
      default:
        r.allow_keys(o, at,
                     {"a", "b", "kind", "capacity_Bps", "capacity_GBps", "latency_s", "latency_us",
                      "duplex_factor"});
        if (!r.find(o, "capacity_Bps") && !r.find(o, "capacity_GBps")) {
          r.fail(at / "capacity_GBps",
                 "missing required key 'capacity_GBps' (or capacity_Bps) for " + to_string(l.kind));
        }
        break;
    }
    if (auto c = r.bandwidth(o, at, "capacity")) {
      l.capacity_Bps = *c;
      l.capacity_measured = true;
    }
    l.latency_s = r.latency(o, at).value_or(default_latency(l.kind));
    if (auto d = r.opt_number(o, at, "duplex_factor")) {
      if (*d < 0.5 || *d > 1) r.fail(at / "duplex_factor", "duplex factor must be in [0.5, 1]");
      l.duplex_factor = *d;
    }
    out.links.push_back(std::move(l));
    out.link_places.push_back(r.place(at));
  }
}

// ---- compact template -------------------------------------------------------------------------
// Expands sockets x switches_per_socket x gpus_per_switch (or gpus_per_socket direct-attached)
// into the full graph; see topology/README.md, "Templates".
void expand_template(const Reader& r, const json& root, Parsed& out) {
  const Ptr at("/template");
  const json& t = root.at("template");
  r.expect_object(t, at);
  r.allow_keys(t, at, {"sockets",          "switches_per_socket",
                       "gpus_per_switch",  "gpus_per_socket",
                       "gpu_model",        "pcie_gen",
                       "pcie_width",       "uplink_gen",
                       "uplink_width",     "host_bridge",
                       "acs_redirect",     "p2p",
                       "p2p_cross_socket", "nvlink",
                       "inter_socket",     "inter_socket_GBps",
                       "host_memory_GBps", "root_complex_GBps",
                       "peer_coefficient", "pcie_latency_us",
                       "gpu_link_GBps",    "uplink_GBps",
                       "switch_chips",     "family"});
  const int sockets = r.integer(t, at, "sockets", 1);
  if (sockets < 1 || sockets > 16) r.fail(at / "sockets", "must be 1..16");
  const int sw_per_socket = r.integer(t, at, "switches_per_socket", 0);
  if (sw_per_socket < 0 || sw_per_socket > 64) r.fail(at / "switches_per_socket", "must be 0..64");
  int gpus_per_switch = 0, gpus_per_socket = 0;
  if (sw_per_socket > 0) {
    gpus_per_switch = r.integer(t, at, "gpus_per_switch");
    if (gpus_per_switch < 1 || gpus_per_switch > 64)
      r.fail(at / "gpus_per_switch", "must be 1..64");
    if (r.find(t, "gpus_per_socket"))
      r.fail(at / "gpus_per_socket", "give gpus_per_switch when switches_per_socket > 0");
  } else {
    gpus_per_socket = r.integer(t, at, "gpus_per_socket");
    if (gpus_per_socket < 1 || gpus_per_socket > 64)
      r.fail(at / "gpus_per_socket", "must be 1..64");
  }
  const long total = static_cast<long>(sockets) *
                     (sw_per_socket > 0 ? sw_per_socket * gpus_per_switch : gpus_per_socket);
  if (total > 64) r.fail(at, "template expands to " + std::to_string(total) + " GPUs (at most 64)");
  const std::string model = r.string(t, at, "gpu_model");
  const auto spec = find_gpu_model(model);
  if (!spec) r.fail(at / "gpu_model", "unknown GPU model '" + model + "'");
  const int gen = r.integer(t, at, "pcie_gen", 4);
  if (gen < 1 || gen > 6)
    r.fail(at / "pcie_gen", "PCIe gen must be 1..6, got " + std::to_string(gen));
  const int width = r.integer(t, at, "pcie_width", 16);
  if (width != 1 && width != 2 && width != 4 && width != 8 && width != 16) {
    r.fail(at / "pcie_width", "PCIe width must be 1, 2, 4, 8 or 16, got " + std::to_string(width));
  }
  const int up_gen = r.integer(t, at, "uplink_gen", gen);
  if (up_gen < 1 || up_gen > 6)
    r.fail(at / "uplink_gen", "PCIe gen must be 1..6, got " + std::to_string(up_gen));
  const int up_width = r.integer(t, at, "uplink_width", width);
  if (up_width != 1 && up_width != 2 && up_width != 4 && up_width != 8 && up_width != 16) {
    r.fail(at / "uplink_width",
           "PCIe width must be 1, 2, 4, 8 or 16, got " + std::to_string(up_width));
  }
  const std::optional<double> gpu_link_Bps = r.bandwidth(t, at, "gpu_link");
  const std::optional<double> uplink_Bps = r.bandwidth(t, at, "uplink");
  const std::string host_bridge = r.string(t, at, "host_bridge", std::string("per_device"));
  if (host_bridge != "per_device" && host_bridge != "shared") {
    r.fail(at / "host_bridge",
           "expected \"per_device\" or \"shared\", got \"" + host_bridge + "\"");
  }
  const bool acs = r.boolean(t, at, "acs_redirect", false);
  out.options.p2p = r.boolean(t, at, "p2p", spec->p2p_capable);
  out.options.p2p_cross_socket = r.boolean(t, at, "p2p_cross_socket", true);
  const double latency_s = units::us_to_s(
      r.opt_number(t, at, "pcie_latency_us").value_or(units::s_to_us(kDefaultPcieLatency_s)));
  if (latency_s < 0) r.fail(at / "pcie_latency_us", "latency must be >= 0");
  const std::string socket_kind = r.string(t, at, "inter_socket", std::string("upi"));
  if (socket_kind != "upi" && socket_kind != "xgmi")
    r.fail(at / "inter_socket", "expected \"upi\" or \"xgmi\"");
  // Default inter-socket capacity per direction: 64 GB/s, i.e. two UPI 2.0 links at 16 GT/s
  // (Intel Xeon Scalable 4th gen) or one xGMI3 x16 link at 32 Gb/s (AMD EPYC 9004); see README.
  const double socket_Bps = r.bandwidth(t, at, "inter_socket").value_or(units::GBps_to_Bps(64));
  const double host_memory_Bps = r.bandwidth(t, at, "host_memory", true).value_or(0);
  const double rc_Bps = r.bandwidth(t, at, "root_complex", true).value_or(0);
  const double peer_coefficient = r.opt_number(t, at, "peer_coefficient").value_or(1.0);
  if (peer_coefficient < 1) r.fail(at / "peer_coefficient", "must be >= 1");
  Node family_probe;
  family_probe.kind = NodeKind::cpu;
  parse_chip_and_family(r, t, at, family_probe);  // "family" (the template has no "chip")
  std::vector<std::string> switch_chips;
  if (const json* sc = r.find(t, "switch_chips")) {
    const Ptr sat = at / "switch_chips";
    if (!sc->is_array()) r.fail(sat, std::string("expected an array, got ") + sc->type_name());
    if (static_cast<long>(sc->size()) != static_cast<long>(sockets) * sw_per_socket)
      r.fail(sat, "expected one chip id per switch (" + std::to_string(sockets * sw_per_socket) +
                      "), got " + std::to_string(sc->size()));
    for (size_t i = 0; i < sc->size(); ++i) {
      if (!(*sc)[i].is_string() || (*sc)[i].get<std::string>().empty())
        r.fail(sat / i, "expected a non-empty chip id string");
      switch_chips.push_back((*sc)[i].get<std::string>());
    }
  }

  const std::string place = r.place(at);
  auto add_node = [&](Node n) {
    out.nodes.push_back(std::move(n));
    out.node_places.push_back(place);
  };
  auto add_pcie = [&](const std::string& a, const std::string& b, int g, int w,
                      std::optional<double> cap) {
    Link l;
    l.a = a;
    l.b = b;
    l.kind = LinkKind::pcie;
    l.pcie_gen = g;
    l.pcie_width = w;
    l.latency_s = latency_s;
    l.duplex_factor = pcie_default_duplex_factor();
    if (cap) {
      l.capacity_Bps = *cap;
      l.capacity_measured = true;
    }
    out.links.push_back(std::move(l));
    out.link_places.push_back(place);
  };
  for (int s = 0; s < sockets; ++s) {
    Node cpu;
    cpu.id = "cpu" + std::to_string(s);
    cpu.kind = NodeKind::cpu;
    cpu.numa_node = s;
    cpu.host_memory_Bps = host_memory_Bps;
    cpu.root_complex_Bps = rc_Bps;
    cpu.peer_coefficient = peer_coefficient;
    cpu.family = family_probe.family;
    add_node(std::move(cpu));
  }
  int gpu = 0, sw = 0;
  for (int s = 0; s < sockets; ++s) {
    const std::string cpu = "cpu" + std::to_string(s);
    std::string top = cpu;
    const int devices = sw_per_socket > 0 ? sw_per_socket : gpus_per_socket;
    if (host_bridge == "shared") {
      Node rp;
      rp.id = "rp" + std::to_string(s);
      rp.kind = NodeKind::root_port;
      add_node(std::move(rp));
      // The host bridge's link to the CPU carries every device below it: capacity = devices x the
      // per-device link so that it never binds a single flow (internal fabric, not a PCIe link).
      const double per_device = sw_per_socket > 0
                                    ? uplink_Bps.value_or(pcie_usable_Bps(up_gen, up_width))
                                    : gpu_link_Bps.value_or(pcie_usable_Bps(gen, width));
      add_pcie(cpu, "rp" + std::to_string(s), up_gen, 16, devices * per_device);
      top = "rp" + std::to_string(s);
    }
    if (sw_per_socket > 0) {
      for (int k = 0; k < sw_per_socket; ++k, ++sw) {
        Node n;
        n.id = "sw" + std::to_string(sw);
        n.kind = NodeKind::pcie_switch;
        n.acs_redirect = acs;
        if (!switch_chips.empty()) n.chip = switch_chips[static_cast<size_t>(sw)];
        add_node(std::move(n));
        add_pcie(top, "sw" + std::to_string(sw), up_gen, up_width, uplink_Bps);
        for (int g = 0; g < gpus_per_switch; ++g, ++gpu) {
          Node n2;
          n2.id = "gpu" + std::to_string(gpu);
          n2.kind = NodeKind::gpu;
          n2.gpu = *spec;
          add_node(std::move(n2));
          add_pcie("sw" + std::to_string(sw), "gpu" + std::to_string(gpu), gen, width,
                   gpu_link_Bps);
        }
      }
    } else {
      for (int g = 0; g < gpus_per_socket; ++g, ++gpu) {
        Node n;
        n.id = "gpu" + std::to_string(gpu);
        n.kind = NodeKind::gpu;
        n.gpu = *spec;
        add_node(std::move(n));
        add_pcie(top, "gpu" + std::to_string(gpu), gen, width, gpu_link_Bps);
      }
    }
  }
  // Fully connected sockets.
  for (int s = 0; s < sockets; ++s) {
    for (int u = s + 1; u < sockets; ++u) {
      Link l;
      l.a = "cpu" + std::to_string(s);
      l.b = "cpu" + std::to_string(u);
      l.kind = socket_kind == "upi" ? LinkKind::upi : LinkKind::xgmi;
      l.capacity_Bps = socket_Bps;
      l.capacity_measured = true;
      l.latency_s = kDefaultSocketLatency_s;
      out.links.push_back(std::move(l));
      out.link_places.push_back(place);
    }
  }
  if (const json* nv = r.find(t, "nvlink")) {
    const Ptr nat = at / "nvlink";
    r.expect_object(*nv, nat);
    r.allow_keys(*nv, nat, {"kind", "count", "per_link_GBps", "per_link_Bps"});
    const std::string kind = r.string(*nv, nat, "kind");
    if (kind != "direct" && kind != "nvswitch")
      r.fail(nat / "kind", "expected \"direct\" or \"nvswitch\"");
    const int count = r.integer(*nv, nat, "count");
    if (count < 1 || count > 64) r.fail(nat / "count", "NVLink count must be 1..64");
    const double per_link =
        r.bandwidth(*nv, nat, "per_link").value_or(nvlink_default_per_link_Bps());
    auto add_nvlink = [&](const std::string& a, const std::string& b) {
      Link l;
      l.a = a;
      l.b = b;
      l.kind = LinkKind::nvlink;
      l.nvlink_count = count;
      l.nvlink_per_link_Bps = per_link;
      l.latency_s = kDefaultNvlinkLatency_s;
      out.links.push_back(std::move(l));
      out.link_places.push_back(r.place(nat));
    };
    if (kind == "nvswitch") {
      Node n;
      n.id = "nvswitch0";
      n.kind = NodeKind::nvswitch;
      add_node(std::move(n));
      for (int g = 0; g < gpu; ++g) add_nvlink("gpu" + std::to_string(g), "nvswitch0");
    } else {
      for (int g = 0; g < gpu; ++g) {
        for (int h = g + 1; h < gpu; ++h)
          add_nvlink("gpu" + std::to_string(g), "gpu" + std::to_string(h));
      }
    }
  }
}

// "measured_compute": measured compute figures per GPU model (configs/README.md). Strict: unknown
// keys, an unknown GPU model, and negative, NaN or infinite figures are errors at their pointer.
void parse_measured_compute(const Reader& r, const json& root, Topology::Options& options) {
  const json* mc = r.find(root, "measured_compute");
  if (!mc) return;
  const Ptr at("/measured_compute");
  if (!mc->is_array()) r.fail(at, std::string("expected an array, got ") + mc->type_name());
  auto figure = [&](const json& v, const Ptr& p) {
    const double d = r.number(v, p);  // finite
    if (d < 0) r.fail(p, "must be >= 0, got " + v.dump());
    return d;
  };
  for (size_t i = 0; i < mc->size(); ++i) {
    const Ptr e = at / i;
    const json& o = (*mc)[i];
    r.expect_object(o, e);
    r.allow_keys(o, e,
                 {"gpu_model", "kernel", "head_dim", "attention_TFLOPs", "gemm_TFLOPs",
                  "launch_overhead_us", "contention", "conditions"});
    MeasuredCompute m;
    m.place = r.place(e);
    const std::string model = r.string(o, e, "gpu_model");
    auto spec = lookup_gpu_model(model, "");
    if (!spec) {  // lookup_gpu_model's message starts ": " with no file; drop its CLI hint
      std::string why = spec.error().message.substr(spec.error().message.find(": ") + 2);
      if (const size_t h = why.find(" (--gpu-model"); h != std::string::npos)
        why = why.substr(0, h) + " (see `sparsp topo models`)";
      r.fail(e / "gpu_model", why);
    }
    m.gpu_model = spec->model;
    m.kernel = r.string(o, e, "kernel");
    if (m.kernel.empty()) r.fail(e / "kernel", "expected a kernel name, got \"\"");
    require_printable(r, e / "kernel", m.kernel, "the kernel name is printed as compute_source");
    m.head_dim = r.integer(o, e, "head_dim");
    if (m.head_dim < 1) r.fail(e / "head_dim", "expected a positive integer");
    if (const json* a = r.find(o, "attention_TFLOPs")) {
      const Ptr ap = e / "attention_TFLOPs";
      r.expect_object(*a, ap);
      // {} measured nothing: the run fell back to another source without a word.
      if (a->empty())
        r.fail(ap, "empty: give TFLOP/s for at least one block size, or leave it out");
      for (auto it = a->begin(); it != a->end(); ++it) {
        const std::string& k = it.key();
        int block = 0;
        if (k.empty() || k.size() > 7 || k.find_first_not_of("0123456789") != std::string::npos ||
            (block = std::stoi(k)) < 1)
          r.fail(ap / k, "expected a block size in tokens (a positive integer) as the key");
        const double tf = figure(it.value(), ap / k);
        // A physical range (1 GFLOP/s to 1 EFLOP/s per GPU): 1e-300 printed 290-digit times.
        if (tf < 1e-3 || tf > 1e6) r.fail(ap / k, "attention TFLOP/s must be in [1e-3, 1e6]");
        m.attention_flops_by_block.emplace_back(block, tf * 1e12);
      }
      std::sort(m.attention_flops_by_block.begin(), m.attention_flops_by_block.end());
    }
    if (const json* g = r.find(o, "gemm_TFLOPs")) {
      const double tf = figure(*g, e / "gemm_TFLOPs");
      if (tf < 1e-3 || tf > 1e6) r.fail(e / "gemm_TFLOPs", "must be in [1e-3, 1e6] TFLOP/s");
      m.gemm_flops = tf * 1e12;
    }
    if (const json* l = r.find(o, "launch_overhead_us")) {
      const double us = figure(*l, e / "launch_overhead_us");
      if (us > 1e6) r.fail(e / "launch_overhead_us", "must be at most 1e6 us (1 s)");
      m.launch_overhead_s = us / 1e6;
    }
    if (const json* c = r.find(o, "contention")) {
      const Ptr cp = e / "contention";
      r.expect_object(*c, cp);
      r.allow_keys(*c, cp, {"ce_copy", "sm_copy_per_sm"});
      // Fractional slowdowns of attention (calibrate measures 0.008-0.009 and 0.0095-0.0098 on
      // the H200, replay/RESULTS.md): ce_copy 10 would be 11x slower, sm_copy_per_sm 1 a whole
      // kernel's time per SM; beyond those a figure is a typo, not a measurement.
      if (const json* v = r.find(*c, "ce_copy")) {
        m.contention_ce_copy = figure(*v, cp / "ce_copy");
        if (m.contention_ce_copy > 10) r.fail(cp / "ce_copy", "must be in [0, 10] (a fraction)");
      }
      if (const json* v = r.find(*c, "sm_copy_per_sm")) {
        m.contention_sm_copy_per_sm = figure(*v, cp / "sm_copy_per_sm");
        if (m.contention_sm_copy_per_sm > 1)
          r.fail(cp / "sm_copy_per_sm", "must be in [0, 1] (a fraction per SM)");
      }
    }
    m.conditions = r.string(o, e, "conditions", std::string());
    options.measured_compute.push_back(std::move(m));
  }
}

// nccl.p2p_level (NCCL_P2P_LEVEL names) and nccl.collectives (per collective name, a list of
// {"gpus", "bytes", "time_us", "transport"} points; every key required, numbers > 0).
void parse_nccl_level_and_collectives(const Reader& r, const json& nc, const Ptr& at,
                                      NcclFigures& f) {
  if (r.find(nc, "p2p_level")) {
    f.p2p_level = r.string(nc, at, "p2p_level");
    bool known = false;
    for (const char* l : {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"})
      known = known || f.p2p_level == l;
    if (!known)
      r.fail(at / "p2p_level", "unknown NCCL P2P level '" + f.p2p_level +
                                   "' (expected LOC, NVL, PIX, PXB, PHB or SYS)");
  }
  const json* cs = r.find(nc, "collectives");
  if (!cs) return;
  const Ptr cat = at / "collectives";
  r.expect_object(*cs, cat);
  r.allow_keys(*cs, cat, {"all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv"});
  for (auto it = cs->begin(); it != cs->end(); ++it) {
    const Ptr lat = cat / it.key();
    if (!it->is_array()) r.fail(lat, std::string("expected an array, got ") + it->type_name());
    if (it->empty()) r.fail(lat, "expected at least one point");
    std::vector<NcclFigures::CollectivePoint> points;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& o = (*it)[i];
      const Ptr pat = lat / i;
      r.expect_object(o, pat);
      r.allow_keys(o, pat, {"gpus", "bytes", "time_us", "transport"});
      NcclFigures::CollectivePoint pt;
      pt.gpus = r.integer(o, pat, "gpus");
      if (pt.gpus < 2)
        r.fail(pat / "gpus", "expected at least 2 GPUs, got " + std::to_string(pt.gpus));
      pt.bytes = r.number(r.require(o, pat, "bytes"), pat / "bytes");
      if (!(pt.bytes > 0 && pt.bytes <= 1125899906842624.0))
        r.fail(pat / "bytes", "bytes must be > 0 and at most 2^50");
      const double us = r.number(r.require(o, pat, "time_us"), pat / "time_us");
      if (!(us > 0 && us <= 1e9)) r.fail(pat / "time_us", "time_us must be > 0 and at most 1e9");
      pt.time_s = units::us_to_s(us);
      pt.transport = r.string(o, pat, "transport");
      if (pt.transport != "p2p" && pt.transport != "shm" && pt.transport != "net")
        r.fail(pat / "transport",
               "unknown transport '" + pt.transport + "' (expected p2p, shm or net)");
      for (const auto& q : points)
        if (q.gpus == pt.gpus && q.bytes == pt.bytes && q.transport == pt.transport)
          r.fail(pat, "a second point for the same gpus, bytes and transport");
      points.push_back(pt);
    }
    f.collectives.emplace_back(it.key(), std::move(points));
  }
}

Result<Topology> parse_root(const json& root, const std::string& file, const Ptr& where);

// The keys of a `topo show --json` report (show_json, topology/report.cpp): figures derived from
// the graph under "topology", ignored on loading.
constexpr std::string_view kReportKeys[] = {"name",
                                            "source",
                                            "gpus",
                                            "hosts",
                                            "sockets",
                                            "pcie_switches",
                                            "p2p_enabled",
                                            "gpu_models",
                                            "gpu_numa_node",
                                            "gpu_socket",
                                            "gpu_memory_numa_id",
                                            "nics",
                                            "path_class",
                                            "p2p",
                                            "p2p_bandwidth_Bps",
                                            "p2p_bidir_bandwidth_Bps",
                                            "p2p_latency_s",
                                            "host_bandwidth_Bps",
                                            "links",
                                            "topology"};

// A `topo show --json` report: its "topology" member is the canonical graph (Topology::to_json);
// the rest is the report, derived from it and not read back. A key that is neither is an error.
Result<Topology> parse_report(const json& root, const std::string& file) {
  Reader r(file);
  try {
    // A cluster file with a stray "topology" key: the stray key is the error, not "cluster".
    if (root.contains("cluster"))
      r.fail(Ptr("/topology"),
             "unknown key 'topology' (a cluster file has schema_version, name, source, cluster)");
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (std::find(std::begin(kReportKeys), std::end(kReportKeys), it.key()) ==
          std::end(kReportKeys))
        r.fail(Ptr() / it.key(), "unknown key '" + it.key() +
                                     "' (a file with \"topology\" is a `topo show --json` "
                                     "report; its topology is read from /topology)");
    }
    r.expect_object(root.at("topology"), Ptr("/topology"));
  } catch (const Fail& f) {
    return f.error;
  }
  return parse_root(root.at("topology"), file, Ptr("/topology"));
}

Result<Topology> parse_text(std::string_view text, const std::string& file) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return input_error(file, "1", "empty file");
  // JSON parsing stops at a NUL byte, so "{...}\0garbage" loaded as if it ended there.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    return input_error(
        file, std::to_string(line_of_offset(text, nul + 1)),
        "NUL byte at offset " + std::to_string(nul) + " (binary data in a text file)");
  auto parsed = parse_json<json>(text, file);
  if (!parsed) return parsed.error();
  if (parsed->is_object() && parsed->contains("topology")) return parse_report(*parsed, file);
  return parse_root(*parsed, file, Ptr());
}

Result<Topology> parse_cluster(const json& root, const std::string& file, const Ptr& where);

// The topology object at `base` of the file (the root, or /topology of a report).
Result<Topology> parse_root(const json& root, const std::string& file, const Ptr& where) {
  Reader r(file, where);
  try {
    r.expect_object(root, Ptr());
    if (r.find(root, "cluster")) {
      if (!where.empty() && where.back() == "server")
        r.fail(Ptr("/cluster"), "a cluster's server is one server, not a cluster");
      return parse_cluster(root, file, where);
    }
    r.allow_keys(root, Ptr(),
                 {"schema_version", "name", "source", "p2p", "p2p_cross_socket", "p2p_overrides",
                  "nccl", "nodes", "links", "template", "source_notes", "measured_compute", "chips",
                  "cluster", "peer_concurrency_cost", "host_read_under_write"});
    const int version = r.integer(root, Ptr(), "schema_version");
    if (version != kSchemaVersion) {
      r.fail(Ptr("/schema_version"), "unsupported schema_version " + std::to_string(version) +
                                         " (expected " + std::to_string(kSchemaVersion) + ")");
    }
    Parsed p;
    p.name = r.string(root, Ptr(), "name", std::string());
    require_printable(r, Ptr("/name"), p.name, "a topology name is printed in headings");
    p.source = r.string(root, Ptr(), "source", std::string());
    require_printable(r, Ptr("/source"), p.source, "a topology's source is printed by topo show");
    if (const json* notes = r.find(root, "source_notes")) {
      const Ptr at("/source_notes");
      if (!notes->is_array())
        r.fail(at, std::string("expected an array, got ") + notes->type_name());
      for (size_t i = 0; i < notes->size(); ++i) {
        if (!(*notes)[i].is_string()) r.fail(at / i, "expected a string");
        p.options.notes.push_back((*notes)[i].get<std::string>());
      }
    }
    const bool has_template = r.find(root, "template") != nullptr;
    if (has_template && (r.find(root, "nodes") || r.find(root, "links"))) {
      r.fail(Ptr("/template"), "give either a template or nodes/links, not both");
    }
    if (has_template) {
      expand_template(r, root, p);
      if (r.find(root, "p2p")) p.options.p2p = r.boolean(root, Ptr(), "p2p", true);
      if (r.find(root, "p2p_cross_socket"))
        p.options.p2p_cross_socket = r.boolean(root, Ptr(), "p2p_cross_socket", true);
    } else {
      parse_graph(r, root, p);
      p.options.p2p = r.boolean(root, Ptr(), "p2p", true);
      p.options.p2p_cross_socket = r.boolean(root, Ptr(), "p2p_cross_socket", true);
    }
    parse_chips(r, root, p);
    if (const auto cost = r.opt_number(root, Ptr(), "peer_concurrency_cost")) {
      if (!(*cost >= 0 && *cost <= 100))
        r.fail(Ptr("/peer_concurrency_cost"), "must be a number in [0, 100]");
      p.options.peer_concurrency_cost = *cost;
    }
    if (const auto f = r.opt_number(root, Ptr(), "host_read_under_write")) {
      // At least 0.01: a read share of a link below 1% is no measured machine's, and a
      // vanishing one made times infinite or below the lower bound (break-it 2026-12-03).
      if (!(*f >= 0.01 && *f <= 1))
        r.fail(Ptr("/host_read_under_write"), "must be a number in [0.01, 1] (1 = off)");
      p.options.host_read_under_write = *f;
    }
    if (const json* ov = r.find(root, "p2p_overrides")) {
      const Ptr at("/p2p_overrides");
      if (!ov->is_array()) r.fail(at, std::string("expected an array, got ") + ov->type_name());
      // Map GPU node ids to GPU indices.
      std::vector<std::string> gpu_ids;
      for (const Node& n : p.nodes) {
        if (n.kind == NodeKind::gpu) gpu_ids.push_back(n.id);
      }
      for (size_t i = 0; i < ov->size(); ++i) {
        const Ptr oat = at / i;
        const json& o = (*ov)[i];
        r.expect_object(o, oat);
        r.allow_keys(o, oat, {"a", "b", "p2p"});
        auto gpu_index = [&](const char* key) {
          const std::string id = r.string(o, oat, key);
          for (size_t g = 0; g < gpu_ids.size(); ++g) {
            if (gpu_ids[g] == id) return static_cast<int>(g);
          }
          r.fail(oat / key, "'" + id + "' is not a gpu node");
        };
        const int a = gpu_index("a"), b = gpu_index("b");
        if (a == b) r.fail(oat / "b", "override needs two different GPUs");
        if (!r.find(o, "p2p")) r.fail(oat / "p2p", "missing required key 'p2p'");
        for (const auto& [pair, allowed] : p.options.p2p_overrides)  // the last one won
          if ((pair.first == a && pair.second == b) || (pair.first == b && pair.second == a))
            r.fail(oat, "a second override for the pair " + gpu_ids[static_cast<size_t>(a)] + ", " +
                            gpu_ids[static_cast<size_t>(b)] + " (one per pair)");
        p.options.p2p_overrides.push_back({{a, b}, r.boolean(o, oat, "p2p", true)});
      }
    }
    if (const json* nc = r.find(root, "nccl")) {
      const Ptr at("/nccl");
      r.expect_object(*nc, at);
      r.allow_keys(
          *nc, at,
          {"p2p_Bps", "p2p_GBps", "p2p_bidir_Bps", "p2p_bidir_GBps", "host_Bps", "host_GBps",
           "host_bidir_Bps", "host_bidir_GBps", "p2p_latency_s", "p2p_latency_us", "host_latency_s",
           "host_latency_us", "source", "p2p_level", "collectives"});
      NcclFigures& f = p.options.nccl;
      f.p2p_Bps = r.bandwidth(*nc, at, "p2p").value_or(0);
      f.p2p_bidir_Bps = r.bandwidth(*nc, at, "p2p_bidir").value_or(0);
      f.host_Bps = r.bandwidth(*nc, at, "host").value_or(0);
      f.host_bidir_Bps = r.bandwidth(*nc, at, "host_bidir").value_or(0);
      for (auto [base, dst] : {std::pair{std::string("p2p_latency"), &f.p2p_latency_s},
                               std::pair{std::string("host_latency"), &f.host_latency_s}}) {
        const auto s_v = r.opt_number(*nc, at, (base + "_s").c_str());
        const auto us_v = r.opt_number(*nc, at, (base + "_us").c_str());
        if (s_v && us_v) r.fail(at / (base + "_us"), "give " + base + "_s or _us, not both");
        if (!s_v && !us_v) continue;
        const double v = s_v ? *s_v : *us_v * 1e-6;
        if (!(v >= 0 && v <= 1))
          r.fail(at / (base + (s_v ? "_s" : "_us")), "latency must be 0..1 s");
        *dst = v;
      }
      (void)r.string(*nc, at, "source", std::string());
      parse_nccl_level_and_collectives(r, *nc, at, f);
      if (!f.any())
        r.fail(at,
               "gives no figure: expected p2p_GBps, p2p_bidir_GBps, host_GBps, host_bidir_GBps, "
               "a latency, p2p_level or collectives");
      // Both ways together carry at least what one way alone does (NCCL 2.28 on two H200: 633 vs
      // 367 GB/s over NVLink, 48 vs 37 GB/s through host memory).
      if (f.p2p_bidir_Bps > 0 && f.p2p_Bps > 0 && f.p2p_bidir_Bps < f.p2p_Bps)
        r.fail(at / "p2p_bidir_GBps", "both ways together must carry at least one way alone (" +
                                          std::to_string(f.p2p_Bps / 1e9) + " GB/s)");
      if (f.host_bidir_Bps > 0 && f.host_Bps > 0 && f.host_bidir_Bps < f.host_Bps)
        r.fail(at / "host_bidir_GBps", "both ways together must carry at least one way alone (" +
                                           std::to_string(f.host_Bps / 1e9) + " GB/s)");
    }
    parse_measured_compute(r, root, p.options);
    return Topology::build(p.name, p.source, std::move(p.nodes), std::move(p.links), p.options,
                           file, std::move(p.node_places), std::move(p.link_places));
  } catch (const Fail& f) {
    return f.error;
  } catch (const json::exception& e) {
    return input_error(file, "", std::string("invalid topology: ") + e.what());
  }
}

// ---- clusters (configs/README.md "Cluster topologies") -------------------------------------

constexpr int kClusterVersion = 1;
constexpr int kMaxClusterNodes = 256, kMaxClusterGpus = 1024;

// Nonzero while load_server loads a cluster's server from a name or file (per thread: parallel
// sweeps load topologies concurrently).
thread_local int loading_cluster_server = 0;

// The cluster's server: a preset name or a path (relative to the cluster file's folder, else as
// given), or an inline topology object (full graph or template).
Topology load_server(const Reader& r, const json& v, const Ptr& at, const std::string& file,
                     const Ptr& where) {
  if (v.is_object()) {
    auto t = parse_root(v, file, where / at);
    if (!t) throw Fail{t.error()};
    return std::move(*t);
  }
  if (!v.is_string())
    r.fail(at, std::string("expected a preset name, a file or a topology object, got ") +
                   v.type_name());
  std::string name = v.get<std::string>();
  if (name.empty()) r.fail(at, "expected a preset name or a file, got \"\"");
  if (const size_t slash = file.rfind('/');
      name[0] != '/' && slash != std::string::npos &&
      (name.find('/') != std::string::npos ||
       (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0))) {
    const std::string near = file.substr(0, slash + 1) + name;
    if (read_text_file(near)) name = near;
  }
  const bool is_path = name.find('/') != std::string::npos ||
                       (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0);
  if (!is_path) {
    // Not a path (Topology::load's rule): a server preset (a cluster preset cannot be a node).
    const auto servers = preset_names();
    if (std::find(servers.begin(), servers.end(), name) == servers.end()) {
      std::string names;
      for (const auto& n : servers) names += (names.empty() ? "" : ", ") + n;
      r.fail(at, "no server preset '" + name + "' (server presets: " + names +
                     "; or give a path to a .json file)");
    }
  }
  // A cluster file given as the server is refused by parse_cluster while this is set, before it
  // loads its own server: a server naming its own cluster file recursed until the stack ran
  // out (break-it pass of 2026-12-02, exit 139).
  struct Depth {
    Depth() { ++loading_cluster_server; }
    ~Depth() { --loading_cluster_server; }
  };
  Result<Topology> t = [&] {
    Depth d;
    return Topology::load(name);
  }();
  if (!t) r.fail(at, "server '" + v.get<std::string>() + "': " + t.error().message);
  if (t->is_cluster()) r.fail(at, "a cluster's server is one server, not a cluster");
  return std::move(*t);
}

// /cluster/nics: NIC cards added to the server tree, "nic<k>" after the server's own NICs.
Topology add_nics(const Reader& r, const json& nics, const Ptr& at, Topology server,
                  const std::string& file) {
  if (!nics.is_array()) r.fail(at, std::string("expected an array, got ") + nics.type_name());
  std::vector<Node> nodes = server.nodes();
  std::vector<Link> links = server.links();
  int count = 0;
  for (const Node& n : nodes) count += n.kind == NodeKind::nic;
  std::vector<std::string> node_places, link_places;
  for (size_t i = 0; i < nodes.size(); ++i) node_places.push_back(r.place(Ptr("/cluster/server")));
  for (size_t i = 0; i < links.size(); ++i) link_places.push_back(r.place(Ptr("/cluster/server")));
  for (size_t i = 0; i < nics.size(); ++i) {
    const Ptr e = at / i;
    const json& o = nics[i];
    r.expect_object(o, e);
    r.allow_keys(o, e, {"parent", "model", "ports", "rate_Gbps", "name", "gen", "width"});
    const std::string parent = r.string(o, e, "parent");
    const int pi = server.node_index(parent);
    if (pi < 0) r.fail(e / "parent", "no node '" + parent + "' in the server");
    const NodeKind pk = server.nodes()[static_cast<size_t>(pi)].kind;
    if (pk != NodeKind::pcie_switch && pk != NodeKind::root_port && pk != NodeKind::cpu)
      r.fail(e / "parent", "a NIC hangs from a pcie_switch, root_port or cpu ('" + parent +
                               "' is a " + to_string(pk) + ")");
    Node n;
    n.kind = NodeKind::nic;
    n.id = "nic" + std::to_string(count++);
    if (server.node_index(n.id) >= 0) r.fail(e, "the server already has a node '" + n.id + "'");
    if (!r.find(o, "model")) r.fail(e / "model", "missing required key 'model'");
    parse_nic_model(r, o, e, n);
    const NicModel model = *find_nic_model(n.nic_model);
    n.ports = r.integer(o, e, "ports", model.ports);
    if (n.ports < 1 || n.ports > 64) r.fail(e / "ports", "expected 1..64");
    if (r.find(o, "name")) {
      n.name = r.string(o, e, "name");
      if (n.name.empty()) r.fail(e / "name", "expected a NIC name, got \"\" (leave the key out)");
      require_printable(r, e / "name", n.name, "a NIC name is printed in tables");
      for (const Node& other : nodes)
        if (other.kind == NodeKind::nic && other.name == n.name)
          r.fail(e / "name", "NIC name '" + n.name + "' is already used by " + other.id);
    }
    Link l;
    l.a = parent;
    l.b = n.id;
    l.kind = LinkKind::pcie;
    l.pcie_gen = r.integer(o, e, "gen", model.pcie_gen);
    if (l.pcie_gen < 1 || l.pcie_gen > 6) r.fail(e / "gen", "PCIe gen must be 1..6");
    l.pcie_width = r.integer(o, e, "width", model.pcie_width);
    if (l.pcie_width != 1 && l.pcie_width != 2 && l.pcie_width != 4 && l.pcie_width != 8 &&
        l.pcie_width != 16)
      r.fail(e / "width", "PCIe width must be 1, 2, 4, 8 or 16");
    l.duplex_factor = pcie_default_duplex_factor();
    l.latency_s = kDefaultPcieLatency_s;
    nodes.push_back(std::move(n));
    links.push_back(std::move(l));
    node_places.push_back(r.place(e));
    link_places.push_back(r.place(e));
  }
  // Topology::build sorts the overrides by index; the server's are already in that form.
  auto t = Topology::build(server.name(), server.source(), std::move(nodes), std::move(links),
                           server.options(), file, std::move(node_places), std::move(link_places));
  if (!t) throw Fail{t.error()};
  return std::move(*t);
}

Result<Topology> parse_cluster(const json& root, const std::string& file, const Ptr& where) {
  Reader r(file, where);
  if (loading_cluster_server > 0)
    return input_error(file, r.place(Ptr("/cluster")),
                       "a cluster's server is one server, not a cluster");
  try {
    r.allow_keys(root, Ptr(), {"schema_version", "name", "source", "cluster"});
    const int version = r.integer(root, Ptr(), "schema_version");
    if (version != kSchemaVersion)
      r.fail(Ptr("/schema_version"), "unsupported schema_version " + std::to_string(version) +
                                         " (expected " + std::to_string(kSchemaVersion) + ")");
    detail::ClusterInput in;
    in.name = r.string(root, Ptr(), "name", std::string());
    require_printable(r, Ptr("/name"), in.name, "a cluster name is printed in headings");
    in.source = r.string(root, Ptr(), "source", std::string());
    require_printable(r, Ptr("/source"), in.source, "a cluster's source is printed by topo show");
    const Ptr at("/cluster");
    const json& c = root.at("cluster");
    r.expect_object(c, at);
    r.allow_keys(c, at, {"version", "nodes", "server", "nics", "fabric", "gdr"});
    const int cv = r.integer(c, at, "version");
    if (cv != kClusterVersion)
      r.fail(at / "version", "unsupported cluster version " + std::to_string(cv) + " (expected " +
                                 std::to_string(kClusterVersion) + ")");
    in.nodes = r.integer(c, at, "nodes");
    if (in.nodes < 1) r.fail(at / "nodes", "expected at least 1 node");
    if (in.nodes > kMaxClusterNodes)
      r.fail(at / "nodes", "more than " + std::to_string(kMaxClusterNodes) + " server nodes (" +
                               std::to_string(in.nodes) + ")");
    in.server = load_server(r, r.require(c, at, "server"), at / "server", file, where);
    if (const json* nics = r.find(c, "nics"))
      in.server = add_nics(r, *nics, at / "nics", std::move(in.server), file);
    const long gpus = static_cast<long>(in.nodes) * in.server.num_gpus();
    if (gpus > kMaxClusterGpus)
      r.fail(at / "nodes", std::to_string(in.nodes) + " nodes x " +
                               std::to_string(in.server.num_gpus()) +
                               " GPUs = " + std::to_string(gpus) + " GPUs (at most " +
                               std::to_string(kMaxClusterGpus) + ")");
    std::vector<const Node*> nics;
    for (const Node& n : in.server.nodes())
      if (n.kind == NodeKind::nic) nics.push_back(&n);
    if (nics.empty())
      r.fail(at / "server", "the server has no NIC: add one under /cluster/nics (or nic nodes)");
    for (const Node* n : nics)
      if (n->nic_model.empty() && n->nic_rate_Bps <= 0)
        r.fail(at / "server", "NIC '" + n->id + "' has no rate: give its model or rate_Gbps");
    in.gdr = r.boolean(c, at, "gdr", true);
    // The fabric.
    const Ptr fat = at / "fabric";
    const json& f = r.require(c, at, "fabric");
    r.expect_object(f, fat);
    r.allow_keys(
        f, fat,
        {"kind", "port_GBps", "latency_us", "oversubscription", "nodes_per_leaf", "leaf_ports"});
    in.fabric = r.string(f, fat, "kind");
    if (in.fabric != "rail" && in.fabric != "leaf_spine")
      r.fail(fat / "kind", "unknown fabric kind '" + in.fabric + "' (expected rail or leaf_spine)");
    const auto port = r.bandwidth(f, fat, "port");
    if (!port) r.fail(fat / "port_GBps", "missing required key 'port_GBps'");
    in.port_Bps = *port;
    const auto lat = r.opt_number(f, fat, "latency_us");
    if (!lat) r.fail(fat / "latency_us", "missing required key 'latency_us'");
    if (!(*lat >= 0 && *lat <= 1e6)) r.fail(fat / "latency_us", "expected 0..1e6 us");
    in.hop_latency_s = units::us_to_s(*lat);
    in.oversubscription = r.opt_number(f, fat, "oversubscription").value_or(1.0);
    if (!(in.oversubscription >= 1 && in.oversubscription <= 1024))
      r.fail(fat / "oversubscription", "expected a ratio in 1..1024 (down:up capacity of a leaf)");
    int ports_per_node = 0;
    for (const Node* n : nics) ports_per_node += n->ports;
    long down = 0;  // leaf ports towards the nodes
    if (in.fabric == "rail") {
      if (r.find(f, "nodes_per_leaf"))
        r.fail(fat / "nodes_per_leaf",
               "a rail fabric has every node on every leaf (NIC k on "
               "leaf k); nodes_per_leaf is for leaf_spine");
      for (const Node* n : nics)
        down = std::max<long>(down, static_cast<long>(in.nodes) * n->ports);
    } else {
      in.nodes_per_leaf = r.integer(f, fat, "nodes_per_leaf");
      if (in.nodes_per_leaf < 1 || in.nodes_per_leaf > in.nodes)
        r.fail(fat / "nodes_per_leaf", "expected 1.." + std::to_string(in.nodes));
      down = static_cast<long>(in.nodes_per_leaf) * ports_per_node;
    }
    if (r.find(f, "leaf_ports")) {
      const int lp = r.integer(f, fat, "leaf_ports");
      const double up = static_cast<double>(down) / in.oversubscription;
      if (up != std::floor(up))
        r.fail(fat / "oversubscription", "leaf ports do not add up: " + std::to_string(down) +
                                             " down ports / oversubscription " +
                                             std::to_string(in.oversubscription) +
                                             " is not a whole number of up ports");
      const long want = down + static_cast<long>(up);
      if (lp != want)
        r.fail(fat / "leaf_ports", "leaf ports do not add up: " + std::to_string(down) +
                                       " down + " + std::to_string(static_cast<long>(up)) +
                                       " up = " + std::to_string(want) + ", not " +
                                       std::to_string(lp));
    }
    // Canonical JSON: the server inline in its canonical form.
    nlohmann::ordered_json out;
    out["schema_version"] = kSchemaVersion;
    out["name"] = in.name;
    out["source"] = in.source;
    nlohmann::ordered_json cl;
    cl["version"] = kClusterVersion;
    cl["nodes"] = in.nodes;
    cl["server"] = nlohmann::ordered_json::parse(in.server.to_json());
    nlohmann::ordered_json fo;
    fo["kind"] = in.fabric;
    fo["port_GBps"] = in.port_Bps / 1e9;
    fo["latency_us"] = *lat;
    if (in.fabric == "leaf_spine") fo["nodes_per_leaf"] = in.nodes_per_leaf;
    fo["oversubscription"] = in.oversubscription;
    cl["fabric"] = fo;
    cl["gdr"] = in.gdr;
    out["cluster"] = cl;
    in.json = out.dump(2) + "\n";
    return detail::make_cluster(std::move(in));
  } catch (const Fail& fail) {
    return fail.error;
  } catch (const json::exception& e) {
    return input_error(file, "", std::string("invalid cluster: ") + e.what());
  }
}

}  // namespace

Result<Topology> Topology::from_json_text(std::string_view text, const std::string& source_name) {
  return parse_text(text, source_name);
}

Result<Topology> Topology::from_json_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return text.error();
  return parse_text(*text, path);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (size_t i = 0; i < detail::kEmbeddedPresetCount; ++i)
    out.emplace_back(detail::kEmbeddedPresets[i].name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> out;
  for (size_t i = 0; i < detail::kEmbeddedClusterCount; ++i)
    if (*detail::kEmbeddedClusters[i].name) out.emplace_back(detail::kEmbeddedClusters[i].name);
  std::sort(out.begin(), out.end());
  return out;
}

Result<Topology> Topology::load(const std::string& name_or_path) {
  const bool looks_like_path =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json");
  if (!looks_like_path) {
    for (size_t i = 0; i < detail::kEmbeddedPresetCount; ++i) {
      if (name_or_path == detail::kEmbeddedPresets[i].name) {
        return parse_text(detail::kEmbeddedPresets[i].text, "<preset:" + name_or_path + ">");
      }
    }
    for (size_t i = 0; i < detail::kEmbeddedClusterCount; ++i) {
      if (name_or_path == detail::kEmbeddedClusters[i].name) {
        return parse_text(detail::kEmbeddedClusters[i].text, "<preset:" + name_or_path + ">");
      }
    }
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    for (const auto& n : cluster_preset_names()) names += ", " + n;
    // input_error: the name is the user's, and its control bytes must not reach the terminal.
    return input_error(name_or_path, "",
                       "no such preset (presets: " + names + "; or give a path to a .json file)");
  }
  return from_json_file(name_or_path);
}

std::string Topology::to_json() const {
  if (impl_->cluster) return impl_->cluster->json;
  using ojson = nlohmann::ordered_json;
  ojson root;
  root["schema_version"] = kSchemaVersion;
  root["name"] = impl_->name;
  root["source"] = impl_->source;
  if (!impl_->options.notes.empty()) root["source_notes"] = impl_->options.notes;
  root["p2p"] = impl_->options.p2p;
  root["p2p_cross_socket"] = impl_->options.p2p_cross_socket;
  if (impl_->options.peer_concurrency_cost >= 0)
    root["peer_concurrency_cost"] = impl_->options.peer_concurrency_cost;
  if (impl_->options.host_read_under_write >= 0)
    root["host_read_under_write"] = impl_->options.host_read_under_write;
  ojson overrides = ojson::array();
  for (const auto& [pair, allowed] : impl_->options.p2p_overrides) {
    overrides.push_back(ojson{
        {"a",
         impl_->nodes[static_cast<size_t>(impl_->gpu_nodes[static_cast<size_t>(pair.first)])].id},
        {"b",
         impl_->nodes[static_cast<size_t>(impl_->gpu_nodes[static_cast<size_t>(pair.second)])].id},
        {"p2p", allowed}});
  }
  root["p2p_overrides"] = overrides;
  if (const NcclFigures& f = impl_->options.nccl; f.any()) {
    ojson nc = ojson::object();
    if (f.p2p_Bps > 0) nc["p2p_Bps"] = f.p2p_Bps;
    if (f.p2p_bidir_Bps > 0) nc["p2p_bidir_Bps"] = f.p2p_bidir_Bps;
    if (f.host_Bps > 0) nc["host_Bps"] = f.host_Bps;
    if (f.host_bidir_Bps > 0) nc["host_bidir_Bps"] = f.host_bidir_Bps;
    if (f.p2p_latency_s > 0) nc["p2p_latency_s"] = f.p2p_latency_s;
    if (f.host_latency_s > 0) nc["host_latency_s"] = f.host_latency_s;
    if (!f.p2p_level.empty()) nc["p2p_level"] = f.p2p_level;
    if (!f.collectives.empty()) {
      ojson cs = ojson::object();
      for (const auto& [name, points] : f.collectives) {
        ojson arr = ojson::array();
        for (const auto& pt : points)
          arr.push_back(ojson{{"gpus", pt.gpus},
                              {"bytes", pt.bytes},
                              {"time_us", std::round(pt.time_s * 1e12) / 1e6},  // ps resolution:
                                                                                // stable round trip
                              {"transport", pt.transport}});
        cs[name] = arr;
      }
      nc["collectives"] = cs;
    }
    root["nccl"] = nc;
  }
  if (!impl_->options.measured_compute.empty()) {
    ojson arr = ojson::array();
    for (const MeasuredCompute& m : impl_->options.measured_compute) {
      ojson o;
      o["gpu_model"] = m.gpu_model;
      o["kernel"] = m.kernel;
      o["head_dim"] = m.head_dim;
      if (!m.attention_flops_by_block.empty()) {
        ojson a = ojson::object();
        for (const auto& [block, f] : m.attention_flops_by_block)
          a[std::to_string(block)] = f / 1e12;
        o["attention_TFLOPs"] = a;
      }
      if (m.gemm_flops > 0) o["gemm_TFLOPs"] = m.gemm_flops / 1e12;
      if (m.launch_overhead_s >= 0) o["launch_overhead_us"] = m.launch_overhead_s * 1e6;
      ojson c = ojson::object();
      if (m.contention_ce_copy >= 0) c["ce_copy"] = m.contention_ce_copy;
      if (m.contention_sm_copy_per_sm >= 0) c["sm_copy_per_sm"] = m.contention_sm_copy_per_sm;
      if (!c.empty()) o["contention"] = c;
      if (!m.conditions.empty()) o["conditions"] = m.conditions;
      arr.push_back(o);
    }
    root["measured_compute"] = arr;
  }
  ojson nodes = ojson::array();
  for (const Node& n : impl_->nodes) {
    ojson o;
    o["id"] = n.id;
    o["kind"] = to_string(n.kind);
    switch (n.kind) {
      case NodeKind::gpu:
        o["model"] = n.gpu->model;
        o["sm_count"] = n.gpu->sm_count;
        o["copy_engines"] = n.gpu->copy_engines;
        o["memory_bytes"] = n.gpu->memory_bytes;
        o["peak_bf16_flops"] = n.gpu->peak_bf16_flops;
        o["memory_bandwidth_Bps"] = n.gpu->memory_bandwidth_Bps;
        o["p2p_capable"] = n.gpu->p2p_capable;
        if (n.memory_numa_id >= 0) o["memory_numa_id"] = n.memory_numa_id;
        break;
      case NodeKind::pcie_switch:
        o["acs_redirect"] = n.acs_redirect;
        if (!n.chip.empty()) o["chip"] = n.chip;
        break;
      case NodeKind::cpu:
        o["numa_node"] = n.numa_node;
        if (n.numa_id >= 0) o["numa_id"] = n.numa_id;
        o["host_memory_Bps"] = n.host_memory_Bps;
        o["root_complex_Bps"] = n.root_complex_Bps;
        o["peer_coefficient"] = n.peer_coefficient;
        if (!n.family.empty()) o["family"] = n.family;
        break;
      case NodeKind::nic:
        if (n.ports > 1) o["ports"] = n.ports;
        if (!n.name.empty()) o["name"] = n.name;
        if (!n.nic_model.empty()) o["model"] = n.nic_model;
        if (n.nic_rate_Bps > 0) o["rate_Gbps"] = n.nic_rate_Bps * 8 / 1e9;
        break;
      default:
        break;
    }
    nodes.push_back(std::move(o));
  }
  root["nodes"] = std::move(nodes);
  ojson links = ojson::array();
  for (const Link& l : impl_->links) {
    ojson o;
    o["a"] = l.a;
    o["b"] = l.b;
    o["kind"] = to_string(l.kind);
    if (l.kind == LinkKind::pcie) {
      o["gen"] = l.pcie_gen;
      o["width"] = l.pcie_width;
    } else if (l.kind == LinkKind::nvlink) {
      o["count"] = l.nvlink_count;
      o["per_link_Bps"] = l.nvlink_per_link_Bps;
    }
    if (l.capacity_measured) o["capacity_Bps"] = l.capacity_Bps;
    o["latency_s"] = l.latency_s;
    o["duplex_factor"] = l.duplex_factor;
    links.push_back(std::move(o));
  }
  root["links"] = std::move(links);
  if (!impl_->options.chip_fabric_Bps.empty() ||
      !impl_->options.chip_peer_concurrency_cost.empty()) {
    ojson chips = ojson::object();
    for (const auto& [id, bps] : impl_->options.chip_fabric_Bps) chips[id]["fabric_Bps"] = bps;
    for (const auto& [id, cost] : impl_->options.chip_peer_concurrency_cost)
      chips[id]["peer_concurrency_cost"] = cost;
    root["chips"] = std::move(chips);
  }
  return root.dump(2) + "\n";
}

}  // namespace sparsp::topology
