// Deferred rewards on the explorer's side: the env ends episodes with a
// payload, the explorer asks the node's reward workers, and every segment
// reaches the learner with the scores in its rewards. One worker never
// answers and one is dead: their requests are asked of the next worker,
// and no score is lost or waited on forever.
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
      [](counts_atom) { return std::uint64_t{0}; },
  };
}

// A coordinator that takes everything and does nothing.
coordinator_actor::behavior_type idle_coordinator(coordinator_actor::pointer) {
  return {
      [](join_atom, const WireMsg&, explorer_actor) {},
      [](node_atom, const std::string&, node_actor, std::uint32_t, std::uint32_t, std::uint32_t) {},
      [](refused_atom, const std::string&) {},
      [](leave_atom, const WireMsg&) {},
      [](metrics_atom, const WireMsg&) {},
      [](swap_atom, std::uint32_t, double) {},
      [](tick_atom) {},
      [](beat_atom) {},
      [](produced_atom, std::uint32_t, std::uint64_t) {},
      [](stop_atom, const std::string&) {},
      [](scale_atom, std::int32_t, std::int32_t) { return std::string(); },
  };
}

// A reward worker that never answers (its promises are kept, never delivered).
struct SilentState {
  std::vector<caf::typed_response_promise<WireMsg>> held;
};
reward_actor::behavior_type silent_reward(reward_actor::stateful_pointer<SilentState> self) {
  return {
      [self](reward_atom, const WireMsg&) -> caf::result<WireMsg> {
        self->state.held.push_back(self->make_response_promise<WireMsg>());
        return self->state.held.back();
      },
      [](counts_atom) { return std::uint64_t{0}; },
  };
}

}  // namespace

