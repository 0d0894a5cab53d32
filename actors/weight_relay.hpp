// The weight relay: runs on every member node. It follows the head's
// weight store, fetches each new version in chunks (several in flight),
// checks every chunk's checksum and then the whole set's, fetches a bad or
// missing chunk again, and publishes the set into the node's own weight
// store, from which the node's explorers fetch in-process. One transfer
// per node, however many explorers it runs; nothing unchecked is applied.
//
// Each request names the last version relayed as a base: a head with
// deltas on may answer a chunk as a delta against it (checked after it is
// applied, chunk by chunk, and the whole set again by the node's store).
//
// With a bulk channel (the head's plain-TCP chunk server), each version is
// fetched there first, from a thread of the relay's own; whatever that
// fetch misses (channel down, refused, timed out) comes through the
// middleman, chunk by chunk as above.
#pragma once

#include <chrono>
#include <optional>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"
#include "transport/weight_bulk.hpp"

namespace rlx {

struct WeightRelayOptions {
  weight_store_actor upstream;                     // the head's store
  weight_store_actor local;                        // this node's store
  std::uint32_t window = 4;                        // chunk requests in flight
  std::uint32_t max_tries = 4;                     // per chunk, before the version is given up
  std::chrono::milliseconds request_timeout{20000};
  std::string name = "weight_relay";
  Logger log;
  std::optional<BulkClientOptions> bulk;           // the head's bulk channel, if it has one
  std::uint32_t bulk_max_failures = 3;             // consecutive failed connections before the middleman only
};

// Spawns the relay; it subscribes to `upstream` at once.
weight_relay_actor spawn_weight_relay(caf::actor_system& system, WeightRelayOptions options);

}  // namespace rlx
