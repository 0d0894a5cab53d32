#include "assembly/component_options.hpp"

#include "envs/scorer.hpp"
#include "envs/tokens/token_env.hpp"

namespace rlx {

LearnerCoreOptions learner_core_options(const ClusterConfig& cfg, const EnvSpec& spec) {
  LearnerCoreOptions o;
  o.trainer = TrainerOptions{cfg.learner, cfg.policy, spec.obs_dim, spec.num_actions, cfg.run.seed};
  o.trainer.tokens = cfg.tokens;
  o.trainer.max_staleness = cfg.run.max_staleness;
  o.max_staleness = cfg.run.max_staleness;
  o.batch_segments = static_cast<std::size_t>(cfg.learner.batch_segments);
  o.publish_every = static_cast<std::uint64_t>(cfg.learner.publish_every);
  return o;
}

RolloutOptions rollout_options(const ClusterConfig& cfg, const EnvSpec& spec, std::uint32_t explorer_id,
                               std::int64_t num_envs) {
  return RolloutOptions{explorer_id, num_envs, spec.obs_dim, spec.num_actions, cfg.explorer.segment_steps,
                        cfg.run.seed, cfg.policy};
}

TokenRolloutOptions token_rollout_options(const ClusterConfig& cfg, std::uint32_t explorer_id, std::int64_t rows) {
  // Arithmetic answers are scored in the explorer, programs by the reward pool (sandbox).
  TokenRolloutOptions to;
  to.explorer_id = explorer_id;
  to.kind = token_env_kind(cfg.run.env);
  to.rows = rows;
  to.policy = cfg.policy;
  to.tokens = cfg.tokens;
  to.seed = cfg.run.seed;
  to.reward_retries = static_cast<int>(cfg.reward.retries);
  if (to.kind == "arithmetic") to.in_process = std::make_shared<ArithmeticScorer>();
  return to;
}

}  // namespace rlx
