// Multi-node test topologies and helpers: a CartPole run split into a head
// and member nodes, run through `rlx launch` as a user would, and checks
// that no node process outlives its test.
#pragma once

#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/child_process.hpp"
#include "tests/helpers.hpp"
#include "tests/metrics_fixture.hpp"

namespace rlx::test {

namespace fs = std::filesystem;

struct SplitSpec {
  fs::path log_dir;
  std::uint64_t max_env_steps = 60'000;   // the bound of every test run
  double mean_return = 100'000.0;         // unreachable: the step budget ends it
  double max_seconds = 300.0;
  int head_explorers = 0;
  std::vector<std::string> members{"rollout-a", "rollout-b"};
  std::vector<std::string> member_hosts;  // default 127.0.0.1
  std::string head_host = "127.0.0.1";
  Launcher launcher = Launcher::local;
  std::string extra;                      // more TOML tables ([launch], [tls])
  int envs = 8;
  int ranks = 1;                          // [learner] ranks
  std::vector<int> member_ranks;          // learner_ranks of each member node (default 0)
};

// A run logging into `t` that only a signal (or the test) ends; `t`/cli
// is made for the rlx commands the test runs beside it.
inline SplitSpec endless_spec(const TempDir& t) {
  fs::create_directories(t.path / "cli");
  SplitSpec spec;
  spec.log_dir = t.path;
  spec.max_env_steps = 50'000'000;
  return spec;
}

inline std::string split_toml(const SplitSpec& s) {
  std::ostringstream t;
  t << "[run]\nname = \"split-test\"\nseed = 1\nenv = \"cartpole\"\nmax_staleness = 4\nlog_dir = \"" << s.log_dir.string()
    << "\"\nreport_interval_s = 0.25\nstop = { mean_return = " << s.mean_return << ", max_env_steps = " << s.max_env_steps
    << ", max_seconds = " << s.max_seconds << " }\n\n[learner]\nbatch_segments = 2\nlr = 1e-3\nranks = " << s.ranks
    << "\n\n[explorer]\nsegment_steps = 64\n\n"
    << s.extra << "\n\n[[node]]\nname = \"head\"\nhost = \"" << s.head_host
    << "\"\nport = 0\nactors = [\"coordinator\", \"learner\", \"weight_store\", \"recorder\"]\nexplorers = "
    << s.head_explorers << "\nenvs_per_explorer = " << s.envs << "\n";
  for (std::size_t i = 0; i < s.members.size(); ++i)
    t << "\n[[node]]\nname = \"" << s.members[i] << "\"\nhost = \""
      << (i < s.member_hosts.size() ? s.member_hosts[i] : std::string("127.0.0.1")) << "\"\nlauncher = \"" << to_string(s.launcher)
      << "\"\nexplorers = 1\nenvs_per_explorer = " << s.envs
      << "\nlearner_ranks = " << (i < s.member_ranks.size() ? s.member_ranks[i] : 0) << "\n";
  return t.str();
}

inline fs::path write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
  return p;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Ran {
  int code = -1;
  std::string out;  // stdout and stderr
};

// Runs `prefix rlx ARGS` in a shell, output to dir/out.txt.
inline Ran run_rlx(const std::string& args, const fs::path& dir, const std::string& prefix = "") {
  const auto out = dir / "out.txt";
  const int status = std::system((prefix + RLX_BINARY " " + args + " > " + out.string() + " 2>&1").c_str());
  return Ran{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out)};
}

// Pids of the rlx node processes whose command line names `config` (so
// parallel tests do not see each other's).
// With `node`, only that node's process.
inline std::vector<pid_t> node_pids(const fs::path& config, const std::string& node = "") {
  // "[r]lx" keeps pgrep from matching the shell that runs it.
  const std::string cmd =
      "pgrep -f '[r]lx node --config " + config.string() + (node.empty() ? "" : " --node " + node + "( |$)") + "'";
  std::vector<pid_t> pids;
  std::istringstream out(test::run_command(cmd).out);
  for (pid_t pid = 0; out >> pid;) pids.push_back(pid);
  return pids;
}

