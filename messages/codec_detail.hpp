// Internal helpers of the codec (not part of the messages/ API).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "messages/codec.hpp"
#include "messages/column.hpp"
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

// `v`: a vector or a Column of float, int64 or uint8.
template <class V>
void set_tensor(wire::Tensor::Builder b, std::initializer_list<std::uint32_t> shape, const V& v) {
  using T = typename V::value_type;
  b.setDtype(dtype_of<T>());
  auto s = b.initShape(static_cast<unsigned>(shape.size()));
  unsigned i = 0;
  for (auto d : shape) s.set(i++, d);
  b.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(v.data()), v.size() * sizeof(T)));
}

inline void set_tensor_shape(wire::Tensor::Builder b, const std::vector<std::int64_t>& shape, std::span<const float> v) {
  b.setDtype(wire::DType::FLOAT32);
  auto s = b.initShape(static_cast<unsigned>(shape.size()));
  for (unsigned i = 0; i < shape.size(); ++i) s.set(i, static_cast<std::uint32_t>(shape[i]));
  b.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(v.data()), v.size() * sizeof(float)));
}

// A tensor's bytes, checked: element type T, `shape` its dimensions,
// the data exactly their product.
template <class T>
const T* checked_tensor_data(wire::Tensor::Reader r, std::initializer_list<std::uint64_t> shape, const char* field,
                             std::uint64_t& n) {
  if (r.getDtype() != dtype_of<T>()) invalid(std::string(field) + ": wrong dtype");
  auto s = r.getShape();
  if (s.size() != shape.size()) invalid(std::string(field) + ": wrong rank");
  n = 1;
  unsigned i = 0;
  for (auto d : shape) {
    if (s[i++] != d) invalid(std::string(field) + ": wrong shape");
    n *= d;
  }
  auto data = r.getData();
  if (data.size() != n * sizeof(T)) invalid(std::string(field) + ": data size does not match shape");
  return reinterpret_cast<const T*>(data.begin());
}

// Reads a tensor of element type T into a vector of its own.
template <class T>
std::vector<T> read_tensor(wire::Tensor::Reader r, std::initializer_list<std::uint64_t> shape, const char* field) {
  std::uint64_t n = 0;
  const T* first = checked_tensor_data<T>(r, shape, field, n);
  std::vector<T> out(n);
  if (n) std::memcpy(out.data(), first, n * sizeof(T));
  return out;
}

// The same, viewed where it lies in the message (`keep` holds the message;
// without one the values are copied). Cap'n Proto places Data at word
// boundaries of a word-aligned buffer, so the view is aligned for T.
template <class T>
Column<T> view_tensor(wire::Tensor::Reader r, std::initializer_list<std::uint64_t> shape, const char* field,
                      const std::shared_ptr<const void>& keep) {
  std::uint64_t n = 0;
  const T* first = checked_tensor_data<T>(r, shape, field, n);
  if (!keep || reinterpret_cast<std::uintptr_t>(first) % alignof(T) != 0) return Column<T>(first, first + n);
  return Column<T>::view(first, n, keep);
}

// A List(UInt64)'s elements where they lie, or null when they are not
// laid out as plain aligned 8-byte words (a list of structs read as one).
inline const std::uint64_t* u64_list_words(capnp::List<std::uint64_t>::Reader list) {
  capnp::AnyList::Reader any(list);
  if (any.getElementSize() != capnp::ElementSize::EIGHT_BYTES) return nullptr;
  auto raw = any.getRawBytes();
  if (raw.size() != list.size() * 8ull || reinterpret_cast<std::uintptr_t>(raw.begin()) % 8 != 0) return nullptr;
  return reinterpret_cast<const std::uint64_t*>(raw.begin());
}

// A List(UInt64) copied out (one memcpy where it is plain words).
inline std::vector<std::uint64_t> read_u64_list(capnp::List<std::uint64_t>::Reader list) {
  if (const auto* words = u64_list_words(list)) return {words, words + list.size()};
  std::vector<std::uint64_t> v;
  v.reserve(list.size());
  for (auto e : list) v.push_back(e);
  return v;
}

// A List(UInt64) viewed where it lies (copied without `keep`, or when it
// is not laid out as plain words).
inline Column<std::uint64_t> view_u64_list(capnp::List<std::uint64_t>::Reader list,
                                           const std::shared_ptr<const void>& keep) {
  const auto* words = keep ? u64_list_words(list) : nullptr;
  if (words) return Column<std::uint64_t>::view(words, list.size(), keep);
  return read_u64_list(list);
}

// Value checks over whole columns: branch-free, 32 or 64 bytes at a time
// with two accumulators (GCC vector extensions; -O2 does not vectorise
// these loops by itself), built for AVX2 (the float checks for AVX-512 as
// well) and for the baseline (messages/codec.cpp).
// Whether every value is finite (a float is not when its exponent bits are all set).
bool all_finite(std::span<const float> v);
// Whether every value is <= 0 (NaN is not).
bool all_non_positive(std::span<const float> v);
// Whether every byte is 0 or 1.
bool all_flags(std::span<const std::uint8_t> v);
// Whether every byte is 0.
bool all_zero(std::span<const std::uint8_t> v);
// Whether, for every column s in [first, columns.size()), each nonzero
// v[s * width + b] is at least columns[s] (v: the columns' rows in order).
bool none_older(std::span<const std::uint64_t> v, std::span<const std::uint64_t> columns, std::size_t first,
                std::size_t width);

