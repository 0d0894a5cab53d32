// Deferred rewards on the explorer's side: the env ends episodes with a
// payload, the explorer asks the node's reward workers, and every segment
// reaches the learner with the scores in its rewards. One worker never
// answers and one is dead: their requests are asked of the next worker,
// and no score is lost or waited on forever.
#include <atomic>
#include <functional>

#include <catch2/catch.hpp>

#include "actors/explorer_actor.hpp"
#include "actors/reward_actor.hpp"
#include "actors/weight_store.hpp"
#include "envs/batch_env.hpp"
#include "learner/trainer.hpp"
#include "messages/codec.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

// Acks every segment and forwards it to `sink`.
learner_actor::behavior_type forwarding_learner(learner_actor::pointer self, caf::actor sink) {
  return {
      [=](segment_atom, const WireMsg& m) {
        self->send(caf::actor_cast<explorer_actor>(self->current_sender()), ack_atom::value);
        caf::anon_send(sink, segment_atom::value, m);
      },
      [](metrics_atom) { return WireMsg{encode(MetricsData{}, "test")}; },
      [](stop_atom) { return WireMsg{encode(MetricsData{}, "test")}; },
      [](counts_atom) { return std::uint64_t{0}; },
  };
}

// A reward worker that never answers (its promises are kept, never delivered).
struct SilentState {
  std::vector<caf::typed_response_promise<WireMsg>> held;
};
reward_actor::behavior_type silent_reward(reward_actor::stateful_pointer<SilentState> self, int) {
  return {
      [self](reward_atom, const WireMsg&) -> caf::result<WireMsg> {
        self->state.held.push_back(self->make_response_promise<WireMsg>());
        return self->state.held.back();
      },
      [](counts_atom) { return std::uint64_t{0}; },
  };
}
// An explorer on the sum task (examples/envs/sum_task.py: every step ends
// a one-step episode whose reward is deferred) with a real weight store, a
// learner that forwards its segments to the test, and `rewards` as pool.
struct Rig {
  test::ActorFixture f;
  std::int64_t B = 4, T = 8;
  weight_store_actor store;
  explorer_actor explorer;
  learner_actor learner;
  coordinator_actor coordinator;

  explicit Rig(const std::function<std::vector<reward_actor>(caf::actor_system&)>& pool, int retries = 2) {
    const auto factory = make_batch_env_factory("exec:python3 " RLX_SOURCE_DIR "/examples/envs/sum_task.py",
                                                ExternalEnvConfig{}, builtin_envs(), f.log);
    const EnvSpec spec = factory(1, 0, 1)->spec();
    REQUIRE(spec.obs_dim == 2);
    REQUIRE(spec.num_actions == 5);
    const PolicyConfig policy;
    store = spawn_weight_store(f.system, WeightStoreOptions{4, 64 << 10, f.log});
    const WeightSetData w = make_trainer(TrainerOptions{LearnerConfig{}, policy, spec.obs_dim, spec.num_actions, 1})->weights();
    f.self->send(store, publish_atom::value, WireMsg{encode(w, "test")});
    learner = f.system.spawn(forwarding_learner, caf::actor{f.self});
    coordinator = f.system.spawn(test::stub_coordinator, caf::actor{});
    ExplorerActorOptions eo;
    eo.work.rollout = RolloutOptions{0, B, spec.obs_dim, spec.num_actions, T, 1, policy};
    eo.work.local_env = factory;
    eo.learner = learner;
    eo.weight_store = store;
    eo.coordinator = coordinator;
    eo.rewards = pool(f.system);
    eo.reward_timeout = 300ms;
    eo.loop.reward_retries = retries;
    eo.log = f.log;
    explorer = spawn_explorer(f.system, eo);
  }
  Segment next_segment() {
    Segment seg;
    f.self->receive([&](segment_atom, const WireMsg& m) { seg = *decode<Segment>(m.buf); },
                    caf::after(60s) >> [] { FAIL("no segment within 60 s"); });
    REQUIRE(seg.rewards.size() == static_cast<std::size_t>(T * B));
    return seg;
  }
  std::uint64_t explorer_errors() {
    std::uint64_t n = 0;
    f.self->request(explorer, 10s, counts_atom::value).receive([&](std::uint64_t e) { n = e; }, [](caf::error&) {});
    return n;
  }
  ~Rig() {
    for (caf::actor a : {caf::actor_cast<caf::actor>(explorer), caf::actor_cast<caf::actor>(store),
                         caf::actor_cast<caf::actor>(learner), caf::actor_cast<caf::actor>(coordinator)})
      f.self->send_exit(a, caf::exit_reason::user_shutdown);
  }
};

}  // namespace

TEST_CASE("an explorer whose node has no reward worker masks its deferred episodes out and goes on",
          "[actors][reward][failure][infra]") {
  Rig rig([](caf::actor_system&) { return std::vector<reward_actor>{}; });
  for (int k = 0; k < 2; ++k) {
    const Segment seg = rig.next_segment();
    // Every step ends a one-step episode whose reward never came: no score,
    // no return, every step masked, each counted by its reason.
    for (float r : seg.rewards) CHECK(r == 0.0f);
    CHECK(seg.episode_returns.empty());
    CHECK(seg.masked == std::vector<std::uint8_t>(static_cast<std::size_t>(rig.T * rig.B), 1));
    CHECK(seg.masked_rows == std::vector<std::uint8_t>(static_cast<std::size_t>(rig.T * rig.B),
                                                       static_cast<std::uint8_t>(InfraFailure::no_reward_pool)));
    CHECK(seg.infra_failures[static_cast<std::size_t>(InfraFailure::no_reward_pool)] == rig.T * rig.B);
    CHECK(seg.reward_retries == 0);
  }
}

