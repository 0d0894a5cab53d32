#include "transport/metrics_endpoint.hpp"

#include <atomic>
#include <future>
#include <thread>

#include <sys/socket.h>

#include <httplib.h>

#include "transport/live_page.hpp"

namespace rlx {

void MetricsBoard::publish(std::string text) {
  std::lock_guard lock(mu_);
  text_ = std::move(text);
}

std::string MetricsBoard::text() const {
  std::lock_guard lock(mu_);
  return text_;
}

void MetricsBoard::publish_live(std::string json) {
  std::lock_guard lock(mu_);
  live_ = std::move(json);
}

std::string MetricsBoard::live() const {
  std::lock_guard lock(mu_);
  return live_;
}

struct MetricsEndpoint::Impl {
  MetricsEndpointOptions options;
  httplib::Server server;
  std::uint16_t port = 0;
  std::atomic<std::uint64_t> served{0}, refused{0};
  // A GET answered 200: counted, then told to on_served (its reply is set).
  void answered(const char* path) {
    ++served;
    if (options.on_served) options.on_served(path);
  }
  std::promise<void> listened;  // set when the server's loop has returned
  std::thread thread;
};

namespace {

constexpr std::size_t kMaxRequestBytes = 8 * 1024;  // a scrape is a GET: no body

void refuse(MetricsEndpoint::Impl& impl, const httplib::Request& req, int status) {
  ++impl.refused;
  const std::string peer = req.remote_addr.empty() ? "?" : req.remote_addr + ":" + std::to_string(req.remote_port);
  const std::string what = fmt::format("HTTP {} for {} {}", status, req.method.empty() ? "(no request line)" : req.method,
                                       req.path.substr(0, 80));
  if (impl.options.watch)
    impl.options.watch->saw("metrics", Stranger::garbage, peer, what);
  else if (impl.options.log)
    impl.options.log->warn("metrics: {} from {}", what, peer);
}

}  // namespace

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(MetricsEndpointOptions options) {
  if (!options.board) return make_error(Errc::config_missing, "metrics endpoint: no board to serve");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  auto& s = impl->server;
  auto* self = impl.get();
  const auto t = static_cast<time_t>(impl->options.timeout.count());
  s.set_read_timeout(t, 0);
  s.set_write_timeout(t, 0);
  s.set_keep_alive_timeout(t);
  s.set_payload_max_length(kMaxRequestBytes);
  // The library's default adds SO_REUSEPORT, which would let a second run
  // share this port (and each scrape reach either): address reuse only.
  s.set_socket_options([](int fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (impl->options.metrics)
    s.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
      res.set_content(self->options.board->text(), "text/plain; version=0.0.4; charset=utf-8");
      self->answered("/metrics");
    });
  if (impl->options.page) {
    // The page may run its own inline script and style and fetch from this
    // endpoint, nothing else: nothing is loaded from outside.
    s.Get("/", [self](const httplib::Request&, httplib::Response& res) {
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'");
      res.set_header("X-Content-Type-Options", "nosniff");
      const auto page = live_page_html();
      res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
      self->answered("/");
    });
    s.Get("/live.json", [self](const httplib::Request&, httplib::Response& res) {
      const auto live = self->options.board->live();
      res.set_header("Cache-Control", "no-store");
      res.set_content(live.empty() ? std::string("{\"reports\":0}") : live, "application/json");
      self->answered("/live.json");
    });
  }
  s.set_error_handler([self](const httplib::Request& req, httplib::Response& res) {
    refuse(*self, req, res.status);
    res.set_header("Connection", "close");  // a stranger gets no keep-alive
    const std::string served = std::string(self->options.metrics ? " GET /metrics" : "") +
                               (self->options.page ? " GET / GET /live.json" : "");
    res.set_content(res.status == 404 ? "not found; served here:" + served + "\n" : "bad request\n", "text/plain");
  });
  s.set_exception_handler([self](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    refuse(*self, req, 500);
  });
  const std::string& host = impl->options.host;
  if (impl->options.port == 0) {
    const int port = s.bind_to_any_port(host);
    if (port <= 0) return make_error(Errc::io, "metrics endpoint: cannot listen on " + host + " (a free port)");
    impl->port = static_cast<std::uint16_t>(port);
  } else {
    if (!s.bind_to_port(host, impl->options.port))
      return make_error(Errc::io, fmt::format("metrics endpoint: cannot listen on {}:{} (in use, or not an address "
                                              "of this machine)", host, impl->options.port));
    impl->port = impl->options.port;
  }
  impl->thread = std::thread([self] {
    self->server.listen_after_bind();
    self->listened.set_value();
  });
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(impl)));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsEndpoint::~MetricsEndpoint() {
  // The library's stop() does nothing until its loop has begun: ask again
  // until the loop has returned (a server stopped right after it started).
  auto done = impl_->listened.get_future();
  do impl_->server.stop();
  while (done.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready);
  impl_->thread.join();
}

std::uint16_t MetricsEndpoint::port() const { return impl_->port; }

MetricsEndpoint::Counts MetricsEndpoint::counts() const { return Counts{impl_->served.load(), impl_->refused.load()}; }

}  // namespace rlx
