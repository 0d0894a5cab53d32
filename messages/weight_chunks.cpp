#include "messages/weight_chunks.hpp"

#include <cstring>

#include <xxhash.h>

namespace rlx {

std::uint32_t weight_chunk_count(std::uint64_t total_bytes, std::uint64_t chunk_bytes) {
  if (chunk_bytes == 0 || total_bytes == 0) return 1;
  return static_cast<std::uint32_t>((total_bytes + chunk_bytes - 1) / chunk_bytes);
}

Result<WeightChunkData> make_weight_chunk(const WireBuffer& set, std::uint64_t version, std::uint32_t index,
                                          std::uint64_t chunk_bytes) {
  const std::uint64_t total = set.size();
  const std::uint32_t count = weight_chunk_count(total, chunk_bytes);
  if (index >= count)
    return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " of version " + std::to_string(version) +
                                              " does not exist (" + std::to_string(count) + " chunks)");
  WeightChunkData c;
  c.version = version;
  c.index = index;
  c.count = count;
  c.total_bytes = total;
  c.offset = chunk_bytes == 0 ? 0 : static_cast<std::uint64_t>(index) * chunk_bytes;
  const std::uint64_t n = std::min<std::uint64_t>(chunk_bytes == 0 ? total : chunk_bytes, total - c.offset);
  const auto* p = reinterpret_cast<const std::uint8_t*>(set.bytes().data()) + c.offset;
  c.data.assign(p, p + n);
  c.checksum = XXH64(c.data.data(), c.data.size(), 0);
  return c;
}

ChunkAssembler::ChunkAssembler(std::uint64_t version, std::uint64_t total_bytes, std::uint64_t chunk_bytes)
    : version_(version), count_(weight_chunk_count(total_bytes, chunk_bytes)), total_(total_bytes),
      chunk_bytes_(chunk_bytes == 0 ? total_bytes : chunk_bytes), have_(count_, false), bytes_(total_bytes) {}

Result<bool> ChunkAssembler::add(const WeightChunkData& c) {
  if (c.version != version_ || c.count != count_ || c.total_bytes != total_)
    return make_error(Errc::invalid_field, "chunk of version " + std::to_string(c.version) + " (" +
                                               std::to_string(c.count) + " chunks, " + std::to_string(c.total_bytes) +
                                               " B) does not belong to version " + std::to_string(version_));
  if (c.index >= count_) return make_error(Errc::invalid_field, "chunk index out of range");
  const std::uint64_t offset = static_cast<std::uint64_t>(c.index) * chunk_bytes_;
  const std::uint64_t size = std::min(chunk_bytes_, total_ - std::min(offset, total_));
  if (c.offset != offset || c.data.size() != size)
    return make_error(Errc::invalid_field, "chunk " + std::to_string(c.index) + " of version " +
                                               std::to_string(version_) + " has the wrong offset or size");
  if (have_[c.index]) return false;
  if (size) std::memcpy(bytes_.data() + offset, c.data.data(), size);
  have_[c.index] = true;
  ++received_;
  return true;
}

std::vector<std::uint32_t> ChunkAssembler::missing() const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t i = 0; i < count_; ++i)
    if (!have_[i]) out.push_back(i);
  return out;
}

WireBuffer ChunkAssembler::take() {
  WireBuffer b = WireBuffer::copy_of(bytes_.data(), bytes_.size());
  bytes_.clear();
  bytes_.shrink_to_fit();
  return b;
}

}  // namespace rlx
