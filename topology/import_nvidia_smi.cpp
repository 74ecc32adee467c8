// Importer for `nvidia-smi topo -m` text (in progress).
#include "topology_impl.hpp"

namespace sparsp::topology {
Result<Topology> import_nvidia_smi(std::string_view, const std::string& source_name, const ImportOptions&) {
  return input_error(source_name, "", "nvidia-smi import not implemented yet");
}
}  // namespace sparsp::topology
