// Continuous batching (policy/continuous_decoder.hpp): rows take new
// sequences while others go on, prompts and observations enter a chunk at
// a time, the cache is compacted, and still every sequence reads only its
// own tokens: what it samples is what one pass over it alone gives.
#include "tests/torch_catch.hpp"

#include <map>
#include <set>

#include "policy/continuous_decoder.hpp"
#include "policy/moe_transformer.hpp"
#include "policy/token_sampler.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

namespace {

SampleOptions sampling(std::int64_t budget, double temperature) {
  SampleOptions s;
  s.max_new_tokens = budget;
  s.end_at_eos = false;
  s.temperature = temperature;
  return s;
}

// Prompts of 1 to 11 tokens.
std::vector<std::int64_t> prompt_of(std::uint64_t id) {
  std::vector<std::int64_t> p;
  for (std::uint64_t i = 0; i < 1 + (id * 5) % 11; ++i) p.push_back(static_cast<std::int64_t>(3 + (id + i * 7) % 15));
  return p;
}

// Decodes `total` sequences through `rows` rows, refilling rows as they
// free up. Sequence i takes an observation of 1 + i % 6 tokens after its
// 3rd sampled token and ends after 4 + 3i sampled ones (or out of room).
std::vector<Sequence> decode(MoETransformer& model, ContinuousDecoder& d, std::uint64_t total, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uint64_t next_id = 0, version = 1;
  std::map<std::uint64_t, int> sampled;
  std::vector<Sequence> done;
  while (done.size() < total) {
    for (std::int64_t r = 0; r < d.rows(); ++r)
      if (d.idle(r) && next_id < total) d.start(r, prompt_of(next_id), next_id), ++next_id;
    d.step(rng, version);
    if (d.steps() % 5 == 0) ++version;  // versions change within sequences
    for (std::int64_t r = 0; r < d.rows(); ++r) {
      if (!d.sampled(r)) continue;
      const auto id = d.id(r);
      const int n = ++sampled[id];
      if (n >= 4 + 3 * static_cast<int>(id) || d.room(r) == 0) {
        d.end(r);
      } else if (n == 3) {
        std::vector<std::int64_t> obs;
        for (std::uint64_t i = 0; i < 1 + id % 6; ++i) obs.push_back(static_cast<std::int64_t>(10 + i));
        d.observe(r, obs);
      }
    }
    for (auto& s : d.take_finished()) done.push_back(std::move(s));
  }
  static_cast<void>(model);
  return done;
}

}  // namespace

TEST_CASE("rows refilled with new sequences read only their own tokens: every sampled token's log-probability and "
          "routes are those of one pass over its sequence, through chunked prefills and compactions",
          "[policy][continuous]") {
  auto model = make_seeded_transformer(test::small_transformer(48), 5);
  const double temperature = 1.2;
  ContinuousDecoder d(model, 3, sampling(24, temperature), /*chunk=*/4);
  const auto done = decode(model, d, 9, 7);
  REQUIRE(done.size() == 9);
  CHECK(d.compactions() > 0);
  CHECK_FALSE(d.busy());

  // The finished sequences as the learner's rows, scored in one pass.
  const auto g = generation_of(done, model->options().layers, model->options().top_k, 0);
  torch::NoGradGuard guard;
  auto whole = model->forward(g.tokens, g.valid);
  auto logp = torch::log_softmax(whole.logits / temperature, -1);
  auto gen = g.generated.accessor<bool, 2>();
  auto tok = g.tokens.accessor<std::int64_t, 2>();
  auto lp = g.log_probs.accessor<float, 2>();
  auto ver = g.versions.accessor<std::int64_t, 2>();
  int checked = 0, observed = 0;
  std::set<std::int64_t> versions;
  for (std::size_t b = 0; b < done.size(); ++b) {
    const auto& s = done[b];
    INFO("sequence " << s.id);
    const auto id = static_cast<int>(s.id);
    // Sampled: 4 + 3 id or up to the budget; observed: 1 + id % 6 once 3 were sampled.
    const auto want_obs = 1 + id % 6;
    const auto want_sampled = std::min(4 + 3 * id, 24 - want_obs);
    const auto sampled = std::count(s.generated.begin(), s.generated.end(), 1);
    CHECK(sampled == want_sampled);
    CHECK(s.prompt_length == static_cast<std::int64_t>(prompt_of(s.id).size()));
    CHECK(std::vector<std::int64_t>(s.tokens.begin(), s.tokens.begin() + s.prompt_length) == prompt_of(s.id));
    const auto row = static_cast<std::int64_t>(b);
    for (std::int64_t c = g.prompt_width; c < g.tokens.size(1); ++c) {
      if (!g.valid[row][c].item<bool>()) continue;
      if (!gen[row][c]) {
        ++observed;
        continue;
      }
      CHECK(std::abs(logp[row][c - 1][tok[row][c]].item<float>() - lp[row][c]) < 1e-4);
      versions.insert(ver[row][c]);
      ++checked;
    }
  }
  CHECK(checked > 100);
  CHECK(observed > 20);
  CHECK(versions.size() > 3);
  // Every token was fed, the last ones after end(): routes of one pass.
  CHECK(route_mismatch(whole.routes, g.routes, g.valid) == 0.0);
}

