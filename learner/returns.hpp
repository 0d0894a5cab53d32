// Advantage and value targets over [T, B] tensors (time-major).
//
// Inputs shared by both estimators:
//   rewards      [T, B]  r_t
//   values       [T, B]  V(x_t)
//   next_values  [T, B]  the bootstrap value after step t: V(x_{t+1}), or 0
//                         when the episode terminated at t, or V(x_t) when it
//                         was truncated at t (the successor state is lost to
//                         the auto-reset; V(x_t) is its best stand-in)
//   continues    [T, B]  1 when the episode goes on after step t, else 0
//                         (cuts the recursion at episode ends)
#pragma once

#include <torch/torch.h>

namespace rlx {

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
