// Runs a topology's head in this process: the rollout log opened (or
// resumed: the learner rebuilt by replaying it), an actor system, the
// coordinator (which spawns every other actor of this process), with
// `serve` the gate for member nodes, and a wait for the end. `rlx launch`,
// `rlx node` (the head) and the end-to-end tests call this.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <string>

#include "control/coordinator.hpp"
#include "learner/learner_ranks.hpp"

namespace rlx {

struct RunResult {
  RunOutcome outcome = RunOutcome::failed;
  std::string summary;
  // Actors still running RunOptions::shutdown_bound after the run ended
  // (a handler stuck in a call that never returns): the run counts as
  // failed and its actor system is handed back, not destroyed (that would
  // wait for them): the launcher ends the process past it (std::_Exit);
  // whoever destroys it waits for those actors.
  std::size_t actors_left = 0;
  std::shared_ptr<void> left_behind;
};

struct RunHooks {
  std::function<void(const Status&)> on_status;   // progress (coordinator's thread)
  // Called once the run started, with a function that drains and stops
  // it as interrupted (any thread may call it; `rlx launch` does on
  // SIGINT/SIGTERM). May be null.
  std::function<void(std::function<void(const std::string&)> stop)> on_start;
  // Multi-node head: called once the gate listens, with its port (start
  // the member nodes here); a non-empty return is an error that ends the
  // run as failed. May be null.
  std::function<std::string(std::uint16_t port)> on_listening;
  // Multi-node head: called with the bulk channel's port once it listens. May be null.
  std::function<void(std::uint16_t port)> on_bulk_listening;
};

struct RunOptions {
  // Continue the run recorded in log_dir: the learner is rebuilt by an
  // exact replay of the rollout log, and the log goes on from its end.
  bool resume = false;
  // Resume even when the replayed learner differs from the log (a changed
  // seed, config or thread count): said loudly. Without it such a resume
  // is refused (exit 2), naming the first version that differs.
  bool resume_diverged = false;
  // Fault injection, for tests: the rollout log's writes fail once they
  // pass this many bytes (LogWriterOptions::fail_after_bytes).
  std::uint64_t log_fail_after_bytes = UINT64_MAX;
  // How long every actor has to exit once the run ended.
  std::chrono::milliseconds shutdown_bound{60'000};
  // A coordinator that has not ticked for this long (or 10 report
  // intervals, if longer) is stuck in a handler: the run ends as failed.
  std::chrono::milliseconds coordinator_bound{60'000};
  // Fault injection, for tests: an actor whose first message blocks until
  // this future is ready (it does not exit when told).
  std::shared_future<void> stuck_actor;
  // Fault injection, for tests: the learner drops the n-th segment
  // messages that reach it (from 1) unseen, as if lost on the wire.
  std::set<std::uint64_t> drop_segments;
  // The rlx executable, for learner rank processes ([learner] ranks > 1);
  // empty: this process's own executable.
  std::string binary;
  // Starts a learner rank on a node of its own host ([[node]] learner_ranks
  // with launcher = "ssh"; rlx launch sets it): learner/learner_ranks.hpp.
  RemoteStarter start_remote_rank;
  // Multi-node head: spawn only the head node's fleet and publish the gate
  // on the head's host and port, for member nodes that prove `secret`.
  bool serve = false;
  std::string secret;
};

// Runs `config` to its stop condition. `envs` names the environments.
RunResult run_cluster(const ClusterConfig& config, const EnvRegistry& envs, const RunHooks& hooks, const Logger& log,
                      const RunOptions& options = {});

// Threads of the CAF scheduler for a topology on this machine.
std::size_t scheduler_threads(const ClusterConfig& config);

}  // namespace rlx
