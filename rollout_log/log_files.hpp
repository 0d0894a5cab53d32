// The files of a rollout log: names, listing, whole-file reads (zstd
// decompressed when needed), whole-file compression, and the framing of
// Cap'n Proto's standard stream (how long the record at a position is).
//
//   <log_dir>/rollouts/rollouts-000000.capnp      data: LogEntry messages
//   <log_dir>/rollouts/rollouts-000000.capnp.zst  the same, compressed when closed
//   <log_dir>/rollouts/rollouts-000000.idx        index: IndexEntry messages
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace rlx::logfiles {

namespace fs = std::filesystem;

struct DataFile {
  std::uint64_t number = 0;
  fs::path path;        // .capnp or .capnp.zst
  bool compressed = false;
  fs::path index_path;  // .idx (may not exist)
};

fs::path data_path(const fs::path& dir, std::uint64_t number);   // .capnp
fs::path index_path(const fs::path& dir, std::uint64_t number);  // .idx

// The rollouts directory of `where`: a log_dir holding rollouts/, or the
// rollouts directory itself.
fs::path rollouts_dir(const fs::path& where);

// Data files in `dir` by number; an error when `dir` does not exist. A
// number with both a .capnp and a .capnp.zst keeps the .zst (the .capnp is
// a leftover of an interrupted compression).
Result<std::vector<DataFile>> list(const fs::path& dir);

// The whole uncompressed content of a data file. A damaged compressed
// file yields what decompressed before the damage, and `problem` says why.
Result<std::vector<std::uint8_t>> read_all(const DataFile& f, std::string* problem);

// Compresses `path` to `path`.zst (temporary file, fsync, rename), then
// removes `path`.
Result<void> compress_file(const fs::path& path, int level);

}  // namespace rlx::logfiles