TEST_CASE("an explorer whose node has no reward worker scores deferred episodes 0 and goes on",
          "[actors][reward][failure]") {
  test::ActorFixture f;
  ExternalEnvConfig external;
  const auto factory =
      make_batch_env_factory("exec:python3 " RLX_SOURCE_DIR "/examples/envs/sum_task.py", external, builtin_envs(), f.log);
  const EnvSpec spec = factory(1, 0, 1)->spec();
  const PolicyConfig policy;
  auto store = spawn_weight_store(f.system, WeightStoreOptions{4, 64 << 10, f.log});
  f.self->send(store, publish_atom::value,
               WireMsg{encode(Trainer(TrainerOptions{LearnerConfig{}, policy, spec.obs_dim, spec.num_actions, 1}).weights(),
                              "test")});
  ExplorerActorOptions eo;
  eo.rollout = RolloutOptions{0, 4, spec.obs_dim, spec.num_actions, 8, 1, policy};
  eo.local_env = factory;
  eo.learner = f.system.spawn(forwarding_learner, caf::actor{f.self});
  eo.weight_store = store;
  eo.coordinator = f.system.spawn(idle_coordinator);
  eo.log = f.log;
  auto explorer = spawn_explorer(f.system, eo);
  for (int k = 0; k < 2; ++k) {
    Segment seg;
    f.self->receive([&](segment_atom, const WireMsg& m) { seg = *decode<Segment>(m.buf); },
                    caf::after(60s) >> [] { FAIL("no segment within 60 s"); });
    REQUIRE(seg.rewards.size() == 32);
    for (float r : seg.rewards) CHECK(r == 0.0f);
  }
  std::uint64_t errors = 0;
  f.self->request(explorer, 10s, counts_atom::value).receive([&](std::uint64_t n) { errors = n; }, [](caf::error&) {});
  CHECK(errors >= 64);  // every deferred episode counted
  for (caf::actor a : {caf::actor_cast<caf::actor>(explorer), caf::actor_cast<caf::actor>(store),
                       caf::actor_cast<caf::actor>(eo.learner), caf::actor_cast<caf::actor>(eo.coordinator)})
    f.self->send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("deferred rewards reach the learner inside their segments, re-asked past a silent and a dead worker",
          "[actors][reward][failure]") {
  test::ActorFixture f;
  ExternalEnvConfig external;
  const auto factory =
      make_batch_env_factory("exec:python3 " RLX_SOURCE_DIR "/examples/envs/sum_task.py", external, builtin_envs(), f.log);
  const EnvSpec spec = factory(1, 0, 1)->spec();
  REQUIRE(spec.obs_dim == 2);
  REQUIRE(spec.num_actions == 5);
  const PolicyConfig policy;

  auto store = spawn_weight_store(f.system, WeightStoreOptions{4, 64 << 10, f.log});
  WeightSetData w = Trainer(TrainerOptions{LearnerConfig{}, policy, spec.obs_dim, spec.num_actions, 1}).weights();
  f.self->send(store, publish_atom::value, WireMsg{encode(w, "test")});

  auto silent = f.system.spawn(silent_reward);
  auto dead = spawn_reward(f.system, RewardActorOptions{std::make_shared<ArithmeticScorer>(), "reward/1", f.log});
  f.self->send_exit(dead, caf::exit_reason::kill);
  f.self->wait_for(dead);
  auto good = spawn_reward(f.system, RewardActorOptions{std::make_shared<ArithmeticScorer>(), "reward/2", f.log});

  ExplorerActorOptions eo;
  const std::int64_t B = 4, T = 8;
  eo.rollout = RolloutOptions{0, B, spec.obs_dim, spec.num_actions, T, 1, policy};
  eo.local_env = factory;
  eo.learner = f.system.spawn(forwarding_learner, caf::actor{f.self});
  eo.weight_store = store;
  eo.coordinator = f.system.spawn(idle_coordinator);
  eo.rewards = {silent, dead, good};
  eo.reward_timeout = 300ms;
  eo.log = f.log;
  auto explorer = spawn_explorer(f.system, eo);

  std::size_t right = 0, episodes = 0;
  for (int k = 0; k < 3; ++k) {
    Segment seg;
    f.self->receive([&](segment_atom, const WireMsg& m) { seg = *decode<Segment>(m.buf); },
                    caf::after(60s) >> [] { FAIL("no segment within 60 s"); });
    REQUIRE(seg.rewards.size() == static_cast<std::size_t>(T * B));
    float sum = 0;
    for (std::int64_t i = 0; i < T * B; ++i) {
      // Every step ends a one-step episode whose reward the pool scored: 1 when the answer was a + b.
      const float a = seg.observations[i * 2], b = seg.observations[i * 2 + 1];
      const float expected = static_cast<float>(seg.actions[i]) == a + b ? 1.0f : 0.0f;
      CHECK(seg.rewards[i] == expected);
      sum += seg.rewards[i];
      right += expected > 0 ? 1 : 0;
    }
    REQUIRE(seg.episode_returns.size() == static_cast<std::size_t>(T * B));
    float returns = 0;
    for (float r : seg.episode_returns) returns += r;
    CHECK(returns == sum);
    episodes += seg.episode_returns.size();
  }
  INFO(right << " of " << episodes << " answered right");
  CHECK(episodes == 3 * T * B);
  // The explorer counted no reward as given up: every request found the good worker in time.
  std::uint64_t errors = 99;
  f.self->request(explorer, 10s, counts_atom::value).receive([&](std::uint64_t n) { errors = n; }, [](caf::error&) {});
  CHECK(errors == 0);
  for (caf::actor a : {caf::actor_cast<caf::actor>(explorer), caf::actor_cast<caf::actor>(silent),
                       caf::actor_cast<caf::actor>(good), caf::actor_cast<caf::actor>(store),
                       caf::actor_cast<caf::actor>(eo.learner), caf::actor_cast<caf::actor>(eo.coordinator)})
    f.self->send_exit(a, caf::exit_reason::user_shutdown);
}
