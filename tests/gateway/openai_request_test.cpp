// The gateway's request parsing (issue 25): what harnesses send, read into
// a typed request; every malformed body answered with what was wrong.
#include <catch2/catch.hpp>

#include "gateway/openai_request.hpp"

using namespace rlx;

namespace {

CompletionRequest gateway_parsed(const std::string& body, bool chat) {
  auto r = parse_completion_request(body, chat);
  INFO(body);
  if (!r) FAIL(r.error().message);
  return *r;
}

// The error a body gets: its code and message.
Error gateway_refusal(const std::string& body, bool chat, const GatewayLimits& limits = {}) {
  auto r = parse_completion_request(body, chat, limits);
  INFO(body);
  REQUIRE_FALSE(r.ok());
  return r.error();
}

}  // namespace

TEST_CASE("a completions request is read with every sampling field harnesses send, and defaults where absent",
          "[gateway]") {
  const auto r = gateway_parsed(R"({"model":"rlx","prompt":"def f(x):","max_tokens":64,"temperature":0.7,
      "top_p":0.9,"stop":["\n\n","```"],"n":4,"seed":7,"stream":true,"rlx_session":"s-1","logit_bias":{}})", false);
  CHECK_FALSE(r.chat);
  CHECK(r.model == "rlx");
  REQUIRE(r.prompt);
  CHECK(*r.prompt == "def f(x):");
  CHECK_FALSE(r.prompt_ids);
  CHECK(r.sampling.max_tokens == 64);
  CHECK(r.sampling.temperature == 0.7);
  CHECK(r.sampling.top_p == 0.9);
  CHECK(r.sampling.stop == std::vector<std::string>{"\n\n", "```"});
  CHECK(r.sampling.n == 4);
  REQUIRE(r.sampling.seed);
  CHECK(*r.sampling.seed == 7);
  CHECK(r.sampling.stream);
  CHECK(r.session == "s-1");  // unknown fields (logit_bias) are ignored

  const auto d = gateway_parsed(R"({"prompt":["only one"]})", false);
  CHECK(*d.prompt == "only one");
  CHECK(d.sampling.max_tokens == 16);
  CHECK(d.sampling.temperature == 1.0);
  CHECK(d.sampling.n == 1);
  CHECK_FALSE(d.sampling.seed);
  CHECK_FALSE(d.sampling.stream);
  CHECK(d.sampling.stop.empty());
}

TEST_CASE("token ids come in as the prompt itself, never retokenized", "[gateway]") {
  const auto r = gateway_parsed(R"({"prompt":[2,17,40,1],"max_tokens":8})", false);
  CHECK_FALSE(r.prompt);
  REQUIRE(r.prompt_ids);
  CHECK(*r.prompt_ids == std::vector<std::int64_t>{2, 17, 40, 1});
  // Chat: prompt_token_ids stand for the whole rendered conversation.
  const auto c = gateway_parsed(R"({"messages":[{"role":"user","content":"x"}],"prompt_token_ids":[5,6]})", true);
  REQUIRE(c.prompt_ids);
  CHECK(*c.prompt_ids == std::vector<std::int64_t>{5, 6});
}

TEST_CASE("chat messages are read, text parts joined, and rendered with the fixed template", "[gateway]") {
  const auto r = gateway_parsed(R"({"messages":[{"role":"system","content":"You fix code."},
      {"role":"user","content":[{"type":"text","text":"Fix "},{"type":"text","text":"f."}]},
      {"role":"assistant","content":null},{"role":"tool","content":"3 passed"}],"max_completion_tokens":5,
      "max_tokens":9})", true);
  REQUIRE(r.messages.size() == 4);
  CHECK(r.messages[1].content == "Fix f.");
  CHECK(r.messages[2].content.empty());
  CHECK(r.sampling.max_tokens == 5);  // the newer name wins
  CHECK(chat_prompt(r.messages) ==
        "<|system|>\nYou fix code.\n<|user|>\nFix f.\n<|assistant|>\n\n<|tool|>\n3 passed\n<|assistant|>\n");
}

