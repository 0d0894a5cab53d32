// Textual feedback: a scorer's hint for a failed output travels with the
// token segment to the learner, which distils the policy that sees the
// hint (the teacher) into the policy that does not (the student) on the
// failed attempt's tokens.
#include "tests/torch_catch.hpp"

#include "envs/scorer.hpp"
#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "explorers/deferred_rewards.hpp"
#include "learner/token_trainer.hpp"
#include "messages/codec.hpp"
#include "policy/token_segment.hpp"
#include "tests/learner/token_fixture.hpp"

using namespace rlx;

namespace {

TokenTrainerOptions tiny() { return test::tiny_token_trainer(12); }

Generation sample(TokenTrainer& trainer, std::size_t rows, std::uint64_t seed) {
  SampleOptions s;
  s.max_new_tokens = 4;
  s.eos = 1;
  std::mt19937_64 rng(seed);
  return generate(trainer.model(), std::vector<std::vector<std::int64_t>>(rows, {3, 4}), s, rng,
                  [&](std::int64_t) { return trainer.version(); });
}

}  // namespace

TEST_CASE("the arithmetic scorer hints the answer of a task it marked wrong", "[envs][token][hint]") {
  ArithmeticScorer s;
  CHECK(s.score({1, 0, "12+7", "18"}).hint == "12+7=19\n");
  CHECK(s.score({1, 0, "12+7", "nineteen"}).hint == "12+7=19\n");
  CHECK(s.score({1, 0, "12+7", "19"}).hint.empty());
}

TEST_CASE("the teacher sees a hint after the prompt's last line, or before a prompt of one line", "[envs][token][hint]") {
  const auto& chars = *Tokenizer::characters();
  const auto code = chars.encode("def f(x): ...\n# f(*[1]) == 2\n");
  CHECK(hinted_prompt(code, "# f(*[5]) == 10\n", chars) == chars.encode("def f(x): ...\n# f(*[1]) == 2\n# f(*[5]) == 10\n"));
  CHECK(hinted_prompt(chars.encode("12+7="), "12+7=19\n", chars) == chars.encode("12+7=19\n12+7="));
  CHECK(hinted_prompt(chars.encode("a\nb"), "h\n", chars) == chars.encode("a\nh\nb"));
}

TEST_CASE("a failed row's hint rides its token segment to the learner's rows, and bad hints are rejected",
          "[messages][token][hint]") {
  TokenTrainer trainer(tiny());
  const Generation g = sample(trainer, 4, 3);
  Segment seg = token_segment(g, {1, 0, 1, 0}, {"a", "a", "b", "b"}, 2, 7, 0);
  seg.tokens->hints = {"", "a=1\n", "", "b=2\n"};
  auto back = decode<Segment>(encode(seg, "test"));
  REQUIRE(back.ok());
  CHECK(back->tokens->hints == seg.tokens->hints);
  CHECK(token_rows({&*back}, 2, 2).hints == seg.tokens->hints);
  // No hints at all: the rows read "" each.
  seg.tokens->hints.clear();
  CHECK(token_rows({&*decode<Segment>(encode(seg, "test"))}, 2, 2).hints == std::vector<std::string>(4));
  seg.tokens->hints = {"", "x"};  // not one per row
  CHECK(decode<Segment>(encode(seg, "test")).error().code == Errc::invalid_field);
  seg.tokens->hints = {"", std::string(kMaxHintBytes + 1, 'x'), "", ""};
  CHECK(decode<Segment>(encode(seg, "test")).error().code == Errc::invalid_field);
  // A reward result carries its hint, bounded too.
  RewardResultData r{5, 0.25f, true, "passed 2 of 8", "# f(*[1]) == 2\n"};
  CHECK(decode<RewardResultData>(encode(r, "test"))->hint == r.hint);
  r.hint.assign(kMaxHintBytes + 1, 'x');
  CHECK(decode<RewardResultData>(encode(r, "test")).error().code == Errc::invalid_field);
}

TEST_CASE("a deferred score's hint lands on the token row it scored", "[explorers][token][hint]") {
  TokenTrainer trainer(tiny());
  const Generation g = sample(trainer, 2, 4);
  DeferredRewards d;
  const auto last = [&](std::int64_t b) { return static_cast<std::uint32_t>(g.prompt_width + g.lengths[b] - 1); };
  const auto id0 = d.note(0, last(0), 0, 0);
  const auto id1 = d.note(0, last(1), 1, 1);
  d.finished(token_segment(g, {0, 0}, {"t", "t"}, 2, 0, 0));
  d.scored(id1, 0.5f, "t=3\n");
  CHECK_FALSE(d.ready());
  d.scored(id0, 1.0f);
  auto s = d.ready();
  REQUIRE(s);
  CHECK(s->tokens->hints == std::vector<std::string>{"", "t=3\n"});
  CHECK(s->episode_returns == std::vector<float>{1.0f, 0.5f});
}

TEST_CASE("the hint loss pulls the policy without the hint towards the policy with it", "[learner][token][hint]") {
  auto o = tiny();
  o.hint_coef = 1.0;
  TokenTrainer trainer(o);
  // Equal rewards: GRPO has nothing to say; only the hint moves the policy.
  double first = 0, last = 0;
  for (int it = 0; it < 30; ++it) {
    TokenBatch batch;
    batch.group_size = 8;
    batch.sequences = sample(trainer, 8, 100 + static_cast<std::uint64_t>(it));
    batch.rewards.assign(8, 0.0f);
    batch.teacher_prompts.assign(8, {});
    for (int b = 0; b < 8; b += 2) batch.teacher_prompts[b] = {9, 9, 10, 2, 3, 4};  // every other row failed: hint + prompt
    auto st = trainer.rl_step(batch);
    CHECK(st.hinted_rows == 4);
    (it == 0 ? first : last) = st.hint_kl;
  }
  INFO("KL " << first << " -> " << last);
  CHECK(first > 0.01);
  CHECK(last < 0.3 * first);
}

TEST_CASE("a teacher shown the student's own prompt agrees with it exactly", "[learner][token][hint]") {
  auto o = tiny();
  o.hint_coef = 1.0;
  TokenTrainer trainer(o);
  TokenBatch batch;
  batch.group_size = 4;
  batch.sequences = sample(trainer, 4, 21);
  batch.rewards.assign(4, 0.0f);
  batch.teacher_prompts.assign(4, {3, 4});  // no hint in it: the same rows
  auto st = trainer.rl_step(batch);
  CHECK(st.hinted_rows == 4);
  CHECK(st.hint_kl < 1e-6);
}

TEST_CASE("with the hint loss off, or a hint too long for the context, nothing is distilled", "[learner][token][hint]") {
  for (const double coef : {0.0, 1.0}) {
    auto o = tiny();
    o.hint_coef = coef;
    TokenTrainer trainer(o);
    TokenBatch batch;
    batch.group_size = 2;
    batch.sequences = sample(trainer, 2, 7);
    batch.rewards = {0, 1};
    batch.teacher_prompts = {std::vector<std::int64_t>(coef > 0 ? 40 : 3, 9), {}};  // 40 > max_len 32
    auto st = trainer.rl_step(batch);
    CHECK(st.hinted_rows == 0);
    CHECK(st.hint_kl == 0.0);
  }
}
