// Compute model of one GPU (attention and the rest of a transformer block). See policy.hpp.
#include <algorithm>
#include <cctype>
#include <string>

#include "sparsp/policy.hpp"

namespace sparsp::policy {

double ComputeModel::other_flops_per_token(const patterns::ModelSpec& model) {
  const double h = model.hidden;
  const double m = model.mlp_hidden > 0 ? model.mlp_hidden : 4.0 * model.hidden;
  return 2.0 * (4.0 * h * h + 2.0 * h * m);
}

double ComputeModel::other_time_s(const patterns::ModelSpec& model, double tokens) const {
  return other_flops_per_token(model) * tokens / (peak_bf16_flops * gemm_efficiency) +
         5.0 * launch_overhead_s;
}

ComputeModel compute_model_for(const topology::GpuSpec& gpu) {
  ComputeModel m;
  if (gpu.peak_bf16_flops > 0) m.peak_bf16_flops = gpu.peak_bf16_flops;
  // Attention efficiency per architecture (FlashAttention-2 forward, head_dim 128, long
  // sequences): H100/H200 ~ 50% of dense peak with FA2 (Shah et al. 2024, FlashAttention-3,
  // fig. 5: FA2 ~ 350 of 989 TFLOP/s = 35%; FA3 ~ 60-75%); Ada (RTX 4090 / L40S) and A100 ~ 45-60%
  // with FA2 (Dao 2023 fig. 4: A100 ~ 190-230 of 312 = 60-70%). We use a single conservative 0.45
  // for block-sparse kernels everywhere except Hopper, where 0.5 (FA3-class sparse kernels, STA).
  std::string name = gpu.model;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  if (name.find("h100") != std::string::npos || name.find("h200") != std::string::npos ||
      name.find("h800") != std::string::npos)
    m.attention_efficiency = 0.5;
  return m;
}

}  // namespace sparsp::policy
