// Scheme `ulysses`: DeepSpeed-Ulysses, the all-to-all by heads (detail::ulysses_plan with
// Ulysses degree P).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy::detail {
namespace {

// Ulysses degree P: ring degree 1, no ring steps, so nothing to merge. out_cast_bytes_per_element
// (default 0): xDiT runs this attention through its ring function with a ring of one, which casts
// the output to float32 and back (scheme_parts.hpp out_cast_bytes_per_element).
Result<CommPlan> scheme_ulysses(const LayerInput& in, const Params& p) {
  return ulysses_plan(in, in.placement->ranks, param(p, "host_staged", 0) != 0, "a2a", 0,
                      out_cast_bytes_per_element(p));
}

const RegisterScheme kRegistered{
    {"ulysses",
     "DeepSpeed-Ulysses: all-to-all of Q, K, V by heads, attention, all-to-all of the "
     "output (heads divisible by P); out_cast_bytes_per_element (default 0; xDiT: 12) charges "
     "the float32 cast of the output and back",
     2, scheme_ulysses}};

}  // namespace
}  // namespace sparsp::policy::detail
