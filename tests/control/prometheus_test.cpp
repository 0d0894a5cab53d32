// The head's Prometheus endpoint ([metrics]): the text it serves, read back
// by an independent parser (Debian's python3-prometheus-client), and the
// endpoint itself during a real run, with strangers on its port.
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "assembly/cluster.hpp"
#include "control/prometheus.hpp"
#include "tests/helpers.hpp"
#include "transport/metrics_endpoint.hpp"

using namespace rlx;

namespace {

// Every sample of a Prometheus text as "name{k=v,...}" -> value, sorted
// label order, read by prometheus_client's parser (which throws on text
// that breaks the format); "TYPE name" -> type for every family.
// Debian's interpreter runs it: the one python3-prometheus-client installs for.
void require_prometheus_client() {
  if (std::system("/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null") != 0)
    test::skip_test("python3-prometheus-client is not installed (tools/install-deps.sh installs it)");
}

std::map<std::string, double> parse_with_prometheus_client(const std::string& text, const std::filesystem::path& dir) {
  const auto in = dir / "metrics.txt";
  std::ofstream(in) << text;
  const auto script = dir / "parse.py";
  std::ofstream(script) << R"(import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    print("TYPE " + family.name, family.type)
    for s in family.samples:
        labels = ",".join(k + "=" + v for k, v in sorted(s.labels.items()))
        print(s.name + "{" + labels + "}", repr(float(s.value)))
)";
  const auto [out, status] = test::run_command("/usr/bin/python3 " + script.string() + " " + in.string() + " 2>&1");
  INFO(out);
  REQUIRE(status == 0);
  std::map<std::string, double> samples;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const auto space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    const std::string key = line.substr(0, space), value = line.substr(space + 1);
    if (key.rfind("TYPE ", 0) == 0) {
      const double type = value == "counter" ? 1 : value == "gauge" ? 2 : value == "histogram" ? 3 : 0;
      samples[key] = type;
    } else {
      samples[key] = value == "nan" ? std::nan("") : std::stod(value);
    }
  }
  return samples;
}

}  // namespace

