#include "learner/returns.hpp"

namespace rlx {

Bootstrap bootstrap_targets(const torch::Tensor& values, const torch::Tensor& boot, const torch::Tensor& terminated,
                            const torch::Tensor& truncated, const torch::Tensor& cut_values) {
  const auto T = values.size(0);
  auto next = torch::cat({values.narrow(0, 1, T - 1), boot.unsqueeze(0)}, 0);
  const auto done = torch::clamp_max(terminated + truncated, 1.0);
  const auto cut = truncated * (1 - terminated);
  return {next * (1 - done) + cut_values * cut, 1 - done};
}

GaeResult gae(const torch::Tensor& rewards, const torch::Tensor& values, const torch::Tensor& next_values,
              const torch::Tensor& continues, double gamma, double lambda) {
  torch::NoGradGuard guard;
  const auto T = rewards.size(0);
  auto deltas = rewards + gamma * next_values - values;
  auto adv = torch::zeros_like(rewards);
  auto running = torch::zeros_like(rewards[0]);
  for (auto t = T - 1; t >= 0; --t) {
    running = deltas[t] + gamma * lambda * continues[t] * running;
    adv[t] = running;
  }
  return {adv, adv + values};
}

VTraceResult vtrace(const torch::Tensor& log_rhos, const torch::Tensor& rewards, const torch::Tensor& values,
                    const torch::Tensor& next_values, const torch::Tensor& continues, double gamma, double rho_bar,
                    double c_bar) {
  torch::NoGradGuard guard;
  const auto T = rewards.size(0);
  auto ratios = torch::exp(log_rhos);
  auto rhos = torch::clamp_max(ratios, rho_bar);
  auto cs = torch::clamp_max(ratios, c_bar);
  auto deltas = rhos * (rewards + gamma * next_values - values);
  auto vs_minus_v = torch::zeros_like(rewards);
  auto acc = torch::zeros_like(rewards[0]);
  for (auto t = T - 1; t >= 0; --t) {
    acc = deltas[t] + gamma * continues[t] * cs[t] * acc;
    vs_minus_v[t] = acc;
  }
  auto vs = vs_minus_v + values;
  // vs_{t+1}: the next row of vs inside the segment, the bootstrap after it.
  auto vs_next = torch::cat({vs.narrow(0, 1, T - 1), next_values.narrow(0, T - 1, 1)}, 0);
  auto target_next = continues * vs_next + (1 - continues) * next_values;
  auto pg = rhos * (rewards + gamma * target_next - values);
  return {vs, pg, rhos};
}

}  // namespace rlx
