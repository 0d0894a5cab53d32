#include <random>

#include <catch2/catch.hpp>

#include "actors/env_actor.hpp"
#include "actors/learner_actor.hpp"
#include "actors/reward_actor.hpp"
#include "envs/code/code_tasks.hpp"
#include "actors/weight_store.hpp"
#include "messages/codec.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

WireMsg garbage(std::uint64_t seed, std::size_t bytes) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> b(bytes);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return WireMsg{WireBuffer::copy_of(b.data(), b.size())};
}

WireMsg weights_of(std::uint64_t version) {
  WeightSetData w;
  w.version = version;
  w.policy_kind = "moe_mlp";
  w.tensors.push_back({"p", {2}, {float(version), 1.0f}});
  w.checksum = w.compute_checksum();
  return WireMsg{encode(w, "test")};
}

std::uint64_t fetched_version(test::ActorFixture& f, const weight_store_actor& store, WeightRequestData req) {
  std::uint64_t got = UINT64_MAX;
  f.self->request(store, 10s, fetch_atom::value, WireMsg{encode(req, "test")})
      .receive([&](const WireMsg& m) { got = decode<WeightSetData>(m.buf)->version; },
               [&](const caf::error&) { got = UINT64_MAX - 1; });
  return got;
}

// A learner that updates on every segment.
learner_actor small_learner(test::ActorFixture& f, const weight_store_actor& store, std::uint64_t max_staleness) {
  auto cfg = test::default_config();
  LearnerActorOptions lo;
  lo.core.trainer = TrainerOptions{cfg.learner, cfg.policy, 4, 2, 1};
  lo.core.max_staleness = max_staleness;
  lo.core.batch_segments = 1;
  lo.weight_store = store;
  lo.log = f.log;
  return spawn_learner(f.system, lo);
}

}  // namespace

