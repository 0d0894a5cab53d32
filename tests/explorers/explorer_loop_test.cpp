// The explorer's decisions on their own (explorers/explorer_loop.hpp), the
// way a rate limiter is tested: credits, staleness pacing, sync mode,
// segments held for rewards, drain, the restarted-head rebind, weight
// fetches and reward retries, each against a fake engine.
#include <catch2/catch.hpp>

#include "explorers/explorer_loop.hpp"

using namespace rlx;

namespace {

// A SegmentSource whose segment in hand and weights the test sets.
struct FakeEngine : SegmentSource {
  std::uint64_t v = 0, steps = 0, newest = 0, next_sequence = 0;
  bool refuse = false;
  int loads = 0;
  Result<void> load_weights(const WeightSetData& w) override {
    if (refuse) return make_error(Errc::invalid_field, "another shape");
    v = w.version;
    ++loads;
    return {};
  }
  std::uint64_t version() const override { return v; }
  std::uint64_t steps_in_segment() const override { return steps; }
  std::uint64_t newest_in_hand() const override { return newest; }
  std::uint64_t drop_segment() override {
    steps = newest = 0;
    return next_sequence++;
  }
};

WeightSetData weights(std::uint64_t version) {
  WeightSetData w;
  w.version = version;
  return w;
}

Segment loop_segment(std::uint64_t sequence, std::uint64_t version) {
  Segment s;
  s.sequence = sequence;
  s.num_steps = 2;
  s.num_envs = 1;
  s.policy_versions = {version, version};
  s.rewards = {0, 0};
  s.episode_returns = {0};
  return s;
}

// A loop that has its environments and weights of `version`, ready to step.
struct Ready {
  explicit Ready(ExplorerLoopOptions o = {}, std::uint64_t version = 1) : loop(o, engine) {
    loop.started();
    auto f = loop.announced(version);
    REQUIRE(f);
    const auto w = weights(version);
    REQUIRE(loop.fetched(*f, &w).loaded);
  }
  FakeEngine engine;
  ExplorerLoop loop;
};

// A worker's answer to `ask`: a score, or a failure of the machinery.
ExplorerLoop::RewardNext answer(ExplorerLoop& loop, const RewardAsk& ask, float score,
                                InfraFailure failure = InfraFailure::none, std::uint64_t id = 0) {
  RewardResultData r;
  r.request_id = id ? id : ask.id;
  r.score = score;
  r.ok = failure == InfraFailure::none;
  r.failure = failure;
  return loop.answered(ask, &r);
}

// Options of an explorer whose node runs `workers` reward workers.
ExplorerLoopOptions with_pool(std::size_t workers, int retries = 2) {
  ExplorerLoopOptions o;
  o.reward_workers = workers;
  o.reward_retries = retries;
  return o;
}

// The one segment the loop released.
Segment released(ExplorerLoop& loop) {
  auto out = loop.take_outbox();
  std::vector<Segment> segments;
  for (auto& o : out)
    if (o.kind == Outgoing::Kind::segment) segments.push_back(std::move(o.segment));
  REQUIRE(segments.size() == 1);
  return segments.front();
}

std::size_t segments_in(const std::vector<Outgoing>& out) {
  std::size_t n = 0;
  for (const auto& o : out) n += o.kind == Outgoing::Kind::segment;
  return n;
}

}  // namespace

TEST_CASE("an explorer takes no step before its environments and the learner's weights are there",
          "[explorers][loop]") {
  FakeEngine engine;
  ExplorerLoop loop({}, engine);
  CHECK(loop.next() == ExplorerLoop::Next::wait);
  loop.started();
  CHECK(loop.next() == ExplorerLoop::Next::wait);  // no weights yet
  auto f = loop.announced(3);
  REQUIRE(f);
  CHECK(f->version == 3);
  CHECK_FALSE(f->latest);
  CHECK_FALSE(loop.announced(4));  // one fetch at a time
  const auto w = weights(3);
  auto got = loop.fetched(*f, &w);
  CHECK(got.loaded);
  REQUIRE(got.next);  // v4 was announced meanwhile
  CHECK(got.next->version == 4);
  CHECK(loop.next() == ExplorerLoop::Next::step);
  CHECK(loop.next() == ExplorerLoop::Next::wait);  // the step is in flight
  loop.step_done();
  CHECK(loop.next() == ExplorerLoop::Next::step);
}

