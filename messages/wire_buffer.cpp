#include "messages/wire_buffer.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

namespace rlx {

namespace {

// Gives freed arrays back to the pool (or frees them when it is full).
class RecyclingDisposer final : public kj::ArrayDisposer {
 public:
  static constexpr std::size_t kSpareCount = 4096;
  // Spare memory kept: by default enough for a weight set or two and a set's chunks.
  std::atomic<std::size_t> spare_limit{std::size_t{768} << 20};

  void* take(std::size_t words) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = spare_.begin(); it != spare_.end(); ++it)
      if (it->second == words) {
        void* p = it->first;
        spare_bytes_ -= it->second * sizeof(capnp::word);
        spare_.erase(it);
        return p;
      }
    return nullptr;
  }

 protected:
  void disposeImpl(void* first, std::size_t, std::size_t, std::size_t capacity, void (*)(void*)) const override {
    const std::size_t bytes = capacity * sizeof(capnp::word);
    const std::size_t limit = spare_limit.load(std::memory_order_relaxed);
    if (bytes > limit) return std::free(first);
    std::lock_guard<std::mutex> lock(mu_);
    while (!spare_.empty() && (spare_bytes_ + bytes > limit || spare_.size() >= kSpareCount)) {
      std::free(spare_.front().first);  // the oldest spares go
      spare_bytes_ -= spare_.front().second * sizeof(capnp::word);
      spare_.erase(spare_.begin());
    }
    spare_.emplace_back(first, capacity);
    spare_bytes_ += bytes;
  }

 private:
  mutable std::mutex mu_;
  mutable std::deque<std::pair<void*, std::size_t>> spare_;  // memory, words
  mutable std::size_t spare_bytes_ = 0;
};

RecyclingDisposer& recycler() {
  static auto* r = new RecyclingDisposer;  // never destroyed: arrays may be freed during static destruction
  return *r;
}

}  // namespace

kj::Array<capnp::word> recycled_words(std::size_t words) {
  void* p = recycler().take(words);
  if (!p) p = std::malloc(std::max<std::size_t>(words, 1) * sizeof(capnp::word));
  if (!p) throw std::bad_alloc();
  return kj::Array<capnp::word>(static_cast<capnp::word*>(p), words, recycler());
}

void set_recycled_spare_bytes(std::size_t bytes) { recycler().spare_limit.store(bytes, std::memory_order_relaxed); }

WireBuffer::WireBuffer(kj::Array<capnp::word> words)
    : words_(std::make_shared<const Storage>(std::move(words))), size_(words_->words.size() * sizeof(capnp::word)) {}

WireBuffer::WireBuffer(kj::Array<capnp::word> words, std::size_t bytes)
    : words_(std::make_shared<const Storage>(std::move(words))),
      size_(std::min(bytes, words_->words.size() * sizeof(capnp::word))) {}

WireBuffer WireBuffer::copy_of(const void* data, std::size_t size) {
  auto words = kj::heapArray<capnp::word>((size + sizeof(capnp::word) - 1) / sizeof(capnp::word));
  if (words.size() > 0) {
    std::memset(words.begin(), 0, words.size() * sizeof(capnp::word));
    std::memcpy(words.begin(), data, size);
  }
  WireBuffer out(std::move(words));
  out.size_ = size;
  return out;
}

WireBuffer WireBuffer::borrowed(kj::ArrayPtr<const capnp::word> words, std::size_t bytes) {
  auto* begin = const_cast<capnp::word*>(words.begin());
  auto storage = std::make_shared<Storage>(kj::Array<capnp::word>(begin, words.size(), kj::NullArrayDisposer::instance));
  storage->borrowed = true;
  WireBuffer out;
  out.words_ = std::move(storage);
  out.size_ = std::min(bytes, words.size() * sizeof(capnp::word));
  return out;
}

std::span<const std::byte> WireBuffer::bytes() const {
  if (!words_) return {};
  return {reinterpret_cast<const std::byte*>(words_->words.begin()), size_};
}

kj::ArrayPtr<const capnp::word> WireBuffer::words() const {
  if (!words_) return nullptr;
  return kj::arrayPtr(words_->words.begin(), size_ / sizeof(capnp::word));
}

}  // namespace rlx
