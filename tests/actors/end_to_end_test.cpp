#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "messages/codec.hpp"
#include "rollout_log/log_reader.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

std::string last_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

std::uint64_t json_uint(const std::string& line, const std::string& key) {
  auto at = line.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  return std::stoull(line.substr(at + key.size() + 3));
}

// Reads the rollout log: every entry must verify; returns the rollout count.
std::uint64_t count_records(const std::filesystem::path& log_dir) {
  std::uint64_t n = 0;
  auto report = read_log(log_dir, ReadOptions{}, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind != LogKind::rollout) return true;
    CHECK(e.rollout.record.admission_index == n);
    ++n;
    return true;
  });
  INFO((report ? "" : report.error().message));
  REQUIRE(report.ok());
  return n;
}

// The default topology writing into a fresh temporary log directory of
// this process's own; with `max_env_steps`, stopping there and at no time limit.
ClusterConfig e2e_config(const std::string& name, std::filesystem::path* dir, std::int64_t max_env_steps = 0) {
  auto cfg = test::default_config();
  *dir = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(*dir);
  cfg.run.log_dir = dir->string();
  if (max_env_steps > 0) {
    cfg.run.stop.max_env_steps = max_env_steps;
    cfg.run.stop.max_seconds = 0;
  }
  return cfg;
}

}  // namespace

TEST_CASE("a seeded short CartPole run learns and accounts for every segment", "[actors][e2e][slow]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-test", &dir);
  cfg.run.seed = 3;
  cfg.run.stop.mean_return = 200.0;       // well above random (~22)
  cfg.run.stop.max_env_steps = 600'000;   // bounded: the test ends either way
  cfg.run.stop.max_seconds = 0;
  cfg.run.report_interval_s = 0.2;
  int statuses = 0;
  RunHooks hooks;
  hooks.on_status = [&](const Status&) { ++statuses; };
  RunResult r = run_cluster(cfg, builtin_envs(), hooks, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::solved);
  CHECK(statuses > 0);

  auto line = last_line(dir / "metrics.jsonl");
  INFO(line);
  const auto received = json_uint(line, "segments_received");
  const auto trained = json_uint(line, "segments_trained");
  const auto dropped = json_uint(line, "segments_dropped_stale");
  const auto rejected = json_uint(line, "segments_rejected");
  CHECK(received == trained + dropped + rejected);
  CHECK(rejected == 0);
  // Every segment the explorers made was received: the last line is written after the drain.
  CHECK(json_uint(line, "segments_produced") == received);
  CHECK(json_uint(line, "segments_lost") == 0);
  CHECK(json_uint(line, "segments_in_flight") == 0);
  CHECK(json_uint(line, "segments_vanished") == 0);
  CHECK(json_uint(line, "policy_version") > 0);
  // Every segment the learner saw is in the rollout log, in order.
  CHECK(count_records(dir) == received);
}

TEST_CASE("a run with max_updates stops as a budget once the learner has published that many versions",
          "[actors][e2e]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-max-updates", &dir, 2'000'000);
  cfg.run.stop.max_updates = 5;
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  CHECK(r.summary.find("max_updates 5 reached") != std::string::npos);
  const std::string line = last_line(dir / "metrics.jsonl");
  INFO(line);
  CHECK(json_uint(line, "policy_version") >= 5);
  CHECK(json_uint(line, "policy_version") <= 12);  // the drain trains what is in flight, no more
  CHECK(json_uint(line, "env_steps") < 200'000);  // not the step budget
}

TEST_CASE("the rollout log is readable by the capnp tool alone", "[actors][e2e][slow][recorder]") {
  REQUIRE(std::system("command -v capnp > /dev/null 2>&1") == 0);  // installed with libcapnp-dev
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-capnp-decode-test", &dir);
  cfg.run.stop.max_env_steps = 20'000;
  cfg.run.report_interval_s = 0.2;
  run_cluster(cfg, builtin_envs(), {}, null_logger());
  auto file = dir / "rollouts" / "rollouts-000000.capnp";
  auto out = dir / "decoded.txt";
  std::string cmd = "cd " RLX_SOURCE_DIR " && capnp decode messages/log.capnp LogEntry < " + file.string() + " > " +
                    out.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text.find("rollout = (") != std::string::npos);
  CHECK(text.find("weights = (") != std::string::npos);
  CHECK(text.find("start = (") != std::string::npos);
  CHECK(text.find("verdict = trained") != std::string::npos);
  CHECK(text.find("explorerId") != std::string::npos);
}

