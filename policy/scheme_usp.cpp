// Scheme `usp`: USP (xDiT), Ulysses degree x ring degree = P (detail::ulysses_plan); and its
// default Ulysses degree.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "scheme_parts.hpp"

namespace sparsp::policy {

int default_ulysses_degree(int P, int H, int ranks_per_node) {
  // Across nodes: Ulysses inside a node, ring across nodes. In one server, xDiT's common PCIe
  // setting: Ulysses inside half the group, ring across the halves.
  int u = ranks_per_node > 0 && ranks_per_node < P ? ranks_per_node : P >= 4 ? P / 2 : 1;
  while (u > 1 && (H % u != 0 || P % u != 0)) --u;
  return u;
}

int ranks_per_node(const std::vector<int>& node_of_rank) {
  const int P = static_cast<int>(node_of_rank.size());
  int per = 0;  // ranks of the first node: the leading run of equal node ids
  while (per < P && node_of_rank[static_cast<size_t>(per)] == node_of_rank[0]) ++per;
  if (per == 0 || per == P || P % per != 0) return 0;
  for (int r = 0; r < P; ++r)  // every run of `per` ranks on one node
    if (node_of_rank[static_cast<size_t>(r)] != node_of_rank[static_cast<size_t>(r - r % per)])
      return 0;
  return per;
}

namespace detail {
namespace {

Result<CommPlan> scheme_usp(const LayerInput& in, const Params& p) {
  const int u = static_cast<int>(
      param(p, "ulysses_degree",
            default_ulysses_degree(in.placement->ranks, in.model->heads,
                                   in.ranks ? ranks_per_node(in.ranks->node) : 0)));
  return ulysses_plan(in, u, param(p, "host_staged", 0) != 0, "a2a",
                      ring_merge_bytes_per_element(p), out_cast_bytes_per_element(p));
}

const RegisterScheme kRegistered{
    {"usp",
     "USP (xDiT): Ulysses degree x ring degree = P (ulysses_degree, default P/2; across nodes the "
     "ranks of a node); each ring "
     "step's partial output merged by LSE (merge_bytes_per_element, default 18.4); "
     "out_cast_bytes_per_element (default 0; xDiT: 12) charges the accumulator's float32 casts",
     3, scheme_usp}};

}  // namespace
}  // namespace detail
}  // namespace sparsp::policy
