#include <catch2/catch.hpp>

#include "messages/codec.hpp"
#include "messages/weight_chunks.hpp"
#include "transport/weight_shelf.hpp"
#include "tests/helpers.hpp"

using namespace rlx;

namespace {

WireBuffer chunked_weight_set(std::uint64_t version, std::size_t floats) {
  return encode(test::make_weight_set(version, floats), "test");
}

// A chunk as it arrives: encoded, then decoded (which checks its checksum).
Result<WeightChunkData> over_the_wire(const WeightChunkData& c) { return decode<WeightChunkData>(encode(c, "store")); }

}  // namespace

TEST_CASE("a weight set cut into chunks and assembled in any order is the same bytes", "[messages][weights][chunks]") {
  const WireBuffer set = chunked_weight_set(7, 1000);
  const std::uint64_t chunk = 512;
  const auto count = weight_chunk_count(set.size(), chunk);
  REQUIRE(count == (set.size() + chunk - 1) / chunk);
  ChunkAssembler a(7, set.size(), chunk);
  REQUIRE(a.count() == count);
  for (std::uint32_t i = count; i-- > 0;) {  // last chunk first
    auto c = make_weight_chunk(set, 7, i, chunk);
    REQUIRE(c.ok());
    auto received = over_the_wire(*c);
    REQUIRE(received.ok());
    REQUIRE(a.add(*received).ok());
  }
  REQUIRE(a.complete());
  const WireBuffer back = a.take();
  REQUIRE(back.size() == set.size());
  CHECK(std::equal(back.bytes().begin(), back.bytes().end(), set.bytes().begin()));
  auto w = decode<WeightSetData>(back);
  REQUIRE(w.ok());
  CHECK(w->version == 7);
  CHECK(!make_weight_chunk(set, 7, count, chunk).ok());  // past the end
}

TEST_CASE("a corrupted weight chunk is refused when decoded and a misplaced one by the assembler",
          "[messages][weights][chunks][defensive]") {
  const WireBuffer set = chunked_weight_set(3, 300);
  auto c = make_weight_chunk(set, 3, 1, 256);
  REQUIRE(c.ok());
  auto flipped = *c;
  flipped.data[10] ^= 1;  // checksum no longer matches
  auto bad = over_the_wire(flipped);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("checksum") != std::string::npos);

  ChunkAssembler a(3, set.size(), 256);
  auto moved = *c;
  moved.offset += 8;
  CHECK(!a.add(moved).ok());
  auto other = *c;
  other.version = 4;
  CHECK(!a.add(other).ok());
  REQUIRE(a.count() > 2);
  CHECK(a.missing().size() == a.count());
  REQUIRE(a.add(*c).ok());
  CHECK(*a.add(*c) == false);  // a duplicate changes nothing
  const auto missing = a.missing();
  CHECK(missing.size() == a.count() - 1);
  CHECK(std::find(missing.begin(), missing.end(), 1u) == missing.end());
  CHECK(!a.complete());
}

TEST_CASE("a weights notice whose chunk count does not match its sizes is malformed", "[messages][weights][defensive]") {
  CHECK(decode<WeightsAvailableData>(encode(WeightsAvailableData{1, 1000, 2, 512}, "s")).ok());
  CHECK(!decode<WeightsAvailableData>(encode(WeightsAvailableData{1, 1000, 3, 512}, "s")).ok());
  CHECK(decode<WeightsAvailableData>(encode(WeightsAvailableData{1, 1000, 1, 0}, "s")).ok());
}

TEST_CASE("a cleared weight shelf holds nothing and takes any version next", "[messages][weights][resume]") {
  WeightShelf shelf(4, 16);
  WeightSetData w;
  w.tensors.push_back({"a", {2, 2}, {1, 2, 3, 4}});
  for (std::uint64_t v : {5, 6}) {
    w.version = v;
    w.checksum = w.compute_checksum();
    REQUIRE(shelf.put(v, encode(w, "test")).ok());
  }
  REQUIRE(shelf.chunk(6, 0).ok());
  CHECK_FALSE(shelf.put(2, encode(w, "test")).ok());  // older than the newest held
  shelf.clear();
  CHECK_FALSE(shelf.newest());
  CHECK_FALSE(shelf.find(6));
  CHECK(shelf.chunk(6, 0).error().code == Errc::not_found);
  w.version = 2;
  w.checksum = w.compute_checksum();
  REQUIRE(shelf.put(2, encode(w, "test")).ok());  // a restarted head's version, below the dead one's
  CHECK(shelf.newest()->version == 2);
}
