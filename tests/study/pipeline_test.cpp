// The whole generation around the denoising loop (study::pipeline_times, model JSON "pipeline").
#include <doctest/doctest.h>

#include "sparsp/study.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {
topology::GpuSpec h100() {
  auto g = topology::find_gpu_model("NVIDIA H100 SXM");  // 989.4 TFLOP/s
  REQUIRE(g);
  return *g;
}
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
        "m.json:/pipeline/text_encoder/split: unknown key (known: flops, time_s, source)");
  CHECK(err(R"({"upscaler": {}})") ==
        "m.json:/pipeline/upscaler: unknown stage 'upscaler' (known: cfg, text_encoder, "
        "vae_decode, scheduler)");
}
