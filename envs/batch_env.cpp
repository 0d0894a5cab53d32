#include "envs/batch_env.hpp"

#include "envs/external/external_env.hpp"
#include "envs/tokens/token_env.hpp"
#include "envs/vector_env.hpp"

namespace rlx {

BatchEnvFactory make_batch_env_factory(const std::string& env, const ExternalEnvConfig& external,
                                       const EnvRegistry& registry, const Logger& log) {
  if (!token_env_kind(env).empty())
    return [env](std::uint64_t, std::uint64_t, int) { return make_token_spec_env(env); };
  auto argv = exec_argv(env);
  if (!argv.empty()) argv.insert(argv.end(), external.args.begin(), external.args.end());
  if (argv.empty()) {
    const EnvFactory* f = registry.find(env);
    RLX_REQUIRE(f != nullptr, env);
    EnvFactory factory = *f;
    return [factory](std::uint64_t seed, std::uint64_t first, int n) {
      return std::make_unique<VectorEnv>(factory, seed, first, n);
    };
  }
  return [argv, external, log, env](std::uint64_t seed, std::uint64_t first, int n) -> std::unique_ptr<BatchEnv> {
    ExternalEnvOptions o;
    o.argv = argv;
    o.cwd = external.cwd;
    o.env = external.env;
    o.protocol = external.protocol;
    o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(external.timeout_s * 1000.0));
    o.max_restarts = static_cast<int>(external.max_restarts);
    o.name = "env process '" + env.substr(5) + "' (envs " + std::to_string(first) + ".." +
             std::to_string(first + static_cast<std::uint64_t>(n) - 1) + ")";
    o.log = log;
    return std::make_unique<ExternalEnv>(std::move(o), seed, first, n);
  };
}

}  // namespace rlx