TEST_CASE("an explorer sends at most `credits` segments before the learner acknowledges one", "[explorers][loop]") {
  ExplorerLoopOptions o;
  o.credits = 2;
  Ready r(o);
  for (std::uint64_t i = 0; i < 3; ++i) REQUIRE(r.loop.segment_done(loop_segment(i, 1)));
  auto out = r.loop.take_outbox();
  CHECK(segments_in(out) == 2);
  CHECK(out.size() == 5);  // each made segment counted before it leaves: 3 counts, 2 segments
  CHECK(out[0].kind == Outgoing::Kind::produced);
  CHECK(out[0].produced == 1);
  CHECK(r.loop.has_pending());
  CHECK(r.loop.credits() == 0);
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);  // the third waits for a credit
  r.loop.ack();
  out = r.loop.take_outbox();
  REQUIRE(out.size() == 1);
  CHECK(out[0].segment.sequence == 2);
  CHECK_FALSE(r.loop.has_pending());
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
}

TEST_CASE("each segment leaves numbered by the explorer's count of segments sent, from where its sending to this "
          "learner began",
          "[explorers][loop][ledger]") {
  Ready r;
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  REQUIRE(r.loop.segment_done(loop_segment(1, 1)));
  auto out = r.loop.take_outbox();
  std::vector<std::uint64_t> numbers;
  for (const auto& o : out) {
    if (o.kind != Outgoing::Kind::segment) continue;
    numbers.push_back(o.segment.sent_index);
    CHECK(o.segment.sent_base == 1);
  }
  CHECK(numbers == std::vector<std::uint64_t>{1, 2});
  r.loop.ack();
  r.loop.ack();
  REQUIRE(r.loop.segment_done(loop_segment(2, 1)));
  CHECK(segments_in(r.loop.take_outbox()) == 1);
  CHECK(r.loop.sent() == 3);
  r.loop.pause();  // the head died
  REQUIRE(r.loop.segment_done(loop_segment(3, 1)));
  CHECK(segments_in(r.loop.take_outbox()) == 0);  // made, not sent: waits for the new head
  r.loop.rebind(1);
  const Segment first_there = released(r.loop);
  CHECK(first_there.sent_index == 4);
  CHECK(first_there.sent_base == 4);  // the restarted head hears this explorer from 4 on
  CHECK(r.loop.sent() == 4);
}

TEST_CASE("an explorer starts no segment while the newest version is more than max_staleness ahead of its own",
          "[explorers][loop][staleness]") {
  ExplorerLoopOptions o;
  o.max_staleness = 2;
  Ready r(o, 1);
  auto f = r.loop.announced(3);  // 2 ahead: still within the bound
  REQUIRE(f);
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
  r.loop.step_done();
  r.engine.steps = 1;  // a segment in hand is finished whatever the lag
  CHECK_FALSE(r.loop.announced(4));  // the fetch of v3 is still out
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
  r.loop.step_done();
  r.engine.steps = 0;
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);  // v4 is 3 ahead of v1: fetch first
  const auto w = weights(3);
  auto got = r.loop.fetched(*f, &w);
  REQUIRE(got.next);
  CHECK(got.next->version == 4);
  CHECK(r.loop.next() == ExplorerLoop::Next::step);  // v3 vs v4
}

TEST_CASE("in sync mode an explorer waits for a newer version after each segment", "[explorers][loop][sync]") {
  ExplorerLoopOptions o;
  o.sync = true;
  Ready r(o, 5);
  REQUIRE(r.loop.segment_done(loop_segment(0, 5)));
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);
  auto f = r.loop.announced(6);
  REQUIRE(f);
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);  // announced, not yet loaded
  const auto w = weights(6);
  REQUIRE(r.loop.fetched(*f, &w).loaded);
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
}

