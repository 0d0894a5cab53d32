// The run commands: `rlx launch` (a whole topology: one process, or the
// head here and every member node started by tools/node_launcher) and
// `rlx node` (one node of it; what launch starts on each host).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "envs/env.hpp"

namespace rlx {

struct LaunchArgs {
  std::string config;       // empty: the embedded cluster.toml
  std::string log_level;
  std::string secret_file;  // the cluster secret (else RLX_CLUSTER_SECRET[_FILE], else a fresh one for local nodes)
  bool resume = false;
  bool resume_diverged = false;  // with --resume: even when the replay differs from the log
  bool page = false;             // serve the live page ([metrics] page = true)
  std::vector<std::string> overrides;  // --set KEY=VALUE, over the topology's values
};

struct NodeArgs {
  std::string config;       // with --join: only its connection settings ([tls], [launch]) are used
  std::string node;
  std::string head;         // HOST:PORT of the head's gate (default: the head's host and port in the TOML)
  // A node the topology does not name joins the head at this HOST:PORT,
  // under `name`, asking for this shape.
  std::string join;
  std::string name;         // default: <hostname>-<pid>
  std::uint32_t explorers = 1;
  std::uint32_t envs_per_explorer = 16;
  std::uint32_t rewards = 0;
  std::string secret_file;
  std::string log_level;
  bool resume = false;      // head only
  bool resume_diverged = false;
};

// The topology at `path` (empty: the embedded cluster.toml) with
// `overrides` (--set KEY=VALUE) and its paths made absolute, or a message on
// stderr and nullopt.
std::optional<ClusterConfig> config_or_report(const std::string& path, const EnvRegistry& envs,
                                              const std::vector<std::string>& overrides = {});

// The same, and every file the topology reads is there (log_dir can be
// made): what a command that runs the topology starts from.
std::optional<ClusterConfig> runnable_config_or_report(const std::string& path, const EnvRegistry& envs,
                                                       const std::vector<std::string>& overrides = {});

// Exit codes: RunOutcome (0 solved, 3 budget, 2 bad input, 4 failed, 130 interrupted).
int launch_command(const LaunchArgs& args);
int node_command(const NodeArgs& args);

}  // namespace rlx
