#include <catch2/catch.hpp>

#include "actors/weight_relay.hpp"
#include "actors/weight_store.hpp"
#include "messages/weight_chunks.hpp"
#include "messages/codec.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

WireMsg relay_weight_set(std::uint64_t version, std::size_t floats) {
  return WireMsg{encode(test::make_weight_set(version, floats), "learner")};
}

std::uint64_t checksum_of(const WireMsg& m) {
  auto w = decode<WeightSetData>(m.buf);
  REQUIRE(w.ok());
  return w->checksum;
}

// A head's store whose shelf the head's bulk channel serves.
struct BulkHead {
  weight_store_actor store;
  std::unique_ptr<BulkServer> server;
};

BulkHead bulk_head(test::ActorFixture& f, std::shared_ptr<WeightShelf> shelf, const std::string& secret) {
  WeightStoreOptions ho{4, shelf->chunk_bytes(), f.log};
  ho.shelf = shelf;
  BulkHead h{spawn_weight_store(f.system, ho), nullptr};
  BulkServerOptions so;
  so.host = "127.0.0.1";
  so.secret = secret;
  auto server = BulkServer::start(so, shelf);
  REQUIRE(server.ok());
  h.server = std::move(*server);
  return h;
}

// A member node: its store, a relay following `head` (over the bulk
// channel too when given one), and a subscriber forwarding every notice
// of the node's store to the test.
struct RelayNode {
  weight_store_actor local;
  weight_relay_actor relay;
  caf::actor sub;
};

RelayNode relay_node(test::ActorFixture& f, weight_store_actor head, std::uint64_t chunk,
                     std::optional<BulkClientOptions> bulk) {
  RelayNode n;
  n.local = spawn_weight_store(f.system, WeightStoreOptions{4, chunk, f.log});
  WeightRelayOptions ro;
  ro.upstream = head;
  ro.local = n.local;
  ro.log = f.log;
  ro.bulk = std::move(bulk);
  n.relay = spawn_weight_relay(f.system, ro);
  n.sub = caf::actor_cast<caf::actor>(f.system.spawn(test::forwarding_explorer, caf::actor{f.self}));
  f.self->send(n.local, subscribe_atom::value, caf::actor_cast<weights_listener>(n.sub));
  return n;
}

void stop_node(test::ActorFixture& f, const RelayNode& n) {
  for (auto a : {caf::actor_cast<caf::actor>(n.relay), caf::actor_cast<caf::actor>(n.local), n.sub})
    f.self->send_exit(a, caf::exit_reason::user_shutdown);
}

}  // namespace

