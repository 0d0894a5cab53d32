// An explorer whose node lost the head: paused, then rebound to a
// restarted head's learner and coordinator. Nothing made with weights newer
// than the version the restarted learner vouches for reaches it (segments
// held for credit, steps in hand); what the explorer made in its life and
// still holds is reported when it rejoins, for the accounting.
#include <catch2/catch.hpp>

#include "actors/explorer_actor.hpp"
#include "actors/weight_store.hpp"
#include "envs/batch_env.hpp"
#include "learner/trainer.hpp"
#include "messages/codec.hpp"
#include "tests/actors/actor_fixture.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

// Forwards every segment to `sink`, tagged with its name; acks only when `ack`.
learner_actor::behavior_type tagged_learner(learner_actor::pointer self, caf::actor sink, std::string name, bool ack) {
  return {
      [=](segment_atom, const WireMsg& m) {
        if (ack) self->send(caf::actor_cast<explorer_actor>(self->current_sender()), ack_atom::value);
        caf::anon_send(sink, segment_atom::value, m, name);
      },
      [](metrics_atom) { return WireMsg{encode(MetricsData{}, "test")}; },
      [](stop_atom) { return WireMsg{encode(MetricsData{}, "test")}; },
      [](counts_atom) { return std::uint64_t{0}; },
  };
}

struct Seen {
  std::vector<std::pair<std::string, Segment>> segments;  // learner name, segment
  std::vector<JoinData> joins;
  std::uint64_t produced = 0;
};

// Receives what the stubs forward until `done(seen)` holds.
void receive_until(caf::scoped_actor& self, Seen& seen, const std::function<bool(const Seen&)>& done) {
  while (!done(seen))
    self->receive([&](segment_atom, const WireMsg& m, const std::string& name) {
                    auto seg = decode<Segment>(m.buf);
                    REQUIRE(seg.ok());
                    seen.segments.emplace_back(name, std::move(*seg));
                  },
                  [&](join_atom, const WireMsg& m) {
                    auto j = decode<JoinData>(m.buf);
                    REQUIRE(j.ok());
                    seen.joins.push_back(*j);
                  },
                  [&](produced_atom, std::uint32_t, std::uint64_t n) { seen.produced = n; },
                  caf::after(60s) >> [] { FAIL("nothing within 60 s"); });
}

}  // namespace

TEST_CASE("an explorer rebound to a restarted head drops what the dead head's newer weights made and reports what it "
          "made",
          "[actors][failure][resume]") {
  test::ActorFixture f;
  const std::int64_t B = 4, T = 8;
  const auto factory = make_batch_env_factory("cartpole", {}, builtin_envs(), f.log);
  const EnvSpec spec = factory(1, 0, 1)->spec();
  const PolicyConfig policy;
  auto store = spawn_weight_store(f.system, WeightStoreOptions{4, 64 << 10, f.log});
  WeightSetData w = make_trainer(TrainerOptions{LearnerConfig{}, policy, spec.obs_dim, spec.num_actions, 1})->weights();
  w.version = 5;  // the dead head's newest: the restarted one resumes at v2
  f.self->send(store, publish_atom::value, WireMsg{encode(w, "test")});
  std::vector<caf::actor> stubs;
  auto learner = [&](const std::string& name, bool ack) {
    auto l = f.system.spawn(tagged_learner, caf::actor{f.self}, name, ack);
    stubs.push_back(caf::actor_cast<caf::actor>(l));
    return l;
  };
  auto coordinator = f.system.spawn(test::stub_coordinator, caf::actor{f.self});
  stubs.push_back(caf::actor_cast<caf::actor>(coordinator));
  ExplorerActorOptions eo;
  eo.work.rollout = RolloutOptions{3, B, spec.obs_dim, spec.num_actions, T, 1, policy};
  eo.work.first_env_id = 40;
  eo.work.local_env = factory;
  eo.learner = learner("dead", false);  // never acks: 2 credits, then a segment is held
  eo.weight_store = store;
  eo.coordinator = coordinator;
  eo.log = f.log;
  auto explorer = spawn_explorer(f.system, eo);
  Seen seen;

  // The first head: two segments sent (v5), a third made and held for a credit.
  receive_until(f.self, seen, [](const Seen& s) { return s.produced == 3 && s.segments.size() == 2; });
  REQUIRE(seen.joins.size() == 1);
  CHECK_FALSE(seen.joins[0].rejoined);
  CHECK(seen.joins[0].first_env_id == 40);
  CHECK(seen.joins[0].num_envs == 4);
  for (const auto& [name, seg] : seen.segments) CHECK(seg.oldest_version() == 5);

  // The head dies; the node forgets its sets, the restarted head (at v2) is bound, its v2 arrives.
  f.self->send(explorer, pause_atom::value);
  f.self->send(store, forget_atom::value);
  f.self->send(explorer, rebind_atom::value, learner("second", false), caf::actor_cast<caf::actor>(coordinator),
               std::uint64_t{2});
  w.version = 2;
  f.self->send(store, publish_atom::value, WireMsg{encode(w, "test")});
  receive_until(f.self, seen, [](const Seen& s) { return s.joins.size() == 2 && s.segments.size() == 4; });
  const JoinData& again = seen.joins[1];
  CHECK(again.rejoined);
  CHECK(again.member_id == 3);
  CHECK(again.produced == 3);  // the held v5 segment counts as made: the new head counts it lost
  CHECK(again.kept == 0);      // dropped, not sent
  for (std::size_t i = 2; i < 4; ++i) {
    CHECK(seen.segments[i].first == "second");
    // No step of the dead head's v5 (neither the held segment nor steps in hand): all v2.
    CHECK(seen.segments[i].second.oldest_version() == 2);
    CHECK(seen.segments[i].second.newest_version() == 2);
  }

  // The second learner never acks either: a v2 segment is held; a third
  // head resumed at v2 gets it first (it is the same weights' work).
  receive_until(f.self, seen, [](const Seen& s) { return s.produced == 6; });
  f.self->send(explorer, pause_atom::value);
  f.self->send(explorer, rebind_atom::value, learner("third", true), caf::actor_cast<caf::actor>(coordinator),
               std::uint64_t{2});
  receive_until(f.self, seen, [](const Seen& s) { return s.joins.size() == 3 && s.segments.size() >= 6; });
  CHECK(seen.joins[2].produced == 6);
  CHECK(seen.joins[2].kept == 1);
  CHECK(seen.segments[4].first == "third");
  CHECK(seen.segments[4].second.sequence == seen.segments[3].second.sequence + 1);  // the held one, first

  f.self->send_exit(explorer, caf::exit_reason::user_shutdown);
  f.self->send_exit(store, caf::exit_reason::user_shutdown);
  for (auto& s : stubs) f.self->send_exit(s, caf::exit_reason::user_shutdown);
}
