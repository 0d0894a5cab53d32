#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "assembly/cluster.hpp"
#include "assembly/component_options.hpp"
#include "envs/batch_env.hpp"
#include "explorers/evaluate.hpp"
#include "learner/checkpoint.hpp"
#include "policy/moe_mlp_policy.hpp"
#include "policy/threads.hpp"
#include "rollout_log/replay.hpp"
#include "tests/metrics_fixture.hpp"
#include "tests/rollout_log/log_fixture.hpp"

using namespace rlx;
using namespace rlx::test;

namespace {

ClusterConfig short_run(const fs::path& dir, std::uint64_t max_env_steps) {
  auto cfg = default_config();
  cfg.run.log_dir = dir.string();
  cfg.run.seed = 5;
  cfg.run.stop.max_env_steps = max_env_steps;
  cfg.run.stop.max_seconds = 0;
  cfg.run.report_interval_s = 0.2;
  return cfg;
}

LearnerCoreOptions replay_core_options(const ClusterConfig& cfg) {
  const EnvSpec spec = make_batch_env_factory(cfg.run.env, cfg.external, builtin_envs(), null_logger())(1, 0, 1)->spec();
  return learner_core_options(cfg, spec);
}

// `rlx launch --resume` of `cfg`'s run, to `max_env_steps` in all.
RunResult resume_to(ClusterConfig cfg, std::uint64_t max_env_steps) {
  cfg.run.stop.max_env_steps = max_env_steps;
  RunOptions resume;
  resume.resume = true;
  return run_cluster(cfg, builtin_envs(), {}, null_logger(), resume);
}

// `rlx launch CONFIG`, read line by line until its second report with
// segments trained, then SIGKILLed (if it ends before, reports < 2).
struct KilledLaunch {
  int reports = 0;
  std::string output;
};
KilledLaunch launch_until_trained_twice(const fs::path& config) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execl(RLX_BINARY, RLX_BINARY, "launch", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  KilledLaunch k;
  FILE* in = fdopen(fds[0], "r");
  char line[4096];
  while (k.reports < 2 && std::fgets(line, sizeof line, in)) {
    k.output += line;
    const char* trained = std::strstr(line, " trained ");
    if (trained && std::strtoull(trained + 9, nullptr, 10) > 0) ++k.reports;
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::fclose(in);
  return k;
}

}  // namespace

TEST_CASE("exact replay of a recorded run reproduces every published version bit for bit", "[replay][exact][slow]") {
  TempDir t("rlx-replay-exact");
  auto cfg = short_run(t.path, 30'000);
  RunResult run = run_cluster(cfg, builtin_envs(), {}, null_logger());
  INFO(run.summary);
  REQUIRE(run.outcome == RunOutcome::budget);

  auto r = replay_exact(t.path, replay_core_options(cfg), ReadOptions{});
  REQUIRE(r.ok());
  CHECK(r->versions_checked >= 5);
  CHECK(r->versions_matched == r->versions_checked);
  CHECK(r->admission_mismatches == 0);
  CHECK(r->identical());

  // The comparison can fail: another seed gives other weights at once.
  auto other = replay_core_options(cfg);
  other.trainer.seed += 1;
  auto diverged = replay_exact(t.path, other, ReadOptions{});
  REQUIRE(diverged.ok());
  CHECK_FALSE(diverged->identical());
  CHECK(diverged->versions_matched == 0);
}

TEST_CASE("a resumed run continues the same log with nothing duplicated or lost", "[replay][resume][slow]") {
  TempDir t("rlx-replay-resume");
  auto cfg = short_run(t.path, 20'000);
  REQUIRE(run_cluster(cfg, builtin_envs(), {}, null_logger()).outcome == RunOutcome::budget);
  std::vector<LogEntryData> before;
  REQUIRE(read_all(t.path, false, &before).ok());

  RunResult resumed = resume_to(cfg, 40'000);
  INFO(resumed.summary);
  REQUIRE(resumed.outcome == RunOutcome::budget);
  std::vector<LogEntryData> after;
  auto report = read_all(t.path, false, &after);
  REQUIRE(report.ok());
  CHECK(report->problems.empty());
  REQUIRE(after.size() > before.size());
  // The old entries are untouched; sequence numbers and admission indices
  // go on without a gap or a repeat.
  for (std::size_t i = 0; i < before.size(); ++i) CHECK(after[i].checksum == before[i].checksum);
  std::uint64_t admission = 0, starts = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].seq == i);
    if (after[i].kind == LogKind::start) ++starts;
    if (after[i].kind != LogKind::rollout) continue;
    CHECK(after[i].rollout.record.admission_index == admission);
    ++admission;
  }
  CHECK(starts == 2);
  CHECK(after[before.size()].kind == LogKind::start);
  CHECK(after[before.size()].start.resumed);
  // The resumed learner went on from exactly where the log left it.
  auto r = replay_exact(t.path, replay_core_options(cfg), ReadOptions{});
  REQUIRE(r.ok());
  CHECK(r->identical());
  CHECK(r->versions_checked > 0);
  // The accounting spans both runs: what the first delivered counts as made.
  check_segment_identity(last_metrics_line(t.path));
  CHECK(json_number(last_metrics_line(t.path), "segments_produced") == static_cast<double>(r->core->received()));
}

TEST_CASE("a policy trained offline from a CartPole log reaches a useful return", "[replay][offline][slow]") {
  TempDir t("rlx-replay-offline");
  auto cfg = short_run(t.path, 60'000);
  REQUIRE(run_cluster(cfg, builtin_envs(), {}, null_logger()).outcome != RunOutcome::failed);
  OfflineOptions o;
  o.trainer = replay_core_options(cfg).trainer;
  o.trainer.seed = 99;  // a fresh policy, not the run's
  o.batch_segments = 4;
  o.passes = 3;
  auto trained = train_offline(t.path, o, ReadOptions{});
  REQUIRE(trained.ok());
  CHECK(trained->segments >= 50);
  EvaluateOptions eo;
  eo.policy = cfg.policy;
  eo.episodes = 16;
  eo.seed = 424242;
  auto factory = make_batch_env_factory(cfg.run.env, cfg.external, builtin_envs(), null_logger());
  auto before = evaluate(make_trainer(o.trainer)->weights(), factory, eo);
  auto after = evaluate(trained->weights, factory, eo);
  REQUIRE(before.ok());
  REQUIRE(after.ok());
  INFO("untrained " << before->mean_return << ", offline " << after->mean_return);
  CHECK(before->mean_return < 60);
  CHECK(after->mean_return >= 150);
}

TEST_CASE("a run killed with SIGKILL resumes from its log and replays exactly", "[replay][resume][slow][tools]") {
  TempDir t("rlx-replay-kill");
  std::string toml = embedded_cluster_toml();
  auto set = [&](const std::string& from, const std::string& to) {
    auto at = toml.find(from);
    REQUIRE(at != std::string::npos);
    toml.replace(at, from.size(), to);
  };
  set("log_dir = \"runs/cartpole\"", "log_dir = \"" + t.path.string() + "\"");
  set("max_env_steps = 2_000_000", "max_env_steps = 2_000_000_000");
  set("mean_return = 475.0", "mean_return = 100000.0");  // only the budget ends it
  const auto config = t.path / "c.toml";
  {
    std::ofstream out(config);
    out << toml;
  }
  // Killed wherever it is once its second report shows segments trained
  // (so the log holds some, however slow the machine): mid-update, mid-write, anywhere.
  const auto first = launch_until_trained_twice(config);
  INFO(first.output);
  REQUIRE(first.reports == 2);
  std::uint64_t steps = 0;
  {
    ReadOptions ro;
    ro.skip_bad = true;  // the kill may have torn the last record
    auto r = read_log(t.path, ro, [&](const LogEntryData& e, const LogPosition&) {
      if (e.kind == LogKind::rollout) steps += e.rollout.segment.env_steps();
      return true;
    });
    REQUIRE(r.ok());
  }
  // Resume for a few more segments' worth of steps.
  set("max_env_steps = 2_000_000_000", "max_env_steps = " + std::to_string(steps + 20'000));
  {
    std::ofstream out(config, std::ios::trunc);
    out << toml;
  }
  const std::string quiet = " > " + (t.path / "out.txt").string() + " 2>&1";
  const int status = std::system((RLX_BINARY " launch --resume " + config.string() + quiet).c_str());
  auto out = read_bytes(t.path / "out.txt");
  INFO(std::string(out.begin(), out.end()));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);  // budget: the resumed run went on to its new step limit
  std::vector<LogEntryData> entries;
  auto strict = read_all(t.path, false, &entries);
  REQUIRE(strict.ok());  // the torn record, if any, was cut on resume
  auto cfg = parse_config(toml, "c.toml", builtin_envs().names());
  REQUIRE(cfg.ok());
  // The learner's thread count is part of what makes updates bit-identical
  // (rlx launch and rlx replay set it; this process must too).
  configure_compute_threads(static_cast<int>(cfg->learner.threads));
  auto r = replay_exact(t.path, replay_core_options(*cfg), ReadOptions{});
  REQUIRE(r.ok());
  CHECK(r->identical());
  CHECK(r->core->stats().env_steps() >= steps + 20'000);
  // Segments in flight when the first run was killed were never recorded:
  // the resumed accounting starts from what the log holds, and adds up.
  check_segment_identity(last_metrics_line(t.path));
}

TEST_CASE("a run that stops between two checkpoints leaves one of its last update, which resumes it",
          "[replay][resume][checkpoint][slow]") {
  TempDir t("rlx-final-checkpoint");
  auto cfg = short_run(t.path, 25'000);
  cfg.learner.batch_segments = 1;       // each arrival trained at once: no batch waits at the end
  cfg.learner.checkpoint_every = 1000;  // a mark this run never reaches
  REQUIRE(run_cluster(cfg, builtin_envs(), {}, null_logger()).outcome == RunOutcome::budget);
  auto files = list_checkpoints(t.path / "checkpoints");
  REQUIRE(files.size() == 1);
  auto loaded = load_checkpoint(files[0], replay_core_options(cfg));
  REQUIRE(loaded.ok());
  // The learner the whole log describes, at the run's end: the same arrivals, version and weights.
  auto full = replay_exact(t.path, replay_core_options(cfg), ReadOptions{});
  REQUIRE(full.ok());
  CHECK(full->identical());
  CHECK(full->core->trainer().version() > 0);
  CHECK(loaded->core->received() == full->core->received());
  CHECK(loaded->core->trainer().version() == full->core->trainer().version());
  CHECK(loaded->core->weights().checksum == full->core->weights().checksum);

  // --resume takes it: nothing left to replay after it.
  std::ostringstream lines;
  auto log = std::make_shared<spdlog::logger>("resume", std::make_shared<spdlog::sinks::ostream_sink_mt>(lines));
  cfg.run.stop.max_env_steps = 45'000;
  RunOptions resume;
  resume.resume = true;
  RunResult r = run_cluster(cfg, builtin_envs(), {}, log, resume);
  INFO(r.summary);
  INFO(lines.str());
  CHECK(r.outcome == RunOutcome::budget);
  CHECK(lines.str().find("resuming from checkpoint " + files[0].string()) != std::string::npos);
  CHECK(lines.str().find("): 0 arrivals after it replayed from the log") != std::string::npos);
  auto after = replay_exact(t.path, replay_core_options(cfg), ReadOptions{});
  REQUIRE(after.ok());
  CHECK(after->identical());
  check_segment_identity(last_metrics_line(t.path));
}

TEST_CASE("a resumed run starts from its newest checkpoint and replays only the log after it",
          "[replay][resume][checkpoint][slow]") {
  TempDir t("rlx-replay-checkpoint");
  auto cfg = short_run(t.path, 25'000);
  cfg.learner.checkpoint_every = 2;
  cfg.learner.checkpoint_keep = 2;
  REQUIRE(run_cluster(cfg, builtin_envs(), {}, null_logger()).outcome == RunOutcome::budget);
  auto files = list_checkpoints(t.path / "checkpoints");
  REQUIRE(files.size() == 2);
  // The newest checkpoint plus the log's tail is the learner the log describes.
  auto loaded = load_checkpoint(files[0], replay_core_options(cfg));
  REQUIRE(loaded.ok());
  const auto held = loaded->core->received();
  CHECK(held > 0);
  auto tail = replay_exact(t.path, replay_core_options(cfg), ReadOptions{}, {}, loaded->core);
  REQUIRE(tail.ok());
  CHECK(tail->skipped == held);
  CHECK(tail->identical());
  auto full = replay_exact(t.path, replay_core_options(cfg), ReadOptions{});
  REQUIRE(full.ok());
  CHECK(full->core->weights().checksum == tail->core->weights().checksum);
  CHECK(full->core->received() == tail->core->received());
  // The checkpoint kept the per-explorer arrival counts the accounting needs.
  CHECK(full->core->by_explorer() == tail->core->by_explorer());
  CHECK(loaded->core->by_explorer().size() == static_cast<std::size_t>(cfg.total_explorers()));

  RunResult r = resume_to(cfg, 45'000);
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  auto after = replay_exact(t.path, replay_core_options(cfg), ReadOptions{});
  REQUIRE(after.ok());
  CHECK(after->identical());
  CHECK(after->core->stats().env_steps() >= 45'000);
  check_segment_identity(last_metrics_line(t.path));
}
