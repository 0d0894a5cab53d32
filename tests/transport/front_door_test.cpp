// The head's front door (transport/front_door): relays a peer that opens
// with its protocol, closes and counts every kind of stranger, and lets
// nothing a stranger sent reach the library behind it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <random>
#include <thread>
#include <vector>

#include "transport/front_door.hpp"
#include "transport/sockets.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace rlx::test;
using namespace std::chrono_literals;

namespace {

const std::string kGreeting = "SERVER-FIRST";  // the library speaks first, as a BASP server does
const std::string kOpening = "RLX1";

// The library behind the door: greets every connection, then echoes what
// it receives until the peer closes; counts every byte it was sent.
struct EchoLibrary {
  Listener listener;
  std::atomic<std::uint64_t> received{0};
  std::atomic<bool> stopping{false};
  std::vector<std::thread> threads;
  std::thread acceptor;

  EchoLibrary() {
    auto l = listen_tcp("127.0.0.1", 0, "echo");
    REQUIRE(l.ok());
    listener = *l;
    acceptor = std::thread([this] {
      for (;;) {
        const int fd = ::accept(listener.fd, nullptr, nullptr);
        if (fd < 0 || stopping) {
          if (fd >= 0) ::close(fd);
          return;
        }
        threads.emplace_back([this, fd] {
          (void)::send(fd, kGreeting.data(), kGreeting.size(), MSG_NOSIGNAL);
          std::vector<char> buf(65536);
          for (;;) {
            const auto r = ::recv(fd, buf.data(), buf.size(), 0);
            if (r <= 0) break;
            received += static_cast<std::uint64_t>(r);
            for (std::size_t off = 0; off < static_cast<std::size_t>(r);) {
              const auto w = ::send(fd, buf.data() + off, static_cast<std::size_t>(r) - off, MSG_NOSIGNAL);
              if (w <= 0) break;
              off += static_cast<std::size_t>(w);
            }
          }
          ::close(fd);
        });
      }
    });
  }
  ~EchoLibrary() {
    stopping = true;
    ::shutdown(listener.fd, SHUT_RDWR);
    acceptor.join();
    for (auto& t : threads) t.join();
    ::close(listener.fd);
  }
};

OpeningCheck rlx1_opening() {
  return [](std::span<const std::uint8_t> b) -> Opening {
    for (std::size_t i = 0; i < b.size() && i < kOpening.size(); ++i)
      if (b[i] != static_cast<std::uint8_t>(kOpening[i])) return {Opening::refuse, "not RLX1"};
    return {b.size() >= kOpening.size() ? Opening::admit : Opening::more, ""};
  };
}

std::unique_ptr<FrontDoor> door_to(const EchoLibrary& lib, std::shared_ptr<StrangerWatch> watch,
                                   std::chrono::milliseconds timeout = 10s, std::size_t max_pending = 64) {
  FrontDoorOptions o;
  o.name = "test";
  o.host = "127.0.0.1";
  o.inner_port = lib.listener.port;
  o.opening = rlx1_opening();
  o.opening_timeout = timeout;
  o.max_pending = max_pending;
  o.watch = std::move(watch);
  auto d = FrontDoor::start(o);
  REQUIRE(d.ok());
  return std::move(*d);
}

void send_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const auto w = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    REQUIRE(w > 0);
    off += static_cast<std::size_t>(w);
  }
}

std::string read_exactly(int fd, std::size_t n) {
  std::string s(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const auto r = ::recv(fd, s.data() + got, n - got, 0);
    REQUIRE(r > 0);
    got += static_cast<std::size_t>(r);
  }
  return s;
}

// Reads until the other side closes; what arrived.
std::string read_to_end(int fd) {
  std::string s;
  char buf[4096];
  for (;;) {
    const auto r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    s.append(buf, static_cast<std::size_t>(r));
  }
  return s;
}

std::uint64_t count(const StrangerWatch& w, Stranger kind) {
  const auto all = w.by_port();
  const auto it = all.find("test");
  return it == all.end() ? 0 : it->second[static_cast<std::size_t>(kind)];
}

}  // namespace

