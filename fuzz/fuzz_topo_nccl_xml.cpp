// libFuzzer target: NCCL topology XML importer. Any input must give a topology that round-trips
// through canonical JSON, or a one-line error.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sparsp/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = sparsp::topology::import_nccl_xml(text, "fuzz.xml");
  if (!t) {
    if (t.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const std::string once = t->to_json();
  auto back = sparsp::topology::Topology::from_json_text(once, "canonical.json");
  if (!back || back->to_json() != once) std::abort();
  return 0;
}
