// POST /v1/completions and /v1/chat/completions: the request read, its
// turns queued on the hub, and the answer as one JSON body or as
// server-sent events while the explorers decode.
#include <fmt/format.h>

#include "gateway/gateway_server_impl.hpp"

namespace rlx::gateway_http {

namespace {

// A policy with a tokenizer.json speaks its family's template (Qwen3's),
// whose markers are special tokens; prompt text may name specials too
// (as vLLM encodes it). The fixed template's markers are plain text.
std::vector<std::int64_t> prompt_ids(const CompletionRequest& r, const Tokenizer& tok) {
  if (r.prompt_ids) return *r.prompt_ids;
  const bool hf = tok.hugging_face() != nullptr;
  if (r.chat) return hf ? tok.encode(qwen3_chat_prompt(r.messages, true, r.enable_thinking), true) : tok.encode(chat_prompt(r.messages));
  return tok.encode(*r.prompt, hf);
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

}  // namespace

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

}  // namespace rlx::gateway_http
