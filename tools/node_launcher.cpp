#include "tools/node_launcher.hpp"

#include <filesystem>
#include <fstream>

#include "core/child_process.hpp"
#include "core/files.hpp"

namespace rlx {

namespace fs = std::filesystem;

std::string shell_quote(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") ==
                        std::string::npos)
    return w;
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + shell_quote(w);
  return out;
}

std::string substitute(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at = 0; (at = text.find(key, at)) != std::string::npos; at += value.size())
    text.replace(at, key.size(), value);
  return text;
}

// The [launch] ssh_command line that runs `words` on `node`.
std::string ssh_line(const ClusterConfig& config, const NodeConfig& node, const std::vector<std::string>& words) {
  return substitute(substitute(substitute(config.launch.ssh_command, "{host}", shell_quote(node.host)), "{node}",
                               shell_quote(node.name)),
                    "{command}", shell_quote(joined(words)));
}

}  // namespace

Result<pid_t> start_on_node(const ClusterConfig& config, const NodeConfig& node, std::vector<std::string> argv,
                            const Logger& log) {
  if (node.launcher != Launcher::ssh)
    return make_error(Errc::config_range, "node '" + node.name + "': only ssh starts a learner rank on another host");
  if (!config.launch.rlx_binary.empty() && !argv.empty()) argv[0] = config.launch.rlx_binary;
  const std::string line = ssh_line(config, node, argv);
  log->info("starting on node '{}' (ssh): {}", node.name, line);
  return spawn_child({"/bin/sh", "-c", line});
}

std::vector<std::string> node_command(const ClusterConfig& config, const NodeConfig& node,
                                      const NodeLaunchOptions& o, bool local) {
  std::vector<std::string> cmd{local || config.launch.rlx_binary.empty() ? o.binary : config.launch.rlx_binary,
                               "node", "--config", o.config_path, "--node", node.name, "--head", o.head};
  if (!local && !o.secret_file.empty()) {
    cmd.push_back("--secret-file");
    cmd.push_back(o.secret_file);
  }
  if (!o.log_level.empty()) {
    cmd.push_back("--log-level");
    cmd.push_back(o.log_level);
  }
  return cmd;
}

std::string slurm_script(const ClusterConfig& config, const NodeConfig& node, const NodeLaunchOptions& o) {
  const fs::path dir = fs::absolute(fs::path(config.run.log_dir) / "launch");
  std::string s = "#!/bin/bash\n# Written by rlx launch: member node '" + node.name + "' of run '" + config.run.name +
                  "'.\n";
  s += "#SBATCH --job-name=" + shell_quote("rlx-" + config.run.name + "-" + node.name) + "\n";
  s += "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n";
  s += "#SBATCH --nodelist=" + shell_quote(node.host) + "\n";
  s += "#SBATCH --output=" + shell_quote((dir / (node.name + ".%j.out")).string()) + "\n";
  for (const auto& opt : config.launch.slurm_options) s += "#SBATCH " + opt + "\n";
  s += "exec srun --nodes=1 --ntasks=1 " + joined(node_command(config, node, o, false)) + "\n";
  return s;
}

Result<std::unique_ptr<NodeLauncher>> NodeLauncher::start(const ClusterConfig& config, const NodeLaunchOptions& o,
                                                          const Logger& log) {
  std::unique_ptr<NodeLauncher> l(new NodeLauncher());
  l->log_ = log;
  const std::string head = config.head().name;
  for (const auto& node : config.nodes) {
    if (node.name == head) continue;
    std::vector<std::string> argv;
    ChildOptions co;
    if (node.launcher == Launcher::local) {
      argv = node_command(config, node, o, true);
      co.env.push_back("RLX_CLUSTER_SECRET=" + o.secret);
      log->info("starting node '{}': {}", node.name, joined(argv));
    } else {
      if (node.launcher == Launcher::ssh && o.secret_file.empty())
        return make_error(Errc::config_missing,
                          "node '" + node.name + "' is started over ssh: give the cluster secret as a file that "
                              "exists on its host (RLX_CLUSTER_SECRET_FILE or --secret-file), not only in the "
                              "environment");
      std::string line;
      if (node.launcher == Launcher::ssh) {
        line = ssh_line(config, node, node_command(config, node, o, false));
      } else {
        const fs::path script = fs::absolute(fs::path(config.run.log_dir) / "launch" / (node.name + ".sbatch"));
        std::error_code ec;
        fs::create_directories(script.parent_path(), ec);
        const std::string text = slurm_script(config, node, o);
        auto w = write_file_atomically(script, std::span<const std::uint8_t>(
                                                   reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
        if (!w) return w.error();
        line = config.launch.slurm_submit + " " + shell_quote(script.string());
      }
      argv = {"/bin/sh", "-c", line};
      // Slurm passes our environment on to the job (sbatch --export=ALL).
      if (node.launcher == Launcher::slurm && o.secret_file.empty()) co.env.push_back("RLX_CLUSTER_SECRET=" + o.secret);
      log->info("starting node '{}' ({}): {}", node.name, to_string(node.launcher), line);
    }
    auto pid = spawn_child(argv, co);
    if (!pid) return pid.error();
    l->pids_.push_back(*pid);
    l->names_.push_back(node.name);
  }
  return l;
}

NodeLauncher::~NodeLauncher() {
  if (!pids_.empty()) wait(std::chrono::milliseconds(0));
}

int NodeLauncher::wait(std::chrono::milliseconds grace) {
  int unclean = 0;
  auto reaped = reap_children(pids_, grace);
  for (std::size_t i = 0; i < reaped.size(); ++i) {
    if (reaped[i].clean) continue;
    ++unclean;
    log_->warn("node '{}' (pid {}) ended: {}", names_[i], reaped[i].pid, reaped[i].how);
  }
  pids_.clear();
  names_.clear();
  return unclean;
}

}  // namespace rlx
