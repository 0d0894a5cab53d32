#include "messages/weight_chunks.hpp"

#include <cstring>
#include <functional>

#include <capnp/message.h>

#include <isa-l/crc64.h>
#include <xxhash.h>

#include "messages/codec.hpp"
#include "messages/codec_detail.hpp"
#include "messages/weight_delta.hpp"

namespace rlx {

std::uint64_t chunk_checksum(const void* data, std::size_t size, ChunkChecksum kind) {
  if (kind == ChunkChecksum::xxh64) return XXH64(data, size, 0);
  return crc64_ecma_refl(0, static_cast<const std::uint8_t*>(data), size);
}

std::uint32_t weight_chunk_count(std::uint64_t total_bytes, std::uint64_t chunk_bytes) {
  if (chunk_bytes == 0 || total_bytes == 0) return 1;
  return static_cast<std::uint32_t>((total_bytes + chunk_bytes - 1) / chunk_bytes);
}

struct ChunkFrame::Flat {
  std::once_flag once;
  WireBuffer buf;
};

WireBuffer ChunkFrame::flat() const {
  if (data.empty()) return head;
  const auto make = [this] {
    auto words = recycled_words((head.size() + data.size() + 7) / 8);
    auto* out = reinterpret_cast<std::byte*>(words.begin());
    std::memcpy(out, head.bytes().data(), head.size());
    std::memcpy(out + head.size(), data.data(), data.size());
    return WireBuffer(std::move(words), head.size() + data.size());
  };
  if (!flat_once) return make();
  std::call_once(flat_once->once, [&] { flat_once->buf = make(); });
  return flat_once->buf;
}

namespace {

// The chunk's Envelope with its data where it lies in the set: Cap'n Proto
// makes the referenced bytes a segment of their own, so the frame is the
// table, the first segment (copied: a few words) and those bytes. None
// when the message does not come out as those two segments.
std::optional<ChunkFrame> frame_in_place(const WireBuffer& set, const kj::byte* p, std::uint64_t n,
                                         const std::function<void(wire::WeightChunk::Builder)>& fill,
                                         std::string_view sender) {
  if (n == 0 || n % 8 != 0 || reinterpret_cast<std::uintptr_t>(p) % 8 != 0) return std::nullopt;
  capnp::MallocMessageBuilder message(64);
  auto env = message.initRoot<wire::Envelope>();
  env.setSchemaVersion(wire::ENVELOPE_SCHEMA_VERSION);
  env.setSender(kj::StringPtr(std::string(sender).c_str()));
  auto c = env.initBody().initWeightChunk();
  c.adoptData(message.getOrphanage().referenceExternalData(capnp::Data::Reader(p, n)));
  fill(c);
  auto segments = message.getSegmentsForOutput();
  if (segments.size() != 2 || reinterpret_cast<const kj::byte*>(segments[1].begin()) != p ||
      segments[1].size() * sizeof(capnp::word) != n)
    return std::nullopt;
  // The stream framing of two segments: (count - 1) = 1, the two sizes, padding.
  auto head = kj::heapArray<capnp::word>(2 + segments[0].size());
  const std::uint32_t table[4] = {1, static_cast<std::uint32_t>(segments[0].size()),
                                  static_cast<std::uint32_t>(segments[1].size()), 0};
  std::memcpy(head.begin(), table, sizeof(table));
  std::memcpy(head.begin() + 2, segments[0].begin(), segments[0].size() * sizeof(capnp::word));
  return ChunkFrame{WireBuffer(std::move(head)), set, std::span(reinterpret_cast<const std::byte*>(p), n),
                    std::make_shared<ChunkFrame::Flat>()};
}

}  // namespace

Result<ChunkFrame> frame_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                      std::uint64_t chunk_bytes, std::string_view sender, const DeltaBase* base) {
  const std::uint64_t total = set.size();
  const std::uint32_t count = weight_chunk_count(total, chunk_bytes);
  if (index >= count)
    return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " of version " + std::to_string(version) +
                                              " does not exist (" + std::to_string(count) + " chunks)");
  const std::uint64_t offset = chunk_bytes == 0 ? 0 : static_cast<std::uint64_t>(index) * chunk_bytes;
  const std::uint64_t n = std::min<std::uint64_t>(chunk_bytes == 0 ? total : chunk_bytes, total - offset);
  const auto* p = reinterpret_cast<const kj::byte*>(set.bytes().data()) + offset;
  thread_local std::vector<std::uint8_t> delta;
  bool as_delta = false;
  if (base && n > 0) {
    const auto* b = reinterpret_cast<const std::uint8_t*>(base->set.bytes().data());
    const std::uint64_t base_n = base->set.size() > offset ? base->set.size() - offset : 0;
    encode_xor_delta(p, n, base_n ? b + offset : b, std::min<std::uint64_t>(base_n, n), delta);
    as_delta = static_cast<double>(delta.size()) <= kDeltaMaxShare * static_cast<double>(n);
  }
  const kj::ArrayPtr<const kj::byte> data = as_delta ? kj::arrayPtr(delta.data(), delta.size()) : kj::arrayPtr(p, n);
  const auto fields = [&](wire::WeightChunk::Builder c) {
    c.setVersion(version);
    c.setIndex(index);
    c.setCount(count);
    c.setTotalBytes(total);
    c.setOffset(offset);
    c.setChecksumKind(wire::ChunkChecksum::CRC64);
    c.setChecksum(chunk_checksum(data.begin(), data.size()));
    if (as_delta) {
      c.setEncoding(wire::ChunkEncoding::XOR_DELTA);
      c.setBase(base->version);
      c.setPlainChecksum(chunk_checksum(p, n));
    }
  };
  if (!as_delta)
    if (auto frame = frame_in_place(set, p, n, fields, sender)) return std::move(*frame);
  // A delta's bytes first, then the fields (codec_detail::build_bulk_first).
  return ChunkFrame{codec_detail::build_bulk_first(
                        sender, [&](capnp::Orphanage o) { return codec_detail::data_orphan(o, data); },
                        [&](auto body, capnp::Orphan<capnp::Data>& bytes) {
                          auto c = body.initWeightChunk();
                          c.adoptData(kj::mv(bytes));
                          fields(c);
                        },
                        (data.size() + 7) / 8, 32 + codec_detail::text_words(sender.size()), /*recycled=*/true),
                    {}, {}, nullptr};
}

