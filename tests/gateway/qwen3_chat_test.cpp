// Qwen3's chat template (gateway/qwen3_chat.cpp) against jinja2's rendering
// of the real template text from the tokenizer_config.json Qwen3 ships
// (tests/data/qwen3-chat-references.json, made by
// tools/chat-template-references.py): system prompts, multi-turn chats,
// runs of tool results, reasoning kept or dropped by where the last query
// is, the generation prompt with and without thinking.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "gateway/openai_request.hpp"

using namespace rlx;

TEST_CASE("Qwen3's chat template renders every reference conversation exactly as jinja2 renders the real template",
          "[gateway][hf]") {
  std::ifstream in(std::string(RLX_SOURCE_DIR) + "/tests/data/qwen3-chat-references.json");
  const auto refs = nlohmann::json::parse(in);
  REQUIRE(refs["cases"].size() >= 13);
  for (const auto& c : refs["cases"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    const auto want = c["text"].get<std::string>();
    INFO(c["messages"].dump());
    CHECK(qwen3_chat_prompt(messages, c["add_generation_prompt"].get<bool>(), c["enable_thinking"].get<bool>()) == want);
  }
}
