// The front door of a port whose protocol belongs to a library (the head's
// CAF port): it listens on the public address and relays each connection,
// byte for byte, to the library's own listener on 127.0.0.1, but only once
// the client's opening bytes are the protocol's (an OpeningCheck). Until
// then the client gets what the library sends (a BASP server speaks first)
// and nothing it sent reaches the library. A connection whose opening is
// garbage, incomplete past the deadline, or silent is closed and reported
// to the StrangerWatch; more than max_pending connections in their opening
// are refused at once. One thread, poll(); bounded buffers per connection.
// No CAF.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "transport/strangers.hpp"

namespace rlx {

struct Opening {
  enum Verdict { more, admit, refuse } verdict = more;
  std::string why;  // for refuse: what was wrong
};
// Judges a client's first bytes (everything it sent so far).
using OpeningCheck = std::function<Opening(std::span<const std::uint8_t> first)>;

// CAF 0.17's BASP: a client's first message is a client handshake (a 32-byte
// header, operation 1, then its payload).
OpeningCheck basp_opening();
// TLS: a whole handshake record (a ClientHello) first.
OpeningCheck tls_opening();

struct FrontDoorOptions {
  std::string name = "head";         // the port, in counts and logs
  std::string host;                  // public address ("" = every address)
  std::uint16_t port = 0;            // 0: a free one
  std::uint16_t inner_port = 0;      // the library's listener on 127.0.0.1
  OpeningCheck opening;
  std::chrono::milliseconds opening_timeout{10'000};
  std::size_t max_pending = 64;      // connections in their opening at once
  std::size_t max_connections = 4096;
  std::shared_ptr<StrangerWatch> watch;  // null: strangers only logged
  Logger log;
};

class FrontDoor {
 public:
  static Result<std::unique_ptr<FrontDoor>> start(FrontDoorOptions options);
  ~FrontDoor();  // closes every connection, joins the thread
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  std::uint16_t port() const;
  struct Counts {
    std::uint64_t admitted = 0;   // connections relayed to the library
    std::uint64_t open = 0;       // connections open now (in their opening or relayed)
    std::uint64_t inner_failed = 0;  // the library's listener did not take a connection
  };
  Counts counts() const;

  struct Impl;

 private:
  explicit FrontDoor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx
