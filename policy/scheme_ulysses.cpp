// Scheme `ulysses`: DeepSpeed-Ulysses, the all-to-all by heads (detail::ulysses_plan with
// Ulysses degree P).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy::detail {
namespace {

Result<CommPlan> scheme_ulysses(const LayerInput& in, const Params& p) {
  // Ulysses degree P: ring degree 1, no ring steps, so nothing to merge.
  return ulysses_plan(in, in.placement->ranks, param(p, "host_staged", 0) != 0, "a2a", 0);
}

const RegisterScheme kRegistered{
    {"ulysses",
     "DeepSpeed-Ulysses: all-to-all of Q, K, V by heads, attention, all-to-all of the "
     "output (heads divisible by P)",
     2, scheme_ulysses}};

}  // namespace
}  // namespace sparsp::policy::detail
