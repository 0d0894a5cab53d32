// The head's gate, attacked and then joined, in one process: the head and
// a member node each with their own actor system and middleman, over TCP.
#include <future>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include <sys/socket.h>

#include <caf/io/all.hpp>

#include "assembly/cluster.hpp"
#include "assembly/member_node.hpp"
#include "assembly/remote.hpp"
#include "core/auth.hpp"
#include "tests/cluster/cluster_fixture.hpp"
#include "tests/cluster/head_run.hpp"
#include "tests/helpers.hpp"
#include "tests/metrics_fixture.hpp"

using namespace rlx;
using namespace rlx::test;
using namespace std::chrono_literals;

namespace {

// A refusal as it arrived across the network: its Errc's name, its reason.
std::string code_and_message(const caf::error& e) {
  const Error got = from_caf(e);
  return std::string(to_string(got.code)) + ": " + got.message;
}

// One join attempt: the gate's answer ("" = accepted, else "refused: ...").
std::string try_enter(caf::scoped_actor& self, const gate_actor& gate, const std::string& node,
                      const std::function<std::string(const std::string&)>& proof_for, const std::string& nonce_override = "",
                      std::uint32_t explorers = 1) {
  std::string nonce, answer = "no answer";
  self->request(gate, 10s, hello_atom::value, node).receive([&](const std::string& n) { nonce = n; }, [](caf::error&) {});
  if (!nonce_override.empty()) nonce = nonce_override;
  self->request(gate, 10s, enter_atom::value, GateEntry{node, nonce, proof_for(nonce), node_actor{}, explorers, 8, 0, "", ""})
      .receive([&](const GateWelcome&) { answer = ""; }, [&](caf::error& e) { answer = code_and_message(e); });
  return answer;
}

// One `rlx scale` request through the gate: the answer, or the error.
std::string try_scale(caf::scoped_actor& self, const gate_actor& gate, const std::string& secret, std::int32_t explorers) {
  std::string nonce, answer = "no answer";
  self->request(gate, 10s, hello_atom::value, std::string("scaler")).receive([&](const std::string& n) { nonce = n; }, [](caf::error&) {});
  self->request(gate, 10s, scale_atom::value, std::string("scaler"), nonce, secret_proof(secret, nonce, "scaler"), explorers,
                std::int32_t{-1})
      .receive([&](const std::string& a) { answer = a; }, [&](caf::error& e) { answer = code_and_message(e); });
  return answer;
}

}  // namespace

