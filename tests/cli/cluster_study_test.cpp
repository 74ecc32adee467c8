// The default study on a cluster preset runs every policy (break-it pass of 2026-12-02, defect 1:
// demand_hierarchical staged a block in the owner's host memory for a requester of another node,
// which no route reaches, and that one policy failed the whole study with exit 2).
#include "cli_support.hpp"

TEST_CASE("simulate: the default study on the 2x8 L40 cluster preset runs every policy") {
  const auto r = sparsp::test::run("simulate --topology 2x8-l40-pcie-100gbe --gpus 16");
  CHECK(r.rc == 0);
  CHECK(r.err == "");
  CHECK(r.out.find("dependency_aware/demand_hierarchical/ce_decoupled ") != std::string::npos);
  CHECK(r.out.find("fastest on 2x8-l40-pcie-100gbe:") != std::string::npos);
  // Only Ulysses is left out (24 heads over 16 ranks), by the check_runnable rule.
  CHECK(r.out.find("left out: head_parallel/ulysses/sync (heads (24) not divisible") !=
        std::string::npos);
}
