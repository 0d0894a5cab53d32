// A member node: one process of a multi-node cluster that is not the
// head (`rlx node --node NAME`). Its agent reaches the head's gate, proves
// the cluster secret, and then runs the node's share of the topology: its
// own weight store fed by a weight relay (weights cross once per node, in
// checked chunks), and its explorers (with their env actors) and reward
// workers, which send segments straight to the learner. The node exits
// when the head tells it to stop, when the head goes away, or, after a
// drain, on SIGINT/SIGTERM.
#pragma once

#include <functional>
#include <string>

#include "actors/coordinator.hpp"

namespace rlx {

struct MemberNodeOptions {
  std::string node;                    // its [[node]] name
  std::string head_host;
  std::uint16_t head_port = 0;
  std::string secret;                  // the cluster secret
  // Called once the node runs, with a function that drains it (for signals).
  std::function<void(std::function<void()> drain)> on_start;
};

struct MemberNodeResult {
  RunOutcome outcome = RunOutcome::failed;  // solved: stopped by the head; interrupted: drained here
  std::string summary;
};

MemberNodeResult run_member_node(const ClusterConfig& config, const EnvRegistry& envs, const MemberNodeOptions& options,
                                 const Logger& log);

}  // namespace rlx
