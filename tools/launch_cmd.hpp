// The run commands: `rlx launch` (a whole topology: one process, or the
// head here and every member node started by tools/node_launcher) and
// `rlx node` (one node of it; what launch starts on each host).
#pragma once

#include <string>

namespace rlx {

struct LaunchArgs {
  std::string config;       // empty: the embedded cluster.toml
  std::string log_level;
  std::string secret_file;  // the cluster secret (else RLX_CLUSTER_SECRET[_FILE], else a fresh one for local nodes)
  bool resume = false;
};

struct NodeArgs {
  std::string config;
  std::string node;
  std::string head;         // HOST:PORT of the head's gate (default: the head's host and port in the TOML)
  std::string secret_file;
  std::string log_level;
  bool resume = false;      // head only
};

// Exit codes: RunOutcome (0 solved, 3 budget, 2 bad input, 4 failed, 130 interrupted).
int launch_command(const LaunchArgs& args);
int node_command(const NodeArgs& args);

}  // namespace rlx
