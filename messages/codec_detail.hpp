// Internal helpers of the codec (not part of the messages/ API).
#pragma once

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "messages/codec.hpp"
#include "messages/envelope.capnp.h"

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian; add byte swapping");

namespace rlx::codec_detail {

// Thrown inside decoders; turned into an Error by decode_body.
struct Invalid {
  Error error;
};

[[noreturn]] inline void invalid(const std::string& what) { throw Invalid{make_error(Errc::invalid_field, what)}; }

template <class T> constexpr wire::DType dtype_of();
template <> constexpr wire::DType dtype_of<float>() { return wire::DType::FLOAT32; }
template <> constexpr wire::DType dtype_of<std::int64_t>() { return wire::DType::INT64; }
template <> constexpr wire::DType dtype_of<std::uint8_t>() { return wire::DType::UINT8; }

template <class T>
void set_tensor(wire::Tensor::Builder b, std::initializer_list<std::uint32_t> shape, const std::vector<T>& v) {
  b.setDtype(dtype_of<T>());
  auto s = b.initShape(static_cast<unsigned>(shape.size()));
  unsigned i = 0;
  for (auto d : shape) s.set(i++, d);
  b.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(v.data()), v.size() * sizeof(T)));
}

inline void set_tensor_shape(wire::Tensor::Builder b, const std::vector<std::int64_t>& shape, const std::vector<float>& v) {
  b.setDtype(wire::DType::FLOAT32);
  auto s = b.initShape(static_cast<unsigned>(shape.size()));
  for (unsigned i = 0; i < shape.size(); ++i) s.set(i, static_cast<std::uint32_t>(shape[i]));
  b.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(v.data()), v.size() * sizeof(float)));
}

// Reads a tensor of element type T; `shape` gives the expected dimensions.
template <class T>
std::vector<T> read_tensor(wire::Tensor::Reader r, std::initializer_list<std::uint64_t> shape, const char* field) {
  if (r.getDtype() != dtype_of<T>()) invalid(std::string(field) + ": wrong dtype");
  auto s = r.getShape();
  if (s.size() != shape.size()) invalid(std::string(field) + ": wrong rank");
  std::uint64_t n = 1;
  unsigned i = 0;
  for (auto d : shape) {
    if (s[i++] != d) invalid(std::string(field) + ": wrong shape");
    n *= d;
  }
  auto data = r.getData();
  if (data.size() != n * sizeof(T)) invalid(std::string(field) + ": data size does not match shape");
  std::vector<T> out(n);
  if (n) std::memcpy(out.data(), data.begin(), data.size());
  return out;
}

// Reads and validates a segment (shapes, dtypes, finite values).
Segment read_segment(wire::TrajectorySegment::Reader s);

using Which = wire::Envelope::Body::Which;
MessageKind kind_of(Which w);

// Builds an Envelope, lets `fill` set its body, and flattens it. A good
// `size_hint_words` makes the message one segment (no regrowth, one copy).
template <class Fill>
WireBuffer build(std::string_view sender, Fill&& fill, std::size_t size_hint_words = 0) {
  capnp::MallocMessageBuilder message(
      static_cast<unsigned>(std::max<std::size_t>(size_hint_words, capnp::SUGGESTED_FIRST_SEGMENT_WORDS)));
  auto env = message.initRoot<wire::Envelope>();
  env.setSchemaVersion(wire::ENVELOPE_SCHEMA_VERSION);
  env.setSender(kj::StringPtr(std::string(sender).c_str()));
  fill(env.initBody());
  return WireBuffer(capnp::messageToFlatArray(message));
}

// Validates framing, limits and schema, checks the body holds `expected`,
// then runs `read` on it. Every failure becomes a named Error.
Error classify(const kj::Exception& e);
Result<wire::Envelope::Reader> open_checked(const WireBuffer& buf, const DecodeOptions& options,
                                            std::unique_ptr<capnp::FlatArrayMessageReader>& reader);

// Framing and limits for a message whose root is `Root` (any schema):
// size limit, whole words, announced size, no trailing bytes, and one
// walk of every pointer before any field read. open_checked adds the
// Envelope's schema version. May throw kj::Exception (see classify).
template <class Root>
Result<typename Root::Reader> open_root(const WireBuffer& buf, const DecodeOptions& options,
                                        std::unique_ptr<capnp::FlatArrayMessageReader>& reader) {
  if (buf.size() > options.max_bytes)
    return make_error(Errc::message_too_large, std::to_string(buf.size()) + " bytes, limit " +
                                                   std::to_string(options.max_bytes));
  if (buf.size() < 8 || buf.size() % 8 != 0)
    return make_error(Errc::truncated_message, std::to_string(buf.size()) + " bytes is not a whole message");
  auto words = buf.words();
  // The segment table says how long the message is; fewer words = truncated.
  const std::size_t expected = capnp::expectedSizeInWordsFromPrefix(words);
  if (expected > words.size())
    return make_error(Errc::truncated_message, "framing announces " + std::to_string(expected * 8) +
                                                   " bytes, got " + std::to_string(words.size() * 8));
  capnp::ReaderOptions ro;
  ro.traversalLimitInWords = options.traversal_limit_words;
  ro.nestingLimit = options.nesting_limit;
  reader = std::make_unique<capnp::FlatArrayMessageReader>(words, ro);
  if (reader->getEnd() != words.end()) return make_error(Errc::malformed_message, "trailing bytes after the message");
  auto root = reader->getRoot<Root>();
  (void)root.totalSize();
  return root;
}

template <class T, class Read>
Result<T> decode_body(const WireBuffer& buf, const DecodeOptions& options, Which expected, Read&& read) {
  std::unique_ptr<capnp::FlatArrayMessageReader> reader;
  try {
    auto env = open_checked(buf, options, reader);
    if (!env) return env.error();
    auto body = env->getBody();
    if (body.which() != expected)
      return make_error(Errc::wrong_message_type, std::string("expected ") + to_string(kind_of(expected)) +
                                                      ", got " + to_string(kind_of(body.which())));
    return read(body);
  } catch (const Invalid& e) {
    return e.error;
  } catch (const kj::Exception& e) {
    return classify(e);
  }
}

}  // namespace rlx::codec_detail
