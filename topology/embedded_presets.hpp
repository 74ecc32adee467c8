#pragma once
// The preset topologies of configs/topologies/*.json, embedded into the library at build time by
// topology/CMakeLists.txt (generated embedded_presets.cpp), so that Topology::load("<name>") works
// from any working directory.
#include <cstddef>

namespace sparsp::topology::detail {

struct EmbeddedPreset {
  const char* name;  ///< file stem
  const char* text;  ///< file contents
};

extern const EmbeddedPreset kEmbeddedPresets[];
extern const std::size_t kEmbeddedPresetCount;

}  // namespace sparsp::topology::detail