TEST_CASE("a weight relay fetches a set in checked chunks, refetches corrupted ones and never applies them",
          "[actors][weights][chunks][defensive]") {
  test::ActorFixture f;
  // The head's store damages the first 3 chunks it serves (after checksumming them).
  auto head = spawn_weight_store(f.system, WeightStoreOptions{4, 256, f.log, 3});
  auto local = spawn_weight_store(f.system, WeightStoreOptions{4, 256, f.log});
  WeightRelayOptions ro;
  ro.upstream = head;
  ro.local = local;
  ro.log = f.log;
  auto relay = spawn_weight_relay(f.system, ro);
  auto sub = f.system.spawn(test::forwarding_explorer, caf::actor{f.self});
  f.self->send(local, subscribe_atom::value, caf::actor_cast<weights_listener>(sub));

  const WireMsg v5 = relay_weight_set(5, 1000);  // ~4 KB: 16+ chunks of 256 B
  f.self->send(head, publish_atom::value, v5);
  std::uint64_t seen = 0;
  f.self->receive([&](weights_atom, const WireMsg& m) { seen = decode<WeightsAvailableData>(m.buf)->version; },
                  caf::after(20s) >> [] {});
  REQUIRE(seen == 5);
  WireMsg got;
  f.self->request(local, 10s, fetch_atom::value, WireMsg{encode(WeightRequestData{5, false}, "t")})
      .receive([&](const WireMsg& m) { got = m; }, [](const caf::error&) {});
  CHECK(checksum_of(got) == checksum_of(v5));
  std::uint64_t refetched = 0;
  f.self->request(relay, 10s, counts_atom::value).receive([&](std::uint64_t n) { refetched = n; }, [](caf::error&) {});
  CHECK(refetched == 3);
  std::uint64_t local_errors = 1;
  f.self->request(local, 10s, counts_atom::value).receive([&](std::uint64_t n) { local_errors = n; }, [](caf::error&) {});
  CHECK(local_errors == 0);  // nothing damaged reached the node's store

  // The next version follows with no damage left to inject.
  f.self->send(head, publish_atom::value, relay_weight_set(6, 1000));
  f.self->receive([&](weights_atom, const WireMsg& m) { seen = decode<WeightsAvailableData>(m.buf)->version; },
                  caf::after(20s) >> [] {});
  CHECK(seen == 6);
  for (auto a : {caf::actor_cast<caf::actor>(relay), caf::actor_cast<caf::actor>(head), caf::actor_cast<caf::actor>(local),
                 caf::actor_cast<caf::actor>(sub)})
    f.self->send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("a weight relay fetches over the bulk channel, and through the middleman when the channel is down",
          "[actors][weights][bulk][defensive]") {
  test::ActorFixture f;
  const std::string secret = "relay-bulk-secret-0123456789";
  BulkHead h = bulk_head(f, std::make_shared<WeightShelf>(4, 1024), secret);
  const weight_store_actor head = h.store;
  BulkServer* server = h.server.get();

  // A port nothing listens on (bound, then closed): the channel is down.
  auto closed_port = [] {
    auto s = BulkServer::start(BulkServerOptions{}, std::make_shared<WeightShelf>(1, 1024));
    REQUIRE(s.ok());
    return (*s)->port();
  }();

  auto node = [&](std::uint16_t port) {
    return relay_node(f, head, 1024, BulkClientOptions{"127.0.0.1", port, "rollout-a", secret, 10s});
  };
  RelayNode fast = node(server->port());
  RelayNode fallback = node(closed_port);

  const WireMsg v3 = relay_weight_set(3, 20'000);  // ~80 KB: ~80 chunks
  f.self->send(head, publish_atom::value, v3);
  int arrived = 0;
  f.self->receive_for(arrived, 2)([&](weights_atom, const WireMsg& m) {
    CHECK(decode<WeightsAvailableData>(m.buf)->version == 3);
  });
  for (const RelayNode* n : {&fast, &fallback}) {
    WireMsg got;
    f.self->request(n->local, 10s, fetch_atom::value, WireMsg{encode(WeightRequestData{3, false}, "t")})
        .receive([&](const WireMsg& m) { got = m; }, [](const caf::error&) {});
    CHECK(checksum_of(got) == checksum_of(v3));
  }
  // Only the node with a working channel took chunks from it, each once.
  const auto counts = server->counts();
  CHECK(counts.admitted == 1);
  CHECK(counts.chunks == weight_chunk_count(v3.buf.size(), 1024));
  for (const RelayNode* n : {&fast, &fallback}) stop_node(f, *n);
  f.self->send_exit(head, caf::exit_reason::user_shutdown);
}

TEST_CASE("weight relays take deltas against the version they hold and hand their nodes the same bytes",
          "[actors][weights][delta][bulk]") {
  test::ActorFixture f;
  const std::string secret = "relay-delta-secret-0123456789";
  const std::uint64_t chunk = 16 << 10;
  BulkHead h = bulk_head(f, std::make_shared<WeightShelf>(4, chunk, 0, /*deltas=*/true), secret);
  const weight_store_actor head = h.store;
  BulkServer* server = h.server.get();
  RelayNode over_bulk = relay_node(f, head, chunk, BulkClientOptions{"127.0.0.1", server->port(), "rollout-a", secret});
  RelayNode over_middleman = relay_node(f, head, chunk, std::nullopt);

  std::vector<WireMsg> sets;
  for (std::uint64_t v = 1; v <= 3; ++v) {
    sets.push_back(WireMsg{encode(test::trained_weight_set(v, 30'000, static_cast<int>(v)), "learner")});
    f.self->send(head, publish_atom::value, sets.back());
    int arrived = 0;  // both nodes hold v before the next is published: each has its base
    f.self->receive_for(arrived, 2)([&](weights_atom, const WireMsg& m) {
      CHECK(decode<WeightsAvailableData>(m.buf)->version == v);
    });
  }
  for (const RelayNode* n : {&over_bulk, &over_middleman}) {
    for (std::uint64_t v = 1; v <= 3; ++v) {
      WireMsg got;
      f.self->request(n->local, 10s, fetch_atom::value, WireMsg{encode(WeightRequestData{v, false}, "t")})
          .receive([&](const WireMsg& m) { got = m; }, [](const caf::error&) {});
      const WireBuffer& want = sets[v - 1].buf;
      REQUIRE(got.buf.size() == want.size());
      CHECK(std::equal(got.buf.bytes().begin(), got.buf.bytes().end(), want.bytes().begin()));
    }
    std::uint64_t errors = 1, refetched = 1;
    f.self->request(n->local, 10s, counts_atom::value).receive([&](std::uint64_t e) { errors = e; }, [](caf::error&) {});
    f.self->request(n->relay, 10s, counts_atom::value).receive([&](std::uint64_t r) { refetched = r; }, [](caf::error&) {});
    CHECK(errors == 0);     // every set rebuilt from deltas passed the node store's whole-set check
    CHECK(refetched == 0);  // no delta failed
  }
  // The head's store answers a chunk asked against a base as a delta (the middleman's path).
  WireMsg answer;
  f.self->request(head, 10s, fetch_atom::value, WireMsg{encode(WeightRequestData{3, false, true, 0, 2}, "t")})
      .receive([&](const WireMsg& m) { answer = m; }, [](const caf::error&) {});
  auto delta = decode<WeightChunkData>(answer.buf);
  REQUIRE(delta.ok());
  CHECK(delta->delta);
  CHECK(delta->base == 2);
  // Over the bulk channel: version 1 whole, versions 2 and 3 as deltas, fewer bytes.
  const auto counts = server->counts();
  const std::uint64_t raw = sets[0].buf.size() + sets[1].buf.size() + sets[2].buf.size();
  CHECK(counts.chunks == 3 * weight_chunk_count(sets[0].buf.size(), chunk));
  CHECK(counts.bytes < sets[0].buf.size() + (sets[1].buf.size() + sets[2].buf.size()) * 9 / 10);
  CHECK(counts.bytes < raw);
  for (const RelayNode* n : {&over_bulk, &over_middleman}) stop_node(f, *n);
  f.self->send_exit(head, caf::exit_reason::user_shutdown);
}
