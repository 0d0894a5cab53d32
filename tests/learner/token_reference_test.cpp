// A KL to the run's start ([learner] kl_coef): the learner holds the start
// weights frozen beside the policy and adds KL(policy || start) per trained
// token to the loss, so a reward cannot carry the policy arbitrarily far
// from where it began (docs/token-policy.md "KL to the start").
#include "tests/torch_catch.hpp"

#include "learner/token_trainer.hpp"
#include "tests/helpers.hpp"
#include "tests/learner/token_fixture.hpp"

using namespace rlx;

namespace {

// Eight rows of one prompt in groups of four, sampled by the trainer's
// policy at its version; a row's reward is the share of its sampled tokens
// that are even (a pull the policy can follow, rarely tied in a group).
TokenBatch even_tokens_batch(TokenTrainer& trainer, std::uint64_t seed) {
  SampleOptions s;
  s.max_new_tokens = 6;
  s.end_at_eos = false;
  std::mt19937_64 rng(seed);
  TokenBatch batch;
  batch.group_size = 4;
  batch.sequences = generate(trainer.model(), std::vector<std::vector<std::int64_t>>(8, {3, 4}), s, rng,
                             [&](std::int64_t) { return trainer.version(); });
  const auto& g = batch.sequences;
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto gen = g.generated.accessor<bool, 2>();
  for (std::int64_t b = 0; b < g.tokens.size(0); ++b) {
    float even = 0, n = 0;
    for (std::int64_t c = 0; c < g.tokens.size(1); ++c)
      if (gen[b][c]) even += tok[b][c] % 2 == 0, ++n;
    batch.rewards.push_back(n > 0 ? even / n : 0.0F);
  }
  return batch;
}

// The mean KL to the start over updates 20-29 of 30 under kl_coef `coef`.
double late_reference_kl(TokenTrainerOptions o, double coef) {
  o.kl_coef = coef;
  TokenTrainer trainer(o);
  REQUIRE(trainer.take_reference("").ok());
  double sum = 0;
  for (std::uint64_t i = 0; i < 30; ++i) {
    const auto st = trainer.rl_step(even_tokens_batch(trainer, 100 + i));
    if (i >= 20) sum += st.reference_kl;
  }
  return sum / 10;
}

}  // namespace

TEST_CASE("the learner's KL to the run's start is zero at the start and holds a rewarded policy nearer to it",
          "[learner][token][kl]") {
  auto o = test::tiny_token_trainer(12);
  o.lr = 1e-2;
  SECTION("the reference is the start itself: no KL before the first step") {
    o.kl_coef = 1.0;
    TokenTrainer trainer(o);
    CHECK_FALSE(trainer.has_reference());
    REQUIRE(trainer.take_reference("").ok());
    CHECK(trainer.has_reference());
    const auto st = trainer.rl_step(even_tokens_batch(trainer, 1));
    REQUIRE(st.tokens > 0);
    CHECK(st.reference_kl >= 0.0);
    CHECK(st.reference_kl < 1e-6);
  }
  SECTION("the same rewards carry the policy several times as far without it") {
    const double free = late_reference_kl(o, 1e-9);  // measured, too weak to act
    const double anchored = late_reference_kl(o, 1.0);
    CHECK(free > 0.05);  // the reward moved the policy
    CHECK(anchored < 0.5 * free);
  }
  SECTION("a reference loaded from a file is that file's weights, and a bad file is refused") {
    test::TempDir dir("rlx-reference");
    auto other = o;
    other.seed = 99;
    TokenTrainer elsewhere(other);
    const auto path = (dir.path / "start.pt").string();
    torch::save(elsewhere.model(), path);
    o.kl_coef = 1.0;
    TokenTrainer trainer(o);
    REQUIRE(trainer.take_reference(path).ok());
    // Another model's weights: far from this policy at once.
    CHECK(trainer.rl_step(even_tokens_batch(trainer, 1)).reference_kl > 0.01);
    CHECK_FALSE(TokenTrainer(o).take_reference((dir.path / "absent.pt").string()).ok());
  }
}
