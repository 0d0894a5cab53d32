// What an explorer actor needs of its compute, whichever policy it runs:
// the weights in use, the segment in hand (how far along, the newest
// version in it, dropping it). Rollout (vector observations, stepped
// environments) and TokenRollout (token sequences) both are one.
#pragma once

#include <cstdint>

#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  // Swaps in new weights (between steps). Errors leave the old weights.
  virtual Result<void> load_weights(const WeightSetData& weights) = 0;
  virtual std::uint64_t version() const = 0;
  // Steps since the last segment was taken: what pacing counts (0: the
  // next step starts a segment, so staleness and credits are checked).
  virtual std::uint64_t steps_in_segment() const = 0;
  // The newest version among everything in hand that a segment may yet
  // carry (0: none). For stepped environments that is the segment's
  // steps; agent episodes outlive segments, so their tokens count even
  // when steps_in_segment() is 0 (a segment was just taken).
  virtual std::uint64_t newest_in_hand() const = 0;
  // Drops everything in hand; returns the sequence of the segment dropped.
  virtual std::uint64_t drop_segment() = 0;
};

}  // namespace rlx
