// Kernel registry (configs/kernels/kernels.json) and compute precedence (policy::resolve_compute).
// Every expected number is worked from the registry's published figures (shared/e2e).
#include <doctest/doctest.h>

#include <cmath>

#include "sparsp/policy.hpp"
#include "sparsp/topology.hpp"

using namespace sparsp;

namespace {
topology::GpuSpec gpu(const char* name) {
  auto g = topology::find_gpu_model(name);
  REQUIRE(g);
  return *g;
}
const policy::KernelSpec& kernel(const char* name) {
  auto k = policy::find_kernel(name, "<t>", "/k");
  REQUIRE(k.ok());
  return **k;
}
}  // namespace

TEST_CASE("kernel registry: the required kernels, generic first, every one with a figure") {
  const auto& ks = policy::kernels();
  REQUIRE(ks.size() >= 7);
  CHECK(ks[0].name == "generic");
  for (const char* n : {"fa2", "fa3", "cudnn", "flex", "sta", "sage2"}) CHECK(kernel(n).name == n);
  for (const auto& k : ks) CHECK(!k.architectures.empty());
  auto bad = policy::find_kernel("fa4", "f.json", "/compute/kernel");
  REQUIRE(!bad.ok());
  CHECK(bad.error().exit_code == 2);
  CHECK(bad.error().message ==
        "f.json:/compute/kernel: unknown kernel 'fa4' (valid: generic, fa2, fa3, cudnn, flex, sta, "
        "sage2; `sparsp simulate --list`)");
}

TEST_CASE("generic reproduces the figures before the registry exactly") {
  // 0.45 of peak, 0.5 on Hopper, 5 us per launch, whatever the shape.
  CHECK(policy::compute_model_for(gpu("NVIDIA H200")).attention_efficiency == 0.5);
  CHECK(policy::compute_model_for(gpu("NVIDIA H100 SXM")).attention_efficiency == 0.5);
  CHECK(policy::compute_model_for(gpu("NVIDIA A100 80GB PCIe")).attention_efficiency == 0.45);
  CHECK(policy::compute_model_for(gpu("NVIDIA GeForce RTX 4090")).attention_efficiency == 0.45);
  CHECK(policy::compute_model_for(gpu("NVIDIA H200")).launch_overhead_s == 5e-6);
  // A GPU without an architecture: Hopper by name (the old rule), else default.
  topology::GpuSpec custom;
  custom.model = "My H800 box";
  custom.peak_bf16_flops = 1e15;
  CHECK(policy::gpu_architecture(custom) == "hopper");
  CHECK(policy::compute_model_for(custom).attention_efficiency == 0.5);
  custom.model = "Mystery";
  CHECK(policy::gpu_architecture(custom).empty());
  CHECK(policy::compute_model_for(custom).attention_efficiency == 0.45);
}

TEST_CASE("kernel efficiency: head_dim figure times N / (N + n_half)") {
  const auto& fa3 = kernel("fa3");
  const auto* f = policy::kernel_figure(fa3, gpu("NVIDIA H100 SXM"));
  REQUIRE(f);
  // Figures per full wave (the published ones / 0.9697, the tail at the published benchmark's
  // shape; see the wave test below). d128: 0.6755 * 115200 / (115200 + 198) = 0.6755 *
  // 0.99828420 = 0.67434098.
  CHECK(policy::kernel_dense_efficiency(*f, 128, 115200) == doctest::Approx(0.67434098));
  // d64: 0.5177 * 16384 / (16384 + 198) = 0.5177 * 0.98805934 = 0.51151832.
  CHECK(policy::kernel_dense_efficiency(*f, 64, 16384) == doctest::Approx(0.51151832));
  // At 512 tokens the fit gives back the published short-sequence point within rounding, at the
  // benchmark's shape (2048 tiles on 132 SMs: tail 15.5152 / 16 = 0.969697):
  // 0.6755 * 512 / 710 * 0.969697 = 0.47236 -> 467.35 TFLOP/s of 989.4 (published 467).
  CHECK(policy::kernel_dense_efficiency(*f, 128, 512) * policy::kernel_wave_factor(*f, 2048, 132) *
            989.4 ==
        doctest::Approx(467.35).epsilon(1e-3));
  // Per GPU model before the architecture: H20 FA3 141 of 148 TOPS = 0.953, no n_half.
  const auto* h20 = policy::kernel_figure(fa3, gpu("NVIDIA H20"));
  REQUIRE(h20);
  CHECK(policy::kernel_dense_efficiency(*h20, 128, 75600) == 0.953);
  // No Ampere figure for FA3 (Hopper only).
  CHECK(policy::kernel_figure(fa3, gpu("NVIDIA A100 80GB PCIe")) == nullptr);
}