inline int node_processes(const fs::path& config) { return static_cast<int>(node_pids(config).size()); }

// Waits (without polling) until `cond()` holds: it is re-checked whenever a
// file in `dir` is created or written (inotify). False after `limit`.
inline bool wait_for_files(const fs::path& dir, const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  REQUIRE(fd >= 0);
  REQUIRE(inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO) >= 0);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool ok = cond();  // checked after the watch exists: no event is missed
  while (!ok) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(left.count()));
    char events[4096];
    while (read(fd, events, sizeof events) > 0) {
    }
    ok = cond();
  }
  close(fd);
  return ok;
}

// Waits (without polling: a pidfd becomes readable when the process ends)
// until `pid` has exited; false after `limit`. Works for any process.
inline bool wait_for_exit(pid_t pid, std::chrono::milliseconds limit) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return true;  // already gone
  pollfd p{fd, POLLIN, 0};
  const int r = poll(&p, 1, static_cast<int>(limit.count()));
  close(fd);
  return r > 0;
}

// The exit code of our child `pid` if it exits within `limit`; else it is
// killed and -1 returned.
inline int exit_code_within(pid_t pid, std::chrono::milliseconds limit) {
  const bool exited = wait_for_exit(pid, limit);
  if (!exited) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!exited) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// True when every node process of `config` ends within `limit`.
inline bool no_nodes_left_within(const fs::path& config, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (pid_t pid : node_pids(config))
    wait_for_exit(pid, std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                   deadline - std::chrono::steady_clock::now())));
  return node_processes(config) == 0;
}

// Waits until the newest complete metrics line of the run in `log_dir`
// satisfies `pred`; returns it (nullopt after `limit`).
inline std::optional<std::string> wait_for_metrics(const fs::path& log_dir,
                                                   const std::function<bool(const std::string&)>& pred,
                                                   std::chrono::milliseconds limit = std::chrono::seconds(120)) {
  std::optional<std::string> got;
  wait_for_files(
      log_dir,
      [&] {
        const std::string line = last_metrics_line(log_dir);
        // A line still being written has no closing brace yet.
        if (line.empty() || line.back() != '}' || !pred(line)) return false;
        got = line;
        return true;
      },
      limit);
  return got;
}

// Waits until the run in `log_dir` reports `nodes` nodes and some env steps.
inline bool wait_for_nodes(const fs::path& log_dir, int nodes, std::chrono::milliseconds limit) {
  return wait_for_metrics(
             log_dir,
             [&](const std::string& line) { return json_number(line, "nodes") == nodes && json_number(line, "env_steps") > 0; },
             limit)
      .has_value();
}

// Starts `rlx ARGS` in the background, output to `out` (stdout and stderr).
inline pid_t rlx_in_background(const std::string& args, const fs::path& out) {
  auto pid = spawn_child({"/bin/sh", "-c", "exec " RLX_BINARY " " + args + " > " + out.string() + " 2>&1"});
  REQUIRE(pid.ok());
  return *pid;
}

// Starts `rlx launch config` in the background, output to dir/out.txt.
inline pid_t launch_in_background(const fs::path& config, const fs::path& dir) {
  return rlx_in_background("launch " + config.string(), dir / "out.txt");
}

// Starts `rlx launch config` in the background and waits until all `nodes` run.
inline pid_t start_split_run(const fs::path& config, const fs::path& dir, int nodes) {
  const pid_t pid = launch_in_background(config, dir);
  const bool running = wait_for_nodes(dir, nodes, std::chrono::seconds(120));
  if (!running) exit_code_within(pid, std::chrono::seconds(0));  // kills it
  INFO(read_text(dir / "out.txt"));
  REQUIRE(running);
  return pid;
}


}  // namespace rlx::test
