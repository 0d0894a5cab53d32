// Framing checks and error classification shared by every decoder.
#include <atomic>
#include <cstring>

#include "messages/codec_detail.hpp"

namespace rlx {

const char* to_string(MessageKind k) {
  static const char* names[] = {"segment", "weight_set", "weight_chunk", "weights_available", "weight_request",
                                "env_reset", "env_step", "env_step_result", "env_spec", "reward_request",
                                "reward_result", "join", "leave", "heartbeat", "metrics", "scale", "record",
                                "unknown"};
  auto i = static_cast<std::size_t>(k);
  return i < std::size(names) ? names[i] : "unknown";
}

namespace codec_detail {

MessageKind kind_of(Which w) {
  auto i = static_cast<std::uint16_t>(w);
  return i < static_cast<std::uint16_t>(MessageKind::unknown) ? static_cast<MessageKind>(i) : MessageKind::unknown;
}

namespace {
using U8x32 = std::uint8_t __attribute__((vector_size(32)));
using U64x4 = std::uint64_t __attribute__((vector_size(32)));
using U32x16 = std::uint32_t __attribute__((vector_size(64)));
using F32x16 = float __attribute__((vector_size(64)));

// Inlined into each clone (a 32-byte vector passed by value would change
// the calling convention between the clones).
template <class V, class T>
[[gnu::always_inline]] inline const V& load(const T* p, V& v) {
  std::memcpy(&v, p, sizeof(V));
  return v;
}
}  // namespace

// A float is not finite when its exponent bits are all set: shifted left
// past the sign, its bits are then at least 0xff000000 (the largest of
// them tells). 64 bytes at a time: one AVX-512 instruction, two AVX2.
__attribute__((target_clones("avx512f", "avx2", "default"))) bool all_finite(std::span<const float> v) {
  U32x16 top0 = {}, top1 = {};
  std::size_t i = 0;
  for (; i + 32 <= v.size(); i += 32) {
    U32x16 a, b;
    load(v.data() + i, a);
    load(v.data() + i + 16, b);
    a <<= 1;
    b <<= 1;
    top0 = top0 > a ? top0 : a;
    top1 = top1 > b ? top1 : b;
  }
  std::uint32_t top = 0;
  for (int k = 0; k < 16; ++k) top = std::max({top, top0[k], top1[k]});
  for (; i < v.size(); ++i) top = std::max(top, std::bit_cast<std::uint32_t>(v[i]) << 1);
  return top < 0xff000000u;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) bool all_non_positive(std::span<const float> v) {
  const F32x16 zero = {};
  U32x16 bad0 = {}, bad1 = {};
  std::size_t i = 0;
  for (; i + 32 <= v.size(); i += 32) {
    F32x16 a, b;
    bad0 |= ~(U32x16)(load(v.data() + i, a) <= zero);
    bad1 |= ~(U32x16)(load(v.data() + i + 16, b) <= zero);
  }
  const U32x16 both = bad0 | bad1;
  bool bad = false;
  for (int k = 0; k < 16; ++k) bad |= both[k] != 0;
  for (; i < v.size(); ++i) bad |= !(v[i] <= 0.0f);
  return !bad;
}

__attribute__((target_clones("avx2", "default"))) bool all_flags(std::span<const std::uint8_t> v) {
  const U8x32 one = U8x32{} + 1;
  U8x32 bad = {};
  std::size_t i = 0;
  for (; i + 32 <= v.size(); i += 32) {
    U8x32 a;
    bad |= (U8x32)(load(v.data() + i, a) > one);
  }
  bool any = false;
  for (int k = 0; k < 32; ++k) any |= bad[k] != 0;
  for (; i < v.size(); ++i) any |= v[i] > 1;
  return !any;
}

__attribute__((target_clones("avx2", "default"))) bool all_zero(std::span<const std::uint8_t> v) {
  U8x32 any = {};
  std::size_t i = 0;
  for (; i + 32 <= v.size(); i += 32) {
    U8x32 a;
    any |= load(v.data() + i, a);
  }
  std::uint8_t tail = 0;
  for (int k = 0; k < 32; ++k) tail |= any[k];
  for (; i < v.size(); ++i) tail |= v[i];
  return tail == 0;
}

// (v - 1) < (column - 1), unsigned: v is neither 0 nor at or above column.
__attribute__((target_clones("avx2", "default"))) bool none_older(std::span<const std::uint64_t> v,
                                                                 std::span<const std::uint64_t> columns,
                                                                 std::size_t first, std::size_t width) {
  const U64x4 one = U64x4{} + 1;
  U64x4 bad = {};
  bool tail = false;
  for (std::size_t s = first; s < columns.size(); ++s) {
    if (columns[s] == 0) continue;  // nothing is older than version 0
    const std::uint64_t floor = columns[s] - 1;
    const U64x4 below = U64x4{} + floor;
    const std::uint64_t* row = v.data() + s * width;
    std::size_t b = 0;
    for (; b + 4 <= width; b += 4) {
      U64x4 a;
      bad |= (U64x4)((load(row + b, a) - one) < below);
    }
    for (; b < width; ++b) tail |= row[b] - 1 < floor;
  }
  for (int k = 0; k < 4; ++k) tail |= bad[k] != 0;
  return !tail;
}

namespace {
std::atomic<int> test_fill{-1};
}  // namespace

void fill_builder_space_for_tests(int byte) { test_fill.store(byte, std::memory_order_relaxed); }

void fill_for_tests(kj::ArrayPtr<capnp::word> space) {
  if (const int byte = test_fill.load(std::memory_order_relaxed); byte >= 0)
    std::memset(static_cast<void*>(space.begin()), byte, space.size() * sizeof(capnp::word));
}

FlatBuilder::FlatBuilder(std::size_t words, bool recycled, bool bulk_first)
    : space_(recycled ? recycled_words(words + 1) : kj::heapArray<capnp::word>(words + 1)) {
  fill_for_tests(space_);
  // Bulk first: the segment table and the root pointer, the only words
  // allocated before the bulk that are not written whole.
  const std::size_t zeroed = bulk_first ? std::min<std::size_t>(2, space_.size()) : space_.size();
  std::memset(static_cast<void*>(space_.begin()), 0, zeroed * sizeof(capnp::word));
}

void FlatBuilder::zero_the_rest() {
  // Once a later segment exists, Cap'n Proto allocates no more in the
  // first; later segments are zeroed whole (allocateSegment).
  auto segments = getSegmentsForOutput();
  if (segments.size() != 1 || segments[0].begin() != space_.begin() + 1) return;
  auto* from = const_cast<capnp::word*>(segments[0].end());
  std::memset(static_cast<void*>(from), 0, static_cast<std::size_t>(space_.end() - from) * sizeof(capnp::word));
}

kj::ArrayPtr<capnp::word> FlatBuilder::allocateSegment(unsigned minimum_size) {
  if (!gave_first_ && minimum_size <= space_.size() - 1) {
    gave_first_ = true;
    return space_.slice(1, space_.size());
  }
  gave_first_ = true;
  auto more = kj::heapArray<capnp::word>(std::max<std::size_t>(minimum_size, capnp::SUGGESTED_FIRST_SEGMENT_WORDS));
  std::memset(more.begin(), 0, more.size() * sizeof(capnp::word));
  more_.push_back(std::move(more));
  return more_.back().asPtr();
}

WireBuffer FlatBuilder::finish() {
  auto segments = getSegmentsForOutput();
  if (segments.size() == 1 && segments[0].begin() == space_.begin() + 1) {
    // The stream framing of one segment: (count - 1) = 0, then its size in words.
    const auto used = static_cast<std::uint32_t>(segments[0].size());
    // Far smaller than the space it was given: a copy of its own, so a
    // small message does not hold a large array.
    if (std::size_t{used} * 2 < space_.size()) return WireBuffer(capnp::messageToFlatArray(segments));
    auto* table = reinterpret_cast<std::uint32_t*>(space_.begin());
    table[0] = 0;
    table[1] = used;
    return WireBuffer(std::move(space_), (std::size_t{used} + 1) * sizeof(capnp::word));
  }
  return WireBuffer(capnp::messageToFlatArray(segments));
}

Error classify(const kj::Exception& e) {
  std::string what = e.getDescription().cStr();
  if (what.find("nested") != std::string::npos) return make_error(Errc::message_too_deep, what);
  if (what.find("traversal limit") != std::string::npos) return make_error(Errc::message_too_large, what);
  if (what.find("out-of-bounds") != std::string::npos || what.find("truncated") != std::string::npos ||
      what.find("too small") != std::string::npos)
    return make_error(Errc::truncated_message, what);
  return make_error(Errc::malformed_message, what);
}

Result<wire::Envelope::Reader> open_checked(const WireBuffer& buf, const DecodeOptions& options,
                                            std::optional<capnp::FlatArrayMessageReader>& reader) {
  auto env = open_root<wire::Envelope>(buf, options, reader);
  if (!env) return env;
  return check_schema(*env);
}

Result<wire::Envelope::Reader> check_schema(wire::Envelope::Reader env) {
  if (env.getSchemaVersion() > wire::ENVELOPE_SCHEMA_VERSION)
    return make_error(Errc::unsupported_schema, "schema version " + std::to_string(env.getSchemaVersion()) +
                                                    " > " + std::to_string(wire::ENVELOPE_SCHEMA_VERSION));
  return env;
}

}  // namespace codec_detail

Result<MessageKind> peek_kind(const WireBuffer& buf, const DecodeOptions& options) {
  std::optional<capnp::FlatArrayMessageReader> reader;
  try {
    auto env = codec_detail::open_checked(buf, options, reader);
    if (!env) return env.error();
    return codec_detail::kind_of(env->getBody().which());
  } catch (const kj::Exception& e) {
    return codec_detail::classify(e);
  }
}

}  // namespace rlx