// Fills a List(UInt64) from `v` with one copy (the list's elements are
// plain 8-byte words in the builder's own segment), every word written.
inline void set_u64_list(capnp::List<std::uint64_t>::Builder list, std::span<const std::uint64_t> v) {
  auto raw = capnp::AnyList::Reader(list.asReader()).getRawBytes();
  if (raw.size() == v.size() * 8 && !v.empty()) std::memcpy(const_cast<kj::byte*>(raw.begin()), v.data(), raw.size());
  else
    for (unsigned i = 0; i < v.size(); ++i) list.set(i, v[i]);
}

// A List(UInt64) orphan holding `v` (build_bulk_first's bulk).
inline capnp::Orphan<capnp::List<std::uint64_t>> u64_orphan(capnp::Orphanage orphanage,
                                                           std::span<const std::uint64_t> v) {
  auto orphan = orphanage.newOrphan<capnp::List<std::uint64_t>>(static_cast<unsigned>(v.size()));
  set_u64_list(orphan.get(), v);
  return orphan;
}

// Reads and validates a segment (shapes, dtypes, finite values).
// Its tensors are views of the message `keep` holds (copies without one).
Segment read_segment(wire::TrajectorySegment::Reader s, const std::shared_ptr<const void>& keep = nullptr);
// The checks of a segment's values, however it was read (read_segment,
// read_fixed_layout): flags, failure codes, times, finite numbers. Throws
// Invalid; pads a short infra_failures to one count per code.
void check_segment_values(Segment& x);
// A segment as Cap'n Proto's builder lays it out (its bulk first): the
// encoding of token segments, which the fixed layout does not take.
WireBuffer encode_segment_built(const Segment& x, std::string_view sender);
// A segment read through Cap'n Proto's reader, whatever its layout (what
// decode<Segment> falls back to).
Result<Segment> decode_segment_general(const WireBuffer& buf, const DecodeOptions& options = {});

using Which = wire::Envelope::Body::Which;
MessageKind kind_of(Which w);

// A message builder whose first segment is one array with a word in
// front for the segment table: a message that fits is its own flat array
// (no copy after building); a larger one grows as Cap'n Proto's own
// builder does (segments zeroed here) and is flattened with a copy.
// Cap'n Proto writes only the fields that are set, so a struct or list
// must be built in zeroed memory; FlatBuilder zeroes all of its array
// unless told `bulk_first` (build_bulk_first): then only the segment
// table and the root pointer, and the rest once the bulk is written.
class FlatBuilder final : public capnp::MessageBuilder {
 public:
  // `recycled`: the space comes from recycled_words (messages cut again
  // and again at one size: a weight set's chunks).
  explicit FlatBuilder(std::size_t words, bool recycled = false, bool bulk_first = false);
  kj::ArrayPtr<capnp::word> allocateSegment(unsigned minimum_size) override;
  // Zeroes the array from the first word not yet allocated to its end:
  // what a bulk-first message's structure is built in.
  void zero_the_rest();
  WireBuffer finish();

 private:
  kj::Array<capnp::word> space_;
  bool gave_first_ = false;
  std::vector<kj::Array<capnp::word>> more_;
};

// Tests only: a FlatBuilder fills its array with `byte` (0-255; -1: off,
// the default) before zeroing what it zeroes, so memory it leaves
// unzeroed holds a known pattern (0: as if it zeroed everything).
void fill_builder_space_for_tests(int byte);
// Fills `space` so (a no-op unless a test asked): every message writer calls it on its fresh memory.
void fill_for_tests(kj::ArrayPtr<capnp::word> space);

// Starts an Envelope in `message`: schema version and sender.
inline wire::Envelope::Builder init_envelope(FlatBuilder& message, std::string_view sender) {
  auto env = message.initRoot<wire::Envelope>();
  env.setSchemaVersion(wire::ENVELOPE_SCHEMA_VERSION);
  env.setSender(kj::StringPtr(std::string(sender).c_str()));
  return env;
}

// Builds an Envelope, lets `fill` set its body, and flattens it. A good
// `size_hint_words` makes the message one segment (built in place).
template <class Fill>
WireBuffer build(std::string_view sender, Fill&& fill, std::size_t size_hint_words = 0, bool recycled = false) {
  FlatBuilder message(std::max<std::size_t>(size_hint_words, capnp::SUGGESTED_FIRST_SEGMENT_WORDS), recycled);
  fill(init_envelope(message, sender).initBody());
  return message.finish();
}

// Words a Text takes in a message, with its pointer: its bytes, the NUL,
// rounded up to words.
inline std::size_t text_words(std::size_t bytes) { return (bytes + 8) / 8 + 1; }

