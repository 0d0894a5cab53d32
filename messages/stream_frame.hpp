// Cap'n Proto's standard stream framing, read in one place: a segment
// table (the segment count minus one, then each segment's size in words,
// all u32, padded to a word), then the segments. The bulk weight channel,
// the rollout log and external envs speak it; each of them checks a frame
// here before anything is allocated for it.
#pragma once

#include <cstdint>
#include <functional>

#include <capnp/common.h>
#include <kj/array.h>

#include "core/error.hpp"
#include "messages/wire_buffer.hpp"

namespace rlx {

// More segments than any RLX message has; a table claiming more is garbage.
constexpr std::uint32_t kMaxFrameSegments = 512;
// The first bytes of a frame that say how long its table is.
constexpr std::size_t kFrameHeadBytes = 8;

// The size in bytes of the segment table that begins with these
// kFrameHeadBytes bytes; malformed_message for more than kMaxFrameSegments.
Result<std::size_t> frame_table_bytes(const void* head);

// The whole frame's size in bytes (table included) from its complete
// table of `table_bytes` (frame_table_bytes); message_too_large over
// `max_bytes`.
Result<std::uint64_t> frame_total_bytes(const void* table, std::size_t table_bytes, std::uint64_t max_bytes);

// The size of the frame at bytes[pos, size) of a buffer (a log file):
// truncated_message when the buffer ends before the frame does.
Result<std::uint64_t> framed_size(const std::uint8_t* bytes, std::uint64_t size, std::uint64_t pos,
                                  std::uint64_t max_bytes);

// Fills exactly n bytes, or fails (closed, timed out, ...).
using ReadExact = std::function<Result<void>(void* into, std::size_t n)>;

// Reads one frame from a stream into a word-aligned buffer, checked as
// above before anything is allocated. With `reuse`, the frame goes into
// that buffer (grown when needed) and the WireBuffer returned is borrowed
// (WireBuffer::borrowed): valid until the next read into it.
Result<WireBuffer> read_stream_frame(const ReadExact& read_exact, std::size_t max_bytes,
                                     kj::Array<capnp::word>* reuse = nullptr);

// Where a frame of `segments` segments, its last of `last_bytes`, should
// have that last segment read: memory of exactly that size, or null to
// read the whole frame into the buffer as read_stream_frame does.
using PlaceLast = std::function<std::byte*(std::uint32_t segments, std::uint64_t last_bytes)>;

// read_stream_frame, with the frame's last segment read straight to where
// `place` says (the bulk channel puts a raw chunk's bytes where they
// belong in the set: no copy after the socket's). The buffer returned then
// holds the table and the other segments only, and *placed is set to
// where the last one went (else null).
Result<WireBuffer> read_stream_frame(const ReadExact& read_exact, std::size_t max_bytes,
                                     kj::Array<capnp::word>* reuse, const PlaceLast& place, std::byte** placed);

}  // namespace rlx
