#include "tools/learner_rank.hpp"

#include <cstdio>

#include "assembly/component_options.hpp"
#include "envs/batch_env.hpp"
#include "learner/learner_core.hpp"
#include "learner/learner_group.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/threads.hpp"

namespace rlx {

int learner_rank_command(const LearnerRankArgs& a) {
  const std::string me = "rlx learner-rank " + std::to_string(a.rank) + "/" + std::to_string(a.world);
  EnvRegistry envs = builtin_envs();
  auto config = load_config(a.config, envs.names());
  if (!config) {
    std::fprintf(stderr, "%s: %s\n", me.c_str(), config.error().message.c_str());
    return 2;
  }
  const auto colon = a.store.rfind(':');
  int port = 0;
  try {
    port = colon == std::string::npos ? -1 : std::stoi(a.store.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port <= 0 || port > 65535 || a.rank < 1 || a.rank >= a.world) {
    std::fprintf(stderr, "%s: --store HOST:PORT and 1 <= --rank < --world are required\n", me.c_str());
    return 2;
  }
  if (auto d = check_device(config->learner.device); !d) {
    std::fprintf(stderr, "%s: %s\n", me.c_str(), d.error().message.c_str());
    return 2;
  }
  configure_compute_threads(static_cast<int>(config->learner.threads));
  EnvSpec spec;
  try {
    spec = make_batch_env_factory(config->run.env, config->external, envs, null_logger())(config->run.seed, 0, 1)->spec();
  } catch (const EnvFailure& e) {
    std::fprintf(stderr, "%s: cannot start the environment: %s\n", me.c_str(), e.what());
    return 2;
  }
  GroupOptions go{a.rank, a.world, a.store.substr(0, colon), static_cast<std::uint16_t>(port)};
  go.device = config->learner.device;
  go.collectives = config->learner.collectives;
  go.bind_host = a.host;
  auto group = LearnerGroup::join(go);
  if (!group) {
    std::fprintf(stderr, "%s: %s\n", me.c_str(), group.error().message.c_str());
    return 4;
  }
  auto options = learner_core_options(*config, spec);
  options.trainer.learner.device = device_for_rank(config->learner.device, a.rank);  // ranks spread over GPUs
  options.trainer.group = group->get();
  auto done = run_learner_rank(options.trainer, options.batch_segments);
  if (!done) {
    std::fprintf(stderr, "%s: %s\n", me.c_str(), done.error().message.c_str());
    return 4;
  }
  return 0;
}

}  // namespace rlx
