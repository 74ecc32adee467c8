// The placement and scheme registries (policy/registry.hpp): every file's registrar is linked in
// (the library is linked whole) and entries are listed in their registered order, which is the
// order of `simulate --list` and of the "known: ..." list in an unknown-name error.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sparsp/policy.hpp"

using namespace sparsp;

namespace {
std::vector<std::string> names(const std::vector<policy::PolicyInfo>& list) {
  std::vector<std::string> out;
  for (const auto& p : list) {
    CHECK_FALSE(p.description.empty());
    out.push_back(p.name);
  }
  return out;
}
}  // namespace

TEST_CASE("registry: all six placements and seven schemes, in listing order") {
  CHECK(names(policy::placements()) == std::vector<std::string>{"contiguous", "striped", "balanced",
                                                                "dependency_aware", "head_parallel",
                                                                "zigzag"});
  CHECK(names(policy::schemes()) == std::vector<std::string>{"ring", "allgather", "ulysses", "usp",
                                                             "demand_alltoall", "demand_direct",
                                                             "demand_hierarchical"});
  CHECK(names(policy::runtimes()) ==
        std::vector<std::string>{"sync", "sm_overlap", "ce_decoupled"});
}

TEST_CASE("registry: unknown names are errors naming them, the policy check lists the known ones") {
  const auto flat = policy::RankTopology::flat(2, true);
  policy::BlockGraph g;
  g.num_blocks = 2;
  g.tokens = {1, 1};
  g.work = {1, 1};
  g.dep = {1, 0, 0, 1};
  policy::PlacementContext ctx{&g, &flat, 2, {}};
  auto p = policy::make_placement("nope", ctx);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message == "unknown placement 'nope'");
  // Two blocks on two ranks, contiguous: block 0's middle token 0.5 of 2 -> rank 0, block 1's
  // 1.5 -> rank 1.
  auto c = policy::make_placement("contiguous", ctx);
  REQUIRE(c.ok());
  CHECK(c->block_owner == std::vector<int>{0, 1});
  // head_parallel is the contiguous split under its own name.
  auto h = policy::make_placement("head_parallel", ctx);
  REQUIRE(h.ok());
  CHECK(h->name == "head_parallel");
  CHECK(h->block_owner == c->block_owner);
  auto spec = policy::parse_policy("contiguous/nope/sync");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().message.find(
            "unknown scheme 'nope' (known: ring, allgather, ulysses, usp, demand_alltoall, "
            "demand_direct, demand_hierarchical)") != std::string::npos);
}
