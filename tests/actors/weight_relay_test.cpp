#include <catch2/catch.hpp>

#include "actors/weight_relay.hpp"
#include "actors/weight_store.hpp"
#include "messages/codec.hpp"
#include "tests/actors/actor_fixture.hpp"
#include "tests/helpers.hpp"

using namespace rlx;
using namespace std::chrono_literals;

namespace {

WireMsg a_weight_set(std::uint64_t version, std::size_t floats) {
  return WireMsg{encode(test::make_weight_set(version, floats), "learner")};
}

std::uint64_t checksum_of(const WireMsg& m) {
  auto w = decode<WeightSetData>(m.buf);
  REQUIRE(w.ok());
  return w->checksum;
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

  const WireMsg v5 = a_weight_set(5, 1000);  // ~4 KB: 16+ chunks of 256 B
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
  f.self->send(head, publish_atom::value, a_weight_set(6, 1000));
  f.self->receive([&](weights_atom, const WireMsg& m) { seen = decode<WeightsAvailableData>(m.buf)->version; },
                  caf::after(20s) >> [] {});
  CHECK(seen == 6);
  for (auto a : {caf::actor_cast<caf::actor>(relay), caf::actor_cast<caf::actor>(head), caf::actor_cast<caf::actor>(local),
                 caf::actor_cast<caf::actor>(sub)})
    f.self->send_exit(a, caf::exit_reason::user_shutdown);
}
