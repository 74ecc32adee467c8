// The placement and scheme registries (policy/registry.hpp): every file's registrar is linked in
// (the library is linked whole) and entries are listed in their registered order, which is the
// order of `simulate --list` and of the "known: ..." list in an unknown-name error.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
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

TEST_CASE("dependency_aware: more ranks than blocks is placed as balanced, nothing on stdout") {
  // 3 blocks that all depend on each other, on 5 ranks: METIS cannot make 5 non-empty parts of
  // 3 vertices (it prints "Cannot bisect a graph with 0 vertices!" to stdout when asked), so the
  // rule (placement_dependency_aware.cpp) places them as `balanced` does, under its own name.
  const auto flat = policy::RankTopology::flat(5, true);
  policy::BlockGraph g;
  g.num_blocks = 3;
  g.tokens = {1, 1, 1};
  g.work = {1, 1, 1};
  g.dep = std::vector<float>(9, 1.0f);
  policy::PlacementContext ctx{&g, &flat, 2, {}};
  std::fflush(stdout);
  const int saved = dup(1);
  FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  dup2(fileno(capture), 1);
  auto d = policy::make_placement("dependency_aware", ctx);
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  std::fseek(capture, 0, SEEK_END);
  const long printed = std::ftell(capture);
  std::fclose(capture);
  CHECK(printed == 0);
  auto b = policy::make_placement("balanced", ctx);
  REQUIRE(d.ok());
  REQUIRE(b.ok());
  CHECK(d->name == "dependency_aware");
  CHECK(d->block_owner == b->block_owner);
  // Each block on its own rank (3 blocks of equal work, 5 ranks): no rank holds two.
  CHECK(d->block_owner[0] != d->block_owner[1]);
  CHECK(d->block_owner[1] != d->block_owner[2]);
  CHECK(d->block_owner[0] != d->block_owner[2]);
}

TEST_CASE("dependency_aware: in a cluster, dependent parts share a server node before a socket") {
  // 4 ranks on 2 nodes of 2 sockets, listed interleaved (rank r on node r % 2). Each socket is a
  // root of its node's tree, so without a node level the parts would go to the 4 sockets alike.
  // Blocks 0-1 and 2-3 depend on each other fully (1.0), across the pairs lightly (0.1): with
  // one block per part (equal work, 4 parts), the node level puts each heavy pair on one node,
  // so only the light 0.1 dependencies cross the network.
  policy::RankTopology rt = policy::RankTopology::flat(4, true);
  rt.ancestors = {{"node0/sw0", "node0/cpu0"},
                  {"node1/sw0", "node1/cpu0"},
                  {"node0/sw1", "node0/cpu1"},
                  {"node1/sw1", "node1/cpu1"}};
  rt.numa = {0, 0, 1, 1};
  rt.node = {0, 1, 0, 1};
  policy::BlockGraph g;
  g.num_blocks = 4;
  g.tokens = {1, 1, 1, 1};
  g.work = {1, 1, 1, 1};
  g.dep = {1.0f, 1.0f, 0.1f, 0.0f,  //
           1.0f, 1.0f, 0.0f, 0.1f,  //
           0.1f, 0.0f, 1.0f, 1.0f,  //
           0.0f, 0.1f, 1.0f, 1.0f};
  policy::PlacementContext ctx{&g, &rt, 2, {}};
  auto d = policy::make_placement("dependency_aware", ctx);
  REQUIRE(d.ok());
  const auto& own = d->block_owner;
  CHECK(own[0] != own[1]);  // one block per rank
  CHECK(own[2] != own[3]);
  CHECK(rt.node_of(own[0]) == rt.node_of(own[1]));
  CHECK(rt.node_of(own[2]) == rt.node_of(own[3]));
  CHECK(rt.node_of(own[0]) != rt.node_of(own[2]));
}
