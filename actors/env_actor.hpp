// The env actor: owns a VectorEnv of B environments and answers reset and
// step requests (EnvReset / EnvStep -> EnvStepResult). Runs beside its
// explorer, or on another node for heavy sandboxes.
#pragma once

#include "actors/interfaces.hpp"
#include "core/logging.hpp"
#include "envs/batch_env.hpp"

namespace rlx {

struct EnvActorOptions {
  BatchEnvFactory factory;     // makes the B environments
  std::uint64_t first_env_id = 0;
  std::string name = "env/0";  // for logs and the Envelope sender
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
env_actor spawn_env(caf::actor_system& system, EnvActorOptions options);

}  // namespace rlx
