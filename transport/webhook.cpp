#include "transport/webhook.hpp"

#include <httplib.h>

namespace rlx {

std::string webhook_body(const std::string& text) {
  std::string out = "{\"text\":\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"}";
}

Result<std::unique_ptr<WebhookSender>> WebhookSender::start(const std::string& url, std::chrono::milliseconds timeout,
                                                            Logger log, std::size_t max_queued) {
  const auto scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    return make_error(Errc::config_range, "alerts webhook: not an http:// or https:// URL: " + url);
  const auto path_at = url.find('/', scheme_end + 3);
  std::string origin = url.substr(0, path_at), path = path_at == std::string::npos ? "/" : url.substr(path_at);
  if (origin.size() <= scheme_end + 3) return make_error(Errc::config_range, "alerts webhook: no host in " + url);
  if (!httplib::Client(origin).is_valid())
    return make_error(Errc::config_range, "alerts webhook: cannot use " + url);
  return std::unique_ptr<WebhookSender>(
      new WebhookSender(std::move(origin), std::move(path), timeout, std::move(log), max_queued));
}

WebhookSender::WebhookSender(std::string origin, std::string path, std::chrono::milliseconds timeout, Logger log,
                             std::size_t max_queued)
    : origin_(std::move(origin)), path_(std::move(path)), timeout_(timeout), log_(std::move(log)),
      max_queued_(max_queued), thread_([this] { run(); }) {}

WebhookSender::~WebhookSender() { finish(); }

void WebhookSender::finish() {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      give_up_at_ = std::chrono::steady_clock::now() + timeout_;
    }
  }
  cv_.notify_all();
  std::lock_guard join_lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void WebhookSender::post(std::string text) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      ++counts_.dropped;
      return;
    }
    if (queue_.size() >= max_queued_) {
      queue_.pop_front();
      ++counts_.dropped;
    }
    queue_.push_back(std::move(text));
  }
  cv_.notify_all();
}

WebhookSender::Counts WebhookSender::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void WebhookSender::run() {
  httplib::Client client(origin_);
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout_);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ - s);
  client.set_connection_timeout(s.count(), us.count());
  client.set_read_timeout(s.count(), us.count());
  client.set_write_timeout(s.count(), us.count());
  for (;;) {
    std::string text;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      if (stopping_ && std::chrono::steady_clock::now() >= give_up_at_) {
        counts_.dropped += queue_.size();
        if (log_) log_->warn("{} alert(s) not sent: the run is over and the webhook is slow", queue_.size());
        return;
      }
      text = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto res = client.Post(path_, webhook_body(text), "application/json");
    std::lock_guard lock(mu_);
    if (res && res->status >= 200 && res->status < 300) {
      ++counts_.sent;
    } else {
      ++counts_.failed;
      if (log_)
        log_->warn("the webhook {} did not take an alert ({})", origin_,
                   res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error()));
    }
  }
}

}  // namespace rlx
