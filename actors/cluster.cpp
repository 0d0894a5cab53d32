#include "actors/cluster.hpp"

#include <thread>

#include <caf/all.hpp>

#include "policy/threads.hpp"

namespace rlx {

std::size_t scheduler_threads(const ClusterConfig& config) {
  // One per core: the learner trains on one while explorers and envs share
  // the rest; more threads than cores only adds context switches.
  return std::max<std::size_t>(2, std::thread::hardware_concurrency());
}

RunResult run_cluster(const ClusterConfig& config, const EnvRegistry& envs, const RunHooks& hooks, const Logger& log) {
  configure_compute_threads(static_cast<int>(config.learner.threads));
  caf::actor_system_config cfg;
  register_wire_types(cfg);
  cfg.set("scheduler.max-threads", scheduler_threads(config));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{cfg};
  RunResult result;
  {
    caf::scoped_actor self{system};
    CoordinatorOptions co;
    co.config = config;
    co.envs = &envs;
    co.on_status = hooks.on_status;
    co.launcher = caf::actor{self};
    co.log = child_logger(log, "coordinator");
    auto coordinator = spawn_coordinator(system, co);
    if (hooks.on_start)
      hooks.on_start([coordinator](const std::string& why) { caf::anon_send(coordinator, stop_atom::value, why); });
    self->receive([&](done_atom, int outcome, const std::string& summary) {
      result.outcome = static_cast<RunOutcome>(outcome);
      result.summary = summary;
    });
    if (hooks.on_start) hooks.on_start(nullptr);
  }
  system.await_all_actors_done();
  return result;
}

}  // namespace rlx
