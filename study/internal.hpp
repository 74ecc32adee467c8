#pragma once
// Private helpers shared by the study sources.
#include <string>
#include <vector>

#include "sparsp/plan.hpp"

namespace sparsp::study {
/// "placement/scheme/runtime[:k=v,...]" (parameters in key order).
std::string policy_label(const policy::PolicySpec& p);
/// PolicyResult::not_modelled as one CSV / sweep cell: the stage names joined with ';' in their
/// order ("" when every stage is modelled).
inline std::string join_not_modelled(const std::vector<std::string>& stages) {
  std::string s;
  for (const auto& n : stages) s += (s.empty() ? "" : ";") + n;
  return s;
}
}  // namespace sparsp::study
