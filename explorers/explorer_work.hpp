// The explorer's compute, whichever kind it runs: the vector-observation
// Rollout with its environments stepped here (local) or in an env actor
// (the actor sends act()'s actions and hands back the reply), or the token
// policy's own decoding. It turns a step into what the explorer acts on: a
// completed segment and the episodes whose rewards the pool must score.
// An environment that throws, or answers with the wrong shape, is an
// Errc::env_failed error. CAF-free; owned by one explorer actor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "envs/batch_env.hpp"
#include "explorers/rollout.hpp"
#include "explorers/token_rollout.hpp"

namespace rlx {

struct ExplorerWorkOptions {
  RolloutOptions rollout;
  std::optional<TokenRolloutOptions> tokens;  // set: the token policy (no environments)
  BatchEnvFactory local_env;                  // set: environments stepped here; else in an env actor
  std::uint64_t env_seed = 1;                 // env i is seeded env_seed + first_env_id + i
  std::uint64_t first_env_id = 0;
};

// What one step gave.
struct WorkStep {
  std::optional<Segment> segment;                    // a segment completed
  std::vector<Rollout::DeferredEpisode> deferred;    // ended episodes whose rewards are deferred
};

class ExplorerWork {
 public:
  explicit ExplorerWork(const ExplorerWorkOptions& options);
  ~ExplorerWork();

  SegmentSource& source();
  bool tokens() const { return tokens_ != nullptr; }
  // Steps run inside the explorer (the token policy, or local envs): the
  // actor posts itself a message per step, so swaps and drains come between.
  bool steps_here() const { return tokens_ || options_.local_env; }

  // Steps here (steps_here()). start_here(): local envs are created and
  // reset (true: their first observations come back as a step, through
  // finish_step_here(false)); the token policy has nothing to start.
  Result<bool> start_here();
  // A step here, in two halves around a message to itself: local envs act
  // and step in begin_step_here(); finish_step_here() observes the result
  // (`started`: false for the reset's), or decodes one token step.
  Result<void> begin_step_here();
  Result<WorkStep> finish_step_here(bool started) { return tokens_ ? token_step() : observe(local_result_, started); }
  // Envs in an env actor: the reset to send, and the next step's request.
  EnvResetData reset_request() const;
  EnvStepData step_request();

  // A step's result (`started`: false for a reset's, which only gives the
  // first observations). Checked against the explorer's shape.
  Result<WorkStep> observe(const EnvStepResultData& result, bool started);

 private:
  Result<WorkStep> token_step();  // the token policy: one decoding step
  ExplorerWorkOptions options_;
  std::unique_ptr<Rollout> rollout_;
  std::unique_ptr<TokenRollout> tokens_;
  std::unique_ptr<BatchEnv> local_;
  EnvStepResultData local_result_;
  std::vector<float> obs_;  // current observations [B, D]
  std::uint64_t step_index_ = 0;
};

}  // namespace rlx
