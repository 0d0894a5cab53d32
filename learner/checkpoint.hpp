// Learner checkpoints: the whole LearnerCore (trainer state, admission
// counters, run statistics, arrivals and updates) in one file, written
// atomically (temporary file, fsync, rename, fsync of the directory),
// the last K kept, each with a length and an xxh64 checksum so a torn or
// corrupt one is detected and the one before it used.
//
//   <log_dir>/checkpoints/ckpt-<version>.bin
//
// A checkpoint is taken right after an update (the batch is empty), so
// what it lacks is exactly the rollout log after its `received` arrivals:
// a resumed run loads it and replays only that tail (rollout_log/replay.hpp).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "learner/learner_core.hpp"

namespace rlx {

// Writes `core` (REQUIRES: its batch is empty) and prunes all but the
// newest `keep`. Returns the file written.
Result<std::filesystem::path> save_checkpoint(const LearnerCore& core, const std::filesystem::path& dir, int keep);

struct LoadedCheckpoint {
  std::shared_ptr<LearnerCore> core;
  std::filesystem::path path;
};

// Checkpoint files in `dir`, newest (highest version) first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);

// Whether `file` is named as a checkpoint is: ckpt-<version>.bin.
bool is_checkpoint_file(const std::filesystem::path& file);

// Reads one checkpoint into a fresh core built from `options`.
Result<LoadedCheckpoint> load_checkpoint(const std::filesystem::path& file, const LearnerCoreOptions& options);

// Only its trainer's state (Trainer::save_state), the file checked as
// load_checkpoint checks it: what a start from a checkpoint's weights reads.
Result<std::vector<std::uint8_t>> checkpoint_trainer_state(const std::filesystem::path& file);

}  // namespace rlx
