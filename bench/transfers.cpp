#include "bench/transfers.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include <caf/io/all.hpp>

#include "actors/interfaces.hpp"
#include "assembly/remote.hpp"
#include "bench/common.hpp"
#include "messages/codec.hpp"
#include "transport/front_door.hpp"
#include "transport/weight_bulk.hpp"
#include "transport/weight_shelf.hpp"

namespace rlx {
namespace {

// Counts segments and acknowledges each to its sender (the learner's credit).
caf::behavior segment_sink(caf::event_based_actor* self, int) {  // (an argument: CAF 0.17 binds a null tuple for an argument-less function actor)
  return {[self](segment_atom, const WireMsg&) {
    self->send(caf::actor_cast<caf::actor>(self->current_sender()), ack_atom::value);
  }};
}

}  // namespace

BenchNode::BenchNode(const ClusterConfig& c) : cfg(std::make_unique<caf::actor_system_config>()) {
  configure_remoting(*cfg, c);
  cfg->set("scheduler.max-threads", 2);
  cfg->set("logger.verbosity", caf::atom("quiet"));
  sys = std::make_unique<caf::actor_system>(*cfg);
}

BenchNode::~BenchNode() {
  for (auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

double raw_tcp_bytes_per_s(std::size_t size, std::size_t total) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  listen(listener, 1);
  std::thread reader([&] {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buf(size + 8);
    std::size_t got = 0;
    while (got < total + total / size * 8) {
      const auto n = read(fd, buf.data(), buf.size());
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    const char done = 1;
    [[maybe_unused]] auto w = write(fd, &done, 1);
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> msg(size + 8, 'x');
  const auto t0 = Clock::now();
  for (std::size_t sent = 0; sent < total; sent += size) {
    std::memcpy(msg.data(), &size, 8);
    for (std::size_t off = 0; off < msg.size();) {
      const auto n = write(fd, msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  }
  char done = 0;
  [[maybe_unused]] auto r = read(fd, &done, 1);
  const double s = seconds_since(t0);
  reader.join();
  close(fd);
  close(listener);
  return static_cast<double>(total) / s;
}



double caf_bytes_per_s(const ClusterConfig& c, std::size_t size, std::size_t count, int window, bool door) {
  BenchNode receiver(c), sender(c);
  auto sink = receiver.sys->spawn(segment_sink, 0);
  auto port = receiver.sys->middleman().publish(sink, 0, "127.0.0.1", true);
  if (!port) return 0;
  std::unique_ptr<FrontDoor> front;
  if (door) {
    FrontDoorOptions o;
    o.host = "127.0.0.1";
    o.inner_port = *port;
    o.opening = basp_opening();
    auto d = FrontDoor::start(o);
    if (!d) return 0;
    front = std::move(*d);
    *port = front->port();
  }
  auto remote = sender.sys->middleman().remote_actor(std::string("127.0.0.1"), *port);
  if (!remote) return 0;
  const WireMsg msg{WireBuffer::copy_of(std::vector<char>(size, 'x').data(), size)};
  caf::scoped_actor self{*sender.sys};
  std::size_t sent = 0, acked = 0;
  const auto t0 = Clock::now();
  for (; sent < count && sent < static_cast<std::size_t>(window); ++sent) self->send(*remote, segment_atom::value, msg);
  while (acked < count) {
    self->receive([&](ack_atom) {
      ++acked;
      if (sent < count) {
        self->send(*remote, segment_atom::value, msg);
        ++sent;
      }
    });
  }
  const double s = seconds_since(t0);
  self->send_exit(sink, caf::exit_reason::user_shutdown);
  return static_cast<double>(size * count) / s;
}

WireMsg weight_set(std::uint64_t version, std::size_t params) {
  // As a learner publishes (Trainer::encoded_weights): written into
  // recycled memory and hashed as written, so the store need not hash it.
  WeightSetLayout layout;
  layout.version = version;
  layout.policy_kind = "moe_mlp";
  layout.tensors.push_back({"w", {static_cast<std::int64_t>(params)}});
  const auto fill = [](std::size_t, void* out, std::uint64_t, std::uint64_t n) {
    std::fill_n(static_cast<float*>(out), n, 0.25f);
  };
  auto e = encode_weight_set(layout, fill, "bench");
  return WireMsg{std::move(e.buf)};
}


const std::string kBenchSecret = "bench-secret-0123456789abcdef";

double bulk_bytes_per_s(std::size_t params, std::uint64_t chunk_bytes, int rounds) {
  auto shelf = std::make_shared<WeightShelf>(2, chunk_bytes);
  const WireMsg set = weight_set(1, params);
  if (!shelf->put(1, set.buf)) return 0;
  BulkServerOptions so;
  so.host = "127.0.0.1";
  so.secret = kBenchSecret;
  auto server = BulkServer::start(so, shelf);
  if (!server) return 0;
  BulkClient client(BulkClientOptions{"127.0.0.1", (*server)->port(), "node", kBenchSecret});
  std::vector<double> rates;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up (and has the server cut the chunks)
    ChunkAssembler into(1, set.buf.size(), chunk_bytes);
    const auto t0 = Clock::now();
    if (!client.fetch(into) || !into.complete()) return 0;
    const double s = seconds_since(t0);
    if (r > 0) rates.push_back(static_cast<double>(set.buf.size()) / s);
  }
  return median(rates);
}

}  // namespace rlx
