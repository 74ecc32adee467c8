// GPU model registry: configs/gpus/models.json, embedded at build time (topology/CMakeLists.txt),
// one entry per model with a source for every figure (the entry's "sources" object). Figures are
// datasheet ones: peak_bf16_flops is the dense (no structured sparsity) tensor-core rate with FP32
// accumulate; memory is the datasheet figure, read as binary (GiB): the H200's "141 GB" is
// 143771 MiB = 140.4 GiB on the replay machine (nvidia-smi); copy_engines is
// cudaDeviceProp::asyncEngineCount as deviceQuery prints it for that family.
#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "embedded_presets.hpp"
#include "sparsp/topology.hpp"
#include "sparsp/units.hpp"

namespace sparsp::topology {
namespace {

using nlohmann::json;

// The registry is compiled in, so a malformed entry is a build defect: it asserts with the entry
// and key (tests/topology/test_core.cpp loads every entry).
[[noreturn]] void registry_defect(const std::string& where, const std::string& what) {
  std::fprintf(stderr, "%s:%d: configs/gpus registry %s: %s\n", __FILE__, __LINE__, where.c_str(),
               what.c_str());
  std::abort();
}

GpuSpec parse_entry(const json& e, const std::string& where) {
  auto num = [&](const char* key) -> double {
    if (!e.contains(key) || !e[key].is_number())
      registry_defect(where, std::string("no number ") + key);
    return e[key].get<double>();
  };
  auto integer = [&](const char* key) { return static_cast<int>(num(key)); };
  GpuSpec g;
  g.model = e.value("model", "");
  if (g.model.empty()) registry_defect(where, "no model name");
  g.sm_count = integer("sm_count");
  g.copy_engines = integer("copy_engines");
  g.memory_bytes = num("memory_GiB") * units::kGiB;
  g.peak_bf16_flops = units::TFLOPs_to_FLOPs(num("bf16_dense_TFLOPs"));
  g.memory_bandwidth_Bps = units::GBps_to_Bps(num("memory_bandwidth_GBps"));
  if (!e.contains("p2p") || !e["p2p"].is_boolean()) registry_defect(where, "no boolean p2p");
  g.p2p_capable = e["p2p"].get<bool>();
  g.architecture = e.value("architecture", "");
  g.sm_version = integer("sm_version");
  g.pcie_gen = integer("pcie_gen");
  g.pcie_width = integer("pcie_width");
  g.nvlink_gen = integer("nvlink_gen");
  g.nvlink_links = integer("nvlink_links");
  g.nvlink_per_link_Bps = units::GBps_to_Bps(num("nvlink_per_link_GBps"));
  if (e.contains("c2c_GBps")) g.c2c_Bps = units::GBps_to_Bps(num("c2c_GBps"));
  for (const auto& a : e.value("aliases", json::array())) g.aliases.push_back(a.get<std::string>());
  for (const auto& id : e.value("pci_device_ids", json::array()))
    g.pci_device_ids.push_back(
        static_cast<int>(std::strtol(id.get<std::string>().c_str(), nullptr, 16)));
  if (!e.contains("sources") || !e["sources"].is_object() || e["sources"].empty())
    registry_defect(where, "no sources");
  return g;
}

std::vector<GpuSpec> build_table() {
  std::vector<GpuSpec> out;
  for (std::size_t f = 0; f < detail::kEmbeddedGpuModelCount; ++f) {
    const auto& file = detail::kEmbeddedGpuModels[f];
    const std::string name = std::string("configs/gpus/") + file.name + ".json";
    const json doc = json::parse(file.text, nullptr, false);
    if (doc.is_discarded() || !doc.contains("models") || !doc["models"].is_array())
      registry_defect(name, "not a {\"schema_version\": 1, \"models\": [...]} document");
    for (std::size_t i = 0; i < doc["models"].size(); ++i)
      out.push_back(parse_entry(doc["models"][i], name + ":/models/" + std::to_string(i)));
  }
  assert(!out.empty());
  return out;
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

// A name without punctuation, case and the vendor words ("NVIDIA", "GeForce", "Tesla"), so that
// "rtx4090", "GeForce RTX 4090" and the full name compare equal.
std::string key_of(std::string_view name) {
  std::string key = squash(name);
  for (const char* prefix : {"nvidia", "tesla", "geforce"}) {
    if (key.rfind(prefix, 0) == 0) key = key.substr(std::string_view(prefix).size());
  }
  return key;
}

// Registry entries whose name or an alias has this key.
std::vector<const GpuSpec*> matches(const std::string& key) {
  std::vector<const GpuSpec*> out;
  for (const GpuSpec& g : gpu_models()) {
    bool hit = key_of(g.model) == key;
    for (const auto& a : g.aliases) hit = hit || key_of(a) == key;
    if (hit) out.push_back(&g);
  }
  return out;
}

// Names with a trailing memory size, e.g. "... Server Edition (96 GB)", "H100 SXM 80GB (HGX
// baseboard)": the model's key followed by digits and "gb".
const GpuSpec* memory_suffixed(const std::string& key) {
  for (const GpuSpec& g : gpu_models()) {
    const std::string m = key_of(g.model);
    if (m == "generic" || key.size() <= m.size() || key.rfind(m, 0) != 0) continue;
    size_t i = m.size();
    while (i < key.size() && std::isdigit(static_cast<unsigned char>(key[i]))) ++i;
    if (i > m.size() && key.compare(i, 2, "gb") == 0) return &g;
  }
  return nullptr;
}

}  // namespace

const std::vector<GpuSpec>& gpu_models() {
  static const std::vector<GpuSpec> table = build_table();
  return table;
}

Result<GpuSpec> lookup_gpu_model(std::string_view name, const std::string& file) {
  const std::string key = key_of(name);
  const std::string unknown =
      "unknown GPU model '" + std::string(name) + "' (--gpu-model; see `sparsp topo models`)";
  if (key.empty()) return input_error(file, "", unknown);
  const auto hits = matches(key);
  if (hits.size() > 1) {
    std::string list;
    for (const GpuSpec* g : hits) list += (list.empty() ? "" : ", ") + g->model;
    return input_error(file, "",
                       "GPU model '" + std::string(name) + "' matches several models (" + list +
                           "): give the full name (see `sparsp topo models`)");
  }
  if (hits.size() == 1) return *hits[0];
  if (const GpuSpec* g = memory_suffixed(key)) return *g;
  // A partial name ("H100") that starts several models' names: say which, as for an alias.
  std::string starts;
  for (const GpuSpec& g : gpu_models())
    if (key_of(g.model).rfind(key, 0) == 0) starts += (starts.empty() ? "" : ", ") + g.model;
  if (!starts.empty())
    return input_error(file, "",
                       "GPU model '" + std::string(name) + "' is not a full name; it starts " +
                           starts + " (see `sparsp topo models`)");
  return input_error(file, "", unknown);
}

std::optional<GpuSpec> find_gpu_model(std::string_view name) {
  auto g = lookup_gpu_model(name, "");
  if (!g) return std::nullopt;
  return *g;
}

std::optional<GpuSpec> find_gpu_model_by_pci_id(int device_id) {
  for (const GpuSpec& g : gpu_models()) {
    if (std::count(g.pci_device_ids.begin(), g.pci_device_ids.end(), device_id)) return g;
  }
  return std::nullopt;
}

}  // namespace sparsp::topology
