#include "gateway/gateway_server.hpp"

#include <charconv>
#include <cmath>

#include <sys/socket.h>

#include <fmt/format.h>

#include "core/auth.hpp"
#include "gateway/gateway_server_impl.hpp"

namespace rlx {

std::string gateway_token(const std::string& cluster_secret) {
  return secret_proof(cluster_secret, "rlx-gateway-bearer", "gateway");
}

namespace gateway_http {

std::string peer_of(const httplib::Request& req) {
  return req.remote_addr.empty() ? "?" : req.remote_addr + ":" + std::to_string(req.remote_port);
}

void reply_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                 const std::string& code) {
  res.status = status;
  res.set_content(gateway_error_json(message, type, code), "application/json");
}

void reply_error(Impl& impl, httplib::Response& res, const Error& e) {
  switch (e.code) {
    case Errc::not_found:
      impl.count(&GatewayServed::not_found);
      return reply_error(res, 404, e.message, "not_found_error", "not_found");
    case Errc::refused:
      impl.count(&GatewayServed::conflict);
      return reply_error(res, 409, e.message, "conflict_error", "conflict");
    case Errc::busy:
      impl.count(&GatewayServed::busy);
      res.set_header("Retry-After", "1");
      return reply_error(res, 503, e.message, "server_busy", "busy");
    default:
      impl.count(&GatewayServed::bad_request);
      return reply_error(res, 400, e.message, "invalid_request_error", to_string(e.code));
  }
}

bool authorized(Impl& impl, const httplib::Request& req, httplib::Response& res) {
  const auto header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.size() > prefix.size() && header.compare(0, prefix.size(), prefix) == 0 &&
      proofs_equal(header.substr(prefix.size()), impl.options.token))
    return true;
  impl.count(&GatewayServed::unauthorized);
  const auto what = fmt::format("HTTP 401 for {} {}: {}", req.method, req.path.substr(0, 80),
                                header.empty() ? "no bearer token" : "a wrong bearer token");
  if (impl.options.watch) impl.options.watch->saw("gateway", Stranger::unproven, peer_of(req), what);
  else if (impl.options.log) impl.options.log->warn("gateway: {} from {}", what, peer_of(req));
  res.set_header("WWW-Authenticate", "Bearer");
  reply_error(res, 401, "a bearer token is required: Authorization: Bearer <token> (docs/gateway.md)",
              "authentication_error", "unauthorized");
  return false;
}

Result<json> json_object_body(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error(Errc::malformed_message, "the body must be a JSON object");
  return j;
}

Result<std::uint64_t> session_number(const std::string& text) {
  std::uint64_t n = 0;
  const auto* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc() || at != end || n == 0)
    return make_error(Errc::not_found, "no open session " + text.substr(0, 40));
  return n;
}

}  // namespace gateway_http

namespace {

using namespace gateway_http;

void open_session(Impl& impl, const httplib::Request& req, httplib::Response& res) {
  if (!authorized(impl, req, res)) return;
  auto body = json_object_body(req.body);
  if (!body) return reply_error(impl, res, body.error());
  const auto& j = *body;
  auto text = [&](const char* field) -> Result<std::string> {
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) return std::string();
    if (!it->is_string() || it->get_ref<const std::string&>().size() > 256)
      return make_error(Errc::invalid_field, fmt::format("`{}` must be a string of at most 256 bytes", field));
    return it->get<std::string>();
  };
  auto task = text("task_id");
  if (!task) return reply_error(impl, res, task.error());
  if (task->empty()) return reply_error(impl, res, make_error(Errc::invalid_field, "`task_id` is required: a non-empty string"));
  auto group = text("group_id");
  if (!group) return reply_error(impl, res, group.error());
  if (auto m = j.find("metadata"); m != j.end() && !m->is_null() && !m->is_object())
    return reply_error(impl, res, make_error(Errc::invalid_field, "`metadata` must be an object"));
  auto id = impl.options.hub->open(*task, *group);
  if (!id) return reply_error(impl, res, id.error());
  impl.count(&GatewayServed::sessions);
  res.set_content(json{{"session_id", std::to_string(*id)}, {"object", "rlx.session"}}.dump(), "application/json");
}

