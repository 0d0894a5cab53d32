// Rows the machinery failed to give an outcome (InfraFailure) are masked
// out of the update: whatever they hold, the step is bit for bit the one
// without them; GRPO judges a group by its scored rows; learning goes on
// with a third of the rows masked; the run's counters leave them out of
// the mean return and count them by reason.
#include "tests/torch_catch.hpp"

#include "learner/mlp_trainer.hpp"
#include "learner/run_stats.hpp"
#include "learner/token_losses.hpp"
#include "tests/helpers.hpp"
#include "tests/learner/token_fixture.hpp"

using namespace rlx;

namespace {

std::vector<std::uint8_t> rows(std::initializer_list<int> v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("GRPO over scored rows: a masked row gets 0, its group is judged by the rest, a group of one is dropped",
          "[learner][token][grpo][infra]") {
  const auto rewards = torch::tensor({1.0f, 0.0f, 0.0f, 1.0f, 2.0f, 5.0f, 5.0f, 5.0f});
  const auto scored = torch::tensor({1, 1, 1, 0, 0, 0, 0, 1}).to(torch::kBool);
  const auto adv = grpo_advantages_scored(rewards, scored, 4);
  // Group 0 over {1, 0, 0}: mean 1/3, unbiased std sqrt(1/3).
  CHECK(adv[0].item<float>() == Approx((1 - 1.0 / 3) / std::sqrt(1.0 / 3)).epsilon(1e-4));
  CHECK(adv[1].item<float>() == Approx((0 - 1.0 / 3) / std::sqrt(1.0 / 3)).epsilon(1e-4));
  CHECK(adv[3].item<float>() == 0.0f);  // masked
  for (int i = 4; i < 8; ++i) CHECK(adv[i].item<float>() == 0.0f);  // one scored row: nothing to compare
  // Every row scored: the plain GRPO advantages.
  const auto all = torch::ones({8}, torch::kBool);
  CHECK(torch::allclose(grpo_advantages_scored(rewards, all, 4), grpo_advantages(rewards, 4)));
  // Scored rows that agree teach nothing, whatever the masked row holds.
  const auto alike = grpo_advantages_scored(torch::tensor({1.0f, 1.0f, 9.0f, 1.0f}),
                                            torch::tensor({1, 1, 0, 1}).to(torch::kBool), 4);
  CHECK(alike.abs().sum().item<float>() == 0.0f);
}

TEST_CASE("a masked token row trains nothing: whatever its reward or hint, the step is bit-identical",
          "[learner][token][infra]") {
  for (const std::string algorithm : {"grpo", "ppo"}) {
    DYNAMIC_SECTION(algorithm) {
      auto o = test::tiny_token_trainer(12);
      o.algorithm = *choice_of<Algorithm>(algorithm);
      o.epochs = 2;
      o.hint_coef = 0.5;
      TokenTrainer a(o), b(o), unmasked(o);
      const std::vector<std::vector<std::int64_t>> prompts{{3, 4}, {3, 4}, {3, 4}, {3, 4}, {5}, {5}, {5}, {5}};
      TokenBatch x = test::sampled_batch(a, prompts, {1, 0, 1000, 1, 0.5f, -1000, 0, 1}, 4, 4, 9);
      x.masked = rows({0, 0, 1, 0, 0, 1, 0, 0});
      x.teacher_prompts.assign(8, {});
      x.teacher_prompts[2] = {6, 6, 3, 4};  // a hint on a masked row is not distilled
      TokenBatch y = x;
      y.rewards[2] = 0;
      y.rewards[5] = 7;
      y.teacher_prompts[2].clear();
      TokenBatch z = x;
      z.masked.clear();
      const auto sa = a.rl_step(x);
      b.rl_step(y);
      unmasked.rl_step(z);
      CHECK(test::largest_change(test::parameters_of(a), test::parameters_of(b)) == 0.0);
      CHECK(test::largest_change(test::parameters_of(a), test::parameters_of(unmasked)) > 0.0);
      CHECK(sa.hinted_rows == 0);
      CHECK(sa.stale_tokens == 0);  // masked tokens are not stale ones
    }
  }
}

TEST_CASE("with a third of its rows masked and their rewards turned against the target, GRPO still learns",
          "[learner][token][grpo][infra]") {
  auto o = test::tiny_token_trainer(12);
  o.epochs = 2;
  TokenTrainer trainer(o);
  const std::vector<std::int64_t> prompt{3, 4};
  const double before = test::next_token_probability(trainer, prompt, 7);
  std::mt19937_64 rng(5);
  for (int it = 0; it < 25; ++it) {
    TokenBatch batch;
    batch.sequences = test::sample_rows(trainer, prompt, 24, rng);
    batch.group_size = 24;
    for (int b = 0; b < 24; ++b) {
      const bool hit = batch.sequences.tokens[b][2].item<std::int64_t>() == 7;
      const bool masked = b % 3 == 2;
      batch.masked.push_back(masked ? 1 : 0);
      batch.rewards.push_back(masked ? !hit : hit);  // were these trained on, they would teach the opposite
    }
    trainer.rl_step(batch);
  }
  CHECK(before < 0.2);
  CHECK(test::next_token_probability(trainer, prompt, 7) > 0.6);
}

TEST_CASE("a masked MLP step trains nothing: PPO and V-trace weights are bit-identical whatever the masked steps hold",
          "[learner][ppo][vtrace][infra]") {
  for (const std::string algorithm : {"ppo", "vtrace"}) {
    DYNAMIC_SECTION(algorithm) {
      auto cfg = test::default_config();
      cfg.learner.algorithm = *choice_of<Algorithm>(algorithm);
      const TrainerOptions o{cfg.learner, cfg.policy, 4, 2, 3};
      MlpTrainer a(o), b(o), unmasked(o);
      // Env 1: an episode ends at step 4; the next one (steps 5..9) ended
      // at step 9 without an outcome and is masked.
      auto x = test::make_segment(16, 4, 0);
      x.terminated[4 * 4 + 1] = 1;
      x.terminated[9 * 4 + 1] = 1;
      x.mask_episode(5, 9, 1, InfraFailure::overloaded);
      auto y = x;
      for (int t = 5; t <= 9; ++t) {
        x.rewards[t * 4 + 1] = 1000.0f;
        y.rewards[t * 4 + 1] = -1000.0f;
        y.actions[t * 4 + 1] = 1 - y.actions[t * 4 + 1];
      }
      auto z = x;
      z.masked.clear();
      auto other = test::make_segment(16, 4, 0, 1);
      REQUIRE(a.update({&x, &other}).ok());
      REQUIRE(b.update({&y, &other}).ok());
      REQUIRE(unmasked.update({&z, &other}).ok());
      CHECK(a.weights().checksum == b.weights().checksum);
      CHECK(a.weights().checksum != unmasked.weights().checksum);
    }
  }
}

TEST_CASE("run stats leave masked episodes out of the mean return and count failures by reason", "[learner][metrics][infra]") {
  RunStats stats;
  Segment tokens;
  tokens.num_steps = 3;
  tokens.num_envs = 2;
  tokens.tokens = TokenRows{};
  tokens.tokens->prompt_width = 1;
  tokens.episode_returns = {1.0f, 5.0f};
  tokens.episode_lengths = {2, 2};
  tokens.tokens->observed = {0, 0, 0, 1, 0, 0};  // row 1's first completion token the env wrote
  tokens.mask_episode(0, 2, 1, InfraFailure::sandbox_setup);
  tokens.count_failure(InfraFailure::reward_timeout, 2);
  tokens.reward_retries = 2;
  tokens.work = SegmentWork{2.0, 1.0, 0.5, 3};
  stats.add(tokens);
  stats.add(tokens);
  CHECK(stats.mean_return() == 1.0);
  CHECK(stats.episodes() == 2);
  CHECK(stats.rows_masked() == 2);
  CHECK(stats.reward_retries() == 4);
  CHECK(stats.infra_failures()[static_cast<std::size_t>(InfraFailure::sandbox_setup)] == 2);
  CHECK(stats.infra_failures()[static_cast<std::size_t>(InfraFailure::reward_timeout)] == 4);
  // Where the time went, summed.
  CHECK(stats.work().decode_s == 4.0);
  CHECK(stats.work().tool_s == 2.0);
  CHECK(stats.work().score_s == 1.0);
  CHECK(stats.work().tool_calls == 6);
  CHECK(stats.policy_tokens() == 2 * (4 - 1));  // tokens placed less the observed one, twice
  // Kept across a checkpoint's state.
  RunStats back;
  back.restore(stats.state());
  CHECK(back.rows_masked() == 2);
  CHECK(back.infra_failures() == stats.infra_failures());
  CHECK(back.work().tool_calls == 6);
  CHECK(back.policy_tokens() == 6);
}
