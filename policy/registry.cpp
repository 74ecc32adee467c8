// The placement and scheme registries (policy/registry.hpp) and their public lookups
// (placements(), make_placement(), schemes(), make_scheme() in include/sparsp/policy.hpp).
#include "registry.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sparsp::policy {
namespace detail {

double param(const Params& p, const std::string& k, double def) {
  auto it = p.find(k);
  return it == p.end() ? def : it->second;
}

namespace {

// Function-local statics: constructed on first use, so registrars in any file may run first.
std::vector<PlacementEntry>& placement_table() {
  static std::vector<PlacementEntry> table;
  return table;
}
std::vector<SchemeEntry>& scheme_table() {
  static std::vector<SchemeEntry> table;
  return table;
}

template <class Entry>
void insert_sorted(std::vector<Entry>& table, const Entry& entry, const char* what) {
  for (const Entry& e : table)
    if (std::strcmp(e.name, entry.name) == 0) {
      std::fprintf(stderr, "sparsp: internal error: %s '%s' registered twice\n", what, entry.name);
      std::abort();
    }
  auto before = [](const Entry& a, const Entry& b) {
    return a.order != b.order ? a.order < b.order : std::strcmp(a.name, b.name) < 0;
  };
  table.insert(std::upper_bound(table.begin(), table.end(), entry, before), entry);
}

}  // namespace

RegisterPlacement::RegisterPlacement(const PlacementEntry& entry) {
  insert_sorted(placement_table(), entry, "placement");
}
RegisterScheme::RegisterScheme(const SchemeEntry& entry) {
  insert_sorted(scheme_table(), entry, "scheme");
}

const std::vector<PlacementEntry>& placement_entries() { return placement_table(); }
const std::vector<SchemeEntry>& scheme_entries() { return scheme_table(); }

}  // namespace detail

std::vector<PolicyInfo> placements() {
  std::vector<PolicyInfo> out;
  for (const auto& p : detail::placement_entries()) out.push_back({p.name, p.description});
  return out;
}

Result<Placement> make_placement(const std::string& name, const PlacementContext& ctx) {
  for (const auto& p : detail::placement_entries())
    if (name == p.name) {
      if (!ctx.graph || !ctx.ranks || ctx.ranks->ranks < 1) return Error{"placement: empty input"};
      return p.make(ctx);
    }
  return Error{"unknown placement '" + name + "'"};
}

std::vector<PolicyInfo> schemes() {
  std::vector<PolicyInfo> out;
  for (const auto& s : detail::scheme_entries()) out.push_back({s.name, s.description});
  return out;
}

Result<CommPlan> make_scheme(const std::string& name, const LayerInput& in,
                             const std::map<std::string, double>& params) {
  for (const auto& s : detail::scheme_entries())
    if (name == s.name) return s.make(in, params);
  return Error{"unknown scheme '" + name + "'"};
}

}  // namespace sparsp::policy
