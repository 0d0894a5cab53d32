#include "messages/wire_buffer.hpp"

#include <cstring>

namespace rlx {

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
