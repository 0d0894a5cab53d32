// A run with the Python harness of examples/harness beside it: the harness
// starts once the run's gateway listens (gateway.json written) and is
// reaped after the run ends; what it printed comes back.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "core/child_process.hpp"

namespace rlx::test {

struct HarnessRun {
  RunResult result;
  bool harness_clean = false;  // it exited 0
  std::string out;             // its stdout
};

// Runs `config` with `python3 examples/harness/harness.py --gateway
// <log_dir>/gateway.json` + `args`.
inline HarnessRun run_with_harness(const ClusterConfig& config, const std::vector<std::string>& args) {
  const std::filesystem::path dir = config.run.log_dir;
  const auto out_path = dir / "harness.out";
  pid_t harness = 0;
  std::promise<void> spawned;
  RunHooks hooks;
  hooks.on_start = [&](std::function<void(const std::string&)> stop) {
    if (!stop) return;  // (called again with none as the run ends)
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ChildOptions o;
    o.stdout_fd = out;
    std::vector<std::string> argv = {"/usr/bin/python3", std::string(RLX_SOURCE_DIR) + "/examples/harness/harness.py",
                                     "--gateway", (dir / "gateway.json").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto pid = spawn_child(argv, o);
    ::close(out);
    if (pid.ok()) harness = *pid;
    spawned.set_value();
    if (!pid.ok()) stop("the harness did not start: " + pid.error().message);
  };
  HarnessRun h;
  h.result = run_cluster(config, builtin_envs(), hooks, null_logger());
  spawned.get_future().wait();
  REQUIRE(harness > 0);
  h.harness_clean = reap_children({harness}, std::chrono::seconds(60)).at(0).clean;
  std::ifstream said(out_path);
  h.out.assign(std::istreambuf_iterator<char>(said), std::istreambuf_iterator<char>());
  return h;
}

}  // namespace rlx::test
