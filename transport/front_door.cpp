#include "transport/front_door.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/log_throttle.hpp"
#include "transport/sockets.hpp"

namespace rlx {

OpeningCheck basp_opening() {
  // CAF 0.17 io/basp/header.hpp: operation (u8), two pads, flags (u8),
  // payload_len (u32), operation_data (u64), source and dest actor (u64
  // each), in network byte order; message_type::client_handshake = 1.
  constexpr std::size_t kHeader = 32;
  constexpr std::uint32_t kMaxPayload = 1u << 20;
  return [](std::span<const std::uint8_t> b) -> Opening {
    if (b.empty()) return {};
    if (b[0] != 0x01) return {Opening::refuse, "not a BASP client handshake"};
    if (b.size() < kHeader) return {};
    const std::uint32_t payload = (std::uint32_t{b[4]} << 24) | (std::uint32_t{b[5]} << 16) |
                                  (std::uint32_t{b[6]} << 8) | std::uint32_t{b[7]};
    if (payload > kMaxPayload) return {Opening::refuse, fmt::format("a BASP handshake of {} bytes", payload)};
    if (b.size() < kHeader + payload) return {};
    return {Opening::admit, ""};
  };
}

OpeningCheck tls_opening() {
  // RFC 8446 5.1: content type 22 (handshake), legacy version 3.x, a length
  // of at most 2^14 (+256 for older records).
  constexpr std::size_t kRecordHeader = 5;
  return [](std::span<const std::uint8_t> b) -> Opening {
    if (b.empty()) return {};
    if (b[0] != 0x16) return {Opening::refuse, "not a TLS handshake record"};
    if (b.size() >= 2 && b[1] != 0x03) return {Opening::refuse, "not a TLS version"};
    if (b.size() < kRecordHeader) return {};
    const std::size_t len = (std::size_t{b[3]} << 8) | b[4];
    if (len == 0 || len > 16384 + 256) return {Opening::refuse, fmt::format("a TLS record of {} bytes", len)};
    if (b.size() < kRecordHeader + len) return {};
    return {Opening::admit, ""};
  };
}

// Named, not anonymous: FrontDoor::Impl (declared in the header) holds
// these types, which a unity build would otherwise warn of.
namespace front_door {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kBuffer = 256 * 1024;  // per direction and connection

// Bytes in flight one way: read from one socket, not yet written to the other.
struct Pipe {
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(kBuffer);
  std::size_t begin = 0, end = 0;
  bool eof = false;   // the source closed its side
  bool shut = false;  // and that was passed on
  std::size_t size() const { return end - begin; }
  std::size_t space() const { return buf.size() - end; }
};

enum class Io { ok, closed, failed };

// Reads what `fd` has into `p` (until it would block or `p` is full).
Io fill(int fd, Pipe& p) {
  while (p.space() > 0) {
    const auto r = ::recv(fd, p.buf.data() + p.end, p.space(), 0);
    if (r > 0) {
      p.end += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    return (errno == EAGAIN || errno == EWOULDBLOCK) ? Io::ok : Io::failed;
  }
  return Io::ok;
}

// Writes what `p` holds to `fd` (until it would block).
Io drain(int fd, Pipe& p) {
  while (p.size() > 0) {
    const auto w = ::send(fd, p.buf.data() + p.begin, p.size(), MSG_NOSIGNAL);
    if (w > 0) {
      p.begin += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) ? Io::ok : Io::failed;
  }
  p.begin = p.end = 0;
  return Io::ok;
}

// A connection in its opening or relayed.
struct Conn {
  int outer = -1, inner = -1;
  std::string peer;
  Clock::time_point deadline;
  bool connecting = true;  // the inner connection is not yet made
  bool admitted = false;
  bool done = false;
  Pipe up;    // client -> library (held back until admitted)
  Pipe down;  // library -> client
};

}  // namespace front_door

using namespace front_door;

struct FrontDoor::Impl {
  FrontDoorOptions options;
  int listener = -1;
  int wake = -1;
  std::uint16_t port = 0;
  std::thread thread;
  std::list<Conn> conns;
  LogThrottle inner_throttle;
  mutable std::mutex mu;
  Counts counts;

