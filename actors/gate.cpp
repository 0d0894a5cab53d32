#include "actors/gate.hpp"

#include <deque>
#include <map>

#include "core/auth.hpp"

namespace rlx {

struct GateState {
  GateOptions options;
  struct Pending {
    std::string node;
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Pending> nonces;
  std::deque<std::string> order;                 // nonces, oldest first
  std::map<std::string, node_actor> joined;      // member nodes in the cluster now
  std::uint64_t refused = 0;
};

namespace {

using Self = gate_actor::stateful_pointer<GateState>;

// The sending node, for logs (an anonymous message has no sender).
std::string peer_of(Self self) {
  return self->current_sender() ? caf::to_string(self->current_sender()->node()) : "an anonymous sender";
}

caf::error refuse(Self self, const std::string& node, const std::string& why) {
  auto& st = self->state;
  ++st.refused;
  const std::string peer = peer_of(self);
  const std::string what = "refused node '" + node + "' from " + peer + ": " + why;
  st.options.log->warn("{} ({} refused so far)", what, st.refused);
  self->send(st.options.coordinator, refused_atom::value, what);
  return caf::make_error(caf::sec::runtime_error, "refused by the head: " + why);
}

void forget_expired(GateState& st) {
  const auto now = std::chrono::steady_clock::now();
  while (!st.order.empty()) {
    auto it = st.nonces.find(st.order.front());
    const bool gone = it == st.nonces.end();
    if (!gone && it->second.expires > now && st.nonces.size() <= st.options.max_nonces) break;
    if (!gone) st.nonces.erase(it);
    st.order.pop_front();
  }
}

}  // namespace

gate_actor::behavior_type gate_impl(Self self, GateOptions options) {
  self->state.options = std::move(options);
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& joined = self->state.joined;
    for (auto it = joined.begin(); it != joined.end(); ++it)
      if (it->second.address() == dm.source) {
        self->state.options.log->info("node '{}' left the cluster", it->first);
        joined.erase(it);
        return;
      }
  });
  return {
      [self](hello_atom, const std::string& node) -> std::string {
        auto& st = self->state;
        std::string nonce = random_nonce();
        st.nonces[nonce] = GateState::Pending{node, std::chrono::steady_clock::now() + st.options.nonce_ttl};
        st.order.push_back(nonce);
        forget_expired(st);
        return nonce;
      },
      [self](enter_atom, const std::string& node, const std::string& nonce, const std::string& proof,
             node_actor agent) -> caf::result<learner_actor, weight_store_actor, coordinator_actor, std::uint16_t> {
        auto& st = self->state;
        forget_expired(st);
        auto it = st.nonces.find(nonce);
        if (it == st.nonces.end()) return refuse(self, node, "unknown, used or expired nonce");
        const std::string asked_for = it->second.node;
        st.nonces.erase(it);  // one use, whatever happens next
        if (asked_for != node) return refuse(self, node, "the nonce was issued to another node name");
        if (!proofs_equal(proof, secret_proof(st.options.secret, nonce, node)))
          return refuse(self, node, "wrong proof of the cluster secret");
        if (!st.options.members.count(node)) return refuse(self, node, "not a member node of this topology");
        if (st.joined.count(node)) return refuse(self, node, "a node of that name is already in the cluster");
        if (!agent) return refuse(self, node, "no node agent");
        st.joined[node] = agent;
        self->monitor(agent);
        self->send(st.options.coordinator, node_atom::value, node, agent);
        st.options.log->info("node '{}' joined from {}", node, peer_of(self));
        return caf::result<learner_actor, weight_store_actor, coordinator_actor, std::uint16_t>(
            st.options.learner, st.options.weight_store, st.options.coordinator, st.options.bulk_port);
      },
  };
}

gate_actor spawn_gate(caf::actor_system& system, GateOptions options) {
  return system.spawn(gate_impl, std::move(options));
}

}  // namespace rlx
