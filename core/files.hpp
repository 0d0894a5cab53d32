// Whole-file writes that survive a crash: a temporary file beside the
// target, fsync, rename over the target, fsync of the directory. A reader
// sees the old file or the new one, never a part.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "core/error.hpp"

namespace rlx {

// A file written in pieces, as crash-safe as write_file_atomically: its
// bytes go to PATH.tmp, commit() fsyncs it, renames it over PATH and
// fsyncs the folder; dropped uncommitted, the temporary is removed. For a
// file too large to build in memory first (a learner checkpoint).
class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> open(const std::filesystem::path& path, unsigned mode = 0644);
  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  ~AtomicFileWriter();
  Result<void> append(const void* data, std::size_t n);
  // Over bytes already written (a length known only after what follows it).
  Result<void> write_at(std::uint64_t offset, const void* data, std::size_t n);
  // Bytes already written, back (to hash them).
  Result<void> read_at(std::uint64_t offset, void* into, std::size_t n) const;
  std::uint64_t size() const { return size_; }
  Result<void> commit();

 private:
  AtomicFileWriter(std::filesystem::path path, std::filesystem::path tmp, int fd) : path_(path), tmp_(tmp), fd_(fd) {}
  Error fail(const char* what) const;
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// `mode`: the file's permissions (0600 for a secret).
Result<void> write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes,
                                   unsigned mode = 0644);

// The same, for text.
Result<void> write_text_atomically(const std::filesystem::path& path, const std::string& text, unsigned mode = 0644);

// A whole file's bytes; Errc::io with the path and the reason when it cannot be read.
Result<std::string> read_text_file(const std::filesystem::path& path);

}  // namespace rlx