TEST_CASE("an explorer pauses at max_held segments waiting for rewards and releases them in order once scored",
          "[explorers][loop][reward]") {
  ExplorerLoopOptions o;
  o.max_held = 1;
  o.reward_workers = 2;
  Ready r(o);
  auto ask = r.loop.deferred(0, 1, 0, 0);
  REQUIRE(ask);
  CHECK(ask->worker == 0);
  CHECK(ask->attempt == 0);
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  CHECK(r.loop.take_outbox().empty());
  CHECK(r.loop.held() == 1);
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);
  answer(r.loop, *ask, 1.0f);
  auto out = r.loop.take_outbox();
  REQUIRE(segments_in(out) == 1);
  CHECK(out.back().segment.rewards[1] == 1.0f);
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
}

TEST_CASE("a reward the machinery failed to give is asked of the next worker `retries` more times, then its episode is "
          "masked, never scored 0",
          "[explorers][loop][reward][infra]") {
  Ready r(with_pool(3));
  auto first = r.loop.deferred(0, 1, 0, 0);
  auto second = r.loop.deferred(0, 1, 0, 0);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(second->worker == 1);  // new requests go round the pool
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  CHECK(answer(r.loop, *second, 0.5f).failure == InfraFailure::none);
  auto a1 = r.loop.reward_failed(*first);  // a timeout, a dead worker
  CHECK(a1.failure == InfraFailure::reward_timeout);
  REQUIRE(a1.again);
  CHECK(a1.again->worker == 1);
  CHECK(a1.again->attempt == 1);
  auto a2 = answer(r.loop, *a1.again, 0.0f, InfraFailure::overloaded);  // the worker's sandbox was starved
  REQUIRE(a2.again);
  CHECK(a2.again->worker == 2);
  CHECK(r.loop.take_outbox().empty());  // still held
  auto a3 = answer(r.loop, *a2.again, 0.0f, InfraFailure::sandbox_setup);
  CHECK_FALSE(a3.again);  // given up: masked, released
  // Three failures within a second: one line, the next says how many were held back.
  auto notes = r.loop.take_notes();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].text.find("failed (reward_timeout") != std::string::npos);
  CHECK(notes[0].text.find("asking another worker") != std::string::npos);
  const Segment s = released(r.loop);
  REQUIRE(s.masked_rows.size() == 1);
  CHECK(s.masked_rows[0] == static_cast<std::uint8_t>(InfraFailure::sandbox_setup));
  CHECK(s.step_masked(0, 0));
  CHECK(s.step_masked(1, 0));
  CHECK(s.rewards[1] == 0.5f);  // the scored episode's reward; the masked one adds nothing
  CHECK(s.reward_retries == 2);
  REQUIRE(s.infra_failures.size() == kInfraFailureCodes);
  CHECK(s.infra_failures[static_cast<std::size_t>(InfraFailure::reward_timeout)] == 1);
  CHECK(s.infra_failures[static_cast<std::size_t>(InfraFailure::overloaded)] == 1);
  CHECK(s.infra_failures[static_cast<std::size_t>(InfraFailure::sandbox_setup)] == 1);
}

TEST_CASE("a program's own failure is a score, never retried, and a request the scorer cannot read is masked at once",
          "[explorers][loop][reward][infra]") {
  Ready r(with_pool(2));
  auto wrong = r.loop.deferred(0, 1, 0, 0);
  auto unreadable = r.loop.deferred(0, 1, 0, 0);
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  auto n = answer(r.loop, *wrong, 0.0f);  // a wrong program: a real 0
  CHECK(n.failure == InfraFailure::none);
  CHECK_FALSE(n.again);
  auto u = answer(r.loop, *unreadable, 0.0f, InfraFailure::bad_request);
  CHECK(u.failure == InfraFailure::bad_request);
  CHECK_FALSE(u.again);  // asking another worker cannot help
  const Segment s = released(r.loop);
  CHECK(s.masked_rows.size() == 1);
  CHECK(s.reward_retries == 0);
}

TEST_CASE("a reply to another request, or one that does not decode, is a malformed reply, asked again",
          "[explorers][loop][reward][infra]") {
  Ready r(with_pool(2, 1));
  auto ask = r.loop.deferred(0, 1, 0, 0);
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  auto other = answer(r.loop, *ask, 1.0f, InfraFailure::none, ask->id + 7);
  CHECK(other.failure == InfraFailure::malformed_reply);
  REQUIRE(other.again);
  auto garbage = r.loop.answered(*other.again, nullptr);
  CHECK(garbage.failure == InfraFailure::malformed_reply);
  CHECK_FALSE(garbage.again);  // one retry only
  CHECK(released(r.loop).infra_failures[static_cast<std::size_t>(InfraFailure::malformed_reply)] == 2);
}

