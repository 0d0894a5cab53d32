// The learner of a bf16 policy: fp32 master weights (and Adam moments)
// computing forward and backward in bf16, publishing bf16 sets; the
// mismatch between the sampler's log-probabilities and the learner's is
// measured on the tokens sampled at the learner's own version, and only
// those.
#include "tests/torch_catch.hpp"

#include <ATen/autocast_mode.h>

#include "learner/token_trainer.hpp"
#include "messages/codec.hpp"
#include "policy/weights_io.hpp"
#include "policy/weights_wire.hpp"
#include "tests/learner/token_fixture.hpp"

using namespace rlx;

namespace {

TokenTrainerOptions tiny(WeightDType dtype) {
  auto o = test::tiny_token_trainer(12);
  o.model.dtype = dtype;
  return o;
}

// `rows` samples of `prompt` by `sampler`, stamped with `version`, rewarded
// by whether their first new token is 7.
TokenBatch rewarded_rows(MoETransformer& sampler, std::uint64_t version, std::mt19937_64& rng) {
  SampleOptions s;
  s.max_new_tokens = 3;
  s.eos = 1;
  TokenBatch batch;
  batch.group_size = 16;
  batch.sequences = generate(sampler, std::vector<std::vector<std::int64_t>>(16, {3, 4}), s, rng,
                             [&](std::int64_t) { return version; });
  for (int b = 0; b < 16; ++b) batch.rewards.push_back(batch.sequences.tokens[b][2].item<std::int64_t>() % 2 == 0);
  return batch;
}

// What an explorer of the trainer's policy holds: its published set, viewed.
MoETransformer explorer_of(TokenTrainer& trainer) {
  const auto& m = trainer.options().model;
  auto e = encode_module_weights(*trainer.model(), trainer.version(), "moe_transformer", 0, "learner", m.dtype);
  auto set = decode<WeightSetData>(e.buf);
  REQUIRE(set.ok());
  auto explorer = make_unfilled_transformer(m, 0);
  REQUIRE(view_weights(*explorer, *set).ok());
  return explorer;
}

}  // namespace

TEST_CASE("a bf16 learner keeps fp32 master weights and computes its forward in bf16", "[learner][token][bf16]") {
  TokenTrainer narrow(tiny(WeightDType::bf16)), wide(tiny(WeightDType::f32));
  for (const auto& p : narrow.model()->parameters()) REQUIRE(p.scalar_type() == torch::kFloat32);
  CHECK(test::largest_change(test::parameters_of(narrow), test::parameters_of(wide)) == 0);  // the same masters
  auto tokens = torch::tensor({{3, 4, 5, 6, 7, 8}}, torch::kLong);
  auto valid = torch::ones({1, 6}, torch::kBool);
  {
    torch::NoGradGuard guard;
    const auto a = narrow.model()->forward(tokens, valid).logits, b = wide.model()->forward(tokens, valid).logits;
    const double gap = (a - b).abs().max().item<double>();
    INFO("bf16 vs fp32 logits " << gap);
    CHECK(gap > 0);  // computed in bf16
    CHECK(gap < 0.05);
    CHECK_FALSE(at::autocast::is_cpu_enabled());  // only inside the forward: the thread is as it was
  }
  std::mt19937_64 rng(3);
  const auto before = test::parameters_of(narrow);
  auto sampler = explorer_of(narrow);
  const auto s = narrow.rl_step(rewarded_rows(sampler, 0, rng));
  CHECK(s.tokens > 0);
  CHECK(test::largest_change(test::parameters_of(narrow), before) > 0);
  for (const auto& p : narrow.model()->parameters()) {
    CHECK(p.scalar_type() == torch::kFloat32);
    if (p.grad().defined()) CHECK(p.grad().scalar_type() == torch::kFloat32);
  }
}

TEST_CASE("the sampler mismatch is measured on the tokens sampled at the learner's own version",
          "[learner][token][bf16]") {
  std::mt19937_64 rng(5);
  SECTION("fp32 sampler and learner: equal up to summation order") {
    TokenTrainer t(tiny(WeightDType::f32));
    auto sampler = explorer_of(t);
    const auto s = t.rl_step(rewarded_rows(sampler, 0, rng));
    CHECK(s.sampler_tokens == s.tokens);
    CHECK(s.sampler_mismatch < 1e-4);
  }
  SECTION("a bf16 sampler against its bf16 learner: bf16's rounding, measured") {
    TokenTrainer t(tiny(WeightDType::bf16));
    auto sampler = explorer_of(t);
    const auto s = t.rl_step(rewarded_rows(sampler, 0, rng));
    CHECK(s.sampler_tokens == s.tokens);
    INFO("mismatch " << s.sampler_mismatch);
    CHECK(s.sampler_mismatch > 1e-5);
    CHECK(s.sampler_mismatch < 0.05);
  }
  SECTION("tokens of an older version are trained but not counted") {
    TokenTrainer t(tiny(WeightDType::bf16));
    auto sampler = explorer_of(t);
    t.set_version(1);  // the batch's tokens are one version behind, within the bound
    const auto s = t.rl_step(rewarded_rows(sampler, 0, rng));
    CHECK(s.tokens > 0);
    CHECK(s.sampler_tokens == 0);
    CHECK(s.sampler_mismatch == 0);
  }
}
