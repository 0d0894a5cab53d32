// A decoding rule: which tokens a sequence may take next, decided by the
// sequence itself (its tokens and which of them the policy chose). The
// decoders (token_sampler.hpp, continuous_decoder.hpp) apply it before
// they sample: a blocked token's logit becomes kBlockedLogit, so the
// behaviour log-probability of every sampled token is taken under the
// distribution the token was drawn from. The learner applies the same
// rule to the same tokens (blocked_columns) before its log-softmax, so its
// log-probabilities are of the same distribution and the off-policy
// correction compares like with like (policy/rule_masks.hpp). A rule knows nothing of a model:
// envs/workspace/edit_names.hpp is one. CAF-free.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace rlx {

// A blocked token's logit: finite, so an entropy over a masked row stays a
// number (0 * -1e4 is 0; 0 * -inf is not), and far enough below any real
// logit that its probability is 0 in float.
constexpr float kBlockedLogit = -1e4F;

class TokenRule {
 public:
  // One sequence's state: fed every token in order.
  class State {
   public:
    virtual ~State() = default;
    // The next token of the sequence; `generated`: the policy chose it
    // (sampled or steered), else it is a prompt's or an observation's.
    virtual void push(std::int64_t token, bool generated) = 0;
    // Whether the rule restricts the next token; if so `blocked` [vocab]
    // holds 1 for each token it may not be (never every token).
    virtual bool blocked(std::vector<std::uint8_t>& blocked) const = 0;
  };
  virtual ~TokenRule() = default;
  virtual std::int64_t vocab() const = 0;
  virtual std::unique_ptr<State> start() const = 0;
};

}  // namespace rlx
