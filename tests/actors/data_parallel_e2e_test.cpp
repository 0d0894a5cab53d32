// Data-parallel learner ranks as processes, through the whole run.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include "assembly/cluster.hpp"
#include "learner/checkpoint.hpp"
#include "tests/helpers.hpp"
#include "tests/actors/token_toml.hpp"
#include "tests/metrics_fixture.hpp"

using namespace rlx;

namespace {

RunOptions binary_options() {
  RunOptions o;
  o.binary = RLX_BINARY;
  return o;
}


ClusterConfig e2e_two_ranks(const std::string& name, std::filesystem::path* dir) {
  auto cfg = test::default_config();
  *dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(*dir);
  cfg.run.log_dir = dir->string();
  cfg.run.seed = 4;
  cfg.learner.ranks = 2;
  cfg.learner.batch_segments = 2;  // per rank: 4 segments per update, as the default
  cfg.run.report_interval_s = 0.2;
  return cfg;
}

int processes_matching(const std::string& pattern) {
  const std::string cmd = "pgrep -f '" + pattern + "' > /dev/null";
  return std::system(cmd.c_str()) == 0 ? 1 : 0;
}

// `rlx replay DIR`: its exit status and what it printed.
std::pair<int, std::string> replay(const std::filesystem::path& dir) {
  const std::string cmd = std::string(RLX_BINARY) + " replay " + dir.string() + " > " + (dir / "replay.txt").string();
  const int status = std::system(cmd.c_str());
  std::ifstream in(dir / "replay.txt");
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::string((std::istreambuf_iterator<char>(in)), {})};
}

}  // namespace

TEST_CASE("a run with two learner rank processes learns, replays exactly and leaves no process behind",
          "[actors][dp][e2e][slow]") {
  std::filesystem::path dir;
  auto cfg = e2e_two_ranks("rlx-dp-e2e", &dir);
  cfg.run.stop.mean_return = 150.0;
  cfg.run.stop.max_env_steps = 400'000;
  cfg.run.stop.max_seconds = 0;
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger(), binary_options());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::solved);
  CHECK(processes_matching("[l]earner-rank --config " + dir.string()) == 0);
  // The log replays bit for bit, with two ranks again.
  auto [status, out] = replay(dir);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("identical") != std::string::npos);
}

TEST_CASE("a two-rank run resumes from its newest checkpoint, not the start of its log, and replays exactly",
          "[actors][dp][e2e][resume][checkpoint][slow]") {
  std::filesystem::path dir;
  auto cfg = e2e_two_ranks("rlx-dp-resume", &dir);
  cfg.run.stop.mean_return = 1e9;  // a budget run: stopped by steps, twice
  cfg.run.stop.max_env_steps = 20'000;
  cfg.run.stop.max_seconds = 0;
  cfg.learner.checkpoint_every = 2;
  cfg.learner.checkpoint_keep = 2;
  RunResult first = run_cluster(cfg, builtin_envs(), {}, null_logger(), binary_options());
  INFO(first.summary);
  REQUIRE(first.outcome == RunOutcome::budget);
  REQUIRE(list_checkpoints(dir / "checkpoints").size() == 2);

  std::ostringstream lines;
  auto log = std::make_shared<spdlog::logger>("resume", std::make_shared<spdlog::sinks::ostream_sink_mt>(lines));
  cfg.run.stop.max_env_steps = 40'000;
  RunOptions resume = binary_options();
  resume.resume = true;
  RunResult resumed = run_cluster(cfg, builtin_envs(), {}, log, resume);
  INFO(resumed.summary);
  INFO(lines.str());
  CHECK(resumed.outcome == RunOutcome::budget);
  CHECK(lines.str().find("resuming from checkpoint") != std::string::npos);
  CHECK(lines.str().find("does not match the rollout log") == std::string::npos);
  CHECK(lines.str().find("differs from the recorded one") == std::string::npos);
  CHECK(processes_matching("[l]earner-rank --config " + dir.string()) == 0);
  // Both runs' versions, through two ranks again, bit for bit.
  auto [status, out] = replay(dir);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("identical") != std::string::npos);
}

TEST_CASE("killing a learner rank fails the run with a clear error instead of a hang", "[actors][dp][e2e][slow][defensive]") {
  std::filesystem::path dir;
  auto cfg = e2e_two_ranks("rlx-dp-kill", &dir);
  cfg.run.stop.max_env_steps = 2'000'000;
  cfg.run.stop.max_seconds = 120;  // bounded whatever happens
  const std::string pattern = "[l]earner-rank --config " + dir.string();  // [l]: not the shell running pkill
  bool killed = false;
  RunHooks hooks;
  hooks.on_status = [&](const Status& s) {
    if (killed || s.policy_version < 2) return;
    killed = std::system(("pkill -KILL -f '" + pattern + "'").c_str()) == 0;
  };
  RunResult r = run_cluster(cfg, builtin_envs(), hooks, null_logger(), binary_options());
  INFO(r.summary);
  REQUIRE(killed);
  CHECK(r.outcome == RunOutcome::failed);
  CHECK(r.summary.find("learner group") != std::string::npos);
  CHECK(processes_matching(pattern) == 0);
}

TEST_CASE("a token-policy run trains on two learner rank processes, accounts for every segment and replays exactly",
          "[actors][dp][e2e][token][slow]") {
  const test::TempDir t("rlx-dp-tokens");
  const auto& dir = t.path;
  auto cfg = test::token_config("tokens:arithmetic", dir, R"(max_len = 24
[tokens]
group_size = 4
max_new_tokens = 4
eval_tasks = 0
)", "explorers = 2\nenvs_per_explorer = 16\nrewards = 0\n");
  cfg.learner.ranks = 2;  // 1 segment per rank: 2 an update
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger(), binary_options());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  const auto line = test::last_metrics_line(dir);
  INFO(line);
  test::check_segment_identity(line);
  CHECK(test::json_number(line, "segments_lost") == 0);
  CHECK(test::json_number(line, "policy_version") >= 2);
  CHECK(processes_matching("[l]earner-rank --config " + dir.string()) == 0);
  auto [status, out] = replay(dir);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("identical") != std::string::npos);
}
