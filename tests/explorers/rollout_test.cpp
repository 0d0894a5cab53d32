#include <catch2/catch.hpp>

#include "envs/vector_env.hpp"
#include "explorers/rollout.hpp"
#include "messages/codec.hpp"
#include "learner/mlp_trainer.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {
RolloutOptions rollout_options(std::int64_t T, std::int64_t B) {
  auto cfg = test::default_config();
  return RolloutOptions{3, B, 4, 2, T, 1, cfg.policy};
}
}  // namespace

TEST_CASE("an explorer records the version of every step across a weight swap", "[explorers][weights]") {
  auto cfg = test::default_config();
  MlpTrainer trainer(TrainerOptions{cfg.learner, cfg.policy, 4, 2, 1});
  Rollout rollout(rollout_options(6, 2));
  VectorEnv env(*builtin_envs().find("cartpole"), 1, 0, 2);
  EnvStepResultData r;
  env.reset(r);
  for (int t = 0; t < 6; ++t) {
    if (t == 3) {  // new weights arrive between two steps
      auto w = trainer.weights();
      w.version = 5;
      REQUIRE(rollout.load_weights(w).ok());
    }
    auto actions = rollout.act(r.observations);
    env.step(actions, r);
    CHECK(rollout.observe(r) == (t == 5));
  }
  Segment s = rollout.take_segment();
  CHECK((s.policy_versions == std::vector<std::uint64_t>{0, 0, 0, 5, 5, 5}));
  CHECK(s.oldest_version() == 0);
  CHECK(s.explorer_id == 3);
  CHECK(s.sequence == 0);
  CHECK(s.observations.size() == 6 * 2 * 4);
  CHECK(s.bootstrap_observations == r.observations);
  for (float lp : s.behaviour_log_probs) CHECK(lp <= 0.0f);
  CHECK(rollout.steps_in_segment() == 0);
}

TEST_CASE("an explorer reports the return and length of every finished episode", "[explorers]") {
  Rollout rollout(rollout_options(50, 1));
  EnvStepResultData r{4, std::vector<float>(4, 0.0f), {0}, {0}, {0}, 0, {}, {}, {}};
  for (int t = 0; t < 50; ++t) {
    rollout.act(r.observations);
    r.rewards = {0.5f};
    r.terminated = {static_cast<std::uint8_t>(t == 9 || t == 29)};
    rollout.observe(r);
  }
  Segment s = rollout.take_segment();
  REQUIRE(s.episode_returns.size() == 2);
  CHECK(s.episode_returns[0] == 5.0f);   // steps 0..9
  CHECK(s.episode_returns[1] == 10.0f);  // steps 10..29
  CHECK((s.episode_lengths == std::vector<std::uint32_t>{10, 20}));
  CHECK(rollout.steps_in_segment() == 0);
}

TEST_CASE("an explorer refuses weights that do not fit its policy", "[explorers][weights][defensive]") {
  Rollout rollout(rollout_options(4, 1));
  WeightSetData w;
  w.version = 9;
  w.tensors.push_back({"nope", {1}, {0.0f}});
  auto r = rollout.load_weights(w);
  REQUIRE_FALSE(r.ok());
  CHECK(rollout.version() == 0);
}

TEST_CASE("an explorer drops the steps in hand and goes on with the next segment and its running episodes",
          "[explorers][resume]") {
  auto cfg = test::default_config();
  MlpTrainer trainer(TrainerOptions{cfg.learner, cfg.policy, 4, 2, 1});
  Rollout rollout(rollout_options(4, 2));
  VectorEnv env(*builtin_envs().find("cartpole"), 1, 0, 2);
  EnvStepResultData r;
  env.reset(r);
  auto w = trainer.weights();
  w.version = 7;
  REQUIRE(rollout.load_weights(w).ok());
  for (int t = 0; t < 3; ++t) {
    env.step(rollout.act(r.observations), r);
    rollout.observe(r);
  }
  CHECK(rollout.newest_in_hand() == 7);
  CHECK(rollout.drop_segment() == 0);  // the dropped segment's sequence
  CHECK(rollout.steps_in_segment() == 0);
  CHECK(rollout.newest_in_hand() == 0);
  w.version = 2;
  REQUIRE(rollout.load_weights(w).ok());
  bool complete = false;
  for (int t = 0; t < 4; ++t) {
    env.step(rollout.act(r.observations), r);
    complete = rollout.observe(r);
  }
  REQUIRE(complete);
  Segment s = rollout.take_segment();
  CHECK(s.sequence == 1);
  CHECK((s.policy_versions == std::vector<std::uint64_t>{2, 2, 2, 2}));
  CHECK(s.observations.size() == 4 * 2 * 4);
}

TEST_CASE("a segment carries the state each time limit cut an episode in, or the step's own where the env does not say",
          "[explorers][truncation]") {
  Rollout rollout(rollout_options(2, 2));
  const std::vector<float> obs{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  // Step 0: env 1 is cut by its time limit, and says in which state.
  rollout.act(obs);
  EnvStepResultData r;
  r.obs_dim = 4;
  r.observations = obs;
  r.rewards = {1, 1};
  r.terminated = {0, 0};
  r.truncated = {0, 1};
  r.final_observations = {0, 0, 0, 0, 9, 8, 7, 6};
  CHECK_FALSE(rollout.observe(r));
  // Step 1: env 0 is cut, and env 1 ends both ways (a termination: no cut); no final states given.
  rollout.act(obs);
  r.truncated = {1, 1};
  r.terminated = {0, 1};
  r.final_observations.clear();
  CHECK(rollout.observe(r));
  const Segment s = rollout.take_segment();
  CHECK(s.truncations() == 2);
  CHECK(s.truncation_observations == std::vector<float>{9, 8, 7, 6, 0.1f, 0.2f, 0.3f, 0.4f});
  // Through the wire and back.
  auto back = decode<Segment>(encode(s, "test"));
  REQUIRE(back.ok());
  CHECK(back->truncation_observations == s.truncation_observations);
}
