#include "explorers/evaluate.hpp"

#include <algorithm>
#include <random>

#include "policy/moe_mlp_policy.hpp"
#include "policy/sampling.hpp"
#include "policy/weights_io.hpp"

namespace rlx {

Result<Evaluation> evaluate(const WeightSetData& weights, const BatchEnvFactory& envs, const EvaluateOptions& o) {
  RLX_REQUIRE(o.episodes > 0, o.episodes);
  auto policy = make_seeded_policy(
      PolicyOptions{o.obs_dim, o.num_actions, o.policy.hidden, o.policy.experts, o.policy.top_k}, o.seed);
  auto loaded = view_weights(*policy, weights);
  if (!loaded) return loaded.error();
  policy->eval();
  auto env = envs(o.seed, 0, o.episodes);
  const int B = env->size();
  std::mt19937_64 rng(o.seed);
  EnvStepResultData r;
  env->reset(r);
  std::vector<double> ret(B, 0.0);
  std::vector<bool> done(B, false);
  int finished = 0;
  for (std::uint64_t t = 0; t < o.max_steps && finished < B; ++t) {
    torch::Tensor logits;
    {
      c10::InferenceMode guard;
      auto obs = torch::from_blob(r.observations.data(), {B, o.obs_dim}, torch::kFloat32);
      logits = policy->logits(obs);
    }
    auto actions = sample_categorical(logits, rng, o.greedy).actions;
    env->step(actions, r);
    for (int i = 0; i < B; ++i) {
      if (done[i]) continue;
      ret[i] += r.rewards[i];
      if (r.terminated[i] || r.truncated[i] || (!r.lost.empty() && r.lost[i])) {
        done[i] = true;
        ++finished;
      }
    }
  }
  Evaluation e;
  e.episodes = B;
  double sum = 0;
  for (double x : ret) sum += x;
  e.mean_return = sum / B;
  e.min_return = *std::min_element(ret.begin(), ret.end());
  e.max_return = *std::max_element(ret.begin(), ret.end());
  return e;
}

}  // namespace rlx
