#pragma once
// Private: the placement and scheme registries. Each placement (policy/placement_*.cpp) and each
// scheme (policy/scheme_*.cpp) registers itself from its own file with a file-scope registrar:
//
//   const RegisterPlacement kRegistered{{"striped", "block i on rank i mod P", 1, place_striped}};
//
// so adding one is adding one file. `order` fixes where an entry is listed (placements(),
// schemes(), the "known: ..." of an unknown-name error); entries are listed by ascending order,
// then name. The library is linked whole (policy/CMakeLists.txt) so no registrar is dropped.
//
// Thread safety: registration happens during static initialisation (one thread); the lookups
// below are read-only afterwards and safe from any thread.
#include <map>
#include <string>
#include <vector>

#include "sparsp/policy.hpp"

namespace sparsp::policy::detail {

/// Numeric policy parameters by name (PolicySpec::params).
using Params = std::map<std::string, double>;

/// `p[k]`, or `def` when the parameter is not set.
double param(const Params& p, const std::string& k, double def);

struct PlacementEntry {
  const char* name;
  const char* description;  ///< one line, shown by `sparsp simulate --list`
  int order;                ///< listing position (ascending)
  Result<Placement> (*make)(const PlacementContext&);
};

struct SchemeEntry {
  const char* name;
  const char* description;
  int order;
  Result<CommPlan> (*make)(const LayerInput&, const Params&);
};

/// Adds `entry` to its registry. A second entry of the same name is a programming error: it
/// aborts at start-up with a message naming it.
struct RegisterPlacement {
  explicit RegisterPlacement(const PlacementEntry& entry);
};
struct RegisterScheme {
  explicit RegisterScheme(const SchemeEntry& entry);
};

/// The registered entries in listing order.
const std::vector<PlacementEntry>& placement_entries();
const std::vector<SchemeEntry>& scheme_entries();

}  // namespace sparsp::policy::detail
