// A weight chunk as a delta against the same slice of an older version
// (messages/weights.capnp, ChunkEncoding.xorDelta): the bytes XOR the
// base's, transposed in 4-byte groups (so the sign and exponent bytes of
// floats that moved a little line up as zero runs), then zstd. Unchanged
// bytes cost next to nothing; a float32 Adam step costs about 0.6-0.85 of
// its bytes, bfloat16 less (docs/results/across-nodes.md "Weight deltas").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace rlx {

// Encodes `plain` (n bytes) against `base` (base_n bytes; past its end the
// base counts as zeros) into `out` (resized to the encoded size).
void encode_xor_delta(const std::uint8_t* plain, std::size_t n, const std::uint8_t* base, std::size_t base_n,
                      std::vector<std::uint8_t>& out);

// Applies a delta: `into` (n bytes) receives the plain bytes. Fails when
// `delta` is not a zstd frame of exactly n bytes (a damaged or foreign
// delta); `into` then holds garbage and must not be used.
Result<void> apply_xor_delta(const std::uint8_t* delta, std::size_t delta_n, const std::uint8_t* base,
                             std::size_t base_n, std::uint8_t* into, std::size_t n);

}  // namespace rlx
