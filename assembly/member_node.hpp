// A member node: one process of a multi-node cluster that is not the
// head (`rlx node --node NAME`, or `rlx node --join` for a node the
// topology does not name). Its agent reaches the head's gate, proves the
// cluster secret, asks for its shape (explorers, envs per explorer, reward
// workers), and receives the run's configuration from the head (so every
// node runs the same one). It then runs its own weight store fed by a
// weight relay (weights cross once per node, in checked chunks), and the
// explorers (with their env actors) and reward workers the coordinator
// orders, with the ids it allots; explorers send segments straight to the
// learner. The coordinator may order more later (`rlx scale`) or drain
// some. The node exits when the head tells it to stop, when the head goes
// away, or, after a drain, on SIGINT/SIGTERM.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "control/coordinator.hpp"

namespace rlx {

struct MemberNodeOptions {
  std::string node;                    // its [[node]] name, or a new name with `join`
  // A node the topology does not name: it asks for the shape below (a
  // topology node asks for its [[node]]'s).
  bool join = false;
  std::uint32_t explorers = 1;
  std::uint32_t envs_per_explorer = 16;
  std::uint32_t rewards = 0;
  std::string head_host;
  std::uint16_t head_port = 0;
  std::string secret;                  // the cluster secret
  // Called once the node runs, with a function that drains it (for signals).
  std::function<void(std::function<void()> drain)> on_start;
  // An agent that has not answered this process's ping for this long is
  // stuck in a handler: the node ends as failed.
  std::chrono::milliseconds agent_bound{60'000};
  // How long every actor has to exit once the agent ended.
  std::chrono::milliseconds shutdown_bound{60'000};
  // Fault injection, for tests: the agent blocks as it starts until this
  // future is ready (a handler that does not return).
  std::shared_future<void> stuck_agent;
};

struct MemberNodeResult {
  RunOutcome outcome = RunOutcome::failed;  // solved: stopped by the head; interrupted: drained here
  std::string summary;
  // Actors still running past the shutdown bound (the node has failed),
  // and their actor system, handed back instead of destroyed (destroying
  // it would wait for them): `rlx node` ends the process past them.
  std::size_t actors_left = 0;
  std::shared_ptr<void> left_behind;
};

MemberNodeResult run_member_node(const ClusterConfig& config, const EnvRegistry& envs, const MemberNodeOptions& options,
                                 const Logger& log);

}  // namespace rlx
