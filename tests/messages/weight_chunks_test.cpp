#include <cstring>

#include <catch2/catch.hpp>

#include "messages/codec.hpp"
#include "messages/stream_frame.hpp"
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

namespace {

// Reads `frame` (head, then data) as a stream would, the last segment to
// where `place` says; returns the rest of the frame and where it went.
struct Read {
  WireBuffer head;
  std::byte* placed = nullptr;
};
Read read_framed(const ChunkFrame& frame, const PlaceLast& place) {
  std::vector<std::byte> stream(frame.head.bytes().begin(), frame.head.bytes().end());
  stream.insert(stream.end(), frame.data.begin(), frame.data.end());
  std::size_t at = 0;
  const ReadExact from = [&](void* into, std::size_t n) -> Result<void> {
    if (at + n > stream.size()) return make_error(Errc::io, "end of stream");
    std::memcpy(into, stream.data() + at, n);
    at += n;
    return {};
  };
  Read r;
  auto head = read_stream_frame(from, 1 << 24, nullptr, place, &r.placed);
  REQUIRE(head.ok());
  CHECK(at == stream.size());
  r.head = *head;
  return r;
}

}  // namespace

TEST_CASE("a raw chunk's frame refers to the set's own bytes, and its flat form is the chunk encoded whole",
          "[messages][weights][chunks][zero_copy]") {
  const WireBuffer set = chunked_weight_set(4, 3000);
  const std::uint64_t chunk = 4096;
  const auto count = weight_chunk_count(set.size(), chunk);
  REQUIRE(count >= 3);
  for (std::uint32_t i = 0; i < count; ++i) {
    auto frame = frame_weight_chunk(set, 4, i, chunk, "store");
    REQUIRE(frame.ok());
    // The data segment is the set's bytes, not a copy; the head is a few words.
    CHECK(frame->data.data() == set.bytes().data() + std::size_t{i} * chunk);
    CHECK(frame->data.size() == std::min<std::uint64_t>(chunk, set.size() - std::uint64_t{i} * chunk));
    CHECK(frame->head.size() < 256);
    auto decoded = decode<WeightChunkData>(frame->flat());
    REQUIRE(decoded.ok());
    const ChunkFrame copy = *frame;  // what the shelf hands each node that asks
    CHECK(copy.flat().bytes().data() == frame->flat().bytes().data());  // flattened once
    CHECK(decoded->index == i);
    CHECK(decoded->offset == std::uint64_t{i} * chunk);
    CHECK(std::equal(decoded->data.begin(), decoded->data.end(),
                     reinterpret_cast<const std::uint8_t*>(frame->data.data())));
  }
}

