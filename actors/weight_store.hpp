// The weight store: keeps the last N published weight sets (as shared
// wire buffers, never copied in-process), serves the latest or a given
// version, and notifies subscribed explorers of every new version.
#pragma once

#include "actors/interfaces.hpp"
#include "core/logging.hpp"

namespace rlx {

struct WeightStoreOptions {
  std::size_t keep_versions = 4;  // N
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
weight_store_actor spawn_weight_store(caf::actor_system& system, WeightStoreOptions options);

}  // namespace rlx
