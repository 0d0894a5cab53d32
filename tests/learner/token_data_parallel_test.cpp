// Data-parallel training of the token policy: ranks over Gloo in threads
// of this process, each running the learner loop a rank process runs.
#include <future>
#include <random>

#include "tests/torch_catch.hpp"
#include <torch/torch.h>

#include "envs/tokens/tokenizer.hpp"
#include "learner/learner_core.hpp"
#include "learner/learner_group.hpp"
#include "learner/token_trainer.hpp"
#include "policy/token_segment.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

TrainerOptions token_options(const std::string& algorithm) {
  auto cfg = test::tiny_token_config();
  // Terms of each microbatch as a whole, not sums over its tokens: they
  // depend on how rows fall into microbatches (docs/data-parallel.md).
  cfg.policy.load_balance_coef = 0;
  cfg.policy.router_z_coef = 0;
  cfg.learner.algorithm = *choice_of<Algorithm>(algorithm);
  cfg.learner.epochs = 2;
  cfg.learner.lr = 3e-3;
  cfg.tokens.hint_coef = 0.5;
  TrainerOptions o{cfg.learner, cfg.policy, 0, 0, 11};
  o.tokens = cfg.tokens;
  o.max_staleness = 4;
  return o;
}

// Decoding batches of 4 rows (2 tasks x 2 samples) from a policy of the
// same shape: prompts of 2..7 tokens, rewards that sometimes agree within
// a group (GRPO skips those rows), a hint on each failed row, and the
// first decoding step's tokens 5 versions behind `version` (past the bound).
std::vector<Segment> token_segments(std::size_t count, std::uint64_t version, std::uint32_t seed) {
  auto o = token_options("grpo");
  TokenTrainerOptions t;
  t.model = transformer_options(o.policy, Tokenizer::characters()->vocab());
  t.seed = 99;
  TokenTrainer sampler(t);
  std::mt19937_64 rng(seed);
  SampleOptions s;
  s.max_new_tokens = 6;
  std::vector<Segment> out;
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<std::vector<std::int64_t>> prompts;
    for (int task = 0; task < 2; ++task) {
      std::vector<std::int64_t> p;
      const auto len = 2 + rng() % 6;
      for (std::uint64_t k = 0; k < len; ++k) p.push_back(3 + static_cast<std::int64_t>(rng() % 95));
      prompts.push_back(p);
      prompts.push_back(p);
    }
    auto g = generate(sampler.model(), prompts, s, rng,
                      [&](std::int64_t step) { return version - 5 + static_cast<std::uint64_t>(std::min<std::int64_t>(step, 5)); });
    std::vector<float> rewards;
    for (int b = 0; b < 4; ++b) rewards.push_back(static_cast<float>(rng() % 3) / 2.0f);
    auto seg = token_segment(g, rewards, {"a", "a", "b", "b"}, 2, 1, i);
    seg.tokens->hints.resize(4);
    for (int b = 0; b < 4; ++b)
      if (rewards[b] == 0.0f) seg.tokens->hints[b] = "f(" + std::to_string(b) + ") = 7";
    out.push_back(std::move(seg));
  }
  return out;
}

}  // namespace

TEST_CASE("two token-policy ranks with B segments each train the same weights as one rank with 2B",
          "[learner][dp][gloo][token]") {
  for (const std::string algorithm : {"grpo", "ppo"}) {
    DYNAMIC_SECTION(algorithm) {
      auto store = RendezvousStore::serve("127.0.0.1", 0, 20s);
      REQUIRE(store.ok());
      const auto port = (*store)->port();
      auto rank1 = std::async(std::launch::async, [port, algorithm]() -> Result<std::uint64_t> {
        auto group = LearnerGroup::join(GroupOptions{1, 2, "127.0.0.1", port, 20s});
        if (!group) return group.error();
        auto o = token_options(algorithm);
        o.seed += 1;  // another start: rank 0's core sends its state before the first batch
        o.group = group->get();
        return run_learner_rank(o, 2);
      });
      auto group = LearnerGroup::join(GroupOptions{0, 2, "127.0.0.1", port, 20s});
      REQUIRE(group.ok());

      LearnerCoreOptions co;
      co.trainer = token_options(algorithm);
      co.trainer.group = group->get();
      co.batch_segments = 2;
      LearnerCoreOptions single = co;
      single.trainer.group = nullptr;
      single.batch_segments = 4;
      LearnerCore ranks(co), alone(single);
      ranks.trainer().set_version(10);
      alone.trainer().set_version(10);
      const WeightSetData initial = alone.weights();

      std::uint64_t stale = 0, skipped = 0, hinted = 0;
      for (std::uint32_t k = 0; k < 3; ++k) {
        for (auto& seg : token_segments(4, 10 + k, 40 + k)) {
          ranks.admit(seg, "");
          alone.admit(seg, "");
        }
        REQUIRE(ranks.batch_full());
        auto a = ranks.train();
        auto b = alone.train();
        REQUIRE(a.ok());
        REQUIRE(b.ok());
        // The statistics are the whole batch's, not rank 0's slice.
        CHECK(a->stale_tokens == b->stale_tokens);
        CHECK(a->skipped_rows == b->skipped_rows);
        CHECK(a->hinted_rows == b->hinted_rows);
        CHECK(a->steps == b->steps);
        CHECK(a->policy_loss == Approx(b->policy_loss).margin(1e-5));
        CHECK(a->entropy == Approx(b->entropy).epsilon(1e-4));
        CHECK(a->hint_kl == Approx(b->hint_kl).epsilon(1e-4));
        CHECK(a->correction.ratio_max == Approx(b->correction.ratio_max).epsilon(1e-4));
        stale += b->stale_tokens, skipped += b->skipped_rows, hinted += b->hinted_rows;
      }
      release_learner_ranks(**group);
      auto done = rank1.get();
      REQUIRE(done.ok());
      CHECK(*done == 3);
      // The batches had something of each kind to get right.
      CHECK(stale > 0);
      CHECK(hinted > 0);
      if (algorithm == "grpo") CHECK(skipped > 0);
      INFO("ranks vs alone: " << test::max_diff(ranks.weights(), alone.weights()));
      CHECK(test::max_diff(ranks.weights(), alone.weights()) < 2e-5);
      CHECK(test::max_diff(alone.weights(), initial) > 1e-3);  // and training did move them
      CHECK(ranks.weights().version == 13);
    }
  }
}
