// The explorer's hold on segments awaiting deferred rewards: scores land
// on the right step and episode, segments leave in order and only whole.
#include <catch2/catch.hpp>

#include "explorers/deferred_rewards.hpp"

using namespace rlx;

namespace {

Segment deferred_segment(std::uint64_t sequence, std::uint32_t T, std::uint32_t B, std::size_t episodes) {
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
  d.finished(deferred_segment(0, 4, 3, 2));
  CHECK(d.held() == 1);
  CHECK_FALSE(d.ready());
  d.spent(b, 0.5);
  d.scored(b, 1.0f);
  CHECK_FALSE(d.ready());  // a is still out
  d.spent(a, 0.25);  // a failed attempt's time...
  d.spent(a, 1.0);   // ...and the answer's both count
  d.scored(a, 0.25f);
  auto s = d.ready();
  REQUIRE(s);
  CHECK(s->work.score_s == 1.75);
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
  d.finished(deferred_segment(0, 2, 1, 1));
  const auto second = d.note(1, 0, 0, 0);
  d.scored(second, 1.0f);       // segment 1 is not even finished
  d.finished(deferred_segment(1, 2, 1, 1));
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
  d.finished(deferred_segment(2, 2, 1, 0));
  CHECK(d.ready());
}

TEST_CASE("held segments newer than a restarted head's version are dropped with their episodes, older ones kept",
          "[explorers][reward][resume]") {
  DeferredRewards d;
  const auto a = d.note(0, 0, 0, 0);
  const auto b = d.note(1, 0, 0, 0);
  const auto c = d.note(2, 1, 1, 0);  // the segment in hand
  auto s0 = deferred_segment(0, 2, 2, 1), s1 = deferred_segment(1, 2, 2, 1);
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

TEST_CASE("an episode the machinery failed to score is masked back to its start, its return left out, its failures counted",
          "[explorers][reward][infra]") {
  DeferredRewards d;
  // Env 1 ends an episode at step 1 and another at step 3; env 0 one at step 3.
  const auto early = d.note(0, 1, 1, 0);
  const auto late = d.note(0, 3, 1, 1);
  const auto other = d.note(0, 3, 0, 2);
  Segment s = deferred_segment(0, 4, 2, 3);
  s.terminated.assign(8, 0);
  s.truncated.assign(8, 0);
  s.terminated[1 * 2 + 1] = 1;
  s.terminated[3 * 2 + 1] = 1;
  s.terminated[3 * 2 + 0] = 1;
  s.episode_returns = {1.0f, 2.0f, 3.0f};
  s.episode_lengths = {2, 2, 4};
  d.finished(std::move(s));
  d.scored(early, 1.0f);
  d.retried(late, InfraFailure::reward_timeout);
  d.failed(late, InfraFailure::overloaded);
  d.scored(other, 0.0f);
  auto out = d.ready();
  REQUIRE(out);
  // The late episode of env 1: steps 2 and 3 (after the early one ended).
  CHECK_FALSE(out->step_masked(1, 1));
  CHECK(out->step_masked(2, 1));
  CHECK(out->step_masked(3, 1));
  CHECK_FALSE(out->step_masked(3, 0));
  CHECK(out->rewards[3 * 2 + 1] == 0.5f);  // nothing added
  CHECK(out->episode_returns == std::vector<float>{2.0f, 3.0f});
  CHECK(out->episode_lengths == std::vector<std::uint32_t>{2, 4});
  CHECK(out->masked_rows == std::vector<std::uint8_t>{static_cast<std::uint8_t>(InfraFailure::overloaded)});
  CHECK(out->reward_retries == 1);
  CHECK(out->infra_failures[static_cast<std::size_t>(InfraFailure::reward_timeout)] == 1);
  CHECK(out->infra_failures[static_cast<std::size_t>(InfraFailure::overloaded)] == 1);
}

TEST_CASE("a token row the machinery failed to score is masked whole and keeps its place", "[explorers][reward][infra]") {
  DeferredRewards d;
  const auto a = d.note(0, 3, 0, 0);
  const auto b = d.note(0, 2, 1, 1);
  Segment s = deferred_segment(0, 4, 2, 2);
  s.tokens = TokenRows{};
  s.tokens->prompt_width = 1;
  d.finished(std::move(s));
  d.failed(a, InfraFailure::sandbox_start);
  d.scored(b, 1.0f, "hint\n");
  auto out = d.ready();
  REQUIRE(out);
  for (std::size_t t = 0; t < 4; ++t) {
    CHECK(out->step_masked(t, 0));
    CHECK_FALSE(out->step_masked(t, 1));
  }
  CHECK(out->episode_returns.size() == 2);  // one per row
  CHECK(out->tokens->hints[1] == "hint\n");
  CHECK(out->tokens->hints[0].empty());
}