TEST_CASE("an explorer on a node without reward workers masks deferred episodes and warns once",
          "[explorers][loop][reward][infra]") {
  Ready r;
  r.loop.take_notes();
  CHECK_FALSE(r.loop.deferred(0, 1, 0, 0));
  auto notes = r.loop.take_notes();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].level == spdlog::level::warn);
  CHECK(notes[0].text.find("no reward worker") != std::string::npos);
  CHECK_FALSE(r.loop.deferred(0, 0, 0, 0));
  CHECK(r.loop.take_notes().empty());  // once
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  CHECK(released(r.loop).masked_rows ==
        std::vector<std::uint8_t>(2, static_cast<std::uint8_t>(InfraFailure::no_reward_pool)));
}

TEST_CASE("a draining explorer finishes the segment in hand, waits for credits and rewards, then leaves",
          "[explorers][loop][drain]") {
  ExplorerLoopOptions o;
  o.credits = 0;
  o.reward_workers = 1;
  Ready r(o);
  r.engine.steps = 1;
  r.loop.drain();
  CHECK(r.loop.next() == ExplorerLoop::Next::step);  // the segment in hand is finished
  r.loop.step_done();
  r.engine.steps = 0;
  auto ask = r.loop.deferred(0, 1, 0, 0);
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);  // held for its reward
  answer(r.loop, *ask, 1.0f);
  CHECK(r.loop.has_pending());                       // no credit
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);
  r.loop.ack();
  CHECK(segments_in(r.loop.take_outbox()) == 1);
  CHECK(r.loop.next() == ExplorerLoop::Next::leave);
}

TEST_CASE("a paused explorer neither steps nor sends until it is rebound", "[explorers][loop][rebind]") {
  Ready r;
  r.loop.pause();
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);
  REQUIRE(r.loop.segment_done(loop_segment(0, 1)));
  CHECK(segments_in(r.loop.take_outbox()) == 0);
  CHECK(r.loop.has_pending());
  auto b = r.loop.rebind(1);
  CHECK_FALSE(b.pending_dropped);
  CHECK(b.kept == 1);
  CHECK(b.produced == 1);
  CHECK(segments_in(r.loop.take_outbox()) == 1);  // sent to the new learner
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
}

TEST_CASE("a rebind drops what was made with the dead head's newer weights and fetches the new head's",
          "[explorers][loop][rebind]") {
  ExplorerLoopOptions o;
  o.credits = 0;
  o.reward_workers = 1;
  Ready r(o, 5);
  r.loop.pause();
  REQUIRE(r.loop.segment_done(loop_segment(0, 5)));  // pending (no credit), made with v5
  auto ask = r.loop.deferred(1, 0, 0, 0);
  REQUIRE(r.loop.segment_done(loop_segment(1, 5)));  // held for its reward
  CHECK(segments_in(r.loop.take_outbox()) == 0);
  r.engine.steps = 3;
  r.engine.newest = 5;  // and steps in hand
  auto b = r.loop.rebind(3);  // the new head knows versions up to v3
  CHECK(b.pending_dropped);
  CHECK(b.held_dropped == 1);
  CHECK(b.dropped_in_hand);
  CHECK(b.dropped_steps == 3);
  CHECK(r.engine.steps == 0);
  CHECK(b.kept == 0);
  REQUIRE(b.fetch);
  CHECK(b.fetch->latest);
  CHECK_FALSE(r.loop.has_weights());
  CHECK(r.loop.next() == ExplorerLoop::Next::wait);  // the new head's weights first
  answer(r.loop, *ask, 1.0f);  // a score of a dropped segment changes nothing
  CHECK(r.loop.take_outbox().empty());
  const auto w = weights(3);
  REQUIRE(r.loop.fetched(*b.fetch, &w).loaded);
  CHECK(r.loop.credits() == 0);  // reset to the configured credits
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
}

