// The rollout actors of one node: its explorers (each with its env actor,
// or its envs inside) and reward workers, numbered across the topology
// (ClusterConfig::first_ids). The coordinator spawns the fleet of the
// nodes in its own process; a member node's agent spawns its own.
#pragma once

#include <vector>

#include "actors/interfaces.hpp"
#include "core/config.hpp"
#include "core/logging.hpp"
#include "envs/batch_env.hpp"

namespace rlx {

struct FleetTargets {
  learner_actor learner;
  weight_store_actor weight_store;  // the store explorers fetch from (a member node's own)
  coordinator_actor coordinator;
};

struct Fleet {
  std::vector<explorer_actor> explorers;
  std::vector<reward_actor> rewards;
};

// Spawns `node`'s explorers and reward workers in `system`.
Fleet spawn_fleet(caf::actor_system& system, const ClusterConfig& config, const NodeConfig& node,
                  const BatchEnvFactory& factory, const EnvSpec& spec, const FleetTargets& targets, const Logger& log);

}  // namespace rlx