TEST_CASE("the Prometheus text of a report parses with an independent parser and holds the report's numbers",
          "[control][metrics]") {
  require_prometheus_client();
  test::TempDir dir("rlx-prometheus-text");
  MetricsData m;
  m.env_steps = 1234;
  m.episodes = 17;
  m.mean_return = std::nanf("");
  m.policy_version = 9;
  m.segments_trained = 8;
  m.lag_histogram = {500, 300, 200};  // env steps at lag 0, 1, and 2 or more
  m.expert_utilisation = {0.25f, 0.75f};
  m.segments_by_explorer = {{1, 7}, {2, 9}};
  m.infra_failures.assign(kInfraFailureCodes, 0);
  m.infra_failures[static_cast<std::size_t>(InfraFailure::reward_timeout)] = 4;
  m.decode_s = 2.5;
  RunCounts r;
  r.time_s = 12.5;
  r.explorers = 2;
  r.segments.produced = 10;
  r.weight_swap_mean_us = 250;
  r.rss_mb = 3;
  r.weight_swaps.observe(0.0003);
  r.weight_swaps.observe(0.002);
  r.weight_swaps.observe(30);  // past every bound: only in +Inf
  r.reward_latency.observe(0.04);
  r.reward_latency.observe(0.3);
  r.explorer_nodes = {{1, "head"}, {2, "gpu-7"}};
  r.explorers_by_node = {{"head", 1}, {"gpu-7", 1}};
  StrangerWatch::ByKind metrics_port{};
  metrics_port[static_cast<std::size_t>(Stranger::garbage)] = 2;
  r.strangers["metrics"] = metrics_port;
  const std::string text = prometheus_text(m, r, "a \"quoted\" run\\");

  const auto s = parse_with_prometheus_client(text, dir.path);
  const std::string run = "run=a \"quoted\" run\\";
  auto at = [&](const std::string& key) {
    INFO(key);
    REQUIRE(s.count(key) == 1);
    return s.at(key);
  };
  CHECK(at("rlx_env_steps_total{" + run + "}") == 1234);
  CHECK(at("TYPE rlx_env_steps") == 1);  // a counter (the parser names the family without _total)
  CHECK(at("rlx_policy_version{" + run + "}") == 9);
  CHECK(at("TYPE rlx_policy_version") == 2);
  CHECK(std::isnan(at("rlx_mean_return{" + run + "}")));
  CHECK(at("rlx_run_seconds{" + run + "}") == 12.5);
  CHECK(at("rlx_weight_swap_mean_seconds{" + run + "}") == Approx(250e-6));
  CHECK(at("rlx_resident_memory_bytes{" + run + "}") == 3 * 1024 * 1024);
  CHECK(at("rlx_segments_received_by_explorer_total{explorer=2,node=gpu-7," + run + "}") == 9);
  CHECK(at("rlx_segments_received_by_explorer_total{explorer=1,node=head," + run + "}") == 7);
  CHECK(at("rlx_explorers_by_node{node=gpu-7," + run + "}") == 1);
  CHECK(at("TYPE rlx_reward_seconds") == 3);
  CHECK(at("rlx_reward_seconds_bucket{le=0.01," + run + "}") == 0);
  CHECK(at("rlx_reward_seconds_bucket{le=0.05," + run + "}") == 1);
  CHECK(at("rlx_reward_seconds_bucket{le=0.5," + run + "}") == 2);
  CHECK(at("rlx_reward_seconds_count{" + run + "}") == 2);
  CHECK(at("rlx_reward_seconds_sum{" + run + "}") == Approx(0.34));
  CHECK(at("rlx_expert_utilisation{expert=1," + run + "}") == 0.75);
  CHECK(at("rlx_infra_failures_total{reason=reward_timeout," + run + "}") == 4);
  CHECK(at("rlx_infra_failures_total{reason=sandbox_start," + run + "}") == 0);
  CHECK(at("rlx_strangers_total{kind=garbage,port=metrics," + run + "}") == 2);
  CHECK(at("rlx_strangers_total{kind=silent,port=metrics," + run + "}") == 0);
  // The lag histogram: cumulative buckets, +Inf = count, sum = 300*1 + 200*2.
  CHECK(at("TYPE rlx_lag_versions") == 3);
  CHECK(at("rlx_lag_versions_bucket{le=0," + run + "}") == 500);
  CHECK(at("rlx_lag_versions_bucket{le=1," + run + "}") == 800);
  CHECK(at("rlx_lag_versions_bucket{le=2," + run + "}") == 1000);
  CHECK(at("rlx_lag_versions_bucket{le=+Inf," + run + "}") == 1000);
  CHECK(at("rlx_lag_versions_count{" + run + "}") == 1000);
  CHECK(at("rlx_lag_versions_sum{" + run + "}") == 700);
  CHECK(at("TYPE rlx_weight_swap_seconds") == 3);
  CHECK(at("rlx_weight_swap_seconds_bucket{le=0.0001," + run + "}") == 0);
  CHECK(at("rlx_weight_swap_seconds_bucket{le=0.0005," + run + "}") == 1);
  CHECK(at("rlx_weight_swap_seconds_bucket{le=0.0025," + run + "}") == 2);
  CHECK(at("rlx_weight_swap_seconds_bucket{le=10," + run + "}") == 2);
  CHECK(at("rlx_weight_swap_seconds_bucket{le=+Inf," + run + "}") == 3);
  CHECK(at("rlx_weight_swap_seconds_sum{" + run + "}") == Approx(30.0023));
  // No held-out evaluation yet: no eval family.
  CHECK(s.count("TYPE rlx_pass_at_1") == 0);
  r.eval = HeldOutScore{9, 0.5, 0.75, 64, true};
  const auto with_eval = parse_with_prometheus_client(prometheus_text(m, r, "x"), dir.path);
  CHECK(with_eval.at("rlx_pass_at_1{run=x}") == 0.5);
  CHECK(with_eval.at("rlx_eval_tasks{run=x}") == 64);
}

TEST_CASE("the endpoint serves GET /metrics and answers strangers with 4xx, counting each",
          "[control][metrics][net]") {
  auto board = std::make_shared<MetricsBoard>();
  board->publish("# HELP rlx_x x\n# TYPE rlx_x gauge\nrlx_x{run=\"r\"} 1\n");
  auto watch = std::make_shared<StrangerWatch>(null_logger());
  MetricsEndpointOptions o;
  o.board = board;
  o.watch = watch;
  o.timeout = std::chrono::seconds(2);
  auto endpoint = MetricsEndpoint::start(o);
  REQUIRE(endpoint.ok());
  const auto port = (*endpoint)->port();
  REQUIRE(port != 0);

  const auto ok = test::http_get(port, "/metrics");
  CHECK(ok.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(ok.find("text/plain; version=0.0.4") != std::string::npos);
  CHECK(test::http_body(ok) == board->text());
  CHECK(test::http_get(port, "/nothing").rfind("HTTP/1.1 404", 0) == 0);
  // Not HTTP at all: a 400, and the connection closed.
  {
    const int fd = test::connect_local(port);
    const std::string junk = "\x16\x03\x01 not a request line\r\n\r\n";
    REQUIRE(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) > 0);
    CHECK(test::closed_by_peer(fd));
  }
  // A client that connects and says nothing is closed after the timeout.
  CHECK(test::closed_by_peer(test::connect_local(port)));
  // Still serving.
  CHECK(test::http_get(port, "/metrics").rfind("HTTP/1.1 200", 0) == 0);
  const auto counts = (*endpoint)->counts();
  CHECK(counts.served == 2);
  CHECK(counts.refused == 2);
  CHECK(watch->by_port().at("metrics")[static_cast<std::size_t>(Stranger::garbage)] == 2);

  // The same port again: a clear error, not a second server.
  MetricsEndpointOptions again = o;
  again.port = port;
  auto second = MetricsEndpoint::start(again);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message.find("cannot listen on 127.0.0.1:" + std::to_string(port)) != std::string::npos);
}

