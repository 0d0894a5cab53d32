#include "learner/losses.hpp"

namespace rlx {

torch::Tensor truncated_behaviour_weights(const torch::Tensor& prox_log_probs, const torch::Tensor& behaviour_log_probs,
                                          double rho_bar) {
  return torch::clamp_max(torch::exp(prox_log_probs - behaviour_log_probs), rho_bar);
}

torch::Tensor decoupled_ppo_loss(const torch::Tensor& new_log_probs, const torch::Tensor& prox_log_probs,
                                 const torch::Tensor& behaviour_log_probs, const torch::Tensor& advantages,
                                 double clip, double rho_bar, LossStats* stats, const torch::Tensor& mask, bool decoupled) {
  auto prox = prox_log_probs.detach();
  auto behaviour = behaviour_log_probs.detach();
  auto behaviour_ratio = torch::exp(prox - behaviour);
  if (stats) {
    stats->ratio_mean = behaviour_ratio.mean().item<double>();
    stats->ratio_max = behaviour_ratio.max().item<double>();
    stats->truncated_fraction = (behaviour_ratio > rho_bar).to(torch::kFloat32).mean().item<double>();
  }
  auto r = torch::exp(new_log_probs - (decoupled ? prox : behaviour));
  auto adv = advantages.detach();
  auto surrogate = torch::min(r * adv, torch::clamp(r, 1.0 - clip, 1.0 + clip) * adv);
  if (!decoupled) return -masked_mean(surrogate, mask);
  return -masked_mean(torch::clamp_max(behaviour_ratio, rho_bar) * surrogate, mask);
}

torch::Tensor masked_mean(const torch::Tensor& x, const torch::Tensor& mask) {
  if (!mask.defined()) return x.mean();
  return (x * mask).sum() / mask.sum().clamp_min(1.0);
}

}  // namespace rlx
