// `rlx launch` and `rlx node`: run a topology (one process, or the head
// plus member node processes), with a live status line and a clean stop
// on SIGINT/SIGTERM.
#include "tools/launch_cmd.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "assembly/cluster.hpp"
#include "assembly/member_node.hpp"
#include "assembly/remote.hpp"
#include "core/allocator.hpp"
#include "core/auth.hpp"
#include "core/files.hpp"
#include "core/topology_paths.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "tools/embedded_config.hpp"
#include "tools/node_launcher.hpp"

namespace rlx {

namespace {

// Actors still run (left behind past the shutdown bound): ends the process
// past their threads rather than waiting in them.
[[noreturn]] void exit_past_actors(int code) {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
  std::fflush(nullptr);
  std::_Exit(code);
}

// Prints the status line: in place on a terminal, one line per report otherwise.
void print_status(const Status& s) {
  static const bool tty = isatty(STDERR_FILENO);
  auto line = fmt::format("[{:7.1f}s] steps {:>9} ({:>7.0f}/s) episodes {:>6} return {:>6.1f} v{:<5} lag {:.2f}/{} "
                          "trained {} dropped {} rejected {}{}{}{} explorers {}{} nodes {}{}{}",
                          s.time_s, s.env_steps, s.steps_per_s, s.episodes, s.mean_return, s.policy_version,
                          s.lag_mean, s.lag_max, s.trained, s.dropped_stale, s.rejected,
                          s.lost ? fmt::format(" lost {}", s.lost) : "",
                          s.vanished ? fmt::format(" VANISHED {}", s.vanished) : "",
                          s.infra_failures.empty() ? std::string()
                                                   : fmt::format(" infra [{}] masked {} retried {}", s.infra_failures,
                                                                 s.rows_masked, s.reward_retries),
                          s.explorers,
                          s.reward_workers ? fmt::format(" rewards {}", s.reward_workers) : "", s.nodes,
                          s.strangers ? fmt::format(" strangers {}", s.strangers) : "",
                          std::isnan(s.pass_at_1) ? std::string()
                                                  : fmt::format(" pass@1 {:.3f} (v{})", s.pass_at_1, s.eval_version));
  if (tty)
    std::fprintf(stderr, "\r%s\033[K", line.c_str());
  else
    std::fprintf(stderr, "%s\n", line.c_str());
}

// Turns SIGINT/SIGTERM into a clean stop. The handler only writes the
// signal number to a pipe (async-signal-safe, whichever thread takes the
// signal); a watcher thread blocks on the pipe and calls the stop function.
class SignalWatcher {
 public:
  SignalWatcher() {
    if (pipe(fds_) != 0) return;
    write_fd_ = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = [](int sig) {
      const char c = static_cast<char>(sig);
      [[maybe_unused]] auto n = write(write_fd_, &c, 1);
    };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    thread_ = std::thread([this] {
      char c = 0;
      while (read(fds_[0], &c, 1) == 1) {
        if (c == 0) return;  // the destructor's wake-up
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) stop_(c == SIGINT ? "interrupted (SIGINT)" : "interrupted (SIGTERM)");
        signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
      }
    });
  }
  ~SignalWatcher() {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (thread_.joinable()) {
      const char c = 0;
      [[maybe_unused]] auto n = write(fds_[1], &c, 1);
      thread_.join();
    }
    close(fds_[0]);
    close(fds_[1]);
  }
  void set_stop(std::function<void(const std::string&)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = std::move(f);
  }

 private:
  static inline int write_fd_ = -1;
  int fds_[2] = {-1, -1};
  std::mutex mu_;
  std::function<void(const std::string&)> stop_;
  std::thread thread_;
};

Logger root_logger(const ClusterConfig& config, const std::string& level, const std::string& name = "") {
  LogOptions lo;
  lo.level = level.empty() ? config.log.level : level;
  Logger log = make_root_logger(lo);
  return name.empty() ? log : child_logger(log, name);
}

std::string this_executable() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

// Runs the head of `config` (every node, when it has only one).
int run_head(const ClusterConfig& config, const EnvRegistry& envs, const Logger& log, SignalWatcher& signals,
             RunOptions options, std::function<std::string(std::uint16_t)> on_listening) {
  // A Hugging Face start's shape is its config.json's, not the [policy] table's.
  const auto& lora = config.policy.lora;
  const auto shape = (config.policy.init.starts_with("hf:")
                          ? "the shape of " + config.policy.init
                          : fmt::format("{} experts, top-{}", config.policy.experts, config.policy.top_k)) +
                     (lora.rank > 0 ? fmt::format(", frozen; LoRA rank {} alpha {} on {}{}", lora.rank, lora.alpha,
                                                  fmt::join(lora.targets, ", "), lora.router ? ", routers" : "")
                                    : std::string());
  log->info("run '{}': env {}, policy {} ({}), {} explorers on {} nodes, max_staleness {}, mode {}", config.run.name,
            config.run.env, to_string(config.policy.kind), shape, config.total_explorers(), config.nodes.size(),
            config.run.max_staleness, to_string(config.run.mode));
  log->info("memory: {}", describe(current_allocator()));
  RunHooks hooks;
  hooks.on_status = print_status;
  hooks.on_start = [&](std::function<void(const std::string&)> stop) { signals.set_stop(std::move(stop)); };
  hooks.on_listening = std::move(on_listening);
  RunResult r = run_cluster(config, envs, hooks, log, options);
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  std::printf("%s\n", r.summary.c_str());
  if (r.actors_left) {
    log->flush();
    exit_past_actors(static_cast<int>(r.outcome));
  }
  return static_cast<int>(r.outcome);
}

// Learner ranks placed on ssh nodes start through the ssh_command template.
RemoteStarter remote_rank_starter(const ClusterConfig& config, const Logger& log) {
  return [&config, log](const NodeConfig& node, const std::vector<std::string>& argv) {
    return start_on_node(config, node, argv, log);
  };
}

}  // namespace