TEST_CASE("a malformed request is refused with the field and what it must be", "[gateway]") {
  CHECK(gateway_refusal("{\"prompt\": \"x\"", false).code == Errc::malformed_message);
  CHECK(gateway_refusal("[1,2]", false).message == "the body must be a JSON object");
  CHECK(gateway_refusal("\xff\xfe", false).code == Errc::malformed_message);
  CHECK(gateway_refusal("{\"prompt\":\"x\",\"n\":4e999}", false).code == Errc::malformed_message);  // out of range
  CHECK(gateway_refusal("{\"model\":" + std::string(40, '[') + std::string(40, ']') + "}", false).message ==
        "the body nests arrays or objects deeper than 32");
  CHECK(gateway_parsed("{\"prompt\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"\"}", false).prompt.has_value());  // in a string
  CHECK(gateway_refusal("{}", false).message == "`prompt` is required (text or token ids)");
  CHECK(gateway_refusal("{}", true).message == "`messages` is required");
  const struct {
    const char* body;
    bool chat;
    const char* says;
  } cases[] = {
      {R"({"prompt":"x","max_tokens":0})", false, "`max_tokens` must be an integer 1..4096; got 0"},
      {R"({"prompt":"x","max_tokens":1e9})", false, "`max_tokens` must be an integer 1..4096"},
      {R"({"prompt":"x","max_tokens":"64"})", false, "`max_tokens` must be an integer 1..4096; got \"64\""},
      {R"({"prompt":"x","max_tokens":18446744073709551615})", false, "`max_tokens` must be an integer"},
      {R"({"prompt":"x","temperature":-0.1})", false, "`temperature` must be a number 0..2"},
      {R"({"prompt":"x","top_p":0})", false, "`top_p` must be a number above 0..1"},
      {R"({"prompt":"x","n":17})", false, "`n` must be an integer 1..16"},
      {R"({"prompt":"x","seed":-1})", false, "`seed` must be an integer >= 0"},
      {R"({"prompt":"x","stream":"yes"})", false, "`stream` must be true or false"},
      {R"({"prompt":"x","stop":["a","b","c","d","e"]})", false, "`stop` must be a non-empty string or an array"},
      {R"({"prompt":"x","stop":[""]})", false, "`stop` must be a non-empty string"},
      {R"({"prompt":"x","model":3})", false, "`model` must be a string"},
      {R"({"prompt":["a","b"]})", false, "`prompt` must be a string, a list of one string, or token ids"},
      {R"({"prompt":[1,-2]})", false, "`prompt` must be token ids (integers >= 0); got -2"},
      {R"({"prompt":[1,"2"]})", false, "`prompt` must be token ids"},
      {R"({"prompt":[1,2e57]})", false, "`prompt` must be token ids (integers >= 0); got 2e+57"},
      {R"({"prompt":[]})", false, "`prompt` must be a string, a list of one string, or token ids"},
      {R"({"prompt":"x","rlx_session":""})", false, "`rlx_session` must be a session id"},
      {R"({"messages":[]})", true, "`messages` must be an array of 1..1024 messages"},
      {R"({"messages":[{"role":"root","content":"x"}]})", true,
       "`messages[0].role` must be one of system, user, assistant, tool; got \"root\""},
      {R"({"messages":[{"content":"x"}]})", true, "`messages[0].role` must be one of"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", true,
       "`messages[0].content` must be text parts"},
      {R"({"messages":[{"role":"user","content":7}]})", true,
       "`messages[0].content` must be a string or an array of text parts; got 7"},
  };
  for (const auto& c : cases) {
    const auto e = gateway_refusal(c.body, c.chat);
    INFO(e.message);
    CHECK(e.code == Errc::invalid_field);
    CHECK(e.message.rfind(c.says, 0) == 0);
  }
  GatewayLimits small;
  small.max_prompt_tokens = 2;
  CHECK(gateway_refusal(R"({"prompt":[1,2,3]})", false, small).message.rfind("`prompt` must be an array of 1..2", 0) ==
        0);
  // A long value is shown cut, never whole.
  const auto long_model = gateway_refusal("{\"prompt\":\"x\",\"model\":[\"" + std::string(500, 'm') + "\"]}", false);
  CHECK(long_model.message.size() < 120);
}

TEST_CASE("an error body has OpenAI's shape, whatever bytes its message holds", "[gateway]") {
  CHECK(gateway_error_json("`n` must be an integer 1..16; got 17", "invalid_request_error", "n") ==
        R"({"error":{"code":"n","message":"`n` must be an integer 1..16; got 17","type":"invalid_request_error"}})");
  CHECK(gateway_error_json("bad \xff", "invalid_request_error") ==
        "{\"error\":{\"code\":null,\"message\":\"bad \xef\xbf\xbd\",\"type\":\"invalid_request_error\"}}");
}
