#include "gateway/openai_request.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_int.hpp"

namespace rlx {

namespace {

using json = nlohmann::json;

Error bad_field(const std::string& field, const std::string& must, const json& got) {
  std::string shown = got.dump(-1, ' ', false, json::error_handler_t::replace);
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  return make_error(Errc::invalid_field, fmt::format("`{}` must be {}; got {}", field, must, shown));
}

// An integer field in [lo, hi], or `fallback` when absent (or null).
Result<std::int64_t> integer_field(const json& body, const char* field, std::int64_t lo, std::int64_t hi,
                                   std::int64_t fallback) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  const auto must = fmt::format("an integer {}..{}", lo, hi);
  const auto v = json_int64(*it);
  if (!v || *v < lo || *v > hi) return bad_field(field, must, *it);
  return *v;
}

Result<double> number_field(const json& body, const char* field, double lo, double hi, bool lo_open, double fallback) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_number() || it->get<double>() > hi || it->get<double>() < lo || (lo_open && it->get<double>() == lo))
    return bad_field(field, fmt::format("a number {}{}..{}", lo_open ? "above " : "", lo, hi), *it);
  return it->get<double>();
}

// Token ids: a non-empty array of integers >= 0, at most `max` of them.
Result<std::vector<std::int64_t>> token_ids(const json& v, const char* field, std::size_t max) {
  if (!v.is_array() || v.empty() || v.size() > max)
    return bad_field(field, fmt::format("an array of 1..{} token ids", max), v);
  std::vector<std::int64_t> ids;
  ids.reserve(v.size());
  for (const auto& x : v) {
    const auto id = json_int64(x);
    if (!id || *id < 0) return bad_field(field, "token ids (integers >= 0)", x);
    ids.push_back(*id);
  }
  return ids;
}

// A message's content: a string, or an array of {"type":"text","text":...}
// parts (joined), as chat harnesses send it.
Result<std::string> message_content(const json& v, std::size_t i) {
  const std::string field = fmt::format("messages[{}].content", i);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::string();  // an assistant turn that only called tools
  if (!v.is_array()) return bad_field(field, "a string or an array of text parts", v);
  std::string out;
  for (const auto& part : v) {
    auto type = part.is_object() ? part.find("type") : part.end();
    auto text = part.is_object() ? part.find("text") : part.end();
    if (type == part.end() || *type != "text" || text == part.end() || !text->is_string())
      return bad_field(field, "text parts ({\"type\":\"text\",\"text\":...})", part);
    out += text->get<std::string>();
  }
  return out;
}

Result<void> read_prompt(const json& body, const GatewayLimits& limits, CompletionRequest& r) {
  if (auto ids = body.find("prompt_token_ids"); ids != body.end() && !ids->is_null()) {
    auto parsed = token_ids(*ids, "prompt_token_ids", limits.max_prompt_tokens);
    if (!parsed) return parsed.error();
    r.prompt_ids = std::move(*parsed);
    return {};
  }
  if (r.chat) {
    auto it = body.find("messages");
    if (it == body.end()) return make_error(Errc::invalid_field, "`messages` is required");
    if (!it->is_array() || it->empty() || it->size() > limits.max_messages)
      return bad_field("messages", fmt::format("an array of 1..{} messages", limits.max_messages), *it);
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto& m = (*it)[i];
      auto role = m.is_object() ? m.find("role") : m.end();
      if (role == m.end() || !role->is_string() ||
          (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool"))
        return bad_field(fmt::format("messages[{}].role", i), "one of system, user, assistant, tool",
                         role == m.end() ? m : *role);
      auto content = message_content(m.value("content", json()), i);
      if (!content) return content.error();
      r.messages.push_back({role->get<std::string>(), std::move(*content)});
    }
    // vLLM's way to pass the template's switches; Qwen3's enable_thinking.
    if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
      if (!kw->is_object()) return bad_field("chat_template_kwargs", "an object", *kw);
      if (auto t = kw->find("enable_thinking"); t != kw->end()) {
        if (!t->is_boolean()) return bad_field("chat_template_kwargs.enable_thinking", "true or false", *t);
        r.enable_thinking = t->get<bool>();
      }
    }
    return {};
  }
  auto it = body.find("prompt");
  if (it == body.end()) return make_error(Errc::invalid_field, "`prompt` is required (text or token ids)");
  if (it->is_string()) {
    r.prompt = it->get<std::string>();
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r.prompt = (*it)[0].get<std::string>();  // a list of one prompt
  } else if (it->is_array() && !it->empty() && (*it)[0].is_number()) {
    auto parsed = token_ids(*it, "prompt", limits.max_prompt_tokens);
    if (!parsed) return parsed.error();
    r.prompt_ids = std::move(*parsed);
  } else {
    return bad_field("prompt", "a string, a list of one string, or token ids (one prompt per request)", *it);
  }
  return {};
}

