// The coordinator's segment ledger on its own: every segment made is
// received, lost or in flight, across dead explorers, resumed runs and
// explorers that outlived a dead head.
#include <catch2/catch.hpp>

#include "control/segment_ledger.hpp"

using namespace rlx;

TEST_CASE("segments made and not yet received are in flight while their explorer lives, lost once it is dead",
          "[actors][ledger]") {
  SegmentLedger l;
  l.produced(1, 5);
  l.produced(1, 3);  // a late report: the count only grows
  l.produced(2, 4);
  auto t = l.account({{1, 4}, {2, 1}});
  CHECK(t.produced == 9);
  CHECK(t.in_flight == 4);
  CHECK(t.lost == 0);
  l.dead(2);
  t = l.account({{1, 4}, {2, 1}});
  CHECK(t.lost == 3);
  CHECK(t.in_flight == 1);
  CHECK(t.produced == 9);
}

TEST_CASE("a resumed run counts what its log says each explorer delivered before as made",
          "[actors][ledger][resume]") {
  SegmentLedger l;
  l.resume({{1, 10}});
  l.produced(1, 2);  // this head's run: 2 more
  l.produced(3, 1);  // a new explorer
  const auto t = l.account({{1, 12}, {3, 0}});
  CHECK(t.produced == 13);
  CHECK(t.in_flight == 1);
  CHECK(t.lost == 0);
}

TEST_CASE("an explorer that outlived its head is counted by its life: what neither the log nor it holds is lost with the head",
          "[actors][ledger][rebind]") {
  SegmentLedger l;
  l.resume({{1, 10}});  // the log holds 10 of its segments
  // It made 14 in its life and still holds 1: 3 died with the old head.
  const auto lost = l.rejoined(1, 14, 1);
  REQUIRE(lost);
  CHECK(*lost == 3);
  CHECK_FALSE(l.rejoined(1, 15, 0));  // taken once
  CHECK(l.rejoined_count() == 1);
  auto t = l.account({{1, 10}});
  CHECK(t.produced == 14);  // its life's count, not 10 + 14
  CHECK(t.lost == 3);
  CHECK(t.in_flight == 1);  // the one it holds
  l.produced(1, 16);
  t = l.account({{1, 13}});
  CHECK(t.produced == 16);
  CHECK(t.lost == 3);
  CHECK(t.in_flight == 0);
  CHECK(t.produced == 13 + t.lost + t.in_flight);
}
