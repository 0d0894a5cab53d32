// B environments behind one interface: stepped together, each resetting
// itself when its episode ends. Implemented in-process by VectorEnv and
// by ExternalEnv (a child process speaking docs/external-envs.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "envs/env.hpp"
#include "messages/types.hpp"

namespace rlx {

// An environment failed beyond repair (e.g. an external process exceeded
// its restart budget). The owner stops using it.
class EnvFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class BatchEnv {
 public:
  virtual ~BatchEnv() = default;
  virtual const EnvSpec& spec() const = 0;
  virtual int size() const = 0;
  // Resets every env; fills `out` (zero rewards, no done flags).
  virtual void reset(EnvStepResultData& out) = 0;
  // REQUIRES: actions.size() == size(). Fills `out`; out.lost marks envs
  // whose episode was cut by a failure of the environment itself.
  virtual void step(const std::vector<std::int64_t>& actions, EnvStepResultData& out) = 0;
};

// Makes the `num_envs` environments first_env_id.. of a run seeded `seed`.
using BatchEnvFactory =
    std::function<std::unique_ptr<BatchEnv>(std::uint64_t seed, std::uint64_t first_env_id, int num_envs)>;

}  // namespace rlx

#include "core/config.hpp"
#include "core/logging.hpp"

namespace rlx {

class EnvRegistry;

// Resolves a run's env name: a registry name (an in-process VectorEnv) or
// "exec:COMMAND ARGS..." (an ExternalEnv per batch, run as `external`
// says). REQUIRES: the name was validated by parse_config.
BatchEnvFactory make_batch_env_factory(const std::string& env, const ExternalEnvConfig& external,
                                       const EnvRegistry& registry, const Logger& log);

}  // namespace rlx