TEST_CASE("block-sparse efficiency by block size") {
  const auto& sta = kernel("sta");  // {64: 0.90, 384: 0.94}
  CHECK(policy::kernel_sparse_efficiency(sta, 384) == 0.94);
  CHECK(policy::kernel_sparse_efficiency(sta, 64) == 0.90);
  CHECK(policy::kernel_sparse_efficiency(sta, 1024) == 0.94);  // flat above
  // 128: log2 128 = 7 between 6 and log2 384 = 8.5849625: t = 1 / 2.5849625 = 0.3868528,
  // 0.90 + 0.3868528 * 0.04 = 0.9154741.
  CHECK(policy::kernel_sparse_efficiency(sta, 128) == doctest::Approx(0.9154741));
  // Below the smallest tile: 0.90 * 32 / 64 = 0.45.
  CHECK(policy::kernel_sparse_efficiency(sta, 32) == doctest::Approx(0.45));
  // FlexAttention {128: 1.0}: 64-token blocks half-fill its 128 tiles.
  CHECK(policy::kernel_sparse_efficiency(kernel("flex"), 64) == doctest::Approx(0.5));
  // Dense kernels and generic: 1.
  CHECK(policy::kernel_sparse_efficiency(kernel("fa3"), 32) == 1.0);
  CHECK(policy::kernel_sparse_efficiency(kernel("generic"), 32) == 1.0);
}

TEST_CASE("STA-TK at the HunyuanVideo shape reproduces the published kernel time") {
  // shared/e2e/10: 14.76 TFLOP of active work at 91% sparsity, 25.38 ms on H100.
  // sta: 0.625 (no n_half) * 0.94 (tile 384) = 0.5875 of 989.4 = 581.27 TFLOP/s ->
  // 14.76e12 / 581.27e12 = 25.393 ms (+0.05%).
  policy::ComputeRequest rq;
  rq.kernel = "sta";
  rq.head_dim = 128;
  rq.seq_tokens = 115200;
  rq.block_tokens = 384;
  auto r = policy::resolve_compute(gpu("NVIDIA H100 SXM"), {}, rq);
  REQUIRE(r.ok());
  CHECK(r->model.attention_efficiency == doctest::Approx(0.5875));
  CHECK(r->model.attention_time_s(14.76e12) == doctest::Approx(25.393e-3 + 5e-6).epsilon(1e-4));
  CHECK(r->source == "kernel sta (hopper, 0.5875 of peak)");
}

