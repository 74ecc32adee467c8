// Issue 19 item 3: a 2^20-token sequence (the 131,072-token latent was refused) simulates end to
// end: causal pattern, zigzag placement, Ulysses with GQA and ring.
#include <fstream>

#include "cli_support.hpp"

namespace fs = std::filesystem;

TEST_CASE("simulate: a 2^20-token causal sequence under zigzag runs") {
  const fs::path dir = sparsp::test::fresh_dir("sparsp_long_seq");
  std::ofstream(dir / "llm.model.json") << R"({"name": "llm-1m", "latent": [1, 1, 1048576],
      "heads": 32, "kv_heads": 8, "head_dim": 128, "layers": 1, "steps": 1})";
  std::ofstream(dir / "study.json") << R"({"schema_version": 1, "topology": "8x-l40s-gen4-4switch",
      "model": ")" + (dir / "llm.model.json").string() +
                                           R"(",
      "pattern": {"kind": "causal", "block": 16384}, "gpus": 8, "steps": [0], "layers": [0],
      "policies": ["zigzag/ring/sync", "head_parallel/ulysses/sync", "zigzag/usp/sync"]})";
  const auto r =
      sparsp::test::run("simulate --config " + (dir / "study.json").string() + " --json");
  CHECK(r.rc == 0);
  CHECK(r.err == "");
  // 2^20 / 16384 = 64 blocks; three policies reported.
  CHECK(r.out.find("zigzag/ring/sync") != std::string::npos);
  CHECK(r.out.find("head_parallel/ulysses/sync") != std::string::npos);
  CHECK(r.out.find("zigzag/usp/sync") != std::string::npos);
}
