// Compute model of one GPU (attention and the rest of a transformer block). See policy.hpp.

#include "sparsp/policy.hpp"

namespace sparsp::policy {

double ComputeModel::other_flops_per_token(const patterns::ModelSpec& model) {
  const double h = model.hidden;
  const double m = model.mlp_hidden > 0 ? model.mlp_hidden : 4.0 * model.hidden;
  const double cross = model.cross_attention_tokens > 0 ? 2.0 * h * h : 0.0;
  return 2.0 * (4.0 * h * h + 2.0 * h * m + cross);
}

double ComputeModel::elementwise_time_s(const patterns::ModelSpec& model, double tokens) const {
  const double h = model.hidden;
  const double m = model.mlp_hidden > 0 ? model.mlp_hidden : 4.0 * model.hidden;
  const double bytes = tokens * (h * model.elementwise_bytes_per_element +
                                 m * model.elementwise_mlp_bytes_per_element);
  return bytes / (memory_bandwidth_Bps * memory_efficiency) +
         model.elementwise_kernels * launch_overhead_s;
}

double ComputeModel::cross_attention_time_s(const patterns::ModelSpec& model, double tokens) const {
  const double t = model.cross_attention_tokens;
  if (t <= 0) return 0.0;
  const double h = model.hidden;
  const double attn = attention_flops(tokens, t, model.head_dim) * model.heads;
  const double kv_gemm = 2.0 * 2.0 * t * h * h;
  return attention_time_s(attn) + kv_gemm / (peak_bf16_flops * gemm_efficiency) +
         2.0 * launch_overhead_s;
}

double ComputeModel::other_time_s(const patterns::ModelSpec& model, double tokens) const {
  const double launches = model.cross_attention_tokens > 0 ? 7.0 : 5.0;
  return other_flops_per_token(model) * tokens / (peak_bf16_flops * gemm_efficiency) +
         launches * launch_overhead_s + elementwise_time_s(model, tokens) +
         cross_attention_time_s(model, tokens);
}

ComputeModel compute_model_for(const topology::GpuSpec& gpu) {
  // The `generic` kernel of the registry (configs/kernels/kernels.json): 0.45 of dense peak, 0.5
  // on Hopper, 5 us per launch; no sequence or block dependence, so the request's shape is moot.
  auto r = resolve_compute(gpu, {}, ComputeRequest{});
  return r ? r->model : ComputeModel{};
}

}  // namespace sparsp::policy
