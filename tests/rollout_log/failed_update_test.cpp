// A failed update is not "trained": its batch's segments are counted
// update_failed, the log takes their verdict back with an entry after
// them, and a replay, offline training and `rlx inspect` all honour it.
#include "assembly/component_options.hpp"
#include "envs/batch_env.hpp"
#include "learner/learner_core.hpp"
#include "rollout_log/inspect.hpp"
#include "rollout_log/replay.hpp"
#include "tests/rollout_log/log_fixture.hpp"

using namespace rlx;
using namespace rlx::test;

namespace {

LearnerCoreOptions cartpole_core() {
  const auto cfg = default_config();
  const EnvSpec spec = make_batch_env_factory(cfg.run.env, cfg.external, builtin_envs(), null_logger())(1, 0, 1)->spec();
  return learner_core_options(cfg, spec);
}

RolloutRecordData trained_at(std::uint64_t index) { return {Verdict::trained, 0, index, 0, ""}; }

// A segment the door would refuse (its observations are not CartPole's),
// taken at the log's word, so that the update on its batch fails.
Segment unfit_segment() {
  Segment s = make_segment(8, 2, 0);
  s.obs_dim = 3;
  s.observations.resize(8 * 2 * 3);
  s.bootstrap_observations.resize(2 * 3);
  return s;
}

}  // namespace

TEST_CASE("a batch whose update fails counts as update failed, not trained, and the next batch trains",
          "[learner][failures][infra]") {
  LearnerCore core(cartpole_core());
  const std::size_t n = core.options().batch_segments;
  for (std::size_t i = 0; i + 1 < n; ++i) core.admit_recorded(trained_at(i), make_segment(8, 2, 0));
  core.admit_recorded(trained_at(n - 1), unfit_segment());
  REQUIRE(core.batch_full());
  auto failed = core.train();
  REQUIRE_FALSE(failed.ok());
  CHECK(core.trainer().version() == 0);
  CHECK(core.admission().accepted() == 0);
  CHECK(core.update_failed() == n);
  CHECK(core.batch_size() == 0);
  for (std::size_t i = 0; i < n; ++i) core.admit_recorded(trained_at(n + i), make_segment(8, 2, 0));
  REQUIRE(core.train().ok());
  CHECK(core.admission().accepted() == n);
  CHECK(core.update_failed() == n);
  CHECK(core.received() == 2 * n);
}

TEST_CASE("the learner's door refuses an action the policy does not have instead of failing its batch",
          "[learner][failures][defensive]") {
  LearnerCore core(cartpole_core());
  Segment s = make_segment(8, 2, 0);
  s.actions[5] = 7;  // CartPole has 2
  const Arrival a = core.admit(s, "");
  CHECK(a.verdict == Verdict::rejected);
  CHECK(a.reason == "action 7 out of range (the policy has 2)");
  s.actions[5] = -1;
  CHECK(core.admit(s, "").verdict == Verdict::rejected);
  CHECK(core.batch_size() == 0);
}

TEST_CASE("a log that records a failed update replays it as failed, trains offline without it and counts it in "
          "inspect",
          "[replay][failures][infra]") {
  TempDir t("rlx-failed-update");
  const auto co = cartpole_core();
  const std::size_t n = co.batch_segments;
  {
    auto w = LogWriter::create(LogWriterOptions{t.path});
    REQUIRE(w.ok());
    std::uint64_t index = 0;
    for (std::size_t i = 0; i < n; ++i) REQUIRE((*w)->write_rollout(trained_at(index++), encode(make_segment(8, 2, 0), "t")).ok());
    REQUIRE((*w)->write_failed_update(FailedUpdateData{0, static_cast<std::uint32_t>(n), "a rank ran out of memory"}).ok());
    for (std::size_t i = 0; i < n; ++i) REQUIRE((*w)->write_rollout(trained_at(index++), encode(make_segment(8, 2, 0), "t")).ok());
    REQUIRE((*w)->close().ok());
  }
  auto r = replay_exact(t.path, co, ReadOptions{});
  REQUIRE(r.ok());
  CHECK(r->failed_updates == 1);
  CHECK(r->batch_mismatches == 0);
  CHECK(r->core->updates() == 1);  // the second batch only: the log said the first did not train
  CHECK(r->core->update_failed() == n);
  CHECK(r->core->admission().accepted() == n);

  OfflineOptions oo;
  oo.trainer = co.trainer;
  oo.batch_segments = n;
  oo.passes = 1;
  auto off = train_offline(t.path, oo, ReadOptions{});
  REQUIRE(off.ok());
  CHECK(off->segments == n);  // the failed batch is not training data

  auto s = summarise_log(t.path, ReadOptions{});
  REQUIRE(s.ok());
  CHECK(s->trained == n);
  CHECK(s->update_failed == n);
  CHECK(summary_text(*s).find("update failed " + std::to_string(n)) != std::string::npos);
}

TEST_CASE("a failed update the log records for another batch than the replay's is a divergence",
          "[replay][failures]") {
  TempDir t("rlx-failed-update-mismatch");
  const auto co = cartpole_core();
  {
    auto w = LogWriter::create(LogWriterOptions{t.path});
    REQUIRE(w.ok());
    REQUIRE((*w)->write_rollout(trained_at(0), encode(make_segment(8, 2, 0), "t")).ok());
    REQUIRE((*w)->write_failed_update(FailedUpdateData{0, 1, "?"}).ok());  // no full batch here
    REQUIRE((*w)->close().ok());
  }
  auto r = replay_exact(t.path, co, ReadOptions{});
  REQUIRE(r.ok());
  CHECK(r->batch_mismatches == 1);
  CHECK(r->diverged());
  CHECK(r->first_divergence().find("another batch") != std::string::npos);
}
