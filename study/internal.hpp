#pragma once
// Private helpers shared by the study sources.
#include <string>

#include "sparsp/plan.hpp"

namespace sparsp::study {
/// "placement/scheme/runtime[:k=v,...]" (parameters in key order).
std::string policy_label(const policy::PolicySpec& p);
}  // namespace sparsp::study
