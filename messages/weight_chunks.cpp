#include "messages/weight_chunks.hpp"

#include <cstring>

#include <xxhash.h>

#include "messages/codec.hpp"
#include "messages/codec_detail.hpp"
#include "messages/weight_delta.hpp"

namespace rlx {

std::uint64_t chunk_checksum(const void* data, std::size_t size) { return XXH64(data, size, 0); }

std::uint32_t weight_chunk_count(std::uint64_t total_bytes, std::uint64_t chunk_bytes) {
  if (chunk_bytes == 0 || total_bytes == 0) return 1;
  return static_cast<std::uint32_t>((total_bytes + chunk_bytes - 1) / chunk_bytes);
}

Result<WireBuffer> encode_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
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
  return codec_detail::build(
      sender,
      [&](auto body) {
        auto c = body.initWeightChunk();
        c.setVersion(version);
        c.setIndex(index);
        c.setCount(count);
        c.setTotalBytes(total);
        c.setOffset(offset);
        c.setData(data);
        c.setChecksum(chunk_checksum(data.begin(), data.size()));
        if (as_delta) {
          c.setEncoding(wire::ChunkEncoding::XOR_DELTA);
          c.setBase(base->version);
          c.setPlainChecksum(chunk_checksum(p, n));
        }
      },
      data.size() / 8 + 32, /*recycled=*/true);
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

Result<bool> ChunkAssembler::add_encoded(const WireBuffer& buf, std::uint32_t* index_out) {
  using namespace codec_detail;
  return decode_body<bool>(buf, DecodeOptions{}, Which::WEIGHT_CHUNK, [&](auto body) -> Result<bool> {
    auto c = body.getWeightChunk();
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
    if (chunk_checksum(data.begin(), data.size()) != c.getChecksum())
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
      if (!applied || chunk_checksum(into, size) != c.getPlainChecksum()) {
        no_delta_[index] = true;  // asked for raw next time (e.g. the base is not the sender's)
        return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + ": delta against version " +
                                                   std::to_string(base_->version) + " does not apply" +
                                                   (applied ? ": checksum mismatch after applying" : ": " + applied.error().message));
      }
      ++delta_chunks_;
    } else if (size) {
      std::memcpy(into, data.begin(), size);
    }
    wire_bytes_ += data.size();
    have_[index] = true;
    ++received_;
    return true;
  });
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
