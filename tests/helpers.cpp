#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include "tests/helpers.hpp"

#include <arpa/inet.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>

#include "tests/torch_catch.hpp"

#include "policy/moe_mlp_policy.hpp"
#include "tools/embedded_config.hpp"

namespace rlx::test {

WeightSetData make_weight_set(std::uint64_t version, std::size_t floats) {
  WeightSetData w;
  w.version = version;
  w.policy_kind = "moe_mlp";
  NamedTensor t{"w", {static_cast<std::int64_t>(floats)}, {}};
  for (std::size_t i = 0; i < floats; ++i) t.values.push_back(static_cast<float>(i + version));
  w.tensors.push_back(t);
  w.checksum = w.compute_checksum();
  return w;
}

WeightSetData trained_weight_set(std::uint64_t version, std::size_t floats, int steps, float lr) {
  std::mt19937 start(7);
  std::normal_distribution<float> weight(0.0f, 0.05f);
  std::vector<float> values(floats);
  for (auto& v : values) v = weight(start);
  std::mt19937 grads(11);
  std::uniform_real_distribution<float> step(-1.0f, 1.0f);
  for (int s = 0; s < steps; ++s)
    for (auto& v : values) v += lr * step(grads);
  WeightSetData w;
  w.version = version;
  w.policy_kind = "moe_mlp";
  w.tensors.push_back(NamedTensor{"w", {static_cast<std::int64_t>(floats)}, std::move(values)});
  w.checksum = w.compute_checksum();
  return w;
}

void skip_test(const std::string& why) {
  std::fprintf(stderr, "SKIPPED: %s\n", why.c_str());
  std::fflush(nullptr);
  std::_Exit(77);
}

Segment make_segment(std::uint32_t T, std::uint32_t B, std::uint64_t version, std::uint32_t explorer) {
  Segment s;
  s.explorer_id = explorer;
  s.num_steps = T;
  s.num_envs = B;
  s.obs_dim = 4;
  for (std::uint32_t i = 0; i < T * B * 4; ++i) s.observations.push_back(0.01f * static_cast<float>(i % 7) - 0.03f);
  for (std::uint32_t i = 0; i < T * B; ++i) {
    s.actions.push_back(i % 2);
    s.behaviour_log_probs.push_back(-0.6931f);
    s.rewards.push_back(1.0f);
    s.terminated.push_back(i == T * B - 1);
    s.truncated.push_back(0);
  }
  s.policy_versions.assign(T, version);
  s.bootstrap_observations.assign(std::size_t{B} * 4, 0.0f);
  s.episode_returns = {float(T)};
  s.episode_lengths = {T};
  return s;
}

Result<ClusterConfig> parse(const std::string& text) {
  return parse_config(text, "test.toml", builtin_envs().names());
}

ClusterConfig tiny_token_config() {
  auto cfg = default_config();
  cfg.policy.kind = PolicyKind::moe_transformer;
  cfg.policy.d_model = 32;
  cfg.policy.heads = 2;
  cfg.policy.layers = 2;
  cfg.policy.experts = 4;
  cfg.policy.top_k = 2;
  cfg.policy.expert_hidden = 32;
  cfg.policy.max_len = 48;
  return cfg;
}

ClusterConfig default_config() {
  auto c = parse_config(embedded_cluster_toml(), "<embedded>", builtin_envs().names());
  REQUIRE(c.ok());
  return *c;
}

double max_diff(const WeightSetData& a, const WeightSetData& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  double d = 0;
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    for (std::size_t j = 0; j < a.tensors[i].values.size(); ++j)
      d = std::max(d, static_cast<double>(std::abs(a.tensors[i].values[j] - b.tensors[i].values[j])));
  return d;
}

int connect_local(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

bool closed_by_peer(int fd) {
  char buf[4096];
  ssize_t r;
  while ((r = recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  const bool closed = r == 0 || errno == ECONNRESET;
  close(fd);
  return closed;
}

void send_garbage(std::uint16_t port, std::size_t n, std::uint32_t seed) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  std::mt19937 rng(seed);
  std::vector<char> bytes(n);
  for (auto& b : bytes) b = static_cast<char>(rng());
  CHECK(write(fd, bytes.data(), bytes.size()) > 0);
  close(fd);
}

std::string http_get(std::uint16_t port, const std::string& path) {
  const int fd = connect_local(port);
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  std::string reply;
  char buf[8192];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return reply;
}

std::string http_body(const std::string& reply) {
  const auto at = reply.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : reply.substr(at + 4);
}

std::string require_headless_browser() {
  for (const char* path : {"/usr/bin/chromium-headless-shell", "/usr/bin/chromium"})
    if (::access(path, X_OK) == 0) return path;
  skip_test("no headless browser (tools/install-deps.sh installs chromium-headless-shell)");
}

CommandOutput run_command(const std::string& command) {
  CommandOutput r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[8192];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  const int raw = ::pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

PageDump browser_dom(const std::string& browser, const std::string& url, int virtual_ms,
                     const std::filesystem::path& dir) {
  static std::atomic<int> runs{0};
  const auto profile = dir / ("browser-profile-" + std::to_string(++runs));
  // --no-sandbox: Chromium's sandbox refuses to run as root (CI runs as root).
  PageDump out;
  out.command = "timeout 120 " + browser + " --headless --no-sandbox --disable-gpu --user-data-dir=" +
                profile.string() + " --virtual-time-budget=" + std::to_string(virtual_ms) + " --dump-dom '" + url +
                "' 2>/dev/null";
  auto run = run_command(out.command);
  out.dom = std::move(run.out);
  out.ok = run.status == 0;
  return out;
}

}  // namespace rlx::test