Result<WireBuffer> encode_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                       std::uint64_t chunk_bytes, std::string_view sender, const DeltaBase* base) {
  auto frame = frame_weight_chunk(set, version, index, chunk_bytes, sender, base);
  if (!frame) return frame.error();
  return frame->flat();
}

Result<WeightChunkData> make_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                          std::uint64_t chunk_bytes) {
  // One place cuts chunks (encode_weight_chunk); this is its decoded form.
  auto encoded = encode_weight_chunk(set, version, index, chunk_bytes, "weight_store");
  if (!encoded) return encoded.error();
  return decode<WeightChunkData>(*encoded);
}

ChunkAssembler::ChunkAssembler(std::uint64_t version, std::uint64_t total_bytes, std::uint64_t chunk_bytes)
    : version_(version), count_(weight_chunk_count(total_bytes, chunk_bytes)), total_(total_bytes),
      chunk_bytes_(chunk_bytes == 0 ? total_bytes : chunk_bytes), have_(count_, false), no_delta_(count_, false),
      words_(recycled_words((total_bytes + 7) / 8)) {
  // The last word's padding is part of the set's bytes when they are whole words only.
  if (words_.size() > 0) std::memset(words_.end() - 1, 0, sizeof(capnp::word));
}

void ChunkAssembler::set_base(DeltaBase base) { base_ = std::move(base); }

std::optional<std::uint64_t> ChunkAssembler::base_for(std::uint32_t index) const {
  if (!base_ || index >= count_ || no_delta_[index]) return std::nullopt;
  return base_->version;
}

Result<bool> ChunkAssembler::add(const WeightChunkData& c) {
  // One place checks and places chunks (add_encoded).
  return add_encoded(encode(c, "chunk"));
}

