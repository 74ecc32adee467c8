// The whole generation around the denoising loop (study::pipeline_times, model JSON "pipeline").
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sparsp/pattern.hpp"
#include "sparsp/study.hpp"
#include "sparsp/sweep.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {
topology::GpuSpec h100() {
  auto g = topology::find_gpu_model("NVIDIA H100 SXM");  // 989.4 TFLOP/s
  REQUIRE(g);
  return *g;
}

// Fields of one CSV line (quoted fields with doubled quotes).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// One H100 SXM of the 8-GPU preset, dense Wan2.1-14B (50 steps, CFG sequential, the fitted
// 31.5 s unsplit stage for the H100 SXM, no text encoder or scheduler figure), fa2.
const char* kWanH100Study = R"({"schema_version": 1, "topologies": ["8x-h100-sxm-nvswitch"],
    "gpus": 1, "model": "wan2.1-14b-720p", "pattern": {"kind": "dense"},
    "policies": ["contiguous/ring/sync"], "steps": [0], "layers": [0],
    "compute": {"kernel": "fa2"}})";
}  // namespace

TEST_CASE("pipeline stages: CFG, text encoder, VAE decode (split or not), scheduler") {
  patterns::Pipeline p;
  p.cfg = "sequential";
  p.text_encoder.given = true;
  p.text_encoder.flops = 692.58e12;  // / (989.4e12 * 0.7) = 1.0 s
  p.vae_decode.given = true;
  p.vae_decode.time_s = {{"NVIDIA H100 SXM", 40.0}, {"NVIDIA H20", 90.0}};
  p.scheduler_overhead_s = 0.01;
  // Loop 100 s (50 steps, one forward each), 4 ranks:
  // denoise = 100 * 2 = 200; text 1.0; VAE 40 (not split); scheduler 0.01 * 50 = 0.5;
  // e2e = 241.5 s.
  auto t = study::pipeline_times(p, 100.0, 50, h100(), 0.7, 4);
  CHECK(t.cfg_forwards == 2);
  CHECK(t.denoise_s == 200.0);
  CHECK(t.text_encoder_s == doctest::Approx(1.0));
  CHECK(t.vae_decode_s == 40.0);
  CHECK(t.scheduler_s == doctest::Approx(0.5));
  CHECK(t.e2e_s == doctest::Approx(241.5));
  CHECK(t.not_modelled.empty());
  // Split across the 4 ranks: 40 / 4 = 10 -> e2e 211.5 s.
  p.vae_decode.split = true;
  t = study::pipeline_times(p, 100.0, 50, h100(), 0.7, 4);
  CHECK(t.vae_decode_s == 10.0);
  CHECK(t.e2e_s == doctest::Approx(211.5));
  // batch2 doubles the loop as sequential does; distilled and none keep one forward.
  p.cfg = "batch2";
  CHECK(study::pipeline_times(p, 100.0, 50, h100(), 0.7, 4).denoise_s == 200.0);
  p.cfg = "distilled";
  CHECK(study::pipeline_times(p, 100.0, 50, h100(), 0.7, 4).denoise_s == 100.0);
}

TEST_CASE("pipeline stage FLOPs at their own efficiency of peak (the CogVideoX VAE figures)") {
  patterns::Pipeline p;
  p.cfg = "batch2";
  p.vae_decode.given = true;
  // The CogVideoX1.5-5B 161-frame tiled decode (sim/tools/pipeline_flops.py): 4.372e15 FLOP at
  // 0.144 of peak (the H200 measurement, sim/RESULTS.md). On an L40 (181.05 TFLOP/s dense bf16):
  // 4.372e15 / (181.05e12 x 0.144) = 167.69 s, whatever the gemm efficiency (0.7 here).
  p.vae_decode.flops = 4.372e15;
  p.vae_decode.efficiency = 0.144;
  // T5-XXL, 226 tokens x 2 prompts: 4.226e12 FLOP at the gemm efficiency, 0.7:
  // 4.226e12 / (181.05e12 x 0.7) = 0.033345 s.
  p.text_encoder.given = true;
  p.text_encoder.flops = 4.226e12;
  topology::GpuSpec l40;
  l40.model = "NVIDIA L40";
  l40.peak_bf16_flops = 181.05e12;
  auto t = study::pipeline_times(p, 100.0, 50, l40, 0.7, 8);
  CHECK(t.vae_decode_s == doctest::Approx(4.372e15 / (181.05e12 * 0.144)));
  CHECK(t.vae_decode_s == doctest::Approx(167.69).epsilon(1e-4));
  CHECK(t.text_encoder_s == doctest::Approx(0.033345).epsilon(1e-4));
  // Not split: 8 ranks decode the whole video; e2e = 200 + 167.6948 + 0.0333 (no scheduler).
  CHECK(t.e2e_s == doctest::Approx(200.0 + 167.6948 + 0.033345).epsilon(1e-6));
  // A measured time for this GPU model wins over the FLOPs.
  p.vae_decode.time_s = {{"NVIDIA L40", 50.0}};
  CHECK(study::pipeline_times(p, 100.0, 50, l40, 0.7, 8).vae_decode_s == 50.0);
}

