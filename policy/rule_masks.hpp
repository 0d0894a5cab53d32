// A decoding rule (token_rule.hpp) applied: to one step's logits in the
// decoders, and to whole rows for the learner. CAF-free.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "policy/token_rule.hpp"

namespace rlx {

// The tokens a rule blocked over rows laid out for the learner, kept for
// the restricted columns alone (a few dozen an episode: a dense [B, W, V]
// mask would be 1.1 GB for 8 rows of 900 tokens with a 151 K vocabulary).
struct BlockedTokens {
  torch::Tensor at;      // [N] long: flat positions b * W + j of the restricted columns (j >= 1)
  torch::Tensor tokens;  // [N, V] bool: the tokens blocked at each
  bool empty() const { return !at.defined(); }
  BlockedTokens to(const torch::Device& device) const;
};

// The rule over rows: tokens [B, W], valid and generated [B, W] bool (left
// padding is not valid). At column j, the tokens the rule blocked for the
// token there, where generated[b][j]; empty when it blocked nothing anywhere.
BlockedTokens blocked_columns(const TokenRule& rule, const torch::Tensor& tokens, const torch::Tensor& valid,
                              const torch::Tensor& generated);

// The logits [B, W, V] that predict columns 1..W-1 (those of columns
// 0..W-2: [B, W-1, V]) with the tokens `blocked` for each of those columns
// at kBlockedLogit. Differentiable; the logits themselves (narrowed) when
// nothing is blocked.
torch::Tensor predicting(const torch::Tensor& logits, const BlockedTokens& blocked);

// logits [B, V] with the rule's blocked tokens set to kBlockedLogit for the
// rows whose state restricts the next token (rows with a null state are
// left as they are). Returns `logits` itself when no row is restricted,
// else a float copy.
torch::Tensor apply_rule(const torch::Tensor& logits, const std::vector<const TokenRule::State*>& states);

}  // namespace rlx
