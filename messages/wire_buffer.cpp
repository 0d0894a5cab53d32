#include "messages/wire_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace rlx {

namespace {

// Gives freed arrays back to the pool (or frees them when it is full).
class RecyclingDisposer final : public kj::ArrayDisposer {
 public:
  static constexpr std::size_t kSpare = 2;

  void* take(std::size_t words) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = spare_.begin(); it != spare_.end(); ++it)
      if (it->second == words) {
        void* p = it->first;
        spare_.erase(it);
        return p;
      }
    return nullptr;
  }

 protected:
  void disposeImpl(void* first, std::size_t, std::size_t, std::size_t capacity, void (*)(void*)) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.size() >= kSpare) {
      std::free(spare_.front().first);  // the oldest spare goes
      spare_.erase(spare_.begin());
    }
    spare_.emplace_back(first, capacity);
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::pair<void*, std::size_t>> spare_;  // memory, words
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

WireBuffer::WireBuffer(kj::Array<capnp::word> words)
    : words_(std::make_shared<const kj::Array<capnp::word>>(std::move(words))),
      size_(words_->size() * sizeof(capnp::word)) {}

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

std::span<const std::byte> WireBuffer::bytes() const {
  if (!words_) return {};
  return {reinterpret_cast<const std::byte*>(words_->begin()), size_};
}

kj::ArrayPtr<const capnp::word> WireBuffer::words() const {
  if (!words_) return nullptr;
  return kj::arrayPtr(words_->begin(), size_ / sizeof(capnp::word));
}

}  // namespace rlx
