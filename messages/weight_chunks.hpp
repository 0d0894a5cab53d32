// Weight sets that cross nodes travel in chunks: slices of the set's
// serialised Envelope, each with its own xxh64, so a damaged chunk is
// found and fetched again alone. The store slices (make_weight_chunk);
// the receiving node assembles (ChunkAssembler), checking each chunk as
// it arrives, and its store then checks the set's structure (the set's own
// checksum was checked by the head's store before any chunk was cut).
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "messages/types.hpp"
#include "messages/wire_buffer.hpp"

namespace rlx {

// A chunk's checksum: XXH64 of its bytes (XXH3 measured no faster here:
// Debian's libxxhash has no AVX2 path).
std::uint64_t chunk_checksum(const void* data, std::size_t size);

// Chunks of `chunk_bytes` needed for `total_bytes` (at least 1).
std::uint32_t weight_chunk_count(std::uint64_t total_bytes, std::uint64_t chunk_bytes);

// Chunk `index` of `set` (the serialised WeightSet of `version`).
// Fails for an index past the end.
Result<WeightChunkData> make_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                          std::uint64_t chunk_bytes);

// The same chunk, encoded as an Envelope straight from `set` (one copy).
Result<WireBuffer> encode_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                       std::uint64_t chunk_bytes, std::string_view sender);

// Collects the chunks of one version in any order. A chunk that does not
// belong (other version, other geometry, overlapping) is refused with an
// error and changes nothing; duplicates are ignored.
class ChunkAssembler {
 public:
  // `chunk_bytes` as the store announced it (WeightsAvailable).
  ChunkAssembler(std::uint64_t version, std::uint64_t total_bytes, std::uint64_t chunk_bytes);

  // Takes one decoded chunk (checked again, as add_encoded does).
  Result<bool> add(const WeightChunkData& chunk);
  // Takes a chunk still in its envelope: checked (framing, position, xxh64)
  // and copied into place in one pass, never into a temporary.
  Result<bool> add_encoded(const WireBuffer& chunk_envelope, std::uint32_t* index = nullptr);  // true: new, false: a duplicate

  std::uint64_t version() const { return version_; }
  std::uint32_t count() const { return count_; }
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  bool complete() const { return received_ == count_; }
  // Indices not received yet, ascending.
  std::vector<std::uint32_t> missing() const;
  // The whole set (call once, when complete()), marked checked
  // (WireBuffer::mark_checked): each of its chunks was.
  WireBuffer take();

 private:
  std::uint64_t version_;
  std::uint32_t count_;
  std::uint64_t total_;
  std::uint64_t chunk_bytes_;
  std::uint32_t received_ = 0;
  std::vector<bool> have_;
  kj::Array<capnp::word> words_;  // the set, assembled in place (a WireBuffer takes it without a copy)
};

}  // namespace rlx
