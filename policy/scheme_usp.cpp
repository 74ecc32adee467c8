// Scheme `usp`: USP (xDiT), Ulysses degree x ring degree = P (detail::ulysses_plan); and its
// default Ulysses degree.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy {

int default_ulysses_degree(int P, int H) {
  // xDiT's common PCIe setting: Ulysses inside half the group, ring across the halves.
  int u = P >= 4 ? P / 2 : 1;
  while (u > 1 && (H % u != 0 || P % u != 0)) --u;
  return u;
}

namespace detail {
namespace {

Result<CommPlan> scheme_usp(const LayerInput& in, const Params& p) {
  const int u = static_cast<int>(
      param(p, "ulysses_degree", default_ulysses_degree(in.placement->ranks, in.model->heads)));
  return ulysses_plan(in, u, param(p, "host_staged", 0) != 0, "a2a",
                      ring_merge_bytes_per_element(p));
}

const RegisterScheme kRegistered{
    {"usp",
     "USP (xDiT): Ulysses degree x ring degree = P (ulysses_degree, default P/2); each ring "
     "step's partial output merged by LSE (merge_bytes_per_element, default 18.4)",
     3, scheme_usp}};

}  // namespace
}  // namespace detail
}  // namespace sparsp::policy
