#pragma once
// The preset topologies of configs/topologies/*.json and the GPU model registry configs/gpus/,
// embedded into the library at build time by topology/CMakeLists.txt (generated
// embedded_presets.cpp, embedded_gpu_models.cpp), so that Topology::load("<name>") and the model
// table work from any working directory.
#include <cstddef>

namespace sparsp::topology::detail {

struct EmbeddedPreset {
  const char* name;  ///< file stem
  const char* text;  ///< file contents
};

extern const EmbeddedPreset kEmbeddedPresets[];
extern const std::size_t kEmbeddedPresetCount;
/// The cluster presets, configs/clusters/*.json.
extern const EmbeddedPreset kEmbeddedClusters[];
extern const std::size_t kEmbeddedClusterCount;
/// The GPU model registry, configs/gpus/*.json (topology/gpu_models.cpp parses it).
extern const EmbeddedPreset kEmbeddedGpuModels[];
extern const std::size_t kEmbeddedGpuModelCount;

}  // namespace sparsp::topology::detail
