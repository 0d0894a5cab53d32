#include "gateway/gateway_server.hpp"

#include <charconv>
#include <cmath>
#include <future>
#include <mutex>
#include <thread>

#include <sys/socket.h>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/auth.hpp"

namespace rlx {

using json = nlohmann::json;

std::string gateway_token(const std::string& cluster_secret) {
  return secret_proof(cluster_secret, "rlx-gateway-bearer", "gateway");
}

struct GatewayServer::Impl {
  GatewayServerOptions options;
  httplib::Server server;
  std::uint16_t port = 0;
  mutable std::mutex mu;
  GatewayServed served;
  std::atomic<std::uint64_t> next_id{1};
  int listen_fd = -1;
  std::promise<void> listened;
  std::thread thread;
  void count(std::uint64_t GatewayServed::*field) {
    std::lock_guard lock(mu);
    ++(served.*field);
  }
};

namespace {

using Impl = GatewayServer::Impl;

std::string peer_of(const httplib::Request& req) {
  return req.remote_addr.empty() ? "?" : req.remote_addr + ":" + std::to_string(req.remote_port);
}

void reply_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                 const std::string& code = "") {
  res.status = status;
  res.set_content(gateway_error_json(message, type, code), "application/json");
}

// Errors of the hub and the parser, as HTTP.
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

std::vector<std::int64_t> prompt_ids(const CompletionRequest& r, const Tokenizer& tok) {
  if (r.prompt_ids) return *r.prompt_ids;
  if (r.chat) return tok.encode(chat_prompt(r.messages));
  return tok.encode(*r.prompt);
}

// The size a held-back stream may show: a stop string cannot yet begin in
// the last (longest stop - 1) characters of text not done.
std::size_t shown_length(const std::string& text, const std::vector<std::string>& stop) {
  std::size_t hold = 0;
  for (const auto& s : stop) hold = std::max(hold, s.size() - 1);
  return text.size() > hold ? text.size() - hold : 0;
}

json choice_json(const CompletionRequest& r, const Tokenizer& tok, std::size_t index, const GatewayTurn::View& v) {
  json c = {{"index", index}, {"finish_reason", v.finish_reason}, {"token_ids", v.ids}, {"versions", v.versions}};
  if (r.chat) {
    c["message"] = {{"role", "assistant"}, {"content", v.text}};
    json content = json::array();
    for (std::size_t i = 0; i < v.ids.size(); ++i) content.push_back({{"token", tok.text(v.ids[i])}, {"logprob", v.log_probs[i]}});
    c["logprobs"] = {{"content", std::move(content)}};
  } else {
    c["text"] = v.text;
    json pieces = json::array();
    for (auto id : v.ids) pieces.push_back(tok.text(id));
    c["logprobs"] = {{"tokens", std::move(pieces)}, {"token_logprobs", v.log_probs}};
  }
  return c;
}

void complete(Impl& impl, const httplib::Request& req, httplib::Response& res, bool chat) {
  if (!authorized(impl, req, res)) return;
  auto parsed = parse_completion_request(req.body, chat, impl.options.limits);
  if (!parsed) return reply_error(impl, res, parsed.error());
  auto r = std::move(*parsed);
  const auto& tok = *impl.options.tokenizer;
  const auto prompt = prompt_ids(r, tok);
  const auto max_len = impl.options.max_len;
  const auto vocab = tok.vocab();
  for (auto id : prompt)
    if (id < 0 || id >= vocab)
      return reply_error(impl, res, make_error(Errc::invalid_field, fmt::format("`prompt_token_ids`: {} is outside the vocabulary (0..{})", id, vocab - 1)));
  if (prompt.empty() || static_cast<std::int64_t>(prompt.size()) + r.sampling.max_tokens > max_len)
    return reply_error(impl, res, make_error(Errc::invalid_field,
                                             fmt::format("the prompt ({} tokens) and max_tokens ({}) must fit the policy's "
                                                         "context of {} tokens, with at least one prompt token",
                                                         prompt.size(), r.sampling.max_tokens, max_len)));
  std::uint64_t session = 0;
  if (!r.session.empty()) {
    auto s = session_number(r.session);
    if (!s) return reply_error(impl, res, s.error());
    if (r.sampling.n != 1)
      return reply_error(impl, res, make_error(Errc::invalid_field, "a session's turn takes `n` = 1"));
    session = *s;
  }
  std::vector<std::shared_ptr<GatewayTurn>> turns;
  for (std::int64_t i = 0; i < r.sampling.n; ++i) {
    auto turn = impl.options.hub->submit(TurnSpec{prompt, r.sampling.max_tokens, r.sampling.stop, session});
    if (!turn) {
      for (auto& t : turns) t->cancel();
      return reply_error(impl, res, turn.error());
    }
    turns.push_back(std::move(*turn));
  }
  const auto id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", impl.next_id++);
  const auto created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto deadline = std::chrono::steady_clock::now() + impl.options.turn_timeout;
  const char* object = chat ? "chat.completion" : "text_completion";
  if (!r.sampling.stream) {
    json choices = json::array();
    std::int64_t completion_tokens = 0;
    for (std::size_t i = 0; i < turns.size(); ++i) {
      auto v = turns[i]->wait(0, deadline);
      while (!v.done && std::chrono::steady_clock::now() < deadline) v = turns[i]->wait(v.ids.size(), deadline);
      if (!v.done) {
        for (auto& t : turns) t->cancel();
        impl.count(&GatewayServed::timeouts);
        return reply_error(res, 504, fmt::format("the completion was not done within {} s", impl.options.turn_timeout.count()),
                           "timeout_error", "timeout");
      }
      if (!v.error.empty()) {
        for (auto& t : turns) t->cancel();
        impl.count(&GatewayServed::busy);
        return reply_error(res, 503, v.error, "server_error", "unavailable");
      }
      completion_tokens += static_cast<std::int64_t>(v.ids.size());
      choices.push_back(choice_json(r, tok, i, v));
    }
    json out = {{"id", id},
                {"object", object},
                {"created", created},
                {"model", impl.options.model},
                {"choices", std::move(choices)},
                {"prompt_token_ids", prompt},
                {"usage",
                 {{"prompt_tokens", prompt.size()},
                  {"completion_tokens", completion_tokens},
                  {"total_tokens", static_cast<std::int64_t>(prompt.size()) + completion_tokens}}}};
    if (session) out["rlx_session"] = r.session;
    impl.count(&GatewayServed::completions);
    res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    return;
  }
  // Server-sent events: a chunk whenever any choice has new tokens, then
  // each choice's finish, then [DONE].
  struct Stream {
    std::vector<std::size_t> seen, shown;
    std::vector<bool> finished;
    bool first = true, done = false;
  };
  auto st = std::make_shared<Stream>();
  st->seen.assign(turns.size(), 0);
  st->shown.assign(turns.size(), 0);
  st->finished.assign(turns.size(), false);
  impl.count(&GatewayServed::completions);
  auto* self = &impl;
  res.set_header("Cache-Control", "no-store");
  res.set_chunked_content_provider(
      "text/event-stream",
      [self, r, turns, st, id, created, deadline, object = std::string(chat ? "chat.completion.chunk" : "text_completion"),
       prompt](std::size_t, httplib::DataSink& sink) {
        const auto& tok = *self->options.tokenizer;
        auto send = [&](const json& j) {
          const auto line = "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        auto cut = [&] {
          for (auto& t : turns) t->cancel();
          self->count(&GatewayServed::streams_cut);
          return false;
        };
        if (st->done) return false;
        json choices = json::array();
        bool all = true;
        for (std::size_t i = 0; i < turns.size(); ++i) {
          if (st->finished[i]) continue;
          const auto v = turns[i]->wait(st->seen[i], std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
          if (!v.error.empty()) {
            send(json{{"error", {{"message", v.error}, {"type", "server_error"}}}});
            return cut();
          }
          const std::string text = v.done ? v.text : tok.decode(v.ids);
          const auto upto = v.done ? text.size() : std::min(text.size(), shown_length(text, r.sampling.stop));
          json c = {{"index", i}};
          const auto delta = upto > st->shown[i] ? text.substr(st->shown[i], upto - st->shown[i]) : std::string();
          const std::vector<std::int64_t> ids(v.ids.begin() + static_cast<std::ptrdiff_t>(st->seen[i]), v.ids.end());
          const std::vector<float> lps(v.log_probs.begin() + static_cast<std::ptrdiff_t>(st->seen[i]), v.log_probs.end());
          const std::vector<std::int64_t> vers(v.versions.begin() + static_cast<std::ptrdiff_t>(st->seen[i]), v.versions.end());
          if (r.chat) {
            c["delta"] = st->first ? json{{"role", "assistant"}, {"content", delta}} : json{{"content", delta}};
          } else {
            c["text"] = delta;
          }
          c["token_ids"] = ids;
          c["token_logprobs"] = lps;
          c["versions"] = vers;
          c["finish_reason"] = v.done ? json(v.finish_reason) : json(nullptr);
          st->seen[i] = v.ids.size();
          st->shown[i] = std::max(st->shown[i], upto);
          st->finished[i] = v.done;
          all = all && v.done;
          if (!ids.empty() || v.done) choices.push_back(std::move(c));
        }
        if (!choices.empty()) {
          json chunk = {{"id", id}, {"object", object}, {"created", created}, {"model", self->options.model}, {"choices", choices}};
          if (st->first) chunk["prompt_token_ids"] = prompt;
          st->first = false;
          if (!send(chunk)) return cut();
        }
        for (std::size_t i = 0; i < turns.size(); ++i) all = all && st->finished[i];
        if (all) {
          const std::string end = "data: [DONE]\n\n";
          sink.write(end.data(), end.size());
          st->done = true;
          sink.done();
          return true;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
          send(json{{"error", {{"message", "the completion was not done in time"}, {"type", "timeout_error"}}}});
          self->count(&GatewayServed::timeouts);
          return cut();
        }
        return true;
      },
      [turns](bool success) {
        if (!success)
          for (auto& t : turns) t->cancel();
      });
}

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

// POST /rlx/v1/tokenize {"text": ...}: the policy's token ids for text
// (a harness appends tool output to a session's ids without retokenizing
// what was sampled).
void tokenize(Impl& impl, const httplib::Request& req, httplib::Response& res) {
  if (!authorized(impl, req, res)) return;
  auto body = json_object_body(req.body);
  if (!body) return reply_error(impl, res, body.error());
  auto it = body->find("text");
  if (it == body->end() || !it->is_string())
    return reply_error(impl, res, make_error(Errc::invalid_field, "`text` must be a string"));
  const auto ids = impl.options.tokenizer->encode(it->get_ref<const std::string&>());
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
