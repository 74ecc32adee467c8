// The text table with huge and mixed values (issue 18, leftovers): a number too large for its
// fixed notation is written in engineering notation and every row stays aligned; a study of
// topologies with different GPU counts names each count.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sparsp/study.hpp"

using namespace sparsp::study;  // NOLINT

namespace {

PolicyResult row(const std::string& topo, const char* scheme, double attention_s) {
  PolicyResult p;
  p.topology = topo;
  p.policy.placement = "contiguous";
  p.policy.scheme = scheme;
  p.policy.runtime = "sm_overlap";
  p.attention_time_s = attention_s;
  p.step_time_s = attention_s * 60;
  p.e2e_time_s = attention_s * 60 * 50;
  p.lower_bound_s = attention_s / 2;
  return p;
}

std::vector<std::string> section_lines(const std::string& table, const std::string& topo) {
  std::istringstream in(table);
  std::vector<std::string> out;
  bool inside = false;
  for (std::string l; std::getline(in, l);) {
    if (l == "== " + topo) {
      inside = true;
      continue;
    }
    if (inside && (l.empty() || l.rfind("fastest", 0) == 0)) break;
    if (inside) out.push_back(l);
  }
  return out;
}

}  // namespace

TEST_CASE("a huge time is written in engineering notation and the columns stay aligned") {
  // A plan with 1e300 FLOPs: attention 1e297 s = 1e300 ms per layer. Fixed notation printed a
  // 300-digit number (cut at 63 characters by the cell buffer), which broke every column.
  StudyResult r;
  r.model = "m";
  r.pattern = "p";
  r.gpus = 2;
  r.baseline = "contiguous/ring/sm_overlap";
  r.policies = {row("t", "ring", 0.05), row("t", "ulysses", 1e297)};
  r.policies[0].speedup = 1;
  r.policies[1].speedup = 0.05 / 1e297;
  const std::string table = format_table(r);
  // Engineering notation: exponent a multiple of 3, mantissa 1..999.99, two decimals.
  // attention 1e297 s = 1e300 ms -> "1.00e300 ms"; step 60 layers x 1e297 s = 6e298 s ->
  // "60.00e297 s"; e2e x 50 steps = 3e300 s -> "3.00e300 s"; LB 5e296 s = 5e299 ms ->
  // "500.00e297 ms".
  CHECK(table.find("1.00e300 ms") != std::string::npos);
  CHECK(table.find("60.00e297 s") != std::string::npos);
  CHECK(table.find("3.00e300 s") != std::string::npos);
  CHECK(table.find("500.00e297 ms") != std::string::npos);
  const auto lines = section_lines(table, "t");
  REQUIRE(lines.size() == 3);  // header + 2 rows
  // Aligned: every line of the section has the same length, and the columns end in the same
  // place (the "attn/layer" header ends where both rows' attention cells end).
  CHECK(lines[1].size() == lines[0].size());
  CHECK(lines[2].size() == lines[0].size());
  const size_t attn_end = lines[0].find("attn/layer") + std::string("attn/layer").size();
  CHECK(lines[1].compare(attn_end - 8, 8, "50.00 ms") == 0);  // 0.05 s
  CHECK(lines[2].compare(attn_end - 11, 11, "1.00e300 ms") == 0);
  // Normal values keep their fixed notation.
  CHECK(table.find("50.00 ms") != std::string::npos);
  CHECK(table.find("150.0 s") != std::string::npos);  // e2e 0.05 x 60 x 50
}

TEST_CASE("topologies with different GPU counts: the header names each count") {
  StudyResult r;
  r.model = "m";
  r.pattern = "p";
  r.gpus = 2;
  r.baseline = "contiguous/ring/sm_overlap";
  r.policies = {row("a2", "ring", 0.05), row("b8", "ring", 0.02)};
  r.gpus_per_topology = {{"a2", 2}, {"b8", 8}};
  CHECK(gpu_count_text(r) == "2 GPUs on a2, 8 GPUs on b8");
  CHECK(format_table(r).rfind("model m, pattern p, 2 GPUs on a2, 8 GPUs on b8; baseline ", 0) == 0);
  CHECK(to_json(r).find("\"gpus_per_topology\": {\n    \"a2\": 2,\n    \"b8\": 8\n  }") !=
        std::string::npos);
  // One size: as before ("8 GPUs"), and no gpus_per_topology in the JSON.
  r.gpus = 8;
  r.gpus_per_topology = {{"a8", 8}, {"b8", 8}};
  CHECK(gpu_count_text(r) == "8 GPUs");
  CHECK(to_json(r).find("gpus_per_topology") == std::string::npos);
  r.gpus = 1;
  r.gpus_per_topology = {{"a1", 1}};
  CHECK(gpu_count_text(r) == "1 GPU");
}

TEST_CASE("byte counts are written as exact integers in JSON and CSV (break-it D1)") {
  // 2^30 + 2^29 + 2^28 - 2 = 1879048190 ... + 2 = 1879048192 = 1.75 GiB, ten digits: through
  // 9 significant digits ("%.9g") it read 1879048190 (JSON) and 1.87904819e+09 (CSV).
  StudyResult r;
  r.model = "m";
  r.pattern = "p";
  r.gpus = 2;
  r.baseline = "contiguous/ring/sm_overlap";
  r.policies = {row("t", "ring", 0.05)};
  r.policies[0].volume_bytes = 1879048192;
  r.policies[0].control_bytes = 123456789013;  // twelve digits
  r.policies[0].speedup = 1;
  r.policies[0].volume_vs_baseline = 1;
  const std::string j = to_json(r);
  CHECK(j.find("\"volume_bytes\": 1879048192,") != std::string::npos);
  CHECK(j.find("\"control_bytes\": 123456789013,") != std::string::npos);
  const std::string c = to_csv(r);
  CHECK(c.find(",ring,sm_overlap,1879048192,123456789013,1,") != std::string::npos);
}
