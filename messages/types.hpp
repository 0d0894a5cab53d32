// Plain C++ forms of the wire messages (messages/*.capnp). Compute code
// works on these; messages/codec converts them to and from Envelopes.
// Tensors are flat row-major vectors with their dimensions alongside; a
// segment's are Columns: a decoded segment views the message's bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/choices.hpp"
#include "messages/column.hpp"

namespace rlx {

// Where the time that made a segment went (rollout.capnp SegmentWork).
struct SegmentWork {
  double decode_s = 0;     // stepping the policy, tool calls excluded
  double tool_s = 0;       // agents' tool calls in the sandbox
  double score_s = 0;      // scoring the rows (in process, or the reward workers' own time)
  std::uint64_t tool_calls = 0;  // turns ended (UInt32 on the wire, per segment)
  SegmentWork& operator+=(const SegmentWork& o) {
    decode_s += o.decode_s;
    tool_s += o.tool_s;
    score_s += o.score_s;
    tool_calls += o.tool_calls;
    return *this;
  }
};

// A token policy's rows (rollout.capnp TokenRows).
struct TokenRows {
  std::uint32_t prompt_width = 0;            // P
  std::vector<std::uint32_t> prompt_lengths; // [B]
  std::uint32_t route_width = 0;             // layers * k
  Column<std::uint8_t> routes;               // [T, B, route_width], 255 = none
  std::uint32_t group_size = 1;
  std::vector<std::string> task_ids;         // [B]
  std::vector<std::string> hints;            // [B] or empty: a failed row's hint ("" none)
  Column<std::uint8_t> observed;             // [T, B] or empty: 1 = a completion token the env wrote (context)
  Column<std::uint64_t> versions;            // [T, B] or empty: each sampled token's version (rows not in
                                             // lockstep); empty: Segment::policy_versions per column
};

// Why the machinery, not the program or the policy, failed to give an
// episode its outcome (docs/failures.md). Such an episode is asked again
// where that can help, and otherwise masked out of the update: it is
// never scored. The number travels (rollout.capnp, reward.capnp,
// control.capnp): append only.
enum class InfraFailure : std::uint8_t {
  none = 0,
  sandbox_start = 1,    // the sandbox could not be created (temp dir, pipe, fork/vfork)
  sandbox_setup = 2,    // bubblewrap or the interpreter failed before the program's first line
  overloaded = 3,       // the wall-clock limit hit while the program waited for a CPU more than it ran
  bad_request = 4,      // the scorer could not read the request (an unknown task): asking again cannot help
  no_reward_pool = 5,   // the env defers rewards and the node has no reward worker
  reward_timeout = 6,   // a reward request timed out, or its worker died or refused it
  malformed_reply = 7,  // a reward reply that did not decode, or answered another request
  env_failed = 8,       // the environment failed mid-episode (its process crashed, hung or answered garbage)
  harness_failed = 9,   // a gateway session's harness said its own machinery failed (docs/gateway.md)
};
inline constexpr std::size_t kInfraFailureCodes = 10;  // none included: the size of a count per code
const char* to_string(InfraFailure f);
// Whether asking another reward worker may give the outcome.
inline bool retryable(InfraFailure f) {
  return f != InfraFailure::none && f != InfraFailure::bad_request && f != InfraFailure::no_reward_pool &&
         f != InfraFailure::env_failed;
}

// TrajectorySegment: T steps of B environments.
struct Segment {
  std::uint32_t explorer_id = 0;
  std::uint64_t sequence = 0;
  std::uint32_t num_steps = 0;   // T
  std::uint32_t num_envs = 0;    // B
  std::uint32_t obs_dim = 0;
  Column<float> observations;                // [T, B, obs_dim]
  Column<std::int64_t> actions;              // [T, B]
  Column<float> behaviour_log_probs;         // [T, B]
  Column<float> rewards;                     // [T, B]
  Column<std::uint8_t> terminated;           // [T, B]
  Column<std::uint8_t> truncated;            // [T, B]
  std::vector<std::uint64_t> policy_versions;  // [T]
  Column<float> bootstrap_observations;      // [B, obs_dim]
  // [K, obs_dim] or empty: for each step a time limit cut (truncated, not
  // terminated; t-major, then env), the observation the episode was cut
  // in: the truncation bootstraps from its value. Empty (segments of older
  // builds): the step's own observation stands in, as it did then.
  Column<float> truncation_observations;
  std::vector<float> episode_returns;        // episodes that ended in the segment
  std::vector<std::uint32_t> episode_lengths;
  std::uint64_t created_unix_ns = 0;
  std::uint32_t lost_episodes = 0;           // episodes cut by env failures in this segment
  std::optional<TokenRows> tokens;           // a token policy's segment (obs_dim 0)
  // Infrastructure failures (InfraFailure). `masked` [T, B] or empty:
  // 1 = the step belongs to an episode whose outcome the machinery failed
  // to give: no loss of any kind is computed on it. `masked_rows`: the
  // reason of each masked episode. `infra_failures`: every failure this
  // segment's episodes met, retried ones included, counted by code
  // (kInfraFailureCodes entries, or empty for none); `reward_retries`:
  // reward requests asked again.
  Column<std::uint8_t> masked;
  std::vector<std::uint8_t> masked_rows;
  std::vector<std::uint32_t> infra_failures;
  std::uint32_t reward_retries = 0;
  // The explorer's count of segments sent, this one included (from 1; 0:
  // an older build), and the index its sending to this learner began at
  // (learner/segment_arrivals.hpp): the learner's check for vanished ones.
  std::uint64_t sent_index = 0;
  std::uint64_t sent_base = 0;
  SegmentWork work;

