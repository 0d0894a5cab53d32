// The weight shelf: the last N published weight sets of one store, and
// the encoded chunks of each (cut once per version, whatever the number
// of nodes fetching them). Thread-safe: the weight store actor fills and
// reads it, and the bulk channel's server threads serve chunks from it.
#pragma once

#include <cstdint>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "messages/weight_chunks.hpp"
#include "messages/wire_buffer.hpp"

namespace rlx {

class WeightShelf {
 public:
  // Keeps `keep` versions, served in chunks of `chunk_bytes`.
  // `corrupt_chunks` is for tests: the first N chunks served are damaged
  // after their checksum was computed, so the receiver must notice.
  // `deltas`: a chunk asked for against a base version held here travels
  // as a delta against it when that is smaller (messages/weight_chunks.hpp).
  // Each new version's chunks are cut at once, on a few threads of the
  // shelf's own, so the first node to ask finds them cut: with deltas,
  // against the version before it (what nodes hold); raw (a frame's head
  // and its checksum, the bytes staying in the set) once any chunk has
  // been asked for (a store no node fetches from in chunks cuts nothing).
  WeightShelf(std::size_t keep, std::uint64_t chunk_bytes, std::uint32_t corrupt_chunks = 0, bool deltas = false);
  ~WeightShelf();  // stops and joins the cutting threads
  WeightShelf(const WeightShelf&) = delete;
  WeightShelf& operator=(const WeightShelf&) = delete;

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

  // Chunk `index` of `version`, encoded as a WeightChunk envelope: as a
  // delta against `base` when deltas are on, `base` is held (and older)
  // and the delta is small enough; raw otherwise.
  // Errc::not_found for a version not held, invalid_field for an index
  // past the end.
  Result<WireBuffer> chunk(std::uint64_t version, std::uint32_t index, std::optional<std::uint64_t> base = std::nullopt);
  // The same chunk as a frame whose raw bytes stay in the set (what the
  // bulk channel writes without copying them).
  Result<ChunkFrame> chunk_frame(std::uint64_t version, std::uint32_t index,
                                 std::optional<std::uint64_t> base = std::nullopt);

  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  // The version whose chunks the shelf's threads were last set to cut
  // ahead (done or not), none if it cuts nothing ahead.
  std::optional<std::uint64_t> cutting_ahead() const;
  bool deltas() const { return deltas_; }

  // Forgets every set (a member node whose head restarted: its versions
  // above the restarted learner's are not that learner's).
  void clear();

 private:
  const std::size_t keep_;
  const std::uint64_t chunk_bytes_;
  const bool deltas_;
  mutable std::mutex mu_;
  std::deque<Entry> entries_;            // oldest first
  // The newest version's chunks, each cut once by whichever thread asks
  // first while the others asking for it wait (call_once): raw, and as
  // deltas against each base asked for (nodes mostly hold the same one).
  struct Cut {
    explicit Cut(std::size_t n) : once(n), chunks(n) {}
    std::vector<std::once_flag> once;
    std::vector<ChunkFrame> chunks;
  };
  std::uint64_t cut_version_ = ~std::uint64_t{0};
  std::map<std::optional<std::uint64_t>, std::shared_ptr<Cut>> cuts_;  // by base (none: raw)
  // Cutting the newest version's chunks ahead of the requests, on threads
  // kept for the shelf's life (their compression contexts stay warm).
  struct CutJob {
    std::uint64_t version = 0;
    WireBuffer set;
    std::optional<DeltaBase> base;  // none: raw chunks
    std::shared_ptr<Cut> cut;
    std::uint32_t count = 0;
    std::atomic<std::uint32_t> next{0};  // the next chunk a cutter takes
    std::atomic<bool> stop{false};       // a newer version (or clear) made it moot
  };
  void cut_ahead(std::shared_ptr<CutJob> job);  // null: stop cutting
  void cut_loop();
  mutable std::mutex job_mu_;  // taken after mu_, never before; the cutters never take mu_
  std::condition_variable job_cv_;
  std::shared_ptr<CutJob> job_;
  std::uint64_t job_generation_ = 0;
  bool quit_ = false;
  std::vector<std::thread> cutters_;  // started with the first job
  std::uint32_t corrupt_left_;
  bool chunks_asked_ = false;  // under mu_: a node has fetched chunks from this shelf
};

}  // namespace rlx
