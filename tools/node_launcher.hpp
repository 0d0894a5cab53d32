// Starts the member nodes of a multi-node topology for `rlx launch`: a
// local process for launcher = "local", the [launch] ssh_command template
// for "ssh", an sbatch script for "slurm". Prints every command it runs.
// Local children die with launch and leave Ctrl-C to it; remote nodes exit
// when the head stops or goes away.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "core/config.hpp"
#include "core/logging.hpp"

namespace rlx {

struct NodeLaunchOptions {
  std::string config_path;     // absolute path of the topology (must exist on every node's host)
  std::string head;            // HOST:PORT of the head's gate
  std::string binary;          // rlx on this machine (for local nodes)
  std::string secret;          // passed to local nodes in their environment
  std::string secret_file;     // passed to ssh/slurm nodes as --secret-file (their environment is not ours)
  std::string log_level;       // passed on with --log-level when set
};

// Shell-quotes one word for /bin/sh.
std::string shell_quote(const std::string& word);

// The `rlx node` command line for `node`.
std::vector<std::string> node_command(const ClusterConfig& config, const NodeConfig& node,
                                      const NodeLaunchOptions& options, bool local);

// Runs `argv` (an rlx command; argv[0] becomes [launch] rlx_binary when
// set) on an ssh `node` through the ssh_command template: a learner rank
// placed there (learner/learner_ranks.hpp). The pid is the ssh client's.
Result<pid_t> start_on_node(const ClusterConfig& config, const NodeConfig& node, std::vector<std::string> argv,
                            const Logger& log);

// The sbatch script for a slurm node.
std::string slurm_script(const ClusterConfig& config, const NodeConfig& node, const NodeLaunchOptions& options);

class NodeLauncher {
 public:
  // Starts every node but the head. Fails (stopping what it started) when a
  // remote node has no way to get the secret or a process cannot start.
  static Result<std::unique_ptr<NodeLauncher>> start(const ClusterConfig& config, const NodeLaunchOptions& options,
                                                     const Logger& log);
  ~NodeLauncher();
  // Waits for the processes it started (local nodes, ssh clients, sbatch),
  // `grace` at most, then stops them. Returns how many did not end cleanly.
  int wait(std::chrono::milliseconds grace);

 private:
  NodeLauncher() = default;
  Logger log_;
  std::vector<pid_t> pids_;
  std::vector<std::string> names_;
};

}  // namespace rlx
