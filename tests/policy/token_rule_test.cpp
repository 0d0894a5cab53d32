// A decoding rule (policy/token_rule.hpp) in the decoders and the learner:
// a token it blocks is never sampled, every recorded log-probability is
// under the distribution the token was drawn from, and the learner, given
// the same rule, takes the same log-probabilities from the same tokens
// (its behaviour ratio at the sampling weights is 1).
#include "tests/torch_catch.hpp"

#include <cmath>

#include "learner/token_trainer.hpp"
#include "policy/continuous_decoder.hpp"
#include "policy/rule_masks.hpp"
#include "policy/token_sampler.hpp"
#include "tests/learner/token_fixture.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

namespace {

// After a token the policy chose, only even tokens may follow.
class EvenAfterPolicy : public TokenRule {
 public:
  explicit EvenAfterPolicy(std::int64_t vocab) : vocab_(vocab) {}
  std::int64_t vocab() const override { return vocab_; }
  std::unique_ptr<State> start() const override { return std::make_unique<S>(vocab_); }

 private:
  struct S : State {
    explicit S(std::int64_t v) : vocab(v) {}
    void push(std::int64_t, bool generated) override { last_generated = generated; }
    bool blocked(std::vector<std::uint8_t>& out) const override {
      if (!last_generated) return false;
      out.assign(static_cast<std::size_t>(vocab), 0);
      for (std::int64_t v = 1; v < vocab; v += 2) out[static_cast<std::size_t>(v)] = 1;
      return true;
    }
    std::int64_t vocab;
    bool last_generated = false;
  };
  std::int64_t vocab_;
};

// The whole rows' logits with the rule's blocked tokens masked, as the learner takes them.
torch::Tensor ruled_logits(MoETransformer& model, const Generation& g, const TokenRule& rule) {
  torch::NoGradGuard guard;
  auto logits = model->forward(g.tokens, g.valid).logits;
  const auto W = g.tokens.size(1);
  const auto blocked = blocked_columns(rule, g.tokens, g.valid, g.generated);
  REQUIRE_FALSE(blocked.empty());
  return torch::cat({predicting(logits, blocked), logits.narrow(1, W - 1, 1)}, 1);
}

// No generated token that follows a generated token is odd.
void check_rule_kept(const Generation& g) {
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto gen = g.generated.accessor<bool, 2>();
  int checked = 0;
  for (std::int64_t b = 0; b < g.tokens.size(0); ++b)
    for (std::int64_t c = 1; c < g.tokens.size(1); ++c)
      if (gen[b][c] && gen[b][c - 1]) {
        CHECK(tok[b][c] % 2 == 0);
        ++checked;
      }
  CHECK(checked > 20);
}

}  // namespace

TEST_CASE("a decoding rule's blocked tokens are never sampled and each log-probability is under the ruled "
          "distribution, in lockstep and continuous decoding",
          "[policy][rule]") {
  auto model = make_seeded_transformer(test::small_transformer(40), 3);
  const auto rule = std::make_shared<const EvenAfterPolicy>(model->options().vocab);
  SampleOptions s;
  s.max_new_tokens = 16;
  s.end_at_eos = false;
  s.temperature = 1.3;
  s.rule = rule;
  std::mt19937_64 rng(5);

  SECTION("lockstep, with an observation mid-sequence") {
    Decoder d(model, {{3, 4, 5}, {6, 7}, {8}}, s);
    while (!d.done()) {
      d.step(rng, 1);
      if (d.steps() == 6) d.observe(1, {9, 11, 13});
    }
    const auto g = d.finish();
    check_rule_kept(g);
    CHECK(test::worst_log_prob_gap(g, ruled_logits(model, g, *rule) / s.temperature) < 1e-4);
    // Not by construction: without the rule the same tokens score otherwise.
    torch::NoGradGuard guard;
    CHECK(test::worst_log_prob_gap(g, model->forward(g.tokens, g.valid).logits / s.temperature) > 0.05);
  }
  SECTION("continuous, rows refilled") {
    ContinuousDecoder d(model, 2, s, 3);
    std::vector<Sequence> done;
    std::uint64_t next = 0;
    while (done.size() < 4) {
      for (std::int64_t r = 0; r < d.rows(); ++r)
        if (d.idle(r) && next < 4) d.start(r, {static_cast<std::int64_t>(3 + next), 4}, next), ++next;
      d.step(rng, 1);
      for (std::int64_t r = 0; r < d.rows(); ++r)
        if (d.sampled(r) && d.room(r) <= 8 + static_cast<std::int64_t>(d.id(r))) d.end(r);
      for (auto& q : d.take_finished()) done.push_back(std::move(q));
    }
    const auto g = generation_of(done, model->options().layers, model->options().top_k, 0);
    check_rule_kept(g);
    CHECK(test::worst_log_prob_gap(g, ruled_logits(model, g, *rule) / s.temperature) < 1e-4);
  }
}

