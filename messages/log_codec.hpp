// Entries of the rollout log (messages/log.capnp): encoding with a
// checksum per entry, and defensive decoding that verifies it. The log
// files themselves (rotation, index, compression) live in rollout_log/.
#pragma once

#include <string>

#include "messages/codec.hpp"

namespace rlx {

enum class LogKind : std::uint8_t { start = 0, rollout = 1, weights = 2, failed_update = 3 };
const char* to_string(LogKind k);

struct RunStartData {
  std::uint64_t unix_ns = 0;
  bool resumed = false;
  std::string config;  // the run's TOML, verbatim
  std::string source;  // where it came from
};

struct WeightVersionData {
  std::uint64_t version = 0;
  std::uint64_t checksum = 0;  // WeightSetData::checksum
  std::uint64_t updates = 0;
  std::uint64_t published_unix_ns = 0;
  std::uint64_t num_parameters = 0;
};

// The update on the batch just recorded failed: the last `segments`
// records of verdict trained were not trained after all.
struct FailedUpdateData {
  std::uint64_t learner_version = 0;
  std::uint32_t segments = 0;
  std::string reason;
};

struct LogEntryData {
  std::uint64_t seq = 0;
  std::uint64_t checksum = 0;
  LogKind kind = LogKind::start;
  RunStartData start;         // kind == start
  DecodedRecord rollout;      // kind == rollout (segment empty when rejected)
  WeightVersionData weights;  // kind == weights
  FailedUpdateData failed_update;  // kind == failed_update
};

struct IndexEntryData {
  std::uint64_t seq = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
  LogKind kind = LogKind::start;
};

// A framed LogEntry and the checksum written into it.
struct EncodedEntry {
  WireBuffer buf;
  std::uint64_t checksum = 0;
};

EncodedEntry encode_log_start(std::uint64_t seq, const RunStartData& x);
// The segment is copied from `segment_envelope` unless the verdict is rejected.
EncodedEntry encode_log_rollout(std::uint64_t seq, const RolloutRecordData& x, const WireBuffer& segment_envelope);
EncodedEntry encode_log_weights(std::uint64_t seq, const WeightVersionData& x);
EncodedEntry encode_log_failed_update(std::uint64_t seq, const FailedUpdateData& x);
WireBuffer encode_index_entry(const IndexEntryData& x);

// Validates framing and limits, recomputes the checksum (corrupt_record
// when it differs) and reads the entry. With `with_segment` false a
// rollout's segment is validated by the checksum but not unpacked.
Result<LogEntryData> decode_log_entry(const WireBuffer& buf, bool with_segment = true,
                                      const DecodeOptions& options = {});
Result<IndexEntryData> decode_index_entry(const WireBuffer& buf, const DecodeOptions& options = {});

}  // namespace rlx