// Builds an Envelope whose bulk (tensors' data, long lists of words) is
// written whole, so its memory is never zeroed first: `bulk(orphanage)`
// allocates each blob as an orphan at the front of the message and fills
// it to its last byte (data_orphan, u64_orphan), returning them; the rest
// of the array is then zeroed and `structure(body, orphans)` builds the
// structs, lists and texts there and adopts the orphans into their fields
// (a pointer set, nothing copied). `bulk_words` and `structure_words`
// size the array (a structure that outgrows it continues in a zeroed
// segment of its own, as build's messages do).
template <class Bulk, class Structure>
WireBuffer build_bulk_first(std::string_view sender, Bulk&& bulk, Structure&& structure, std::size_t bulk_words,
                            std::size_t structure_words, bool recycled = false) {
  FlatBuilder message(std::max<std::size_t>(1 + bulk_words + structure_words, capnp::SUGGESTED_FIRST_SEGMENT_WORDS),
                      recycled, /*bulk_first=*/true);
  auto orphans = bulk(message.getOrphanage());
  message.zero_the_rest();
  structure(init_envelope(message, sender).initBody(), orphans);
  return message.finish();
}

// Zeroes the bytes after a bulk blob's last one to the end of its word:
// they lie in memory nobody zeroed, and the message holds them.
inline void zero_word_padding(capnp::Data::Builder blob) {
  if (const std::size_t pad = (8 - blob.size() % 8) % 8) std::memset(blob.end(), 0, pad);
}

// A Data orphan holding `from`'s bytes, every byte of its words written.
inline capnp::Orphan<capnp::Data> data_orphan(capnp::Orphanage orphanage, kj::ArrayPtr<const kj::byte> from) {
  auto orphan = orphanage.newOrphan<capnp::Data>(static_cast<unsigned>(from.size()));
  auto into = orphan.get();
  if (from.size()) std::memcpy(into.begin(), from.begin(), from.size());
  zero_word_padding(into);
  return orphan;
}

// A tensor's values as a Data orphan (data_orphan).
template <class V>
capnp::Orphan<capnp::Data> tensor_orphan(capnp::Orphanage orphanage, const V& v) {
  const std::size_t n = v.size() * sizeof(typename V::value_type);
  return data_orphan(orphanage, kj::arrayPtr(reinterpret_cast<const kj::byte*>(v.data()), n));
}

// A tensor's dtype and shape, its data adopted from `data` (tensor_orphan).
template <class T>
void set_tensor_adopting(wire::Tensor::Builder b, std::initializer_list<std::uint32_t> shape,
                         capnp::Orphan<capnp::Data>& data) {
  b.setDtype(dtype_of<T>());
  auto s = b.initShape(static_cast<unsigned>(shape.size()));
  unsigned i = 0;
  for (auto d : shape) s.set(i++, d);
  b.adoptData(kj::mv(data));
}

// Validates framing, limits and schema, checks the body holds `expected`,
// then runs `read` on it. Every failure becomes a named Error.
Error classify(const kj::Exception& e);
Result<wire::Envelope::Reader> open_checked(const WireBuffer& buf, const DecodeOptions& options,
                                            std::optional<capnp::FlatArrayMessageReader>& reader);

// Cap'n Proto's read limits from ours.
inline capnp::ReaderOptions reader_options(const DecodeOptions& options) {
  capnp::ReaderOptions ro;
  ro.traversalLimitInWords = options.traversal_limit_words;
  ro.nestingLimit = options.nesting_limit;
  return ro;
}

// An Envelope whose pointers were all walked, refused when its schema
// version is newer than this build's.
Result<wire::Envelope::Reader> check_schema(wire::Envelope::Reader env);

// Framing and limits for a message whose root is `Root` (any schema):
// size limit, whole words, announced size, no trailing bytes, and one
// walk of every pointer before any field read. open_checked adds the
// Envelope's schema version. May throw kj::Exception (see classify).
template <class Root>
Result<typename Root::Reader> open_root(const WireBuffer& buf, const DecodeOptions& options,
                                        std::optional<capnp::FlatArrayMessageReader>& reader) {
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
  reader.emplace(words, reader_options(options));
  if (reader->getEnd() != words.end()) return make_error(Errc::malformed_message, "trailing bytes after the message");
  auto root = reader->getRoot<Root>();
  (void)root.totalSize();
  return root;
}

// Opens an Envelope with `open` (a Result<wire::Envelope::Reader>), checks
// its body holds `expected`, then runs `read` on it. Every failure,
// returned or thrown, becomes a named Error.
template <class T, class Open, class Read>
Result<T> read_envelope(Open&& open, Which expected, Read&& read) {
  try {
    auto env = open();
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

template <class T, class Read>
Result<T> decode_body(const WireBuffer& buf, const DecodeOptions& options, Which expected, Read&& read) {
  std::optional<capnp::FlatArrayMessageReader> reader;
  return read_envelope<T>([&] { return open_checked(buf, options, reader); }, expected, std::forward<Read>(read));
}

}  // namespace rlx::codec_detail
