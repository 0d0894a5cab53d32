// qwen3_chat_prompt: Qwen3's chat template (tokenizer_config.json), step by
// step as its Jinja reads, for messages of text.
#include <string_view>

#include "core/error.hpp"
#include "gateway/openai_request.hpp"

namespace rlx {

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }
std::string lstrip_newlines(std::string_view s) { return std::string(s.substr(std::min(s.find_first_not_of('\n'), s.size()))); }
std::string rstrip_newlines(std::string_view s) {
  const auto end = s.find_last_not_of('\n');
  return end == std::string_view::npos ? std::string() : std::string(s.substr(0, end + 1));
}

}  // namespace

std::string qwen3_chat_prompt(const std::vector<ChatMessage>& m, bool add_generation_prompt, bool enable_thinking) {
  RLX_REQUIRE(!m.empty());
  const auto n = static_cast<std::int64_t>(m.size());
  std::string out;
  if (m[0].role == "system") out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
  // The last user message that is a query, not tool results a harness sent as a user turn.
  std::int64_t last_query = n - 1;
  for (std::int64_t i = n - 1; i >= 0; --i) {
    const auto& c = m[static_cast<std::size_t>(i)].content;
    if (m[static_cast<std::size_t>(i)].role == "user" && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& msg = m[static_cast<std::size_t>(i)];
    if (msg.role == "user" || (msg.role == "system" && i > 0)) {
      out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      std::string content = msg.content, reasoning;
      if (const auto close = msg.content.find("</think>"); close != std::string::npos) {
        content = lstrip_newlines(std::string_view(msg.content).substr(msg.content.rfind("</think>") + 8));
        const std::string before = rstrip_newlines(std::string_view(msg.content).substr(0, close));
        const auto open = before.rfind("<think>");
        reasoning = lstrip_newlines(open == std::string::npos ? std::string_view(before) : std::string_view(before).substr(open + 7));
      }
      if (i > last_query && (i == n - 1 || !reasoning.empty()))
        out += "<|im_start|>assistant\n<think>\n" + lstrip_newlines(rstrip_newlines(reasoning)) + "\n</think>\n\n" +
               lstrip_newlines(content);
      else
        out += "<|im_start|>assistant\n" + content;
      out += "<|im_end|>\n";
    } else if (msg.role == "tool") {
      if (i == 0 || m[static_cast<std::size_t>(i - 1)].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + msg.content + "\n</tool_response>";
      if (i == n - 1 || m[static_cast<std::size_t>(i + 1)].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace rlx
