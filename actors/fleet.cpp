#include "actors/fleet.hpp"

#include "actors/env_actor.hpp"
#include "actors/explorer_actor.hpp"
#include "actors/reward_actor.hpp"

namespace rlx {

Fleet spawn_fleet(caf::actor_system& system, const ClusterConfig& cfg, const NodeConfig& node,
                  const BatchEnvFactory& factory, const EnvSpec& spec, const FleetTargets& targets, const Logger& log) {
  Fleet fleet;
  auto [explorer_id, next_env_id] = cfg.first_ids(node.name);
  std::uint32_t reward_id = 0;
  for (const auto& n : cfg.nodes) {
    if (n.name == node.name) break;
    reward_id += static_cast<std::uint32_t>(n.rewards);
  }
  auto scorer = std::make_shared<const ArithmeticScorer>();
  for (std::int64_t i = 0; i < node.rewards; ++i) {
    std::string name = "reward/" + std::to_string(reward_id++);
    fleet.rewards.push_back(spawn_reward(system, RewardActorOptions{scorer, name, child_logger(log, name)}));
  }
  for (std::int64_t i = 0; i < node.explorers; ++i, ++explorer_id) {
    const std::uint64_t first_env = next_env_id;
    next_env_id += static_cast<std::uint64_t>(node.envs_per_explorer);
    ExplorerActorOptions eo;
    env_actor env;
    if (cfg.explorer.env_placement == "actor") {
      std::string env_name = "env/" + std::to_string(explorer_id);
      env = spawn_env(system, EnvActorOptions{factory, first_env, env_name, child_logger(log, env_name)});
    } else {
      eo.local_env = factory;
    }
    eo.rollout = RolloutOptions{explorer_id, node.envs_per_explorer, spec.obs_dim, spec.num_actions,
                                cfg.explorer.segment_steps, cfg.run.seed, cfg.policy};
    eo.env_seed = cfg.run.seed;
    eo.first_env_id = first_env;
    eo.max_staleness = cfg.run.max_staleness;
    eo.sync = cfg.run.mode == "sync";
    eo.node = node.name;
    eo.env = env;
    eo.learner = targets.learner;
    eo.weight_store = targets.weight_store;
    eo.coordinator = targets.coordinator;
    eo.log = child_logger(log, "explorer/" + std::to_string(explorer_id));
    auto ex = spawn_explorer(system, eo);
    // An env actor lives and dies with its explorer.
    if (env) ex->attach_functor([env](const caf::error&) { caf::anon_send_exit(env, caf::exit_reason::user_shutdown); });
    fleet.explorers.push_back(ex);
  }
  return fleet;
}

}  // namespace rlx
