// Policy losses with the off-policy correction of docs/architecture.md.
#pragma once

#include <torch/torch.h>

#include "learner/update_stats.hpp"

namespace rlx {

// Decoupled PPO (Hilton et al., 2021): clip around the proximal policy,
// weight each term by the behaviour ratio truncated at rho_bar:
//   w_t = min(rho_bar, pi_prox / pi_behaviour)
//   r_t = pi_theta / pi_prox
//   L   = -mean(w_t * min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t))
// new_log_probs carries the gradient; the others are constants. With
// `mask` (float, 1 keep, 0 leave out; undefined: every row) the mean is
// over the kept rows (0 when none is). `decoupled` false is plain PPO on
// stale data ([learner] correction = "none"): r_t = pi_theta /
// pi_behaviour and w_t = 1. `stats` are the behaviour ratio's
// (pi_prox / pi_behaviour) either way.
torch::Tensor decoupled_ppo_loss(const torch::Tensor& new_log_probs, const torch::Tensor& prox_log_probs,
                                 const torch::Tensor& behaviour_log_probs, const torch::Tensor& advantages,
                                 double clip, double rho_bar, LossStats* stats = nullptr, const torch::Tensor& mask = {},
                                 bool decoupled = true);

// The mean of `x` over the rows `mask` keeps (all when undefined; 0 when none).
torch::Tensor masked_mean(const torch::Tensor& x, const torch::Tensor& mask);

// The truncated behaviour weights alone (exposed for tests): min(rho_bar, e^{prox - behaviour}).
torch::Tensor truncated_behaviour_weights(const torch::Tensor& prox_log_probs, const torch::Tensor& behaviour_log_probs,
                                          double rho_bar);

}  // namespace rlx
