// What a harness asks of the gateway (issue 25; docs/gateway.md): the
// bodies of OpenAI-style `POST /v1/completions` and
// `POST /v1/chat/completions`, parsed and checked into a typed request,
// each problem named (the HTTP layer answers it with 400), and the fixed
// chat template that turns messages into the policy's prompt text.
// CAF-free; JSON with nlohmann-json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace rlx {

// Bounds a request must keep (a harness cannot ask the explorers for more).
struct GatewayLimits {
  std::int64_t max_tokens = 4096;         // per completion
  std::int64_t max_n = 16;                // completions per request
  std::size_t max_stop = 4;               // stop sequences
  std::size_t max_prompt_tokens = 32768;  // prompt token ids given directly
  std::size_t max_messages = 1024;
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
};

struct SamplingRequest {
  std::int64_t max_tokens = 16;  // OpenAI's default for completions
  double temperature = 1.0;      // 0: greedy
  double top_p = 1.0;
  std::vector<std::string> stop;
  std::int64_t n = 1;
  std::optional<std::uint64_t> seed;
  bool stream = false;  // server-sent events
};

struct CompletionRequest {
  bool chat = false;  // /v1/chat/completions
  std::string model;
  // The prompt: text, or token ids (token in: no retokenization), or
  // (chat) messages rendered by chat_prompt().
  std::optional<std::string> prompt;
  std::optional<std::vector<std::int64_t>> prompt_ids;
  std::vector<ChatMessage> messages;
  bool enable_thinking = true;  // chat_template_kwargs.enable_thinking (Qwen3's template)
  SamplingRequest sampling;
  std::string session;  // "rlx_session": the session the turn belongs to ("" none)
};

// Parses a request body; a clear error (Errc::malformed_message for text
// that is not a JSON object, Errc::invalid_field naming the field and what
// it must be) otherwise. Unknown fields are ignored, as OpenAI's API does.
Result<CompletionRequest> parse_completion_request(std::string_view body, bool chat, const GatewayLimits& limits = {});

// The fixed chat template: each message as
//   "<|role|>\n" + content + "\n"
// then "<|assistant|>\n", where the completion begins. A role's marker is
// plain text, tokenized like any other (docs/gateway.md says why).
std::string chat_prompt(const std::vector<ChatMessage>& messages);

// The Qwen3 family's chat template (its tokenizer_config.json's Jinja,
// for messages of text: no tools, no tool_calls): "<|im_start|>ROLE\n"
// ... "<|im_end|>\n" per message, tool results gathered into a user turn
// as <tool_response> blocks, an assistant's <think> reasoning kept only
// after the last real user query, and the generation prompt (with an
// empty think block when `enable_thinking` is false). Held to jinja2's
// rendering of the real template (tests/data/qwen3-chat-references.json).
// REQUIRES: messages not empty.
std::string qwen3_chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                              bool enable_thinking = true);

// An OpenAI-style error body: {"error":{"message":...,"type":...,"code":...}}.
std::string gateway_error_json(const std::string& message, const std::string& type, const std::string& code = "");

}  // namespace rlx