TEST_CASE("a run with [metrics] prometheus serves its report while it trains, strangers on the port counted",
          "[control][metrics][e2e][net]") {
  require_prometheus_client();
  test::TempDir dir("rlx-prometheus-run");
  auto cfg = test::default_config();
  cfg.run.log_dir = dir.path.string();
  cfg.run.stop.max_env_steps = 60'000;
  cfg.run.stop.max_seconds = 0;
  cfg.run.stop.mean_return = 1e9;  // never solved: the run ends at its step budget
  cfg.run.report_interval_s = 0.05;
  cfg.metrics.prometheus = true;
  // The hook runs on the coordinator's thread: it only records; the checks
  // come after the run.
  std::uint16_t port = 0;
  int statuses = 0;
  std::atomic<bool> garbage_closed{false};
  std::thread stranger;
  int scrapes_ok = 0;
  std::string scraped;  // the newest /metrics body taken during the run
  RunHooks hooks;
  hooks.on_status = [&](const Status&) {
    ++statuses;
    if (statuses == 1) {
      std::ifstream(dir.path / "metrics_port") >> port;
      if (port == 0) return;
      // From a thread of its own: the coordinator's thread must not wait on it.
      stranger = std::thread([&garbage_closed, port] {
        const int fd = test::connect_local(port);
        const std::string junk = "GARBAGE\r\n\r\n";
        if (::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) > 0) garbage_closed = test::closed_by_peer(fd);
      });
    } else if (port != 0) {
      const auto reply = test::http_get(port, "/metrics");
      if (reply.rfind("HTTP/1.1 200", 0) == 0) ++scrapes_ok;
      scraped = test::http_body(reply);
    }
  };
  const RunResult result = run_cluster(cfg, builtin_envs(), hooks, null_logger());
  if (stranger.joinable()) stranger.join();
  INFO(result.summary);
  REQUIRE(result.outcome == RunOutcome::budget);
  REQUIRE(port != 0);
  CHECK(garbage_closed);
  REQUIRE(statuses >= 3);
  CHECK(scrapes_ok == statuses - 1);
  const auto s = parse_with_prometheus_client(scraped, dir.path);
  const std::string run = "run=" + cfg.run.name;
  CHECK(s.at("rlx_env_steps_total{" + run + "}") > 0);
  CHECK(s.at("rlx_explorers{" + run + "}") >= 1);
  CHECK(s.at("rlx_strangers_total{kind=garbage,port=metrics," + run + "}") == 1);
  CHECK(s.at("rlx_lag_versions_count{" + run + "}") > 0);
  // The endpoint closes with the run.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0);
  ::close(fd);
}

TEST_CASE("a run whose [metrics] port is taken does not start, and says which port", "[control][metrics][net]") {
  test::TempDir dir("rlx-prometheus-taken");
  auto board = std::make_shared<MetricsBoard>();
  MetricsEndpointOptions o;
  o.board = board;
  o.timeout = std::chrono::seconds(2);
  o.log = null_logger();
  auto holder = MetricsEndpoint::start(o);
  REQUIRE(holder.ok());
  auto cfg = test::default_config();
  cfg.run.log_dir = dir.path.string();
  cfg.metrics.prometheus = true;
  cfg.metrics.port = (*holder)->port();
  const RunResult result = run_cluster(cfg, builtin_envs(), {}, null_logger());
  CHECK(result.outcome == RunOutcome::failed);
  CHECK(result.summary.find("cannot listen on 127.0.0.1:" + std::to_string(cfg.metrics.port)) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path / "metrics.jsonl"));
}
