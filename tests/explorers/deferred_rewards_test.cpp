// The explorer's hold on segments awaiting deferred rewards: scores land
// on the right step and episode, segments leave in order and only whole.
#include <catch2/catch.hpp>

#include "explorers/deferred_rewards.hpp"

using namespace rlx;

namespace {

Segment segment(std::uint64_t sequence, std::uint32_t T, std::uint32_t B, std::size_t episodes) {
  Segment s;
  s.sequence = sequence;
  s.num_steps = T;
  s.num_envs = B;
  s.rewards.assign(T * B, 0.5f);
  s.episode_returns.assign(episodes, 10.0f);
  return s;
}

}  // namespace

TEST_CASE("a held segment leaves once its deferred rewards are in, with each score on its step and episode",
          "[explorers][reward]") {
  DeferredRewards d;
  const auto a = d.note(0, 1, 2, 0);  // segment 0, step 1, env 2, its first episode
  const auto b = d.note(0, 3, 0, 1);
  d.finished(segment(0, 4, 3, 2));
  CHECK(d.held() == 1);
  CHECK_FALSE(d.ready());
  d.scored(b, 1.0f);
  CHECK_FALSE(d.ready());  // a is still out
  d.scored(a, 0.25f);
  auto s = d.ready();
  REQUIRE(s);
  CHECK(s->rewards[1 * 3 + 2] == 0.75f);
  CHECK(s->rewards[3 * 3 + 0] == 1.5f);
  CHECK(s->rewards[0] == 0.5f);
  CHECK(s->episode_returns[0] == 10.25f);
  CHECK(s->episode_returns[1] == 11.0f);
  CHECK(d.held() == 0);
  CHECK(d.unscored() == 0);
}

TEST_CASE("segments leave in order, a score may come before its segment ends, and unknown ids change nothing",
          "[explorers][reward]") {
  DeferredRewards d;
  const auto first = d.note(0, 0, 0, 0);
  d.finished(segment(0, 2, 1, 1));
  const auto second = d.note(1, 0, 0, 0);
  d.scored(second, 1.0f);       // segment 1 is not even finished
  d.finished(segment(1, 2, 1, 1));
  CHECK_FALSE(d.ready());        // segment 0 first
  d.scored(999, 5.0f);           // nobody's
  d.scored(first, 0.0f);
  auto s0 = d.ready();
  REQUIRE(s0);
  CHECK(s0->sequence == 0);
  auto s1 = d.ready();
  REQUIRE(s1);
  CHECK(s1->sequence == 1);
  CHECK(s1->rewards[0] == 1.5f);
  // A segment with no deferred episode leaves at once.
  d.finished(segment(2, 2, 1, 0));
  CHECK(d.ready());
}

TEST_CASE("held segments newer than a restarted head's version are dropped with their episodes, older ones kept",
          "[explorers][reward][resume]") {
  DeferredRewards d;
  const auto a = d.note(0, 0, 0, 0);
  const auto b = d.note(1, 0, 0, 0);
  const auto c = d.note(2, 1, 1, 0);  // the segment in hand
  auto s0 = segment(0, 2, 2, 1), s1 = segment(1, 2, 2, 1);
  s0.policy_versions = {3, 4};
  s1.policy_versions = {4, 6};
  d.finished(s0);
  d.finished(s1);
  CHECK(d.drop_newer_than(4) == 1);  // segment 1 had a step of v6
  CHECK(d.held() == 1);
  CHECK(d.unscored() == 2);          // a, and c of the segment in hand
  d.forget(2);                       // the segment in hand is dropped too
  CHECK(d.unscored() == 1);
  d.scored(b, 1.0f);                 // a late score of a dropped segment changes nothing
  d.scored(c, 1.0f);
  CHECK_FALSE(d.ready());
  d.scored(a, 1.0f);
  auto out = d.ready();
  REQUIRE(out);
  CHECK(out->sequence == 0);
  CHECK(out->newest_version() == 4);
  CHECK(d.unscored() == 0);
}
