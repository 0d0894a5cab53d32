// The gateway (docs/gateway.md): the same sessions played through HTTP
// (GatewayServer, a cpp-httplib client per session) and in-process (the
// same hub and decoding rows, turns submitted directly): tokens/s and
// sessions/s, the ratio the HTTP layer costs, and each turn's latency
// (p50, p99) under 1, 16 and 64 concurrent sessions. The policy is
// examples/harness.toml's shape (max_len at least 256) with fresh weights
// (RLX_BENCH_GATEWAY_CONFIG names another config), 16 rows decoding.
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "bench/common.hpp"
#include "envs/env.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "explorers/gateway_rows.hpp"
#include "gateway/gateway_server.hpp"
#include "policy/hf_checkpoint.hpp"

namespace rlx {

namespace {

struct GatewayPace {
  double seconds = 0;
  std::int64_t tokens = 0, sessions = 0;
  std::vector<double> latencies;  // seconds per turn
  double percentile(double p) {
    if (latencies.empty()) return 0;
    std::sort(latencies.begin(), latencies.end());
    return latencies[static_cast<std::size_t>(p * static_cast<double>(latencies.size() - 1))];
  }
};

constexpr int kTurns = 3;
constexpr std::int64_t kMaxTokens = 16;

// `sessions` sessions of kTurns turns each, `concurrent` at a time, through
// HTTP (`port` > 0) or straight to the hub.
GatewayPace play_sessions(GatewayHub& hub, const Tokenizer& tok, std::uint16_t port, const std::string& token,
                          int concurrent, int sessions) {
  GatewayPace pace;
  std::mutex mu;
  std::atomic<int> next{0};
  const auto tool = tok.encode("\n<|tool|>\n3 passed\n<|assistant|>\n");
  auto client = [&] {
    std::unique_ptr<httplib::Client> http;
    if (port) {
      http = std::make_unique<httplib::Client>("127.0.0.1", port);
      http->set_bearer_token_auth(token.c_str());
      http->set_read_timeout(300, 0);
      http->set_keep_alive(true);
      http->set_tcp_nodelay(true);
    }
    std::vector<double> mine;
    std::int64_t tokens = 0, done = 0;
    for (int s; (s = next++) < sessions;) {
      auto context = tok.encode(fmt::format("<|user|>\nfix f{}\n<|assistant|>\n", s));
      std::uint64_t sid = 0;
      std::string sid_text;
      if (http) {
        auto r = http->Post("/rlx/v1/sessions", nlohmann::json{{"task_id", "bench"}}.dump(), "application/json");
        if (!r || r->status != 200) {
          std::fprintf(stderr, "gateway bench: open: %s\n", r ? r->body.c_str() : httplib::to_string(r.error()).c_str());
          continue;
        }
        sid_text = nlohmann::json::parse(r->body)["session_id"];
      } else {
        sid = *hub.open("bench", "");
      }
      bool ok = true;
      for (int turn = 0; turn < kTurns && ok; ++turn) {
        const auto t = Clock::now();
        std::vector<std::int64_t> ids;
        if (http) {
          auto r = http->Post("/v1/completions",
                              nlohmann::json{{"prompt_token_ids", context}, {"max_tokens", kMaxTokens}, {"rlx_session", sid_text}}.dump(),
                              "application/json");
          ok = r && r->status == 200;
          if (!ok) std::fprintf(stderr, "gateway bench: turn: %s\n", r ? r->body.c_str() : httplib::to_string(r.error()).c_str());
          if (ok) ids = nlohmann::json::parse(r->body)["choices"][0]["token_ids"].get<std::vector<std::int64_t>>();
        } else {
          auto turn_of = hub.submit(TurnSpec{context, kMaxTokens, {}, sid});
          ok = turn_of.ok();
          if (ok) {
            auto v = (*turn_of)->wait(0, std::chrono::steady_clock::now() + std::chrono::minutes(5));
            while (!v.done) v = (*turn_of)->wait(v.ids.size(), std::chrono::steady_clock::now() + std::chrono::minutes(5));
            ok = v.error.empty();
            ids = v.ids;
          }
        }
        mine.push_back(seconds_since(t));
        tokens += static_cast<std::int64_t>(ids.size());
        context.insert(context.end(), ids.begin(), ids.end());
        context.insert(context.end(), tool.begin(), tool.end());
      }
      if (!ok) continue;
      if (http) {
        auto r = http->Post(("/rlx/v1/sessions/" + sid_text + "/reward").c_str(), R"({"reward":1})", "application/json");
        ok = r && r->status == 200;
        if (!ok) std::fprintf(stderr, "gateway bench: reward: %s\n", r ? r->body.c_str() : "no answer");
      } else {
        ok = hub.reward(sid, 1.0F, false).ok();
      }
      done += ok;
    }
    std::lock_guard lock(mu);
    pace.latencies.insert(pace.latencies.end(), mine.begin(), mine.end());
    pace.tokens += tokens;
    pace.sessions += done;
  };
  const auto t = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrent; ++c) clients.emplace_back(client);
  for (auto& c : clients) c.join();
  pace.seconds = seconds_since(t);
  hub.take_groups(1, 1u << 30);  // the trajectories: not trained here
  return pace;
}

}  // namespace

