// The explorer actor: wires a Rollout (explorers/) to its env actor, the
// learner, the weight store and the coordinator. Flow control: at most
// `credits` segments unacknowledged by the learner; pacing: a new segment
// starts only while the explorer's version is within max_staleness of the
// newest version it has heard of (in sync mode: only after a new version).
// Environments are either an env actor (request/response per step, for
// heavy or remote envs) or a local VectorEnv stepped in the explorer's
// own thread; either way every step is one message, so weight swaps and
// drains interleave between any two steps. Episodes whose reward is
// deferred (the env gives a payload when they end) are scored by the
// reward pool; their segments wait until the scores are in
// (explorers/deferred_rewards.hpp).
#pragma once

#include <chrono>
#include <optional>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"
#include "envs/batch_env.hpp"
#include "explorers/rollout.hpp"
#include "explorers/token_rollout.hpp"

namespace rlx {

struct ExplorerActorOptions {
  RolloutOptions rollout;
  // Set for the token policy: the explorer decodes its own tasks (no env;
  // `rollout` then gives only its id and the rows' count).
  std::optional<TokenRolloutOptions> tokens;
  std::uint64_t env_seed = 1;             // base seed of the environments
  std::uint64_t first_env_id = 0;         // id of its first env (env i is seeded env_seed + first_env_id + i)
  std::uint64_t max_staleness = 4;
  bool sync = false;                      // wait for a new version after every segment
  std::uint32_t credits = 2;              // segments in flight to the learner
  std::chrono::milliseconds request_timeout{30000};
  std::string node = "local";
  env_actor env;                          // its environments, when they live in an env actor
  BatchEnvFactory local_env;              // else: environments stepped inside the explorer
  learner_actor learner;
  weight_store_actor weight_store;
  coordinator_actor coordinator;
  // Deferred rewards: the node's reward workers, asked in turn; an answer
  // that does not come within reward_timeout (or a dead worker) is asked
  // of the next one, reward_attempts times in all, then scored 0.
  std::vector<reward_actor> rewards;
  std::chrono::milliseconds reward_timeout{30000};
  int reward_attempts = 3;
  std::size_t max_held = 4;               // segments held for rewards before the explorer pauses
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
explorer_actor spawn_explorer(caf::actor_system& system, ExplorerActorOptions options);

}  // namespace rlx