TEST_CASE("HunyuanVideo presets: text encoders and VAE decode from their FLOPs (hyvae14)") {
  // sim/tools/pipeline_flops.py: the official-tiled decode of the 33 x 45 x 80 latent is
  // 985,738,028,625,920 FLOP (24 tiles, 1.854x the untiled 5.317e14) at 0.1231 of peak (the
  // whole decode timed on one H200: 8.10 s); the text encoders (LLaMA-3-8B on 351 tokens
  // 4.964e12 + CLIP-L on 77 tokens 1.33e10) 4,977,375,252,480 FLOP at the gemm efficiency.
  auto m = patterns::load_model("hunyuanvideo-720p");
  REQUIRE(m);
  const auto& p = m->pipeline;
  CHECK(p.cfg == "distilled");
  CHECK(p.vae_decode.flops == 985738028625920.0);
  CHECK(p.vae_decode.efficiency == 0.1231);
  CHECK_FALSE(p.vae_decode.split);
  CHECK(p.text_encoder.flops == 4977375252480.0);
  // H100 SXM (989.4 TFLOP/s): 9.857e14 / (989.4e12 x 0.1231) = 8.0934 s on every rank (unsplit);
  // text 4.977e12 / (989.4e12 x 0.6) = 0.0083844 s; e2e = loop 100 + 8.0934 + 0.0084.
  auto t = study::pipeline_times(p, 100.0, 50, h100(), 0.6, 8);
  CHECK(t.vae_decode_s == doctest::Approx(985738028625920.0 / (989.4e12 * 0.1231)));
  CHECK(t.vae_decode_s == doctest::Approx(8.0934).epsilon(1e-4));
  CHECK(t.text_encoder_s == doctest::Approx(0.0083844).epsilon(1e-4));
  CHECK(t.not_modelled == std::vector<std::string>{"scheduler"});
  // The STA setting (30 x 48 x 80 latent, 117 frames) tiles to 966,022,105,137,152 FLOP.
  auto sta = patterns::load_model("hunyuanvideo-sta");
  REQUIRE(sta);
  CHECK(sta->pipeline.vae_decode.flops == 966022105137152.0);
}

TEST_CASE("pipeline stages without a figure for the GPU count 0 s and are listed") {
  patterns::Pipeline p;  // nothing given: e2e = the loop, as before issue 14
  auto t = study::pipeline_times(p, 100.0, 50, h100(), 0.7, 2);
  CHECK(t.e2e_s == 100.0);
  CHECK(t.denoise_s == 100.0);
  CHECK(t.not_modelled ==
        std::vector<std::string>{"cfg", "text_encoder", "vae_decode", "scheduler"});
  // A VAE time for another GPU model only: not modelled on the H100.
  p.vae_decode.given = true;
  p.vae_decode.time_s = {{"NVIDIA H20", 90.0}};
  p.cfg = "none";
  t = study::pipeline_times(p, 100.0, 50, h100(), 0.7, 2);
  CHECK(t.vae_decode_s == 0);
  CHECK(t.not_modelled == std::vector<std::string>{"text_encoder", "vae_decode", "scheduler"});
}

TEST_CASE("model JSON pipeline: parsed with sources, bad stages name the pointer") {
  const std::string head = R"({"schema_version": 1, "name": "m", "latent": [1, 4, 4], "heads": 2,
    "head_dim": 64, "layers": 2, "pipeline": )";
  auto ok = patterns::parse_model(head + R"({"cfg": {"mode": "sequential", "source": "s"},
        "vae_decode": {"time_s": {"NVIDIA H100 SXM": 12.5}, "split": true, "source": "s"},
        "text_encoder": {"flops": 1e12, "source": "s"}, "scheduler": {"overhead_s": 0.002, "source": "s"}}})",
                                  "m.json");
  REQUIRE(ok.ok());
  CHECK(ok->pipeline.cfg_forwards() == 2);
  CHECK(ok->pipeline.vae_decode.split);
  CHECK(ok->pipeline.vae_decode.time_s.at(0).second == 12.5);
  CHECK(ok->pipeline.text_encoder.flops == 1e12);
  CHECK(ok->pipeline.scheduler_overhead_s == 0.002);
  auto err = [&](const std::string& pj) {
    auto m = patterns::parse_model(head + pj + "}", "m.json");
    REQUIRE(!m.ok());
    CHECK(m.error().exit_code == 2);
    return m.error().message;
  };
  CHECK(err(R"({"cfg": {"mode": "triple", "source": "s"}})") ==
        "m.json:/pipeline/cfg/mode: expected none, distilled, batch2 or sequential");
  CHECK(err(R"({"cfg": {"mode": "none"}})") ==
        "m.json:/pipeline/cfg/source: every stage names its source");
  CHECK(err(R"({"vae_decode": {"time_s": {"NVIDIA H100 SXM": -1}, "source": "s"}})") ==
        "m.json:/pipeline/vae_decode/time_s/NVIDIA H100 SXM: expected seconds in [0, 1e6]");
  CHECK(err(R"({"text_encoder": {"split": true, "source": "s"}})") ==
        "m.json:/pipeline/text_encoder/split: unknown key (known: flops, efficiency, time_s, "
        "source)");
  CHECK(err(R"({"vae_decode": {"flops": 1e15, "efficiency": 1.5, "source": "s"}})") ==
        "m.json:/pipeline/vae_decode/efficiency: expected a fraction of peak in (0, 1]");
  CHECK(err(R"({"vae_decode": {"flops": 1e15, "efficiency": 0, "source": "s"}})") ==
        "m.json:/pipeline/vae_decode/efficiency: expected a fraction of peak in (0, 1]");
  CHECK(err(R"({"upscaler": {}})") ==
        "m.json:/pipeline/upscaler: unknown stage 'upscaler' (known: cfg, text_encoder, "
        "vae_decode, scheduler)");
}

