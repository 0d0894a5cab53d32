// The actor boundary's error policy: decode a WireMsg; on failure log it
// with the sender, count it, and let the actor carry on. Also turns kj
// and c10 exceptions from compute calls into logged, counted errors.
#pragma once

#include <optional>

#include <caf/all.hpp>

#include "core/logging.hpp"
#include "messages/codec.hpp"

namespace rlx {

// Counts malformed input by error code.
struct ErrorCounts {
  std::uint64_t total = 0;
  std::uint64_t by_code[32] = {};
  void add(Errc c) {
    ++total;
    ++by_code[static_cast<std::size_t>(c) % 32];
  }
};

template <class T, class Self>
std::optional<T> decode_or_count(Self* self, const WireMsg& msg, ErrorCounts& counts, const Logger& log,
                                 const DecodeOptions& options = {}) {
  auto r = decode<T>(msg.buf, options);
  if (r) return std::move(r).value();
  counts.add(r.error().code);
  log->warn("dropped a malformed message from {}: {}: {} ({} so far)", caf::to_string(self->current_sender()),
            to_string(r.error().code), r.error().message, counts.total);
  return std::nullopt;
}

}  // namespace rlx
