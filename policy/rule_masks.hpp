// A decoding rule (token_rule.hpp) applied: to one step's logits in the
// decoders, and to whole rows for the learner. CAF-free.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "policy/token_rule.hpp"

namespace rlx {

// The rule over rows laid out for the learner: tokens [B, W], valid and
// generated [B, W] bool (left padding is not valid). Returns [B, W, V]
// bool: at column j, the tokens the rule blocked for the token there (set
// only where generated[b][j]), or an undefined tensor when it blocked
// nothing anywhere.
torch::Tensor blocked_columns(const TokenRule& rule, const torch::Tensor& tokens, const torch::Tensor& valid,
                              const torch::Tensor& generated);

// logits [B, V] with the rule's blocked tokens set to kBlockedLogit for the
// rows whose state restricts the next token (rows with a null state are
// left as they are). Returns `logits` itself when no row is restricted,
// else a float copy.
torch::Tensor apply_rule(const torch::Tensor& logits, const std::vector<const TokenRule::State*>& states);

}  // namespace rlx
