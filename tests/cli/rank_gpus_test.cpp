// A plan made for GPUs other than gpu0..gpu{P-1} names them (`rank_gpus`, issue 18: a study on
// "gpus": [2, 3] was refused at --emit-plan because its endpoints "gpu2"/"gpu3" would not load).
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.hpp"

using sparsp::test::fresh_dir;
using sparsp::test::run;
using sparsp::test::Run;

namespace {

// Two sockets of one Gen4 switch with two L40S each: gpu0, gpu1 on socket 0 and gpu2, gpu3 on
// socket 1. The study (written into `d` with its topology) runs on the second socket's pair only.
std::filesystem::path socket1_study(const std::filesystem::path& d, const std::string& policy) {
  std::ofstream(d / "t4.json") << R"({"schema_version": 1, "name": "t4",
      "template": {"sockets": 2, "switches_per_socket": 1, "gpus_per_switch": 2,
                   "gpu_model": "NVIDIA L40S", "pcie_gen": 4}})";
  std::ofstream(d / "s.json") << R"({"schema_version": 1, "topology": ")" +
                                     (d / "t4.json").string() +
                                     R"(", "gpus": [2, 3], "model": "hunyuanvideo-sta",
      "pattern": {"kind": "sta", "block": 384, "tile": [6, 8, 8], "window": [3, 3, 3]},
      "steps": [0], "layers": [0], "policies": [")" +
                                     policy + R"("]})";
  return d / "s.json";
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("a study on gpus [2, 3] emits a plan that names them, loads, re-times and replays") {
  for (const std::string policy :
       {"contiguous/ring/sync", "dependency_aware/demand_direct/ce_decoupled:host_staged=1"}) {
    CAPTURE(policy);
    const auto d = fresh_dir("sparsp_rank_gpus");
    const Run s = run("simulate --config " + socket1_study(d, policy).string() + " --emit-plan " +
                      (d / "plans").string() + " --json");
    REQUIRE(s.rc == 0);
    std::filesystem::path plan;
    for (const auto& e : std::filesystem::directory_iterator(d / "plans")) plan = e.path();
    const nlohmann::json pj = read_json(plan);
    CHECK(pj["gpus"] == 2);
    CHECK(pj["rank_gpus"] == nlohmann::json::array({2, 3}));
    // Endpoints are the topology's GPUs: nothing runs on gpu0 or gpu1.
    for (const auto& t : pj["layers"][0]["transfers"])
      for (const char* end : {"src", "dst"}) {
        const std::string ep = t[end].get<std::string>();
        CHECK((ep == "gpu2" || ep == "gpu3" || ep.rfind("host", 0) == 0));
      }
    // Re-timed as written, the plan gives the study's attention time (same workload, same
    // topology, same endpoints).
    const Run r = run("simulate --plan " + plan.string() + " --json");
    REQUIRE(r.rc == 0);
    const auto study = nlohmann::json::parse(s.out)["policies"][0];
    const auto retimed = nlohmann::json::parse(r.out)["policies"][0];
    CHECK(retimed["attention_time_s"].get<double>() ==
          doctest::Approx(study["attention_time_s"].get<double>()).epsilon(1e-12));
    // Rank r replays on the r-th device; every byte arrives where the plan says.
    const Run rp = run("replay --plan " + plan.string() + " --backend host --no-compute -o " +
                       (d / "t.json").string());
    CHECK(rp.rc == 0);
  }
}

TEST_CASE("rank_gpus is checked at its pointer") {
  const auto d = fresh_dir("sparsp_rank_gpus_bad");
  const Run s = run("simulate --config " + socket1_study(d, "contiguous/ring/sync").string() +
                    " --emit-plan " + (d / "plans").string());
  INFO(s.err);
  REQUIRE(s.rc == 0);
  std::filesystem::path plan;
  for (const auto& e : std::filesystem::directory_iterator(d / "plans")) plan = e.path();
  const nlohmann::json good = read_json(plan);
  auto with = [&](const nlohmann::json& rank_gpus) {
    nlohmann::json j = good;
    j["rank_gpus"] = rank_gpus;
    const auto p = d / "bad.plan.json";
    std::ofstream(p) << j.dump();
    return run("simulate --plan " + p.string());
  };
  const std::string at = (d / "bad.plan.json").string();
  Run r = with({2, 2});
  CHECK(r.rc == 2);
  CHECK(r.err == "sparsp: " + at + ":/rank_gpus/1: gpu2 is listed twice (one rank per GPU)\n");
  r = with({2, 4});  // the template has gpu0..gpu3
  CHECK(r.rc == 2);
  CHECK(r.err ==
        "sparsp: " + at +
            ":/rank_gpus/1: expected a GPU index in 0..3 (the embedded topology's GPUs)\n");
  r = with({2});
  CHECK(r.rc == 2);
  CHECK(r.err == "sparsp: " + at + ":/rank_gpus: expected 2 entries (gpus), got 1\n");
  // Ranks on gpu0 and gpu1 while the transfers name gpu2/gpu3: the first endpoint is refused.
  r = with({0, 1});
  CHECK(r.rc == 2);
  CHECK(r.err.find(":/layers/0/transfers/0/") != std::string::npos);
  CHECK(r.err.find("N in rank_gpus: 0 1") != std::string::npos);
}
