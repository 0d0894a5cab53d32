// The rollout actors of one node: its explorers (each with its env actor,
// or its envs inside) and reward workers. The coordinator allots their
// ids: a topology node's first fleet takes the topology's numbering
// (ClusterConfig::first_ids), everything started later (a scale-up, a
// node that joined, a node that came back) takes ids after every id used
// so far. The coordinator spawns the fleets of its own process; a member
// node's agent spawns what the coordinator orders.
#pragma once

#include <vector>

#include "actors/interfaces.hpp"
#include "core/config.hpp"
#include "core/logging.hpp"
#include "envs/batch_env.hpp"
#include "envs/scorer.hpp"
#include "gateway/gateway_hub.hpp"

namespace rlx {

struct FleetTargets {
  learner_actor learner;
  weight_store_actor weight_store;  // the store explorers fetch from (a member node's own)
  coordinator_actor coordinator;
  std::vector<reward_actor> rewards;  // the node's reward workers (deferred rewards)
  std::shared_ptr<GatewayHub> gateway;  // tokens:gateway: the node's hub its explorers serve
};

// `count` explorers with ids first_id.., envs first_env_id.. (envs_per_explorer each).
struct ExplorerBatch {
  std::string node;
  std::uint32_t first_id = 0;
  std::uint64_t first_env_id = 0;
  std::uint32_t count = 0;
  std::uint32_t envs_per_explorer = 16;
};

struct Fleet {
  std::vector<explorer_actor> explorers;
  std::vector<reward_actor> rewards;
};

// The explorers of `batch`, spawned in `system`.
std::vector<explorer_actor> spawn_explorers(caf::actor_system& system, const ClusterConfig& config,
                                            const ExplorerBatch& batch, const BatchEnvFactory& factory,
                                            const EnvSpec& spec, const FleetTargets& targets, const Logger& log);

// `count` reward workers named reward/<first_id>..., scoring with `scorer`.
std::vector<reward_actor> spawn_rewards(caf::actor_system& system, const std::shared_ptr<const Scorer>& scorer,
                                        std::uint32_t first_id, std::uint32_t count, const Logger& log);

// The first fleet of topology node `node`: its explorers and reward workers with the topology's ids.
Fleet spawn_fleet(caf::actor_system& system, const ClusterConfig& config, const NodeConfig& node,
                  const BatchEnvFactory& factory, const EnvSpec& spec, const FleetTargets& targets,
                  const std::shared_ptr<const Scorer>& scorer, const Logger& log);

}  // namespace rlx
