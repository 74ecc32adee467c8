// libFuzzer target: topology JSON (full graph and template). Any input must give a topology or a
// one-line error; a loaded topology must round-trip through its canonical JSON and through its
// `topo show --json` report.
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
  // Its `topo show --json` report loads back as the same topology (the report's "topology").
  auto shown =
      sparsp::topology::Topology::from_json_text(sparsp::topology::show_json(*t), "show.json");
  if (!shown || shown->to_json() != once) std::abort();
  return 0;
}