TEST_CASE("a block size the kernel does not run natively: priced by the rule, said in the source") {
  policy::ComputeRequest rq;
  rq.kernel = "sta";  // native blocks 64 and 384
  rq.head_dim = 128;
  rq.seq_tokens = 115200;
  rq.block_tokens = 128;
  auto r = policy::resolve_compute(gpu("NVIDIA H100 SXM"), {}, rq);
  REQUIRE(r.ok());
  // 0.625 (dense) * 0.9154741 (128 between 64 and 384 in log2, as above) = 0.5721713.
  CHECK(r->model.attention_efficiency == doctest::Approx(0.5721713));
  CHECK(r->source ==
        "kernel sta (hopper, 0.5722 of peak); block 128 not native to sta (64, 384): sparse "
        "efficiency 0.9155 by the registry rule");
  // A native block says nothing more; dense kernels (any block) never do.
  rq.block_tokens = 64;
  r = policy::resolve_compute(gpu("NVIDIA H100 SXM"), {}, rq);
  REQUIRE(r.ok());
  CHECK(r->source == "kernel sta (hopper, 0.5625 of peak)");  // 0.625 * 0.90
  rq.kernel = "fa3";
  rq.block_tokens = 100;
  r = policy::resolve_compute(gpu("NVIDIA H100 SXM"), {}, rq);
  REQUIRE(r.ok());
  CHECK(r->source.find("not native") == std::string::npos);
}

TEST_CASE("precedence: explicit > measured_compute > kernel > generic") {
  const auto h200 = gpu("NVIDIA H200");  // 989 TFLOP/s
  topology::MeasuredCompute m;
  m.gpu_model = "NVIDIA H200";
  m.kernel = "sparsp";
  m.head_dim = 128;
  m.attention_flops_by_block = {{128, 500e12}, {512, 600e12}};
  m.gemm_flops = 692.3e12;
  m.launch_overhead_s = 7e-6;
  m.contention_ce_copy = 0.03;
  m.place = "/measured_compute/0";
  const std::vector<topology::MeasuredCompute> meas{m};
  policy::ComputeRequest rq;
  rq.head_dim = 128;
  rq.seq_tokens = 32760;
  rq.block_tokens = 256;
  SUBCASE("no kernel chosen: a measured entry of any kernel") {
    auto r = policy::resolve_compute(h200, meas, rq);
    REQUIRE(r.ok());
    // Block 256 halfway (in log2) between 128 and 512: 550 TFLOP/s / 989 = 0.55611729.
    CHECK(r->model.attention_efficiency == doctest::Approx(0.55611729));
    CHECK(r->model.gemm_efficiency == doctest::Approx(692.3 / 989));  // 0.7
    CHECK(r->model.launch_overhead_s == 7e-6);
    // Contention: ce_copy measured, sm_copy_per_sm not (-1: the SM share, today's model).
    CHECK(r->model.launch_overhead_s == 7e-6);
    CHECK(r->contention_ce_copy == 0.03);
    CHECK(r->contention_sm_copy_per_sm == -1);
    CHECK(r->source ==
          "measured_compute /measured_compute/0 (kernel sparsp); gemm measured; launch overhead "
          "measured; contention measured");
  }
  SUBCASE("explicit efficiency beats the measurement (other figures still measured)") {
    rq.attention_efficiency = 0.3;
    auto r = policy::resolve_compute(h200, meas, rq);
    REQUIRE(r.ok());
    CHECK(r->model.attention_efficiency == 0.3);
    CHECK(r->model.launch_overhead_s == 7e-6);
  }
  SUBCASE("a chosen kernel skips measurements of other kernels") {
    rq.kernel = "fa3";
    auto r = policy::resolve_compute(h200, meas, rq);
    REQUIRE(r.ok());
    // 0.6755 * 32760 / (32760 + 198) = 0.67144184 (no call shape given: no wave term).
    CHECK(r->model.attention_efficiency == doctest::Approx(0.67144184));
    CHECK(r->model.launch_overhead_s == 5e-6);
    CHECK(r->model.gemm_efficiency == 0.7);
    CHECK(r->contention_ce_copy == 0);  // no entry for fa3: today's model
    CHECK(r->contention_sm_copy_per_sm == -1);
  }
  SUBCASE("a measurement of the chosen kernel wins over its registry figure") {
    auto m2 = meas;
    m2[0].kernel = "fa3";
    rq.kernel = "fa3";
    auto r = policy::resolve_compute(h200, m2, rq);
    REQUIRE(r.ok());
    CHECK(r->model.attention_efficiency == doctest::Approx(0.55611729));
  }
  SUBCASE("a measurement at another head_dim or GPU model does not apply") {
    auto m2 = meas;
    m2[0].head_dim = 64;
    auto r = policy::resolve_compute(h200, m2, rq);
    REQUIRE(r.ok());
    CHECK(r->model.attention_efficiency == 0.5);  // generic, Hopper
    CHECK(r->source == "generic (hopper, 0.5 of peak)");
    auto r2 = policy::resolve_compute(gpu("NVIDIA H100 SXM"), meas, rq);
    REQUIRE(r2.ok());
    CHECK(r2->model.attention_efficiency == 0.5);
  }
  SUBCASE("a kernel with no figure for the GPU is an error naming both, never a fallback") {
    rq.kernel = "fa3";
    // the architectures first, then the GPU models with their own entry (fa3: the H20)
    auto r = policy::resolve_compute(gpu("NVIDIA A100 80GB PCIe"), meas, rq);
    REQUIRE(!r.ok());
    CHECK(r.error().exit_code == 2);
    CHECK(r.error().message ==
          "<study>:/compute/kernel: kernel fa3 has no efficiency figure for ampere (NVIDIA A100 "
          "80GB PCIe); it has figures for hopper, NVIDIA H20");
  }
  SUBCASE("an unsupported head_dim is an error") {
    rq.kernel = "sta";
    rq.head_dim = 64;
    auto r = policy::resolve_compute(h200, {}, rq);
    REQUIRE(!r.ok());
    CHECK(r.error().message ==
          "<study>:/compute/kernel: kernel sta supports head_dim 128; the model's is 64");
  }
}

