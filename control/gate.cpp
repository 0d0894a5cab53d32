#include "control/gate.hpp"

#include <algorithm>
#include <cctype>
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

using GateSelf = gate_actor::stateful_pointer<GateState>;

// The sending node, for logs (an anonymous message has no sender).
std::string peer_of(GateSelf self) {
  return self->current_sender() ? caf::to_string(self->current_sender()->node()) : "an anonymous sender";
}

caf::error refuse(GateSelf self, const std::string& node, const std::string& why) {
  auto& st = self->state;
  ++st.refused;
  const std::string peer = peer_of(self);
  const std::string what = "refused node '" + node + "' from " + peer + ": " + why;
  st.options.log->warn("{} ({} refused so far)", what, st.refused);
  self->send(st.options.coordinator, refused_atom::value, what);
  return to_caf(Error{Errc::refused, "refused by the head: " + why});
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

// A node name is a plain word: letters, digits, '.', '_', '-'; 1..64 of them.
bool plain_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

// The nonce was issued to `name` and the proof answers it; else why not.
std::string check_proof(GateState& st, const std::string& name, const std::string& nonce, const std::string& proof) {
  forget_expired(st);
  auto it = st.nonces.find(nonce);
  if (it == st.nonces.end()) return "unknown, used or expired nonce";
  const std::string asked_for = it->second.node;
  st.nonces.erase(it);  // one use, whatever happens next
  if (asked_for != name) return "the nonce was issued to another name";
  if (!proofs_equal(proof, secret_proof(st.options.secret, nonce, name))) return "wrong proof of the cluster secret";
  return "";
}

}  // namespace

gate_actor::behavior_type gate_impl(GateSelf self, GateOptions options) {
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
      [self](enter_atom, const GateEntry& in) -> caf::result<GateWelcome> {
        auto& st = self->state;
        const auto& o = st.options;
        const auto& node = in.node;
        if (auto why = check_proof(st, node, in.nonce, in.proof); !why.empty()) return refuse(self, node, why);
        if (!plain_name(node)) return refuse(self, node, "a node name is 1-64 letters, digits, '.', '_' or '-'");
        if (node == o.head) return refuse(self, node, "that is the head's name");
        const GateWelcome welcome{o.learner,     o.weight_store, o.coordinator, o.bulk_port, o.config_toml,
                                  o.run_id,      o.incarnation,  o.start_version};
        if (auto it = st.joined.find(node); it != st.joined.end()) {
          // The same agent asking again (its first answer was lost): the same answer, counted once.
          if (it->second == in.agent) return welcome;
          return refuse(self, node, "a node of that name is already in the cluster");
        }
        if (in.explorers > 1024 || in.rewards > 1024 || in.envs_per_explorer == 0 || in.envs_per_explorer > 65536)
          return refuse(self, node, "asks for more than a node may run (1024 explorers or reward workers, 65536 envs each)");
        if (!in.agent) return refuse(self, node, "no node agent");
        const bool rejoin = !in.run_id.empty();
        if (rejoin && in.run_id != o.run_id)
          return refuse(self, node, "it ran in run " + in.run_id + ", this head runs " + o.run_id +
                                        " (started afresh, not resumed): restart the node");
        if (rejoin && in.incarnation == o.incarnation)
          return refuse(self, node, "this head counted the node lost already (evicted or cut off): restart the node");
        st.joined[node] = in.agent;
        self->monitor(in.agent);
        self->send(o.coordinator, node_atom::value, node, in.agent, in.explorers, in.envs_per_explorer, in.rewards,
                   rejoin);
        o.log->info("node '{}' {} from {}", node, rejoin ? "rejoined (it outlived the previous head)" : "joined",
                    peer_of(self));
        return welcome;
      },
      [self](scale_atom, const std::string& caller, const std::string& nonce, const std::string& proof,
             std::int32_t explorers, std::int32_t rewards) -> caf::result<std::string> {
        auto& st = self->state;
        if (auto why = check_proof(st, caller, nonce, proof); !why.empty()) return refuse(self, caller, why);
        st.options.log->info("'{}' from {} asks for {} explorers, {} reward workers", caller, peer_of(self),
                             explorers < 0 ? std::string("unchanged") : std::to_string(explorers),
                             rewards < 0 ? std::string("unchanged") : std::to_string(rewards));
        return self->delegate(st.options.coordinator, scale_atom::value, explorers, rewards);
      },
  };
}

gate_actor spawn_gate(caf::actor_system& system, GateOptions options) {
  return system.spawn(gate_impl, std::move(options));
}

}  // namespace rlx
