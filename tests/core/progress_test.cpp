// What long commands print as they go: durations and what remains.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/progress.hpp"

using namespace rlx;

TEST_CASE("durations read at a glance, and what remains follows the pace so far", "[core][progress]") {
  CHECK(human_duration(0) == "0 s");
  CHECK(human_duration(42.4) == "42 s");
  CHECK(human_duration(59.6) == "1 min 00 s");
  CHECK(human_duration(185) == "3 min 05 s");
  CHECK(human_duration(4320) == "1 h 12 min");
  CHECK(human_duration(-1) == "?");
  CHECK(human_duration(NAN) == "?");
  CHECK(std::isnan(remaining_s(0, 100, 10)));  // nothing done: no pace yet
  CHECK(remaining_s(20, 100, 10) == Approx(40));
  CHECK(remaining_s(100, 100, 10) == 0);
  CHECK(remaining_s(120, 100, 10) == 0);
  CHECK(left_text(0, 100, 10).empty());
  CHECK(left_text(25, 100, 60) == "~3 min 00 s left");
  // A time limit sooner than the pace: what it leaves; later: the pace.
  CHECK(left_text(25, 100, 60, 90) == "~30 s left");
  CHECK(left_text(25, 100, 60, 600) == "~3 min 00 s left");
  CHECK(left_text(25, 100, 60, 30) == "~0 s left");
  CHECK(left_text(0, 100, 10, 90) == "~1 min 20 s left");  // no pace yet, the limit still says
}