TEST_CASE("a fetch answered from before a rebind is not trusted and is asked again", "[explorers][loop][rebind]") {
  Ready r({}, 2);
  auto f = r.loop.announced(4);
  REQUIRE(f);
  auto b = r.loop.rebind(2);  // v2 held is still good: no fetch of its own
  CHECK_FALSE(b.fetch);
  const auto w = weights(4);  // the dead head's v4
  auto got = r.loop.fetched(*f, &w);
  CHECK_FALSE(got.loaded);
  CHECK(r.engine.version() == 2);
  CHECK_FALSE(got.next);  // nothing newer than v2 is known since
  auto f2 = r.loop.announced(3);
  REQUIRE(f2);
  CHECK(r.loop.fetch_failed(*f2, Errc::not_found).why == ExplorerLoop::FetchFailure::evicted);
}

TEST_CASE("a segment completed by the step in flight at a rebind is dropped when it holds newer versions",
          "[explorers][loop][rebind]") {
  Ready r({}, 5);
  CHECK(r.loop.next() == ExplorerLoop::Next::step);
  r.engine.steps = 1;
  r.engine.newest = 5;
  auto b = r.loop.rebind(4);
  CHECK_FALSE(b.dropped_in_hand);  // a step is in flight: checked after it
  r.loop.step_done();
  CHECK_FALSE(r.loop.segment_done(loop_segment(0, 5)));
  CHECK(r.loop.take_outbox().empty());
  // Agent episodes outlive the segment: the step left tokens of v5 in hand
  // though it took the segment (no steps counted), and they go too.
  r.engine.steps = 0;
  r.engine.newest = 5;
  const auto dropped = r.loop.check_segment();
  REQUIRE(dropped);
  CHECK(*dropped == 0);
  CHECK(r.engine.newest == 0);
  CHECK(r.engine.next_sequence == 1);
}

TEST_CASE("a rebind drops what is in hand with the dead head's weights even when no step of a segment is counted",
          "[explorers][loop][rebind]") {
  Ready r({}, 5);
  r.engine.steps = 0;   // a segment was just taken...
  r.engine.newest = 5;  // ...and episodes under way hold tokens of v5
  auto b = r.loop.rebind(4);
  CHECK(b.dropped_in_hand);
  CHECK(b.dropped_steps == 0);
  CHECK(r.engine.newest == 0);
  // Nothing newer than the new head's versions: nothing is dropped.
  Ready kept({}, 3);
  kept.engine.newest = 3;
  CHECK_FALSE(kept.loop.rebind(4).dropped_in_hand);
  CHECK(kept.engine.newest == 3);
}

TEST_CASE("weights that do not fit the engine are reported and leave the explorer waiting", "[explorers][loop]") {
  FakeEngine engine;
  engine.refuse = true;
  ExplorerLoop loop({}, engine);
  loop.started();
  auto f = loop.announced(1);
  const auto w = weights(1);
  auto got = loop.fetched(*f, &w);
  CHECK_FALSE(got.loaded);
  REQUIRE(got.rejected);
  CHECK(got.rejected->code == Errc::invalid_field);
  CHECK_FALSE(got.next);  // not the same version again (a newer announcement fetches)
  CHECK(loop.announced(2));
  CHECK(loop.next() == ExplorerLoop::Next::wait);
}

TEST_CASE("a failed fetch of an evicted version asks for the newest, and a failed newest waits for the next announcement",
          "[explorers][loop]") {
  Ready r({}, 1);
  auto f = r.loop.announced(9);
  auto failed = r.loop.fetch_failed(*f, Errc::not_found);  // the store's code, as it sent it
  CHECK(failed.why == ExplorerLoop::FetchFailure::evicted);
  REQUIRE(failed.next);
  CHECK(failed.next->latest);
  auto again = r.loop.fetch_failed(*failed.next, Errc::timeout);
  CHECK(again.why == ExplorerLoop::FetchFailure::newest_failed);
  CHECK_FALSE(again.next);
  auto f2 = r.loop.announced(10);  // the next announcement retries
  REQUIRE(f2);
  auto timed_out = r.loop.fetch_failed(*f2, Errc::timeout);  // not evicted, and still the newest is asked for
  CHECK(timed_out.why == ExplorerLoop::FetchFailure::exact_failed);
  REQUIRE(timed_out.next);
  CHECK(timed_out.next->latest);
}
