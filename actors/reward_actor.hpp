// A reward worker: scores deferred rewards (RewardRequest -> RewardResult)
// with a Scorer from envs/. A pool is a set of these; explorers route
// finished episodes of envs with deferred rewards to it.
#pragma once

#include "actors/interfaces.hpp"
#include "core/logging.hpp"
#include "envs/scorer.hpp"

namespace rlx {

struct RewardActorOptions {
  std::shared_ptr<const Scorer> scorer;
  std::string name = "reward/0";
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
reward_actor spawn_reward(caf::actor_system& system, RewardActorOptions options);

}  // namespace rlx