TEST_CASE("the front door relays a peer that opens with the protocol, both ways and byte for byte, and passes on a close",
          "[transport][door][net]") {
  EchoLibrary lib;
  auto watch = std::make_shared<StrangerWatch>(null_logger());
  auto door = door_to(lib, watch);

  const int fd = connect_local(door->port());
  CHECK(read_exactly(fd, kGreeting.size()) == kGreeting);  // the library's first words reach a client not yet admitted
  std::mt19937 rng(11);
  std::string payload(4 << 20, '\0');  // more than the door buffers, so both directions wait on each other
  for (auto& c : payload) c = static_cast<char>(rng());
  const std::string sent = kOpening + payload;
  std::thread writer([&] {
    send_all(fd, sent);
    ::shutdown(fd, SHUT_WR);  // the library sees the close, and closes in turn
  });
  const std::string echoed = read_to_end(fd);
  writer.join();
  ::close(fd);
  CHECK(echoed.size() == sent.size());
  CHECK(echoed == sent);
  CHECK(lib.received == sent.size());
  CHECK(door->counts().admitted == 1);
  CHECK(watch->total() == 0);
}

TEST_CASE("strangers at the front door are closed within the opening timeout, counted by kind, and reach nothing behind it",
          "[transport][door][defensive][net]") {
  EchoLibrary lib;
  auto watch = std::make_shared<StrangerWatch>(null_logger());
  auto door = door_to(lib, watch, 300ms, 4);

  {  // says nothing
    const int fd = connect_local(door->port());
    CHECK(read_to_end(fd) == kGreeting);  // the greeting, then the door closes it
    ::close(fd);
  }
  {  // speaks another protocol
    const int fd = connect_local(door->port());
    send_all(fd, "GET / HTTP/1.0\r\n\r\n");
    CHECK(closed_by_peer(fd));
  }
  {  // begins the opening and stalls
    const int fd = connect_local(door->port());
    send_all(fd, kOpening.substr(0, 2));
    CHECK(closed_by_peer(fd));
  }
  {  // begins the opening and hangs up
    const int fd = connect_local(door->port());
    send_all(fd, kOpening.substr(0, 3));
    ::shutdown(fd, SHUT_WR);
    CHECK(closed_by_peer(fd));
  }
  {  // a flood of idle connections: four wait their opening, the rest are refused at once
    std::vector<int> fds;
    for (int i = 0; i < 10; ++i) fds.push_back(connect_local(door->port()));
    for (int fd : fds) CHECK(closed_by_peer(fd));
  }
  CHECK(count(*watch, Stranger::silent) == 1 + 4);
  CHECK(count(*watch, Stranger::garbage) == 1);
  CHECK(count(*watch, Stranger::half_open) == 2);
  CHECK(count(*watch, Stranger::over_limit) == 6);
  CHECK(lib.received == 0);  // not one stranger's byte went past the door
  CHECK(door->counts().admitted == 0);

  // The door still lets a real peer in.
  const int fd = connect_local(door->port());
  CHECK(read_exactly(fd, kGreeting.size()) == kGreeting);
  send_all(fd, kOpening + "hello");
  CHECK(read_exactly(fd, kOpening.size() + 5) == kOpening + "hello");
  ::close(fd);
  CHECK(door->counts().admitted == 1);
}

TEST_CASE("the front door's openings: a BASP client handshake and a TLS ClientHello, judged from their first bytes",
          "[transport][door]") {
  const auto basp = basp_opening();
  std::vector<std::uint8_t> hs(32 + 5, 0);
  hs[0] = 0x01;  // client_handshake
  hs[7] = 5;     // payload_len, network order
  CHECK(basp({hs.data(), 0}).verdict == Opening::more);
  CHECK(basp({hs.data(), 31}).verdict == Opening::more);
  CHECK(basp({hs.data(), 36}).verdict == Opening::more);
  CHECK(basp({hs.data(), 37}).verdict == Opening::admit);
  hs[0] = 0x00;  // a server handshake is not a client's opening
  CHECK(basp({hs.data(), 37}).verdict == Opening::refuse);
  hs[0] = 0x01;
  hs[4] = 0x7f;  // a payload of ~2 GB
  CHECK(basp({hs.data(), 37}).verdict == Opening::refuse);

  const auto tls = tls_opening();
  std::vector<std::uint8_t> hello = {0x16, 0x03, 0x01, 0x00, 0x04, 1, 2, 3, 4};
  CHECK(tls({hello.data(), 3}).verdict == Opening::more);
  CHECK(tls({hello.data(), 8}).verdict == Opening::more);
  CHECK(tls({hello.data(), 9}).verdict == Opening::admit);
  const std::uint8_t http[] = {'G', 'E', 'T'};
  CHECK(tls({http, 3}).verdict == Opening::refuse);
}
