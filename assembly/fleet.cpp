#include "assembly/fleet.hpp"

#include "actors/env_actor.hpp"
#include "assembly/component_options.hpp"
#include "actors/explorer_actor.hpp"
#include "actors/reward_actor.hpp"
#include "envs/tokens/token_env.hpp"

namespace rlx {

std::vector<explorer_actor> spawn_explorers(caf::actor_system& system, const ClusterConfig& cfg,
                                            const ExplorerBatch& batch, const BatchEnvFactory& factory,
                                            const EnvSpec& spec, const FleetTargets& targets, const Logger& log) {
  std::vector<explorer_actor> out;
  std::uint64_t next_env_id = batch.first_env_id;
  for (std::uint32_t i = 0; i < batch.count; ++i) {
    const std::uint32_t explorer_id = batch.first_id + i;
    const std::uint64_t first_env = next_env_id;
    next_env_id += batch.envs_per_explorer;
    ExplorerActorOptions eo;
    env_actor env;
    if (cfg.token_run()) {
      eo.work.tokens = token_rollout_options(cfg, explorer_id, batch.envs_per_explorer);  // it decodes its own tasks
      eo.work.tokens->gateway = targets.gateway;
    } else if (cfg.explorer.env_placement == EnvPlacement::actor) {
      std::string env_name = "env/" + std::to_string(explorer_id);
      env = spawn_env(system, EnvActorOptions{factory, first_env, env_name, child_logger(log, env_name)});
    } else {
      eo.work.local_env = factory;
    }
    eo.work.rollout = rollout_options(cfg, spec, explorer_id, batch.envs_per_explorer);
    eo.work.env_seed = cfg.run.seed;
    eo.work.first_env_id = first_env;
    eo.loop.max_staleness = static_cast<std::uint64_t>(cfg.run.max_staleness);
    eo.loop.sync = cfg.run.mode == RunMode::sync;
    eo.loop.reward_retries = static_cast<int>(cfg.reward.retries);
    eo.node = batch.node;
    eo.env = env;
    eo.learner = targets.learner;
    eo.weight_store = targets.weight_store;
    eo.coordinator = targets.coordinator;
    eo.rewards = targets.rewards;
    eo.reward_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(cfg.explorer.reward_timeout_s * 1000.0));
    eo.weights = weight_set_decoding(cfg.weight_store.max_set_bytes());
    eo.log = child_logger(log, "explorer/" + std::to_string(explorer_id));
    auto ex = spawn_explorer(system, eo);
    // An env actor lives and dies with its explorer.
    if (env) ex->attach_functor([env](const caf::error&) { caf::anon_send_exit(env, caf::exit_reason::user_shutdown); });
    out.push_back(ex);
  }
  return out;
}

std::vector<reward_actor> spawn_rewards(caf::actor_system& system, const std::shared_ptr<const Scorer>& scorer,
                                        std::uint32_t first_id, std::uint32_t count, const Logger& log) {
  std::vector<reward_actor> out;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string name = "reward/" + std::to_string(first_id + i);
    out.push_back(spawn_reward(system, RewardActorOptions{scorer, name, child_logger(log, name)}));
  }
  return out;
}

Fleet spawn_fleet(caf::actor_system& system, const ClusterConfig& cfg, const NodeConfig& node,
                  const BatchEnvFactory& factory, const EnvSpec& spec, const FleetTargets& targets,
                  const std::shared_ptr<const Scorer>& scorer, const Logger& log) {
  auto [explorer_id, env_id] = cfg.first_ids(node.name);
  Fleet fleet;
  fleet.rewards =
      spawn_rewards(system, scorer, cfg.first_reward_id(node.name), static_cast<std::uint32_t>(node.rewards), log);
  FleetTargets with_pool = targets;
  with_pool.rewards = fleet.rewards;
  fleet.explorers = spawn_explorers(system, cfg,
                                    ExplorerBatch{node.name, explorer_id, env_id, static_cast<std::uint32_t>(node.explorers),
                                                  static_cast<std::uint32_t>(node.envs_per_explorer)},
                                    factory, spec, with_pool, log);
  return fleet;
}

}  // namespace rlx
