// The head's HTTP endpoint: a server (cpp-httplib) that answers
// GET /metrics with the newest Prometheus text the coordinator published
// on a MetricsBoard, GET / with the live page (web/live.html) and
// GET /live.json with the newest LiveHistory document, each only when
// enabled, and anything else with 404 or 405. A request that is
// not HTTP, too large, or stalled past the timeout is refused by the
// library (400, 413, or the connection closed) and counted on the
// StrangerWatch as a stranger on port "metrics"; the run never waits on
// it. Its own threads; no CAF.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "transport/strangers.hpp"

namespace rlx {

// What the endpoint serves; the coordinator publishes, the server reads.
class MetricsBoard {
 public:
  void publish(std::string text);  // GET /metrics
  std::string text() const;        // "" before the first publish
  void publish_live(std::string json);  // GET /live.json
  std::string live() const;             // "" before the first publish

 private:
  mutable std::mutex mu_;
  std::string text_, live_;
};

struct MetricsEndpointOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: a free one
  std::shared_ptr<MetricsBoard> board;
  std::chrono::seconds timeout{5};  // reading a request, writing a reply, an idle keep-alive
  std::shared_ptr<StrangerWatch> watch;  // null: refusals only logged
  Logger log;
  bool metrics = true;  // GET /metrics
  bool page = false;    // GET / (the live page) and GET /live.json
  // Called on a server thread after each GET answered 200 (its reply set,
  // not yet sent), with the path: tests wait on it instead of polling.
  std::function<void(const std::string& path)> on_served;
};

class MetricsEndpoint {
 public:
  // Binds (a clear error when it cannot) and serves on its own threads.
  static Result<std::unique_ptr<MetricsEndpoint>> start(MetricsEndpointOptions options);
  ~MetricsEndpoint();  // stops serving, joins
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  std::uint16_t port() const;
  struct Counts {
    std::uint64_t served = 0;   // GETs answered 200
    std::uint64_t refused = 0;  // every other answer (4xx, 5xx)
  };
  Counts counts() const;

  struct Impl;

 private:
  explicit MetricsEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