namespace {
// Scores sums, and fails like an overloaded sandbox on every third call.
struct FlakyScorer : Scorer {
  mutable std::atomic<int> calls{0}, failures{0};
  RewardResultData score(const RewardRequestData& req) const override {
    if (calls++ % 3 == 2) {
      ++failures;
      RewardResultData r;
      r.request_id = req.request_id;
      r.ok = false;
      r.failure = InfraFailure::overloaded;
      r.reason = "starved";
      return r;
    }
    return ArithmeticScorer().score(req);
  }
};
}  // namespace

TEST_CASE("a scorer whose machinery fails for a third of the rows: each failure retried, then masked, the counts match",
          "[actors][reward][failure][infra]") {
  for (const int retries : {0, 2}) {
    DYNAMIC_SECTION("retries " << retries) {
      auto scorer = std::make_shared<FlakyScorer>();
      Rig rig(
          [&](caf::actor_system& sys) {
            return std::vector<reward_actor>{spawn_reward(sys, RewardActorOptions{scorer, "reward/0", null_logger()})};
          },
          retries);
      std::uint64_t masked = 0, retried = 0, failures = 0, scored = 0;
      for (int k = 0; k < 3; ++k) {
        const Segment seg = rig.next_segment();
        masked += seg.masked_rows.size();
        retried += seg.reward_retries;
        failures += seg.infra_failures.empty() ? 0 : seg.infra_failures[static_cast<std::size_t>(InfraFailure::overloaded)];
        scored += seg.episode_returns.size();
        CHECK(seg.masked_rows.size() + seg.episode_returns.size() == static_cast<std::size_t>(rig.T * rig.B));
        // A masked step carries no reward; a scored one its sum's score.
        for (std::int64_t i = 0; i < rig.T * rig.B; ++i) {
          const float a = seg.observations[i * 2], b = seg.observations[i * 2 + 1];
          const float expected = static_cast<float>(seg.actions[i]) == a + b ? 1.0f : 0.0f;
          CHECK(seg.rewards[i] == (seg.step_masked(static_cast<std::size_t>(i / rig.B), static_cast<std::size_t>(i % rig.B))
                                       ? 0.0f
                                       : expected));
        }
      }
      CHECK(failures == masked + retried);  // every failure was either asked again or masked
      if (retries == 0) {
        CHECK(retried == 0);
        CHECK(masked == failures);
        CHECK(masked == 32);  // every third of the 96 calls
      } else {
        CHECK(retried > 0);
        CHECK(masked * 3 <= failures);  // a masked row failed three times
      }
      CHECK(scored + masked == static_cast<std::uint64_t>(3 * rig.T * rig.B));
    }
  }
}

TEST_CASE("deferred rewards reach the learner inside their segments, re-asked past a silent and a dead worker",
          "[actors][reward][failure]") {
  std::vector<caf::actor> workers;
  Rig rig([&](caf::actor_system& sys) {
    auto silent = sys.spawn(silent_reward, 0);
    auto dead = spawn_reward(sys, RewardActorOptions{std::make_shared<ArithmeticScorer>(), "reward/1", null_logger()});
    caf::anon_send_exit(dead, caf::exit_reason::kill);
    auto good = spawn_reward(sys, RewardActorOptions{std::make_shared<ArithmeticScorer>(), "reward/2", null_logger()});
    workers = {caf::actor_cast<caf::actor>(silent), caf::actor_cast<caf::actor>(good)};
    return std::vector<reward_actor>{silent, dead, good};
  });
  std::size_t right = 0, episodes = 0;
  std::uint64_t retried = 0;
  for (int k = 0; k < 3; ++k) {
    const Segment seg = rig.next_segment();
    float sum = 0;
    for (std::int64_t i = 0; i < rig.T * rig.B; ++i) {
      // Every step ends a one-step episode whose reward the pool scored: 1 when the answer was a + b.
      const float a = seg.observations[i * 2], b = seg.observations[i * 2 + 1];
      const float expected = static_cast<float>(seg.actions[i]) == a + b ? 1.0f : 0.0f;
      CHECK(seg.rewards[i] == expected);
      sum += seg.rewards[i];
      right += expected > 0 ? 1 : 0;
    }
    REQUIRE(seg.episode_returns.size() == static_cast<std::size_t>(rig.T * rig.B));
    CHECK(seg.masked_rows.empty());
    retried += seg.reward_retries;
    float returns = 0;
    for (float r : seg.episode_returns) returns += r;
    CHECK(returns == sum);
    episodes += seg.episode_returns.size();
  }
  INFO(right << " of " << episodes << " answered right");
  CHECK(episodes == static_cast<std::size_t>(3 * rig.T * rig.B));
  // No reward was given up: every request found the good worker in time,
  // two of three after one or two failures.
  CHECK(rig.explorer_errors() == 0);
  CHECK(retried >= 3 * 32 / 3);
  for (auto& w : workers) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
}
