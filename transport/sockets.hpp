// Plain TCP pieces shared by the ports a node opens itself (the bulk
// channel, the head's front door): listening, naming a peer, tuning a
// connection. POSIX sockets; no CAF.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace rlx {

// An Errc::io error: `what` and errno's text.
Error socket_error(const std::string& what);

struct Listener {
  int fd = -1;             // the caller closes it
  std::uint16_t port = 0;  // the port bound (a free one when 0 was asked)
};

// Listens on host:port ("" = every address, port 0 = a free one), close-on-exec.
// `what` names the port in errors ("bulk channel").
Result<Listener> listen_tcp(const std::string& host, std::uint16_t port, const std::string& what, int backlog = 64);

// "1.2.3.4:5678" or "[::1]:5678".
std::string peer_name(const sockaddr_storage& address);

// TCP_NODELAY and keep-alive.
void tune_connection(int fd);

// SO_RCVTIMEO and SO_SNDTIMEO (a blocking connect() is bounded by the latter).
void set_io_timeout(int fd, std::chrono::milliseconds timeout);

void set_nonblocking(int fd);

}  // namespace rlx