TEST_CASE("wave quantization: CTAs, waves and the tail, not applied to generic") {
  const auto& fa2 = kernel("fa2");
  const auto* f = policy::kernel_figure(fa2, gpu("NVIDIA H200"));
  REQUIRE(f);
  CHECK(f->tile_q_tokens == 128);  // flash_fwd_launch_template.h:262
  CHECK(f->ctas_per_sm == 2);
  CHECK(f->single_cta_wave_time == 0.61);  // measured on the H200 (kernels.json sources)
  // ring-flash-attention's README shape: 5 heads, 8192 queries per rank:
  // 5 * ceil(8192 / 128) = 320 CTAs; 320 / (132 * 2) = 1.2121 waves: one full wave, then 56
  // CTAs, one per SM on 56 SMs (k = 1), a last wave of 0.61 -> 1.2121 / 1.61 = 0.752871.
  CHECK(policy::attention_ctas(1, 5, 8192, 128) == 320);
  CHECK(policy::kernel_wave_factor(*f, 320, 132) == doctest::Approx(0.752871));
  // The strict tail (single_cta_wave_time 1): 1.2121 / 2 = 0.606061.
  policy::KernelFigure strict = *f;
  strict.single_cta_wave_time = 1.0;
  CHECK(policy::kernel_wave_factor(strict, 320, 132) == doctest::Approx(0.606061));
  // Its 4096-query piece: 160 CTAs, 28 SMs hold 2 (k = 2): a full wave's time, tail 0.606061.
  CHECK(policy::kernel_wave_factor(*f, 160, 132) == doctest::Approx(0.606061));
  // 120 CTAs, one per SM: 0.454545 waves in 0.61 of a wave's time -> 0.745156.
  CHECK(policy::kernel_wave_factor(*f, 120, 132) == doctest::Approx(0.745156));
  // ceil on a partial tile: 4097 queries -> 33 tiles; 5 * 33 = 165 CTAs.
  CHECK(policy::attention_ctas(1, 5, 4097, 128) == 165);
  // 32 heads: 2048 CTAs, 7.7576 waves -> 7.7576 / 8 = 0.969697; whole waves: 264 CTAs -> 1.
  CHECK(policy::kernel_wave_factor(*f, 2048, 132) == doctest::Approx(0.969697));
  CHECK(policy::kernel_wave_factor(*f, 264, 132) == 1.0);
  // Unknown SMs or CTAs: no term.
  CHECK(policy::kernel_wave_factor(*f, 320, 0) == 1.0);
  // Not double counted: at the published benchmark's shape (16 heads x 16384 on 132 SMs) the
  // per-wave figure gives back the published one: 0.3857 * 0.969697 = 0.37401 (published 0.374).
  CHECK(policy::kernel_dense_efficiency(*f, 128, 1e12) *
            policy::kernel_wave_factor(*f, 2048, 132) ==
        doctest::Approx(0.374).epsilon(1e-3));

  policy::ComputeRequest rq;
  rq.kernel = "fa2";
  rq.head_dim = 128;
  rq.seq_tokens = 65536;
  rq.heads = 5;
  rq.query_tokens = 8192;
  auto r = policy::resolve_compute(gpu("NVIDIA H200"), {}, rq);
  REQUIRE(r.ok());
  // 0.3857 * 65536 / (65536 + 101) * 0.752871 = 0.385106 * 0.752871 = 0.289935
  // (-> 286.9 TFLOP/s of the H200's 989.4; measured 276 at this shape, attention_waves.py).
  CHECK(r->model.attention_efficiency == doctest::Approx(0.289935));
  CHECK(r->source ==
        "kernel fa2 (hopper, 0.2899 of peak); waves 1.212 of 132 SMs x 2 (320 CTAs): tail 0.7529");
  // batch 2 (CFG batch2): 640 CTAs, 2.4242 waves: 2 full, then 112 CTAs one per SM (k = 1):
  // 2.4242 / 2.61 = 0.928836.
  rq.batch = 2;
  r = policy::resolve_compute(gpu("NVIDIA H200"), {}, rq);
  REQUIRE(r.ok());
  CHECK(r->model.attention_efficiency == doctest::Approx(0.385106 * 0.928836));
  // generic: the same shape leaves today's 0.5 on Hopper.
  rq.kernel = "";
  r = policy::resolve_compute(gpu("NVIDIA H200"), {}, rq);
  REQUIRE(r.ok());
  CHECK(r->model.attention_efficiency == 0.5);
  CHECK(r->source == "generic (hopper, 0.5 of peak)");
  // A kernel without the fields (cudnn): no term.
  rq.kernel = "cudnn";
  rq.batch = 1;
  r = policy::resolve_compute(gpu("NVIDIA H200"), {}, rq);
  REQUIRE(r.ok());
  CHECK(r->source.find("waves") == std::string::npos);
  CHECK(r->model.attention_last_wave_share == 0);
}

TEST_CASE("the last wave's share of a call (kernel_last_wave_share)") {
  const auto* f = policy::kernel_figure(kernel("fa2"), gpu("NVIDIA H200"));
  REQUIRE(f);
  // 320 CTAs on 132 SMs x 2: one full wave, then a last wave of 0.61 (k = 1): 0.61 / 1.61.
  CHECK(policy::kernel_last_wave_share(*f, 320, 132) == doctest::Approx(0.61 / 1.61));
  // Strict tail: 2 whole-wave units, the last one of them -> 1 / 2.
  policy::KernelFigure strict = *f;
  strict.single_cta_wave_time = 1.0;
  CHECK(policy::kernel_last_wave_share(strict, 320, 132) == doctest::Approx(0.5));
  // 2048 CTAs: 7 full waves (1848 CTAs), then 200 (k = 2: a full wave's time): 1 / 8.
  CHECK(policy::kernel_last_wave_share(*f, 2048, 132) == doctest::Approx(0.125));
  // Whole waves: 528 CTAs = 2 waves -> 1 / 2; one wave or less (264, 160) -> 1.
  CHECK(policy::kernel_last_wave_share(*f, 528, 132) == doctest::Approx(0.5));
  CHECK(policy::kernel_last_wave_share(*f, 264, 132) == 1.0);
  CHECK(policy::kernel_last_wave_share(*f, 160, 132) == 1.0);
  // No wave term (generic, unknown SMs): 0, the kernel's end.
  const auto* g = policy::kernel_figure(kernel("generic"), gpu("NVIDIA H200"));
  REQUIRE(g);
  CHECK(policy::kernel_last_wave_share(*g, 320, 132) == 0);
  CHECK(policy::kernel_last_wave_share(*f, 320, 0) == 0);
  // resolve_compute carries it: 5 heads x 8192 queries = 320 CTAs -> 0.378882.
  policy::ComputeRequest rq;
  rq.kernel = "fa2";
  rq.seq_tokens = 65536;
  rq.heads = 5;
  rq.query_tokens = 8192;
  auto r = policy::resolve_compute(gpu("NVIDIA H200"), {}, rq);
  REQUIRE(r.ok());
  CHECK(r->model.attention_last_wave_share == doctest::Approx(0.378882));
}

