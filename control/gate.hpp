// The gate: the one actor the head publishes. A node that wants in asks
// for a one-time nonce (hello), answers it with HMAC-SHA256 of the cluster
// secret (enter), and only then receives the learner, weight store and
// coordinator handles and the run's configuration; the coordinator learns
// of the node and the shape it asks for. A node the topology does not name
// may join too (`rlx node --join`): the coordinator allots its ids.
// Anything else (no proof, a wrong one, a replayed or unknown nonce, the
// head's own name, a name that is not a plain word, a name already joined,
// a shape out of bounds) is refused, logged, counted, and changes nothing.
// A node that outlived its head (kept running while the head restarted)
// rejoins with the run id and head incarnation it had: refused for another
// run or by the incarnation that already counted it lost.
// `rlx scale` proves the secret the same way; the gate passes its request
// to the coordinator and the answer back. See docs/cluster.md for what
// this does and does not protect against.
#pragma once

#include <chrono>
#include <set>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"

namespace rlx {

struct GateOptions {
  std::string secret;
  std::string head;                  // the head's node name (no one may join as it)
  std::string config_toml;           // the run's configuration, handed to every node
  learner_actor learner;
  weight_store_actor weight_store;
  coordinator_actor coordinator;
  std::uint16_t bulk_port = 0;       // the head's bulk channel for weights (0: none)
  std::string run_id;                // the run (kept across --resume)
  std::string incarnation;           // this head process
  std::uint64_t start_version = 0;   // the learner's version when this head started (a resumed one's)
  std::chrono::seconds nonce_ttl{30};
  std::size_t max_nonces = 256;      // outstanding nonces kept (oldest dropped)
  Logger log;
};

gate_actor spawn_gate(caf::actor_system& system, GateOptions options);

}  // namespace rlx
