// A member node reaching a head again: the gate it gets is the live head's,
// and an agent that asks to enter twice (its first answer lost) is let in once.
#include <optional>

#include <caf/io/all.hpp>
#include <catch2/catch.hpp>

#include "control/gate.hpp"
#include "assembly/remote.hpp"
#include "core/auth.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

GateOptions gate_options(const std::string& incarnation) {
  GateOptions o;
  o.secret = "gate-reconnect-secret-0123456789";
  o.head = "head";
  o.run_id = "run-1";
  o.incarnation = incarnation;
  o.log = null_logger();
  return o;
}

// hello, then enter as `node` with `agent`: "" when let in, else the refusal.
std::string enter(caf::scoped_actor& self, const gate_actor& gate, const std::string& node, const node_actor& agent) {
  std::string nonce, answer = "no answer";
  self->request(gate, 10s, hello_atom::value, node).receive([&](const std::string& n) { nonce = n; }, [](caf::error&) {});
  self->request(gate, 10s, enter_atom::value,
                GateEntry{node, nonce, secret_proof(gate_options("").secret, nonce, node), agent, 1, 8, 0, "", ""})
      .receive([&](const GateWelcome&) { answer = ""; },
               [&](caf::error& e) { answer = error_text(self->system(), e); });
  return answer;
}

node_actor idle_agent(caf::actor_system& sys) {
  // (An argument: CAF 0.17 binds a null tuple for an argument-less function actor; UBSan stops there.)
  return caf::actor_cast<node_actor>(sys.spawn([](int) { return caf::behavior{[](int) {}}; }, 0));
}

}  // namespace

TEST_CASE("a node that lost the head reaches the restarted head's gate and never the dead one's cached handle",
          "[cluster][net]") {
  const ClusterConfig config;
  caf::actor_system_config member_cfg;
  configure_remoting(member_cfg, config);
  caf::actor_system member{member_cfg};
  std::uint16_t port = 0;
  gate_actor dead;
  {
    caf::actor_system_config head_cfg;
    configure_remoting(head_cfg, config);
    caf::actor_system head{head_cfg};
    auto gate = spawn_gate(head, gate_options("first"));
    auto p = publish_gate(gate, config, "127.0.0.1", 0);
    REQUIRE(p.ok());
    port = *p;
    auto g = connect_gate(member, config, "127.0.0.1", port, 10.0, null_logger());
    REQUIRE(g.ok());
    dead = *g;
    caf::anon_send_exit(gate, caf::exit_reason::kill);
  }  // the head's actor system is gone: its connection closes
  caf::actor_system_config again_cfg;
  configure_remoting(again_cfg, config);
  caf::actor_system again{again_cfg};
  auto gate = spawn_gate(again, gate_options("second"));
  REQUIRE(publish_gate(gate, config, "127.0.0.1", port).ok());  // the restarted head, on the same port
  auto g = connect_gate(member, config, "127.0.0.1", port, 30.0, null_logger(), nullptr, dead);
  REQUIRE(g.ok());
  CHECK(g->address() != dead.address());
  caf::scoped_actor self{member};
  const auto agent = idle_agent(member);
  CHECK(enter(self, *g, "node-a", agent).empty());  // and it answers
  caf::anon_send_exit(agent, caf::exit_reason::kill);
  caf::anon_send_exit(gate, caf::exit_reason::kill);
}

TEST_CASE("an agent entering twice is let in both times and another agent of its name is refused", "[cluster]") {
  caf::actor_system_config cfg;
  register_handle_types(cfg);
  caf::actor_system sys{cfg};
  auto gate = spawn_gate(sys, gate_options("first"));
  caf::scoped_actor self{sys};
  const auto agent = idle_agent(sys);
  const auto other = idle_agent(sys);
  CHECK(enter(self, gate, "node-a", agent).empty());
  CHECK(enter(self, gate, "node-a", agent).empty());  // its first answer was lost: asked again
  CHECK(enter(self, gate, "node-a", other).find("already in the cluster") != std::string::npos);
  for (const auto& a : {agent, other}) caf::anon_send_exit(a, caf::exit_reason::kill);
  caf::anon_send_exit(gate, caf::exit_reason::kill);
}
