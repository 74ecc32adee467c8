// Golden tests of `sparsp pattern` through the real binary.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Run {
  int rc = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

Run run(const std::string& args) {
  const std::string err_file =
      (fs::temp_directory_path() / ("sparsp_cli_err_" + std::to_string(::getpid()))).string();
  const std::string cmd = std::string(SPARSP_CLI_PATH) + " " + args + " 2>" + err_file;
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  FILE* e = std::fopen(err_file.c_str(), "r");
  if (e) {
    while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    std::fclose(e);
  }
  fs::remove(err_file);
  return r;
}

const std::string kDir = std::string(SPARSP_TEST_DATA_DIR) + "/patterns/";
const std::string kTiny = "--model " + kDir + "tiny_model.json --block 2";

std::string tmp(const std::string& name) {
  return (fs::temp_directory_path() / ("sparsp_cli_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST_CASE("pattern stats --json: STA (3,3,3) on the STA canvas has video density 0.09") {
  // (3/5)(3/6)(3/10) = 0.09 (see test_generators.cpp for the tile-pair count).
  Run r =
      run("pattern stats --model hunyuanvideo-sta --kind sta --block 384 --window 3,3,3 --json "
          "--max-steps 2");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["video_density"].get<double>() == doctest::Approx(0.09).epsilon(1e-12));
  CHECK(j["density"].get<double>() == doctest::Approx(8701.0 / (301.0 * 301.0)).epsilon(1e-12));
  CHECK(j["num_blocks"] == 301);
  CHECK(j["pattern"] == "sta window 3,3,3 tile 6,8,8 block 384");
}

TEST_CASE("pattern gen / convert / stats round trip") {
  const std::string spm = tmp("dense.spm"), npy = tmp("lh.npy");
  Run g = run("pattern gen " + kTiny + " --kind dense -o " + spm);
  REQUIRE(g.rc == 0);
  Run s = run("pattern stats " + spm + " --json");
  REQUIRE(s.rc == 0);
  CHECK(nlohmann::json::parse(s.out)["density"].get<double>() == 1.0);
  // mask_lh.npy: every mask is a rolled identity: 4 of 16 -> 0.25.
  Run c = run("pattern convert " + kDir + "mask_lh.npy " + kTiny + " -o " + npy);
  REQUIRE(c.rc == 0);
  Run s2 = run("pattern stats " + npy + " " + kTiny + " --json");
  REQUIRE(s2.rc == 0);
  CHECK(nlohmann::json::parse(s2.out)["density"].get<double>() == 0.25);
  fs::remove(spm);
  fs::remove(npy);
}

TEST_CASE("bad input: exit 2, one line naming the file and the problem, no output file") {
  Run t = run("pattern stats " + kDir + "mask_truncated.npy " + kTiny);
  CHECK(t.rc == 2);
  CHECK(t.err.rfind("sparsp: " + kDir + "mask_truncated.npy:data: truncated", 0) == 0);
  CHECK(std::count(t.err.begin(), t.err.end(), '\n') == 1);
  const std::string out = tmp("never.spm");
  Run w = run("pattern gen --model hunyuanvideo-sta --kind sta --window 7,3,3 -o " + out);
  CHECK(w.rc == 2);
  CHECK(w.err.find("window 7,3,3 larger than the tile grid 5,6,10") != std::string::npos);
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(out + ".tmp"));
  Run m = run("pattern stats --model no-such-model --kind dense");
  CHECK(m.rc == 2);
  CHECK(m.err.find("no-such-model: no such model preset") != std::string::npos);
  Run tl = run("pattern stats --model hunyuanvideo-sta --kind sta --tile 6,8");
  CHECK(tl.rc == 2);
  CHECK(tl.err.find("--tile: expected t,h,w integers, got '6,8'") != std::string::npos);
  Run b = run("pattern stats --model hunyuanvideo-sta --kind sta --block 100");
  CHECK(b.rc == 2);
  CHECK(b.err.find("block size 100 does not divide the tile volume 6x8x8 = 384") !=
        std::string::npos);
  Run d = run("pattern stats " + kDir + "mask_f32.npy " + kTiny);
  CHECK(d.rc == 2);
  CHECK(d.err.find("mask_f32.npy:header: mask dtype must be bool or uint8") != std::string::npos);
  Run q = run("pattern stats " + kTiny + " --kind topk --topk 1 --q " + kDir + "q_nan.npy --k " +
              kDir + "k_f32.npy");
  CHECK(q.rc == 2);
  CHECK(q.err.find("q_nan.npy:[H=1,block=2]: NaN or infinite values") != std::string::npos);
}

TEST_CASE("every pattern subcommand has --help") {
  for (const char* sub : {"gen", "stats", "convert"}) {
    Run r = run(std::string("pattern ") + sub + " --help");
    CHECK(r.rc == 0);
    CHECK(r.out.find("--") != std::string::npos);
  }
}
