// The gateway's HTTP endpoint (gateway/gateway_server.hpp) in front of a
// real policy decoding on GatewayRows (a thread plays the explorer):
// OpenAI-style completions and chat completions carry token ids,
// log-probabilities and versions; streaming gives the same tokens as
// server-sent events; a session played over HTTP becomes the trajectory of
// exactly the tokens sent back; strangers (no token, garbage, half
// requests, oversized bodies, a flood of idle connections) are refused and
// counted while a real client is still served; over a tokenizer.json the
// gateway speaks Qwen3's chat template with its special tokens.
#include "tests/torch_catch.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "envs/tokens/hf_tokenizer.hpp"
#include "explorers/gateway_rows.hpp"
#include "gateway/gateway_server.hpp"
#include "tests/helpers.hpp"
#include "tests/policy/transformer_fixture.hpp"

using namespace rlx;
using json = nlohmann::json;

namespace {

// A gateway over a small policy, its decoding on a thread of its own.
struct ServedPolicy {
  std::shared_ptr<const Tokenizer> chars;  // the vocabulary (characters unless the test gives one)
  MoETransformer model;
  std::shared_ptr<GatewayHub> hub = std::make_shared<GatewayHub>();
  std::shared_ptr<StrangerWatch> watch = std::make_shared<StrangerWatch>(null_logger());
  std::unique_ptr<GatewayServer> server;
  std::atomic<bool> stop{false};
  std::thread decoding;
  std::string token = gateway_token("a cluster secret of some length");

  explicit ServedPolicy(std::chrono::seconds io_timeout = std::chrono::seconds(10), std::size_t threads = 16,
                        std::shared_ptr<const Tokenizer> tokenizer = Tokenizer::characters())
      : chars(std::move(tokenizer)), model(make_seeded_transformer(test::small_transformer(256, chars->vocab()), 21)) {
    GatewayServerOptions o;
    o.token = token;
    o.hub = hub;
    o.tokenizer = chars;
    o.max_len = 256;
    o.io_timeout = io_timeout;
    o.threads = threads;
    o.max_body_bytes = 64 * 1024;
    o.watch = watch;
    auto s = GatewayServer::start(o);
    REQUIRE(s.ok());
    server = std::move(*s);
    decoding = std::thread([this] {
      GatewayRows rows(model, 4, SampleOptions{}, chars, hub, 16);
      std::mt19937_64 rng(8);
      while (!stop) rows.step(rng, 3, std::chrono::milliseconds(20));
    });
  }
  ~ServedPolicy() {
    hub->close("the test is over");
    stop = true;
    decoding.join();
    server.reset();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_bearer_token_auth(token.c_str());
    c.set_read_timeout(60, 0);
    return c;
  }
};

json post(const ServedPolicy& p, const std::string& path, const json& body, int want = 200) {
  auto c = p.client();
  auto res = c.Post(path.c_str(), body.dump(), "application/json");
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == want);
  return json::parse(res->body);
}

}  // namespace

