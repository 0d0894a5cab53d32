// The rlx command line: launch (or resume) a run, replay and inspect
// rollout logs, plot metrics, run the benchmarks.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include "actors/cluster.hpp"
#include "bench/bench.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "tools/embedded_config.hpp"
#include "tools/learner_rank.hpp"
#include "tools/replay_cmd.hpp"
#include "tools/serve_env.hpp"

namespace {

using namespace rlx;

// Prints the status line: in place on a terminal, one line per report otherwise.
void print_status(const Status& s) {
  static const bool tty = isatty(STDERR_FILENO);
  auto line = fmt::format("[{:7.1f}s] steps {:>9} ({:>7.0f}/s) episodes {:>6} return {:>6.1f} v{:<5} lag {:.2f}/{} "
                          "trained {} dropped {} rejected {} explorers {}",
                          s.time_s, s.env_steps, s.steps_per_s, s.episodes, s.mean_return, s.policy_version,
                          s.lag_mean, s.lag_max, s.trained, s.dropped_stale, s.rejected, s.explorers);
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

Result<ClusterConfig> read_config(const std::string& path, const EnvRegistry& envs) {
  if (path.empty()) return parse_config(embedded_cluster_toml(), "<embedded cluster.toml>", envs.names(), policy_kinds());
  return load_config(path, envs.names(), policy_kinds());
}

int launch(const std::string& path, const std::string& log_level, bool resume) {
  SignalWatcher signals;
  EnvRegistry envs = builtin_envs();
  auto config = read_config(path, envs);
  if (!config) {
    std::fprintf(stderr, "rlx: %s\n", config.error().message.c_str());
    return 2;
  }
  LogOptions lo;
  lo.level = log_level.empty() ? config->log.level : log_level;
  Logger log = make_root_logger(lo);
  log->info("run '{}': env {}, policy {} ({} experts, top-{}), {} explorers, max_staleness {}, mode {}",
            config->run.name, config->run.env, config->policy.kind, config->policy.experts, config->policy.top_k,
            config->total_explorers(), config->run.max_staleness, config->run.mode);
  RunHooks hooks;
  hooks.on_status = print_status;
  hooks.on_start = [&](std::function<void(const std::string&)> stop) { signals.set_stop(std::move(stop)); };
  RunOptions options;
  options.resume = resume;
  RunResult r = run_cluster(*config, envs, hooks, log, options);
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  std::printf("%s\n", r.summary.c_str());
  return static_cast<int>(r.outcome);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rlx: asynchronous reinforcement learning over actors"};
  app.require_subcommand(1);
  std::string config_path, log_level;
  auto* launch_cmd = app.add_subcommand("launch", "run a topology to its stop condition (default: the embedded cluster.toml)");
  launch_cmd->add_option("config", config_path, "a cluster.toml");
  launch_cmd->add_option("--log-level", log_level, "trace|debug|info|warn|error|off (overrides [log] level)");
  bool resume = false;
  launch_cmd->add_flag("--resume", resume, "continue the run recorded in log_dir (the learner is rebuilt from the rollout log)");
  ReplayArgs replay_args;
  auto* replay_cmd = app.add_subcommand("replay", "train from a rollout log: exact (reproduce the run) or offline (a fresh policy)");
  replay_cmd->add_option("log", replay_args.log, "a log_dir or its rollouts/ directory")->required();
  replay_cmd->add_option("--config", replay_args.config, "a cluster.toml (default: the config recorded in the log)");
  replay_cmd->add_option("--mode", replay_args.mode, "exact | offline")->check(CLI::IsMember({"exact", "offline"}));
  replay_cmd->add_flag("--skip-bad", replay_args.skip_bad, "go on past damaged records (reported) instead of stopping");
  replay_cmd->add_option("--passes", replay_args.passes, "offline: passes over the log's segments")->check(CLI::Range(1, 10000));
  replay_cmd->add_option("--eval-episodes", replay_args.eval_episodes, "offline: greedy episodes to score the result")
      ->check(CLI::Range(1, 100000));
  InspectArgs inspect_args;
  auto* inspect_cmd = app.add_subcommand("inspect", "summarise a rollout log");
  inspect_cmd->add_option("log", inspect_args.log, "a log_dir or its rollouts/ directory")->required();
  inspect_cmd->add_flag("--json", inspect_args.json, "print the summary as JSON");
  inspect_cmd->add_option("--plot", inspect_args.plot, "draw return and staleness over time into this PNG (gnuplot)");
  inspect_cmd->add_flag("--skip-bad", inspect_args.skip_bad, "go on past damaged records (reported) instead of stopping");
  LearnerRankArgs rank_args;
  auto* rank_cmd = app.add_subcommand("learner-rank", "one data-parallel learner rank (started by launch when [learner] ranks > 1)");
  rank_cmd->add_option("--config", rank_args.config, "the run's TOML")->required();
  rank_cmd->add_option("--rank", rank_args.rank, "this rank, 1..world-1")->required();
  rank_cmd->add_option("--world", rank_args.world, "number of ranks")->required();
  rank_cmd->add_option("--store", rank_args.store, "HOST:PORT of the rendezvous store")->required();
  std::string plot_dir, plot_out;
  auto* plot_cmd = app.add_subcommand("plot", "draw a run's metrics.jsonl curves (gnuplot)");
  plot_cmd->add_option("log_dir", plot_dir, "the run's log_dir")->required();
  plot_cmd->add_option("--out", plot_out, "PNG to write (default: <log_dir>/metrics.png)");
  std::string bench_filter, bench_out;
  int bench_seeds = 3;
  auto* bench_cmd = app.add_subcommand("bench", "run the benchmarks (ratios against raw baselines)");
  bench_cmd->add_option("--only", bench_filter, "run only benchmarks whose name contains this");
  bench_cmd->add_option("--seeds", bench_seeds, "seeds for the time-to-solve benchmarks");
  bench_cmd->add_option("--markdown", bench_out, "also write the results as a Markdown table to this file");
  std::string serve_name = "cartpole", serve_protocol = "json";
  auto* serve_cmd = app.add_subcommand("serve-env", "serve a built-in env over the external-env protocol on stdin/stdout");
  serve_cmd->add_option("name", serve_name, "built-in env name");
  serve_cmd->add_option("--protocol", serve_protocol, "json | capnp")->check(CLI::IsMember({"json", "capnp"}));
  CLI11_PARSE(app, argc, argv);
  if (*serve_cmd) return rlx::serve_env(serve_name, serve_protocol, rlx::builtin_envs());
  if (*launch_cmd) return launch(config_path, log_level, resume);
  if (*replay_cmd) return rlx::replay_command(replay_args);
  if (*inspect_cmd) return rlx::inspect_command(inspect_args);
  if (*plot_cmd) return rlx::plot_command(plot_dir, plot_out);
  if (*rank_cmd) return rlx::learner_rank_command(rank_args);
  if (*bench_cmd) return rlx::run_benchmarks(rlx::BenchOptions{bench_filter, bench_seeds, bench_out});
  return 1;
}
