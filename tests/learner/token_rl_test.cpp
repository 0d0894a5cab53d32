#include "tests/torch_catch.hpp"

#include "envs/tokens/token_tasks.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "learner/lr_schedule.hpp"
#include "learner/token_losses.hpp"
#include "learner/token_trainer.hpp"
#include "messages/codec.hpp"
#include "policy/token_segment.hpp"
#include "tests/learner/token_fixture.hpp"

using namespace rlx;

namespace {
TokenTrainerOptions tiny(std::int64_t vocab) { return test::tiny_token_trainer(vocab); }
}  // namespace

TEST_CASE("GRPO advantages are the rewards standardised within each group", "[learner][token]") {
  auto adv = grpo_advantages(torch::tensor({1.0f, 0.0f, 0.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f}), 4);
  // Group 1: mean 0.5, unbiased std sqrt(1/3): +-0.5 / 0.57735 = +-0.866.
  const float a = 0.5f / std::sqrt(1.0f / 3.0f);
  CHECK(adv[0].item<float>() == Approx(a).epsilon(1e-4));
  CHECK(adv[1].item<float>() == Approx(-a).epsilon(1e-4));
  CHECK(adv[3].item<float>() == Approx(a).epsilon(1e-4));
  // Group 2: all equal, nothing to learn.
  CHECK(adv.narrow(0, 4, 4).abs().sum().item<float>() == 0.0f);
  auto unscaled = grpo_advantages(torch::tensor({3.0f, 1.0f}), 2, false);
  CHECK(unscaled[0].item<float>() == Approx(1.0f));
  CHECK(unscaled[1].item<float>() == Approx(-1.0f));
}

TEST_CASE("tokens are admitted one by one under the staleness bound", "[learner][token][staleness]") {
  // One row: two prompt tokens, then tokens of versions 5, 6 and 7 (the
  // explorer swapped weights mid-sequence); the learner is at 9, bound 3.
  auto versions = torch::tensor({{0, 0, 5, 6, 7}}, torch::kLong);
  auto generated = torch::tensor({{false, false, true, true, true}}, torch::kBool);
  auto admitted = admit_tokens(versions, generated, 9, 3);
  CHECK(torch::equal(admitted, torch::tensor({{false, false, false, true, true}}, torch::kBool)));
  CHECK(admit_tokens(versions, generated, 2, 3).sum().item<std::int64_t>() == 3);  // young learner: all
}

TEST_CASE("length-aware batching keeps microbatches within the token budget", "[learner][token]") {
  std::vector<std::int64_t> lengths{10, 50, 12, 48, 11, 100};
  auto mbs = pack_by_length(lengths, 100);
  std::size_t rows = 0;
  for (const auto& mb : mbs) {
    std::int64_t longest = 0;
    for (auto i : mb) longest = std::max(longest, lengths[i]);
    CHECK((static_cast<std::int64_t>(mb.size()) * longest <= 100 || mb.size() == 1));
    rows += mb.size();
  }
  CHECK(rows == lengths.size());
  CHECK(mbs.front() == std::vector<std::int64_t>{5});         // the longest alone
  CHECK(mbs[1] == std::vector<std::int64_t>{1, 3});            // 50 and 48 together
  CHECK(mbs[2] == std::vector<std::int64_t>{2, 4, 0});         // the short ones together
}

TEST_CASE("the tokenizer round-trips program text", "[envs][token]") {
  const std::string program = "def solve(xs):\n    return xs[::-1] + [~0]\n";
  auto ids = Tokenizer::characters()->encode(program);
  CHECK(ids.size() == program.size());
  for (auto id : ids) CHECK((id >= 3 && id < Tokenizer::characters()->vocab()));
  CHECK(Tokenizer::characters()->decode(ids) == program);
  ids.push_back(Tokenizer::characters()->eos());
  ids.push_back(Tokenizer::characters()->encode("x")[0]);
  CHECK(Tokenizer::characters()->decode(ids) == program);  // stops at eos
}

TEST_CASE("token tasks are drawn from their seed and carry a correct reference", "[envs][token]") {
  auto a = make_token_task("arithmetic", 3), b = make_token_task("arithmetic", 3);
  REQUIRE(a.ok());
  CHECK(a->prompt == b->prompt);
  CHECK(a->prompt == a->id + "=");
  const auto op = a->id.find_first_of("+-", 1);
  const int x = std::stoi(a->id.substr(0, op)), y = std::stoi(a->id.substr(op + 1));
  CHECK(std::stoi(a->reference) == (a->id[op] == '+' ? x + y : x - y));
  auto c = make_token_task("code", 10);
  REQUIRE(c.ok());
  CHECK(c->prompt.find("def solve") == 0);
  CHECK(c->reference.find("def solve") == 0);
  // Each carries a true hint in its scorer's form, other than what the prompt shows.
  CHECK(a->hint == a->id + "=" + a->reference + "\n");
  CHECK(c->hint.rfind("# solve(*", 0) == 0);
  CHECK(c->prompt.find(c->hint) == std::string::npos);
  CHECK(scorer_for("code") == "code");
  CHECK_FALSE(make_token_task("chess", 1).ok());
}

