#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <random>
#include <thread>

#include "messages/codec.hpp"
#include "transport/weight_bulk.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace rlx::test;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "bulk-test-secret-0123456789";

WireBuffer bulk_weight_set(std::uint64_t version, std::size_t floats) {
  return encode(test::make_weight_set(version, floats), "learner");
}

std::unique_ptr<BulkServer> serve(std::shared_ptr<WeightShelf> shelf, std::chrono::milliseconds handshake = 10s,
                                  std::shared_ptr<StrangerWatch> watch = nullptr) {
  BulkServerOptions o;
  o.watch = std::move(watch);
  o.host = "127.0.0.1";
  o.secret = kSecret;
  o.handshake_timeout = handshake;
  auto s = BulkServer::start(o, std::move(shelf));
  REQUIRE(s.ok());
  return std::move(*s);
}

BulkClientOptions client_of(const BulkServer& s, const std::string& secret = kSecret) {
  BulkClientOptions o;
  o.host = "127.0.0.1";
  o.port = s.port();
  o.node = "rollout-a";
  o.secret = secret;
  o.timeout = 10s;
  return o;
}

// A shelf holding `set` as `version`, served in chunks of `chunk_bytes`.
std::shared_ptr<WeightShelf> shelf_of(std::uint64_t version, const WireBuffer& set, std::uint64_t chunk_bytes,
                                      std::uint32_t corrupt_chunks = 0) {
  auto shelf = std::make_shared<WeightShelf>(2, chunk_bytes, corrupt_chunks);
  REQUIRE(shelf->put(version, set).ok());
  return shelf;
}

bool same_bytes(const WireBuffer& a, const WireBuffer& b) {
  return a.size() == b.size() && std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin());
}

}  // namespace

