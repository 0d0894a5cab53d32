// Multi-turn rows in the decoder and on the wire: observations queued into
// a row enter the KV cache as context (valid, never generated), steered
// tokens are placed as the policy's, and a segment carries which tokens
// were observed so the learner trains only on the policy's own.
#include "tests/torch_catch.hpp"

#include "learner/token_losses.hpp"
#include "messages/codec.hpp"
#include "policy/moe_transformer.hpp"
#include "policy/token_sampler.hpp"
#include "policy/continuous_decoder.hpp"
#include "tests/policy/transformer_fixture.hpp"
#include "policy/token_segment.hpp"

using namespace rlx;

namespace {

TransformerOptions multi_turn_model() { return test::small_transformer(64); }

SampleOptions multi_turn(std::int64_t budget) {
  SampleOptions s;
  s.max_new_tokens = budget;
  s.end_at_eos = false;
  s.temperature = 1.3;
  return s;
}

// Decodes two rows for `steps` steps: row 0 takes observation {7, 8, 9} after
// its 3rd token and row 1 {11, 12} after its 5th; row 1 is ended after step 12.
Generation decode_with_observations(MoETransformer& model, std::uint64_t seed) {
  Decoder d(model, {{3, 4, 5}, {6, 7}}, multi_turn(20));
  std::mt19937_64 rng(seed);
  for (std::int64_t t = 0; !d.done(); ++t) {
    d.step(rng, t < 6 ? 4u : 5u);  // the weights' version changes between turns and within one
    if (t == 2) d.observe(0, {7, 8, 9});
    if (t == 4) d.observe(1, {11, 12});
    if (t == 12) d.end_row(1);
  }
  return d.finish();
}

}  // namespace

TEST_CASE("observations queued into a row are context placed through the KV cache: the sampled tokens' "
          "log-probabilities and routes are those of one pass over the whole sequence",
          "[policy][multi_turn]") {
  auto model = make_seeded_transformer(multi_turn_model(), 3);
  auto g = decode_with_observations(model, 11);
  const auto P = g.prompt_width;
  // Row 0: 3 sampled, 3 observed, then sampled to the budget; row 1: 5 sampled, 2 observed, 6 more, ended.
  auto gen = g.generated.accessor<bool, 2>();
  auto val = g.valid.accessor<bool, 2>();
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  CHECK(g.lengths == std::vector<std::int64_t>{20, 13});
  CHECK(g.ended == std::vector<bool>{false, true});
  for (std::int64_t c = P; c < P + 20; ++c) {
    const bool observed0 = c >= P + 3 && c < P + 6;
    CHECK(gen[0][c] == !observed0);
    CHECK(val[0][c]);
  }
  CHECK(std::vector<std::int64_t>{tok[0][P + 3], tok[0][P + 4], tok[0][P + 5]} == std::vector<std::int64_t>{7, 8, 9});
  CHECK(std::vector<std::int64_t>{tok[1][P + 5], tok[1][P + 6]} == std::vector<std::int64_t>{11, 12});
  CHECK_FALSE(gen[1][P + 5]);
  CHECK_FALSE(val[1][P + 13]);  // padded after its end
  CHECK(g.log_probs[0][P + 4].item<float>() == 0.0F);

  torch::NoGradGuard guard;
  auto whole = model->forward(g.tokens, g.valid);
  auto logp = torch::log_softmax(whole.logits / 1.3, -1);
  auto lp = g.log_probs.accessor<float, 2>();
  int checked = 0;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t c = P; c < g.tokens.size(1); ++c)
      if (gen[b][c]) {
        CHECK(std::abs(logp[b][c - 1][tok[b][c]].item<float>() - lp[b][c]) < 1e-4);
        ++checked;
      }
  CHECK(checked == 17 + 11);
  CHECK(route_mismatch(whole.routes, g.routes, g.valid) == 0.0);
}

TEST_CASE("steered tokens are placed as the policy's, with their log-probability under it", "[policy][multi_turn]") {
  auto model = make_seeded_transformer(multi_turn_model(), 4);
  Decoder d(model, {{3, 4}}, multi_turn(6));
  std::mt19937_64 rng(1);
  d.steer(0, {9, 10, 11});
  for (int t = 0; t < 3; ++t) {
    d.step(rng, 2);
    CHECK(d.last_generated(0));
  }
  CHECK(d.last_token(0) == 11);
  CHECK_FALSE(d.queued(0));
  while (!d.done()) d.step(rng, 2);
  auto g = d.finish();
  torch::NoGradGuard guard;
  auto logp = torch::log_softmax(model->forward(g.tokens, g.valid).logits / 1.3, -1);
  for (std::int64_t c = g.prompt_width; c < g.prompt_width + 3; ++c)
    CHECK(std::abs(logp[0][c - 1][g.tokens[0][c].item<std::int64_t>()].item<float>() - g.log_probs[0][c].item<float>()) < 1e-4);
}