TEST_CASE("the gateway answers completions and chat completions with each token's id, log-probability and version, "
          "and streams the same tokens as server-sent events",
          "[gateway][net]") {
  ServedPolicy p;
  const auto models = p.client().Get("/v1/models");
  REQUIRE(models);
  CHECK(json::parse(models->body)["data"][0]["id"] == "rlx-policy");

  const auto out = post(p, "/v1/completions", {{"model", "rlx-policy"}, {"prompt", "def f(x):"}, {"max_tokens", 12}});
  CHECK(out["object"] == "text_completion");
  CHECK(out["prompt_token_ids"].get<std::vector<std::int64_t>>() == p.chars->encode("def f(x):"));
  const auto& c = out["choices"][0];
  const auto ids = c["token_ids"].get<std::vector<std::int64_t>>();
  REQUIRE_FALSE(ids.empty());
  CHECK(ids.size() <= 12);
  CHECK(c["logprobs"]["token_logprobs"].size() == ids.size());
  for (const auto& lp : c["logprobs"]["token_logprobs"]) CHECK(lp.get<double>() <= 0.0);
  CHECK(c["versions"].get<std::vector<std::int64_t>>() == std::vector<std::int64_t>(ids.size(), 3));
  CHECK(c["text"] == p.chars->decode(ids));
  CHECK(c["finish_reason"] == (ids.back() == Tokenizer::characters()->eos() ? "stop" : "length"));
  CHECK(out["usage"]["completion_tokens"] == ids.size());

  const std::vector<ChatMessage> messages = {{"system", "You fix code."}, {"user", "Fix f."}};
  const auto chat = post(p, "/v1/chat/completions",
                         {{"messages", {{{"role", "system"}, {"content", "You fix code."}}, {{"role", "user"}, {"content", "Fix f."}}}},
                          {"max_tokens", 6},
                          {"n", 3}});
  CHECK(chat["object"] == "chat.completion");
  CHECK(chat["prompt_token_ids"].get<std::vector<std::int64_t>>() == p.chars->encode(chat_prompt(messages)));
  REQUIRE(chat["choices"].size() == 3);
  for (const auto& ch : chat["choices"]) {
    CHECK(ch["message"]["role"] == "assistant");
    CHECK(ch["logprobs"]["content"].size() == ch["token_ids"].size());
  }

  // Streaming: the chunks' tokens are a whole completion, in order, then [DONE].
  auto cl = p.client();
  auto streamed = cl.Post("/v1/completions", json{{"prompt", "abc"}, {"max_tokens", 20}, {"stream", true}}.dump(), "application/json");
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  CHECK(streamed->get_header_value("Content-Type").find("text/event-stream") == 0);
  std::vector<std::int64_t> got;
  std::string text, finish;
  std::size_t chunks = 0;
  bool done = false;
  std::istringstream lines(streamed->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    if (line == "data: [DONE]") {
      done = true;
      continue;
    }
    const auto j = json::parse(line.substr(6));
    ++chunks;
    for (const auto& ch : j["choices"]) {
      for (auto id : ch["token_ids"]) got.push_back(id.get<std::int64_t>());
      text += ch["text"].get<std::string>();
      if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    }
  }
  CHECK(done);
  REQUIRE_FALSE(got.empty());
  CHECK(chunks >= 1);  // (how many depends on how fast the policy decodes against the stream's polls)
  CHECK(text == p.chars->decode(got));
  CHECK_FALSE(finish.empty());
  CHECK(p.server->served().completions == 3);
}

TEST_CASE("a session played over HTTP, token ids sent back each turn, becomes one trajectory of exactly the tokens "
          "sampled and sent, rewarded",
          "[gateway][net]") {
  ServedPolicy p;
  const auto opened = post(p, "/rlx/v1/sessions", {{"task_id", "fix-f"}, {"metadata", {{"harness", "test"}}}});
  const std::string sid = opened["session_id"];
  std::vector<std::int64_t> context = p.chars->encode("<|user|>\nfix f\n<|assistant|>\n");
  std::vector<std::int64_t> policy_tokens;
  for (int turn = 0; turn < 3; ++turn) {
    const auto out = post(p, "/v1/completions", {{"prompt_token_ids", context}, {"max_tokens", 10}, {"rlx_session", sid}});
    CHECK(out["rlx_session"] == sid);
    const auto ids = out["choices"][0]["token_ids"].get<std::vector<std::int64_t>>();
    context.insert(context.end(), ids.begin(), ids.end());
    policy_tokens.insert(policy_tokens.end(), ids.begin(), ids.end());
    const auto tool = p.chars->encode("\n<|tool|>\n2 passed\n<|assistant|>\n");
    if (turn < 2) context.insert(context.end(), tool.begin(), tool.end());
  }
  // A second turn at once is refused while one is under way; unknown sessions are 404.
  post(p, "/rlx/v1/sessions/999/reward", {{"reward", 1.0}}, 404);
  post(p, "/rlx/v1/sessions/" + sid + "/reward", {{"reward", "high"}}, 400);
  post(p, "/rlx/v1/sessions/" + sid + "/reward", {{"reward", 0.5}});
  post(p, "/rlx/v1/sessions/" + sid + "/reward", {{"reward", 0.5}}, 404);  // closed
  const auto rows = p.hub->take_groups(1, 4);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].task_id == "fix-f");
  CHECK(rows[0].reward == 0.5F);
  CHECK(rows[0].trace.tokens == context);
  std::vector<std::int64_t> mine;
  for (std::size_t i = 0; i < context.size(); ++i)
    if (rows[0].trace.generated[i]) mine.push_back(rows[0].trace.tokens[i]);
  CHECK(mine == policy_tokens);
  CHECK(p.hub->counts().prefix_mismatch == 0);
}