TEST_CASE("the bulk channel serves a weight set in checked chunks to a node that proves the secret",
          "[messages][weights][bulk][net]") {
  const WireBuffer set = bulk_weight_set(5, 100'000);
  auto shelf = shelf_of(5, set, 4096);
  auto server = serve(shelf);
  BulkClient client(client_of(*server));
  ChunkAssembler into(5, set.size(), 4096);
  auto got = client.fetch(into);
  REQUIRE(got.ok());
  CHECK(*got == 0);
  REQUIRE(into.complete());
  CHECK(same_bytes(into.take(), set));
  // The next version on the same connection.
  const WireBuffer v6 = bulk_weight_set(6, 50'000);
  REQUIRE(shelf->put(6, v6).ok());
  ChunkAssembler next(6, v6.size(), 4096);
  REQUIRE(client.fetch(next).ok());
  CHECK(same_bytes(next.take(), v6));
  const auto counts = server->counts();
  CHECK(counts.admitted == 1);
  CHECK(counts.refused == 0);
  CHECK(counts.chunks == weight_chunk_count(set.size(), 4096) + weight_chunk_count(v6.size(), 4096));
}

TEST_CASE("the bulk channel fetches damaged chunks again and gives the set back intact",
          "[messages][weights][bulk][defensive]") {
  const WireBuffer set = bulk_weight_set(9, 5'000);
  auto shelf = shelf_of(9, set, 1024, 3);  // the first 3 chunks served are damaged
  auto server = serve(shelf);
  BulkClient client(client_of(*server));
  ChunkAssembler into(9, set.size(), 1024);
  auto got = client.fetch(into);
  REQUIRE(got.ok());
  CHECK(*got == 3);
  CHECK(same_bytes(into.take(), set));
}

TEST_CASE("the bulk channel refuses a wrong secret, garbage, half a login and a silent peer, counts each kind, and goes on serving",
          "[messages][weights][bulk][auth][defensive][net]") {
  const WireBuffer set = bulk_weight_set(1, 10'000);
  auto shelf = shelf_of(1, set, 4096);
  auto watch = std::make_shared<StrangerWatch>(null_logger());
  auto server = serve(shelf, 300ms, watch);

  BulkClient wrong(client_of(*server, "not-the-cluster-secret!"));
  ChunkAssembler a(1, set.size(), 4096);
  auto refused = wrong.fetch(a);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("refused: wrong proof"));
  CHECK(a.missing().size() == a.count());  // nothing arrived

  {  // random bytes instead of a login
    const int fd = connect_local(server->port());
    std::mt19937 rng(7);
    std::vector<char> junk(4096);
    for (auto& b : junk) b = static_cast<char>(rng());
    CHECK(write(fd, junk.data(), junk.size()) > 0);
    CHECK(closed_by_peer(fd));
  }
  {  // a frame header claiming 2^32 words
    const int fd = connect_local(server->port());
    const std::uint32_t header[2] = {0, 0xffffffffu};
    CHECK(write(fd, header, sizeof header) == sizeof header);
    CHECK(closed_by_peer(fd));
  }
  {  // says nothing: closed after the handshake timeout
    const int fd = connect_local(server->port());
    CHECK(closed_by_peer(fd));
  }
  {  // half a login: a frame header, then nothing
    const int fd = connect_local(server->port());
    const std::uint32_t header[2] = {0, 4};
    CHECK(write(fd, header, sizeof header) == sizeof header);
    CHECK(closed_by_peer(fd));
  }
  CHECK(server->counts().refused == 5);
  CHECK(server->counts().admitted == 0);
  // Each stranger reported as what it was.
  const auto seen = watch->by_port();
  REQUIRE(seen.count("bulk") == 1);
  const auto& bulk = seen.at("bulk");
  CHECK(bulk[static_cast<std::size_t>(Stranger::unproven)] == 1);
  CHECK(bulk[static_cast<std::size_t>(Stranger::garbage)] == 2);
  CHECK(bulk[static_cast<std::size_t>(Stranger::silent)] == 1);
  CHECK(bulk[static_cast<std::size_t>(Stranger::half_open)] == 1);
  CHECK(watch->total() == 5);

  BulkClient right(client_of(*server));
  ChunkAssembler b(1, set.size(), 4096);
  REQUIRE(right.fetch(b).ok());
  CHECK(same_bytes(b.take(), set));
}

TEST_CASE("a bulk fetch of a version the head no longer holds fails as not found, and the next one works",
          "[messages][weights][bulk]") {
  auto shelf = std::make_shared<WeightShelf>(1, 4096);
  const WireBuffer v1 = bulk_weight_set(1, 10'000), v2 = bulk_weight_set(2, 10'000);
  REQUIRE(shelf->put(1, v1).ok());
  REQUIRE(shelf->put(2, v2).ok());  // keeps one: v1 is gone
  auto server = serve(shelf);
  BulkClient client(client_of(*server));
  ChunkAssembler old(1, v1.size(), 4096);
  auto gone = client.fetch(old);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == Errc::not_found);
  ChunkAssembler now(2, v2.size(), 4096);
  REQUIRE(client.fetch(now).ok());
  CHECK(same_bytes(now.take(), v2));
}

TEST_CASE("a bulk fetch stuck on a silent server ends when cancelled, and a stopped server closes its connections",
          "[messages][weights][bulk]") {
  // A listener that accepts and never answers.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  REQUIRE(listen(listener, 4) == 0);
  BulkClientOptions o;
  o.host = "127.0.0.1";
  o.port = ntohs(a.sin_port);
  o.node = "rollout-a";
  o.secret = kSecret;
  o.timeout = 600s;  // only the cancel can end it
  BulkClient client(o);
  ChunkAssembler into(1, 10'000, 4096);
  std::thread canceller([&] {
    const int fd = accept(listener, nullptr, nullptr);  // the client is connected and waiting for the challenge
    client.cancel();
    if (fd >= 0) close(fd);
  });
  auto r = client.fetch(into);
  canceller.join();
  close(listener);
  CHECK_FALSE(r.ok());

  // A server with a connected, idle node stops at once.
  const WireBuffer set = bulk_weight_set(1, 1'000);
  auto shelf = shelf_of(1, set, 4096);
  auto server = serve(shelf);
  BulkClient idle(client_of(*server));
  ChunkAssembler got(1, set.size(), 4096);
  REQUIRE(idle.fetch(got).ok());
  server.reset();  // joins its connection thread, which is blocked reading the idle node
  ChunkAssembler again(1, set.size(), 4096);
  CHECK_FALSE(idle.fetch(again).ok());
}
