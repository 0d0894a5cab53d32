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

}  // namespace rlx::test
