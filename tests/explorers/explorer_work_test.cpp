// The explorer's compute without its actor: a step's result becomes a
// segment every T steps, and a broken environment is an env_failed error,
// never a step.
#include <catch2/catch.hpp>

#include "envs/vector_env.hpp"
#include "explorers/explorer_work.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

const EnvFactory& cartpole() {
  static const EnvRegistry envs = builtin_envs();
  return *envs.find("cartpole");
}

// CartPole until step `fail_at` (counted from 1), which throws as a dead external env does.
class BreakingEnv : public BatchEnv {
 public:
  BreakingEnv(int n, int fail_at) : inner_(cartpole(), 1, 0, n), fail_at_(fail_at) {}
  const EnvSpec& spec() const override { return inner_.spec(); }
  int size() const override { return inner_.size(); }
  void reset(EnvStepResultData& out) override {
    if (fail_at_ == 0) throw EnvFailure("could not start");
    inner_.reset(out);
  }
  void step(const std::vector<std::int64_t>& actions, EnvStepResultData& out) override {
    if (++steps_ == fail_at_) throw EnvFailure("the env process died");
    inner_.step(actions, out);
  }

 private:
  VectorEnv inner_;
  int fail_at_;
  int steps_ = 0;
};

ExplorerWorkOptions local_options(std::int64_t T, int B, int fail_at) {
  ExplorerWorkOptions o;
  o.rollout = RolloutOptions{3, B, 4, 2, T, 1, test::default_config().policy};
  o.local_env = [B, fail_at](std::uint64_t, std::uint64_t, int) { return std::make_unique<BreakingEnv>(B, fail_at); };
  return o;
}

}  // namespace

TEST_CASE("local envs give a segment every T steps after the reset", "[explorers]") {
  ExplorerWork work(local_options(5, 3, -1));
  REQUIRE(work.steps_here());
  REQUIRE_FALSE(work.tokens());
  REQUIRE(work.start_here().ok());
  auto first = work.finish_step_here(false);  // the reset's result: observations only
  REQUIRE(first.ok());
  CHECK_FALSE(first->segment.has_value());
  int segments = 0;
  for (int step = 1; step <= 15; ++step) {
    REQUIRE(work.begin_step_here().ok());
    auto out = work.finish_step_here(true);
    REQUIRE(out.ok());
    CHECK(out->segment.has_value() == (step % 5 == 0));
    if (out->segment) {
      ++segments;
      CHECK(out->segment->num_steps == 5);
      CHECK(out->segment->num_envs == 3);
    }
    CHECK(out->deferred.empty());  // CartPole rewards every step itself
  }
  CHECK(segments == 3);
}

TEST_CASE("an environment that throws or answers out of shape is an env_failed error", "[explorers]") {
  ExplorerWork cannot_start(local_options(5, 2, 0));
  auto started = cannot_start.start_here();
  REQUIRE_FALSE(started.ok());
  CHECK(started.error().code == Errc::env_failed);
  CHECK(started.error().message == "could not start");

  ExplorerWork dies(local_options(5, 2, 3));
  REQUIRE(dies.start_here().ok());
  REQUIRE(dies.finish_step_here(false).ok());
  for (int step = 1; step <= 2; ++step) {
    REQUIRE(dies.begin_step_here().ok());
    REQUIRE(dies.finish_step_here(true).ok());
  }
  auto died = dies.begin_step_here();
  REQUIRE_FALSE(died.ok());
  CHECK(died.error().code == Errc::env_failed);

  // An env actor's reply for 5 envs where the explorer runs 2.
  ExplorerWorkOptions remote = local_options(5, 2, -1);
  remote.local_env = {};
  ExplorerWork work(remote);
  CHECK_FALSE(work.steps_here());
  CHECK(work.reset_request().num_envs == 2);
  VectorEnv five(cartpole(), 1, 0, 5);
  EnvStepResultData r;
  five.reset(r);
  auto out = work.observe(r, false);
  REQUIRE_FALSE(out.ok());
  CHECK(out.error().code == Errc::env_failed);
  CHECK(out.error().message.find("wrong shape") != std::string::npos);
  // The step request numbers its steps and carries one action per env.
  VectorEnv two(cartpole(), 1, 0, 2);
  two.reset(r);
  REQUIRE(work.observe(r, false).ok());
  const auto step = work.step_request();
  CHECK(step.actions.size() == 2);
  CHECK(step.step_index == 1);
  two.step(step.actions, r);
  REQUIRE(work.observe(r, true).ok());
  CHECK(work.step_request().step_index == 2);
}
