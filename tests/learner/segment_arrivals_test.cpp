// The learner's view of each explorer's numbered segments on its own: an
// index skipped is a segment that vanished; an unreadable arrival fills a
// gap; a restarted head and an id used again start their numbers afresh.
#include <catch2/catch.hpp>

#include "learner/segment_arrivals.hpp"

using namespace rlx;

TEST_CASE("an index skipped by an explorer's segments is a vanished segment, named by its indices",
          "[learner][ledger]") {
  SegmentArrivals a;
  CHECK(a.arrived(3, 1, 1).count() == 0);
  CHECK(a.arrived(3, 2, 1).count() == 0);
  const auto g = a.arrived(3, 5, 1);
  CHECK(g.count() == 2);
  CHECK(g.first == 3);
  CHECK(g.last == 4);
  CHECK(a.arrived(4, 1, 1).count() == 0);  // another explorer's numbers are its own
  CHECK(a.vanished() == 2);
  CHECK(a.of(3).vanished == 2);
  CHECK(a.of(3).accounted == 5);
  CHECK(a.of(4).vanished == 0);
  CHECK(a.of(9).accounted == 0);  // never heard of
}

TEST_CASE("an explorer's first segment missing shows when its second arrives", "[learner][ledger]") {
  SegmentArrivals a;
  CHECK(a.arrived(1, 2, 1).count() == 1);
  CHECK(a.vanished() == 1);
}

TEST_CASE("an arrival that did not decode fills the next gap instead of showing as vanished", "[learner][ledger]") {
  SegmentArrivals a;
  a.arrived(1, 1, 1);
  a.unreadable(1);
  CHECK(a.of(1).accounted == 2);  // arrived, though its number is unknown
  CHECK(a.arrived(1, 3, 1).count() == 0);
  a.unreadable(1);
  CHECK(a.arrived(1, 6, 1).count() == 1);  // 4 was the unreadable one; 5 vanished
  CHECK(a.vanished() == 1);
  a.unreadable(2);  // before any numbered one: that life's first
  CHECK(a.arrived(2, 2, 1).count() == 0);
}

TEST_CASE("a restarted head hears an explorer from the base its sending there began at", "[learner][ledger][rebind]") {
  SegmentArrivals a;
  CHECK(a.arrived(1, 8, 8).count() == 0);  // 1..7 went to the dead head
  CHECK(a.arrived(1, 10, 8).count() == 1);
  CHECK(a.arrived(1, 9, 100).count() == 0);  // a base above the index: the index counts
  CHECK(a.vanished() == 1);
}

TEST_CASE("an id used again by a new explorer starts its numbers afresh", "[learner][ledger]") {
  SegmentArrivals a;
  a.arrived(1, 1, 1);
  a.arrived(1, 2, 1);
  a.unreadable(1);  // the old life's, never matched
  CHECK(a.arrived(1, 1, 1).count() == 0);
  CHECK(a.arrived(1, 2, 1).count() == 0);  // the old life's unreadable one is not this life's
  CHECK(a.of(1).accounted == 2);
  CHECK(a.arrived(1, 0, 0).count() == 0);  // an older build's segment: not numbered
  CHECK(a.vanished() == 0);
}

TEST_CASE("a base above its own index is one life, not a new one at every arrival", "[learner][ledger]") {
  // No explorer sends such a base; a corrupt or hostile one must still not
  // hide what vanished between its segments.
  SegmentArrivals a;
  CHECK(a.arrived(2, 3, 10).count() == 0);
  const auto g = a.arrived(2, 5, 10);
  CHECK(g.count() == 1);
  CHECK(g.first == 4);
  CHECK(a.vanished() == 1);
  CHECK(a.arrived(2, 2, 10).count() == 0);  // an index at or below the last begins a new life, as before
}
