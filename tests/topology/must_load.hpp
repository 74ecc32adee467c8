#pragma once
// Test helpers shared by the topology tests: a topology that must load (the test fails with the
// loader's message otherwise), from a preset or file name, or from JSON text.
#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "sparsp/topology.hpp"

namespace sparsp::topology::test {

inline Topology must_load(const std::string& name) {
  auto t = Topology::load(name);
  if (!t) FAIL(t.error().message);
  return std::move(t).value();
}

inline Topology must_parse(const std::string& text, const std::string& source = "test.json") {
  auto t = Topology::from_json_text(text, source);
  if (!t) FAIL(t.error().message);
  return std::move(t).value();
}

}  // namespace sparsp::topology::test
