// examples/harness-agent.toml with the Python harness playing workspace
// tasks (examples/harness/harness.py --tasks workspace): each session's
// tool calls run in `rlx workspace-tools` (the sandbox the reward uses),
// each turn is decoded line by line through the gateway, and the learner
// trains on whole groups whose observation tokens are context. From random
// weights the reward is 0: this shows the loop, not learning.
#include <unistd.h>

#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rollout_log/log_reader.hpp"
#include "tests/gateway/harness_fixture.hpp"
#include "tests/helpers.hpp"
#include "tests/metrics_fixture.hpp"

using namespace rlx;

TEST_CASE("the Python harness plays workspace episodes through the gateway with rlx workspace-tools, and the learner "
          "trains on them with their observations as context",
          "[gateway][workspace][e2e][net][slow]") {
  if (::access("/usr/bin/python3", X_OK) != 0) test::skip_test("no python3");
  const test::TempDir t("rlx-harness-workspace");
  auto cfg = load_config(std::string(RLX_SOURCE_DIR) + "/examples/harness-agent.toml", builtin_envs().names());
  REQUIRE(cfg.ok());
  cfg->run.log_dir = t.path.string();
  cfg->run.stop.max_updates = 2;
  cfg->run.stop.max_seconds = 600;
  cfg->run.record = true;
  const auto rewards_path = t.path / "rewards.txt";
  const auto h = test::run_with_harness(*cfg, {"--tasks", "workspace", "--concurrency", "8", "--rlx", RLX_BINARY,
                                               "--report-every", "8", "--log", rewards_path.string()});
  const RunResult& r = h.result;
  INFO(r.summary);
  INFO(h.out);
  CHECK(r.outcome == RunOutcome::budget);
  CHECK(h.harness_clean);
  CHECK(h.out.find("the gateway closed after") != std::string::npos);
  CHECK(h.out.find("machinery failed") == std::string::npos);

  std::vector<double> rewards;
  std::ifstream in(rewards_path);
  for (double x; in >> x;) rewards.push_back(x);
  REQUIRE(rewards.size() >= 16);  // two updates of 8 rows
  for (double x : rewards) CHECK((x >= 0 && x <= 1));

  const auto line = test::last_metrics_line(t.path);
  INFO(line);
  const auto g = nlohmann::json::parse(line)["gateway"];
  // The run's last line is written when it stops; the gateway closes after
  // that, so up to --concurrency (8) sessions in flight may still be
  // rewarded (accepted, never trained) after the line: none beyond.
  const auto rewarded = g["sessions_rewarded"].get<std::size_t>();
  CHECK(rewarded <= rewards.size());
  CHECK(rewarded + 8 >= rewards.size());
  CHECK(g["sessions_failed"] == 0);
  CHECK(g["sessions_lost"] == 0);
  CHECK(g["prefix_mismatch"] == 0);  // token in, token out: the harness never rewrote what was sampled
  CHECK(g["eos_dropped"] == 0);
  // A turn is decoded a line at a time, and an episode has several turns.
  CHECK(g["turns"].get<std::size_t>() > 3 * rewards.size());

  // Every trained row holds the tools' observations as context, after its first sampled token.
  std::size_t rows = 0, rows_with_observations = 0;
  auto report = read_log(t.path, ReadOptions{}, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind != LogKind::rollout) return true;
    const auto& s = e.rollout.segment;
    REQUIRE(s.tokens.has_value());
    const auto& k = *s.tokens;
    const auto B = static_cast<std::size_t>(s.num_envs);
    REQUIRE(k.observed.size() % B == 0);
    const std::size_t T = k.observed.size() / B;
    for (std::size_t b = 0; b < B; ++b) {
      std::size_t observed = 0;
      for (std::size_t i = 0; i < T; ++i) observed += k.observed[i * B + b];
      rows_with_observations += observed >= 8;  // at least one framed observation: "[out]\n...[end]\n"
      ++rows;
    }
    return true;
  });
  REQUIRE(report.ok());
  CHECK(rows >= 16);
  CHECK(rows_with_observations == rows);
}
