// At most one log line per period for one kind of event, the rest counted
// and said with the next line that goes out: a flood of failures (a sick
// sandbox pool, a port scanned) reads as a few lines with counts, not as
// millions of lines. Single-threaded (owned by one actor or object).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace rlx {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogThrottle(Clock::duration period = std::chrono::seconds(1)) : period_(period) {}

  // Whether to log an event at `now`: the number of events held back since
  // the last line that went out (0: none), or nullopt to stay quiet.
  std::optional<std::uint64_t> allow(Clock::time_point now = Clock::now()) {
    if (any_ && now - last_ < period_) {
      ++held_;
      return std::nullopt;
    }
    any_ = true;
    last_ = now;
    const auto held = held_;
    held_ = 0;
    return held;
  }

 private:
  Clock::duration period_;
  Clock::time_point last_{};
  bool any_ = false;
  std::uint64_t held_ = 0;
};

}  // namespace rlx