  // Marks the steps of env `env` from `first` to `last` (inclusive) as
  // masked, and counts one masked episode (and one failure) of `why`. A
  // token segment's row is its episode: masked whole, its return kept in
  // place (one per row) and left out of the mean by the learner.
  void mask_episode(std::uint32_t first, std::uint32_t last, std::uint32_t env, InfraFailure why);
  // Counts a failure the machinery met (the episode may still be scored).
  void count_failure(InfraFailure why, std::uint32_t n = 1);
  bool step_masked(std::size_t t, std::size_t env) const {
    return !masked.empty() && masked[t * num_envs + env] != 0;
  }

  // The version of the oldest step (what admission measures lag from).
  std::uint64_t oldest_version() const;
  // The version of the newest step.
  std::uint64_t newest_version() const;
  // Steps taken: T x B, or for a token segment the tokens sampled.
  std::uint64_t env_steps() const;
  // Steps a time limit cut (truncated and not terminated): K.
  std::size_t truncations() const;
};

enum class Verdict : std::uint8_t { trained = 0, dropped_stale = 1, rejected = 2 };
const char* to_string(Verdict v);

// One parameter's values, in fp32 or bf16 ([policy] dtype; decoded:
// a view of the set's message).
struct NamedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  Column<float> values;  // f32: the values
  WeightDType dtype = WeightDType::f32;
  Column<std::uint16_t> bf16 = {};  // bf16: each value's upper 16 bits (a binary32 cut short)
  std::size_t numel() const { return dtype == WeightDType::bf16 ? bf16.size() : values.size(); }
  const void* bytes() const {
    return dtype == WeightDType::bf16 ? static_cast<const void*>(bf16.data()) : values.data();
  }
  std::size_t byte_size() const { return numel() * (dtype == WeightDType::bf16 ? 2 : 4); }
  bool is_view() const { return dtype == WeightDType::bf16 ? bf16.is_view() : values.is_view(); }
  const std::shared_ptr<const void>& keeper() const {
    return dtype == WeightDType::bf16 ? bf16.keeper() : values.keeper();
  }
};