TEST_CASE("strangers at the gateway are refused and counted: no token, a wrong one, garbage, malformed JSON, an "
          "oversized body, half requests and a flood of idle connections, while a real client is served",
          "[gateway][net]") {
  ServedPolicy p(std::chrono::seconds(1), 8);
  const auto port = p.server->port();
  httplib::Client bare("127.0.0.1", port);
  auto none = bare.Post("/v1/completions", R"({"prompt":"a"})", "application/json");
  REQUIRE(none);
  CHECK(none->status == 401);
  CHECK(json::parse(none->body)["error"]["type"] == "authentication_error");
  bare.set_bearer_token_auth("not-the-token");
  auto wrong = bare.Get("/v1/models");
  REQUIRE(wrong);
  CHECK(wrong->status == 401);

  auto c = p.client();
  auto bad_json = c.Post("/v1/completions", "{\"prompt\": ", "application/json");
  REQUIRE(bad_json);
  CHECK(bad_json->status == 400);
  auto bad_field = c.Post("/v1/completions", R"({"prompt":"a","n":17})", "application/json");
  REQUIRE(bad_field);
  CHECK(bad_field->status == 400);
  CHECK(json::parse(bad_field->body)["error"]["message"].get<std::string>().find("`n`") != std::string::npos);
  auto too_long = c.Post("/v1/completions", json{{"prompt", std::string(250, 'x')}, {"max_tokens", 10}}.dump(), "application/json");
  REQUIRE(too_long);
  CHECK(too_long->status == 400);
  auto huge = c.Post("/v1/completions", json{{"prompt", std::string(100 * 1024, 'x')}}.dump(), "application/json");
  REQUIRE(huge);
  CHECK(huge->status == 413);
  CHECK(c.Get("/v2/nothing")->status == 404);

  test::send_garbage(port, 4096);
  // Half requests: a request line and no more; headers promising a body that never comes.
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    const int fd = test::connect_local(port);
    const std::string half = i % 2 ? "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\nAuthorization: Bearer " + p.token + "\r\n\r\n{"
                                   : "GET /v1/mod";
    ::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
    held.push_back(fd);
  }
  // A flood of idle connections, more than the server has threads.
  for (int i = 0; i < 64; ++i) held.push_back(test::connect_local(port));
  const auto served = post(p, "/v1/completions", {{"prompt", "ok"}, {"max_tokens", 4}});
  CHECK_FALSE(served["choices"][0]["token_ids"].empty());
  // The half requests were cut off at the read timeout, not held open.
  for (int i = 0; i < 4; ++i) CHECK(test::closed_by_peer(held[static_cast<std::size_t>(i)]));
  for (std::size_t i = 4; i < held.size(); ++i) ::close(held[i]);

  const auto s = p.server->served();
  CHECK(s.unauthorized == 2);
  CHECK(s.bad_request >= 3);  // malformed JSON, a bad field, a prompt that cannot fit (and the garbage)
  CHECK(s.too_large == 1);
  CHECK(s.not_found == 1);
  CHECK(s.completions == 1);
  const auto strangers = p.watch->by_port();
  REQUIRE(strangers.count("gateway") == 1);
  CHECK(strangers.at("gateway")[static_cast<std::size_t>(Stranger::unproven)] == 2);
}

