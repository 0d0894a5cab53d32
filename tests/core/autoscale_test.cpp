// The autoscaling policy on hand-made signals: a starved learner gets one
// explorer more, stale drops take one away, never outside [min, max],
// staleness wins over idleness, an empty interval changes nothing.
#include <catch2/catch.hpp>

#include "core/autoscale.hpp"

using namespace rlx;

namespace {

AutoscaleConfig bounds(std::int64_t lo, std::int64_t hi) {
  AutoscaleConfig c;
  c.enabled = true;
  c.min_explorers = lo;
  c.max_explorers = hi;
  c.idle_above = 0.5;
  c.stale_above = 0.1;
  return c;
}

// Over 10 s: the learner busy `busy` s, `stale` of 100 segments dropped stale.
AutoscaleSignals interval(double busy, std::uint64_t stale, std::uint32_t explorers) {
  return AutoscaleSignals{10.0, busy, 100, stale, explorers};
}

}  // namespace

TEST_CASE("a learner idle for most of the interval gets one explorer more, up to max_explorers", "[core][autoscale]") {
  const auto c = bounds(1, 4);
  auto d = autoscale_decision(c, interval(2.0, 0, 2));  // idle 80%
  CHECK(d.explorers == 3);
  CHECK(d.why.find("learner idle 80%") != std::string::npos);
  CHECK(autoscale_decision(c, interval(2.0, 0, 4)).explorers == 4);  // at max already
  CHECK(autoscale_decision(c, interval(6.0, 0, 2)).explorers == 2);  // idle 40%: busy enough
}

TEST_CASE("segments dropped stale take one explorer away, down to min_explorers", "[core][autoscale]") {
  const auto c = bounds(2, 8);
  auto d = autoscale_decision(c, interval(9.9, 30, 5));
  CHECK(d.explorers == 4);
  CHECK(d.why.find("30% of segments dropped stale") != std::string::npos);
  CHECK(autoscale_decision(c, interval(9.9, 30, 2)).explorers == 2);  // at min already
  CHECK(autoscale_decision(c, interval(9.9, 10, 5)).explorers == 5);  // 10%: not above the threshold
}

TEST_CASE("staleness wins over an idle learner: more explorers cannot cure it", "[core][autoscale]") {
  CHECK(autoscale_decision(bounds(1, 8), interval(1.0, 50, 3)).explorers == 2);
}

TEST_CASE("a count outside [min, max] is brought back at once, and an empty interval changes nothing",
          "[core][autoscale]") {
  const auto c = bounds(2, 4);
  CHECK(autoscale_decision(c, interval(9.0, 0, 1)).explorers == 2);
  CHECK(autoscale_decision(c, interval(9.0, 0, 7)).explorers == 4);
  CHECK(autoscale_decision(c, AutoscaleSignals{0.0, 0.0, 0, 0, 3}).explorers == 3);
  // No segment at all and a learner doing nothing: starved, one more.
  CHECK(autoscale_decision(c, AutoscaleSignals{10.0, 0.0, 0, 0, 3}).explorers == 4);
}
