// Weight sets that cross nodes travel in chunks: slices of the set's
// serialised Envelope, each with its own xxh64, so a damaged chunk is
// found and fetched again alone. A chunk may travel as a delta against
// the same slice of a version the receiver holds (messages/weight_delta.hpp). The store slices (make_weight_chunk);
// the receiving node assembles (ChunkAssembler), checking each chunk as
// it arrives, and its store then checks the set's structure (the set's own
// checksum was checked by the head's store before any chunk was cut).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "messages/types.hpp"
#include "messages/wire_buffer.hpp"

namespace rlx {

// A chunk's checksum: CRC-64/XZ of its bytes (ISA-L: 2.3x XXH64's speed
// on the 2-core machine, near its memory bandwidth; XXH3 from Debian's
// libxxhash was no faster than XXH64), or XXH64 for an older sender's chunk.
std::uint64_t chunk_checksum(const void* data, std::size_t size, ChunkChecksum kind = ChunkChecksum::crc64);

// Chunks of `chunk_bytes` needed for `total_bytes` (at least 1).
std::uint32_t weight_chunk_count(std::uint64_t total_bytes, std::uint64_t chunk_bytes);

// Chunk `index` of `set` (the serialised WeightSet of `version`).
// Fails for an index past the end.
Result<WeightChunkData> make_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                          std::uint64_t chunk_bytes);

// A version the receiver holds whole, against which a chunk may travel
// as a delta (messages/weight_delta.hpp).
struct DeltaBase {
  std::uint64_t version = 0;
  WireBuffer set;  // its serialised WeightSet
};

// A delta is sent only when it is at most this share of the chunk's bytes
// (otherwise the raw chunk: applying a delta costs the receiver passes).
inline constexpr double kDeltaMaxShare = 0.9;

// A chunk ready to send: the stream frame of its Envelope, in two parts
// when it is raw. `head` is the segment table and the Envelope's first
// segment, whose data pointer lands in a second segment: the chunk's bytes
// where they lie in the set (`data`, kept alive by `set`), so a socket
// writes them with the head in one writev and the sender copies nothing.
// A delta (or a chunk that cannot be referenced in place) is all `head`.
struct ChunkFrame {
  WireBuffer head;
  WireBuffer set;                    // holds `data`'s bytes; empty when `data` is
  std::span<const std::byte> data;   // the frame's last segment, or empty
  struct Flat;
  std::shared_ptr<Flat> flat_once;   // flat(), made once for this frame and its copies
  std::size_t size() const { return head.size() + data.size(); }
  bool empty() const { return head.empty(); }
  // The whole frame as one buffer (one copy of `data`, made once however
  // many nodes ask): what crosses the middleman, and what a test decodes.
  WireBuffer flat() const;
};

// Chunk `index` of `set`, framed as above. With `base`: as a delta against
// it when that is small enough (kDeltaMaxShare), else raw.
Result<ChunkFrame> frame_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                      std::uint64_t chunk_bytes, std::string_view sender,
                                      const DeltaBase* base = nullptr);

// The same chunk as one Envelope buffer (frame_weight_chunk's flat()).
Result<WireBuffer> encode_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                       std::uint64_t chunk_bytes, std::string_view sender,
                                       const DeltaBase* base = nullptr);

// Collects the chunks of one version in any order. A chunk that does not
// belong (other version, other geometry, overlapping) is refused with an
// error and changes nothing; duplicates are ignored.
class ChunkAssembler {
 public:
  // `chunk_bytes` as the store announced it (WeightsAvailable).
  ChunkAssembler(std::uint64_t version, std::uint64_t total_bytes, std::uint64_t chunk_bytes);

  // The version this node holds whole: chunks may come as deltas against
  // it (the asker says so in its requests: base_for).
  void set_base(DeltaBase base);
  // The base to name when asking for chunk `index`: none without one, or
  // once a delta of that chunk failed here (it is then asked for raw).
  std::optional<std::uint64_t> base_for(std::uint32_t index) const;

  // Takes one decoded chunk (checked again, as add_encoded does).
  Result<bool> add(const WeightChunkData& chunk);
  // Takes a chunk still in its envelope: checked (framing, position, xxh64)
  // and copied into place in one pass, never into a temporary. A delta is
  // checked (its own xxh64), applied in place against the base and the
  // result checked against the chunk's plain xxh64.
  Result<bool> add_encoded(const WireBuffer& chunk_envelope, std::uint32_t* index = nullptr);  // true: new, false: a duplicate

  // Where chunk `index`'s bytes go when they are `bytes` long, for a reader
  // that receives a raw chunk's data segment in place (read_stream_frame's
  // PlaceLast); null when that chunk is held already or is another size.
  std::byte* place(std::uint32_t index, std::uint64_t bytes);
  // Takes a raw chunk whose last segment, its data, was read to
  // place(index); `head` is the rest of its frame (table and first
  // segment). Checked as add_encoded checks: a chunk that fails leaves
  // `index` missing (its bytes in place are written again by the next try).
  Result<bool> add_placed(const WireBuffer& head, std::uint32_t index, std::uint32_t* index_out = nullptr);

  std::uint64_t version() const { return version_; }
  std::uint32_t count() const { return count_; }
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  bool complete() const { return received_ == count_; }
  // Indices not received yet, ascending.
  std::vector<std::uint32_t> missing() const;
  // The whole set (call once, when complete()), marked checked
  // (WireBuffer::mark_checked) when each of its chunks came raw and was
  // checked; a set that took deltas is left for the node's store to check
  // against the set's own checksum.
  WireBuffer take();

  // What crossed the wire for this set: the data bytes of the chunks taken
  // (not counting duplicates or refused chunks), and how many were deltas.
  std::uint64_t wire_bytes() const { return wire_bytes_; }
  std::uint32_t delta_chunks() const { return delta_chunks_; }

 private:
  std::uint64_t version_;
  std::uint32_t count_;
  std::uint64_t total_;
  std::uint64_t chunk_bytes_;
  std::uint32_t received_ = 0;
  std::vector<bool> have_;
  std::vector<bool> no_delta_;        // a delta of this chunk failed: ask for it raw
  std::optional<DeltaBase> base_;
  std::uint64_t wire_bytes_ = 0;
  std::uint32_t delta_chunks_ = 0;
  kj::Array<capnp::word> words_;  // the set, assembled in place (a WireBuffer takes it without a copy)

  // The checks and placing of one chunk's reader (wire::WeightChunk::Reader).
  template <class ChunkReader>
  Result<bool> take(ChunkReader c, std::uint32_t* index_out);
};

}  // namespace rlx
