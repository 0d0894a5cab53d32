// The configuration turned into the options of the components it runs, in
// one place: what the learner core and trainer, an explorer's rollout and
// the token rollout get from a topology. The coordinator, a node's fleet,
// `rlx replay`, `rlx learner-rank` and the benches all call these. CAF-free.
// (The token trainer's own settings are derived from TrainerOptions in
// learner/token_policy_trainer.hpp, where the trainer factory needs them.)
#pragma once

#include <cstdint>

#include "core/config.hpp"
#include "envs/env.hpp"
#include "explorers/rollout.hpp"
#include "explorers/token_rollout.hpp"
#include "learner/learner_core.hpp"

namespace rlx {

// The learner's settings for a topology and its environment.
LearnerCoreOptions learner_core_options(const ClusterConfig& config, const EnvSpec& spec);

// Explorer `explorer_id`'s rollout over `num_envs` environments.
RolloutOptions rollout_options(const ClusterConfig& config, const EnvSpec& spec, std::uint32_t explorer_id,
                               std::int64_t num_envs);

// Explorer `explorer_id`'s token decoding of `rows` tasks at a time (a token run).
TokenRolloutOptions token_rollout_options(const ClusterConfig& config, std::uint32_t explorer_id, std::int64_t rows);

}  // namespace rlx
