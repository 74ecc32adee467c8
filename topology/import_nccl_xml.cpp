// Importer for NCCL topology XML (in progress).
#include "topology_impl.hpp"

namespace sparsp::topology {
Result<Topology> import_nccl_xml(std::string_view, const std::string& source_name, const ImportOptions&) {
  return input_error(source_name, "", "NCCL XML import not implemented yet");
}
}  // namespace sparsp::topology
