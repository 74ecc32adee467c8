#pragma once
// Model presets compiled into the library (generated from configs/models/*.json by
// patterns/CMakeLists.txt).
#include <string>
#include <vector>

namespace sparsp::patterns {

struct EmbeddedPreset {
  const char* name;  ///< file name without .json
  const char* json;  ///< file contents
};

const std::vector<EmbeddedPreset>& embedded_presets();

}  // namespace sparsp::patterns