TEST_CASE("a Python CartPole through the external-env protocol learns", "[actors][e2e][slow][external]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-external", &dir);
  cfg.run.seed = 3;
  cfg.run.env = std::string("exec:python3 ") + RLX_SOURCE_DIR + "/examples/envs/cartpole.py";
  cfg.explorer.env_placement = EnvPlacement::local;
  cfg.run.stop.mean_return = 200.0;
  cfg.run.stop.max_env_steps = 600'000;
  cfg.run.stop.max_seconds = 0;
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::solved);
}

TEST_CASE("a run whose env process keeps crashing ends as failed, not hung", "[actors][e2e][external][defensive]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-crashing", &dir);
  cfg.run.env = std::string("exec:python3 ") + RLX_SOURCE_DIR + "/tests/envs/fixtures/bad_env.py crash 5";
  cfg.external.max_restarts = 2;
  cfg.run.stop.max_env_steps = 1'000'000;
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::failed);
  CHECK(r.summary.find("no explorer left") != std::string::npos);
}

namespace {
// The sum task (every step ends a one-step episode whose reward is
// deferred) with `rewards` reward workers, run to `max_env_steps`.
ClusterConfig sum_task(const std::string& name, std::filesystem::path* dir, int rewards, std::int64_t max_env_steps) {
  auto cfg = e2e_config(name, dir, max_env_steps);
  cfg.run.env = std::string("exec:python3 ") + RLX_SOURCE_DIR + "/examples/envs/sum_task.py";
  cfg.nodes.front().rewards = rewards;
  return cfg;
}
}  // namespace

TEST_CASE("a task whose every reward is deferred is learned from the reward pool's scores",
          "[actors][e2e][reward][external]") {
  std::filesystem::path dir;
  auto cfg = sum_task("rlx-e2e-deferred", &dir, 2, 1'000'000);
  cfg.run.stop.mean_return = 0.9;  // a random answer is right 1 time in 5
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::solved);
  const std::string line = last_line(dir / "metrics.jsonl");
  CHECK(json_uint(line, "segments_produced") ==
        json_uint(line, "segments_trained") + json_uint(line, "segments_dropped_stale") +
            json_uint(line, "segments_rejected"));
  CHECK(json_uint(line, "segments_in_flight") == 0);
}

TEST_CASE("a coordinator that dies ends the run as failed within seconds, with every actor gone",
          "[actors][e2e][defensive]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-coordinator-dies", &dir, 100'000'000);
  RunHooks hooks;
  // Called from the coordinator's report tick: a handler that throws.
  hooks.on_status = [](const Status&) { throw std::runtime_error("a broken invariant (test)"); };
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_cluster(cfg, builtin_envs(), hooks, null_logger());  // returns once every actor is done
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::failed);
  CHECK(r.summary.find("the coordinator died") != std::string::npos);
  CHECK(r.summary.find("a broken invariant (test)") != std::string::npos);
  CHECK(took < 30.0);
}

TEST_CASE("a coordinator stuck in a handler ends the run as failed after the bound instead of hanging the launcher",
          "[actors][e2e][defensive]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-coordinator-stuck", &dir, 100'000'000);
  cfg.run.report_interval_s = 0.1;  // the bound is then the test's 2 s, not 10 intervals
  std::promise<void> release;
  auto released = release.get_future().share();
  RunHooks hooks;
  // Called from the coordinator's report tick: the second call does not return until the test says so.
  auto calls = std::make_shared<std::atomic<int>>(0);
  hooks.on_status = [released, calls](const Status&) {
    if (++*calls == 2) released.wait();
  };
  RunOptions options;
  options.coordinator_bound = std::chrono::seconds(2);
  options.shutdown_bound = std::chrono::seconds(2);
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_cluster(cfg, builtin_envs(), hooks, null_logger(), options);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::failed);
  CHECK(r.summary.find("the coordinator has not ticked for") != std::string::npos);
  CHECK(r.actors_left >= 1);  // the coordinator, at least, is still in its handler
  CHECK(took < 60.0);
  REQUIRE(r.left_behind);
  release.set_value();     // the handler returns, the coordinator takes its exit and its linked actors go with it
  r.left_behind.reset();   // waits for them
}