TEST_CASE("supervised steps teach the policy its references", "[learner][token][sft]") {
  auto o = tiny(Tokenizer::characters()->vocab());
  TokenTrainer trainer(o);
  std::vector<std::vector<std::int64_t>> prompts, completions;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    auto t = make_token_task("arithmetic", seed);
    prompts.push_back(Tokenizer::characters()->encode(t->prompt));
    completions.push_back(Tokenizer::characters()->encode(t->reference));
  }
  // Scored without a step, the rows score as the step before it trains on them.
  const auto untrained = trainer.sft_score(prompts, completions);
  const double first = trainer.sft_step(prompts, completions).policy_loss;
  CHECK(untrained.loss == Approx(first).epsilon(1e-5));
  double last = first;
  for (int i = 0; i < 150; ++i) last = trainer.sft_step(prompts, completions).policy_loss;
  CHECK(last < 0.2 * first);
  const auto trained = trainer.sft_score(prompts, completions);
  CHECK(trained.loss < 0.2 * untrained.loss);
  CHECK(trained.tokens == untrained.tokens);
  CHECK(untrained.accuracy < 0.5);
  CHECK(trained.accuracy > 0.9);
  SampleOptions s;
  s.greedy = true;
  s.max_new_tokens = 5;
  std::mt19937_64 rng(1);
  auto g = generate(trainer.model(), prompts, s, rng);
  int right = 0;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    right += Tokenizer::characters()->decode(completion(g, static_cast<std::int64_t>(b))) == Tokenizer::characters()->decode(completions[b]);
  }
  CHECK(right >= 5);
}

TEST_CASE("GRPO steps raise the probability of rewarded tokens", "[learner][token][grpo]") {
  for (const std::string algorithm : {"grpo", "ppo"}) {
    DYNAMIC_SECTION(algorithm) {
      auto o = tiny(12);
      o.algorithm = *choice_of<Algorithm>(algorithm);
      o.epochs = 2;
      TokenTrainer trainer(o);
      const std::vector<std::int64_t> prompt{3, 4};
      const double before = test::next_token_probability(trainer, prompt, 7);
      std::mt19937_64 rng(5);
      double mismatch = 0;
      for (int it = 0; it < 25; ++it) {
        TokenBatch batch;
        batch.group_size = 16;
        batch.sequences = test::sample_rows(trainer, prompt, 16, rng);
        for (int b = 0; b < 16; ++b) batch.rewards.push_back(batch.sequences.tokens[b][2].item<std::int64_t>() == 7);
        auto st = trainer.rl_step(batch);
        CHECK(st.stale_tokens == 0);
        mismatch = std::max(mismatch, st.route_mismatch);
      }
      CHECK(before < 0.2);
      CHECK(test::next_token_probability(trainer, prompt, 7) > 0.6);
      CHECK(trainer.version() == 25);
      CHECK(mismatch < 0.05);  // the sampler's routes are the learner's own
    }
  }
}

TEST_CASE("a batch older than the staleness bound trains nothing", "[learner][token][staleness]") {
  auto o = tiny(12);
  o.max_lag = 2;
  TokenTrainer trainer(o);
  trainer.set_version(10);
  SampleOptions s;
  s.max_new_tokens = 3;
  std::mt19937_64 rng(2);
  TokenBatch batch;
  batch.group_size = 2;
  batch.sequences = generate(trainer.model(), {{3, 4}, {5}}, s, rng, [](std::int64_t step) { return 7u + step; });
  batch.rewards = {1, 0};
  auto st = trainer.rl_step(batch);
  // Versions 7, 8, 9 against 10 with bound 2: only the version-8 and -9 tokens.
  const auto generated = batch.sequences.generated.sum().item<std::int64_t>();
  const auto v7 = (batch.sequences.versions == 7).logical_and(batch.sequences.generated).sum().item<std::int64_t>();
  CHECK(st.stale_tokens == v7);
  CHECK(st.tokens == generated - v7);
  batch.sequences.versions.fill_(1);
  auto none = trainer.rl_step(batch);
  CHECK(none.tokens == 0);
  CHECK(trainer.version() == 11);  // the all-stale batch made no step
}