// How deep arrays and objects nest, strings skipped: a body nested past a
// request's needs is refused before it is parsed (printing it back in an
// error would recurse as deep).
std::size_t nesting(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

constexpr std::size_t kMaxNesting = 32;

}  // namespace

Result<CompletionRequest> parse_completion_request(std::string_view text, bool chat, const GatewayLimits& limits) {
  if (nesting(text) > kMaxNesting)
    return make_error(Errc::malformed_message, fmt::format("the body nests arrays or objects deeper than {}", kMaxNesting));
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number out of range
    return make_error(Errc::malformed_message, fmt::format("the body is not JSON: {}", e.what()));
  }
  if (!body.is_object()) return make_error(Errc::malformed_message, "the body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad_field("model", "a string", *it);
    r.model = it->get<std::string>();
  }
  if (auto ok = read_prompt(body, limits, r); !ok) return ok.error();

  auto& s = r.sampling;
  // Chat's newer name for the same bound wins when both are given.
  const char* max_name = chat && body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  auto max_tokens = integer_field(body, max_name, 1, limits.max_tokens, s.max_tokens);
  if (!max_tokens) return max_tokens.error();
  s.max_tokens = *max_tokens;
  auto n = integer_field(body, "n", 1, limits.max_n, 1);
  if (!n) return n.error();
  s.n = *n;
  auto temperature = number_field(body, "temperature", 0.0, 2.0, false, 1.0);
  if (!temperature) return temperature.error();
  s.temperature = *temperature;
  auto top_p = number_field(body, "top_p", 0.0, 1.0, true, 1.0);
  if (!top_p) return top_p.error();
  s.top_p = *top_p;
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_unsigned()) return bad_field("seed", "an integer >= 0", *it);  // a negative one is signed
    s.seed = it->get<std::uint64_t>();
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad_field("stream", "true or false", *it);
    s.stream = it->get<bool>();
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    const std::string must = fmt::format("a non-empty string or an array of 1..{} of them", limits.max_stop);
    if (it->is_string()) {
      s.stop.push_back(it->get<std::string>());
    } else if (it->is_array() && !it->empty() && it->size() <= limits.max_stop) {
      for (const auto& x : *it) {
        if (!x.is_string()) return bad_field("stop", must, *it);
        s.stop.push_back(x.get<std::string>());
      }
    } else {
      return bad_field("stop", must, *it);
    }
    for (const auto& x : s.stop)
      if (x.empty()) return bad_field("stop", must, *it);
  }
  if (auto it = body.find("rlx_session"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty()) return bad_field("rlx_session", "a session id", *it);
    r.session = it->get<std::string>();
  }
  return r;
}

std::string chat_prompt(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "\n";
  return out + "<|assistant|>\n";
}

std::string gateway_error_json(const std::string& message, const std::string& type, const std::string& code) {
  json e = {{"error", {{"message", message}, {"type", type}, {"code", code.empty() ? json() : json(code)}}}};
  return e.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rlx
