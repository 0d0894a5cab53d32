// An immutable, shared, word-aligned buffer holding one serialised
// Cap'n Proto message (an Envelope). Copying a WireBuffer copies a
// pointer, never the bytes: inside one process every actor that receives
// a message reads the sender's buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <capnp/common.h>
#include <kj/array.h>

namespace rlx {

class WireBuffer {
 public:
  WireBuffer() = default;

  // Takes ownership of a flat array produced by capnp::messageToFlatArray.
  explicit WireBuffer(kj::Array<capnp::word> words);

  // Copies arbitrary bytes (e.g. from the network, or test input) into an
  // aligned buffer. A size that is not a whole number of words is kept, so
  // decoding can report the truncation.
  static WireBuffer copy_of(const void* data, std::size_t size);

  // The bytes as written (size() may be a non-multiple of 8 for bad input).
  std::span<const std::byte> bytes() const;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Whole words only (what a Cap'n Proto reader consumes).
  kj::ArrayPtr<const capnp::word> words() const;

  // True when `other` shares this buffer's storage (no copy was made).
  bool shares_storage_with(const WireBuffer& other) const { return words_ && words_ == other.words_; }

 private:
  std::shared_ptr<const kj::Array<capnp::word>> words_;
  std::size_t size_ = 0;
};

// Word arrays for large buffers that arrive again and again at the same
// size (a node's weight sets, one per version): when one is freed its
// memory is kept (at most `kSpare` arrays) and handed out again, so the
// next set is written into pages already mapped instead of faulting in
// fresh ones (page faults cost more than the copy itself: docs/BENCHMARKS.md).
// Thread-safe. The contents of a recycled array are undefined.
kj::Array<capnp::word> recycled_words(std::size_t words);

}  // namespace rlx