TEST_CASE("chunks read straight into their place build the set, and a damaged or misplaced one stays missing",
          "[messages][weights][chunks][zero_copy][defensive]") {
  const WireBuffer set = chunked_weight_set(9, 3000);
  const std::uint64_t chunk = 4096;
  const auto count = weight_chunk_count(set.size(), chunk);
  ChunkAssembler a(9, set.size(), chunk);
  int placed = 0;
  for (std::uint32_t i = count; i-- > 0;) {
    auto frame = frame_weight_chunk(set, 9, i, chunk, "store");
    REQUIRE(frame.ok());
    auto r = read_framed(*frame, [&](std::uint32_t segments, std::uint64_t bytes) {
      return segments == 2 ? a.place(i, bytes) : nullptr;
    });
    REQUIRE(r.placed != nullptr);
    CHECK(r.head.size() == frame->head.size());
    std::uint32_t got = 99;
    auto added = a.add_placed(r.head, i, &got);
    REQUIRE(added.ok());
    CHECK(*added);
    CHECK(got == i);
    placed += 1;
  }
  REQUIRE(a.complete());
  CHECK(placed == static_cast<int>(count));
  const WireBuffer back = a.take();
  CHECK(back.checked());  // every chunk raw and checked: the node's store need not hash it again
  REQUIRE(back.size() == set.size());
  CHECK(std::equal(back.bytes().begin(), back.bytes().end(), set.bytes().begin()));

  // A held chunk has no place: a second copy is read whole (a duplicate).
  ChunkAssembler b(9, set.size(), chunk);
  auto first = frame_weight_chunk(set, 9, 1, chunk, "store");
  REQUIRE(first.ok());
  REQUIRE(b.add_encoded(first->flat()).ok());
  CHECK(b.place(1, first->data.size()) == nullptr);
  CHECK(b.place(0, first->data.size() + 8) == nullptr);  // not chunk 0's size
  CHECK(b.place(count, chunk) == nullptr);

  // Bytes damaged on the way into place: refused, and the chunk is still missing.
  auto r = read_framed(*frame_weight_chunk(set, 9, 0, chunk, "store"),
                       [&](std::uint32_t, std::uint64_t bytes) { return b.place(0, bytes); });
  REQUIRE(r.placed != nullptr);
  r.placed[100] ^= std::byte{1};
  auto damaged = b.add_placed(r.head, 0);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.error().message.find("checksum") != std::string::npos);
  CHECK(b.missing().front() == 0);
  CHECK(b.missing().size() == count - 1);  // only chunk 1 is held

  // Chunk 1 asked for, chunk 0 came (read into 1's place): 0 is checked and
  // moved to its own place, and 1 is still missing, to be asked again.
  ChunkAssembler c(9, set.size(), chunk);
  auto zero = frame_weight_chunk(set, 9, 0, chunk, "store");
  REQUIRE(zero.ok());
  auto z = read_framed(*zero, [&](std::uint32_t, std::uint64_t bytes) { return c.place(1, bytes); });
  REQUIRE(z.placed != nullptr);
  std::uint32_t got = 99;
  auto taken = c.add_placed(z.head, 1, &got);
  REQUIRE(taken.ok());
  CHECK(got == 0);
  CHECK(c.missing().front() == 1);
  for (std::uint32_t i = 1; i < count; ++i) REQUIRE(c.add_encoded(frame_weight_chunk(set, 9, i, chunk, "store")->flat()).ok());
  REQUIRE(c.complete());
  const WireBuffer again = c.take();
  CHECK(std::equal(again.bytes().begin(), again.bytes().end(), set.bytes().begin()));
}

TEST_CASE("chunks are checked by CRC-64/XZ, and an older sender's xxh64 chunks are still taken",
          "[messages][weights][chunks]") {
  const char check[] = "123456789";
  CHECK(chunk_checksum(check, 9) == 0x995DC9BBDF1939FAull);  // the CRC-64/XZ check value
  CHECK(chunk_checksum(check, 9, ChunkChecksum::xxh64) != chunk_checksum(check, 9));

  const WireBuffer set = chunked_weight_set(5, 500);
  const std::uint64_t chunk = 1024;
  ChunkAssembler a(5, set.size(), chunk);
  for (std::uint32_t i = 0; i < a.count(); ++i) {
    auto c = make_weight_chunk(set, 5, i, chunk);
    REQUIRE(c.ok());
    CHECK(c->checksum_kind == ChunkChecksum::crc64);
    WeightChunkData old = *c;  // as a sender before CRC-64 wrote it
    old.checksum_kind = ChunkChecksum::xxh64;
    old.checksum = chunk_checksum(old.data.data(), old.data.size(), ChunkChecksum::xxh64);
    if (i % 2 == 0) {
      WeightChunkData mixed = *c;  // a CRC checksum labelled xxh64: refused
      mixed.checksum_kind = ChunkChecksum::xxh64;
      CHECK_FALSE(decode<WeightChunkData>(encode(mixed, "store")).ok());
      CHECK_FALSE(a.add_encoded(encode(mixed, "store")).ok());
    }
    REQUIRE(a.add_encoded(encode(i % 2 ? *c : old, "store")).ok());
  }
  REQUIRE(a.complete());
  const WireBuffer back = a.take();
  CHECK(std::equal(back.bytes().begin(), back.bytes().end(), set.bytes().begin()));

  auto c = make_weight_chunk(set, 5, 0, chunk);
  REQUIRE(c.ok());
  c->checksum_kind = static_cast<ChunkChecksum>(7);  // a kind this build does not know
  auto unknown = decode<WeightChunkData>(encode(*c, "store"));
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("checksum kind") != std::string::npos);
  ChunkAssembler b(5, set.size(), chunk);
  CHECK_FALSE(b.add_encoded(encode(*c, "store")).ok());
}
