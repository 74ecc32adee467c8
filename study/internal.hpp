#pragma once
// Private helpers shared by the study sources.
#include <cmath>
#include <cstdint>
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
/// A byte count (PolicyResult::volume_bytes, control_bytes) as the whole number it is, for
/// JSON and CSV: a mean over the sampled layers rounded to the byte. Printed through 9
/// significant digits ("%.9g", r9), 1879048192 read 1879048190 (break-it pass, D1).
inline int64_t whole_bytes(double v) { return std::isfinite(v) ? std::llround(v) : 0; }
}  // namespace sparsp::study
