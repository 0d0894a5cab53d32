// The gateway's decoding (explorers/gateway_rows.hpp): turns that wait
// together are decoded together, each as it would be alone; every token a
// client sees is the one its session keeps, with its log-probability under
// one pass over the whole trajectory; stop strings, budgets, clients that
// give up and prompts that cannot fit end rows cleanly.
#include "tests/torch_catch.hpp"

#include <thread>

#include "envs/tokens/tokenizer.hpp"
#include "explorers/gateway_rows.hpp"
#include "explorers/token_rollout.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;

namespace {

TurnSpec rows_test_turn(const std::string& text, std::int64_t max_tokens, std::uint64_t session = 0) {
  TurnSpec t;
  t.prompt = Tokenizer::characters()->encode(text);
  t.max_tokens = max_tokens;
  t.session = session;
  return t;
}

// Steps until the hub has nothing queued and no row is busy.
void rows_test_drain(GatewayRows& rows, std::mt19937_64& rng, std::uint64_t version) {
  while (rows.step(rng, version, std::chrono::milliseconds(0))) {
  }
}

}  // namespace

TEST_CASE("turns queued together are decoded in one batch, and each greedy completion is the one it gets alone",
          "[gateway][explorers][continuous]") {
  const auto chars = Tokenizer::characters();
  auto model = make_seeded_transformer(test::small_transformer(128, chars->vocab()), 4);
  SampleOptions greedy;
  greedy.greedy = true;
  const std::vector<std::string> prompts = {"def f(x):", "return", "a = [1, 2]", "print(", "x", "class A:"};
  const std::vector<std::int64_t> budgets = {12, 5, 20, 9, 16, 3};

  // Alone: one row, one turn at a time.
  std::vector<std::vector<std::int64_t>> alone;
  {
    auto hub = std::make_shared<GatewayHub>();
    GatewayRows rows(model, 1, greedy, chars, hub, 8);
    std::mt19937_64 rng(1);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      auto turn = hub->submit(rows_test_turn(prompts[i], budgets[i]));
      REQUIRE(turn.ok());
      rows_test_drain(rows, rng, 1);
      const auto v = (*turn)->wait(0, std::chrono::steady_clock::now());
      REQUIRE(v.done);
      alone.push_back(v.ids);
    }
  }
  // Together: four rows, all six queued at once.
  auto hub = std::make_shared<GatewayHub>();
  GatewayRows rows(model, 4, greedy, chars, hub, 8);
  std::vector<std::shared_ptr<GatewayTurn>> turns;
  for (std::size_t i = 0; i < prompts.size(); ++i) turns.push_back(*hub->submit(rows_test_turn(prompts[i], budgets[i])));
  std::mt19937_64 rng(2);
  REQUIRE(rows.step(rng, 7, std::chrono::milliseconds(0)));
  CHECK(rows.busy_rows() == 4);  // the first step took four turns at once
  rows_test_drain(rows, rng, 7);
  for (std::size_t i = 0; i < turns.size(); ++i) {
    INFO(prompts[i]);
    const auto v = turns[i]->wait(0, std::chrono::steady_clock::now());
    REQUIRE(v.done);
    CHECK(v.error.empty());
    CHECK(v.ids == alone[i]);
    const bool ended_by_eos = !v.ids.empty() && v.ids.back() == Tokenizer::characters()->eos();
    CHECK(v.finish_reason == (ended_by_eos ? "stop" : "length"));
    if (!ended_by_eos) CHECK(static_cast<std::int64_t>(v.ids.size()) == budgets[i]);
    CHECK(v.versions == std::vector<std::int64_t>(v.ids.size(), 7));
    CHECK(v.text == chars->decode(v.ids));
  }
  // Six turns of uneven length on four rows: freed rows took the waiting turns.
  CHECK(rows.rows_busy() * 10 > rows.rows_stepped() * 6);
  CHECK(hub->counts().turns_done == 6);
}

