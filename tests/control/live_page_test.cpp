// The live page ([metrics] page): the document it polls (LiveHistory),
// the endpoint that serves both, and the page itself in a real headless
// browser (Debian's Chromium), alone and during a run.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "assembly/cluster.hpp"
#include "control/live_history.hpp"
#include "tests/helpers.hpp"
#include "transport/live_page.hpp"
#include "transport/metrics_endpoint.hpp"

using namespace rlx;

namespace {

// The value of the first `name="..."` after `from` in a dumped DOM ("" none).
std::string dom_attribute(const std::string& dom, const std::string& name, const std::string& from = "<body") {
  const auto start = dom.find(from);
  if (start == std::string::npos) return "";
  const auto at = dom.find(" " + name + "=\"", start);
  if (at == std::string::npos) return "";
  const auto begin = at + name.size() + 3;
  return dom.substr(begin, dom.find('"', begin) - begin);
}

int dom_number(const std::string& dom, const std::string& name, const std::string& from = "<body") {
  const auto v = dom_attribute(dom, name, from);
  return v.empty() ? -1 : std::stoi(v);
}

// A report of a run `i` seconds in: 1,000 env steps a second, the return
// climbing by 10 a second.
void add_live_report(LiveHistory& h, int i) {
  MetricsData m;
  RunCounts r;
  r.time_s = i;
  r.explorers = 2;
  m.env_steps = 1000 * static_cast<std::uint64_t>(i);
  m.episodes = static_cast<std::uint64_t>(i);
  m.mean_return = 10.0f * static_cast<float>(i);
  m.updates = static_cast<std::uint64_t>(i);
  m.policy_version = static_cast<std::uint64_t>(i);
  m.policy_loss = 0.5f;
  m.lag_mean = 1;
  m.lag_max = 2;
  m.segments_by_explorer = {{1, static_cast<std::uint64_t>(i)}, {2, 2 * static_cast<std::uint64_t>(i)}};
  h.add(m, r);
}

}  // namespace

TEST_CASE("the live page's document holds the newest report whole and the curves since the start, thinned past "
          "its bound",
          "[control][metrics]") {
  LiveHistory h("run \"quoted\" \xff", 8);
  {
    const auto empty = nlohmann::json::parse(h.json());
    CHECK(empty["reports"] == 0);
    CHECK(empty["latest"].is_null());
    CHECK(empty["series"]["time_s"].empty());
  }
  for (int i = 1; i <= 20; ++i) add_live_report(h, i);
  const auto doc = nlohmann::json::parse(h.json());
  CHECK(doc["run"] == "run \"quoted\" \xef\xbf\xbd");  // a byte that is not UTF-8 reads as U+FFFD
  CHECK(doc["reports"] == 20);
  CHECK(doc["ended"].is_null());
  CHECK(doc["latest"]["env_steps"] == 20000);
  CHECK(doc["latest"]["explorers"] == 2);
  CHECK(doc["by_explorer"]["2"] == 40);
  const auto& series = doc["series"];
  CHECK(series.size() == LiveHistory::curve_names().size());
  const auto& t = series["time_s"];
  CHECK(t.size() <= 8);
  CHECK(t.size() >= 4);
  CHECK(t.front() == 1);  // the first and the newest stay
  CHECK(t.back() == 20);
  for (std::size_t k = 0; k < t.size(); ++k) {
    INFO("point " << k << " at " << t[k]);
    if (k) CHECK(t[k] > t[k - 1]);
    const double at = t[k];
    CHECK(series["env_steps"][k] == 1000 * at);
    CHECK(series["mean_return"][k] == 10 * at);
    // A rate needs a report before it: none at the first.
    if (k == 0) CHECK(series["steps_per_s"][k].is_null());
    else CHECK(series["steps_per_s"][k] == 1000);
    CHECK(series["tokens_per_s"][k].is_null());  // no policy tokens in this run
    CHECK(series["pass_at_1"][k].is_null());     // no held-out evaluation yet
  }
  for (const auto& name : LiveHistory::curve_names()) CHECK(series[name].size() == t.size());

  MetricsData m;
  RunCounts r;
  r.time_s = 21;
  r.eval = HeldOutScore{21, 0.25, 0.5, 64, true};
  m.env_steps = 21000;
  h.add(m, r);
  h.ended("solved", "solved after 21 s");
  const auto after = nlohmann::json::parse(h.json());
  CHECK(after["series"]["pass_at_1"].back() == 0.25);
  CHECK(after["series"]["mean_return"].back().is_null());  // no episode in that report
  CHECK(after["ended"]["outcome"] == "solved");
  CHECK(after["ended"]["summary"] == "solved after 21 s");
}

