// Appends entries to a rollout log: rotating data files with an index
// beside each, a checksum in every entry, each record flushed to the
// kernel as it is written (a crash loses at most a torn last record),
// and closed files optionally zstd-compressed whole. A write that fails
// (a full disk, an I/O error) is cut back to the last whole entry, so the
// log stays readable, and every later write is refused with that first
// error: what follows a failure is never half-written.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <span>

#include "core/logging.hpp"
#include "messages/log_codec.hpp"
#include "rollout_log/log_files.hpp"

namespace rlx {

struct LogWriterOptions {
  std::filesystem::path dir;                 // <log_dir>/rollouts
  std::uint64_t file_bytes = 64ull << 20;    // rotate when a file would grow past this
  bool compress = false;                     // zstd-compress files when they are closed
  int compress_level = 3;
  // Fault injection, for tests: the write that would take the log's bytes
  // past this many (counted from the writer's start) writes only up to it
  // and fails, as a disk that fills mid-entry does.
  std::uint64_t fail_after_bytes = UINT64_MAX;
};

class LogWriter {
 public:
  // Starts a new log. Refuses a directory that already holds one (a new
  // run must not mix with an old log; resume() continues one).
  static Result<std::unique_ptr<LogWriter>> create(const LogWriterOptions& options);
  // Continues the log in options.dir: a torn last record (a crash
  // mid-write) is cut off and reported in `repaired`; other damage is an
  // error. Writing goes on in a new file with the next sequence number.
  static Result<std::unique_ptr<LogWriter>> resume(const LogWriterOptions& options, std::string* repaired);

  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  Result<void> write_start(const RunStartData& x);
  Result<void> write_rollout(const RolloutRecordData& x, const WireBuffer& segment_envelope);
  Result<void> write_weights(const WeightVersionData& x);
  Result<void> write_failed_update(const FailedUpdateData& x);
  // Closes the current file (compressing it if asked). Idempotent.
  Result<void> close();

  std::uint64_t next_seq() const { return next_seq_; }
  // The first failed write's error (nothing is written after it), if any.
  const std::optional<Error>& failure() const { return failure_; }
  std::uint64_t entries_written() const { return written_; }
  std::uint64_t bytes_written() const { return bytes_; }

 private:
  explicit LogWriter(const LogWriterOptions& options) : options_(options) {}
  Result<void> open_file(std::uint64_t number);
  Result<void> append(const EncodedEntry& e, LogKind kind);
  bool write(std::FILE* f, std::span<const std::byte> bytes);  // all of it, flushed (fault injection counted)
  Result<void> fail(const std::filesystem::path& file, const std::string& what);

  LogWriterOptions options_;
  std::uint64_t next_seq_ = 0, written_ = 0, bytes_ = 0;
  std::uint64_t file_number_ = 0, file_bytes_ = 0;
  std::FILE* data_ = nullptr;
  std::FILE* index_ = nullptr;
  std::uint64_t index_bytes_ = 0;          // of the current index file
  std::uint64_t total_io_ = 0;             // every byte written, for fail_after_bytes
  std::optional<Error> failure_;
};

}  // namespace rlx
