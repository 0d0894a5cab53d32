// The weight store: keeps the last N published weight sets (as shared
// wire buffers, never copied in-process), serves the latest or a given
// version, whole (in-process) or chunk by chunk (to weight relays on other
// nodes), and notifies subscribers of every new version.
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "messages/codec.hpp"
#include "core/logging.hpp"
#include "transport/weight_shelf.hpp"

namespace rlx {

struct WeightStoreOptions {
  std::size_t keep_versions = 4;        // N
  std::uint64_t chunk_bytes = 1 << 20;  // size of the chunks it serves
  Logger log;
  std::uint32_t corrupt_chunks = 0;     // tests only: damage the first N chunks it serves
  // Where the sets are kept; shared with the bulk channel's server on the
  // head. Made from the fields above when not given.
  std::shared_ptr<WeightShelf> shelf = nullptr;
  bool deltas = false;                  // chunks may travel as deltas (WeightShelf); with `shelf`, the shelf's own
  DecodeOptions decode{};               // a set's limits (weight_set_decoding: [weight_store] max_set_mb)
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
weight_store_actor spawn_weight_store(caf::actor_system& system, WeightStoreOptions options);

}  // namespace rlx