std::optional<ClusterConfig> config_or_report(const std::string& path, const EnvRegistry& envs,
                                              const std::vector<std::string>& overrides) {
  auto config = path.empty()
                    ? parse_config(embedded_cluster_toml(), "<embedded cluster.toml>", envs.names(), overrides)
                    : load_config(path, envs.names(), overrides);
  if (config && path.empty()) resolve_topology_paths(*config, std::filesystem::current_path());
  if (config) return std::move(*config);
  std::fprintf(stderr, "rlx: %s\n", config.error().message.c_str());
  return std::nullopt;
}

std::optional<ClusterConfig> runnable_config_or_report(const std::string& path, const EnvRegistry& envs,
                                                       const std::vector<std::string>& overrides) {
  auto config = config_or_report(path, envs, overrides);
  if (!config) return config;
  if (auto files = check_topology_paths(*config); !files) {
    std::fprintf(stderr, "rlx: %s\n", files.error().message.c_str());
    return std::nullopt;
  }
  return config;
}

int launch_command(const LaunchArgs& args) {
  SignalWatcher signals;
  EnvRegistry envs = builtin_envs();
  auto config = runnable_config_or_report(args.config, envs, args.overrides);
  if (!config) return 2;
  if (args.page) config->metrics.page = true;
  Logger log = root_logger(*config, args.log_level);
  RunOptions options;
  options.resume = args.resume;
  options.resume_diverged = args.resume_diverged;
  options.start_remote_rank = remote_rank_starter(*config, log);
  if (!config->multi_node() && !config->launch.listen) return run_head(*config, envs, log, signals, options, nullptr);

  // Several nodes (or [launch] listen): this process is the head and
  // publishes its gate; the other nodes are started once it listens.
  bool all_local = true;
  for (const auto& n : config->nodes) all_local = all_local && (n.launcher == Launcher::local || n.name == config->head().name);
  auto secret = load_cluster_secret(args.secret_file);
  if (!secret && secret.error().code == Errc::not_found && all_local) {
    secret = random_secret();
    // Kept where `rlx scale` and `rlx node --join` on this machine can read it (owner only).
    const auto file = std::filesystem::path(config->run.log_dir) / "cluster.secret";
    std::error_code ec;
    std::filesystem::create_directories(config->run.log_dir, ec);
    if (auto w = write_text_atomically(file, *secret + "\n", 0600); !w) {
      std::fprintf(stderr, "rlx: %s\n", w.error().message.c_str());
      return 2;
    }
    log->info("no cluster secret given: every node is local, so a fresh one is passed to them (and kept in {})",
              file.string());
  }
  if (!secret) {
    std::fprintf(stderr, "rlx: %s\n", secret.error().message.c_str());
    return 2;
  }
  NodeLaunchOptions lo;
  lo.config_path = std::filesystem::absolute(args.config).string();
  lo.binary = this_executable();
  lo.secret = *secret;
  lo.secret_file = args.secret_file;
  if (lo.secret_file.empty())
    if (const char* f = std::getenv("RLX_CLUSTER_SECRET_FILE")) lo.secret_file = f;
  if (!lo.secret_file.empty()) lo.secret_file = std::filesystem::absolute(lo.secret_file).string();
  lo.log_level = args.log_level;
  for (const auto& n : config->nodes)
    if (n.launcher == Launcher::ssh && n.name != config->head().name && lo.secret_file.empty()) {
      std::fprintf(stderr,
                   "rlx: node '%s' is started over ssh: give the cluster secret as a file that exists on its host "
                   "(--secret-file or RLX_CLUSTER_SECRET_FILE)\n",
                   n.name.c_str());
      return 2;
    }
  options.serve = true;
  options.secret = *secret;
  std::unique_ptr<NodeLauncher> nodes;
  const int code = run_head(*config, envs, log, signals, options, [&](std::uint16_t port) -> std::string {
    lo.head = reachable_address(config->head().host, port);
    auto started = NodeLauncher::start(*config, lo, log);
    if (!started) return started.error().message;
    nodes = std::move(*started);
    return "";
  });
  if (nodes && nodes->wait(std::chrono::seconds(10)) > 0) log->warn("some member nodes did not end cleanly");
  return code;
}

