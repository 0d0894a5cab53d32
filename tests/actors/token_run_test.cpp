#include <filesystem>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "envs/code/sandbox.hpp"
#include "rollout_log/log_reader.hpp"
#include "tests/helpers.hpp"
#include "tests/metrics_fixture.hpp"
#include "tests/actors/token_toml.hpp"

using namespace rlx;


TEST_CASE("a token-policy run trains on whole sequences and accounts for every segment", "[actors][token][e2e]") {
  const test::TempDir t("rlx-token-run");
  const auto& dir = t.path;
  auto cfg = test::token_config("tokens:arithmetic", dir, R"(max_len = 24
[tokens]
group_size = 4
max_new_tokens = 4
eval_tasks = 8
eval_every = 3
)", "explorers = 2\nenvs_per_explorer = 16\nrewards = 0\n");
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  const auto line = test::last_metrics_line(dir);
  INFO(line);
  test::check_segment_identity(line);
  const auto received = test::json_number(line, "segments_received");
  CHECK(test::json_number(line, "segments_rejected") == 0);
  CHECK(test::json_number(line, "segments_produced") == received);
  CHECK(test::json_number(line, "segments_lost") == 0);
  CHECK(test::json_number(line, "policy_version") > 0);
  CHECK(test::json_number(line, "env_steps") >= 2000);  // tokens sampled
  // The evaluator scored at least the starting point.
  CHECK(test::json_number(line, "eval_tasks") == 8);
  const double pass = test::json_number(line, "pass_at_1");
  CHECK((pass >= 0.0 && pass <= 1.0));
  // Every segment is in the rollout log with its rows: 16 rows of 4-sample groups.
  std::uint64_t records = 0;
  auto report = read_log(dir, ReadOptions{}, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind != LogKind::rollout) return true;
    ++records;
    const auto& s = e.rollout.segment;
    REQUIRE(s.tokens.has_value());
    CHECK(s.num_envs == 16);
    CHECK(s.tokens->group_size == 4);
    CHECK(s.tokens->task_ids.size() == 16);
    CHECK(s.tokens->task_ids[0] == s.tokens->task_ids[3]);  // a group: one task
    CHECK(s.episode_returns.size() == 16);
    return true;
  });
  REQUIRE(report.ok());
  CHECK(records == received);
}

TEST_CASE("a code token run has its programs scored by the reward pool in the sandbox", "[actors][token][code]") {
  REQUIRE(Sandbox::open().ok());  // bubblewrap and python3 (tools/install-deps.sh)
  const test::TempDir t("rlx-token-code");
  const auto& dir = t.path;
  auto cfg = test::token_config("tokens:code", dir, R"(max_len = 192
[tokens]
group_size = 4
max_new_tokens = 12
eval_tasks = 0
[reward]
scorer = "code"
)", "explorers = 1\nenvs_per_explorer = 8\nrewards = 2\n");
  cfg.run.stop.max_env_steps = 200;
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  const auto line = test::last_metrics_line(dir);
  INFO(line);
  CHECK(test::json_number(line, "segments_trained") >= 1);
  CHECK(test::json_number(line, "episodes") >= 8);  // rows came back with their scores
  CHECK(test::json_number(line, "segments_lost") == 0);
  CHECK(line.find("pass_at_1") == std::string::npos);  // no evaluator asked for
  // Every row asked the pool once (none failed here): each round trip timed.
  CHECK(test::json_number(line, "reward_answers") >= test::json_number(line, "episodes"));
  CHECK(test::json_number(line, "reward_latency_mean_s") > 0);
}