TEST_CASE(
    "simulate CSV and sweep rows carry denoise_time_s, denoise_speedup, not_modelled, "
    "compute_source") {
  auto s = study::parse_study(kWanH100Study, "s.json");
  REQUIRE(s.ok());
  auto r = study::run_study(*s);
  REQUIRE(r.ok());
  REQUIRE(r->policies.size() == 1);
  const auto& p = r->policies[0];
  // CSV: the 23 columns before issue 14 unchanged in name and place, the new four appended.
  std::istringstream csv(study::to_csv(*r));
  std::string head, row;
  std::getline(csv, head);
  std::getline(csv, row);
  const auto h = csv_fields(head);
  const auto v = csv_fields(row);
  REQUIRE(h.size() == 27);
  REQUIRE(v.size() == 27);
  CHECK(h[10] == "e2e_time_s");
  CHECK(h[22] == "simulated");
  CHECK(std::vector<std::string>(h.begin() + 23, h.end()) ==
        std::vector<std::string>{"denoise_time_s", "denoise_speedup", "not_modelled",
                                 "compute_source"});
  const double step = std::stod(v[9]), e2e = std::stod(v[10]), denoise = std::stod(v[23]);
  // denoise = step x 50 steps x 2 CFG forwards; e2e = denoise + 31.5 s (vae_decode, unsplit).
  CHECK(denoise == doctest::Approx(step * 50 * 2).epsilon(1e-8));
  CHECK(e2e == doctest::Approx(denoise + 31.5).epsilon(1e-8));
  CHECK(v[24] == "1");  // the baseline against itself
  CHECK(v[25] == "text_encoder;scheduler");
  CHECK(v[26] == p.compute_source);
  CHECK(v[26].rfind("kernel fa2 (hopper, ", 0) == 0);

  // Sweep rows: the same four, appended to the metric columns.
  auto ev = study::study_point_evaluator(0);
  REQUIRE(ev.ok());
  const auto& cols = ev->columns;
  REQUIRE(cols.size() == 26);
  CHECK(cols[21] == "simulated");
  CHECK(std::vector<std::string>(cols.begin() + 22, cols.end()) ==
        std::vector<std::string>{"denoise_time_s", "denoise_speedup", "not_modelled",
                                 "compute_source"});
  study::SweepPoint pt;
  pt.study_json = kWanH100Study;
  pt.base_dir = ".";
  const auto out = ev->evaluate(pt);
  REQUIRE(!out.skipped);
  REQUIRE(out.rows.size() == 1);
  const auto& cells = out.rows[0];
  CHECK(std::stod(cells[22]) == doctest::Approx(std::stod(cells[10]) * 50 * 2).epsilon(1e-8));
  CHECK(std::stod(cells[11]) == doctest::Approx(std::stod(cells[22]) + 31.5).epsilon(1e-8));
  CHECK(std::stod(cells[23]) == 1.0);
  CHECK(cells[24] == "\"text_encoder;scheduler\"");
  CHECK(cells[25] == "\"" + p.compute_source + "\"");

  // tune may minimise denoise_time_s: the score is the row's denoise time.
  auto score = study::study_score("denoise_time_s", "/policies/0", 0);
  REQUIRE(score.ok());
  const auto sc = (*score)(pt);
  REQUIRE(sc.ok);
  CHECK(sc.value == doctest::Approx(p.denoise_time_s).epsilon(1e-12));
  // Text columns and the higher-is-better ratio are refused.
  for (const char* bad : {"not_modelled", "compute_source", "denoise_speedup"}) {
    CAPTURE(bad);
    CHECK(!study::study_score(bad, "/policies/0", 0).ok());
  }
}