TEST_CASE("a session played through the gateway becomes a trajectory whose every sampled token has the "
          "log-probability and routes one pass over it gives",
          "[gateway][explorers][continuous]") {
  const auto chars = Tokenizer::characters();
  auto model = make_seeded_transformer(test::small_transformer(256, chars->vocab()), 11);
  auto hub = std::make_shared<GatewayHub>();
  GatewayRows rows(model, 3, SampleOptions{}, chars, hub, 16);
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(*hub->open("task-" + std::to_string(i), ""));
  // Three turns each; the harness sends token ids back (token in), then tool output as text.
  std::vector<std::vector<std::int64_t>> context(3);
  for (int i = 0; i < 3; ++i) context[i] = chars->encode("<|user|>\nfix f " + std::to_string(i) + "\n<|assistant|>\n");
  std::uint64_t version = 1;
  for (int turn = 0; turn < 3; ++turn) {
    std::vector<std::shared_ptr<GatewayTurn>> waiting;
    for (int i = 0; i < 3; ++i) {
      TurnSpec t;
      t.prompt = context[i];
      t.max_tokens = 6 + 5 * i;
      t.session = sessions[i];
      waiting.push_back(*hub->submit(t));
    }
    while (rows.step(rng, version, std::chrono::milliseconds(0))) ++version;  // weights change within turns
    for (int i = 0; i < 3; ++i) {
      const auto v = waiting[i]->wait(0, std::chrono::steady_clock::now());
      REQUIRE(v.done);
      context[i].insert(context[i].end(), v.ids.begin(), v.ids.end());
      const auto tool = chars->encode("\n<|tool|>\nok " + std::to_string(turn) + "\n<|assistant|>\n");
      context[i].insert(context[i].end(), tool.begin(), tool.end());
    }
  }
  for (int i = 0; i < 3; ++i) REQUIRE(hub->reward(sessions[i], static_cast<float>(i), false).ok());
  const auto got = hub->take_groups(3, 3);
  REQUIRE(got.size() == 3);
  std::vector<Sequence> seqs;
  for (const auto& r : got) {
    Sequence s;
    s.prompt_length = r.prompt_length;
    s.tokens = r.trace.tokens;
    s.generated = r.trace.generated;
    s.log_probs = r.trace.log_probs;
    s.versions = r.trace.versions;
    s.routes = r.trace.routes;
    seqs.push_back(std::move(s));
    // The trajectory is the session's context before its last tool output.
    const auto& c = context[static_cast<std::size_t>(&r - got.data())];
    CHECK(std::equal(r.trace.tokens.begin(), r.trace.tokens.end(), c.begin()));
  }
  CHECK(hub->counts().prefix_mismatch == 0);
  CHECK(hub->counts().eos_dropped == 0);
  const auto g = generation_of(seqs, model->options().layers, model->options().top_k, Tokenizer::characters()->pad());
  torch::NoGradGuard guard;
  auto whole = model->forward(g.tokens, g.valid);
  CHECK(test::worst_log_prob_gap(g, whole.logits) < 1e-3);
  CHECK(route_mismatch(whole.routes, g.routes, g.valid) == 0.0);
  CHECK(g.versions.max().item<std::int64_t>() > 1);  // tokens from more than one version
}

