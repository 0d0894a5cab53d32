// A segment without token rows in one fixed layout: written word by word,
// and recognised on arrival so that it is read without Cap'n Proto's
// accessors or its walk of the message (the path every vector-env
// segment takes; docs/results/wire-codec.md "Segments in a fixed layout").
//
// The layout is an ordinary Cap'n Proto message, which any reader reads:
// one segment; the root Envelope; its sender; the TrajectorySegment
// struct; then its fields' objects in a fixed order (a Tensor as its
// struct, its shape, its data), each starting at the word after the one
// before. A message in which every pointer points exactly where that
// order puts its object, every struct has this build's size, every other
// pointer is null and the last object ends at the message's end has been
// proved sound as Cap'n Proto's walk proves it: every pointer in bounds,
// no object overlapping another. Anything else (a token segment, a newer
// build's larger structs, a message laid out by Cap'n Proto's builder, a
// shape that disagrees) is read the general way, which names its faults.
#pragma once

#include <optional>
#include <string_view>

#include "messages/codec.hpp"

namespace rlx::codec_detail {

// `x` as an Envelope from `sender` in the fixed layout; nullopt when it
// does not take it (token rows, lists past Cap'n Proto's element counts,
// a schema the layout does not know): encode it the general way.
std::optional<WireBuffer> encode_fixed_layout(const Segment& x, std::string_view sender);

// The segment `buf` holds when it is in the fixed layout, its tensors
// viewing the buffer, its values not yet checked (check_segment_values);
// nullopt when it is not (read it the general way).
std::optional<Segment> read_fixed_layout(const WireBuffer& buf, const DecodeOptions& options);

}  // namespace rlx::codec_detail
