// The wall clock as RLX records it: nanoseconds since the Unix epoch
// (segments' and weight sets' created_unix_ns, log records, run starts).
// Plain C++; header-only.
#pragma once

#include <chrono>
#include <cstdint>

namespace rlx {

inline std::uint64_t unix_now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace rlx