std::vector<Row> bench_gateway() {
  const char* env_config = std::getenv("RLX_BENCH_GATEWAY_CONFIG");
  const std::string path = env_config ? env_config : "examples/harness.toml";
  auto config = load_config(path, builtin_envs().names());
  if (!config) return {{"gateway: tokens/s through HTTP vs in-process", "skipped", "", "", config.error().message}};
  config->policy.max_len = std::max<std::int64_t>(config->policy.max_len, 256);  // three turns with their tool output
  const auto tokenizer = run_tokenizer(config->tokens.tokenizer);
  auto model = make_seeded_transformer(run_transformer_options(config->policy, tokenizer->vocab()), 1);
  const std::int64_t rows = 16;
  std::vector<Row> out;
  for (const int concurrent : {1, 16, 64}) {
    const int sessions = std::max(96, 4 * concurrent);
    GatewayPace paces[2];
    for (int http = 0; http < 2; ++http) {
      GatewayHubOptions ho;
      ho.max_queued_turns = 4096;
      auto hub = std::make_shared<GatewayHub>(ho);
      std::unique_ptr<GatewayServer> server;
      const std::string token = gateway_token("bench secret of some length");
      if (http) {
        GatewayServerOptions so;
        so.token = token;
        so.hub = hub;
        so.tokenizer = tokenizer;
        so.max_len = config->policy.max_len;
        so.threads = 128;
        auto started = GatewayServer::start(so);
        if (!started) return {{"gateway: tokens/s through HTTP vs in-process", "skipped", "", "", started.error().message}};
        server = std::move(*started);
      }
      std::atomic<bool> stop{false};
      std::thread decoding([&] {
        SampleOptions s;
        s.temperature = config->tokens.temperature;
        GatewayRows decode(model, rows, s, tokenizer, hub, 16);
        std::mt19937_64 rng(1);
        while (!stop) decode.step(rng, 1, std::chrono::milliseconds(5));
      });
      paces[http] = play_sessions(*hub, *tokenizer, server ? server->port() : 0, token, concurrent, sessions);
      hub->close("the bench is over");
      stop = true;
      decoding.join();
    }
    auto& [direct, gateway] = paces;
    const auto tps = [](const GatewayPace& p) { return static_cast<double>(p.tokens) / p.seconds; };
    const auto sps = [](const GatewayPace& p) { return static_cast<double>(p.sessions) / p.seconds; };
    const auto note = fmt::format("{} sessions x {} turns of <= {} tokens, {} rows, {}", sessions, kTurns, kMaxTokens, rows, path);
    out.push_back({fmt::format("gateway: tokens/s, HTTP vs in-process, {} concurrent", concurrent), fmt::format("{:.0f}", tps(gateway)),
                   fmt::format("{:.0f}", tps(direct)), fmt::format("{:.2f}", tps(gateway) / tps(direct)), note});
    out.push_back({fmt::format("gateway: sessions/s, HTTP vs in-process, {} concurrent", concurrent),
                   fmt::format("{:.1f}", sps(gateway)), fmt::format("{:.1f}", sps(direct)),
                   fmt::format("{:.2f}", sps(gateway) / sps(direct)), ""});
    const double g50 = gateway.percentile(0.5), g99 = gateway.percentile(0.99);
    const double d50 = direct.percentile(0.5), d99 = direct.percentile(0.99);
    out.push_back({fmt::format("gateway: turn latency p50 / p99 (ms), {} concurrent", concurrent),
                   fmt::format("{:.1f} / {:.1f}", 1e3 * g50, 1e3 * g99), fmt::format("{:.1f} / {:.1f}", 1e3 * d50, 1e3 * d99),
                   fmt::format("{:.2f}", g50 / d50), "ratio of the p50s"});
  }
  return out;
}

}  // namespace rlx