TEST_CASE("the head refuses nodes without the cluster secret and garbage, and the run goes on", "[cluster][auth][net]") {
  TempDir t("rlx-gate");
  SplitSpec spec = endless_spec(t);  // the head's own explorer runs through the attacks; the test stops the run
  spec.head_explorers = 1;
  spec.members = {"rollout-a"};
  auto cfg = parse(split_toml(spec));
  REQUIRE(cfg.ok());
  const std::string secret = "the-right-secret-0123456789";

  HeadRun head(*cfg, secret);
  const std::uint16_t port = head.port;

  {
    caf::actor_system_config c;
    configure_remoting(c, *cfg);
    c.set("logger.verbosity", caf::atom("quiet"));
    caf::actor_system client{c};
    auto gate = connect_gate(client, *cfg, "127.0.0.1", port, 10, null_logger());
    REQUIRE(gate.ok());
    caf::scoped_actor self{client};
    const auto wrong = [](const std::string& n) { return secret_proof("a-wrong-secret-0123456789", n, "rollout-a"); };
    const auto right = [&](const std::string& n) { return secret_proof(secret, n, "rollout-a"); };
    const std::string refused = try_enter(self, *gate, "rollout-a", wrong);
    CHECK(refused.rfind("refused: refused by the head: ", 0) == 0);  // the code crossed the network as itself
    CHECK(refused.find("wrong proof") != std::string::npos);
    CHECK(try_enter(self, *gate, "rollout-a", [](const std::string&) { return std::string(); }).find("wrong proof") !=
          std::string::npos);  // no secret at all
    CHECK(try_enter(self, *gate, "rollout-a", right, "a-nonce-the-head-never-issued").find("nonce") != std::string::npos);
    const auto proof_as = [&](const std::string& name) {
      return [&secret, name](const std::string& n) { return secret_proof(secret, n, name); };
    };
    CHECK(try_enter(self, *gate, "head", proof_as("head")).find("the head's name") != std::string::npos);
    CHECK(try_enter(self, *gate, "../etc", proof_as("../etc")).find("a node name is") != std::string::npos);
    CHECK(try_enter(self, *gate, "greedy", proof_as("greedy"), "", 100'000).find("more than a node may run") !=
          std::string::npos);
    // `rlx scale` proves the secret the same way; the coordinator checks what is asked.
    CHECK(try_scale(self, *gate, "a-wrong-secret-0123456789", 2).find("wrong proof") != std::string::npos);
    CHECK(try_scale(self, *gate, secret, 0) == "config_range: explorers must be 1..4096");
    // Anonymous messages (no sender to answer or to name in the log): one
    // with no node agent (refused), one with a good proof and an agent that
    // then dies at once (admitted, then gone: the real node can still join).
    for (const bool with_agent : {false, true}) {
      std::string nonce;
      self->request(*gate, 10s, hello_atom::value, std::string("rollout-a"))
          .receive([&](const std::string& n) { nonce = n; }, [](caf::error&) {});
      node_actor agent;
      if (with_agent)
        // (An argument: CAF 0.17 binds a null tuple for an argument-less function actor; UBSan reports it.)
        agent = client.spawn([](node_actor::pointer, int) -> node_actor::behavior_type {
          return {[](stop_atom, const std::string&) {}, [](drain_atom) {}, [](ping_atom) { return std::uint64_t{0}; },
                  [](gateway_atom) { return std::vector<std::uint64_t>{}; },
                  [](spawn_atom, std::uint8_t, std::uint32_t, std::uint64_t, std::uint32_t, std::uint32_t) {},
                  [](retire_atom, std::uint32_t) {}, [](rejoin_atom, caf::actor) {},
                  [](rejoin_atom, const std::string&) {}};
        }, 0);
      caf::anon_send(*gate, enter_atom::value, GateEntry{"rollout-a", nonce, right(nonce), agent, 1, 8, 0, "", ""});
      if (agent) {
        self->request(*gate, 10s, hello_atom::value, std::string("x")).receive([](const std::string&) {}, [](caf::error&) {});
        self->send_exit(agent, caf::exit_reason::kill);
      }
    }
    send_garbage(port, 4096);
    send_garbage(port, 16);
  }

  // The real node joins after all that, and the run finishes normally.
  auto member = run_member(*cfg, "rollout-a", port, secret);
  // Once the node is in and the run still trains, stop it as Ctrl-C would.
  const bool joined = head.wait_for_nodes(2, 120s);
  head.stop("the test is done");
  CHECK(joined);
  const RunResult r = head.wait();
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::interrupted);
  REQUIRE(member.wait_for(60s) == std::future_status::ready);
  const auto m = member.get();
  INFO(m.summary);
  CHECK(m.outcome == RunOutcome::solved);  // stopped by the head
  const std::string line = last_metrics_line(t.path);
  CHECK(json_number(line, "joins_refused") == 8);  // 4 proofs (one a scale's), 2 names, 1 shape, 1 anonymous without an agent
  CHECK(json_number(line, "env_steps") > 0);
}

