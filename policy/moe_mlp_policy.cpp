#include "policy/moe_mlp_policy.hpp"


namespace rlx {

MoEMlpPolicyImpl::MoEMlpPolicyImpl(const PolicyOptions& o) : options_(o) {
  in_ = register_module("actor_in", torch::nn::Linear(o.obs_dim, o.hidden));
  moe_ = register_module("actor_moe", MoELayer(MoEOptions{o.hidden, o.hidden, o.hidden, o.experts, o.top_k}));
  pi_ = register_module("actor_out", torch::nn::Linear(o.hidden, o.num_actions));
  critic_ = register_module("critic", torch::nn::Sequential(torch::nn::Linear(o.obs_dim, o.hidden), torch::nn::Tanh(),
                                                            torch::nn::Linear(o.hidden, o.hidden), torch::nn::Tanh(),
                                                            torch::nn::Linear(o.hidden, 1)));
  // Small final layer: a near-uniform initial policy explores evenly.
  torch::NoGradGuard guard;
  pi_->weight.mul_(0.01);
  pi_->bias.zero_();
}

torch::Tensor MoEMlpPolicyImpl::actor_trunk(const torch::Tensor& obs, MoEOutput* moe_out) {
  auto h = torch::tanh(in_->forward(obs));
  auto m = moe_->forward(h);
  auto out = torch::tanh(h + m.y);
  if (moe_out) *moe_out = std::move(m);
  return out;
}

PolicyOutput MoEMlpPolicyImpl::forward(const torch::Tensor& obs) {
  MoEOutput m;
  auto h = actor_trunk(obs, &m);
  PolicyOutput out;
  out.logits = pi_->forward(h);
  out.value = critic_->forward(obs).squeeze(-1);
  out.load_balance = m.load_balance;
  out.expert_fraction = m.expert_fraction;
  return out;
}

torch::Tensor MoEMlpPolicyImpl::logits(const torch::Tensor& obs) { return pi_->forward(actor_trunk(obs, nullptr)); }


MoEMlpPolicy make_seeded_policy(const PolicyOptions& options, std::uint64_t seed) {
  auto lock = seeded_init(seed);
  return MoEMlpPolicy(options);
}

}  // namespace rlx
