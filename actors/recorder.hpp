// The recorder: appends every segment that reached the learner (with its
// verdict, the learner version at admission and the order of arrival)
// and every published weight version (and every failed update, which takes
// back its batch's trained verdicts) to the rollout log through a
// LogWriter (rollout_log/log_writer.hpp; format in docs/replay.md). A write
// that fails leaves the log readable up to its last whole entry; from then
// on nothing more is written, and every record not written is counted and
// reported to the coordinator (with the first error), which stops the run
// or goes on as [record] on_error says. It cannot go quiet.
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"
#include "rollout_log/log_writer.hpp"

namespace rlx {

struct RecorderOptions {
  std::shared_ptr<LogWriter> writer;  // opened (created or resumed) by the launcher
  coordinator_actor coordinator;      // told (unrecorded_atom) of every record not written
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
recorder_actor spawn_recorder(caf::actor_system& system, RecorderOptions options);

}  // namespace rlx