// WeightSet: every parameter of the policy at one version.
struct WeightSetData {
  std::uint64_t version = 0;
  std::string policy_kind;
  std::vector<NamedTensor> tensors;
  std::uint64_t checksum = 0;       // xxh64 over the tensors' bytes in order
  std::uint64_t created_unix_ns = 0;

  // Recomputes the checksum from the tensors.
  std::uint64_t compute_checksum() const;
};

struct WeightsAvailableData {
  std::uint64_t version = 0;
  std::uint64_t total_bytes = 0;
  std::uint32_t chunk_count = 1;
  std::uint64_t chunk_bytes = 0;    // every chunk but the last; 0 = one chunk
};

struct WeightRequestData {
  std::uint64_t version = 0;
  bool latest = true;
  bool chunked = false;             // ask for one chunk of the serialised set
  std::uint32_t chunk = 0;
  std::optional<std::uint64_t> base = std::nullopt;  // a version the asker holds whole: a chunk may come as a delta against it
};

// One piece of a serialised WeightSet envelope (messages/weight_chunks.hpp).
// How a weight chunk's bytes are checked (messages/weights.capnp ChunkChecksum).
enum class ChunkChecksum : std::uint8_t { xxh64 = 0, crc64 = 1 };

struct WeightChunkData {
  std::uint64_t version = 0;
  std::uint32_t index = 0;
  std::uint32_t count = 1;
  std::uint64_t total_bytes = 0;
  std::uint64_t offset = 0;
  std::vector<std::uint8_t> data;
  std::uint64_t checksum = 0;       // of data, by checksum_kind (checked by decode)
  bool delta = false;               // data is an xorDelta against version `base` (messages/weights.capnp)
  std::uint64_t base = 0;
  std::uint64_t plain_checksum = 0; // delta: of the chunk's bytes once applied
  ChunkChecksum checksum_kind = ChunkChecksum::crc64;
};

struct EnvResetData {
  std::uint64_t seed = 0;
  std::uint32_t num_envs = 0;
};

struct EnvStepData {
  std::vector<std::int64_t> actions;  // [B]
  std::uint64_t step_index = 0;
};

// The result of a reset or step of B environments.
struct EnvStepResultData {
  std::uint32_t obs_dim = 0;
  std::vector<float> observations;       // [B, obs_dim]
  std::vector<float> rewards;            // [B]
  std::vector<std::uint8_t> terminated;  // [B]
  std::vector<std::uint8_t> truncated;   // [B]
  std::uint64_t step_index = 0;
  std::vector<std::uint8_t> lost;        // [B] or empty: 1 = episode cut by an env failure (not a real end)
  std::vector<std::string> reward_payloads;  // [B] or empty: deferred-reward payloads of ended episodes
  // [B, obs_dim] or empty: for an env whose episode a time limit cut at
  // this step (truncated, not terminated), the observation it was cut in
  // (`observations` holds the next episode's first); other rows unused.
  std::vector<float> final_observations;
};

struct RewardRequestData {
  std::uint64_t request_id = 0;
  std::uint32_t explorer_id = 0;
  std::string task;
  std::string payload;
};

// The longest hint a reward result or token segment may carry.
inline constexpr std::size_t kMaxHintBytes = 1024;

struct RewardResultData {
  std::uint64_t request_id = 0;
  float score = 0;
  bool ok = true;     // false when the score means nothing (then `failure` says why)
  std::string reason;
  std::string hint;   // a failing input with its expected output ("" none)
  InfraFailure failure = InfraFailure::none;  // the machinery failed: not a score
  double seconds = 0;  // the scorer's own time on this request
};

enum class Role : std::uint8_t { learner, weight_store, explorer, env, reward, recorder, evaluator };
const char* to_string(Role r);

