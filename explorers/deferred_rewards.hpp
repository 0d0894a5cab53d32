// Segments whose episodes wait for deferred rewards (scored by the reward
// pool, e.g. a program run against hidden tests). The explorer notes each
// such episode when it ends, sends its payload to a reward worker, and
// hands every finished segment here: a segment is held until each of its
// episodes has its outcome, then released, in order. A score is added to
// the reward of the episode's last step and to the episode's return. An
// episode the machinery failed to score for good (InfraFailure) is masked
// instead: its steps in the segment get no loss, its return leaves the
// segment's list (a token row keeps its place, masked), and the failure is
// counted with the segment, as are the failures met by requests asked
// again. An outcome may come back before its segment is finished. CAF-free.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace rlx {

// The request that asks the pool to score deferred episode `id`: the env's
// payload is "TASK\nOUTPUT" (docs/external-envs.md); without a newline it
// is all output.
RewardRequestData reward_request(std::uint64_t id, std::uint32_t explorer_id, const std::string& payload);

class DeferredRewards {
 public:
  // An episode of segment `sequence` ended at step `t` in env `env`, its
  // return being the segment's episode_returns[`episode`]; its reward is
  // deferred. Returns the id to score it under.
  std::uint64_t note(std::uint64_t sequence, std::uint32_t t, std::uint32_t env, std::uint32_t episode);
  // The score of `id` (0 for one given up), with the scorer's hint for a
  // failed output ("" none; a token segment keeps it for its row, env =
  // row). Unknown ids are ignored.
  void scored(std::uint64_t id, float score, std::string hint = {});
  // The machinery failed to give `id` an outcome for good: the episode is
  // masked out (why: the reason counted).
  void failed(std::uint64_t id, InfraFailure why);
  // A request for `id` met a failure and is asked again: counted.
  void retried(std::uint64_t id, InfraFailure why);
  // A scorer spent `seconds` on a request for `id` (every answer, failed
  // ones too): added to its segment's work.score_s.
  void spent(std::uint64_t id, double seconds);
  // A complete segment, held until all its noted episodes are scored.
  void finished(Segment segment);
  // The oldest held segment if all its episodes are scored.
  std::optional<Segment> ready();
  std::size_t held() const { return held_.size(); }
  // Forgets segment `sequence`'s episodes (a segment dropped unfinished);
  // their scores, when they come, are ignored.
  void forget(std::uint64_t sequence);
  // Drops the held segments with a step newer than `version`, and their
  // episodes; returns how many.
  std::size_t drop_newer_than(std::uint64_t version);
  // Episodes noted and not yet applied to a released segment.
  std::size_t unscored() const { return slots_.size(); }

 private:
  struct Slot {
    std::uint64_t sequence = 0;
    std::uint32_t t = 0, env = 0, episode = 0;
    std::optional<float> score;          // set once the outcome is in (0 for a masked one)
    std::string hint;
    InfraFailure failure = InfraFailure::none;  // masked: why
    std::vector<InfraFailure> retried;   // failures of requests asked again
    double seconds = 0;                  // scorers' time on its requests
  };
  // Each score touches one slot and one count: a segment of B*T deferred
  // episodes costs O(B*T log) in all, not a scan per score.
  struct PerSegment {
    std::vector<std::uint64_t> ids;
    std::size_t unscored = 0;
  };
  // Applies a slot's outcome; a masked non-token episode's index goes to `dropped`.
  static void apply(Segment& s, Slot& slot, std::vector<std::uint32_t>& dropped);
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, Slot> slots_;                // noted, not yet applied to a released segment
  std::map<std::uint64_t, PerSegment> by_segment_;     // segment sequence -> its slots
  std::deque<Segment> held_;
};

}  // namespace rlx
