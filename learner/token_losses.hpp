// Token-level RL: group-relative advantages (GRPO), per-token admission
// under the staleness bound, the decoupled PPO loss over a token mask, and
// sequence-length-aware batching. Tensors only; CAF-free.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "learner/update_stats.hpp"

namespace rlx {

// GRPO (Shao et al., 2024): rewards [G * n] in groups of n consecutive
// samples of one task; A_i = (r_i - mean_group) / (std_group + eps), the
// std unbiased over the group's n. A group whose rewards are all equal
// teaches nothing: its advantages are 0. scale_by_std = false gives
// r_i - mean_group (Dr. GRPO's unscaled form).
torch::Tensor grpo_advantages(const torch::Tensor& rewards, std::int64_t group_size, bool scale_by_std = true,
                              double eps = 1e-6);

// GRPO over the rows a group could score: `scored` [G * n] (bool; false: a
// row masked out, the machinery gave it no outcome). Each group's mean and
// std are over its scored rows; a masked row's advantage is 0; a group
// with fewer than two scored rows is dropped (every advantage 0: one
// sample cannot be compared with its group). With every row scored it
// equals grpo_advantages.
torch::Tensor grpo_advantages_scored(const torch::Tensor& rewards, const torch::Tensor& scored, std::int64_t group_size,
                                     bool scale_by_std = true, double eps = 1e-6);

// Which generated tokens a learner at `learner_version` may train on:
// those sampled by a version at most `max_lag` behind it. Per token, not
// per sequence: an explorer that swapped weights mid-sequence has old
// and new tokens in one row. versions [B, W] int64, generated [B, W] bool.
torch::Tensor admit_tokens(const torch::Tensor& versions, const torch::Tensor& generated,
                           std::uint64_t learner_version, std::uint64_t max_lag);

// Decoupled PPO over tokens (learner/losses.hpp), averaged over the
// tokens `mask` selects ([B, W] bool; every other argument [B, W]):
//   L = -sum(mask * w * min(r A, clip(r) A)) / sum(mask)
// (`decoupled` false: plain PPO, as there.)
torch::Tensor token_ppo_loss(const torch::Tensor& new_log_probs, const torch::Tensor& prox_log_probs,
                             const torch::Tensor& behaviour_log_probs, const torch::Tensor& advantages,
                             const torch::Tensor& mask, double clip, double rho_bar, LossStats* stats = nullptr,
                             bool decoupled = true);

// KL(policy || reference) over the tokens `mask` selects, summed and
// divided by `tokens` (the batch's admitted tokens, of every microbatch):
// Schulman's k3 estimator per token, exp(d) - d - 1 with d = ref - new:
// unbiased, never negative, 0 where the two agree; each token's term
// capped at 10, so one token the reference found unthinkable cannot swamp
// a step. log-probs [B, W], mask [B, W] (any dtype: 0 or 1).
torch::Tensor token_reference_kl(const torch::Tensor& new_log_probs, const torch::Tensor& reference_log_probs,
                                 const torch::Tensor& mask, std::int64_t tokens);

// Sequence-length-aware batching: row indices sorted by length, cut into
// microbatches whose padded size (rows x longest row) stays within
// `token_budget` (a row longer than the budget goes alone). Rows of one
// microbatch have similar lengths, so little of it is padding.
std::vector<std::vector<std::int64_t>> pack_by_length(const std::vector<std::int64_t>& lengths,
                                                      std::int64_t token_budget);

}  // namespace rlx
