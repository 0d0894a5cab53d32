// Training from a rollout log, with no environment and no explorer.
//
// Exact: the recorded segments go through a LearnerCore in the recorded
// order with their recorded verdicts, so the updates of the original run
// happen again; every recorded weight version is compared (version and
// checksum) with the replayed one. A resumed run uses the same path to
// rebuild its learner. On CPU, with the same seed and thread count, the
// weights are bit-identical.
//
// Offline: a fresh policy trained on every recorded segment (trained or
// dropped as stale) for some passes, off-policy through the behaviour
// log-probabilities the segments carry.
#pragma once

#include <functional>
#include <memory>

#include "learner/learner_core.hpp"
#include "rollout_log/log_reader.hpp"

namespace rlx {

// Called now and then with entries read so far (progress on long logs).
using ReplayProgress = std::function<void(std::uint64_t entries, std::uint64_t updates)>;

struct VersionMismatch {
  std::uint64_t version = 0;     // recorded version
  std::uint64_t replayed_version = 0;
  std::uint64_t recorded_checksum = 0, replayed_checksum = 0;
  LogPosition where;
};

struct ExactReplay {
  std::shared_ptr<LearnerCore> core;  // the learner as the log leaves it
  ReadReport read;
  std::uint64_t segments = 0;          // rollout entries applied
  std::uint64_t versions_checked = 0;  // weight entries compared
  std::uint64_t versions_matched = 0;
  std::uint64_t admission_mismatches = 0;  // recorded learner version at admission != replayed
  std::uint64_t failed_updates = 0;        // batches whose update failed: in the log (not trained here
                                           // either) or here (the trainer refused, as the live run did)
  std::uint64_t batch_mismatches = 0;      // the log's failed update was of another batch than the replay's
  std::vector<VersionMismatch> mismatches; // the first few
  std::uint64_t last_version = 0, last_checksum = 0;
  std::uint64_t skipped = 0;               // arrivals a starting checkpoint already held
  double seconds = 0;
  // A replayed version differs from the log's, or a segment was admitted at another version.
  bool diverged() const {
    return versions_checked != versions_matched || admission_mismatches != 0 || batch_mismatches != 0;
  }
  // At least one version was checked and none diverged (nothing checked proves nothing).
  bool identical() const { return versions_checked > 0 && !diverged(); }
  // The first divergence, in words ("" none).
  std::string first_divergence() const;
};

// With `start` (a core loaded from a checkpoint) the replay goes on from
// it: its first start->received() arrivals, and the versions before its
// own, are skipped (`skipped` counts them; fewer than received() means the
// checkpoint is ahead of the log, which the caller must not use).
Result<ExactReplay> replay_exact(const std::filesystem::path& log, const LearnerCoreOptions& core,
                                 const ReadOptions& read, const ReplayProgress& progress = {},
                                 std::shared_ptr<LearnerCore> start = nullptr);

struct OfflineOptions {
  TrainerOptions trainer;
  std::size_t batch_segments = 4;
  int passes = 4;                // passes over the log's segments
  bool include_stale = true;     // dropped-as-stale segments are data too
  std::uint64_t shuffle_seed = 1;
};

struct OfflineTraining {
  WeightSetData weights;
  ReadReport read;
  std::uint64_t segments = 0;   // segments in the training set
  std::uint64_t updates = 0;
  double seconds = 0;
};

// Called now and then with the updates done and the updates all passes make.
using OfflineProgress = std::function<void(std::uint64_t updates, std::uint64_t total)>;

Result<OfflineTraining> train_offline(const std::filesystem::path& log, const OfflineOptions& options,
                                      const ReadOptions& read, const OfflineProgress& progress = {});

// The first RunStart of the log (its config text and source).
Result<RunStartData> first_run_start(const std::filesystem::path& log);

}  // namespace rlx