TEST_CASE("a learner given the explorers' decoding rule takes their log-probabilities: its behaviour ratio at "
          "the sampling weights is 1",
          "[learner][token][rule]") {
  auto o = test::tiny_token_trainer(24);
  o.rho_bar = 100.0;  // ratios reported before truncation either way
  const auto rule = std::make_shared<const EvenAfterPolicy>(o.model.vocab);
  auto ratio_of = [&](std::shared_ptr<const TokenRule> learner_rule) {
    auto opts = o;
    opts.rule = std::move(learner_rule);
    TokenTrainer trainer(opts);
    SampleOptions s;
    s.max_new_tokens = 10;
    s.rule = rule;
    std::mt19937_64 rng(9);
    TokenBatch batch;
    batch.group_size = 2;
    batch.sequences = generate(trainer.model(), {{3, 4}, {3, 4}, {5, 6}, {5, 6}}, s, rng);
    batch.rewards = {1.0F, 0.0F, 0.0F, 1.0F};
    const auto st = trainer.rl_step(batch);
    REQUIRE(st.tokens > 0);
    return std::pair{st.correction.ratio_mean, st.correction.ratio_max};
  };
  const auto [mean, max] = ratio_of(rule);
  CHECK(mean == Approx(1.0).margin(1e-4));
  CHECK(max == Approx(1.0).margin(1e-3));
  // Without the rule the learner's distribution puts mass on blocked tokens: every ratio below 1.
  CHECK(ratio_of(nullptr).first < 0.9);
}

TEST_CASE("the learner's rule masks are kept for restricted columns alone and mask as a dense mask would, "
          "gradients included",
          "[policy][rule]") {
  // Rows: prompt 3,4 then generated tokens; row 1 has an observation (not
  // generated) mid-row, row 2 is left-padded. EvenAfterPolicy restricts a
  // generated column whose previous token was generated.
  const auto tokens = torch::tensor({{3, 4, 6, 8, 2, 4}, {3, 4, 6, 9, 9, 2}, {0, 0, 3, 4, 6, 8}}, torch::kLong);
  const auto valid = torch::tensor({{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}, {0, 0, 1, 1, 1, 1}}, torch::kBool);
  const auto generated = torch::tensor({{0, 0, 1, 1, 1, 1}, {0, 0, 1, 0, 0, 1}, {0, 0, 0, 0, 1, 1}}, torch::kBool);
  const EvenAfterPolicy rule(10);
  const auto blocked = blocked_columns(rule, tokens, valid, generated);
  REQUIRE_FALSE(blocked.empty());
  // Row 0: columns 3, 4, 5; row 1: none (its generated columns follow a
  // prompt or an observation); row 2: column 5. Flat positions b * 6 + j.
  CHECK(blocked.at.equal(torch::tensor({3, 4, 5, 17}, torch::kLong)));
  CHECK(blocked.tokens.sizes() == torch::IntArrayRef({4, 10}));

  torch::manual_seed(4);
  auto logits = torch::randn({3, 6, 10}, torch::requires_grad());
  auto ruled = predicting(logits, blocked);
  CHECK(ruled.sizes() == torch::IntArrayRef({3, 5, 10}));
  // The dense reference: every odd token blocked at the columns that predict 3, 4, 5 of row 0 and 5 of row 2.
  auto dense = torch::zeros({3, 5, 10}, torch::kBool);
  auto odd = torch::arange(10) % 2 == 1;
  for (auto [b, j] : std::vector<std::pair<int, int>>{{0, 2}, {0, 3}, {0, 4}, {2, 4}}) dense[b][j].copy_(odd);
  CHECK(torch::equal(ruled, logits.narrow(1, 0, 5).masked_fill(dense, kBlockedLogit)));
  // Blocked logits take no gradient, the others all of theirs.
  ruled.sum().backward();
  auto expected = torch::ones({3, 6, 10});
  expected.narrow(1, 0, 5).masked_fill_(dense, 0);
  expected.narrow(1, 5, 1).fill_(0);  // the last column predicts nothing
  CHECK(torch::equal(logits.grad(), expected));
  // Nothing restricted anywhere: empty, and the logits as they are.
  const auto none = blocked_columns(rule, tokens, valid, torch::zeros_like(generated));
  CHECK(none.empty());
  CHECK(torch::equal(predicting(logits, none), logits.narrow(1, 0, 5)));
}
