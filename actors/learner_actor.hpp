// The learner actor: decodes segments (malformed ones are rejected and
// counted), applies the staleness admission, batches admitted segments,
// runs a Trainer update per batch, publishes weights every K updates,
// forwards every segment with its verdict to the recorder, returns a
// credit to the explorer, and reports metrics to the coordinator.
#pragma once

#include "actors/interfaces.hpp"
#include "core/config.hpp"
#include "core/logging.hpp"
#include "learner/trainer.hpp"

namespace rlx {

struct LearnerActorOptions {
  TrainerOptions trainer;
  std::uint64_t max_staleness = 4;
  std::size_t batch_segments = 4;
  std::uint64_t publish_every = 1;
  weight_store_actor weight_store;
  recorder_actor recorder;        // may be invalid (recording off)
  coordinator_actor coordinator;  // may be invalid (tests)
  Logger log;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
learner_actor spawn_learner(caf::actor_system& system, LearnerActorOptions options);

}  // namespace rlx
