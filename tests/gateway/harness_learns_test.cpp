// examples/harness.toml with the Python harness beside it
// (examples/harness/harness.py, standard library only): the harness plays
// sessions over HTTP until the run's update budget ends it, and the reward
// it measures rises: learning through the gateway, from a fresh policy.
#include <unistd.h>

#include <fstream>
#include <numeric>

#include <catch2/catch.hpp>

#include "tests/gateway/harness_fixture.hpp"
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
  const auto h = test::run_with_harness(*cfg, {"--log", rewards_path.string()});
  const RunResult& r = h.result;
  INFO(r.summary);
  INFO(h.out);
  CHECK(r.outcome == RunOutcome::budget);
  CHECK(h.harness_clean);  // it saw the gateway close and exited 0
  CHECK(h.out.find("the gateway closed after") != std::string::npos);

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
