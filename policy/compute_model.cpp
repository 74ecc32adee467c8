// Compute model of one GPU (attention and the rest of a transformer block). See policy.hpp.

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
  // The `generic` kernel of the registry (configs/kernels/kernels.json): 0.45 of dense peak, 0.5
  // on Hopper, 5 us per launch; no sequence or block dependence, so the request's shape is moot.
  auto r = resolve_compute(gpu, {}, ComputeRequest{});
  return r ? r->model : ComputeModel{};
}

}  // namespace sparsp::policy
