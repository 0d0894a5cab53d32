// examples/harness.toml with the Python harness beside it
// (examples/harness/harness.py, standard library only): the harness plays
// sessions over HTTP until the run's update budget ends it, and the reward
// it measures rises: learning through the gateway, from a fresh policy.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <numeric>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "core/child_process.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

TEST_CASE("the Python harness of examples/harness trains a fresh policy through the gateway: the reward it measures "
          "rises over the run",
          "[gateway][e2e][net][slow]") {
  if (::access("/usr/bin/python3", X_OK) != 0) test::skip_test("no python3");
  const test::TempDir t("rlx-harness-learns");
  auto cfg = load_config(std::string(RLX_SOURCE_DIR) + "/examples/harness.toml", builtin_envs().names());
  REQUIRE(cfg.ok());
  cfg->run.log_dir = t.path.string();
  cfg->run.stop.max_updates = 40;
  cfg->run.stop.max_seconds = 600;
  const auto rewards_path = t.path / "rewards.txt";
  const auto out_path = t.path / "harness.out";

  pid_t harness = 0;
  std::promise<void> spawned;
  RunHooks hooks;
  hooks.on_start = [&](std::function<void(const std::string&)> stop) {
    if (!stop) return;  // (called again with none as the run ends)
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ChildOptions o;
    o.stdout_fd = out;
    auto pid = spawn_child({"/usr/bin/python3", std::string(RLX_SOURCE_DIR) + "/examples/harness/harness.py", "--gateway",
                            (t.path / "gateway.json").string(), "--log", rewards_path.string()},
                           o);
    ::close(out);
    if (pid.ok()) harness = *pid;
    spawned.set_value();
    if (!pid.ok()) stop("the harness did not start: " + pid.error().message);
  };
  const RunResult r = run_cluster(*cfg, builtin_envs(), hooks, null_logger());
  spawned.get_future().wait();
  REQUIRE(harness > 0);
  const auto reaped = reap_children({harness}, std::chrono::seconds(60));
  std::ifstream said(out_path);
  const std::string out((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
  INFO(r.summary);
  INFO(out);
  CHECK(r.outcome == RunOutcome::budget);
  CHECK(reaped.at(0).clean);  // it saw the gateway close and exited 0
  CHECK(out.find("the gateway closed after") != std::string::npos);

  std::vector<double> rewards;
  std::ifstream in(rewards_path);
  for (double x; in >> x;) rewards.push_back(x);
  REQUIRE(rewards.size() >= 200);
  const std::size_t n = 64;
  const double first = std::accumulate(rewards.begin(), rewards.begin() + n, 0.0) / n;
  const double last = std::accumulate(rewards.end() - n, rewards.end(), 0.0) / n;
  INFO("mean reward of the first " << n << " sessions " << first << ", of the last " << last);
  CHECK(last > first + 0.2);
}
