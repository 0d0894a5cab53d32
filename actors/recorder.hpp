// The recorder: appends every segment that reached the learner (with its
// verdict, the learner version at admission and the order of arrival)
// and every published weight version to the rollout log through a
// LogWriter (rollout_log/log_writer.hpp; format in docs/replay.md). A write
// failure turns recording off with an error in the log; the run goes on.
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"
#include "rollout_log/log_writer.hpp"

namespace rlx {

struct RecorderOptions {
  std::shared_ptr<LogWriter> writer;  // opened (created or resumed) by the launcher
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
recorder_actor spawn_recorder(caf::actor_system& system, RecorderOptions options);

}  // namespace rlx
