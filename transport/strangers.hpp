// Strangers: connections to a port a node opens that never became a peer.
// Each is closed within a bounded time by whoever owns the port (the head's
// front door, the bulk channel); this watch counts them by port and kind
// for metrics.jsonl and logs them with the peer's address, at most one line
// a second per port (the rest are counted and said with the next line), so
// a port scan or a flood reads as a few lines. Thread-safe; no CAF.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/log_throttle.hpp"
#include "core/logging.hpp"

namespace rlx {

enum class Stranger : std::uint8_t {
  silent,      // connected and sent nothing before the opening's deadline (or closed): scans, idle floods
  garbage,     // its first bytes are not the port's protocol
  half_open,   // a protocol's opening begun, then stalled or closed before it was whole
  over_limit,  // refused at once: too many connections not yet past their opening
  unproven,    // spoke the protocol but could not prove the cluster secret (bulk channel)
};
constexpr std::size_t kStrangerKinds = 5;
const char* stranger_name(Stranger kind);

class StrangerWatch {
 public:
  using ByKind = std::array<std::uint64_t, kStrangerKinds>;

  explicit StrangerWatch(Logger log);

  // One stranger on `port` ("head", "bulk"), from `peer`, closed; `detail`
  // says what it did ("first bytes 47 45 54 20").
  void saw(const std::string& port, Stranger kind, const std::string& peer, const std::string& detail);

  std::map<std::string, ByKind> by_port() const;
  std::uint64_t total() const;

 private:
  Logger log_;
  mutable std::mutex mu_;
  std::map<std::string, ByKind> counts_;
  std::map<std::string, LogThrottle> throttles_;
};

// The first bytes of a connection, for a log line: "47 45 54 20 2f ..." (at most 8).
std::string first_bytes_text(const std::uint8_t* data, std::size_t n);

}  // namespace rlx
