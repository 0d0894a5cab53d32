// An immutable, shared, word-aligned buffer holding one serialised
// Cap'n Proto message (an Envelope). Copying a WireBuffer copies a
// pointer, never the bytes: inside one process every actor that receives
// a message reads the sender's buffer.
#pragma once

#include <atomic>
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
  // Takes ownership of `words`, of which the first `bytes` are the message.
  WireBuffer(kj::Array<capnp::word> words, std::size_t bytes);

  // Copies arbitrary bytes (e.g. from the network, or test input) into an
  // aligned buffer. A size that is not a whole number of words is kept, so
  // decoding can report the truncation.
  static WireBuffer copy_of(const void* data, std::size_t size);

  // Views `bytes` of memory someone else owns and will write over (a
  // stream reader's reused receive buffer): nothing may outlive the next
  // write into it. Decoders that hand out views (segments, weight sets,
  // log entries) decode a copy of a borrowed buffer instead.
  static WireBuffer borrowed(kj::ArrayPtr<const capnp::word> words, std::size_t bytes);
  bool is_borrowed() const { return words_ && words_->borrowed; }
  // This buffer, or an owned copy of its bytes when it is borrowed.
  WireBuffer owned() const { return is_borrowed() ? copy_of(bytes().data(), size_) : *this; }

  // The bytes as written (size() may be a non-multiple of 8 for bad input).
  std::span<const std::byte> bytes() const;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Whole words only (what a Cap'n Proto reader consumes).
  kj::ArrayPtr<const capnp::word> words() const;

  // Holds the bytes alive for whoever views them (decoded segments'
  // columns). Of a borrowed buffer: holds nothing (see borrowed()).
  std::shared_ptr<const void> keepalive() const { return words_; }

  // True when `other` shares this buffer's storage (no copy was made).
  bool shares_storage_with(const WireBuffer& other) const { return words_ && words_ == other.words_; }

  // A weight set's bytes are checked once per process: whoever checked
  // them in full (a weight store: the set's checksum; a node's relay:
  // every chunk's) marks the buffer, and later readers of the same
  // storage (explorers swapping from it) skip the pass. The bytes never
  // change, and a copy (across nodes: CAF's) starts unmarked.
  void mark_checked() const {
    if (words_) words_->checked.store(true, std::memory_order_release);
  }
  bool checked() const { return words_ && words_->checked.load(std::memory_order_acquire); }

 private:
  struct Storage {
    explicit Storage(kj::Array<capnp::word> w) : words(std::move(w)) {}
    kj::Array<capnp::word> words;
    bool borrowed = false;
    mutable std::atomic<bool> checked{false};
  };
  std::shared_ptr<const Storage> words_;
  std::size_t size_ = 0;
};

// Word arrays for large buffers that arrive again and again at the same
// size (a node's weight sets, one per version; the head's chunks of a
// set): when one is freed its memory is kept (up to 768 MiB of spares,
// the oldest freed first) and handed out again, so the
// next set is written into pages already mapped instead of faulting in
// fresh ones (page faults cost more than the copy itself: docs/BENCHMARKS.md).
// Thread-safe. The contents of a recycled array are undefined.
kj::Array<capnp::word> recycled_words(std::size_t words);
// How much freed memory the recycler keeps (768 MiB unless set): one
// process per node needs that; a benchmark that plays N nodes in one
// process gives it N times as much.
void set_recycled_spare_bytes(std::size_t bytes);

}  // namespace rlx
