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
  virtual std::uint64_t steps_in_segment() const = 0;
  // The newest version among the steps of the segment in hand (0: none).
  virtual std::uint64_t newest_in_segment() const = 0;
  // Drops the segment in hand; returns its sequence.
  virtual std::uint64_t drop_segment() = 0;
};

}  // namespace rlx
