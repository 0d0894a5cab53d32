#include "tests/torch_catch.hpp"

#include "policy/moe_transformer.hpp"
#include "policy/token_sampler.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

namespace {

TransformerOptions small() { return test::small_transformer(); }

}  // namespace

TEST_CASE("decoding through the KV cache gives the logits of the whole sequence at once", "[policy][transformer]") {
  auto model = make_seeded_transformer(small(), 5);
  auto tokens = torch::randint(2, 20, {3, 9}, torch::kLong);
  auto valid = torch::ones({3, 9}, torch::kBool);
  valid[1].narrow(0, 0, 3).fill_(false);  // row 1 is a left-padded shorter sequence
  torch::NoGradGuard guard;
  auto whole = model->forward(tokens, valid);
  auto cache = model->new_cache(3, 12);
  auto first = model->step(tokens.narrow(1, 0, 4), valid.narrow(1, 0, 4), cache);
  std::vector<torch::Tensor> logits{first.logits};
  for (int i = 4; i < 9; ++i) logits.push_back(model->step(tokens.narrow(1, i, 1), valid.narrow(1, i, 1), cache).logits);
  auto stepped = torch::cat(logits, 1);
  auto mask = valid.unsqueeze(-1).expand_as(stepped);
  CHECK(torch::allclose(stepped.masked_select(mask), whole.logits.masked_select(mask), 1e-4, 1e-5));
  CHECK(cache.length == 9);
}

TEST_CASE("a left-padded prompt reads the same as the prompt alone", "[policy][transformer]") {
  auto model = make_seeded_transformer(small(), 6);
  torch::NoGradGuard guard;
  auto alone = model->forward(torch::tensor({{3, 4, 5}}, torch::kLong), torch::ones({1, 3}, torch::kBool));
  auto padded = model->forward(torch::tensor({{0, 0, 3, 4, 5}}, torch::kLong),
                               torch::tensor({{false, false, true, true, true}}, torch::kBool));
  CHECK(torch::allclose(alone.logits, padded.logits.narrow(1, 2, 3), 1e-4, 1e-5));
  CHECK((padded.routes.select(2, 0) == -1).all().item<bool>());  // padding has no route
}

TEST_CASE("replaying the recorded routes reproduces the output, and other routes change it", "[policy][transformer]") {
  auto model = make_seeded_transformer(small(), 7);
  auto tokens = torch::randint(2, 20, {2, 8}, torch::kLong);
  auto valid = torch::ones({2, 8}, torch::kBool);
  auto own = model->forward(tokens, valid);
  auto replayed = model->forward(tokens, valid, own.routes);
  CHECK(torch::allclose(own.logits, replayed.logits, 1e-5, 1e-6));
  CHECK(route_mismatch(own.routes, replayed.routes, valid) == 0.0);
  auto shifted = (own.routes + 1).remainder(4);  // every token to other experts
  auto other = model->forward(tokens, valid, shifted);
  CHECK_FALSE(torch::allclose(own.logits, other.logits, 1e-3, 1e-3));
  CHECK(route_mismatch(own.routes, shifted, valid) == 1.0);
  other.logits.sum().backward();  // the router still gets a gradient under replay
  CHECK(model->named_parameters()["moe_0.router.weight"].grad().abs().sum().item<float>() > 0);
}

TEST_CASE("an expert over its capacity drops the tokens past it", "[policy][moe]") {
  MoEOptions o{4, 8, 4, 4, 1, true, 1.0};
  MoELayer moe(o);
  auto& router = *moe->named_modules()["router"]->as<LinearMap>();
  {
    torch::NoGradGuard g;
    router.weight.zero_();
    router.bias.copy_(torch::tensor({10.0f, 0.0f, 0.0f, 0.0f}));  // every token wants expert 0
  }
  auto x = torch::randn({8, 4});
  auto out = moe->forward(x);
  // Capacity 1.0 * 8 * 1 / 4 = 2: tokens 0 and 1 are served, 2..7 dropped.
  CHECK(out.dropped_fraction == Approx(6.0 / 8.0));
  CHECK(out.y.narrow(0, 2, 6).abs().sum().item<float>() == 0.0f);
  CHECK(out.y.narrow(0, 0, 2).abs().sum().item<float>() > 0.0f);
}