namespace {

// A CA and a certificate signed by it, made with the openssl tool.
void make_certificates(const fs::path& dir, const std::string& ca_name) {
  const std::string d = dir.string();
  const std::string cmd = "cd " + d + " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=" +
                          ca_name + " && openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj /CN=rlx-node" +
                          " && openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 2";
  REQUIRE(std::system(("(" + cmd + ") > " + d + "/openssl.log 2>&1").c_str()) == 0);
}

std::string tls_table(const fs::path& dir) {
  return "[tls]\ncertificate = \"" + (dir / "node.pem").string() + "\"\nkey = \"" + (dir / "node.key").string() +
         "\"\nca = \"" + (dir / "ca.pem").string() + "\"\n";
}

}  // namespace

TEST_CASE("with [tls] nodes join over TLS and a peer without a certificate of the cluster's CA cannot connect",
          "[cluster][auth][tls][net]") {
  TempDir t("rlx-tls");
  fs::create_directories(t.path / "pki");
  fs::create_directories(t.path / "rogue");
  make_certificates(t.path / "pki", "rlx-test-ca");
  make_certificates(t.path / "rogue", "some-other-ca");
  SplitSpec spec;
  spec.log_dir = t.path / "run";
  spec.head_explorers = 0;  // only the TLS member makes progress
  spec.members = {"rollout-a"};
  spec.max_env_steps = 30'000;
  spec.extra = tls_table(t.path / "pki");
  auto cfg = parse(split_toml(spec));
  REQUIRE(cfg.ok());
  const std::string secret = "the-right-secret-0123456789";
  HeadRun head(*cfg, secret);
  const std::uint16_t port = head.port;

  auto can_reach = [&](const std::string& extra) {
    SplitSpec other = spec;
    other.extra = extra;
    auto c = parse(split_toml(other));
    REQUIRE(c.ok());
    caf::actor_system_config sc;
    configure_remoting(sc, *c);
    sc.set("logger.verbosity", caf::atom("quiet"));
    caf::actor_system client{sc};
    return connect_gate(client, *c, "127.0.0.1", port, 2, null_logger()).ok();
  };
  CHECK(!can_reach(""));                              // plain TCP to a TLS head
  CHECK(!can_reach(tls_table(t.path / "rogue")));     // TLS, but a certificate of another CA

  auto member = run_member(*cfg, "rollout-a", port, secret);
  const RunResult r = head.wait();
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::budget);
  REQUIRE(member.wait_for(60s) == std::future_status::ready);
  CHECK(member.get().outcome == RunOutcome::solved);
  CHECK(json_number(last_metrics_line(spec.log_dir), "nodes") == 2);
}

namespace {

void say(int fd, const void* data, std::size_t n) { CHECK(::send(fd, data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n)); }

// The counts of one port in a metrics line's "strangers" object.
double strangers_of(const std::string& line, const std::string& port, const std::string& kind) {
  const auto at = line.find("\"" + port + "\":{\"silent\"");
  REQUIRE(at != std::string::npos);
  return json_number(line.substr(at, line.find('}', at) - at + 1), kind);
}

}  // namespace

// A head with an explorer of its own and one member node, rollout-a, that only the test stops.
static Result<ClusterConfig> head_and_member(const TempDir& t, const std::string& extra = "") {
  SplitSpec spec = endless_spec(t);
  spec.head_explorers = 1;
  spec.members = {"rollout-a"};
  spec.extra = extra;
  return parse(split_toml(spec));
}

