#include "core/autoscale.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace rlx {

AutoscaleDecision autoscale_decision(const AutoscaleConfig& c, const AutoscaleSignals& s) {
  const auto n = static_cast<std::int64_t>(s.explorers);
  const auto lo = c.min_explorers, hi = c.max_explorers;
  AutoscaleDecision d{static_cast<std::int32_t>(n), ""};
  if (n < lo) return {static_cast<std::int32_t>(lo), fmt::format("{} explorers, below min_explorers {}", n, lo)};
  if (n > hi) return {static_cast<std::int32_t>(hi), fmt::format("{} explorers, above max_explorers {}", n, hi)};
  if (s.seconds <= 0) return d;
  const double idle = std::clamp(1.0 - s.learner_busy_s / s.seconds, 0.0, 1.0);
  const double stale = s.segments ? static_cast<double>(s.dropped_stale) / static_cast<double>(s.segments) : 0.0;
  if (stale > c.stale_above && n > lo)
    return {static_cast<std::int32_t>(n - 1),
            fmt::format("{:.0f}% of segments dropped stale over {:.1f} s (> {:.0f}%)", 100 * stale, s.seconds,
                        100 * c.stale_above)};
  if (idle > c.idle_above && stale <= c.stale_above && n < hi)
    return {static_cast<std::int32_t>(n + 1),
            fmt::format("learner idle {:.0f}% of {:.1f} s (> {:.0f}%)", 100 * idle, s.seconds, 100 * c.idle_above)};
  return d;
}

}  // namespace rlx
