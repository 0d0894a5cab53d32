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

TEST_CASE("a segment the learner's numbers show skipped is vanished, not in flight, while its explorer lives",
          "[actors][ledger]") {
  SegmentLedger l;
  l.produced(1, 10);
  auto t = l.account({{1, 7}}, {{1, {9, 1}}});  // index 9 arrived, one before it never did
  CHECK(t.vanished == 1);
  CHECK(t.in_flight == 2);
  CHECK(t.produced == 7 + t.lost + t.vanished + t.in_flight);
}

TEST_CASE("at the end, what an explorer that left says it sent beyond the learner's last index vanished",
          "[actors][ledger]") {
  SegmentLedger l;
  l.produced(1, 10);
  l.produced(2, 5);
  l.left(1, 10);
  l.left(2, 5);
  const SegmentLedger::ArrivalCounts seen{{1, {8, 0}}, {2, {5, 0}}};
  auto during = l.account({{1, 8}, {2, 5}}, seen);  // the learner's counts may predate the goodbyes
  CHECK(during.vanished == 0);
  CHECK(during.in_flight == 2);
  auto end = l.account({{1, 8}, {2, 5}}, seen, true);
  CHECK(end.vanished == 2);  // explorer 1's last two were sent and never arrived
  CHECK(end.in_flight == 0);
  // An explorer the learner never heard from at all: everything it sent vanished.
  l.produced(3, 2);
  l.left(3, 2);
  CHECK(l.account({{1, 8}, {2, 5}}, seen, true).vanished == 4);
}

TEST_CASE("what an explorer declared dead at the drain deadline sent last is lost with it, not vanished",
          "[actors][ledger]") {
  SegmentLedger l;
  l.produced(1, 10);
  l.left(1, 10);  // it said it sent 10; the learner stopped after 9
  l.dead(1);      // it did not drain in time
  const SegmentLedger::ArrivalCounts seen{{1, {9, 0}}};
  const auto end = l.account({{1, 9}}, seen, true);
  CHECK(end.vanished == 0);
  CHECK(end.lost == 1);
  CHECK(end.produced == 10);
  // A gap the learner itself saw stays vanished, dead or not.
  const SegmentLedger::ArrivalCounts gap{{1, {9, 1}}};
  const auto with_gap = l.account({{1, 8}}, gap, true);
  CHECK(with_gap.vanished == 1);
  CHECK(with_gap.lost == 1);
}

TEST_CASE("an explorer that rejoined a restarted head and left without sending there has nothing vanished",
          "[actors][ledger][rebind]") {
  SegmentLedger l;
  l.resume({{1, 6}});            // the log holds 6 of its segments
  REQUIRE(l.rejoined(1, 7, 0));  // it made 7; the one waiting for a credit was dropped at the rebind
  l.left(1, 6);                  // it sent 6 in its life, all to the dead head
  auto t = l.account({{1, 6}}, {}, true);
  CHECK(t.vanished == 0);
  CHECK(t.lost == 1);  // the dropped one, lost with the head
  CHECK(t.in_flight == 0);
  // Had it then sent 2 more to the new head and the learner seen only the first:
  SegmentLedger m;
  m.resume({{1, 6}});
  REQUIRE(m.rejoined(1, 7, 0));
  m.produced(1, 9);
  m.left(1, 8);  // 6 before the rebind, then numbers 7 and 8 to the new head
  t = m.account({{1, 7}}, {{1, {7, 0}}}, true);
  CHECK(t.vanished == 1);
  CHECK(t.lost == 1);
  CHECK(t.in_flight == 0);
}
