// The clock and the median every benchmark uses. Standard library only:
// bench/gpu builds it without the rest of the stack.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace rlx {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The middle value (the upper of the two middle ones for an even count); 0 for none.
inline double median(std::vector<double> xs) {
  if (xs.empty()) return 0.0;
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

}  // namespace rlx
