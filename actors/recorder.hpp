// The recorder: appends every segment that reached the learner, with its
// verdict, to <log_dir>/rollouts/ as a stream of Envelope(RolloutRecord)
// messages in Cap'n Proto's standard stream framing, so
// `capnp decode messages/envelope.capnp Envelope < FILE` reads it.
// (Rotation, compression, the index and replay arrive with the replay issue.)
#pragma once

#include <filesystem>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"

namespace rlx {

struct RecorderOptions {
  std::filesystem::path dir;   // <log_dir>/rollouts
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
recorder_actor spawn_recorder(caf::actor_system& system, RecorderOptions options);

}  // namespace rlx
