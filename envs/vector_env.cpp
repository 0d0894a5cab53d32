#include "envs/vector_env.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace rlx {

VectorEnv::VectorEnv(const EnvFactory& factory, std::uint64_t seed, std::uint64_t first_env_id, int num_envs) {
  RLX_REQUIRE(num_envs > 0, num_envs);
  for (int i = 0; i < num_envs; ++i) envs_.push_back(factory(seed, first_env_id + i));
}

void VectorEnv::prepare(EnvStepResultData& out) const {
  const auto B = envs_.size();
  out.obs_dim = static_cast<std::uint32_t>(spec().obs_dim);
  out.observations.resize(B * out.obs_dim);
  out.rewards.assign(B, 0.0f);
  out.terminated.assign(B, 0);
  out.truncated.assign(B, 0);
  out.lost.assign(B, 0);
  out.final_observations.clear();
}

void VectorEnv::reset(EnvStepResultData& out) {
  prepare(out);
  for (std::size_t i = 0; i < envs_.size(); ++i) envs_[i]->reset(out.observations.data() + i * out.obs_dim);
  out.step_index = 0;
}

void VectorEnv::step(const std::vector<std::int64_t>& actions, EnvStepResultData& out) {
  RLX_REQUIRE(actions.size() == envs_.size(), actions.size(), envs_.size());
  prepare(out);
  const auto n_actions = spec().num_actions;
  for (std::size_t i = 0; i < envs_.size(); ++i) {
    float* obs = out.observations.data() + i * out.obs_dim;
    RLX_REQUIRE(actions[i] >= 0 && actions[i] < n_actions, i, actions[i]);
    StepOutcome o = envs_[i]->step(actions[i], obs);
    out.rewards[i] = o.reward;
    out.terminated[i] = o.terminated;
    out.truncated[i] = o.truncated;
    if (o.truncated && !o.terminated) {  // the state it was cut in: the value bootstrap's
      out.final_observations.resize(out.observations.size());
      std::copy(obs, obs + out.obs_dim, out.final_observations.data() + i * out.obs_dim);
    }
    if (o.terminated || o.truncated) envs_[i]->reset(obs);
  }
}

}  // namespace rlx