TEST_CASE("Ada kernel figures are per GPU model: the RTX 4090's, scaled by tensor rate per SM") {
  const auto& fa2 = kernel("fa2");
  const auto& sage2 = kernel("sage2");
  // FlashAttention-2 on the RTX 4090 as measured (shared/e2e/15): 164 of 165.2 TFLOP/s = 0.993.
  // Absolute throughput at long sequences (n_half 134 -> N / (N + 134) at N = 1e9 ~ 1):
  // 0.993 x 165.2 = 164.0 TFLOP/s.
  auto fig = [](const policy::KernelSpec& k, const char* g) {
    const auto* f = policy::kernel_figure(k, gpu(g));
    REQUIRE(f);
    return policy::kernel_dense_efficiency(*f, 128, 1e9);
  };
  CHECK(fig(fa2, "NVIDIA GeForce RTX 4090") * 165.2 == doctest::Approx(164.04).epsilon(1e-3));
  // L40 (half-rate part like the 4090): the same fraction, 0.993 x 181.05 = 179.78 TFLOP/s
  // (= 164 x 142/128 SMs x 2490/2520 MHz = 179.8).
  CHECK(fig(fa2, "NVIDIA L40") * 181.05 == doctest::Approx(179.78).epsilon(1e-3));
  // L40S (full-rate bf16 with fp32 accumulate): the 4090's rate per SM per clock, half the
  // fraction: 0.4965 x 362.05 = 179.76 TFLOP/s, not the 0.993 x 362.05 = 359.5 of before.
  CHECK(fig(fa2, "NVIDIA L40S") * 362.05 == doctest::Approx(179.76).epsilon(1e-3));
  // SageAttention2 (INT8): 0.634 of the dense INT8 peak on every Ada part. RTX 4090 2.536 x 165.2
  // = 418.95 TOPS (published 419); L40S 1.283 x 362.05 = 464.51 TOPS, under its 733 INT8 peak
  // (before: 2.536 x 362.05 = 918 TOPS, above it); L40 1.268 x 181.05 = 229.57 of 362.
  CHECK(fig(sage2, "NVIDIA GeForce RTX 4090") * 165.2 == doctest::Approx(418.95).epsilon(1e-3));
  CHECK(fig(sage2, "NVIDIA L40S") * 362.05 == doctest::Approx(464.51).epsilon(1e-3));
  CHECK(fig(sage2, "NVIDIA L40S") * 362.05 < 733.0);
  CHECK(fig(sage2, "NVIDIA L40") * 181.05 == doctest::Approx(229.57).epsilon(1e-3));
  CHECK(fig(sage2, "NVIDIA L40") * 181.05 < 362.0);
  // No Ada architecture figure: an Ada part not in gpu_models has none (an error at resolve).
  topology::GpuSpec other = gpu("NVIDIA L40");
  other.model = "NVIDIA Ada part not in the registry";
  CHECK(policy::kernel_figure(fa2, other) == nullptr);
  CHECK(policy::kernel_figure(sage2, other) == nullptr);
}
