#include "transport/weight_shelf.hpp"

#include "messages/codec.hpp"
#include "messages/weight_chunks.hpp"

namespace rlx {

WeightShelf::WeightShelf(std::size_t keep, std::uint64_t chunk_bytes, std::uint32_t corrupt_chunks)
    : keep_(std::max<std::size_t>(keep, 1)), chunk_bytes_(chunk_bytes), corrupt_left_(corrupt_chunks) {}

Result<void> WeightShelf::put(std::uint64_t version, WireBuffer set) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!entries_.empty() && version <= entries_.back().version)
    return make_error(Errc::invalid_field, "version " + std::to_string(version) + " is not newer than " +
                                               std::to_string(entries_.back().version));
  entries_.push_back(Entry{version, std::move(set)});
  while (entries_.size() > keep_) entries_.pop_front();
  return {};
}

void WeightShelf::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  cut_version_ = ~std::uint64_t{0};
  cut_.reset();
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
  std::shared_ptr<Cut> cut;
  bool corrupt = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_)
      if (e.version == version) found = e;
    if (!found) return make_error(Errc::not_found, "version " + std::to_string(version) + " is not held");
    const std::uint32_t count = weight_chunk_count(found->set.size(), chunk_bytes_);
    if (index >= count)
      return make_error(Errc::invalid_field, "chunk " + std::to_string(index) + " of version " + std::to_string(version) +
                                                " does not exist (" + std::to_string(count) + " chunks)");
    if (corrupt_left_ > 0) {
      --corrupt_left_;
      corrupt = true;
    } else if (version == entries_.back().version) {  // nodes fetch the newest: its chunks are kept
      if (cut_version_ != version) {
        cut_version_ = version;
        cut_ = std::make_shared<Cut>(count);
      }
      cut = cut_;
    }
  }
  if (corrupt) {
    auto c = make_weight_chunk(found->set, version, index, chunk_bytes_);
    if (!c) return c.error();
    c->data[c->data.size() / 2] ^= 0x5a;
    return encode(*c, "weight_store");
  }
  if (!cut) return encode_weight_chunk(found->set, version, index, chunk_bytes_, "weight_store");
  // Cut outside the lock (other chunks are served meanwhile), once.
  Error failed;
  std::call_once(cut->once[index], [&] {
    auto encoded = encode_weight_chunk(found->set, version, index, chunk_bytes_, "weight_store");
    if (encoded) cut->chunks[index] = std::move(*encoded);
    else failed = encoded.error();
  });
  if (cut->chunks[index].empty())
    return failed.code != Errc::ok ? failed : make_error(Errc::invalid_field, "chunk could not be cut");
  return cut->chunks[index];
}

}  // namespace rlx
