// An actor system for actor tests: wire types registered, quiet logs.
#pragma once

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"

namespace rlx::test {

struct ActorFixture {
  static caf::actor_system_config& config() {
    static caf::actor_system_config cfg = [] {
      caf::actor_system_config c;
      register_wire_types(c);
      register_error_category(c);
      c.set("scheduler.max-threads", 2);
      c.set("logger.verbosity", caf::atom("quiet"));
      return c;
    }();
    return cfg;
  }
  caf::actor_system system{config()};
  caf::scoped_actor self{system};
  Logger log = null_logger();
};

// Forwards what an explorer receives from the weight store to `sink`.
inline explorer_actor::behavior_type forwarding_explorer(explorer_actor::pointer self, caf::actor sink) {
  return {
      [=](weights_atom, const WireMsg& m) { caf::anon_send(sink, weights_atom::value, m); },
      [=](ack_atom) { caf::anon_send(sink, ack_atom::value); },
      [](drain_atom) {},
      [](stepped_atom) {},
      [](pause_atom) {},
      [](rebind_atom, learner_actor, caf::actor, std::uint64_t) {},
      [](counts_atom) { return std::uint64_t{0}; },
  };
}

// A coordinator that forwards explorers' joins (join_atom, WireMsg) and
// produced counts (produced_atom, id, count) to `sink` when it has one,
// and takes everything else. Spawn it with a sink, or with caf::actor{}
// (CAF 0.17 binds a null tuple for an argument-less function actor,
// which UBSan reports).
inline coordinator_actor::behavior_type stub_coordinator(coordinator_actor::pointer, caf::actor sink) {
  return {
      [=](join_atom, const WireMsg& m, explorer_actor) {
        if (sink) caf::anon_send(sink, join_atom::value, m);
      },
      [](node_atom, const std::string&, node_actor, std::uint32_t, std::uint32_t, std::uint32_t, bool) {},
      [](refused_atom, const std::string&) {},
      [](eval_atom, std::uint64_t, double, double, std::uint32_t) {},
      [](leave_atom, const WireMsg&) {},
      [](metrics_atom, const WireMsg&) {},
      [](swap_atom, std::uint32_t, double) {},
      [](reward_latency_atom, std::uint32_t, double) {},
      [](tick_atom) {},
      [](beat_atom) {},
      [=](produced_atom, std::uint32_t id, std::uint64_t n) {
        if (sink) caf::anon_send(sink, produced_atom::value, id, n);
      },
      [](stop_atom, const std::string&) {},
      [](unrecorded_atom, std::uint64_t, const std::string&) {},
      [](scale_atom, std::int32_t, std::int32_t) { return std::string(); },
  };
}

}  // namespace rlx::test