TEST_CASE("strangers on the head's port and bulk channel are closed in bounded time, counted by kind and the run loses nothing",
          "[cluster][auth][defensive][net]") {
  TempDir t("rlx-strangers");
  auto cfg = head_and_member(t, "[launch]\nstranger_timeout_s = 0.5\n");
  REQUIRE(cfg.ok());
  const std::string secret = "the-right-secret-0123456789";
  HeadRun head(*cfg, secret);
  auto bulk_future = head.bulk_listening.get_future();
  REQUIRE(bulk_future.wait_for(60s) == std::future_status::ready);
  const std::uint16_t bulk = bulk_future.get();

  // The member node's middleman and bulk channel get in through the same doors.
  auto member = run_member(*cfg, "rollout-a", head.port, secret);
  REQUIRE(head.wait_for_nodes(2, 120s));

  const char http[] = "GET / HTTP/1.1\r\n\r\n";
  {  // the head's port: another protocol
    const int fd = connect_local(head.port);
    say(fd, http, sizeof http - 1);
    CHECK(closed_by_peer(fd));
  }
  {  // silent
    CHECK(closed_by_peer(connect_local(head.port)));
  }
  {  // half a BASP handshake after the head's: a client handshake's first bytes, then nothing
    const int fd = connect_local(head.port);
    char greeting[64];
    CHECK(::recv(fd, greeting, sizeof greeting, 0) > 0);  // CAF speaks first, through the door
    const unsigned char half[8] = {0x01, 0, 0, 0, 0, 0, 0, 0x40};
    say(fd, half, sizeof half);
    CHECK(closed_by_peer(fd));
  }
  {  // a flood of idle connections: 64 wait out their opening, 6 are refused at once
    std::vector<int> fds;
    for (int i = 0; i < 70; ++i) fds.push_back(connect_local(head.port));
    for (int fd : fds) CHECK(closed_by_peer(fd));
  }
  {  // the bulk channel: a frame header claiming 2^32 words
    const int fd = connect_local(bulk);
    const std::uint32_t header[2] = {0, 0xffffffffu};
    say(fd, header, sizeof header);
    CHECK(closed_by_peer(fd));
  }
  {  // the bulk channel: silent
    CHECK(closed_by_peer(connect_local(bulk)));
  }

  head.stop("the test is done");
  const RunResult r = head.wait();
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::interrupted);
  CHECK_THAT(r.summary, Catch::Contains("75 strangers closed on the head's ports"));
  REQUIRE(member.wait_for(60s) == std::future_status::ready);
  CHECK(member.get().outcome == RunOutcome::solved);  // stopped by the head, as usual

  const std::string line = last_metrics_line(t.path);
  INFO(line);
  CHECK(json_number(line, "strangers_total") == 75);
  CHECK(strangers_of(line, "head", "garbage") == 1);
  CHECK(strangers_of(line, "head", "silent") == 1 + 64);
  CHECK(strangers_of(line, "head", "half_open") == 1);
  CHECK(strangers_of(line, "head", "over_limit") == 6);
  CHECK(strangers_of(line, "bulk", "garbage") == 1);
  CHECK(strangers_of(line, "bulk", "silent") == 1);
  check_segment_identity(line);
}

TEST_CASE("a member node whose agent is stuck in a handler ends as failed after the bound, and the head's run goes on",
          "[cluster][defensive][net]") {
  TempDir t("rlx-stuck-agent");
  auto cfg = head_and_member(t);
  REQUIRE(cfg.ok());
  const std::string secret = "the-right-secret-0123456789";
  HeadRun head(*cfg, secret);

  std::promise<void> release;
  MemberNodeOptions mo;
  mo.node = "rollout-a";
  mo.head_host = "127.0.0.1";
  mo.head_port = head.port;
  mo.secret = secret;
  mo.stuck_agent = release.get_future().share();
  mo.agent_bound = 2s;
  mo.shutdown_bound = 2s;
  const auto t0 = std::chrono::steady_clock::now();
  MemberNodeResult m = run_member_node(*cfg, builtin_envs(), mo, null_logger());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(m.summary);
  CHECK(m.outcome == RunOutcome::failed);
  CHECK_THAT(m.summary, Catch::Contains("the node's agent has not answered for"));
  CHECK(m.actors_left == 1);  // the agent, still in its handler
  CHECK(took < 30.0);
  REQUIRE(m.left_behind);
  release.set_value();  // the handler returns, the agent takes its kill
  m.left_behind.reset();

  head.stop("the test is done");
  const RunResult r = head.wait();
  INFO(r.summary);
  CHECK(r.outcome == RunOutcome::interrupted);  // the head's own explorer trained throughout
}