struct JoinData {
  Role role = Role::explorer;
  std::string node;
  std::uint32_t member_id = 0;
  std::string auth_token;
  // An explorer: its environments' ids, and when it rejoins a restarted
  // head (it outlived the head it first joined), the segments it made in
  // its life and how many of those it still holds to send.
  std::uint64_t first_env_id = 0;
  std::uint32_t num_envs = 0;
  bool rejoined = false;
  std::uint64_t produced = 0;
  std::uint64_t kept = 0;
};

struct LeaveData {
  Role role = Role::explorer;
  std::uint32_t member_id = 0;
  std::string reason;
  std::uint64_t sent = 0;  // an explorer: the segments it sent to learners in its life
};

// What one explorer's segment numbers show the learner (learner/segment_arrivals.hpp).
struct ExplorerArrivalsData {
  std::uint32_t explorer = 0;
  std::uint64_t accounted = 0;  // the highest sent index accounted for: arrived, unreadable or vanished
  std::uint64_t vanished = 0;   // indices that never arrived although later ones did
};

struct HeartbeatData {
  Role role = Role::explorer;
  std::uint32_t member_id = 0;
  std::uint64_t sent_unix_ns = 0;
};

// MetricsReport (learner -> coordinator).
struct MetricsData {
  std::uint64_t env_steps = 0;
  std::uint64_t episodes = 0;
  float mean_return = 0;
  std::uint64_t policy_version = 0;
  std::uint64_t segments_received = 0;
  std::uint64_t segments_trained = 0;
  std::uint64_t segments_dropped_stale = 0;
  std::uint64_t segments_rejected = 0;
  std::uint64_t segments_update_failed = 0;  // admitted to a batch whose update failed (not in trained)
  float lag_mean = 0;
  std::uint64_t lag_max = 0;
  std::vector<std::uint64_t> lag_histogram;
  float ratio_mean = 0;
  float ratio_max = 0;
  float truncated_fraction = 0;
  float policy_loss = 0;
  float value_loss = 0;
  float entropy = 0;
  float load_balance_loss = 0;
  std::vector<float> expert_utilisation;
  std::uint64_t updates = 0;
  float weight_swap_mean_us = 0;
  std::uint64_t episodes_lost = 0;   // episodes cut by env failures (not in the returns)
  std::vector<std::pair<std::uint32_t, std::uint64_t>> segments_by_explorer;  // explorer id -> segments received
  double busy_s = 0;                 // wall time spent on segments and updates (not waiting), cumulative
  float route_mismatch = 0;          // token policy, last update
  std::uint64_t stale_tokens = 0;    // token policy, cumulative
  float hint_kl = 0;                 // token policy, last update
  std::uint64_t hinted_rows = 0;     // token policy, cumulative
  std::uint64_t skipped_rows = 0;    // token policy, cumulative
  // Infrastructure failures in the segments received, cumulative:
  std::uint64_t reward_retries = 0;  // reward requests asked again
  std::uint64_t rows_masked = 0;     // episodes masked out (no outcome)
  std::vector<std::uint64_t> infra_failures;  // failures met, by InfraFailure code (kInfraFailureCodes entries)
  std::vector<ExplorerArrivalsData> arrivals_by_explorer;  // what each explorer's segment numbers show
  // Summed over the segments received, cumulative (tool_calls widened).
  double decode_s = 0, tool_s = 0, score_s = 0;
  std::uint64_t tool_calls = 0;
  std::uint64_t policy_tokens = 0;  // token policies: tokens sampled (env_steps less the observed ones)
  float reference_kl = 0;            // token policy, last update: KL to the run's start per trained token
  float sampler_mismatch = 0;        // token policy, last update: |log p learner - log p sampler|, same version
};

struct ScaleCommandData {
  std::int32_t explorers = -1;
  std::int32_t rewards = -1;
  std::string node;
};

// RolloutRecord: a segment's fate at the learner.
struct RolloutRecordData {
  Verdict verdict = Verdict::trained;
  std::uint64_t learner_version = 0;
  std::uint64_t admission_index = 0;
  std::uint64_t lag = 0;
  std::string reason;
};

}  // namespace rlx
