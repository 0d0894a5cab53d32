// The MoE MLP actor-critic for vector observations and discrete actions.
// Actor: obs -> Linear -> tanh -> (h + MoE(h)) -> tanh -> Linear -> logits.
// Critic: a separate dense MLP (value estimates do not share the router,
// so routing is shaped by the policy objective alone).
#pragma once

#include <torch/torch.h>

#include "policy/moe_layer.hpp"

namespace rlx {

struct PolicyOptions {
  std::int64_t obs_dim = 4;
  std::int64_t num_actions = 2;
  std::int64_t hidden = 64;
  std::int64_t experts = 4;
  std::int64_t top_k = 2;
};

struct PolicyOutput {
  torch::Tensor logits;           // [N, A]
  torch::Tensor value;            // [N]
  torch::Tensor load_balance;     // scalar auxiliary loss
  torch::Tensor expert_fraction;  // [E]
};

class MoEMlpPolicyImpl : public torch::nn::Module {
 public:
  explicit MoEMlpPolicyImpl(const PolicyOptions& options);
  PolicyOutput forward(const torch::Tensor& obs);
  // Actor only (what explorers need): logits [N, A].
  torch::Tensor logits(const torch::Tensor& obs);
  const PolicyOptions& options() const { return options_; }

 private:
  torch::Tensor actor_trunk(const torch::Tensor& obs, MoEOutput* moe_out);
  PolicyOptions options_;
  torch::nn::Linear in_{nullptr}, pi_{nullptr};
  MoELayer moe_{nullptr};
  torch::nn::Sequential critic_{nullptr};
};
TORCH_MODULE(MoEMlpPolicy);

// A policy initialised from `seed` alone. LibTorch's initialisers draw
// from one process-wide generator, so construction is serialised: two
// threads building policies at once would otherwise interleave draws and
// the learner's initial weights would depend on timing (breaking exact
// replay). Every policy in RLX is built through this.
MoEMlpPolicy make_seeded_policy(const PolicyOptions& options, std::uint64_t seed);

}  // namespace rlx
