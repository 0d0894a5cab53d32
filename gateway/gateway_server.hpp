// The gateway's HTTP endpoint (issue 25; docs/gateway.md): an
// OpenAI-compatible, token-in/token-out API over a GatewayHub, served by
// cpp-httplib on its own threads. Routes:
//   GET  /v1/models
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events)
//   POST /rlx/v1/sessions                        {task_id, group_id?, metadata?}
//   POST /rlx/v1/sessions/{id}/reward            {reward, infra_failure?}
//   POST /rlx/v1/tokenize                        {text}: its token ids
// Every request needs `Authorization: Bearer <token>` (401 otherwise,
// counted as a stranger on port "gateway"); a body that is not what the
// route reads gets 400 naming what was wrong, one over the size bound
// 413, a turn the explorers are too busy to queue 503, one they did not
// finish in time 504 (its row is freed). A client that reads or writes
// too slowly is cut off at the socket timeouts; no request holds a server
// thread past them plus the turn timeout. No CAF, no LibTorch.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "envs/tokens/tokenizer.hpp"
#include "gateway/gateway_hub.hpp"
#include "gateway/openai_request.hpp"
#include "transport/strangers.hpp"

namespace rlx {

struct GatewayServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: a free one
  std::string token;       // the bearer token every request must carry (not empty)
  std::shared_ptr<GatewayHub> hub;
  std::shared_ptr<const Tokenizer> tokenizer;  // text prompts in, completion text out
  std::string model = "rlx-policy";            // the one model served (GET /v1/models)
  std::int64_t max_len = 256;                  // the policy's context: prompt + max_tokens must fit
  GatewayLimits limits;
  std::size_t max_body_bytes = 4 << 20;
  std::chrono::seconds io_timeout{10};         // reading a request, writing a reply, an idle keep-alive
  std::chrono::seconds turn_timeout{300};      // a completion not done by then: 504
  std::size_t threads = 128;                   // requests served at once (each waits on its turns)
  std::shared_ptr<StrangerWatch> watch;        // null: refusals only logged
  Logger log;
};

// What the endpoint answered, by kind.
struct GatewayServed {
  std::uint64_t completions = 0, sessions = 0, rewards = 0, models = 0, tokenized = 0;
  std::uint64_t unauthorized = 0, bad_request = 0, not_found = 0, conflict = 0, too_large = 0, busy = 0, timeouts = 0;
  std::uint64_t streams_cut = 0;  // a streaming client that went away (its turns cancelled)
};

// The bearer token a run's gateway takes: derived from the cluster secret,
// so every node of the run computes the same one and it reveals nothing of
// the secret.
std::string gateway_token(const std::string& cluster_secret);

class GatewayServer {
 public:
  // Binds (a clear error when it cannot) and serves on its own threads.
  static Result<std::unique_ptr<GatewayServer>> start(GatewayServerOptions options);
  ~GatewayServer();  // stops serving, joins
  GatewayServer(const GatewayServer&) = delete;
  GatewayServer& operator=(const GatewayServer&) = delete;

  std::uint16_t port() const;
  GatewayServed served() const;

  struct Impl;

 private:
  explicit GatewayServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