// `rlx node --join`: a node the topology does not name.
int join_command(const NodeArgs& args, const ClusterConfig& config, const std::string& secret, SignalWatcher& signals,
                 const EnvRegistry& envs) {
  auto hp = parse_host_port(args.join);
  if (!hp) {
    std::fprintf(stderr, "rlx: --join %s\n", hp.error().message.c_str());
    return 2;
  }
  std::string name = args.name;
  if (name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    name = std::string(host) + "-" + std::to_string(getpid());
  }
  MemberNodeOptions mo;
  mo.node = name;
  mo.join = true;
  mo.explorers = args.explorers;
  mo.envs_per_explorer = args.envs_per_explorer;
  mo.rewards = args.rewards;
  mo.head_host = hp->first;
  mo.head_port = hp->second;
  mo.secret = secret;
  mo.on_start = [&](std::function<void()> drain) {
    if (!drain) return signals.set_stop(nullptr);
    signals.set_stop([drain](const std::string&) { drain(); });
  };
  auto r = run_member_node(config, envs, mo, root_logger(config, args.log_level, name));
  std::printf("%s\n", r.summary.c_str());
  if (r.actors_left) exit_past_actors(static_cast<int>(r.outcome));
  return static_cast<int>(r.outcome);
}

int node_command(const NodeArgs& args) {
  SignalWatcher signals;
  EnvRegistry envs = builtin_envs();
  if (args.join.empty() == args.node.empty()) {
    std::fprintf(stderr, "rlx node: give --node NAME (a node of the topology) or --join HOST:PORT (a new node)\n");
    return 2;
  }
  if (args.join.empty() && args.config.empty()) {
    std::fprintf(stderr, "rlx node: --node needs --config (the topology that names it)\n");
    return 2;
  }
  // A member node takes the head's configuration when it joins; the head
  // reads the files its topology names.
  const bool is_head = !args.node.empty() && args.join.empty() && [&] {
    auto c = config_or_report(args.config, envs);
    return c && c->head().name == args.node;
  }();
  auto config = is_head ? runnable_config_or_report(args.config, envs) : config_or_report(args.config, envs);
  if (!config) return 2;
  auto secret = load_cluster_secret(args.secret_file);
  if (!secret) {
    std::fprintf(stderr, "rlx: %s\n", secret.error().message.c_str());
    return 2;
  }
  if (!args.join.empty()) return join_command(args, *config, *secret, signals, envs);
  const NodeConfig* node = config->node(args.node);
  if (!node) {
    std::fprintf(stderr, "rlx: %s has no [[node]] named '%s'\n", config->source.c_str(), args.node.c_str());
    return 2;
  }
  Logger log = root_logger(*config, args.log_level, args.node);
  if (node->name == config->head().name) {
    RunOptions options;
    options.resume = args.resume;
    options.resume_diverged = args.resume_diverged;
    options.serve = true;
    options.secret = *secret;
    options.start_remote_rank = remote_rank_starter(*config, log);
    return run_head(*config, envs, log, signals, options, nullptr);
  }
  std::string head = args.head;
  if (head.empty()) {
    if (config->head().port == 0) {
      std::fprintf(stderr, "rlx: the head's port is 0 (any) in %s: pass --head HOST:PORT as the head printed it\n",
                   config->source.c_str());
      return 2;
    }
    head = reachable_address(config->head().host, static_cast<std::uint16_t>(config->head().port));
  }
  auto hp = parse_host_port(head);
  if (!hp) {
    std::fprintf(stderr, "rlx: --head %s\n", hp.error().message.c_str());
    return 2;
  }
  MemberNodeOptions mo;
  mo.node = args.node;
  mo.head_host = hp->first;
  mo.head_port = hp->second;
  mo.secret = *secret;
  mo.on_start = [&](std::function<void()> drain) {
    if (!drain) return signals.set_stop(nullptr);
    signals.set_stop([drain](const std::string&) { drain(); });
  };
  auto r = run_member_node(*config, envs, mo, log);
  std::printf("%s\n", r.summary.c_str());
  if (r.actors_left) exit_past_actors(static_cast<int>(r.outcome));
  return static_cast<int>(r.outcome);
}

}  // namespace rlx