TEST_CASE("the learner rejects malformed segments, counts them and keeps training", "[actors][learner][defensive]") {
  test::ActorFixture f;
  auto store = spawn_weight_store(f.system, WeightStoreOptions{4, 1 << 20, f.log});
  auto learner = small_learner(f, store, 2);

  auto valid = encode(test::make_segment(8, 2, 0), "test");
  f.self->send(learner, segment_atom::value, garbage(1, 256));                                   // random bytes
  f.self->send(learner, segment_atom::value, WireMsg{WireBuffer::copy_of(valid.bytes().data(), 40)});  // truncated
  f.self->send(learner, segment_atom::value, WireMsg{encode(EnvResetData{1, 2}, "test")});       // wrong type
  f.self->send(learner, segment_atom::value, WireMsg{valid});                                     // fine: trains
  f.self->send(learner, segment_atom::value, WireMsg{encode(test::make_segment(8, 2, 0), "t")});  // lag 1: fine
  MetricsData m;
  f.self->request(learner, 30s, metrics_atom::value).receive([&](const WireMsg& w) { m = *decode<MetricsData>(w.buf); },
                                                             [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(m.segments_received == 5);
  CHECK(m.segments_rejected == 3);
  CHECK(m.segments_trained == 2);
  CHECK(m.policy_version == 2);
  std::uint64_t errors = 0;
  f.self->request(learner, 10s, counts_atom::value).receive([&](std::uint64_t n) { errors = n; },
                                                            [](const caf::error&) {});
  CHECK(errors == 3);
  // Every segment returned a credit, malformed ones too.
  int acks = 0;
  for (int i = 0; i < 5; ++i) f.self->receive([&](ack_atom) { ++acks; }, caf::after(10s) >> [] {});
  CHECK(acks == 5);
  f.self->send_exit(learner, caf::exit_reason::user_shutdown);
  f.self->send_exit(store, caf::exit_reason::user_shutdown);
}

TEST_CASE("the learner drops segments beyond max_staleness and counts them", "[actors][learner][staleness]") {
  test::ActorFixture f;
  auto store = spawn_weight_store(f.system, WeightStoreOptions{4, 1 << 20, f.log});
  auto learner = small_learner(f, store, 1);
  for (int i = 0; i < 3; ++i) f.self->send(learner, segment_atom::value, WireMsg{encode(test::make_segment(4, 2, 0), "t")});
  MetricsData m;
  f.self->request(learner, 30s, metrics_atom::value).receive([&](const WireMsg& w) { m = *decode<MetricsData>(w.buf); },
                                                             [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  // v0 trains -> v1; lag 1 trains -> v2; the third has lag 2 > 1.
  CHECK(m.segments_trained == 2);
  CHECK(m.segments_dropped_stale == 1);
  CHECK(m.policy_version == 2);
  f.self->send_exit(learner, caf::exit_reason::user_shutdown);
  f.self->send_exit(store, caf::exit_reason::user_shutdown);
}

TEST_CASE("the weight store keeps the last N versions, serves latest and by version", "[actors][weights]") {
  test::ActorFixture f;
  auto store = spawn_weight_store(f.system, WeightStoreOptions{3, 1 << 20, f.log});
  for (std::uint64_t v = 0; v <= 5; ++v) f.self->send(store, publish_atom::value, weights_of(v));
  f.self->send(store, publish_atom::value, weights_of(4));    // not newer: refused
  f.self->send(store, publish_atom::value, garbage(3, 128));  // malformed: counted
  CHECK(fetched_version(f, store, {0, true}) == 5);
  CHECK(fetched_version(f, store, {3, false}) == 3);
  CHECK(fetched_version(f, store, {2, false}) == UINT64_MAX - 1);  // evicted
  // ... and the store says so by name: the error arrives as Errc::not_found.
  Error why;
  f.self->request(store, 10s, fetch_atom::value, WireMsg{encode(WeightRequestData{2, false}, "t")})
      .receive([](const WireMsg&) {}, [&](const caf::error& e) { why = from_caf(e); });
  CHECK(why.code == Errc::not_found);
  CHECK(why.message == "version 2 is not held");
  CHECK(f.system.render(to_caf(why)) == "rlx.not_found: version 2 is not held");
  // In-process, the store serves the very buffer that was published.
  auto published = weights_of(6);
  f.self->send(store, publish_atom::value, published);
  bool shared = false;
  f.self->request(store, 10s, fetch_atom::value, WireMsg{encode(WeightRequestData{6, false}, "t")})
      .receive([&](const WireMsg& m) { shared = m.buf.shares_storage_with(published.buf); }, [](const caf::error&) {});
  CHECK(shared);
  std::uint64_t errors = 0;
  f.self->request(store, 10s, counts_atom::value).receive([&](std::uint64_t n) { errors = n; }, [](const caf::error&) {});
  CHECK(errors == 2);
  f.self->send_exit(store, caf::exit_reason::user_shutdown);
}

TEST_CASE("the weight store notifies subscribers of every new version", "[actors][weights]") {
  test::ActorFixture f;
  auto store = spawn_weight_store(f.system, WeightStoreOptions{2, 1 << 20, f.log});
  f.self->send(store, publish_atom::value, weights_of(1));
  auto sub = f.system.spawn(test::forwarding_explorer, caf::actor{f.self});
  f.self->send(store, subscribe_atom::value, caf::actor_cast<weights_listener>(sub));
  f.self->send(store, publish_atom::value, weights_of(2));
  std::vector<std::uint64_t> seen;
  for (int i = 0; i < 2; ++i)
    f.self->receive([&](weights_atom, const WireMsg& m) { seen.push_back(decode<WeightsAvailableData>(m.buf)->version); },
                    caf::after(10s) >> [] {});
  CHECK((seen == std::vector<std::uint64_t>{1, 2}));  // the newest at subscription, then each new one
  f.self->send_exit(sub, caf::exit_reason::user_shutdown);
  f.self->send_exit(store, caf::exit_reason::user_shutdown);
}

TEST_CASE("the env actor steps B environments and survives bad requests", "[actors][env][defensive]") {
  test::ActorFixture f;
  auto factory = make_batch_env_factory("cartpole", {}, builtin_envs(), f.log);
  auto env = spawn_env(f.system, EnvActorOptions{factory, 0, "env/0", f.log});
  EnvStepResultData r;
  f.self->request(env, 10s, reset_atom::value, WireMsg{encode(EnvResetData{1, 3}, "t")})
      .receive([&](const WireMsg& m) { r = *decode<EnvStepResultData>(m.buf); }, [](const caf::error&) {});
  CHECK(r.observations.size() == 12);
  bool failed = false;
  auto step = [&](WireMsg msg) {
    failed = false;
    f.self->request(env, 10s, step_atom::value, std::move(msg))
        .receive([&](const WireMsg& m) { r = *decode<EnvStepResultData>(m.buf); }, [&](const caf::error&) { failed = true; });
  };
  step(WireMsg{encode(EnvStepData{{0, 1}, 1}, "t")});  // wrong count
  CHECK(failed);
  step(WireMsg{encode(EnvStepData{{0, 1, 7}, 1}, "t")});  // action out of range
  CHECK(failed);
  step(garbage(9, 64));
  CHECK(failed);
  step(WireMsg{encode(EnvStepData{{0, 1, 1}, 2}, "t")});
  CHECK_FALSE(failed);
  CHECK(r.step_index == 2);
  CHECK((r.rewards == std::vector<float>{1, 1, 1}));
  f.self->send_exit(env, caf::exit_reason::user_shutdown);
}

TEST_CASE("the reward actor scores deferred answers", "[actors][reward]") {
  test::ActorFixture f;
  auto reward = spawn_reward(f.system, RewardActorOptions{std::make_shared<ArithmeticScorer>(), "reward/0", f.log});
  auto ask = [&](std::string task, std::string answer) {
    RewardResultData out;
    f.self->request(reward, 10s, reward_atom::value, WireMsg{encode(RewardRequestData{7, 0, task, answer}, "t")})
        .receive([&](const WireMsg& m) { out = *decode<RewardResultData>(m.buf); }, [](const caf::error&) {});
    return out;
  };
  CHECK(ask("2+3", "5").score == 1.0f);
  CHECK(ask("2*3", "5").score == 0.0f);
  CHECK(ask("9223372036854775807*2", "1").ok == false);
  auto bad = ask("nonsense", "1");
  CHECK_FALSE(bad.ok);
  CHECK(bad.request_id == 7);
  f.self->send_exit(reward, caf::exit_reason::user_shutdown);
}

TEST_CASE("a reward worker with the code scorer runs programs against a task's hidden tests in the sandbox",
          "[actors][reward][code]") {
  test::ActorFixture f;
  auto scorer = make_scorer("code");
  INFO((scorer ? std::string() : scorer.error().message));
  REQUIRE(scorer.ok());
  auto reward = spawn_reward(f.system, RewardActorOptions{*scorer, "reward/0", f.log});
  auto ask = [&](std::string task, std::string program) {
    RewardResultData out;
    out.reason = "no answer";
    f.self->request(reward, 30s, reward_atom::value, WireMsg{encode(RewardRequestData{9, 0, task, program}, "t")})
        .receive([&](const WireMsg& m) { out = *decode<RewardResultData>(m.buf); }, [](const caf::error&) {});
    return out;
  };
  const auto right = ask("count_k:4", make_code_task("count_k", 4)->reference);
  INFO(right.reason);
  CHECK(right.score == 1.0f);
  CHECK(right.request_id == 9);
  const auto loop = ask("count_k:4", "def solve(xs):\n    while True:\n        pass\n");
  CHECK(loop.ok);
  CHECK(loop.score == 0.0f);
  CHECK_FALSE(ask("no-such-task", "def solve(xs):\n    return 0\n").ok);
  f.self->send_exit(reward, caf::exit_reason::user_shutdown);
}