TEST_CASE("a decoding batch survives the wire and comes back as the learner's rows", "[learner][token][messages]") {
  auto o = tiny(12);
  TokenTrainer trainer(o);
  SampleOptions s;
  s.max_new_tokens = 5;
  s.eos = 1;
  std::mt19937_64 rng(9);
  auto g = generate(trainer.model(), {{3, 4, 5}, {6}, {7, 8}, {9, 10}}, s, rng,
                    [](std::int64_t step) { return 20u + static_cast<std::uint64_t>(step); });
  Segment seg = token_segment(g, {1.0f, 0.0f, 0.5f, 0.25f}, {"a", "a", "b", "b"}, 2, 7, 3);
  auto decoded = decode<Segment>(encode(seg, "test"));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->tokens.has_value());
  CHECK(decoded->env_steps() == static_cast<std::uint64_t>(g.generated.sum().item<std::int64_t>()));
  auto back = token_rows({&*decoded}, o.model.layers, o.model.top_k);
  CHECK(back.group_size == 2);
  CHECK(back.rewards == std::vector<float>{1.0f, 0.0f, 0.5f, 0.25f});
  CHECK(back.rows.lengths == g.lengths);
  CHECK(torch::equal(back.rows.tokens, g.tokens));
  CHECK(torch::equal(back.rows.valid, g.valid));
  CHECK(torch::equal(back.rows.generated, g.generated));
  CHECK(torch::equal(back.rows.versions, g.versions));
  CHECK(torch::equal(back.rows.routes, g.routes));
  CHECK(torch::allclose(back.rows.log_probs, g.log_probs));
}

TEST_CASE("a token segment that does not add up is rejected at decoding", "[messages][token]") {
  auto o = tiny(12);
  TokenTrainer trainer(o);
  SampleOptions s;
  s.max_new_tokens = 3;
  std::mt19937_64 rng(9);
  auto g = generate(trainer.model(), {{3, 4}, {5, 6}}, s, rng);
  const Segment good = token_segment(g, {1.0f, 0.0f}, {"a", "a"}, 2, 0, 0);
  auto broken = [&](auto&& edit) {
    Segment bad = good;
    edit(bad);
    return decode<Segment>(encode(bad, "test"));
  };
  CHECK(decode<Segment>(encode(good, "test")).ok());
  CHECK_FALSE(broken([](Segment& x) { x.tokens->group_size = 3; }).ok());
  CHECK_FALSE(broken([](Segment& x) { x.tokens->prompt_width = x.num_steps; }).ok());
  CHECK_FALSE(broken([](Segment& x) { x.tokens->prompt_lengths.pop_back(); }).ok());
  CHECK_FALSE(broken([](Segment& x) { x.tokens->task_ids.pop_back(); }).ok());
  CHECK_FALSE(broken([](Segment& x) { x.episode_lengths[0] = x.num_steps; }).ok());
  CHECK_FALSE(broken([](Segment& x) { x.tokens->routes.pop_back(); }).ok());
}

TEST_CASE("a group of equal rewards gets advantages of exactly zero, whatever the value", "[learner][token][grpo]") {
  // 0.7f eight times: a float mean can miss it by an ulp, which the std
  // scaling would turn into advantages of ~1e-3.
  auto adv = grpo_advantages(torch::full({8}, 0.7f), 8);
  CHECK(adv.abs().max().item<float>() == 0.0f);
  auto thirds = grpo_advantages(torch::tensor({0.1f, 0.1f, 0.1f, 1.0f / 3, 1.0f / 3, 1.0f / 3}), 3);
  CHECK(thirds.abs().max().item<float>() == 0.0f);
}

using test::largest_change;
using test::parameters_of;
using test::sampled_batch;
using test::slice_rows;

TEST_CASE("rows of a group that scored alike are not computed and do not change the step", "[learner][token][grpo]") {
  auto o = tiny(12);
  o.load_balance_coef = 0;  // the step is the policy gradient's alone
  o.router_z_coef = 0;
  TokenTrainer with_group(o), without(o);
  const auto before = parameters_of(with_group);
  const TokenBatch full = sampled_batch(with_group, {{3, 4}, {3, 4}, {3, 4}, {3, 4}, {5}, {5}, {5}, {5}},
                                        {1, 0, 0, 1, 0.5f, 0.5f, 0.5f, 0.5f}, 4, 4, 9);
  TokenBatch informative;
  informative.group_size = 4;
  informative.sequences = slice_rows(full.sequences, 0, 4);
  informative.rewards = {1, 0, 0, 1};

  const auto a = with_group.rl_step(full);
  const auto b = without.rl_step(informative);
  CHECK(a.skipped_rows == 4);
  CHECK(b.skipped_rows == 0);
  CHECK(a.microbatches == b.microbatches);  // the equal group cost no forward or backward pass
  CHECK(a.tokens > b.tokens);               // its tokens still count as trained on
  // The equal group only rescales the surrogate (its mean runs over more
  // tokens); Adam's first step does not see the scale, so both trainers
  // moved alike: up to Adam's epsilon, far below the step itself.
  const auto after_a = parameters_of(with_group), after_b = parameters_of(without);
  CHECK(largest_change(after_a, before) > 0.9 * o.lr);
  CHECK(largest_change(after_a, after_b) < 0.3 * o.lr);

  // A batch with nothing to learn makes no step, but counts as trained.
  TokenBatch flat = full;
  flat.rewards.assign(8, 1.0f);
  const auto v = with_group.version();
  const auto c = with_group.rl_step(flat);
  CHECK(c.skipped_rows == 8);
  CHECK(c.microbatches == 0);
  CHECK(with_group.version() == v + 1);
  CHECK(largest_change(parameters_of(with_group), after_a) == 0.0);
}