TEST_CASE("sixty-four harnesses connecting at once are all served: none is dropped at the listen backlog",
          "[gateway][net]") {
  ServedPolicy p(std::chrono::seconds(10), 128);
  std::atomic<int> opened{0};
  std::vector<std::thread> harnesses;
  std::promise<void> go;
  auto start = go.get_future().share();
  for (int i = 0; i < 64; ++i)
    harnesses.emplace_back([&, start] {
      start.wait();
      httplib::Client c("127.0.0.1", p.server->port());  // a connection of its own
      c.set_bearer_token_auth(p.token.c_str());
      auto r = c.Post("/rlx/v1/sessions", R"({"task_id":"t"})", "application/json");
      if (r && r->status == 200) ++opened;
    });
  go.set_value();
  for (auto& h : harnesses) h.join();
  CHECK(opened == 64);
  CHECK(p.hub->open_sessions() == 64);
}

TEST_CASE("a gateway over a tokenizer.json renders Qwen3's chat template with its special tokens and keeps them text in "
          "tokenize unless asked",
          "[gateway][net][hf]") {
  auto tok = Tokenizer::load(std::string(RLX_SOURCE_DIR) + "/examples/hf-moe-tokenizer.json");
  REQUIRE(tok.ok());
  ServedPolicy p(std::chrono::seconds(10), 16, *tok);
  const auto im_start = *(*tok)->hugging_face()->id_of("<|im_start|>");
  const std::vector<ChatMessage> messages = {{"system", "You fix code."}, {"user", "Fix f."}};
  const json body_messages = {{{"role", "system"}, {"content", "You fix code."}}, {{"role", "user"}, {"content", "Fix f."}}};
  for (const bool thinking : {true, false}) {
    const auto chat = post(p, "/v1/chat/completions",
                           {{"messages", body_messages}, {"max_tokens", 4}, {"chat_template_kwargs", {{"enable_thinking", thinking}}}});
    const auto prompt = chat["prompt_token_ids"].get<std::vector<std::int64_t>>();
    CHECK(prompt == (*tok)->encode(qwen3_chat_prompt(messages, true, thinking), true));
    CHECK(prompt.front() == im_start);
    const auto ids = chat["choices"][0]["token_ids"].get<std::vector<std::int64_t>>();
    REQUIRE_FALSE(ids.empty());
    CHECK(chat["choices"][0]["finish_reason"] == (ids.back() == (*tok)->eos() ? "stop" : "length"));
  }
  post(p, "/v1/chat/completions", {{"messages", body_messages}, {"chat_template_kwargs", {{"enable_thinking", "no"}}}}, 400);
  const auto text = post(p, "/v1/completions", {{"prompt", "<|im_start|>user"}, {"max_tokens", 2}});
  CHECK(text["prompt_token_ids"][0] == im_start);
  // A tool's output naming a special token stays text; a harness's own markers ask.
  const auto plain = post(p, "/rlx/v1/tokenize", {{"text", "<|im_end|>"}});
  CHECK(plain["token_ids"].get<std::vector<std::int64_t>>() == (*tok)->encode("<|im_end|>"));
  CHECK(plain["token_ids"].size() > 1);
  const auto special = post(p, "/rlx/v1/tokenize", {{"text", "<|im_end|>"}, {"special_tokens", true}});
  CHECK(special["token_ids"].get<std::vector<std::int64_t>>() == std::vector<std::int64_t>{(*tok)->eos()});
  post(p, "/rlx/v1/tokenize", {{"text", "x"}, {"special_tokens", "yes"}}, 400);
}
