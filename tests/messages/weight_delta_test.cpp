#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>

#include "messages/codec.hpp"
#include "messages/weight_chunks.hpp"
#include "messages/weight_delta.hpp"
#include "tests/helpers.hpp"
#include "transport/weight_shelf.hpp"

using namespace rlx;

namespace {

WireBuffer delta_trained_set(std::uint64_t version, std::size_t floats, int steps) {
  return encode(test::trained_weight_set(version, floats, steps), "test");
}

// Chunk `index` of `set` cut against `base`, as the receiver decodes it.
WeightChunkData delta_cut(const WireBuffer& set, std::uint32_t index, const DeltaBase& base) {
  auto encoded = encode_weight_chunk(set, 2, index, 16 << 10, "store", &base);
  REQUIRE(encoded.ok());
  auto c = decode<WeightChunkData>(*encoded);
  REQUIRE(c.ok());
  return *c;
}

bool delta_same_bytes(const WireBuffer& a, const WireBuffer& b) {
  return a.size() == b.size() && std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin());
}

// Every chunk of `set` cut against `base` and assembled by a receiver holding `held`.
Result<WireBuffer> delta_deliver(const WireBuffer& set, std::uint64_t version, std::uint64_t chunk, const DeltaBase* base,
                           const std::optional<DeltaBase>& held, std::uint64_t* wire = nullptr,
                           std::uint32_t* deltas = nullptr) {
  ChunkAssembler a(version, set.size(), chunk);
  if (held) a.set_base(*held);
  for (std::uint32_t i = 0; i < a.count(); ++i) {
    auto c = encode_weight_chunk(set, version, i, chunk, "store", base);
    if (!c) return c.error();
    if (auto added = a.add_encoded(*c); !added) return added.error();
  }
  if (wire) *wire = a.wire_bytes();
  if (deltas) *deltas = a.delta_chunks();
  return a.take();
}

}  // namespace

TEST_CASE("a delta of a chunk whose floats moved a little rebuilds the same bytes from fewer",
          "[messages][weights][delta]") {
  const WireBuffer v1 = delta_trained_set(1, 50'000, 10), v2 = delta_trained_set(2, 50'000, 11);
  const DeltaBase base{1, v1};
  std::uint64_t wire = 0;
  std::uint32_t deltas = 0;
  auto got = delta_deliver(v2, 2, 16 << 10, &base, base, &wire, &deltas);
  REQUIRE(got.ok());
  CHECK(delta_same_bytes(*got, v2));
  CHECK(deltas == weight_chunk_count(v2.size(), 16 << 10));
  CHECK(wire < v2.size() * 9 / 10);
  // Rebuilt from deltas: left for the node's store to check against the set's checksum.
  CHECK_FALSE(got->checked());
  auto checked = check_weight_set(*got);
  REQUIRE(checked.ok());
  CHECK(checked->version == 2);

  // Raw chunks are marked checked as before, and carry every byte.
  auto raw = delta_deliver(v2, 2, 16 << 10, nullptr, base, &wire, &deltas);
  REQUIRE(raw.ok());
  CHECK(raw->checked());
  CHECK(deltas == 0);
  CHECK(wire == v2.size());
}