  void stranger(Conn& c, Stranger kind, const std::string& detail) {
    c.done = true;
    if (options.watch)
      options.watch->saw(options.name, kind, c.peer, detail);
    else
      options.log->warn("stranger on the {} port from {}: {} ({}), closed", options.name, c.peer, stranger_name(kind),
                        detail);
  }

  std::string opening_text(const Conn& c) const {
    return first_bytes_text(c.up.buf.data() + c.up.begin, c.up.size());
  }

  void judge(Conn& c) {
    const Opening o = options.opening({c.up.buf.data() + c.up.begin, c.up.size()});
    if (o.verdict == Opening::admit) {
      c.admitted = true;
      std::lock_guard<std::mutex> lock(mu);
      ++counts.admitted;
    } else if (o.verdict == Opening::refuse) {
      stranger(c, Stranger::garbage, o.why + ", " + opening_text(c));
    } else if (c.up.space() == 0) {
      stranger(c, Stranger::garbage, fmt::format("no opening in {} bytes, {}", c.up.size(), opening_text(c)));
    }
  }

  void inner_failed(Conn& c, const std::string& why) {
    c.done = true;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counts.inner_failed;
    }
    if (auto held = inner_throttle.allow())
      options.log->error("{} port: cannot relay the connection from {} to 127.0.0.1:{}: {}{}", options.name, c.peer,
                         options.inner_port, why, *held ? fmt::format(" ({} more)", *held) : "");
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN; or out of descriptors, tried again on the next wake
      }
      const std::string peer = peer_name(addr);
      const auto pending = static_cast<std::size_t>(
          std::count_if(conns.begin(), conns.end(), [](const Conn& c) { return !c.admitted && !c.done; }));
      if (pending >= options.max_pending || conns.size() >= options.max_connections) {
        const std::string detail = fmt::format("{} connections in their opening, {} open", pending, conns.size());
        if (options.watch) options.watch->saw(options.name, Stranger::over_limit, peer, detail);
        ::close(fd);  // counted first: whoever sees the close sees the count
        continue;
      }
      tune_connection(fd);
      Conn& c = conns.emplace_back();
      c.outer = fd;
      c.peer = peer;
      c.deadline = Clock::now() + options.opening_timeout;
      c.inner = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c.inner < 0) {
        inner_failed(c, std::strerror(errno));
        continue;
      }
      tune_connection(c.inner);
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(options.inner_port);
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(c.inner, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0)
        c.connecting = false;
      else if (errno != EINPROGRESS)
        inner_failed(c, std::strerror(errno));
    }
  }

  // Everything the poll said about one connection.
  void serve(Conn& c, short outer_events, short inner_events) {
    if (c.connecting && inner_events) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c.inner, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return inner_failed(c, std::strerror(err));
      c.connecting = false;
    }
    if (outer_events && !c.up.eof) {
      const std::size_t before = c.up.size();
      const Io r = fill(c.outer, c.up);
      if (r == Io::failed) {
        if (!c.admitted) stranger(c, c.up.size() ? Stranger::half_open : Stranger::silent, "reset");
        c.done = true;
        return;
      }
      if (!c.admitted && c.up.size() > before) judge(c);
      if (c.done) return;
      if (r == Io::closed) {
        c.up.eof = true;
        if (!c.admitted)
          return stranger(c, c.up.size() ? Stranger::half_open : Stranger::silent,
                          c.up.size() ? "closed in its opening, " + opening_text(c) : "closed without a byte");
      }
    }
    if (inner_events && !c.connecting && !c.down.eof) {
      const Io r = fill(c.inner, c.down);
      if (r == Io::failed) {
        c.done = true;
        return;
      }
      if (r == Io::closed) c.down.eof = true;
    }
    if (drain(c.outer, c.down) == Io::failed || (c.admitted && !c.connecting && drain(c.inner, c.up) == Io::failed)) {
      c.done = true;
      return;
    }
    // A side that closed is closed on the other side once its bytes are through.
    if (c.admitted && c.up.eof && c.up.size() == 0 && !c.up.shut) {
      ::shutdown(c.inner, SHUT_WR);
      c.up.shut = true;
    }
    if (c.down.eof && c.down.size() == 0 && !c.down.shut) {
      ::shutdown(c.outer, SHUT_WR);
      c.down.shut = true;
    }
    if ((c.up.shut && c.down.shut) || (!c.admitted && c.down.shut)) c.done = true;
  }

  void expire(Clock::time_point now) {
    for (auto& c : conns) {
      if (c.admitted || c.done || now < c.deadline) continue;
      const auto limit = std::chrono::duration<double>(options.opening_timeout).count();
      if (c.up.size() == 0)
        stranger(c, Stranger::silent, fmt::format("nothing sent in {:.3g} s", limit));
      else
        stranger(c, Stranger::half_open, fmt::format("opening incomplete after {:.3g} s, {}", limit, opening_text(c)));
    }
  }

  void reap() {
    for (auto it = conns.begin(); it != conns.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      ::close(it->outer);
      if (it->inner >= 0) ::close(it->inner);
      it = conns.erase(it);
    }
    std::lock_guard<std::mutex> lock(mu);
    counts.open = conns.size();
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake, POLLIN, 0});
      fds.push_back({listener, POLLIN, 0});
      auto next_deadline = Clock::time_point::max();
      for (auto& c : conns) {
        short out = 0, in = 0;
        if (!c.up.eof && c.up.space() > 0) out |= POLLIN;
        if (c.down.size() > 0) out |= POLLOUT;
        if (c.connecting) in |= POLLOUT;
        if (!c.connecting && !c.down.eof && c.down.space() > 0) in |= POLLIN;
        if (!c.connecting && c.admitted && c.up.size() > 0) in |= POLLOUT;
        fds.push_back({c.outer, out, 0});
        fds.push_back({c.inner, in, 0});
        if (!c.admitted) next_deadline = std::min(next_deadline, c.deadline);
      }
      int timeout = -1;
      if (next_deadline != Clock::time_point::max()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - Clock::now()).count();
        timeout = static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0) {
        if (errno == EINTR) continue;
        options.log->error("{} port: poll failed: {}", options.name, std::strerror(errno));
        return;
      }
      if (fds[0].revents) return;
      // The connections polled come first in `conns`; the ones accepted now are appended after them.
      std::size_t i = 2;
      for (auto& c : conns) {
        if (i >= fds.size()) break;
        const short out = fds[i].revents, in = fds[i + 1].revents;
        i += 2;
        if (!c.done && (out || in)) serve(c, out, in);
      }
      if (fds[1].revents) accept_all();
      expire(Clock::now());
      reap();
    }
  }
};

FrontDoor::FrontDoor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<FrontDoor>> FrontDoor::start(FrontDoorOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (!impl->options.log) impl->options.log = null_logger();
  if (!impl->options.opening) return make_error(Errc::config_missing, "a front door needs an opening check");
  auto l = listen_tcp(impl->options.host, impl->options.port, impl->options.name + " port", 256);
  if (!l) return l.error();
  set_nonblocking(l->fd);
  impl->listener = l->fd;
  impl->port = l->port;
  impl->wake = ::eventfd(0, EFD_CLOEXEC);
  if (impl->wake < 0) {
    ::close(impl->listener);
    return socket_error(impl->options.name + " port: eventfd");
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<FrontDoor>(new FrontDoor(std::move(impl)));
}

FrontDoor::~FrontDoor() {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(impl_->wake, &one, sizeof one);
  impl_->thread.join();
  for (auto& c : impl_->conns) {
    ::close(c.outer);
    if (c.inner >= 0) ::close(c.inner);
  }
  ::close(impl_->listener);
  ::close(impl_->wake);
}

std::uint16_t FrontDoor::port() const { return impl_->port; }

FrontDoor::Counts FrontDoor::counts() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counts;
}

}  // namespace rlx