TEST_CASE("batched sampling records tokens, log-probs, routes and the version of every token",
          "[policy][transformer]") {
  auto model = make_seeded_transformer(small(), 8);
  SampleOptions o;
  o.max_new_tokens = 6;
  o.eos = 1;
  o.pad = 0;
  std::mt19937_64 rng(3);
  std::vector<std::vector<std::int64_t>> prompts{{5, 6, 7}, {8}};
  auto g = generate(model, prompts, o, rng, [](std::int64_t step) { return step < 2 ? 10u : 11u; });
  CHECK(g.prompt_width == 3);
  CHECK(g.tokens[1][0].item<std::int64_t>() == 0);  // left padding
  CHECK(g.tokens[1][2].item<std::int64_t>() == 8);
  for (int b = 0; b < 2; ++b) {
    const auto n = g.lengths[b];
    CHECK(n >= 1);
    CHECK(g.generated[b].sum().item<std::int64_t>() == n);
    CHECK(g.versions[b][3].item<std::int64_t>() == 10);  // the first token: before the swap
    if (n > 2) CHECK(g.versions[b][5].item<std::int64_t>() == 11);
    auto gen_routes = g.routes.select(1, b).index({torch::indexing::Slice(), g.generated[b]});
    CHECK((gen_routes >= 0).all().item<bool>());  // every sampled token has its routes
  }
  // The recorded log-probs are the model's own at temperature 1.
  auto out = model->forward(g.tokens, g.valid);
  auto lp = torch::log_softmax(out.logits, -1).narrow(1, 0, g.tokens.size(1) - 1)
                .gather(2, g.tokens.narrow(1, 1, g.tokens.size(1) - 1).unsqueeze(-1)).squeeze(-1);
  auto mask = g.generated.narrow(1, 1, g.tokens.size(1) - 1);
  CHECK(torch::allclose(lp.masked_select(mask), g.log_probs.narrow(1, 1, g.tokens.size(1) - 1).masked_select(mask),
                        1e-4, 1e-5));
  // Routes recorded while sampling are what a full pass chooses.
  CHECK(route_mismatch(out.routes, g.routes, g.valid) < 0.05);
}

TEST_CASE("sampling with and without the KV cache gives the same tokens", "[policy][transformer]") {
  auto model = make_seeded_transformer(small(), 9);
  SampleOptions o;
  o.max_new_tokens = 8;
  o.eos = 1;
  std::vector<std::vector<std::int64_t>> prompts{{5, 6, 7}, {8, 9}, {2}};
  std::mt19937_64 a(4), b(4);
  auto cached = generate(model, prompts, o, a);
  o.use_cache = false;
  auto plain = generate(model, prompts, o, b);
  CHECK(torch::equal(cached.tokens, plain.tokens));
}

TEST_CASE("top-p keeps the nucleus and greedy picks the argmax", "[policy][transformer]") {
  auto logits = torch::log(torch::tensor({{0.6f, 0.3f, 0.05f, 0.05f}}));
  SampleOptions o;
  o.top_p = 0.8;
  std::mt19937_64 rng(1);
  int seen[4] = {0, 0, 0, 0};
  for (int i = 0; i < 400; ++i) ++seen[sample_tokens(logits, o, rng).first[0]];
  CHECK(seen[2] + seen[3] == 0);
  CHECK(seen[1] > 60);
  o.greedy = true;
  auto [t, lp] = sample_tokens(logits, o, rng);
  CHECK(t[0] == 0);
  CHECK(lp[0] == Approx(std::log(0.6)).epsilon(1e-4));
}
