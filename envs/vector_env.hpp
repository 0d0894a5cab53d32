// B environments stepped together, resetting each one when its episode
// ends (the returned observation is then the new episode's first).
#pragma once

#include <memory>
#include <vector>

#include "envs/batch_env.hpp"

namespace rlx {

class VectorEnv : public BatchEnv {
 public:
  // Makes envs first_env_id .. first_env_id + num_envs - 1 with `factory`.
  VectorEnv(const EnvFactory& factory, std::uint64_t seed, std::uint64_t first_env_id, int num_envs);

  const EnvSpec& spec() const override { return envs_.front()->spec(); }
  int size() const override { return static_cast<int>(envs_.size()); }
  void reset(EnvStepResultData& out) override;
  void step(const std::vector<std::int64_t>& actions, EnvStepResultData& out) override;

 private:
  void prepare(EnvStepResultData& out) const;
  std::vector<std::unique_ptr<Env>> envs_;
};

}  // namespace rlx
