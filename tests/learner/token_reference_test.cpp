// A KL to the run's start ([learner] kl_coef): the learner holds the start
// weights frozen beside the policy and adds KL(policy || start) per trained
// token to the loss, so a reward cannot carry the policy arbitrarily far
// from where it began (docs/token-policy.md "KL to the start"). A run
// resumed from a checkpoint keeps its start as the reference.
#include "tests/torch_catch.hpp"

#include <cmath>

#include "learner/checkpoint.hpp"
#include "learner/token_losses.hpp"
#include "learner/token_policy_trainer.hpp"
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

TEST_CASE("the KL term is k3 per admitted token, capped at 10 a token, over the batch's tokens",
          "[learner][token][kl]") {
  const auto policy = torch::tensor({{-1.0f, -2.0f}, {-0.5f, -3.0f}});
  const auto reference = torch::tensor({{-1.0f, -1.0f}, {-30.0f, -1.0f}});
  const auto mask = torch::tensor({{true, true}, {true, false}});
  // Tokens: agree (0); d = 1 (e - 2); d = -29.5 (28.5, capped to 10); the
  // fourth is not admitted (d = 2 would add e^2 - 3).
  const double want = (0.0 + (std::exp(1.0) - 2.0) + 10.0) / 4.0;
  CHECK(token_reference_kl(policy, reference, mask, 4).item<double>() == Approx(want).epsilon(1e-6));
  CHECK(token_reference_kl(policy, policy, mask, 4).item<double>() == 0.0);
  // Never negative, whichever side is the likelier.
  torch::manual_seed(7);
  const auto a = torch::randn({3, 5}, torch::TensorOptions().dtype(torch::kFloat32)) - 2.0;
  const auto b = torch::randn({3, 5}, torch::TensorOptions().dtype(torch::kFloat32)) - 2.0;
  const auto all = torch::ones({3, 5}, torch::kBool);
  CHECK(token_reference_kl(a, b, all, 15).item<double>() >= 0.0);
  CHECK(token_reference_kl(b, a, all, 15).item<double>() >= 0.0);
}

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

TEST_CASE("a run resumed from a checkpoint keeps its start as the KL reference, not the checkpoint's weights",
          "[learner][token][kl][checkpoint]") {
  const test::TempDir dir("rlx-reference-resume");
  const auto cfg = test::tiny_token_config();
  TrainerOptions o{cfg.learner, cfg.policy, 0, 0, 11};
  o.tokens = cfg.tokens;
  o.max_staleness = 4;
  o.learner.kl_coef = 1.0;
  o.learner.lr = 1e-2;
  const auto tokens_of = [](Trainer& t) -> TokenTrainer& { return dynamic_cast<TokenPolicyTrainer&>(t).tokens(); };
  const auto start = (dir.path / "start.pt").string();
  torch::save(tokens_of(*make_trainer(o)).model(), start);
  o.policy.init = start;
  LearnerCoreOptions co;
  co.trainer = o;
  co.max_staleness = 4;
  co.batch_segments = 1;
  LearnerCore run(co);
  TokenTrainer& before = tokens_of(run.trainer());
  REQUIRE(before.has_reference());
  for (std::uint64_t i = 0; i < 8; ++i) before.rl_step(even_tokens_batch(before, 200 + i));  // training moved it
  auto file = save_checkpoint(run, dir.path / "checkpoints", 2);
  REQUIRE(file.ok());
  auto resumed = load_checkpoint(*file, co);
  REQUIRE(resumed.ok());
  TokenTrainer& after = tokens_of(resumed->core->trainer());
  REQUIRE(after.has_reference());
  // The same next step from the run and from its resumption: the same KL,
  // to the start (a reference taken from the checkpoint would give ~0).
  const double kl_before = before.rl_step(even_tokens_batch(before, 300)).reference_kl;
  const double kl_after = after.rl_step(even_tokens_batch(after, 300)).reference_kl;
  CHECK(kl_before > 1e-3);
  CHECK(kl_after == Approx(kl_before).epsilon(1e-4));
}
