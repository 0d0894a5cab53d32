// The learner actor: decodes segments (malformed ones are rejected and
// counted), drives a LearnerCore (admission, batching, updates), publishes
// weights every K updates, tells the recorder every segment's verdict and
// every published version, returns a credit to the explorer, and reports
// metrics to the coordinator.
#pragma once

#include <filesystem>
#include <memory>
#include <set>

#include "actors/interfaces.hpp"
#include "core/logging.hpp"
#include "learner/learner_core.hpp"

namespace rlx {

struct LearnerActorOptions {
  LearnerCoreOptions core;
  // A core rebuilt from the rollout log (a resumed run); null = a fresh one.
  std::shared_ptr<LearnerCore> resumed;
  // Checkpoints (learner/checkpoint.hpp) every N updates into `checkpoint_dir`; 0 = none.
  std::filesystem::path checkpoint_dir;
  std::uint64_t checkpoint_every = 0;
  int checkpoint_keep = 3;
  weight_store_actor weight_store;
  recorder_actor recorder;        // may be invalid (recording off)
  coordinator_actor coordinator;  // may be invalid (tests)
  Logger log;
  // The largest weight set the store takes ([weight_store] max_set_mb); a
  // larger one stops the learner, and so the run, with the reason (0: none).
  std::uint64_t max_set_bytes = 0;
  // Fault injection, for tests: the n-th segment messages to reach the
  // learner (from 1) are dropped unseen, as if lost on the wire: no ack,
  // no count (RunOptions::drop_segments).
  std::set<std::uint64_t> drop_for_test;
};

// Spawns the actor in `system` (the state type stays private to the .cpp).
learner_actor spawn_learner(caf::actor_system& system, LearnerActorOptions options);

}  // namespace rlx