template <class ChunkReader>
Result<bool> ChunkAssembler::take(ChunkReader c, std::uint32_t* index_out) {
  if (index_out) *index_out = c.getIndex();
  if (c.getVersion() != version_ || c.getCount() != count_ || c.getTotalBytes() != total_)
    return make_error(Errc::invalid_field, "chunk of version " + std::to_string(c.getVersion()) +
                                               " does not belong to version " + std::to_string(version_));
  const std::uint32_t index = c.getIndex();
  if (index >= count_) return make_error(Errc::invalid_field, "chunk index out of range");
  const std::uint64_t offset = static_cast<std::uint64_t>(index) * chunk_bytes_;
  const std::uint64_t size = std::min(chunk_bytes_, total_ - std::min(offset, total_));
  auto data = c.getData();
  const bool delta = c.getEncoding() == wire::ChunkEncoding::XOR_DELTA;
  if (!delta && c.getEncoding() != wire::ChunkEncoding::RAW)
    return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " has an unknown encoding");
  if (c.getOffset() != offset || (!delta && data.size() != size))
    return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " has the wrong offset or size");
  const auto kind = c.getChecksumKind();
  if (kind != wire::ChunkChecksum::CRC64 && kind != wire::ChunkChecksum::XXH64)
    return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " has an unknown checksum kind");
  const auto checksum = static_cast<ChunkChecksum>(kind);
  if (chunk_checksum(data.begin(), data.size(), checksum) != c.getChecksum())
    return make_error(Errc::invalid_field, "weight chunk: checksum mismatch");
  if (have_[index]) return false;
  auto* into = reinterpret_cast<std::uint8_t*>(words_.begin()) + offset;
  if (delta) {
    if (!base_ || c.getBase() != base_->version) {
      no_delta_[index] = true;
      return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " is a delta against version " +
                                                 std::to_string(c.getBase()) + ", which is not held here");
    }
    const auto* b = reinterpret_cast<const std::uint8_t*>(base_->set.bytes().data());
    const std::uint64_t base_n = base_->set.size() > offset ? std::min(base_->set.size() - offset, size) : 0;
    auto applied = apply_xor_delta(data.begin(), data.size(), base_n ? b + offset : b, base_n, into, size);
    if (!applied || chunk_checksum(into, size, checksum) != c.getPlainChecksum()) {
      no_delta_[index] = true;  // asked for raw next time (e.g. the base is not the sender's)
      return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + ": delta against version " +
                                                 std::to_string(base_->version) + " does not apply" +
                                                 (applied ? ": checksum mismatch after applying" : ": " + applied.error().message));
    }
    ++delta_chunks_;
  } else if (size && data.begin() != into) {  // placed chunks are where they belong already
    std::memmove(into, data.begin(), size);
  }
  wire_bytes_ += data.size();
  have_[index] = true;
  ++received_;
  return true;
}

Result<bool> ChunkAssembler::add_encoded(const WireBuffer& buf, std::uint32_t* index_out) {
  using namespace codec_detail;
  return decode_body<bool>(buf, DecodeOptions{}, Which::WEIGHT_CHUNK,
                           [&](auto body) { return take(body.getWeightChunk(), index_out); });
}

std::byte* ChunkAssembler::place(std::uint32_t index, std::uint64_t bytes) {
  if (index >= count_ || have_[index]) return nullptr;
  const std::uint64_t offset = static_cast<std::uint64_t>(index) * chunk_bytes_;
  if (offset % 8 != 0 || bytes != std::min(chunk_bytes_, total_ - std::min(offset, total_)) ||
      offset + bytes > words_.size() * sizeof(capnp::word))
    return nullptr;
  return reinterpret_cast<std::byte*>(words_.begin()) + offset;
}

Result<bool> ChunkAssembler::add_placed(const WireBuffer& head, std::uint32_t index, std::uint32_t* index_out) {
  using namespace codec_detail;
  // The table: two segments, the second the chunk's bytes where place(index) put them.
  if (head.size() < 16) return make_error(Errc::truncated_message, "a placed chunk's frame has no table");
  std::uint32_t table[4];
  std::memcpy(table, head.bytes().data(), sizeof(table));
  if (table[0] != 1 || head.size() != 16 + std::uint64_t{table[1]} * 8)
    return make_error(Errc::malformed_message, "a placed chunk's frame is not two segments");
  std::byte* data = place(index, std::uint64_t{table[2]} * 8);
  if (!data) return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " has no place of that size");
  const auto* words = reinterpret_cast<const capnp::word*>(head.bytes().data());
  kj::ArrayPtr<const capnp::word> segments[2] = {
      kj::arrayPtr(words + 2, table[1]), kj::arrayPtr(reinterpret_cast<const capnp::word*>(data), table[2])};
  std::optional<capnp::SegmentArrayMessageReader> reader;
  return read_envelope<bool>(
      [&]() -> Result<wire::Envelope::Reader> {
        reader.emplace(kj::arrayPtr(segments, 2), reader_options(DecodeOptions{}));
        auto env = reader->getRoot<wire::Envelope>();
        (void)env.totalSize();  // every pointer walked before a field is read
        return check_schema(env);
      },
      Which::WEIGHT_CHUNK, [&](auto body) { return take(body.getWeightChunk(), index_out); });
}

std::vector<std::uint32_t> ChunkAssembler::missing() const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t i = 0; i < count_; ++i)
    if (!have_[i]) out.push_back(i);
  return out;
}

WireBuffer ChunkAssembler::take() {
  // A set that is not whole words is malformed; copy_of keeps its size so decoding reports it.
  if (total_ % 8 != 0) return WireBuffer::copy_of(words_.begin(), total_);
  WireBuffer set(std::move(words_));
  // Every byte came in a raw chunk whose checksum matched, cut by a store that
  // checked the whole set: the node's store and explorers need not hash it again.
  // Bytes rebuilt from deltas are checked again against the set's checksum.
  if (complete() && delta_chunks_ == 0) set.mark_checked();
  return set;
}

}  // namespace rlx
