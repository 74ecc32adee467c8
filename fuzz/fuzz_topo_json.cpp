// libFuzzer target: topology JSON (full graph and template). Any input must give a topology or a
// one-line error; a loaded topology must round-trip through its canonical JSON.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sparsp/topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = sparsp::topology::Topology::from_json_text(text, "fuzz.json");
  if (!t) {
    if (t.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  const std::string once = t->to_json();
  auto back = sparsp::topology::Topology::from_json_text(once, "canonical.json");
  if (!back || back->to_json() != once) std::abort();
  (void)sparsp::topology::single_flow_report(*t);
  return 0;
}
