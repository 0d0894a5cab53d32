// Token sequences on the wire: a decoding batch (policy/token_sampler.hpp)
// as a TrajectorySegment with TokenRows (messages/rollout.capnp), and
// segments back into one batch of rows for the learner. CAF-free.
#pragma once

#include <string>
#include <vector>

#include "messages/types.hpp"
#include "policy/token_sampler.hpp"

namespace rlx {

// `rewards` [B]: each row's reward, set on its last token (0 until the
// deferred rewards come in); `task_ids` [B].
Segment token_segment(const Generation& g, const std::vector<float>& rewards, const std::vector<std::string>& task_ids,
                      std::uint32_t group_size, std::uint32_t explorer_id, std::uint64_t sequence);

// Rows of token segments as one Generation (prompts re-padded to the
// widest), with each row's reward (from its last token) and the groups'
// size (the smallest of the segments': groups never straddle segments).
// REQUIRES: every segment has tokens.
struct TokenRowsBatch {
  Generation rows;
  std::vector<float> rewards;
  std::int64_t group_size = 1;
  std::vector<std::string> hints;  // [B]: each row's hint ("" none)
  std::vector<std::uint8_t> masked;  // [B]: 1 = the row got no outcome (the machinery failed): no loss on it
};
TokenRowsBatch token_rows(const std::vector<const Segment*>& segments, std::int64_t layers, std::int64_t top_k);

}  // namespace rlx
