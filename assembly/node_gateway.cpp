#include "assembly/node_gateway.hpp"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/auth.hpp"
#include "core/files.hpp"
#include "envs/tokens/tokenizer.hpp"

namespace rlx {

namespace {

Result<std::string> gateway_bearer(const GatewayConfig& g, const std::string& secret) {
  if (g.token_file.empty()) return secret.empty() ? random_secret() : gateway_token(secret);
  auto text = read_text_file(g.token_file);
  if (!text) return make_error(Errc::config_range, "[gateway] token_file: " + text.error().message);
  auto token = *text;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 16 || token.find_first_of(" \t\r\n") != std::string::npos)
    return make_error(Errc::config_range, "[gateway] token_file " + g.token_file +
                                              ": the token must be one line of at least 16 characters, no spaces");
  return token;
}

}  // namespace

NodeGateway::~NodeGateway() {
  if (hub) hub->close("the run ended");
  server.reset();
}

std::string NodeGateway::summary() const {
  const auto c = hub->counts();
  const auto s = server->served();
  return fmt::format("gateway: {} completions, {} turns ({} failed, {} cancelled); sessions {} opened, {} rewarded, "
                     "{} failed in the harness, {} lost; {} prefix mismatches; {} groups trained, {} dropped; {} "
                     "unauthorized, {} bad requests, {} busy, {} timeouts",
                     s.completions, c.turns, c.turns_failed, c.turns_cancelled, c.sessions_opened, c.sessions_rewarded,
                     c.sessions_failed, c.sessions_lost, c.prefix_mismatch, c.groups_ready, c.groups_dropped,
                     s.unauthorized, s.bad_request, s.busy, s.timeouts);
}

std::string gateway_file_name(const std::string& node) { return node.empty() ? "gateway.json" : "gateway-" + node + ".json"; }

Result<std::unique_ptr<NodeGateway>> start_node_gateway(const ClusterConfig& config, const std::string& secret,
                                                        std::shared_ptr<StrangerWatch> strangers, const Logger& log,
                                                        const std::string& node) {
  if (config.run.env != "tokens:gateway") return std::unique_ptr<NodeGateway>();
  const auto& g = config.gateway;
  auto token = gateway_bearer(g, secret);
  if (!token) return token.error();
  GatewayHubOptions ho;
  ho.group_size = config.tokens.group_size;
  ho.session_timeout = std::chrono::seconds(static_cast<std::int64_t>(g.session_timeout_s));
  ho.max_queued_turns = static_cast<std::size_t>(g.max_queued_turns);
  auto out = std::make_unique<NodeGateway>();
  out->hub = std::make_shared<GatewayHub>(ho);
  out->log = child_logger(log, "gateway");
  GatewayServerOptions so;
  so.host = g.host;
  so.port = static_cast<std::uint16_t>(g.port);
  so.token = *token;
  so.hub = out->hub;
  so.tokenizer = run_tokenizer(config.tokens.tokenizer);
  so.model = config.run.name;
  so.max_len = config.policy.max_len;
  so.turn_timeout = std::chrono::seconds(static_cast<std::int64_t>(g.turn_timeout_s));
  so.threads = static_cast<std::size_t>(g.threads);
  so.watch = std::move(strangers);
  so.log = out->log;
  auto server = GatewayServer::start(so);
  if (!server) return server.error();
  out->server = std::move(*server);
  out->url = fmt::format("http://{}:{}", g.host, out->server->port());
  std::error_code ec;
  std::filesystem::create_directories(config.run.log_dir, ec);
  const nlohmann::json about = {{"url", out->url}, {"token", *token}, {"model", config.run.name},
                                {"group_size", config.tokens.group_size}, {"max_len", config.policy.max_len},
                                {"eos_token_id", so.tokenizer->eos()}};
  const auto file = std::filesystem::path(config.run.log_dir) / gateway_file_name(node);
  if (auto w = write_text_atomically(file, about.dump(2) + "\n", 0600); !w) return w.error();
  out->log->info("serving harnesses on {} (OpenAI-style /v1/completions; sessions at /rlx/v1/sessions); its URL and "
                 "bearer token are in {}",
                 out->url, file.string());
  return out;
}

}  // namespace rlx