TEST_CASE("the learning rate warms up linearly over the first updates", "[learner][token]") {
  CHECK(warmup_lr(1e-3, 0, 0) == 1e-3);
  CHECK(warmup_lr(1e-3, 1, 0) == 1e-3);
  CHECK(warmup_lr(1e-3, 4, 0) == Approx(0.25e-3));
  CHECK(warmup_lr(1e-3, 4, 2) == Approx(0.75e-3));
  CHECK(warmup_lr(1e-3, 4, 3) == Approx(1e-3));
  CHECK(warmup_lr(1e-3, 4, 100) == Approx(1e-3));

  // A warming trainer's first step is a quarter of a plain one's.
  auto o = tiny(12);
  TokenTrainer plain(o);
  o.warmup_updates = 4;
  TokenTrainer warming(o);
  const auto start = parameters_of(plain);
  const TokenBatch batch = sampled_batch(plain, {{3, 4}, {3, 4}, {3, 4}, {3, 4}}, {1, 0, 0, 1}, 4, 3, 4);
  plain.rl_step(batch);
  warming.rl_step(batch);
  const double step_plain = largest_change(parameters_of(plain), start);
  const double step_warm = largest_change(parameters_of(warming), start);
  CHECK(step_warm == Approx(step_plain / 4).epsilon(0.02));
}

TEST_CASE("a supervised step's loss is the same however its rows are split into microbatches",
          "[learner][token][sft]") {
  // Rows whose prompts and completions differ in length: a microbatch of
  // rows with short completions must still see their prompts whole.
  const std::vector<std::vector<std::int64_t>> prompts{{5, 6, 7, 8, 9, 10, 11}, {5, 6}, {7, 8, 9}, {12}};
  const std::vector<std::vector<std::int64_t>> completions{{3}, {4, 5, 6, 7, 8, 9, 10}, {11, 12}, {13, 14, 15}};
  auto whole = tiny(20);
  whole.token_budget = 1 << 20;
  auto split = whole;
  split.token_budget = 1;  // one row per microbatch
  TokenTrainer a(whole), b(split);
  const auto sa = a.sft_step(prompts, completions), sb = b.sft_step(prompts, completions);
  CHECK(sa.microbatches == 1);
  CHECK(sb.microbatches == 4);
  CHECK(sa.policy_loss == Approx(sb.policy_loss).epsilon(1e-5));
}

TEST_CASE("a transcript's observed tokens are context, not targets, and it ends with its last turn",
          "[learner][token][sft][multi_turn]") {
  const std::vector<std::vector<std::int64_t>> prompts{{5, 6}, {7}};
  const std::vector<std::vector<std::int64_t>> completions{{8, 9, 10, 11}, {12, 13}};
  const std::vector<std::vector<std::uint8_t>> observed{{0, 1, 1, 0}, {0, 0}};
  auto r = supervised_rows(prompts, completions, 0, 1, observed);
  // P = 2, completions left-aligned after it, no eos.
  CHECK(r.tokens.size(1) == 2 + 4);
  CHECK(torch::equal(r.targets, torch::tensor({{false, false, true, false, false, true},
                                               {false, false, true, true, false, false}}, torch::kBool)));
  CHECK(torch::equal(r.valid, torch::tensor({{true, true, true, true, true, true},
                                             {false, true, true, true, false, false}}, torch::kBool)));
  auto plain = supervised_rows(prompts, completions, 0, 1);
  CHECK(plain.tokens[1][4].item<std::int64_t>() == 1);  // without masks every completion ends with eos
  CHECK(plain.targets.sum().item<std::int64_t>() == 4 + 1 + 2 + 1);
  // A step counts only the targets.
  TokenTrainer t(tiny(20));
  const auto s = t.sft_step(prompts, completions, observed);
  CHECK(s.tokens == 4);
}
