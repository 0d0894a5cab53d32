// Reads a rollout log in order, verifying every record: framing, limits,
// the per-record checksum and the continuity of sequence numbers. A bad
// record is named by file and byte offset; by default the read stops
// there with an error, with `skip_bad` it goes on (resynchronising at the
// next record the index knows, or at the next file).
#pragma once

#include <functional>
#include <optional>

#include "messages/log_codec.hpp"
#include "rollout_log/log_files.hpp"

namespace rlx {

struct LogPosition {
  std::string file;
  std::uint64_t offset = 0;  // in the uncompressed file
};

struct LogProblem {
  LogPosition where;
  std::string what;
  bool fatal = true;  // false: a warning (e.g. a missing index, rebuilt by scanning)
};
std::string describe(const LogProblem& p);  // "FILE at byte N: what"

struct ReadOptions {
  bool skip_bad = false;       // go on past bad records (they are still reported)
  bool with_segments = true;   // unpack segments (false: only checksums vouch for them)
  DecodeOptions decode;
};

struct ReadReport {
  std::uint64_t entries = 0;   // entries visited
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;     // uncompressed bytes read
  std::uint64_t stored_bytes = 0;  // bytes on disk (compressed where compressed)
  std::uint64_t next_seq = 0;  // the seq after the last good entry
  bool stopped = false;        // the visitor asked to stop
  std::vector<LogProblem> problems;
};

// Return false to stop reading.
using LogVisitor = std::function<bool(const LogEntryData&, const LogPosition&)>;

// Reads the log at `where` (a log_dir or its rollouts/ directory). Fails
// with the first fatal problem unless options.skip_bad.
Result<ReadReport> read_log(const std::filesystem::path& where, const ReadOptions& options, const LogVisitor& visit);

// How many records the log's indexes list: a cheap count before a long
// read (what a progress line measures against). Nothing when a data file
// has no index or the log cannot be listed.
std::optional<std::uint64_t> indexed_records(const std::filesystem::path& where);

}  // namespace rlx