TEST_CASE("the endpoint serves the live page, which may load nothing from outside, and its document: only what is "
          "enabled",
          "[control][metrics][net]") {
  auto board = std::make_shared<MetricsBoard>();
  LiveHistory h("page");
  add_live_report(h, 1);
  board->publish_live(h.json());
  MetricsEndpointOptions o;
  o.board = board;
  o.timeout = std::chrono::seconds(2);
  o.metrics = false;
  o.page = true;
  auto endpoint = MetricsEndpoint::start(o);
  REQUIRE(endpoint.ok());
  const auto port = (*endpoint)->port();

  const auto page = test::http_get(port, "/");
  REQUIRE(page.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(page.find("Content-Type: text/html") != std::string::npos);
  CHECK(page.find("Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src "
                  "'unsafe-inline'; connect-src 'self'") != std::string::npos);
  const auto html = test::http_body(page);
  CHECK(html == live_page_html());
  CHECK(html.find("live.json") != std::string::npos);
  // Nothing from anywhere else: no external script, style, image or font.
  CHECK(html.find("https://") == std::string::npos);
  CHECK_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=)")));
  CHECK(html.find("@import") == std::string::npos);

  const auto json = test::http_get(port, "/live.json");
  REQUIRE(json.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(json.find("Content-Type: application/json") != std::string::npos);
  CHECK(test::http_body(json) == board->live());
  CHECK(test::http_get(port, "/metrics").rfind("HTTP/1.1 404", 0) == 0);  // not enabled
  CHECK((*endpoint)->counts().served == 2);
  CHECK((*endpoint)->counts().refused == 1);
}

TEST_CASE("the live page in a headless browser shows the run's numbers, its curves grow with every report, and it "
          "says how the run ended",
          "[control][metrics][net][browser]") {
  const auto browser = test::require_headless_browser();
  test::TempDir dir("rlx-live-page");
  auto board = std::make_shared<MetricsBoard>();
  LiveHistory h("browser-test");
  int reports = 0;
  for (; reports < 3; ++reports) add_live_report(h, reports + 1);
  board->publish_live(h.json());

  // Each answered request is signalled; while `grow` holds, a new report is
  // added after each one, so every poll of the page finds one more than
  // the poll before.
  std::mutex mu;
  std::condition_variable answered;
  std::uint64_t served = 0;
  bool grow = true;
  MetricsEndpointOptions o;
  o.board = board;
  o.page = true;
  o.on_served = [&](const std::string&) {
    std::lock_guard lock(mu);
    ++served;
    if (grow) {
      add_live_report(h, ++reports);
      board->publish_live(h.json());
    }
    answered.notify_all();
  };
  auto endpoint = MetricsEndpoint::start(o);
  REQUIRE(endpoint.ok());
  const auto port = (*endpoint)->port();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/?every=0.1";

  const auto first = test::browser_dom(browser, url, 2000, dir.path);
  {
    std::lock_guard lock(mu);
    grow = false;
  }
  INFO(first.command);
  REQUIRE(first.ok);
  const auto& dom = first.dom;
  INFO(dom.substr(0, 4000));
  CHECK(dom_attribute(dom, "data-state") == "running");
  const int shown = dom_number(dom, "data-reports");
  CHECK(shown >= 4);
  CHECK(dom_number(dom, "data-grew") >= 2);  // polls that found more reports than the one before
  // Every report is a point of the return curve and of the losses' (20 points at most: no thinning).
  CHECK(dom_number(dom, "data-points", "id=\"chart-return\"") == shown);
  CHECK(dom_number(dom, "data-points", "id=\"chart-value\"") == shown);
  CHECK(dom_number(dom, "data-points", "id=\"chart-lag\"") == 2 * shown);  // mean and max
  CHECK(dom.find(fmt::format("<td class=\"v\">{},000</td>", shown)) != std::string::npos);  // env steps, en-US
  CHECK(dom.find("<td>explorers live</td><td class=\"v\">2</td>") != std::string::npos);
  CHECK(dom.find("<polyline") != std::string::npos);
  CHECK(dom.find("id=\"chart-pass\" hidden") != std::string::npos);  // no held-out evaluation in this run

  {
    std::lock_guard lock(mu);
    h.ended("solved", "browser-test: solved after 9 s");
    board->publish_live(h.json());
  }
  const auto last = test::browser_dom(browser, url, 1000, dir.path);
  REQUIRE(last.ok);
  CHECK(dom_attribute(last.dom, "data-state") == "ended");
  CHECK(last.dom.find("ended: solved") != std::string::npos);
  CHECK(last.dom.find("browser-test: solved after 9 s") != std::string::npos);

  // The head gone while the page is open (a run still going): the page
  // says so and keeps the last numbers.
  LiveHistory still("browser-test");
  add_live_report(still, 1);
  board->publish_live(still.json());
  const auto base = [&] {
    std::lock_guard lock(mu);
    return served;
  }();
  std::thread closer([&] {
    {
      std::unique_lock lock(mu);  // the page, then its live.json (a bound, should the browser never come)
      answered.wait_for(lock, std::chrono::seconds(120), [&] { return served >= base + 2; });
    }
    (*endpoint).reset();
  });
  const auto gone = test::browser_dom(browser, url, 2000, dir.path);
  closer.join();
  REQUIRE(gone.ok);
  CHECK(dom_attribute(gone.dom, "data-state") == "gone");
  CHECK(dom_number(gone.dom, "data-reports") == 1);
  CHECK(gone.dom.find("<td>explorers live</td><td class=\"v\">2</td>") != std::string::npos);
}

TEST_CASE("a run with [metrics] page serves the live page while it trains, and a browser sees its curves grow",
          "[control][metrics][e2e][net][browser]") {
  const auto browser = test::require_headless_browser();
  test::TempDir dir("rlx-live-page-run");
  auto cfg = test::default_config();
  cfg.run.log_dir = dir.path.string();
  cfg.run.stop.max_env_steps = 5'000'000;
  cfg.run.stop.max_seconds = 300;
  cfg.run.stop.mean_return = 1e9;  // the test stops it
  cfg.run.report_interval_s = 0.1;
  cfg.metrics.page = true;

  std::mutex mu;
  std::condition_variable cv;
  int statuses = 0;
  std::function<void(const std::string&)> stop;
  std::thread viewer;
  test::PageDump early, later;
  RunHooks hooks;
  hooks.on_start = [&](std::function<void(const std::string&)> s) {
    std::lock_guard lock(mu);
    stop = std::move(s);
  };
  hooks.on_status = [&](const Status&) {
    std::lock_guard lock(mu);
    if (++statuses != 2) {
      cv.notify_all();
      return;
    }
    // From a thread of its own: the coordinator's thread must not wait on a browser.
    viewer = std::thread([&] {
      std::uint16_t port = 0;
      std::ifstream(dir.path / "metrics_port") >> port;
      const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
      early = test::browser_dom(browser, url, 1000, dir.path);
      std::unique_lock lock(mu);
      const int after = statuses + 3;  // three more reports
      cv.wait_for(lock, std::chrono::seconds(120), [&] { return statuses >= after; });
      lock.unlock();
      later = test::browser_dom(browser, url, 1000, dir.path);
      lock.lock();
      const auto stop_now = stop;
      lock.unlock();
      if (stop_now) stop_now("the test saw enough");
    });
  };
  const RunResult result = run_cluster(cfg, builtin_envs(), hooks, null_logger());
  if (viewer.joinable()) viewer.join();
  INFO(result.summary);
  CHECK(result.outcome == RunOutcome::interrupted);
  INFO(early.command);
  REQUIRE(early.ok);
  REQUIRE(later.ok);
  INFO(later.dom.substr(0, 4000));
  CHECK(dom_attribute(early.dom, "data-state") == "running");
  CHECK(dom_attribute(later.dom, "data-state") == "running");
  const int before = dom_number(early.dom, "data-reports"), after = dom_number(later.dom, "data-reports");
  CHECK(before >= 1);
  CHECK(after >= before + 3);
  CHECK(dom_number(later.dom, "data-points", "id=\"chart-return\"") > dom_number(early.dom, "data-points", "id=\"chart-return\""));
  CHECK(later.dom.find("<td>explorers live</td><td class=\"v\">2</td>") != std::string::npos);
}
