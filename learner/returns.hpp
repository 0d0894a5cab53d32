// Advantage and value targets over [T, B] tensors (time-major).
//
// Inputs shared by both estimators:
//   rewards      [T, B]  r_t
//   values       [T, B]  V(x_t)
//   next_values  [T, B]  the bootstrap value after step t: V(x_{t+1}), or 0
//                         when the episode terminated at t, or the value of
//                         the state a time limit cut it in when it was
//                         truncated at t (bootstrap_targets)
//   continues    [T, B]  1 when the episode goes on after step t, else 0
//                         (cuts the recursion at episode ends)
#pragma once

#include <torch/torch.h>

namespace rlx {

struct Bootstrap {
  torch::Tensor next_values;  // [T, B]
  torch::Tensor continues;    // [T, B]
};

// next_values and continues of T steps of B envs, from the values V(x_t)
// [T, B], the value after the last step [B], the end flags [T, B] (float
// 0/1), and `cut_values` [T, B]: at each step a time limit cut (truncated,
// not terminated), the value of the state it was cut in (the env's final
// observation; segments of older builds carry none, and V(x_t) stands in:
// pass `values`). A step both terminated and truncated is terminated.
//   next_t = 0 when the episode ended, else V(x_{t+1}) (values_{t+1}, or
//            `boot` after the last step), plus cut_t * cut_values_t
//   continues_t = 1 - (terminated_t or truncated_t)
Bootstrap bootstrap_targets(const torch::Tensor& values, const torch::Tensor& boot, const torch::Tensor& terminated,
                            const torch::Tensor& truncated, const torch::Tensor& cut_values);

struct GaeResult {
  torch::Tensor advantages;  // [T, B]
  torch::Tensor returns;     // [T, B]: advantages + values
};

// Generalised advantage estimation:
//   delta_t = r_t + gamma * next_values_t - V_t
//   A_t     = delta_t + gamma * lambda * continues_t * A_{t+1}
GaeResult gae(const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& next_values,
              const torch::Tensor& continues, double gamma, double lambda);

struct VTraceResult {
  torch::Tensor vs;             // [T, B]: value targets
  torch::Tensor pg_advantages;  // [T, B]: rho_t (r_t + gamma * vs_{t+1} - V_t)
  torch::Tensor rhos;           // [T, B]: truncated importance ratios min(rho_bar, pi/mu)
};

// V-trace (Espeholt et al., 2018), with log_rhos = log pi - log mu:
//   rho_t = min(rho_bar, e^{log_rho}), c_t = min(c_bar, e^{log_rho})
//   delta_t = rho_t (r_t + gamma * next_values_t - V_t)
//   vs_t - V_t = delta_t + gamma * continues_t * c_t * (vs_{t+1} - V_{t+1})
//   pg_adv_t = rho_t (r_t + gamma * (continues_t ? vs_{t+1} : next_values_t) - V_t)
// with vs_T = next_values_{T-1} (the bootstrap) at the segment's end.
VTraceResult vtrace(const torch::Tensor& log_rhos, const torch::Tensor& rewards, const torch::Tensor& values,
                    const torch::Tensor& next_values, const torch::Tensor& continues, double gamma, double rho_bar,
                    double c_bar);

}  // namespace rlx
