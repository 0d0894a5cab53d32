// The learner's loop without the actor: admission (or a verdict replayed
// from the log), run counters, batching, one Trainer update per full
// batch, and when to publish. The learner actor and `rlx replay` both
// drive it, so a replayed log goes through exactly the code the live run
// went through.
#pragma once

#include <map>
#include <memory>
#include <optional>

#include "learner/admission.hpp"
#include "learner/run_stats.hpp"
#include "learner/trainer.hpp"

namespace rlx {

struct LearnerCoreOptions {
  TrainerOptions trainer;          // trainer.group: the data-parallel ranks, or null
  std::uint64_t max_staleness = 4;
  std::size_t batch_segments = 4;  // per rank: an update takes batch_segments x ranks
  std::uint64_t publish_every = 1;
};

// A segment's fate at the learner's door.
struct Arrival {
  Verdict verdict = Verdict::trained;
  std::uint64_t lag = 0;
  std::string reason;        // why dropped or rejected
  std::uint64_t version = 0; // learner version at admission
  std::uint64_t index = 0;   // order of arrival, from 0
};

class LearnerCore {
 public:
  explicit LearnerCore(const LearnerCoreOptions& options);

  // Live: `segment` decoded (nullopt: it failed decoding, `reject_reason`
  // says why); a segment the trainer cannot train on (Trainer::refuses)
  // is rejected; admission decides the rest. A trained segment joins the batch.
  Arrival admit(std::optional<Segment> segment, const std::string& reject_reason);
  // Replay: the verdict recorded in the log is applied as it was.
  Arrival admit_recorded(const RolloutRecordData& record, std::optional<Segment> segment);

  bool batch_full() const { return batch_.size() >= options_.batch_segments * world(); }
  std::size_t batch_size() const { return batch_.size(); }
  // One update on the batch, which is cleared either way. On success the
  // version grows by one; on failure the batch's segments are counted as
  // update_failed, no longer trained. Data-parallel: the batch goes to every rank
  // (rank r trains on slice r) first. A dead rank, or an update that
  // failed on rank 0 or any other, is an Errc::group_broken error: the group
  // is broken and the learner must stop.
  Result<UpdateStats> train();
  // The batch's update failed elsewhere (a replayed log says so): its
  // segments count as update_failed, and it is cleared.
  void drop_batch();
  // Segments admitted to a batch whose update failed: every arrival is
  // rejected, dropped stale, trained or this (the counts are checkpointed).
  std::uint64_t update_failed() const {
    const auto s = admission_.state();
    const std::uint64_t judged = s.accepted + s.dropped + s.rejected;
    return received_ > judged ? received_ - judged : 0;
  }
  // After a successful train(): whether this version is to be published.
  bool publish_due() const { return updates_ % options_.publish_every == 0; }
  // The current weights (with their checksum).
  WeightSetData weights() const;
  // The same as the message to publish (Trainer::encoded_weights).
  EncodedWeightSet encoded_weights(std::uint64_t created_unix_ns) const;

  Trainer& trainer() { return *trainer_; }
  const Trainer& trainer() const { return *trainer_; }
  Admission& admission() { return admission_; }
  const Admission& admission() const { return admission_; }
  const RunStats& stats() const { return stats_; }
  std::uint64_t received() const { return received_; }
  // Segments received per explorer id, any verdict (kUnattributed: an
  // undecodable one from an unknown sender). Live, the learner actor
  // counts each arrival (it knows the sender); a replay counts by the
  // recorded segment; checkpoints keep them. What the coordinator's
  // accounting compares with what explorers say they made.
  static constexpr std::uint32_t kUnattributed = UINT32_MAX;
  void count_from(std::uint32_t explorer) { ++by_explorer_[explorer]; }
  const std::map<std::uint32_t, std::uint64_t>& by_explorer() const { return by_explorer_; }
  void restore_by_explorer(std::map<std::uint32_t, std::uint64_t> counts) { by_explorer_ = std::move(counts); }
  std::uint64_t updates() const { return updates_; }
  const LearnerCoreOptions& options() const { return options_; }
  std::size_t world() const;
  // Counters from a checkpoint (learner/checkpoint.hpp). False when the
  // admission state does not fit this core's max_staleness.
  bool restore(std::uint64_t received, std::uint64_t updates, const Admission::State& admission,
               const RunStats::State& stats);

 private:
  LearnerCoreOptions options_;
  std::unique_ptr<Trainer> trainer_;
  Admission admission_;
  RunStats stats_;
  std::vector<Segment> batch_;
  std::uint64_t received_ = 0, updates_ = 0;
  std::map<std::uint32_t, std::uint64_t> by_explorer_;
};

// The loop of a data-parallel rank other than 0: receives each batch from
// rank 0, trains on its slice (in step with rank 0), until rank 0 releases
// it (returns the updates done) or the group breaks (an Errc::group_broken error).
Result<std::uint64_t> run_learner_rank(const TrainerOptions& trainer, std::size_t batch_segments);

// Rank 0, at the end: tells the other ranks' loops to return.
void release_learner_ranks(LearnerGroup& group);

// A batch as bytes for the ranks, and back (length-prefixed envelopes).
std::vector<std::uint8_t> pack_segments(const std::vector<Segment>& segments);
Result<std::vector<Segment>> unpack_segments(const std::vector<std::uint8_t>& bytes);

}  // namespace rlx
