// The weight shelf: the last N published weight sets of one store, and
// the encoded chunks of each (cut once per version, whatever the number
// of nodes fetching them). Thread-safe: the weight store actor fills and
// reads it, and the bulk channel's server threads serve chunks from it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "messages/wire_buffer.hpp"

namespace rlx {

class WeightShelf {
 public:
  // Keeps `keep` versions, served in chunks of `chunk_bytes`.
  // `corrupt_chunks` is for tests: the first N chunks served are damaged
  // after their checksum was computed, so the receiver must notice.
  WeightShelf(std::size_t keep, std::uint64_t chunk_bytes, std::uint32_t corrupt_chunks = 0);

  // Adds a checked set. Refuses a version not newer than the newest held.
  Result<void> put(std::uint64_t version, WireBuffer set);

  struct Entry {
    std::uint64_t version = 0;
    WireBuffer set;
  };
  // The newest set, or none yet.
  std::optional<Entry> newest() const;
  // `version` if held.
  std::optional<Entry> find(std::uint64_t version) const;

  // Chunk `index` of `version`, encoded as a WeightChunk envelope.
  // Errc::not_found for a version not held, invalid_field for an index
  // past the end.
  Result<WireBuffer> chunk(std::uint64_t version, std::uint32_t index);

  std::uint64_t chunk_bytes() const { return chunk_bytes_; }

  // Forgets every set (a member node whose head restarted: its versions
  // above the restarted learner's are not that learner's).
  void clear();

 private:
  const std::size_t keep_;
  const std::uint64_t chunk_bytes_;
  mutable std::mutex mu_;
  std::deque<Entry> entries_;            // oldest first
  // The newest version's chunks, each cut once by whichever thread asks
  // first while the others asking for it wait (call_once).
  struct Cut {
    explicit Cut(std::size_t n) : once(n), chunks(n) {}
    std::vector<std::once_flag> once;
    std::vector<WireBuffer> chunks;
  };
  std::uint64_t cut_version_ = ~std::uint64_t{0};
  std::shared_ptr<Cut> cut_;
  std::uint32_t corrupt_left_;
};

}  // namespace rlx
