// The run's report on its own: the learner's metrics and the
// coordinator's counts become one metrics.jsonl line and the status line.
#include <catch2/catch.hpp>

#include <cmath>

#include "control/run_report.hpp"

using namespace rlx;

namespace {

bool line_has(const std::string& line, const std::string& part) { return line.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a metrics line carries the learner's numbers, the segment ledger and membership, one JSON object per line",
          "[actors][report]") {
  MetricsData m;
  m.env_steps = 1200;
  m.mean_return = std::nan("");
  m.segments_trained = 7;
  m.lag_histogram = {5, 2};
  RunCounts r;
  r.time_s = 2.5;
  r.explorers = 3;
  r.nodes = 2;
  r.segments = {10, 1, 3, 2};
  r.weight_swap_mean_us = 125.0;
  m.decode_s = 3.5;
  m.tool_s = 1.25;
  m.score_s = 2;
  m.tool_calls = 40;
  m.policy_tokens = 900;
  const auto line = metrics_json_line(m, r);
  CHECK(line.front() == '{');
  CHECK(line.substr(line.size() - 2) == "}\n");
  CHECK(line.find('\n') == line.size() - 1);
  CHECK(line_has(line, "\"time_s\":2.5,"));
  CHECK(line_has(line, "\"env_steps\":1200,"));
  CHECK(line_has(line, "\"mean_return\":null,"));  // NaN is not JSON
  CHECK(line_has(line, "\"lag_histogram\":[5,2],"));
  CHECK(line_has(line, "\"segments_produced\":10,\"segments_lost\":1,\"segments_in_flight\":2,\"segments_vanished\":3,"));
  CHECK(line_has(line, "\"explorers\":3,"));
  CHECK(line_has(line, "\"nodes\":2,"));
  CHECK(line_has(line, "\"weight_swap_mean_us\":125,"));
  CHECK(line_has(line, "\"decode_s\":3.5,\"tool_s\":1.25,\"score_s\":2,\"tool_calls\":40,\"policy_tokens\":900,"));
  CHECK_FALSE(line_has(line, "pass_at_1"));  // no held-out score yet
  CHECK(line_has(line, "\"strangers\":{},\"strangers_total\":0,"));  // a head with no ports
  r.strangers["head"] = {3, 1, 0, 2, 0};
  r.strangers["bulk"] = {0, 0, 1, 0, 4};
  CHECK(line_has(metrics_json_line(m, r),
            "\"strangers\":{\"bulk\":{\"silent\":0,\"garbage\":0,\"half_open\":1,\"over_limit\":0,\"unproven\":4},"
            "\"head\":{\"silent\":3,\"garbage\":1,\"half_open\":0,\"over_limit\":2,\"unproven\":0}},"
            "\"strangers_total\":11,"));
  CHECK(make_status(m, r, 0).strangers == 11);
  r.eval = HeldOutScore{4, 0.5, 0.75, 64, true};
  const auto scored = metrics_json_line(m, r);
  CHECK(line_has(scored, "\"eval_version\":4,\"pass_at_1\":0.5,\"eval_mean_score\":0.75,\"eval_tasks\":64}"));
}

TEST_CASE("the status line counts lost segments from the ledger and shows the newest held-out score",
          "[actors][report]") {
  MetricsData m;
  m.policy_version = 9;
  m.segments_dropped_stale = 4;
  RunCounts r;
  r.segments = {20, 3, 1};
  r.reward_workers = 2;
  auto s = make_status(m, r, 1500.0);
  CHECK(s.policy_version == 9);
  CHECK(s.dropped_stale == 4);
  CHECK(s.lost == 3);
  CHECK(s.reward_workers == 2);
  CHECK(s.steps_per_s == 1500.0);
  CHECK(std::isnan(s.pass_at_1));
  r.eval = HeldOutScore{8, 0.25, 0.5, 16, true};
  s = make_status(m, r, 0);
  CHECK(s.eval_version == 8);
  CHECK(s.pass_at_1 == 0.25);
  CHECK(json_number(std::numeric_limits<double>::infinity()) == "null");
}
