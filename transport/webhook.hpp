// Posts alerts to a webhook (Slack's incoming-webhook JSON, {"text": ...},
// which Mattermost, Rocket.Chat and Discord's /slack endpoint also take)
// from a thread of its own: post() never blocks and never fails the
// caller. A post that fails (no connection, a timeout, a status other
// than 2xx) is logged and counted, not retried; a queue past its bound
// drops the oldest (counted). The destructor delivers what is queued
// within one timeout, then gives up. No CAF.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/logging.hpp"

namespace rlx {

// The JSON body of a post: {"text":"..."} with the text escaped.
std::string webhook_body(const std::string& text);

class WebhookSender {
 public:
  // `url`: http:// or https://, host, optional port and path.
  static Result<std::unique_ptr<WebhookSender>> start(const std::string& url, std::chrono::milliseconds timeout,
                                                      Logger log, std::size_t max_queued = 64);
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void post(std::string text);
  // Delivers what is queued within one timeout, then stops (idempotent;
  // the destructor calls it). Later posts are dropped, counted.
  void finish();

  struct Counts {
    std::uint64_t sent = 0, failed = 0, dropped = 0;
  };
  Counts counts() const;

 private:
  WebhookSender(std::string origin, std::string path, std::chrono::milliseconds timeout, Logger log,
                std::size_t max_queued);
  void run();

  const std::string origin_, path_;  // "https://host:port", "/services/..."
  const std::chrono::milliseconds timeout_;
  const Logger log_;
  const std::size_t max_queued_;
  mutable std::mutex mu_;
  std::mutex join_mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point give_up_at_;
  Counts counts_;
  std::thread thread_;
};

}  // namespace rlx