TEST_CASE("a chunk that did not change crosses as a few bytes, one that changed wholly crosses raw",
          "[messages][weights][delta]") {
  const WireBuffer v1 = delta_trained_set(1, 20'000, 3);
  // The same weights under the next version: only the header bytes differ.
  WireBuffer same = delta_trained_set(2, 20'000, 3);
  const WeightChunkData unchanged = delta_cut(same, 1, DeltaBase{1, v1});
  CHECK(unchanged.delta);
  CHECK(unchanged.data.size() < 200);

  // Against unrelated bytes the delta is no smaller: the chunk goes raw.
  const WireBuffer noise = [] {
    std::vector<std::uint8_t> bytes(200'000);
    std::mt19937 g(3);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(g());
    return WireBuffer::copy_of(bytes.data(), bytes.size());
  }();
  CHECK_FALSE(delta_cut(v1, 0, DeltaBase{1, noise}).delta);
  // A base shorter than the set still rebuilds it (zeros past its end).
  const WireBuffer grown = delta_trained_set(2, 30'000, 4);
  const DeltaBase short_base{1, v1};
  auto got = delta_deliver(grown, 2, 16 << 10, &short_base, short_base);
  REQUIRE(got.ok());
  CHECK(delta_same_bytes(*got, grown));
}

TEST_CASE("a delta against a base the receiver does not hold, or holds different bytes for, is refused and asked for raw",
          "[messages][weights][delta][defensive]") {
  const WireBuffer v1 = delta_trained_set(1, 20'000, 5), v2 = delta_trained_set(2, 20'000, 6);
  const DeltaBase base{1, v1};
  auto delta = encode_weight_chunk(v2, 2, 0, 16 << 10, "store", &base);
  REQUIRE(delta.ok());
  auto raw = encode_weight_chunk(v2, 2, 0, 16 << 10, "store");
  REQUIRE(raw.ok());

  SECTION("no base at all") {
    ChunkAssembler a(2, v2.size(), 16 << 10);
    CHECK(a.base_for(0) == std::nullopt);
    auto added = a.add_encoded(*delta);
    REQUIRE_FALSE(added.ok());
    CHECK(added.error().message.find("not held") != std::string::npos);
    REQUIRE(a.add_encoded(*raw).ok());
    CHECK(a.missing().front() == 1);
  }
  SECTION("another version as base") {
    ChunkAssembler a(2, v2.size(), 16 << 10);
    a.set_base(DeltaBase{0, delta_trained_set(0, 20'000, 4)});
    CHECK(a.base_for(0) == 0u);
    REQUIRE_FALSE(a.add_encoded(*delta).ok());
    CHECK(a.base_for(0) == std::nullopt);  // this chunk is asked for raw from now on
    CHECK(a.base_for(1) == 0u);
  }
  SECTION("the same version number over other bytes (a head that restarted)") {
    ChunkAssembler a(2, v2.size(), 16 << 10);
    a.set_base(DeltaBase{1, delta_trained_set(1, 20'000, 4)});
    auto added = a.add_encoded(*delta);
    REQUIRE_FALSE(added.ok());
    CHECK(added.error().message.find("checksum mismatch after applying") != std::string::npos);
    CHECK(a.base_for(0) == std::nullopt);
    REQUIRE(a.add_encoded(*raw).ok());
  }
  SECTION("a damaged delta") {
    auto c = decode<WeightChunkData>(*delta);
    REQUIRE(c.ok());
    auto damaged = *c;
    damaged.data[damaged.data.size() / 2] ^= 0x40;
    ChunkAssembler a(2, v2.size(), 16 << 10);
    a.set_base(base);
    CHECK_FALSE(a.add_encoded(encode(damaged, "store")).ok());  // its own checksum
    damaged.checksum = chunk_checksum(damaged.data.data(), damaged.data.size());
    auto added = a.add_encoded(encode(damaged, "store"));  // consistent with itself, not with the set
    REQUIRE_FALSE(added.ok());
    CHECK(a.base_for(0) == std::nullopt);
    auto garbage = *c;
    garbage.data.assign(64, 0xab);  // not a zstd frame at all
    garbage.checksum = chunk_checksum(garbage.data.data(), garbage.data.size());
    ChunkAssembler b(2, v2.size(), 16 << 10);
    b.set_base(base);
    auto refused = b.add_encoded(encode(garbage, "store"));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.find("zstd") != std::string::npos);
  }
}

TEST_CASE("a weight request names its base and a chunk its encoding across the codec", "[messages][weights][delta]") {
  auto req = decode<WeightRequestData>(encode(WeightRequestData{5, false, true, 3, 4}, "x"));
  REQUIRE(req.ok());
  CHECK(req->base == 4u);
  auto plain = decode<WeightRequestData>(encode(WeightRequestData{5, false, true, 3}, "x"));
  REQUIRE(plain.ok());
  CHECK(plain->base == std::nullopt);
  // An XOR delta of nothing is still a frame that applies to nothing.
  std::vector<std::uint8_t> out;
  encode_xor_delta(nullptr, 0, nullptr, 0, out);
  CHECK(apply_xor_delta(out.data(), out.size(), nullptr, 0, nullptr, 0).ok());
}

TEST_CASE("a shelf answers against a base with a delta only when deltas are on and it holds the base",
          "[messages][weights][delta]") {
  const std::uint64_t chunk = 16 << 10;
  auto is_delta = [](const Result<WireBuffer>& c) {
    REQUIRE(c.ok());
    auto d = decode<WeightChunkData>(*c);
    REQUIRE(d.ok());
    return d->delta;
  };
  WeightShelf on(4, chunk, 0, true), off(4, chunk);
  for (WeightShelf* s : {&on, &off}) {
    REQUIRE(s->put(1, delta_trained_set(1, 20'000, 5)).ok());
    REQUIRE(s->put(2, delta_trained_set(2, 20'000, 6)).ok());
  }
  CHECK(is_delta(on.chunk(2, 0, 1)));
  CHECK_FALSE(is_delta(on.chunk(2, 0)));      // no base named
  CHECK_FALSE(is_delta(on.chunk(2, 0, 7)));   // a base not held
  CHECK_FALSE(is_delta(on.chunk(1, 0, 2)));   // a newer "base"
  CHECK_FALSE(is_delta(off.chunk(2, 0, 1)));  // deltas off
  // Cut once per base: the same chunk twice is the same buffer.
  auto a = on.chunk(2, 1, 1), b = on.chunk(2, 1, 1);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->shares_storage_with(*b));
}

TEST_CASE("a shelf cuts a new version's deltas ahead of the requests, and stops cleanly when cleared or destroyed",
          "[messages][weights][delta][defensive]") {
  const std::uint64_t chunk = 64 << 10;
  const WireBuffer v1 = delta_trained_set(1, 300'000, 5), v2 = delta_trained_set(2, 300'000, 6),
                   v3 = delta_trained_set(3, 300'000, 7);
  {
    WeightShelf shelf(4, chunk, 0, true);
    REQUIRE(shelf.put(1, v1).ok());
    REQUIRE(shelf.put(2, v2).ok());  // cutting v2 against v1 starts
    REQUIRE(shelf.put(3, v3).ok());  // stops it, starts v3 against v2
    // Every chunk, asked against the version before, is a delta that rebuilds v3.
    ChunkAssembler a(3, v3.size(), chunk);
    a.set_base(DeltaBase{2, v2});
    for (std::uint32_t i = 0; i < a.count(); ++i) {
      auto c = shelf.chunk(3, i, a.base_for(i));
      REQUIRE(c.ok());
      REQUIRE(a.add_encoded(*c).ok());
    }
    CHECK(a.delta_chunks() == a.count());
    CHECK(delta_same_bytes(a.take(), v3));
    shelf.clear();  // while nothing, or something, is being cut
    CHECK_FALSE(shelf.newest().has_value());
    REQUIRE(shelf.put(4, v1).ok());
    REQUIRE(shelf.put(5, v2).ok());
  }  // destroyed while it may still be cutting version 5
}

TEST_CASE("a shelf cuts raw chunks ahead only once a node has fetched chunks from it, and they are the chunks it would cut",
          "[messages][weights][chunks]") {
  const std::uint64_t chunk = 64 << 10;
  const WireBuffer v1 = delta_trained_set(1, 300'000, 5), v2 = delta_trained_set(2, 300'000, 6),
                   v3 = delta_trained_set(3, 300'000, 7);
  WeightShelf shelf(4, chunk);
  REQUIRE(shelf.put(1, v1).ok());
  REQUIRE(shelf.put(2, v2).ok());
  CHECK_FALSE(shelf.cutting_ahead());  // a store no node fetches chunks from spends nothing on them
  REQUIRE(shelf.chunk(2, 0).ok());
  REQUIRE(shelf.put(3, v3).ok());
  CHECK(shelf.cutting_ahead() == 3u);
  ChunkAssembler a(3, v3.size(), chunk);
  for (std::uint32_t i = 0; i < a.count(); ++i) {
    auto frame = shelf.chunk_frame(3, i);
    REQUIRE(frame.ok());
    auto direct = frame_weight_chunk(v3, 3, i, chunk, "weight_store");
    REQUIRE(direct.ok());
    CHECK(frame->flat().size() == direct->flat().size());
    CHECK(std::memcmp(frame->flat().bytes().data(), direct->flat().bytes().data(), direct->flat().size()) == 0);
    REQUIRE(a.add_encoded(frame->flat()).ok());
  }
  CHECK(delta_same_bytes(a.take(), v3));
  shelf.clear();
  CHECK_FALSE(shelf.cutting_ahead());
}
