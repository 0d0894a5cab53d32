// A gateway run across nodes: a member node serves its own gateway
// (gateway-NAME.json), decoded by its own explorers, and the harness that
// calls it trains the head's learner. The head has no explorer here, so
// every trained row came through the member's endpoint, and the head's
// metrics count the member's gateway (its heartbeat carries them).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <numeric>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/child_process.hpp"
#include "core/config.hpp"
#include "rollout_log/log_reader.hpp"
#include "tests/cluster/head_run.hpp"
#include "tests/helpers.hpp"
#include "tests/metrics_fixture.hpp"

using namespace rlx;
using json = nlohmann::json;

TEST_CASE("a member node of a gateway run serves its own harnesses, and the head's learner trains on their sessions",
          "[gateway][cluster][e2e][net][slow]") {
  if (::access("/usr/bin/python3", X_OK) != 0) test::skip_test("no python3");
  const test::TempDir t("rlx-member-gateway");
  // examples/harness.toml, split: the head runs no explorer; "rollout-a" runs one.
  std::ifstream example(std::string(RLX_SOURCE_DIR) + "/examples/harness.toml");
  std::string toml((std::istreambuf_iterator<char>(example)), std::istreambuf_iterator<char>());
  toml = toml.substr(0, toml.find("[[node]]"));
  toml += "[[node]]\nname = \"head\"\nhost = \"127.0.0.1\"\nport = 0\nactors = [\"coordinator\", \"learner\", "
          "\"weight_store\", \"recorder\"]\nexplorers = 0\n\n[[node]]\nname = \"rollout-a\"\nhost = \"127.0.0.1\"\n"
          "explorers = 1\nenvs_per_explorer = 8\n";
  auto cfg = parse_config(toml, "member-gateway.toml", builtin_envs().names());
  INFO((cfg ? std::string() : cfg.error().message));
  REQUIRE(cfg.ok());
  cfg->run.log_dir = t.path.string();
  cfg->run.stop.max_updates = 6;
  cfg->run.stop.max_seconds = 300;
  cfg->run.record = true;
  cfg->launch.heartbeat_s = 0.1;  // the heartbeat brings the member's gateway counts to the head
  const std::string secret = "member-gateway-secret-0123456789";

  test::HeadRun head(*cfg, secret);
  auto member = test::run_member(*cfg, "rollout-a", head.port, secret);
  const auto about_path = t.path / "gateway-rollout-a.json";
  const auto rewards_path = t.path / "rewards.txt", out_path = t.path / "harness.out";
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ChildOptions o;
  o.stdout_fd = out;
  auto pid = spawn_child({"/usr/bin/python3", std::string(RLX_SOURCE_DIR) + "/examples/harness/harness.py", "--gateway",
                          about_path.string(), "--wait-s", "120", "--log", rewards_path.string()},
                         o);
  ::close(out);
  REQUIRE(pid.ok());
  const RunResult r = head.wait();
  const MemberNodeResult m = member.get();
  const bool clean = reap_children({*pid}, std::chrono::seconds(60)).at(0).clean;
  std::ifstream said(out_path);
  const std::string harness_out((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
  INFO(r.summary);
  INFO(m.summary);
  INFO(harness_out);
  CHECK(r.outcome == RunOutcome::budget);
  CHECK(m.outcome == RunOutcome::solved);  // stopped by the head
  CHECK(clean);
  CHECK(harness_out.find("the gateway closed after") != std::string::npos);

  // Both nodes serve, each on its own port, with the token the cluster secret gives both.
  struct stat st {};
  REQUIRE(::stat(about_path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::ifstream member_in(about_path), head_in(t.path / "gateway.json");
  const auto member_about = json::parse(member_in), head_about = json::parse(head_in);
  CHECK(member_about["url"] != head_about["url"]);
  CHECK(member_about["token"] == head_about["token"]);

  std::vector<double> rewards;
  std::ifstream in(rewards_path);
  for (double x; in >> x;) rewards.push_back(x);
  REQUIRE(rewards.size() >= 48);  // six updates of 8 rows
  // The learner trained on rows the member's explorer made from them.
  std::size_t rows = 0;
  auto report = read_log(t.path, ReadOptions{}, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind != LogKind::rollout) return true;
    REQUIRE(e.rollout.segment.tokens.has_value());
    rows += e.rollout.segment.tokens->task_ids.size();
    return true;
  });
  REQUIRE(report.ok());
  CHECK(rows >= 48);
  const auto line = test::last_metrics_line(t.path);
  INFO(line);
  CHECK(test::json_number(line, "policy_version") >= 6);
  CHECK(test::json_number(line, "segments_lost") == 0);
  // The head's metrics count the member's gateway (as of its last heartbeat): the head's own served nothing.
  const auto g = json::parse(line)["gateway"];
  CHECK(g["sessions_rewarded"].get<std::size_t>() >= 8);
  CHECK(g["sessions_rewarded"].get<std::size_t>() <= rewards.size());
  CHECK(g["prefix_mismatch"] == 0);
}
