// The explorer actor: wires its compute (explorers/explorer_work.hpp) and
// its decisions (explorers/explorer_loop.hpp) to its env actor, the
// learner, the weight store, the reward pool and the coordinator; it holds
// no decision of its own. Flow control: at most
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
#include "messages/codec.hpp"
#include "core/logging.hpp"
#include "envs/batch_env.hpp"
#include "explorers/explorer_loop.hpp"
#include "explorers/explorer_work.hpp"

namespace rlx {

struct ExplorerActorOptions {
  ExplorerWorkOptions work;               // its compute: the rollout, or the token policy's; local envs; seeds
  ExplorerLoopOptions loop;               // its decisions (loop.reward_workers is set from `rewards`)
  std::chrono::milliseconds request_timeout{30000};
  std::string node = "local";
  env_actor env;                          // its environments, when they live in an env actor
  learner_actor learner;
  weight_store_actor weight_store;
  coordinator_actor coordinator;
  // Deferred rewards: the node's reward workers, asked in turn; a failure
  // of the machinery (no answer within reward_timeout, a dead worker, a
  // sandbox that failed) is asked of the next one, loop.reward_retries
  // more times, then the episode is masked out (never scored 0).
  std::vector<reward_actor> rewards;
  std::chrono::milliseconds reward_timeout{30000};
  DecodeOptions weights{};                // a weight set's limits ([weight_store] max_set_mb)
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
explorer_actor spawn_explorer(caf::actor_system& system, ExplorerActorOptions options);

}  // namespace rlx