TEST_CASE("a stop string ends a turn and cuts its text, a client that gives up frees its row, and a prompt that "
          "cannot fit fails with the reason",
          "[gateway][explorers]") {
  const auto chars = Tokenizer::characters();
  auto model = make_seeded_transformer(test::small_transformer(64, chars->vocab()), 5);
  auto hub = std::make_shared<GatewayHub>();
  SampleOptions steer;
  GatewayRows rows(model, 2, steer, chars, hub, 8);
  std::mt19937_64 rng(4);

  // Greedy decoding of this model gives some text; a stop string taken from it ends the turn there.
  SampleOptions greedy;
  greedy.greedy = true;
  GatewayRows greedy_rows(model, 1, greedy, chars, hub, 8);
  auto probe = hub->submit(rows_test_turn("abc", 20));
  rows_test_drain(greedy_rows, rng, 1);
  const auto free_text = (*probe)->wait(0, std::chrono::steady_clock::now());
  REQUIRE(free_text.text.size() >= 4);
  // The first two characters from the third on that occur nowhere before.
  std::size_t k = 2;
  while (k + 2 <= free_text.text.size() && free_text.text.find(free_text.text.substr(k, 2)) != k) ++k;
  REQUIRE(k + 2 <= free_text.text.size());
  auto spec = rows_test_turn("abc", 20);
  spec.stop = {free_text.text.substr(k, 2)};
  auto stopped = hub->submit(spec);
  rows_test_drain(greedy_rows, rng, 1);
  const auto v = (*stopped)->wait(0, std::chrono::steady_clock::now());
  CHECK(v.finish_reason == "stop");
  CHECK(v.text == free_text.text.substr(0, k));
  // Every token sampled is returned, the stop string's too, and nothing after it.
  CHECK(chars->decode(v.ids) == free_text.text.substr(0, k + 2));
  CHECK(std::equal(v.ids.begin(), v.ids.end(), free_text.ids.begin()));

  auto too_long = hub->submit(rows_test_turn(std::string(64, 'x'), 4));
  auto given_up = hub->submit(rows_test_turn("abc", 40));
  REQUIRE(rows.step(rng, 1, std::chrono::milliseconds(0)));
  const auto failed = (*too_long)->wait(0, std::chrono::steady_clock::now());
  CHECK(failed.done);
  CHECK(failed.error.find("context holds 64") != std::string::npos);
  CHECK(rows.busy_rows() == 1);
  (*given_up)->cancel();
  rows_test_drain(rows, rng, 1);
  CHECK(rows.busy_rows() == 0);
  CHECK((*given_up)->wait(0, std::chrono::steady_clock::now()).ids.size() < 40);
  CHECK(hub->counts().turns_cancelled == 1);
  CHECK(hub->counts().turns_failed == 1);

  // A client waits on another thread while the explorer decodes: it sees tokens as they come.
  auto streamed = hub->submit(rows_test_turn("abc", 10));
  std::vector<std::size_t> seen_sizes;
  std::thread client([&] {
    std::size_t seen = 0;
    for (;;) {
      const auto view = (*streamed)->wait(seen, std::chrono::steady_clock::now() + std::chrono::minutes(1));
      if (view.ids.size() > seen) seen_sizes.push_back(view.ids.size());
      seen = view.ids.size();
      if (view.done) break;
    }
  });
  rows_test_drain(rows, rng, 1);
  client.join();
  REQUIRE_FALSE(seen_sizes.empty());
  CHECK(seen_sizes.back() == (*streamed)->wait(0, std::chrono::steady_clock::now()).ids.size());
}

TEST_CASE("a gateway explorer holding a decoded turn reports nothing in hand once the run has closed its hub",
          "[gateway][explorers][drain]") {
  // A draining explorer waits for the segment in hand; a gateway
  // explorer's turn whose session is never rewarded cannot finish one
  // after the hub closes, so it must not count (it once kept the actor
  // system from shutting down).
  auto hub = std::make_shared<GatewayHub>();
  TokenRolloutOptions o;
  o.kind = "gateway";
  o.rows = 2;
  o.tokens.group_size = 1;
  o.policy = test::tiny_policy(128);
  o.gateway = hub;
  TokenRollout rollout(o);
  const auto session = hub->open("task-1", "");
  REQUIRE(session.ok());
  auto turn = hub->submit(rows_test_turn("def f(x):", 4, *session));
  REQUIRE(turn.ok());
  while (!(*turn)->wait(0, std::chrono::steady_clock::now()).done) REQUIRE(rollout.step().ok());
  CHECK(rollout.steps_in_segment() > 0);  // the turn's tokens are in hand; its session waits for a reward
  hub->close("the run ended");
  CHECK(rollout.steps_in_segment() == 0);
  auto after = rollout.step();
  REQUIRE(after.ok());
  CHECK_FALSE(*after);  // no group can complete
}