TEST_CASE("a multi-turn segment crosses the wire with its observed tokens, and the learner admits only the "
          "policy's own",
          "[policy][multi_turn][wire]") {
  auto model = make_seeded_transformer(multi_turn_model(), 3);
  auto g = decode_with_observations(model, 12);
  auto s = token_segment(g, {1.0F, 0.0F}, {"a", "b"}, 1, 7, 0);
  REQUIRE(s.tokens);
  const auto B = 2, P = static_cast<int>(g.prompt_width);
  REQUIRE(s.tokens->observed.size() == s.actions.size());
  int observed = 0;
  for (auto o : s.tokens->observed) observed += o;
  CHECK(observed == 3 + 2);
  CHECK(s.tokens->observed[(P + 3) * B + 0] == 1);
  CHECK(s.tokens->observed[(P + 5) * B + 1] == 1);
  // Each column's version is its step's, observed or sampled.
  CHECK(s.policy_versions[P + 4] == 4);
  CHECK(s.policy_versions[P + 7] == 5);

  auto back = decode<Segment>(encode(s, "test"));
  REQUIRE(back.ok());
  CHECK(back->tokens->observed == s.tokens->observed);
  auto rows = token_rows({&*back}, multi_turn_model().layers, multi_turn_model().top_k);
  CHECK(torch::equal(rows.rows.generated, g.generated));
  CHECK(torch::equal(rows.rows.valid, g.valid));
  CHECK(torch::equal(rows.rows.tokens, g.tokens));
  // Admission (the loss mask) never takes an observation, however fresh.
  auto admitted = admit_tokens(rows.rows.versions, rows.rows.generated, 5, 10);
  CHECK_FALSE(admitted[0][P + 3].item<bool>());
  CHECK_FALSE(admitted[1][P + 6].item<bool>());
  CHECK(admitted[0][P + 2].item<bool>());
  CHECK(admitted.sum().item<std::int64_t>() == 17 + 11);

  SECTION("an observed token outside its row's completion is refused") {
    auto bad = s;
    bad.tokens->observed[0 * B + 0] = 1;  // a prompt column
    auto r = decode<Segment>(encode(bad, "test"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("observed"));
    bad = s;
    bad.tokens->observed[(P + 15) * B + 1] = 1;  // past row 1's end
    CHECK_FALSE(decode<Segment>(encode(bad, "test")).ok());
    bad = s;
    bad.tokens->observed[(P + 1) * B + 0] = 2;
    CHECK_FALSE(decode<Segment>(encode(bad, "test")).ok());
  }
}

TEST_CASE("rows decoded apart cross the wire with a version per token, and the learner reads each token's own",
          "[policy][multi_turn][continuous][wire]") {
  auto model = make_seeded_transformer(multi_turn_model(), 6);
  // Two sequences decoded apart: row 0's tokens by versions 3 and 4, row
  // 1's by 5 and 6, so one column holds tokens of different versions.
  const auto L = multi_turn_model().layers, K = multi_turn_model().top_k;
  std::vector<Sequence> seqs(2);
  for (std::size_t b = 0; b < 2; ++b) {
    auto& q = seqs[b];
    q.prompt_length = 2;
    for (int i = 0; i < 8; ++i) {
      const bool prompt = i < 2, observed = i == 5;
      q.tokens.push_back(3 + i);
      q.generated.push_back(!prompt && !observed);
      q.log_probs.push_back(prompt || observed ? 0.0F : -1.0F);
      q.versions.push_back(prompt || observed ? 0 : static_cast<std::int64_t>(3 + 2 * b + (i >= 4)));
      for (int r = 0; r < L * K; ++r) q.routes.push_back(r % 2);
    }
  }
  const auto g = generation_of(seqs, L, K, 0);
  auto s = token_segment(g, {1.0F, 0.0F}, {"a", "b"}, 2, 7, 0);
  REQUIRE(s.tokens);
  REQUIRE(s.tokens->versions.size() == s.actions.size());
  CHECK(s.oldest_version() == 3);
  CHECK(s.newest_version() == 6);
  CHECK(s.policy_versions[2] == 3);  // a column's oldest
  auto back = decode<Segment>(encode(s, "test"));
  REQUIRE(back.ok());
  CHECK(back->tokens->versions == s.tokens->versions);
  auto rows = token_rows({&*back}, L, K);
  CHECK(torch::equal(rows.rows.versions, g.versions));
  CHECK(rows.rows.versions[1][3].item<std::int64_t>() == 5);
  CHECK(rows.rows.versions[1][6].item<std::int64_t>() == 6);
  // Admission per token: at learner version 8 with staleness 2, row 0's
  // tokens (3, 4) are too old and row 1's of version 6 are in.
  auto admitted = admit_tokens(rows.rows.versions, rows.rows.generated, 8, 2);
  CHECK(admitted[0].sum().item<std::int64_t>() == 0);
  CHECK(admitted[1].sum().item<std::int64_t>() == 3);

  SECTION("rows in lockstep keep one version per column") {
    auto lock = decode_with_observations(model, 3);
    CHECK(token_segment(lock, {0.0F, 0.0F}, {"a", "b"}, 1, 7, 0).tokens->versions.empty());
  }
  SECTION("versions of the wrong size, or older than their column's, are refused") {
    auto bad = s;
    bad.tokens->versions.pop_back();
    CHECK_FALSE(decode<Segment>(encode(bad, "test")).ok());
    bad = s;
    bad.tokens->versions[3 * 2 + 0] = 1;
    auto r = decode<Segment>(encode(bad, "test"));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("older than its column"));
  }
}