void reward_session(Impl& impl, const httplib::Request& req, httplib::Response& res) {
  if (!authorized(impl, req, res)) return;
  auto session = session_number(req.matches[1]);
  if (!session) return reply_error(impl, res, session.error());
  auto body = json_object_body(req.body);
  if (!body) return reply_error(impl, res, body.error());
  const auto& j = *body;
  bool failed = false;
  if (auto f = j.find("infra_failure"); f != j.end() && !f->is_null()) {
    if (!f->is_boolean()) return reply_error(impl, res, make_error(Errc::invalid_field, "`infra_failure` must be a boolean"));
    failed = f->get<bool>();
  }
  auto rw = j.find("reward");
  double reward = 0;
  if (rw != j.end() && rw->is_number() && std::isfinite(rw->get<double>()) && std::abs(rw->get<double>()) <= 1e6) {
    reward = rw->get<double>();
  } else if (!failed) {
    return reply_error(impl, res, make_error(Errc::invalid_field, "`reward` must be a finite number (|reward| <= 1e6)"));
  }
  auto ok = impl.options.hub->reward(*session, static_cast<float>(reward), failed);
  if (!ok) return reply_error(impl, res, ok.error());
  impl.count(&GatewayServed::rewards);
  res.set_content(json{{"session_id", std::to_string(*session)}, {"closed", true}}.dump(), "application/json");
}

// POST /rlx/v1/tokenize {"text": ..., "special_tokens": false}: the
// policy's token ids for text (a harness appends tool output to a
// session's ids without retokenizing what was sampled); special tokens
// written in the text become their ids only when asked (a harness's own
// template markers, never a tool's output).
void tokenize(Impl& impl, const httplib::Request& req, httplib::Response& res) {
  if (!authorized(impl, req, res)) return;
  auto body = json_object_body(req.body);
  if (!body) return reply_error(impl, res, body.error());
  auto it = body->find("text");
  if (it == body->end() || !it->is_string())
    return reply_error(impl, res, make_error(Errc::invalid_field, "`text` must be a string"));
  bool specials = false;
  if (auto s = body->find("special_tokens"); s != body->end() && !s->is_null()) {
    if (!s->is_boolean()) return reply_error(impl, res, make_error(Errc::invalid_field, "`special_tokens` must be true or false"));
    specials = s->get<bool>();
  }
  const auto ids = impl.options.tokenizer->encode(it->get_ref<const std::string&>(), specials);
  impl.count(&GatewayServed::tokenized);
  res.set_content(json{{"token_ids", ids}, {"count", ids.size()}}.dump(), "application/json");
}

}  // namespace

