// The explorer's compute: batched action selection for B environments,
// segment building (with the policy version of every step), episode
// bookkeeping and weight swaps. CAF-free; one explorer actor owns one.
//
// Protocol per step:  act(current observations) -> actions for the env;
// observe(env result) -> true when a segment of T steps is complete, then
// take_segment(). Weights may be swapped between any two steps.
#pragma once

#include <cstdint>
#include <string>
#include <random>
#include <vector>

#include <memory>

#include "core/config.hpp"
#include "core/error.hpp"
#include "explorers/segment_source.hpp"
#include "messages/types.hpp"

namespace rlx {

struct RolloutOptions {
  std::uint32_t explorer_id = 0;
  std::int64_t num_envs = 16;       // B
  std::int64_t obs_dim = 4;
  std::int64_t num_actions = 2;
  std::int64_t segment_steps = 64;  // T
  std::uint64_t seed = 1;
  PolicyConfig policy;
};

class Rollout : public SegmentSource {
 public:
  explicit Rollout(const RolloutOptions& options);
  ~Rollout() override;

  // Chooses actions for `observations` ([B, obs_dim]) with the current
  // weights and records them as the next step of the segment.
  const std::vector<std::int64_t>& act(const std::vector<float>& observations);

  // Records the env's answer to the last act(); returns true when the
  // segment is complete. REQUIRES: act() was called before.
  bool observe(const EnvStepResultData& result);

  // Moves the complete segment out and starts the next one.
  Segment take_segment();

  // Swaps in new weights (between steps). Errors leave the old weights.
  Result<void> load_weights(const WeightSetData& weights) override;

  std::uint64_t version() const override { return version_; }
  std::uint64_t steps_in_segment() const override { return t_; }
  // The newest version among the steps of the segment in hand (0: none).
  std::uint64_t newest_in_hand() const override;
  // Drops the steps of the segment in hand and starts the next one (a new
  // sequence number); the environments and their running episodes go on.
  // Returns the dropped segment's sequence. REQUIRES: no act() awaiting
  // its observe().
  std::uint64_t drop_segment() override;

  // Episodes whose reward is deferred (the env gave a reward payload when
  // they ended), noted by the last observe(): where they are and what to score.
  struct DeferredEpisode {
    std::uint64_t sequence = 0;   // their segment
    std::uint32_t t = 0, env = 0;
    std::uint32_t episode = 0;    // index in the segment's episode_returns
    std::string payload;
  };
  const std::vector<DeferredEpisode>& deferred() const { return deferred_; }

 private:
  void start_segment();

  struct Policy;  // LibTorch module, kept out of this header (compile time)
  RolloutOptions options_;
  std::unique_ptr<Policy> policy_;
  std::mt19937_64 rng_;
  std::uint64_t version_ = 0;
  Segment seg_;
  std::uint64_t t_ = 0;
  std::uint64_t sequence_ = 0;
  bool acted_ = false;
  std::vector<std::int64_t> actions_;
  std::vector<float> episode_return_;      // [B] running
  std::vector<std::uint32_t> episode_len_; // [B] running
  std::vector<DeferredEpisode> deferred_;
};

}  // namespace rlx
