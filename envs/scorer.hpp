// Deferred-reward scoring: a Scorer turns a finished episode's output
// (RewardRequest.payload) for a task into a reward. Reward actors own one.
#pragma once

#include <memory>
#include <string>

#include "core/error.hpp"
#include "messages/types.hpp"

namespace rlx {

class Scorer {
 public:
  virtual ~Scorer() = default;
  // Must not throw for any input: a bad output scores 0 with a reason; a
  // request it cannot judge (an unreadable task, its machinery failing)
  // is ok = false with `failure` set: no score.
  virtual RewardResultData score(const RewardRequestData& request) const = 0;
};

// A reply that is not a score: the machinery failed or the request could
// not be judged (`why`), with the reason.
RewardResultData not_scored(std::uint64_t request_id, InfraFailure why, std::string reason);

// Scores integer arithmetic answers: task "a+b", "a-b" or "a*b" (decimal
// integers), payload the answer; 1 when it equals the result, else 0.
class ArithmeticScorer : public Scorer {
 public:
  RewardResultData score(const RewardRequestData& request) const override;
};

// The scorer `kind` names ([reward] scorer): "arithmetic", "code"
// (envs/code/code_scorer.hpp) or "workspace" (envs/workspace/
// workspace_scorer.hpp); the last two need the sandbox to work here.
Result<std::shared_ptr<const Scorer>> make_scorer(const std::string& kind);

}  // namespace rlx
