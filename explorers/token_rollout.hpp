// The explorer's compute for the token policy: draws tasks (envs/tokens),
// decodes rows for them one step at a time (a group of `group_size`
// samples per task) and turns finished rows into a segment
// (policy/token_segment.hpp). Single-turn tasks: a batch of rows in
// lockstep through the KV cache, a segment when the batch is done. Agent
// episodes (tokens:workspace): continuous batching (agent_pool.hpp), a
// free row taking the next episode at once; a segment when complete
// groups fill `rows` rows, each token with its own version. Rewards are scored in-process when the task
// kind allows (arithmetic); otherwise each row is listed in deferred()
// with its payload ("TASK\nPROGRAM") for the reward pool. Weights may be
// swapped between any two steps: each token carries the version that
// sampled it. Gateway turns (tokens:gateway): the harnesses' requests on
// continuous-batching rows (gateway_rows.hpp); a segment when the hub
// holds `rows` rows of rewarded sessions in whole groups, their rewards
// the harnesses'. CAF-free; one explorer actor owns one.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "envs/scorer.hpp"
#include "explorers/rollout.hpp"
#include "explorers/segment_source.hpp"
#include "messages/types.hpp"

namespace rlx {

struct AgentOptions;
class GatewayHub;
// The agent episodes [tokens] describes (greedy: the evaluator's).
AgentOptions agent_options(const TokensConfig& tokens, bool greedy);

struct TokenRolloutOptions {
  std::uint32_t explorer_id = 0;
  std::string kind = "arithmetic";  // envs/tokens/token_tasks.hpp
  std::int64_t rows = 16;           // B (envs_per_explorer)
  PolicyConfig policy;
  TokensConfig tokens;
  std::uint64_t seed = 1;           // the run's seed
  std::shared_ptr<const Scorer> in_process;  // scores rows here (null: deferred to the reward pool)
  int reward_retries = 2;           // in_process: a row its scorer's machinery failed is scored again this often, then masked
  std::shared_ptr<GatewayHub> gateway;  // kind "gateway": the node's hub (harness turns in, their sessions out)
};

class TokenRollout : public SegmentSource {
 public:
  explicit TokenRollout(const TokenRolloutOptions& options);
  ~TokenRollout() override;

  // One decoding step (the first of a batch draws its tasks). Returns true
  // when a segment is complete: then take_segment(). A task whose prompt
  // does not fit policy.max_len is an error (the explorer stops).
  Result<bool> step();
  Segment take_segment();
  const std::vector<Rollout::DeferredEpisode>& deferred() const { return deferred_; }

  Result<void> load_weights(const WeightSetData& weights) override;
  std::uint64_t version() const override { return version_; }
  std::uint64_t steps_in_segment() const override;
  std::uint64_t newest_in_hand() const override;
  // Agent rows: the episodes in hand (under way, or finished and waiting
  // for their group or for the segment), none of them in a segment yet.
  std::uint64_t episodes_in_hand() const;
  // Drops the batch in hand, or every agent episode in hand (new ones
  // start at the next step); returns the dropped segment's sequence.
  std::uint64_t drop_segment() override;

 private:
  Result<bool> agent_step();    // tokens:workspace: agent episodes (explorers/agent_batch.hpp)
  Result<bool> gateway_step();  // tokens:gateway: harness turns (explorers/gateway_rows.hpp)
  struct Impl;
  TokenRolloutOptions options_;
  std::unique_ptr<Impl> impl_;
  std::uint64_t version_ = 0;
  std::uint64_t sequence_ = 0;
  std::vector<Rollout::DeferredEpisode> deferred_;
};

}  // namespace rlx
