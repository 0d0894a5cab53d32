// An actor system that a process can leave behind: the launcher of a run
// (the head, a member node) waits a bounded time for every actor to exit,
// and hands back the system, with the configuration it refers to, when
// one does not, so that the process can end past it instead of hanging in
// the system's destructor.
#pragma once

#include <chrono>
#include <optional>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "core/logging.hpp"

namespace rlx {

// The system goes first, then its configuration.
struct HeldSystem {
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> system;
};

// Whether every actor of `system` ended within `bound`.
inline bool await_actors(caf::actor_system& system, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (system.registry().running() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // A bounded wait for threads CAF owns; nothing here to wake on.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Waits up to `bound` for every actor of `system`; the number still running
// then (0: none), logged as outliving `what` ("the run's end").
inline std::size_t actors_left_after(caf::actor_system& system, std::chrono::milliseconds bound, const Logger& log,
                                     const char* what) {
  if (await_actors(system, bound)) return 0;
  const std::size_t left = system.registry().running();
  log->error("{} actors did not exit within {:.0f} s of {}: left behind", left,
             std::chrono::duration<double>(bound).count(), what);
  return left;
}

}  // namespace rlx
