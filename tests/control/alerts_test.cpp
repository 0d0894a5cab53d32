// [alerts]: the rules that decide what to post, the sender that posts it
// without ever holding up the run, and a run that tells a local receiver
// how it ended.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "control/alerts.hpp"
#include "tests/helpers.hpp"
#include "tools/embedded_config.hpp"
#include "transport/webhook.hpp"

using namespace rlx;

namespace {

// A local webhook: records the bodies it is posted, answers `status`.
struct Receiver {
  httplib::Server server;
  std::mutex mu;
  std::vector<std::string> bodies;
  int port = 0;
  std::thread thread;

  explicit Receiver(int status = 200) {
    server.Post("/hook", [this, status](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu);
        bodies.push_back(req.body);
      }
      res.status = status;
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~Receiver() {
    server.stop();
    thread.join();
  }
  std::vector<std::string> taken() {
    std::lock_guard lock(mu);
    return bodies;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/hook"; }
};

// A port that takes connections and never answers (a hung webhook).
struct Silent {
  int fd = -1;
  std::uint16_t port = 0;
  Silent() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Silent() { ::close(fd); }
};

MetricsData learner_at(std::uint64_t version, float loss = 0.5f) {
  MetricsData m;
  m.policy_version = version;
  m.policy_loss = loss;
  m.infra_failures.assign(kInfraFailureCodes, 0);
  return m;
}

RunCounts counts_at(double t) {
  RunCounts r;
  r.time_s = t;
  r.explorers = 4;
  return r;
}

std::vector<std::string> kinds(const std::vector<Alert>& alerts) {
  std::vector<std::string> out;
  for (const auto& a : alerts) out.push_back(a.kind);
  return out;
}

}  // namespace

TEST_CASE("alert rules say a stall, a lost member, a non-finite loss and a failure rate once, repeats held back",
          "[control][alerts]") {
  AlertsConfig c;
  c.stall_s = 30;
  c.infra_failures_per_min = 5;
  c.min_interval_s = 100;
  AlertRules rules(c, "r1");
  using V = std::vector<std::string>;
  CHECK(rules.check(learner_at(1), counts_at(0)).empty());   // the first report is the baseline
  CHECK(rules.check(learner_at(2), counts_at(20)).empty());
  CHECK(rules.check(learner_at(2), counts_at(49)).empty());  // 29 s without a version
  const auto stall = rules.check(learner_at(2), counts_at(50));
  REQUIRE(kinds(stall) == V{"stall"});
  CHECK(stall[0].text.find("rlx run 'r1': stalled: no new policy version for 30 s (still v2") == 0);
  CHECK(rules.check(learner_at(2), counts_at(90)).empty());  // said once while it lasts
  CHECK(rules.check(learner_at(3), counts_at(95)).empty());  // cleared
  // Stalled again, but within min_interval_s of the last stall alert: held back.
  CHECK(rules.check(learner_at(3), counts_at(126)).empty());
  CHECK(rules.suppressed() == 1);

  auto lost = counts_at(130);
  lost.explorers_lost = 2;
  lost.explorers = 2;
  const auto member = rules.check(learner_at(4), lost);
  REQUIRE(kinds(member) == V{"member_lost"});
  CHECK(member[0].text.find("lost 2 explorer(s) and 0 node(s)") != std::string::npos);
  CHECK(rules.check(learner_at(5), [&] { auto r = lost; r.time_s = 131; return r; }()).empty());  // no news

  CHECK(kinds(rules.check(learner_at(6, std::nanf("")), counts_at(132))) == V{"nan_loss"});
  CHECK(rules.check(learner_at(7, INFINITY), counts_at(133)).empty());  // still not finite: said once
  CHECK(rules.check(learner_at(8), counts_at(134)).empty());

  // Failures of the machinery: the rate is taken over a minute or more (the
  // last window closed at 90 s): 12 in the minute to 150 s is over 5/min.
  auto failing = learner_at(9);
  failing.infra_failures[static_cast<std::size_t>(InfraFailure::reward_timeout)] = 12;
  CHECK(rules.check(failing, counts_at(140)).empty());  // the window is not a minute yet
  const auto infra = rules.check(failing, counts_at(150));
  REQUIRE(kinds(infra) == V{"infra_failures"});
  CHECK(infra[0].text.find("reward_timeout 12") != std::string::npos);
  // 2 more in the next minute: under the rate.
  failing.infra_failures[static_cast<std::size_t>(InfraFailure::reward_timeout)] = 14;
  failing.policy_version = 10;
  CHECK(rules.check(failing, counts_at(210)).empty());

  const auto end = rules.ended("budget", "r1: max_env_steps reached");
  CHECK(end.kind == "run_ended");
  CHECK(end.text == "rlx run 'r1' ended: budget: r1: max_env_steps reached");
}

TEST_CASE("the webhook sender posts Slack's JSON, and a dead or hung webhook never holds up its caller",
          "[control][alerts][net]") {
  CHECK(webhook_body("a \"b\"\n\\c\x01") == "{\"text\":\"a \\\"b\\\"\\n\\\\c\\u0001\"}");
  {
    Receiver hook;
    auto sender = WebhookSender::start(hook.url(), std::chrono::seconds(5), null_logger());
    REQUIRE(sender.ok());
    (*sender)->post("first");
    (*sender)->post("second \"quoted\"");
    (*sender)->finish();
    CHECK(hook.taken() == std::vector<std::string>{"{\"text\":\"first\"}", "{\"text\":\"second \\\"quoted\\\"\"}"});
    CHECK((*sender)->counts().sent == 2);
    (*sender)->post("after the end");
    CHECK((*sender)->counts().dropped == 1);
  }
  {
    Receiver refusing(500);
    auto sender = WebhookSender::start(refusing.url(), std::chrono::seconds(5), null_logger());
    REQUIRE(sender.ok());
    (*sender)->post("x");
    (*sender)->finish();
    CHECK((*sender)->counts().failed == 1);
  }
  {
    Silent hung;
    auto sender = WebhookSender::start("http://127.0.0.1:" + std::to_string(hung.port) + "/hook",
                                       std::chrono::milliseconds(300), null_logger());
    REQUIRE(sender.ok());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) (*sender)->post("alert " + std::to_string(i));  // never blocks: a bounded queue
    (*sender)->finish();
    const auto counts = (*sender)->counts();
    CHECK(counts.sent == 0);
    CHECK(counts.failed >= 1);
    CHECK(counts.failed + counts.dropped == 100);
    // One post's timeout, then at most one more for the rest.
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
  for (const char* bad : {"ftp://x/y", "hooks.slack.com/x", "http://"})
    CHECK_FALSE(WebhookSender::start(bad, std::chrono::seconds(1), null_logger()).ok());
}

TEST_CASE("an [alerts] webhook must be an http or https URL, and a bad one names the line", "[control][alerts][config]") {
  const std::string embedded = embedded_cluster_toml();
  auto ok = test::parse(embedded + "\n[alerts]\nwebhook = \"https://hooks.example.com/T0/B0\"\nstall_s = 60\n");
  INFO((ok ? "" : ok.error().message));
  REQUIRE(ok.ok());
  CHECK(ok->alerts.webhook == "https://hooks.example.com/T0/B0");
  CHECK(ok->alerts.stall_s == 60);
  for (const char* bad : {"ftp://hooks.example.com/x", "hooks.example.com/x", "http://"}) {
    auto r = test::parse(embedded + "\n[alerts]\nwebhook = \"" + bad + "\"\n");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::config_range);
    CHECK(r.error().message.find("webhook") != std::string::npos);
    CHECK(r.error().message.find("http:// or https:// URL") != std::string::npos);
  }
}

TEST_CASE("a run with [alerts] tells the webhook how it ended, and a dead webhook changes nothing",
          "[control][alerts][e2e][net]") {
  test::TempDir dir("rlx-alerts-run");
  auto cfg = test::default_config();
  cfg.run.log_dir = dir.path.string();
  cfg.run.stop.max_env_steps = 30'000;
  cfg.run.stop.max_seconds = 0;
  cfg.run.stop.mean_return = 1e9;  // the run ends at its step budget
  cfg.alerts.timeout_s = 2;
  {
    Receiver hook;
    cfg.alerts.webhook = hook.url();
    const RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
    INFO(r.summary);
    REQUIRE(r.outcome == RunOutcome::budget);
    const auto bodies = hook.taken();
    REQUIRE_FALSE(bodies.empty());
    CHECK(bodies.back().find("{\"text\":\"rlx run '" + cfg.run.name + "' ended: budget: ") == 0);
  }
  {
    Silent hung;  // takes the connection, never answers
    cfg.alerts.webhook = "http://127.0.0.1:" + std::to_string(hung.port) + "/hook";
    const RunResult r = run_cluster(cfg, builtin_envs(), {}, null_logger());
    INFO(r.summary);
    CHECK(r.outcome == RunOutcome::budget);
  }
  cfg.alerts.webhook = "not a url";
  CHECK(run_cluster(cfg, builtin_envs(), {}, null_logger()).outcome == RunOutcome::bad_input);
}