TEST_CASE("deferred rewards without a reward pool are masked, never scored, and counted by reason in metrics.jsonl",
          "[actors][e2e][reward][infra]") {
  std::filesystem::path dir;
  auto cfg = sum_task("rlx-e2e-no-pool", &dir, 0, 4000);
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  const std::string line = last_line(dir / "metrics.jsonl");
  INFO(line);
  // Every step of the sum task ends a one-step episode whose reward is deferred.
  const auto masked = json_uint(line, "rows_masked");
  CHECK(masked >= 4000);
  CHECK(masked == json_uint(line, "env_steps"));
  CHECK(line.find("\"no_reward_pool\":" + std::to_string(masked)) != std::string::npos);
  CHECK(json_uint(line, "episodes") == 0);  // none of them is a return
  CHECK(json_uint(line, "reward_retries") == 0);
}

TEST_CASE("a rollout log that fails mid-run stops the run naming the file and the error, or is counted with continue",
          "[actors][e2e][recorder][infra]") {
  for (const auto on_error : {OnRecordError::stop, OnRecordError::go_on}) {
    DYNAMIC_SECTION("on_error = " << to_string(on_error)) {
      std::filesystem::path dir;
      auto cfg = e2e_config("rlx-e2e-log-full", &dir, 30'000);
      cfg.record.on_error = on_error;
      RunOptions options;
      options.log_fail_after_bytes = 200'000;  // a disk that fills a few dozen segments into the run
      RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger(), options);
      INFO(r.summary);
      const std::string line = last_line(dir / "metrics.jsonl");
      INFO(line);
      const auto unrecorded = json_uint(line, "segments_unrecorded");
      CHECK(unrecorded >= 1);
      CHECK(r.summary.find("NOT recorded") != std::string::npos);
      if (on_error == OnRecordError::stop) {
        CHECK(r.outcome == RunOutcome::failed);
        CHECK(r.summary.find("the rollout log could not be written: ") != std::string::npos);
        CHECK(r.summary.find("rollouts-000000.capnp: write failed (No space left on device)") != std::string::npos);
        CHECK(json_uint(line, "env_steps") < 30'000);
      } else {
        CHECK(r.outcome == RunOutcome::budget);  // it went on to its step budget
      }
      // Whatever happened, what the log holds reads back whole.
      CHECK(count_records(dir) + unrecorded >= json_uint(line, "segments_received"));
    }
  }
}

TEST_CASE("a segment lost on its way to the learner shows as vanished, warned of and in the summary, not in flight",
          "[actors][e2e][ledger][infra]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-vanished", &dir, 20'000);
  RunOptions options;
  options.drop_segments = {7};  // the 7th segment to reach the learner never does
  std::ostringstream said;
  auto log = std::make_shared<spdlog::logger>("vanished", std::make_shared<spdlog::sinks::ostream_sink_mt>(said));
  log->set_level(spdlog::level::warn);
  RunResult r = run_cluster(cfg, builtin_envs(), {}, log, options);
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  const std::string line = last_line(dir / "metrics.jsonl");
  INFO(line);
  CHECK(json_uint(line, "segments_vanished") == 1);
  CHECK(json_uint(line, "segments_in_flight") == 0);
  CHECK(json_uint(line, "segments_lost") == 0);
  CHECK(json_uint(line, "segments_produced") == json_uint(line, "segments_received") + 1);
  CHECK(r.summary.find("VANISHED 1") != std::string::npos);
  INFO(said.str());
  CHECK(said.str().find("that never arrived (1 vanished in all)") != std::string::npos);  // the learner names the indices
  CHECK(said.str().find("1 segments vanished between explorers and the learner") != std::string::npos);  // the head warns
  // The learner's own counts are untouched by what it never saw.
  CHECK(json_uint(line, "segments_received") ==
        json_uint(line, "segments_trained") + json_uint(line, "segments_dropped_stale") +
            json_uint(line, "segments_rejected"));
  CHECK(count_records(dir) == json_uint(line, "segments_received"));
}

TEST_CASE("an actor that does not exit when the run ends is left behind after the bound, and the run has failed",
          "[actors][e2e][defensive]") {
  std::filesystem::path dir;
  auto cfg = e2e_config("rlx-e2e-stuck", &dir, 5'000);
  std::promise<void> release;
  RunOptions options;
  options.stuck_actor = release.get_future().share();
  options.shutdown_bound = std::chrono::seconds(2);
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger(), options);
  INFO(r.summary);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));  // the run, then the 2 s bound
  CHECK(r.outcome == RunOutcome::failed);
  CHECK(r.actors_left == 1);
  CHECK(r.summary.find("FAILED to end: 1 actors did not exit") != std::string::npos);
  REQUIRE(r.left_behind);
  release.set_value();  // the stuck actor ends; destroying the system handed back waits for it
  r.left_behind.reset();
}