Result<std::unique_ptr<GatewayServer>> GatewayServer::start(GatewayServerOptions options) {
  if (!options.hub || !options.tokenizer) return make_error(Errc::config_missing, "gateway: no hub or tokenizer");
  if (options.token.empty()) return make_error(Errc::config_missing, "gateway: no bearer token");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  auto* self = impl.get();
  auto& s = impl->server;
  const auto t = static_cast<time_t>(impl->options.io_timeout.count());
  s.set_read_timeout(t, 0);
  s.set_write_timeout(t, 0);
  s.set_keep_alive_timeout(t);
  s.set_payload_max_length(impl->options.max_body_bytes);
  s.set_tcp_nodelay(true);
  // A harness keeps its connection for a session's many requests (the
  // library's default closes it after 5, which a client racing its next
  // request sees as a failed read).
  s.set_keep_alive_max_count(1000);  // a reply's headers and body leave at once (no 40 ms Nagle and delayed-ACK stall)
  const auto threads = impl->options.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_socket_options([self](int fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    self->listen_fd = fd;  // the listening socket (the only one these options reach)
  });
  s.Get("/v1/models", [self](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(*self, req, res)) return;
    self->count(&GatewayServed::models);
    res.set_content(json{{"object", "list"},
                         {"data", json::array({{{"id", self->options.model}, {"object", "model"}, {"owned_by", "rlx"}}})}}
                        .dump(),
                    "application/json");
  });
  s.Post("/v1/completions", [self](const httplib::Request& req, httplib::Response& res) { complete(*self, req, res, false); });
  s.Post("/v1/chat/completions", [self](const httplib::Request& req, httplib::Response& res) { complete(*self, req, res, true); });
  s.Post("/rlx/v1/tokenize", [self](const httplib::Request& req, httplib::Response& res) { tokenize(*self, req, res); });
  s.Post("/rlx/v1/sessions", [self](const httplib::Request& req, httplib::Response& res) { open_session(*self, req, res); });
  s.Post(R"(/rlx/v1/sessions/([^/]+)/reward)",
         [self](const httplib::Request& req, httplib::Response& res) { reward_session(*self, req, res); });
  // Called for every answer of 400 and above: the routes' own (their body
  // set, counted where they were made) pass through untouched.
  s.set_error_handler(httplib::Server::HandlerWithResponse([self](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404 || res.status == 405) {
      self->count(&GatewayServed::not_found);
      reply_error(res, res.status, fmt::format("no route {} {}", req.method, req.path.substr(0, 80)),
                  "invalid_request_error", "not_found");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (res.status == 413) self->count(&GatewayServed::too_large);
    else self->count(&GatewayServed::bad_request);
    res.set_header("Connection", "close");  // a stranger gets no keep-alive
    const auto what = fmt::format("HTTP {} for {} {}", res.status, req.method.empty() ? "(no request line)" : req.method,
                                  req.path.substr(0, 80));
    if (self->options.watch) self->options.watch->saw("gateway", Stranger::garbage, peer_of(req), what);
    else if (self->options.log) self->options.log->warn("gateway: {} from {}", what, peer_of(req));
    reply_error(res, res.status, res.status == 413 ? "the body is larger than the gateway takes" : "bad request",
                "invalid_request_error");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([self](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string what = "unknown";
    try {
      if (e) std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    if (self->options.log) self->options.log->error("gateway: a request failed: {}", what);
    reply_error(res, 500, "the gateway failed on this request", "server_error");
  });
  const std::string& host = impl->options.host;
  if (impl->options.port == 0) {
    const int port = s.bind_to_any_port(host);
    if (port <= 0) return make_error(Errc::io, "gateway: cannot listen on " + host + " (a free port)");
    impl->port = static_cast<std::uint16_t>(port);
  } else {
    if (!s.bind_to_port(host, impl->options.port))
      return make_error(Errc::io, fmt::format("gateway: cannot listen on {}:{} (in use, or not an address of this machine)",
                                              host, impl->options.port));
    impl->port = impl->options.port;
  }
  // The library listens with a backlog of 5: harnesses that open many
  // connections at once overflow it, and a connection the kernel drops
  // there reads as a reset to its client. Listening again on the same
  // socket sets the backlog (Linux).
  if (impl->listen_fd >= 0) ::listen(impl->listen_fd, SOMAXCONN);
  impl->thread = std::thread([self] {
    self->server.listen_after_bind();
    self->listened.set_value();
  });
  return std::unique_ptr<GatewayServer>(new GatewayServer(std::move(impl)));
}

GatewayServer::GatewayServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GatewayServer::~GatewayServer() {
  // As the metrics endpoint: stop() does nothing until the loop has begun.
  auto done = impl_->listened.get_future();
  do impl_->server.stop();
  while (done.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready);
  impl_->thread.join();
}

std::uint16_t GatewayServer::port() const { return impl_->port; }

GatewayServed GatewayServer::served() const {
  std::lock_guard lock(impl_->mu);
  return impl_->served;
}

}  // namespace rlx