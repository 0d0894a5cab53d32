// B environments stepped together, resetting each one when its episode
// ends (the returned observation is then the new episode's first).
#pragma once

#include <memory>
#include <vector>

#include "envs/env.hpp"
#include "messages/types.hpp"

namespace rlx {

class VectorEnv {
 public:
  // Makes envs first_env_id .. first_env_id + num_envs - 1 with `factory`.
  VectorEnv(const EnvFactory& factory, std::uint64_t seed, std::uint64_t first_env_id, int num_envs);

  const EnvSpec& spec() const { return envs_.front()->spec(); }
  int size() const { return static_cast<int>(envs_.size()); }

  // Resets every env; fills `out` (zero rewards, no done flags).
  void reset(EnvStepResultData& out);
  // REQUIRES: actions.size() == size(). Fills `out`.
  void step(const std::vector<std::int64_t>& actions, EnvStepResultData& out);

 private:
  void prepare(EnvStepResultData& out) const;
  std::vector<std::unique_ptr<Env>> envs_;
};

}  // namespace rlx
