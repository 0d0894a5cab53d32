// A whole run with env = "tokens:gateway": the head serves the gateway,
// a harness (a thread of this test, over HTTP) plays sessions in groups of
// two and rewards them; the run trains on exactly those sessions, each
// row carrying the reward the harness posted, until its update budget.
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "assembly/cluster.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "gateway/gateway_server.hpp"
#include "rollout_log/log_reader.hpp"
#include "tests/actors/token_toml.hpp"
#include "tests/helpers.hpp"
#include "tests/metrics_fixture.hpp"

using namespace rlx;
using json = nlohmann::json;

TEST_CASE("a gateway run trains on the sessions a harness plays over HTTP, each row with the reward the harness "
          "posted, and refuses requests without its token",
          "[gateway][e2e][net]") {
  const test::TempDir t("rlx-gateway-run");
  const auto& dir = t.path;
  auto cfg = test::token_config("tokens:gateway", dir, R"(max_len = 96
[tokens]
group_size = 2
eval_tasks = 0
temperature = 1.0
)", "explorers = 1\nenvs_per_explorer = 4\nrewards = 0\n");
  cfg.run.stop.max_env_steps = 1'000'000'000;
  cfg.run.stop.max_updates = 4;
  cfg.run.stop.mean_return = 1e9;

  std::promise<void> started;
  RunHooks hooks;
  hooks.on_start = [&](std::function<void(const std::string&)> stop) {
    if (stop) started.set_value();  // (called again with none as the run ends)
  };
  RunResult result;
  std::thread run([&] { result = run_cluster(cfg, builtin_envs(), hooks, null_logger()); });
  started.get_future().wait();

  const auto about_path = dir / "gateway.json";
  struct stat st {};
  REQUIRE(::stat(about_path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);  // it holds the token
  std::ifstream in(about_path);
  const auto about = json::parse(in);
  const std::string url = about["url"];
  const std::string token = about["token"];
  CHECK(about["group_size"] == 2);
  const auto port = static_cast<std::uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));

  httplib::Client stranger("127.0.0.1", port);
  auto refused = stranger.Get("/v1/models");
  REQUIRE(refused);
  CHECK(refused->status == 401);

  // Strangers while the run trains: garbage bytes, a half request, idle connections held open.
  {
    const int fd = test::connect_local(port);
    const std::string garbage = "\x16\x03\x01 not a request line\r\n\r\n";
    ::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
    CHECK(test::closed_by_peer(fd));  // answered 400 and closed
  }
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) idle.push_back(test::connect_local(port));
  {
    const std::string half = "POST /v1/completions HTTP/1.1\r\nContent-Length: 500\r\n\r\n{\"pro";
    ::send(idle[0], half.data(), half.size(), MSG_NOSIGNAL);
  }

  // The harness: groups of two sessions, two turns each; the reward is the
  // share of 'a' in the policy's text. It plays until the run ends.
  const auto chars = Tokenizer::characters();
  std::map<std::string, float> posted;  // task id + session -> reward
  std::set<std::int64_t> versions_seen;
  std::size_t sessions_done = 0;
  {
    httplib::Client c("127.0.0.1", port);
    c.set_bearer_token_auth(token.c_str());
    c.set_read_timeout(120, 0);
    bool running = true;
    for (int group = 0; running; ++group) {
      for (int member = 0; member < 2 && running; ++member) {
        const std::string task = "task-" + std::to_string(group);
        auto opened = c.Post("/rlx/v1/sessions", json{{"task_id", task}, {"group_id", "g" + std::to_string(group)}}.dump(),
                             "application/json");
        if (!opened || opened->status != 200) break;  // the run ended
        const std::string sid = json::parse(opened->body)["session_id"];
        auto context = chars->encode("<|user|>\nsay a\n<|assistant|>\n");
        std::string text;
        for (int turn = 0; turn < 2 && running; ++turn) {
          auto r = c.Post("/v1/completions", json{{"prompt_token_ids", context}, {"max_tokens", 8}, {"rlx_session", sid}}.dump(),
                          "application/json");
          if (!r || r->status != 200) {
            running = false;
            break;
          }
          const auto out = json::parse(r->body);
          const auto ids = out["choices"][0]["token_ids"].get<std::vector<std::int64_t>>();
          for (auto v : out["choices"][0]["versions"]) versions_seen.insert(v.get<std::int64_t>());
          text += out["choices"][0]["text"].get<std::string>();
          context.insert(context.end(), ids.begin(), ids.end());
          const auto tool = chars->encode("\n<|tool|>\nagain\n<|assistant|>\n");
          context.insert(context.end(), tool.begin(), tool.end());
        }
        if (!running) break;
        const float reward = text.empty() ? 0.0F : static_cast<float>(std::count(text.begin(), text.end(), 'a')) / static_cast<float>(text.size());
        auto rewarded = c.Post(("/rlx/v1/sessions/" + sid + "/reward").c_str(), json{{"reward", reward}}.dump(), "application/json");
        if (!rewarded || rewarded->status != 200) break;
        posted[task + "/" + std::to_string(member)] = reward;
        ++sessions_done;
      }
      if (group > 10000) FAIL("the run did not end");
    }
  }
  for (int fd : idle) ::close(fd);
  run.join();
  INFO(result.summary);
  CHECK(result.outcome == RunOutcome::budget);
  CHECK(sessions_done >= 16);  // four updates of one segment of four rows
  CHECK(versions_seen.size() >= 2);  // the weights the gateway served changed during the run

  const auto line = test::last_metrics_line(dir);
  INFO(line);
  CHECK(test::json_number(line, "segments_lost") == 0);
  CHECK(test::json_number(line, "policy_version") >= 4);
  // The hub's counts in the run's last line: every session the harness finished was rewarded, none lost.
  const auto g = json::parse(line)["gateway"];
  CHECK(g["sessions_rewarded"].get<std::size_t>() == sessions_done);
  CHECK(g["sessions_lost"] == 0);
  CHECK(g["prefix_mismatch"] == 0);
  CHECK(g["turns"].get<std::size_t>() >= 2 * sessions_done);
  const auto strangers = json::parse(line)["strangers"]["gateway"];
  CHECK(strangers["unproven"] == 1);  // the request without the token
  CHECK(strangers["garbage"].get<int>() >= 1);  // the bytes that were not HTTP
  // Every row the learner got is a session the harness rewarded, with its reward, in whole groups.
  std::size_t rows = 0;
  auto report = read_log(dir, ReadOptions{}, [&](const LogEntryData& e, const LogPosition&) {
    if (e.kind != LogKind::rollout) return true;
    const auto& s = e.rollout.segment;
    REQUIRE(s.tokens.has_value());
    CHECK(s.num_envs == 4);
    CHECK(s.tokens->group_size == 2);
    for (std::size_t b = 0; b < s.tokens->task_ids.size(); ++b) {
      const auto& task = s.tokens->task_ids[b];
      CHECK(task == s.tokens->task_ids[b ^ 1]);  // a group: one task
      const bool either = std::abs(s.episode_returns[b] - posted[task + "/0"]) < 1e-6 ||
                          std::abs(s.episode_returns[b] - posted[task + "/1"]) < 1e-6;
      CHECK(either);
      ++rows;
    }
    return true;
  });
  REQUIRE(report.ok());
  CHECK(rows >= 16);
}

TEST_CASE("a gateway run whose port is taken, or whose token file cannot serve, does not start and says why",
          "[gateway][net]") {
  const test::TempDir t("rlx-gateway-start");
  auto cfg = test::token_config("tokens:gateway", t.path, "max_len = 96\n[tokens]\ngroup_size = 2\neval_tasks = 0\n",
                                "explorers = 1\nenvs_per_explorer = 2\nrewards = 0\n");
  // Another gateway holds the port.
  GatewayServerOptions o;
  o.token = gateway_token("some secret of enough length");
  o.hub = std::make_shared<GatewayHub>();
  o.tokenizer = Tokenizer::characters();
  auto holder = GatewayServer::start(o);
  REQUIRE(holder.ok());
  cfg.gateway.port = (*holder)->port();
  const auto taken = run_cluster(cfg, builtin_envs(), {}, null_logger());
  CHECK(taken.outcome == RunOutcome::failed);
  CHECK(taken.summary.find("cannot listen on 127.0.0.1:" + std::to_string((*holder)->port())) != std::string::npos);

  cfg.gateway.port = 0;
  cfg.gateway.token_file = (t.path / "no-such-token").string();
  const auto missing = run_cluster(cfg, builtin_envs(), {}, null_logger());
  CHECK(missing.outcome == RunOutcome::bad_input);
  CHECK(missing.summary.find("[gateway] token_file") != std::string::npos);

  std::ofstream(t.path / "short-token") << "abc\n";
  cfg.gateway.token_file = (t.path / "short-token").string();
  const auto short_token = run_cluster(cfg, builtin_envs(), {}, null_logger());
  CHECK(short_token.outcome == RunOutcome::bad_input);
  CHECK(short_token.summary.find("at least 16 characters") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.path / "rollouts"));  // nothing was prepared
}
