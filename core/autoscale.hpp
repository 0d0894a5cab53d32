// The autoscaling policy ([autoscale], docs/cluster.md): from what was
// measured over the last interval, how many explorers to add or remove.
// Too much data (segments going stale: the learner cannot keep up, and
// explorers burn compute on rollouts it throws away) removes one; too
// little (the learner idle, waiting for segments) adds one. Staleness
// wins when both show, since adding explorers cannot cure it. At most
// one step per interval, always within [min_explorers, max_explorers].
#pragma once

#include <cstdint>
#include <string>

#include "core/config.hpp"

namespace rlx {

// Measured over one interval.
struct AutoscaleSignals {
  double seconds = 0;                // the interval's length
  double learner_busy_s = 0;         // of which the learner worked (segments, updates)
  std::uint64_t segments = 0;        // segments the learner received
  std::uint64_t dropped_stale = 0;   // of which dropped as stale
  std::uint32_t explorers = 0;       // explorers running (and ordered) now
};

struct AutoscaleDecision {
  std::int32_t explorers = 0;        // explorers wanted (== signals.explorers: no change)
  std::string why;                   // what the signals showed, for the log
};

AutoscaleDecision autoscale_decision(const AutoscaleConfig& config, const AutoscaleSignals& signals);

}  // namespace rlx
