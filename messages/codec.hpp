// Encoding plain messages (messages/types.hpp) into Envelopes and decoding
// them defensively. Decoding never throws for bad input: every failure is
// an rlx::Error with a named code (truncated_message, malformed_message,
// message_too_large, message_too_deep, wrong_message_type,
// unsupported_schema, invalid_field).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include <algorithm>

#include "messages/types.hpp"
#include "messages/wire_buffer.hpp"

namespace rlx {

// Limits applied when reading a message from an untrusted peer.
struct DecodeOptions {
  std::size_t max_bytes = std::size_t{1} << 30;       // larger messages are refused unread
  std::uint64_t traversal_limit_words = 1ull << 28;   // Cap'n Proto read budget (amplification guard)
  int nesting_limit = 16;                             // our schemas nest at most 5 deep
};

// The limits for a weight set of at most `max_bytes` ([weight_store]
// max_set_mb): the read budget grows with it (a set's words are read once).
inline DecodeOptions weight_set_decoding(std::uint64_t max_bytes) {
  DecodeOptions o;
  o.max_bytes = static_cast<std::size_t>(max_bytes);
  o.traversal_limit_words = std::max<std::uint64_t>(o.traversal_limit_words, max_bytes / 8 * 2);
  return o;
}

// Which message an Envelope holds (mirrors Envelope.body).
enum class MessageKind : std::uint16_t {
  segment, weight_set, weight_chunk, weights_available, weight_request, env_reset, env_step,
  env_step_result, env_spec, reward_request, reward_result, join, leave, heartbeat, metrics,
  scale, record, unknown
};
const char* to_string(MessageKind k);

WireBuffer encode(const Segment& x, std::string_view sender);
WireBuffer encode(const WeightSetData& x, std::string_view sender);
WireBuffer encode(const WeightsAvailableData& x, std::string_view sender);
WireBuffer encode(const WeightRequestData& x, std::string_view sender);
WireBuffer encode(const WeightChunkData& x, std::string_view sender);
WireBuffer encode(const EnvResetData& x, std::string_view sender);
WireBuffer encode(const EnvStepData& x, std::string_view sender);
WireBuffer encode(const EnvStepResultData& x, std::string_view sender);
WireBuffer encode(const RewardRequestData& x, std::string_view sender);
WireBuffer encode(const RewardResultData& x, std::string_view sender);
WireBuffer encode(const JoinData& x, std::string_view sender);
WireBuffer encode(const LeaveData& x, std::string_view sender);
WireBuffer encode(const HeartbeatData& x, std::string_view sender);
WireBuffer encode(const MetricsData& x, std::string_view sender);
WireBuffer encode(const ScaleCommandData& x, std::string_view sender);

// Decodes an Envelope that must hold a T. Specialised for every type above.
template <class T>
Result<T> decode(const WireBuffer& buf, const DecodeOptions& options = {});

// What checking a WeightSet in place finds (no tensor is copied).
struct WeightSetInfo {
  std::uint64_t version = 0;
  std::uint64_t parameters = 0;
};

// Checks a WeightSet envelope as decode<WeightSetData> does (dtypes,
// shapes against data sizes, the checksum) without copying its tensors:
// what a weight store does with each set it is handed. The checksum pass
// is skipped for a buffer already checked (WireBuffer::checked) and marks
// it otherwise. decode<WeightSetData> views the tensors in the buffer.
Result<WeightSetInfo> check_weight_set(const WireBuffer& buf, const DecodeOptions& options = {});

// A weight set encoded in place: `fill(i, into, n)` writes tensor i's n
// values (its shape's product; floats, or bf16's 16 bits each when the
// layout's dtype says so) straight into the message, whose memory is
// recycled across versions (recycled_words), and the checksum is computed
// over those bytes as they are written. What a learner publishes: one copy
// from wherever its parameters live (a GPU too), no WeightSetData vectors
// between, and no second hash in this process (the buffer is marked
// checked; the weight store's check_weight_set walks its structure only).
struct WeightSetLayout {
  std::uint64_t version = 0;
  std::string policy_kind;
  std::uint64_t created_unix_ns = 0;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors;  // name, shape
  WeightDType dtype = WeightDType::f32;  // every tensor's
};
struct EncodedWeightSet {
  WireBuffer buf;
  std::uint64_t checksum = 0;
  std::uint64_t parameters = 0;
};
// The most bytes one Data blob of a weight set holds: Cap'n Proto's
// largest (2^29 - 1 bytes: 512 MiB). A 151,936 x 1,024 embedding is 622
// MB in fp32 and 311 MB in bf16; Qwen3-4B's, 778 MB in bf16.
constexpr std::uint64_t kMaxWireTensorBytes = (std::uint64_t{1} << 29) - 1;

// Writes values [first, first + n) of tensor `tensor` (row-major) into `into`.
using WeightFill = std::function<void(std::size_t tensor, void* into, std::uint64_t first, std::uint64_t n)>;

// A tensor over `max_blob` bytes travels as consecutive entries of whole
// rows of its first dimension (NamedTensor.continues; the codec's tests
// set a small max_blob) and is decoded whole, a copy: the only tensors of
// a decoded set that do not view its bytes. Throws std::length_error
// (oversized_tensor's sentence) when one row is over max_blob.
EncodedWeightSet encode_weight_set(const WeightSetLayout& layout, const WeightFill& fill, std::string_view sender,
                                   std::uint64_t max_blob = kMaxWireTensorBytes);

// The first tensor of `layout` one of whose rows (its values past the
// first dimension) is over `max_blob` bytes, as a sentence that names it,
// its bytes and what to change; empty when every tensor travels.
std::string oversized_tensor(const WeightSetLayout& layout, std::uint64_t max_blob = kMaxWireTensorBytes);

// A RolloutRecord as read from the rollout log (messages/log_codec.hpp).
struct DecodedRecord {
  RolloutRecordData record;
  Segment segment;  // empty when rejected
};

// The kind of message a buffer holds, or an error if it is not a valid Envelope.
Result<MessageKind> peek_kind(const WireBuffer& buf, const DecodeOptions& options = {});

}  // namespace rlx