TEST_CASE("greedy continuous decoding samples what the lockstep decoder samples for each prompt alone",
          "[policy][continuous]") {
  auto model = make_seeded_transformer(test::small_transformer(40), 8);
  auto o = sampling(12, 1.0);
  o.greedy = true;
  ContinuousDecoder d(model, 2, o, 3);
  std::mt19937_64 rng(1);
  std::uint64_t next = 0;
  std::vector<Sequence> done;
  while (done.size() < 5) {
    for (std::int64_t r = 0; r < 2; ++r)
      if (d.idle(r) && next < 5) d.start(r, prompt_of(next + 2), next), ++next;
    d.step(rng, 1);
    for (std::int64_t r = 0; r < 2; ++r)
      if (d.sampled(r) && d.room(r) == 0) d.end(r);
    for (auto& s : d.take_finished()) done.push_back(std::move(s));
  }
  for (const auto& s : done) {
    INFO("sequence " << s.id);
    Decoder alone(model, {prompt_of(s.id + 2)}, o);
    std::mt19937_64 r2(1);
    while (!alone.step(r2, 1)) {
    }
    const auto want = completion(alone.finish(), 0);
    CHECK(std::vector<std::int64_t>(s.tokens.begin() + s.prompt_length, s.tokens.end()) == want);
  }
}

TEST_CASE("a compacted cache keeps each row's keys in order and drops the rest", "[policy][continuous]") {
  auto model = make_seeded_transformer(test::small_transformer(32), 2);
  auto cache = model->new_cache(2, 16);
  torch::NoGradGuard guard;
  // Row 0 gets 3 tokens, row 1 one, then row 0 starts over with 2.
  model->step(torch::tensor({{4, 5, 6}, {0, 0, 7}}, torch::kLong), torch::tensor({{true, true, true}, {false, false, true}}), cache);
  reset_cache_row(cache, 0);
  auto out = model->step(torch::tensor({{8, 9}, {0, 0}}, torch::kLong), torch::tensor({{true, true}, {false, false}}), cache);
  const auto k1 = cache.k[0][1][0][2].clone();  // row 1's key, column 2
  compact_cache(cache);
  CHECK(cache.length == 2);
  CHECK(cache.valid.narrow(1, 0, 2).equal(torch::tensor({{true, true}, {false, true}})));
  CHECK(cache.k[0][1][0][1].equal(k1));
  CHECK(cache.next_position.equal(torch::tensor({2, 1}, torch::kLong)));
  // The next token reads the same after compaction as a fresh pass over the row.
  auto next = model->step(torch::tensor({{10}, {11}}, torch::kLong), torch::tensor({{true}, {true}}), cache);
  auto fresh = model->forward(torch::tensor({{8, 9, 10}}, torch::kLong), torch::tensor({{true, true, true}}));
  CHECK(torch::allclose(next.logits[0][0], fresh.logits[0][2], 1e-4, 1e-5));
  static_cast<void>(out);
}
