#include "messages/weight_shelf.hpp"

#include "messages/codec.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {

WeightShelf::WeightShelf(std::size_t keep, std::uint64_t chunk_bytes, std::uint32_t corrupt_chunks)
    : keep_(std::max<std::size_t>(keep, 1)), chunk_bytes_(chunk_bytes), corrupt_left_(corrupt_chunks) {}

Result<bool> WeightShelf::put(std::uint64_t version, WireBuffer set) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!entries_.empty() && version <= entries_.back().version)
    return make_error(Errc::invalid_field, "version " + std::to_string(version) + " is not newer than " +
                                               std::to_string(entries_.back().version));
  entries_.push_back(Entry{version, std::move(set)});
  while (entries_.size() > keep_) entries_.pop_front();
  return true;
}

std::optional<WeightShelf::Entry> WeightShelf::newest() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

std::optional<WeightShelf::Entry> WeightShelf::find(std::uint64_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : entries_)
    if (e.version == version) return e;
  return std::nullopt;
}

Result<WireBuffer> WeightShelf::chunk(std::uint64_t version, std::uint32_t index) {
  std::optional<Entry> found;
  bool corrupt = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_)
      if (e.version == version) found = e;
    if (!found) return make_error(Errc::not_found, "version " + std::to_string(version) + " is not held");
    if (corrupt_left_ > 0) {
      --corrupt_left_;
      corrupt = true;
    } else if (cached_version_ == version && index < cached_.size() && !cached_[index].empty()) {
      return cached_[index];
    }
  }
  if (corrupt) {
    auto c = make_weight_chunk(found->set, version, index, chunk_bytes_);
    if (!c) return c.error();
    c->data[c->data.size() / 2] ^= 0x5a;
    return encode(*c, "weight_store");
  }
  // Cut outside the lock: other threads serve other chunks meanwhile.
  auto encoded = encode_weight_chunk(found->set, version, index, chunk_bytes_, "weight_store");
  if (!encoded) return encoded.error();
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_version_ != version) {
    // Only the newest version's chunks are kept (nodes fetch the newest).
    if (entries_.empty() || entries_.back().version != version) return encoded;
    cached_version_ = version;
    cached_.assign(weight_chunk_count(found->set.size(), chunk_bytes_), WireBuffer{});
  }
  if (index < cached_.size()) cached_[index] = *encoded;
  return encoded;
}

}  // namespace rlx
